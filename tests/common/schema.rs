//! The schema set the schema tests share (Curator's `SchemaSetLoader` JSON), and the
//! operations they run against it on both sides.
#![allow(dead_code)] // each test binary uses a different part of this module

/// Curator's schema JSON for a tree under `base` (no default schema: a path no schema names
/// is refused).
pub fn schema_json(base: &str) -> String {
    format!(
        r#"[
    {{ "name": "base", "path": "{base}", "canBeDeleted": true, "documentation": "the test's root" }},
    {{ "name": "dirs", "path": "{base}/(eph|queue)", "isRegex": true, "canBeDeleted": true, "watched": "CANNOT" }},
    {{ "name": "members", "path": "{base}/eph/.*", "isRegex": true, "ephemeral": "MUST", "sequential": "CANNOT",
       "canBeDeleted": true, "metadata": {{ "owner": "tests" }} }},
    {{ "name": "queue", "path": "{base}/queue/.*", "isRegex": true, "sequential": "MUST", "canBeDeleted": true }},
    {{ "name": "config", "path": "{base}/config", "ephemeral": "CANNOT", "sequential": "CANNOT", "watched": "MUST" }}
]"#
    )
}

/// What an operation should meet: allowed (and then succeeding), refused by a schema rule (the
/// rule's words), or allowed and refused by the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    Ok,
    Violation(&'static str),
    Failed,
}

/// The operations, in order, as the Java peer's `schema_op` names them, with the path below
/// the base and what each should meet under [`schema_json`].
pub const OPERATIONS: &[(&str, &str, Expect)] = &[
    ("create_persistent", "", Expect::Ok),
    ("create_persistent", "/config", Expect::Ok),
    ("create_ephemeral", "/other", Expect::Violation("No schema found for: ")),
    ("create_persistent", "/eph", Expect::Ok),
    ("create_persistent", "/eph/a", Expect::Violation("Must be ephemeral")),
    ("create_ephemeral", "/eph/a", Expect::Ok),
    ("create_ephemeral_sequential", "/eph/b", Expect::Violation("Cannot be sequential")),
    ("create_container", "/eph/c", Expect::Violation("Must be ephemeral")),
    ("create_persistent", "/queue", Expect::Ok),
    ("create_persistent", "/queue/item-", Expect::Violation("Must be sequential")),
    ("create_persistent_sequential", "/queue/item-", Expect::Ok),
    ("get", "/config", Expect::Violation("Must be watched")),
    ("get_watched", "/config", Expect::Ok),
    ("exists", "/config", Expect::Violation("Must be watched")),
    ("exists_watched", "/config", Expect::Ok),
    ("children_watched", "/eph", Expect::Violation("Cannot be watched")),
    ("children", "/eph", Expect::Ok),
    ("set", "/config", Expect::Ok),
    ("delete", "/config", Expect::Violation("Cannot be deleted")),
    ("delete", "/eph/a", Expect::Ok),
    ("delete", "/missing", Expect::Violation("No schema found for: ")),
    ("get", "/eph/zzz", Expect::Failed),
    // A transaction looks up every operation's schema, a check's too.
    ("tx_check", "/config", Expect::Ok),
    ("tx_check", "/missing", Expect::Violation("No schema found for: ")),
    ("tx_delete", "/config", Expect::Violation("Cannot be deleted")),
];

/// Runs operation `op` at `path` on `fw`, as the Java peer's `schema_op` does.
pub async fn run_rust(fw: &zk_recipes::Framework, op: &str, path: &str) -> zk_recipes::Result<()> {
    use zk_recipes::CreateMode;
    let create = |mode: CreateMode| async move { fw.create(path).mode(mode).data(b"x").await.map(drop) };
    match op {
        "create_persistent" => create(CreateMode::Persistent).await,
        "create_ephemeral" => create(CreateMode::Ephemeral).await,
        "create_persistent_sequential" => create(CreateMode::PersistentSequential).await,
        "create_ephemeral_sequential" => create(CreateMode::EphemeralSequential).await,
        "create_container" => create(CreateMode::Container).await,
        "set" => fw.set_data(path, b"y").await.map(drop),
        "delete" => fw.delete(path).await,
        "get" => fw.get_data(path).await.map(drop),
        "get_watched" => fw.get_data(path).watch().await.map(drop),
        "exists" => fw.exists(path).await.map(drop),
        "exists_watched" => fw.exists(path).watch().await.map(drop),
        "children" => fw.get_children(path).await.map(drop),
        "children_watched" => fw.get_children(path).watch().await.map(drop),
        "tx_check" => fw.transaction().check(path).commit().await.map(drop),
        "tx_delete" => fw.transaction().delete(path).commit().await.map(drop),
        other => panic!("unknown operation {other}"),
    }
}

/// Checks a Rust outcome against what it should meet.
pub fn check_rust(op: &str, path: &str, expect: Expect, outcome: &zk_recipes::Result<()>) {
    match (expect, outcome) {
        (Expect::Ok, Ok(())) => {}
        (Expect::Violation(words), Err(zk_recipes::Error::SchemaViolation { violation, .. }))
            if violation.starts_with(words) => {}
        (Expect::Failed, Err(zk_recipes::Error::ZooKeeper(_))) => {}
        _ => panic!("{op} {path}: expected {expect:?}, got {outcome:?}"),
    }
}
