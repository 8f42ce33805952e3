//! An atomic value that knows its node from its own last reply writes without reading first,
//! and only while its persistent watch on the node has reported nothing since: requests per
//! increment counted by a proxy, and the cases where the knowledge must go (another session's
//! write, the node deleted and made again up to the same version, a broken connection during
//! which the node changed) each checked against what the node then holds; and an idle handle
//! whose node other sessions change keeps no queue of their changes.

use crate::common;

use std::future::IntoFuture;
use std::time::Duration;

use common::fixtures::*;
use common::timing::{COUNTING_SESSION as SESSION, LIMIT};
use zk_recipes::retry::RetryNTimes;
use zk_recipes::testing::{CountingProxy, RequestCounts};
use zk_recipes::{DistributedAtomicLong, Framework};

fn counter(fw: &Framework, path: &str) -> DistributedAtomicLong {
    DistributedAtomicLong::new(fw, path, RetryNTimes::new(10, Duration::from_millis(1))).unwrap()
}

/// The requests by kind, without pings, round trips and the server's events.
fn requests(counts: &RequestCounts) -> Vec<(&'static str, u64)> {
    counts.iter().filter(|(kind, _)| !matches!(*kind, "ping" | "round-trip" | "watch-event")).collect()
}

/// The node's value read by another session.
async fn value_of(fw: &Framework, path: &str) -> i64 {
    *counter(fw, path).get().await.unwrap().post_value()
}

/// One request and its reply on `fw`'s connection: every watch event the server queued for
/// the session before it has then been handed to its watchers.
async fn round_trip(fw: &Framework) {
    fw.exists("/").await.unwrap();
}

/// `DistributedAtomicLong`'s bytes.
fn long(value: i64) -> Vec<u8> {
    value.to_be_bytes().to_vec()
}

/// Two increments of a node initialized to 0: the handle knows 2 at version 2 (its first
/// operation adds no watch, its second adds it and reads).
async fn known_at_version_2(hits: &DistributedAtomicLong) {
    for i in 0..2 {
        assert_eq!(*hits.increment().await.unwrap().post_value(), i + 1);
    }
}

/// The node deleted and made again by `other`, holding 100 at version 2.
async fn made_again_at_version_2(other: &Framework, path: &str) {
    other.delete(path).await.unwrap();
    other.create(path).data(&long(50)).await.unwrap();
    other.set_data(path, &long(75)).await.unwrap();
    let stat = other.set_data(path, &long(100)).await.unwrap();
    assert_eq!(stat.version, 2, "the new node is at the version the handle knows");
}

#[tokio::test]
async fn increments_of_one_handle_on_a_quiet_node_are_one_write_each() {
    init_tracing();
    bounded(LIMIT, async {
        let server = shared_connect().await;
        let other = plain_framework(&server, SESSION).await;
        let proxy = CountingProxy::start(&server).await.expect("counting proxy");
        let fw = plain_framework(&proxy.connect_string(), SESSION).await;
        let path = unique_path("atomic-known", "quiet");
        assert!(counter(&other, &path).initialize(0).await.unwrap());
        let hits = counter(&fw, &path);
        let before = proxy.counts();
        const N: i64 = 50;
        for i in 0..N {
            let result = hits.increment().await.unwrap();
            assert!(result.succeeded());
            assert_eq!((*result.pre_value(), *result.post_value()), (i, i + 1));
        }
        let counts = proxy.counts().since(&before);
        // The first increment as Curator's (no watch for a handle that may change the node
        // once), then the watch once, the node read once, and one write per increment.
        let expected = [("addWatch", 1), ("getData", 2), ("setData", N as u64)];
        assert_eq!(requests(&counts), expected, "{}", counts.per_op(N as usize));
        assert_eq!(value_of(&other, &path).await, N);
        fw.close().await;
        other.close().await;
    })
    .await;
}

/// A handle made for one change costs Curator's two requests, and nothing when it drops.
#[tokio::test]
async fn a_handle_made_for_one_increment_adds_no_watch() {
    init_tracing();
    bounded(LIMIT, async {
        let server = shared_connect().await;
        let other = plain_framework(&server, SESSION).await;
        let proxy = CountingProxy::start(&server).await.expect("counting proxy");
        let fw = plain_framework(&proxy.connect_string(), SESSION).await;
        let path = unique_path("atomic-known", "one-shot-handle");
        assert!(counter(&other, &path).initialize(0).await.unwrap());
        let before = proxy.counts();
        for i in 0..5 {
            let result = counter(&fw, &path).increment().await.unwrap();
            assert_eq!((*result.pre_value(), *result.post_value()), (i, i + 1));
        }
        round_trip(&fw).await;
        let counts = proxy.counts().since(&before);
        assert_eq!(requests(&counts), [("exists", 1), ("getData", 5), ("setData", 5)], "{counts:?}");
        fw.close().await;
        other.close().await;
    })
    .await;
}

