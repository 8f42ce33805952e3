//! Schema sets against Curator 5.4's `SchemaSetLoader` (the Java peer): the same JSON accepts
//! and refuses the same operations, with the same rule named.

use crate::common;

use std::sync::atomic::{AtomicU64, Ordering};

use common::curator::CuratorPeer;
use common::fixtures::{bounded, init_tracing, shared_connect, unique_path};
use common::schema::{check_rust, run_rust, schema_json, Expect, OPERATIONS};
use common::timing::{INTEROP_SESSION, SLOW_LIMIT};
use zk_recipes::schema::SchemaSet;
use zk_recipes::Framework;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn curator_and_rust_accept_and_refuse_the_same_operations_under_one_schema_json() {
    init_tracing();
    bounded(SLOW_LIMIT, async {
        let connect = shared_connect().await;
        let Some(mut java) = CuratorPeer::start(&connect, INTEROP_SESSION).await.expect("the Curator peer") else {
            return;
        };
        // Each side its own tree, each from the same JSON text (with its own base).
        let java_base = unique_path("schema-interop", "java");
        let rust_base = unique_path("schema-interop", "rust");
        static N: AtomicU64 = AtomicU64::new(0);
        let file = std::env::temp_dir().join(format!(
            "zkr-schema-{}-{}.json",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::write(&file, schema_json(&java_base)).unwrap();
        let reply = java.command(&format!("schema S {} false", file.display())).await.unwrap();
        assert_eq!(reply, "schema S ok");
        let set = SchemaSet::from_json(&schema_json(&rust_base), false).unwrap();
        let fw = Framework::builder(&connect).session_timeout(INTEROP_SESSION).schema_set(set).start().await.unwrap();

        for (op, below, expect) in OPERATIONS {
            let java_path = format!("{java_base}{below}");
            let reply = java.command(&format!("schema_op S {op} {java_path} x")).await.unwrap();
            let rust_path = format!("{rust_base}{below}");
            let outcome = run_rust(&fw, op, &rust_path).await;
            check_rust(op, &rust_path, *expect, &outcome);
            let java_outcome = reply.strip_prefix("schema_op S ").unwrap_or(&reply);
            match expect {
                Expect::Ok => assert_eq!(java_outcome, "ok", "{op} {java_path}"),
                Expect::Failed => assert!(java_outcome.starts_with("failed "), "{op} {java_path}: {reply}"),
                Expect::Violation(words) => {
                    assert!(java_outcome.starts_with("violation "), "{op} {java_path}: {reply}");
                    let Err(zk_recipes::Error::SchemaViolation { violation, .. }) = &outcome else { unreachable!() };
                    // Curator's message starts with the rule (the path differs: each side has its own base).
                    let rust_rule = violation.replace(&rust_base, &java_base);
                    assert!(java_outcome.contains(&rust_rule), "{op}: Curator says {reply}, we say {violation}");
                    assert!(java_outcome.contains(words));
                }
            }
        }

        assert_eq!(java.command("schema_close S").await.unwrap(), "schema_close S ok");
        fw.close().await;
        let plain = Framework::connect(&connect).await.unwrap();
        for base in [&java_base, &rust_base] {
            plain.delete(base).recursive().await.unwrap();
        }
        plain.close().await;
        let _ = std::fs::remove_file(&file);
        java.quit().await.unwrap();
    })
    .await;
}
