//! Self-test of the Curator interop harness (`tests/common/curator.rs` driving
//! `interop/CuratorPeer.java`): real Apache Curator recipes against a real ZooKeeper server,
//! with no zk-recipes lock code involved. If these fail, interop failures elsewhere say nothing
//! about our recipes.
//!
//! Skipped (with a message) when java/javac/Curator are missing, unless `ZKR_REQUIRE_CURATOR=1`.

use crate::common;

use std::future::Future;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::curator::CuratorPeer;
use common::fixtures::shared_connect as connect_string;
use common::timing::{INTEROP_EVENT as EVENT, INTEROP_SESSION as SESSION};

/// Upper bound for each whole test.
const TEST_LIMIT: Duration = Duration::from_secs(120);

/// A Java peer connected to the shared test server, or `None` when Curator is unavailable.
async fn peer() -> Option<CuratorPeer> {
    CuratorPeer::started(&connect_string().await, SESSION).await
}

/// A lock path no other test (or earlier run) uses.
fn unique_path(name: &str) -> String {
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    format!("/curator-harness/{name}-{}-{nanos}", std::process::id())
}

async fn bounded(test: impl Future<Output = ()>) {
    tokio::time::timeout(TEST_LIMIT, test).await.expect("test exceeded its time limit");
}

/// Polls `participants ID` until it lists `n` nodes (a sent acquire creates its node shortly).
async fn participants_eventually(peer: &mut CuratorPeer, id: &str, n: usize) -> Vec<String> {
    peer.participants_become(id, n, EVENT).await.unwrap()
}

#[tokio::test]
async fn java_mutexes_exclude_each_other() {
    bounded(async {
        let Some(mut java) = peer().await else { return };
        let path = unique_path("mutex");
        assert_eq!(java.command(&format!("mutex A {path}")).await.unwrap(), "ok");
        assert_eq!(java.command(&format!("mutex B {path}")).await.unwrap(), "ok");

        assert_eq!(java.command("acquire A").await.unwrap(), "acquired A");
        assert_eq!(java.command("acquire B 500").await.unwrap(), "timeout B");
        assert_eq!(java.command("is_acquired B").await.unwrap(), "is_acquired B false");

        // B waits; both nodes are listed in lock order, A's first.
        java.send("acquire B").await.unwrap();
        let nodes = participants_eventually(&mut java, "A", 2).await;
        for node in &nodes {
            assert!(
                node.starts_with(&format!("{path}/_c_")) && node.contains("-lock-"),
                "Curator mutex node name: {node}"
            );
        }
        assert_eq!(java.lock_paths("A").await.unwrap(), vec![nodes[0].clone()]);
        assert_eq!(java.participants("B").await.unwrap(), nodes);

        assert_eq!(java.command("release A").await.unwrap(), "released A");
        assert_eq!(java.wait_for("acquired B", EVENT).await.unwrap(), "acquired B");
        assert_eq!(java.lock_paths("B").await.unwrap(), vec![nodes[1].clone()]);
        assert_eq!(java.lock_paths("A").await.unwrap(), Vec::<String>::new());

        let reply = java.command("release A").await.unwrap();
        assert!(reply.starts_with("error A "), "releasing an unheld mutex: {reply}");
        assert_eq!(java.command("release B").await.unwrap(), "released B");
        java.quit().await.unwrap();
    })
    .await;
}

#[tokio::test]
async fn java_semaphore_grants_max_leases() {
    bounded(async {
        let Some(mut java) = peer().await else { return };
        let path = unique_path("semaphore");
        for id in ["S1", "S2", "S3"] {
            let reply = java.command(&format!("semaphore {id} {path} 2")).await.unwrap();
            assert_eq!(reply, "ok");
        }
        assert_eq!(java.participants("S1").await.unwrap(), Vec::<String>::new());
        assert_eq!(java.command("acquire S1").await.unwrap(), "acquired S1");
        assert_eq!(java.command("acquire S2").await.unwrap(), "acquired S2");
        assert_eq!(java.command("acquire S3 500").await.unwrap(), "timeout S3");

        let leases = java.participants("S1").await.unwrap();
        assert_eq!(leases.len(), 2, "{leases:?}");
        assert!(leases.iter().all(|l| l.starts_with("_c_") && l.contains("-lease-")), "{leases:?}");
        let held = java.lock_paths("S1").await.unwrap();
        assert_eq!(held.len(), 1);
        assert!(held[0].starts_with(&format!("{path}/leases/_c_")), "{held:?}");

        // Freeing one lease lets the third through; two leases at once need both free.
        assert_eq!(java.command("release S1").await.unwrap(), "released S1");
        assert_eq!(java.command("acquire S3 10000").await.unwrap(), "acquired S3");
        assert_eq!(java.command("acquire_many S1 2 300").await.unwrap(), "timeout S1");
        assert_eq!(java.command("release S2").await.unwrap(), "released S2");
        assert_eq!(java.command("release S3").await.unwrap(), "released S3");
        assert_eq!(java.command("acquire_many S1 2 10000").await.unwrap(), "acquired S1");
        assert_eq!(java.lock_paths("S1").await.unwrap().len(), 2);
        assert_eq!(java.command("release S1").await.unwrap(), "released S1");
        java.quit().await.unwrap();
    })
    .await;
}

