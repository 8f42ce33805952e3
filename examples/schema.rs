//! Schema sets: rules for what may be done where, checked before any request is sent, loaded
//! from the JSON format of Curator's `SchemaSetLoader`.
//!
//! `cargo run --features testing,schema --example schema [-- --connect host:port]` (without
//! `--connect` it starts an embedded ZooKeeper server).

use std::time::Duration;

use zk_recipes::schema::SchemaSet;
use zk_recipes::{CreateMode, Framework};

mod common;
use common::{server_or_connect, Error};

/// The same file a Curator service would load with
/// `new SchemaSetLoader(json, null).toSchemaSet(true)`.
const SCHEMAS: &str = r#"[
    {
        "name": "members",
        "path": "/examples/schema/members/.*",
        "isRegex": true,
        "documentation": "one ephemeral node per live process",
        "ephemeral": "MUST",
        "sequential": "CANNOT",
        "canBeDeleted": true
    },
    {
        "name": "config",
        "path": "/examples/schema/config",
        "documentation": "read with a watch, never deleted",
        "ephemeral": "CANNOT",
        "watched": "MUST",
        "canBeDeleted": false
    }
]"#;

#[tokio::main]
async fn main() -> Result<(), Error> {
    let (_server, connect) = server_or_connect().await?;
    // `true`: paths no schema names are free (Curator's default schema).
    let schemas = SchemaSet::from_json(SCHEMAS, true)?;
    print!("{}", schemas.to_documentation());
    let framework =
        Framework::builder(&connect).session_timeout(Duration::from_secs(10)).schema_set(schemas).start().await?;

    framework.create("/examples/schema/config").data(b"v1").or_set().await?;
    framework.ensure_path("/examples/schema/members").await?;
    framework.create("/examples/schema/members/me").mode(CreateMode::Ephemeral).idempotent().await?;
    println!("created the config node and an ephemeral member");

    // Each of these breaks a rule: refused before anything is sent, naming the schema and rule.
    let refused = [
        framework.create("/examples/schema/members/forever").await.map(drop),
        framework.get_data("/examples/schema/config").await.map(drop),
        framework.delete("/examples/schema/config").await,
    ];
    for outcome in refused {
        match outcome {
            Err(e @ zk_recipes::Error::SchemaViolation { .. }) => println!("refused: {e}"),
            other => return Err(format!("expected a schema violation, got {other:?}").into()),
        }
    }

    // The allowed form of the read: with a watch.
    let (data, _stat, _watch) = framework.get_data("/examples/schema/config").watch().await?;
    println!("config = {}", String::from_utf8_lossy(&data));
    framework.delete("/examples/schema/members/me").await?;
    framework.close().await;
    Ok(())
}
