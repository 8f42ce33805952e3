//! Migrations: versioned sets of operations that every process may run at start-up; each
//! migration is applied once, whoever runs it first (curator-x-async's `MigrationManager`).
//!
//! `cargo run --features testing --example migrations [-- --connect host:port]` (without
//! `--connect` it starts an embedded ZooKeeper server).

use std::time::Duration;

use zk_recipes::migrations::{Migration, MigrationManager, MigrationSet};
use zk_recipes::{CreateMode, Framework};

mod common;
use common::{server_or_connect, Error};

#[tokio::main]
async fn main() -> Result<(), Error> {
    let (_server, connect) = server_or_connect().await?;
    let framework = Framework::builder(&connect).session_timeout(Duration::from_secs(10)).start().await?;
    // A fresh tree for this run (an earlier run recorded its migrations under the same id).
    let root = "/examples/migrations";
    if framework.exists(root).await?.is_some() {
        framework.delete(root).recursive().await?;
    }
    let manager = MigrationManager::new(
        &framework,
        "/examples/migrations/locks",
        "/examples/migrations/meta",
        Duration::from_secs(20),
    )?;

    // Version 1 of the application's tree.
    let v1 = Migration::new().create("/examples/migrations/app", b"", CreateMode::Persistent).create(
        "/examples/migrations/app/config",
        b"{\"workers\": 2}",
        CreateMode::Persistent,
    );
    let set = MigrationSet::new("app", vec![v1.clone()])?;
    println!("first run: applied {} migration(s)", manager.migrate(&set).await?);
    println!("second run: applied {} migration(s)", manager.migrate(&set).await?);

    // Version 2 appends a migration: only that one runs.
    let v2 = Migration::new().set_data("/examples/migrations/app/config", b"{\"workers\": 4}", 0);
    let set = MigrationSet::new("app", vec![v1, v2.clone()])?;
    println!("after an upgrade: applied {} migration(s)", manager.migrate(&set).await?);
    let (config, _) = framework.get_data("/examples/migrations/app/config").await?;
    println!("config = {}", String::from_utf8_lossy(&config));

    // Changing an applied migration under the same id is refused.
    let other_v1 = Migration::new().create("/examples/migrations/other", b"", CreateMode::Persistent);
    let rewritten = MigrationSet::new("app", vec![other_v1, v2])?;
    match manager.migrate(&rewritten).await {
        Err(e) => println!("refused: {e}"),
        Ok(n) => return Err(format!("a rewritten set applied {n} migration(s)").into()),
    }
    framework.close().await;
    Ok(())
}