#[tokio::test]
async fn java_loops_alternate_in_the_log() {
    bounded(async {
        // Two JVMs, two sessions, one lock: the log must show whole enter/exit pairs.
        let Some(mut first) = peer().await else { return };
        let Some(mut second) = peer().await else { return };
        let path = unique_path("loop");
        let log = std::env::temp_dir().join(format!(
            "zkr-curator-harness-{}-{}.log",
            std::process::id(),
            SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos())
        ));
        let log_arg = log.display().to_string();
        const CYCLES: usize = 25;

        assert_eq!(first.command(&format!("mutex L1 {path}")).await.unwrap(), "ok");
        assert_eq!(second.command(&format!("mutex L2 {path}")).await.unwrap(), "ok");
        let start = format!("loop L1 {CYCLES} {log_arg} 2");
        assert_eq!(first.command(&start).await.unwrap(), "loop-started L1");
        let start = format!("loop L2 {CYCLES} {log_arg} 2");
        assert_eq!(second.command(&start).await.unwrap(), "loop-started L2");
        let done = format!("loop-done L1 {CYCLES}");
        assert_eq!(first.wait_for("loop-done L1", EVENT).await.unwrap(), done);
        let done = format!("loop-done L2 {CYCLES}");
        assert_eq!(second.wait_for("loop-done L2", EVENT).await.unwrap(), done);

        let text = std::fs::read_to_string(&log).unwrap();
        let _ = std::fs::remove_file(&log);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 4 * CYCLES, "{text}");
        for pair in lines.chunks(2) {
            let who = pair[0]
                .strip_prefix("enter ")
                .and_then(|rest| rest.split_whitespace().next())
                .unwrap_or_else(|| panic!("expected an enter line, got {pair:?}"));
            assert_eq!(pair[1], format!("exit {who}"), "overlapping holders: {pair:?}");
        }
        for who in ["java:L1", "java:L2"] {
            let entries = lines.iter().filter(|l| l.starts_with(&format!("enter {who} "))).count();
            assert_eq!(entries, CYCLES, "{who}");
        }
        first.quit().await.unwrap();
        second.quit().await.unwrap();
    })
    .await;
}

#[tokio::test]
async fn java_revocation_reaches_the_holder() {
    bounded(async {
        let Some(mut java) = peer().await else { return };
        let path = unique_path("revoke");
        assert_eq!(java.command(&format!("mutex R {path}")).await.unwrap(), "ok");
        assert_eq!(java.command("revocable R").await.unwrap(), "ok");
        assert_eq!(java.command("acquire R").await.unwrap(), "acquired R");
        let node = java.lock_paths("R").await.unwrap().remove(0);
        assert_eq!(java.command(&format!("revoke {node}")).await.unwrap(), "ok");
        let event = java.wait_for("revoke-requested R", EVENT).await.unwrap();
        assert_eq!(event, "revoke-requested R");
        assert_eq!(java.command("release R").await.unwrap(), "released R");
        java.quit().await.unwrap();
    })
    .await;
}

#[tokio::test]
async fn java_read_write_lock_and_semaphore_mutex() {
    bounded(async {
        let Some(mut java) = peer().await else { return };
        let path = unique_path("rw");
        assert_eq!(java.command(&format!("rwlock W {path}")).await.unwrap(), "ok");
        assert_eq!(java.command(&format!("rwlock V {path}")).await.unwrap(), "ok");
        assert_eq!(java.command("acquire W.write").await.unwrap(), "acquired W.write");
        assert_eq!(java.command("acquire V.read 500").await.unwrap(), "timeout V.read");
        let writers = java.participants("W.write").await.unwrap();
        assert_eq!(writers.len(), 1);
        assert!(writers[0].contains("__WRIT__"), "{writers:?}");
        assert_eq!(java.command("release W.write").await.unwrap(), "released W.write");
        assert_eq!(java.command("acquire V.read 10000").await.unwrap(), "acquired V.read");
        assert_eq!(java.command("acquire W.read 10000").await.unwrap(), "acquired W.read");
        assert_eq!(java.participants("V.read").await.unwrap().len(), 2);
        assert_eq!(java.command("release V.read").await.unwrap(), "released V.read");
        assert_eq!(java.command("release W.read").await.unwrap(), "released W.read");

        let path = unique_path("semmutex");
        assert_eq!(java.command(&format!("semmutex M {path}")).await.unwrap(), "ok");
        assert_eq!(java.command(&format!("semmutex N {path}")).await.unwrap(), "ok");
        assert_eq!(java.command("acquire M").await.unwrap(), "acquired M");
        assert_eq!(java.command("acquire N 500").await.unwrap(), "timeout N");
        assert_eq!(java.participants("N").await.unwrap().len(), 1);
        assert_eq!(java.command("release M").await.unwrap(), "released M");
        assert_eq!(java.command("acquire N 10000").await.unwrap(), "acquired N");
        assert_eq!(java.command("release N").await.unwrap(), "released N");
        assert_eq!(java.command("state").await.unwrap(), "state true");
        java.quit().await.unwrap();
    })
    .await;
}