#[tokio::test]
async fn a_write_by_another_session_is_read_before_the_next_write() {
    init_tracing();
    bounded(LIMIT, async {
        let server = shared_connect().await;
        let other = plain_framework(&server, SESSION).await;
        let proxy = CountingProxy::start(&server).await.expect("counting proxy");
        let fw = plain_framework(&proxy.connect_string(), SESSION).await;
        let path = unique_path("atomic-known", "other-writer");
        assert!(counter(&other, &path).initialize(0).await.unwrap());
        let hits = counter(&fw, &path);
        known_at_version_2(&hits).await;
        counter(&other, &path).force_set(100).await.unwrap();
        round_trip(&fw).await;
        let before = proxy.counts();
        let result = hits.increment().await.unwrap();
        assert!(result.succeeded());
        assert_eq!((*result.pre_value(), *result.post_value()), (100, 101));
        let counts = proxy.counts().since(&before);
        // The watch's event dropped the knowledge: a read, then one write that succeeds (a
        // write at the old version would have been refused and sent again).
        assert_eq!(requests(&counts), [("getData", 1), ("setData", 1)], "{counts:?}");
        assert_eq!(value_of(&other, &path).await, 101);
        fw.close().await;
        other.close().await;
    })
    .await;
}

/// The node deleted and made again up to the version the handle knows: a versioned write
/// would succeed on it, so only the watch can show that the bytes are not the ones known.
#[tokio::test]
async fn a_node_made_again_up_to_the_known_version_is_read_not_written_over() {
    init_tracing();
    bounded(LIMIT, async {
        let server = shared_connect().await;
        let other = plain_framework(&server, SESSION).await;
        let fw = plain_framework(&server, SESSION).await;
        let path = unique_path("atomic-known", "made-again");
        assert!(counter(&other, &path).initialize(0).await.unwrap());
        let hits = counter(&fw, &path);
        known_at_version_2(&hits).await;
        made_again_at_version_2(&other, &path).await;
        round_trip(&fw).await;
        let result = hits.increment().await.unwrap();
        assert!(result.succeeded());
        assert_eq!((*result.pre_value(), *result.post_value()), (100, 101));
        assert_eq!(value_of(&other, &path).await, 101);
        fw.close().await;
        other.close().await;
    })
    .await;
}

/// The connection breaks (same session), and the node is made again up to the known
/// version meanwhile: the events are lost with the connection, so the knowledge must go with
/// it, and the watch be added again.
#[tokio::test]
async fn a_change_while_the_connection_was_down_is_read_after_it() {
    init_tracing();
    bounded(LIMIT, async {
        let faulty = FaultyServer::start().await;
        let other = plain_framework(&faulty.direct(), SESSION).await;
        let fw = framework(&faulty.proxied(), SESSION).await;
        let path = unique_path("atomic-known", "reconnect");
        assert!(counter(&other, &path).initialize(0).await.unwrap());
        let hits = counter(&fw, &path);
        known_at_version_2(&hits).await;
        let epoch = fw.snapshot().epoch;

        faulty.proxy.refuse_new(true);
        faulty.proxy.drop_connections();
        wait_for_state(&fw, LIMIT, "disconnected", |s| !s.state.is_connected()).await;
        made_again_at_version_2(&other, &path).await;
        faulty.proxy.refuse_new(false);
        let back = wait_connected(&fw, LIMIT, epoch).await;
        assert_eq!(back.epoch, epoch, "the same session came back");

        let result = hits.increment().await.unwrap();
        assert!(result.succeeded());
        assert_eq!((*result.pre_value(), *result.post_value()), (100, 101));
        // The watch is back: another session's change is seen again.
        counter(&other, &path).force_set(7).await.unwrap();
        round_trip(&fw).await;
        let result = hits.increment().await.unwrap();
        assert_eq!((*result.pre_value(), *result.post_value()), (7, 8));
        assert_eq!(value_of(&other, &path).await, 8);
        fw.close().await;
        other.close().await;
    })
    .await;
}

/// A handle that knows its node (it holds the node's watch) and then stays idle while another
/// session changes the node 40,000 times keeps no queue of those changes: its process grows
/// by far less than the events would take (about 125 bytes each, 5 MB), and its next
/// increment counts from the current value. Run alone in a child process (its memory is the
/// process's).
#[tokio::test]
async fn an_idle_handle_keeps_no_queue_of_other_sessions_changes() {
    let connect = shared_connect().await;
    let name = "values::atomic_knowledge::an_idle_handle_keeps_no_queue_of_other_sessions_changes_alone";
    run_alone_with(name, &[("ZKR_TEST_CONNECT", connect.as_str())]).await;
}

#[tokio::test]
#[ignore = "the body of `an_idle_handle_keeps_no_queue_of_other_sessions_changes`, run alone in a child process"]
async fn an_idle_handle_keeps_no_queue_of_other_sessions_changes_alone() {
    init_tracing();
    bounded(LIMIT, async {
        let server = shared_connect().await;
        let other = plain_framework(&server, SESSION).await;
        let fw = plain_framework(&server, SESSION).await;
        let path = unique_path("atomic-known", "idle");
        assert!(counter(&other, &path).initialize(0).await.unwrap());
        let hits = counter(&fw, &path);
        known_at_version_2(&hits).await;
        let write = long(7);
        let mut sizes = Vec::new();
        for _ in 0..9 {
            let writes: Vec<_> = (0..5_000).map(|_| other.set_data(&path, &write).into_future()).collect();
            for written in futures::future::join_all(writes).await {
                written.unwrap();
            }
            sizes.push(rss_kib().expect("the process's RSS"));
        }
        // From the first batch on (allocator and buffers warmed), 40,000 more changes.
        let grew = sizes[8].saturating_sub(sizes[0]);
        assert!(grew < 2_048, "the idle handle's process grew {grew} KiB over 40,000 changes: {sizes:?}");
        assert_eq!(*hits.increment().await.unwrap().post_value(), 8);
        other.close().await;
        fw.close().await;
    })
    .await;
}
