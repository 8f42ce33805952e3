//! Schema sets (feature `schema`): every operation checked before it is sent.

use crate::common;

use std::future::IntoFuture;

use common::fixtures::{bounded, init_tracing, shared_connect, unique_path, within};
use common::schema::{check_rust, run_rust, schema_json, OPERATIONS};
use common::timing::{EVENT, LIMIT, SESSION};
use zk_recipes::schema::{Allowance, SchemaSet};
use zk_recipes::testing::{FaultProxy, ProxyMode};
use zk_recipes::{CreateMode, Error, Framework};

#[tokio::test]
async fn every_operation_is_checked_against_curators_schema_json() {
    bounded(LIMIT, async {
        init_tracing();
        let connect = shared_connect().await;
        let base = unique_path("schema", "ops");
        let set = SchemaSet::from_json(&schema_json(&base), false).unwrap();
        assert_eq!(set.named("members").unwrap().ephemeral(), Allowance::Must);
        assert!(!set.named("config").unwrap().can_be_deleted(), "Curator's loader defaults canBeDeleted to false");
        let fw = Framework::builder(&connect).session_timeout(SESSION).schema_set(set).start().await.unwrap();
        assert!(fw.schema_set().is_some());
        for (op, below, expect) in OPERATIONS {
            let path = format!("{base}{below}");
            let outcome = run_rust(&fw, op, &path).await;
            check_rust(op, &path, *expect, &outcome);
        }

        // Transactions: each operation is checked; a broken rule sends nothing.
        let commit = fw
            .transaction()
            .create(&format!("{base}/queue/t-"), b"", CreateMode::PersistentSequential)
            .delete(&format!("{base}/config"))
            .commit()
            .await;
        match commit {
            Err(Error::SchemaViolation { schema, violation, .. }) => {
                assert_eq!(schema.as_deref(), Some("config"));
                assert_eq!(violation, "Cannot be deleted");
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(fw.get_children(&format!("{base}/queue")).await.unwrap().len(), 1, "nothing of it was sent");

        // Namespaced: the schema sees the paths the operations are given.
        let ns = fw.using_namespace(Some(&base)).unwrap();
        assert!(matches!(ns.delete("/config").await, Err(Error::SchemaViolation { .. })), "no schema for /config");

        let plain = Framework::connect(&connect).await.unwrap();
        plain.delete(&base).recursive().await.unwrap();
        plain.close().await;
        fw.close().await;
    })
    .await;
}

#[tokio::test]
async fn a_violation_is_refused_before_any_request_is_sent() {
    bounded(LIMIT, async {
        init_tracing();
        let connect = shared_connect().await;
        let proxy = FaultProxy::start(&connect).await.unwrap();
        let base = unique_path("schema", "offline");
        let set = SchemaSet::from_json(&schema_json(&base), false).unwrap();
        let fw = Framework::builder(&proxy.connect_string()).session_timeout(SESSION).schema_set(set).start().await.unwrap();
        // No answer from the network: an operation that were sent would wait; a violation is
        // answered at once.
        proxy.set_mode(ProxyMode::BlackHole);
        let refused = within(EVENT, "a refused create", fw.create(&format!("{base}/eph/x")).data(b"x").into_future()).await;
        assert!(
            matches!(&refused, Err(Error::SchemaViolation { schema: Some(s), violation, .. }) if s == "members" && violation == "Must be ephemeral"),
            "{refused:?}"
        );
        let refused = within(EVENT, "a refused read", fw.get_data(&format!("{base}/config")).into_future()).await;
        assert!(matches!(refused, Err(Error::SchemaViolation { .. })), "{refused:?}");
        let unknown = within(EVENT, "a path without schema", fw.delete("/elsewhere").into_future()).await;
        assert!(matches!(unknown, Err(Error::SchemaViolation { schema: None, .. })), "{unknown:?}");
        // A transaction's check is looked up too (Curator's transaction looks up every op).
        let checked = within(EVENT, "a refused check", fw.transaction().check("/elsewhere").commit()).await;
        assert!(matches!(checked, Err(Error::SchemaViolation { schema: None, .. })), "{checked:?}");
        proxy.set_mode(ProxyMode::Pass);
        fw.close().await;
    })
    .await;
}
