//! Transactions against real servers: all-or-nothing commits with a result per operation, the
//! failing operation's index, bad input refused before sending, and fenced writes: a guard,
//! lease or leadership term whose lock was lost cannot commit.

use crate::common;

use std::future::IntoFuture;
use std::time::Duration;

use common::fixtures::*;
use common::timing::{LIMIT, SESSION};
use zk_recipes::testing::CountingProxy;
use zk_recipes::zk::{Acl, AuthId, CreateMode, Error as ZkError, Permission};
use zk_recipes::{Error, Fence, Framework, InterProcessMutex, InterProcessSemaphore, LeaderLatch, OpResult};

#[tokio::test]
async fn a_transaction_commits_every_operation_with_its_result() {
    init_tracing();
    bounded(LIMIT, async {
        let connect = shared_connect().await;
        let ns = unique_path("tx", "ns").trim_start_matches('/').replace('/', "-");
        let fw = Framework::builder(&connect).namespace(&ns).start().await.unwrap();
        fw.create("/base/old").data(b"old").await.unwrap();
        fw.create("/base/counter").data(b"0").await.unwrap();

        let results = fw
            .transaction()
            .check("/base")
            .create("/base/new", b"new", CreateMode::Persistent)
            .create("/base/seq-", b"", CreateMode::PersistentSequential)
            .set_data("/base/counter", b"1")
            .version(0)
            .delete("/base/old")
            .version(0)
            .commit()
            .await
            .unwrap();
        assert_eq!(results.len(), 5);
        assert_eq!(results[0], OpResult::Checked);
        assert!(matches!(&results[1], OpResult::Created { path, .. } if path == "/base/new"), "{results:?}");
        assert!(matches!(&results[2], OpResult::Created { path, .. } if path.starts_with("/base/seq-") && path.len() == "/base/seq-".len() + 10), "{results:?}");
        assert!(matches!(&results[3], OpResult::DataSet { stat } if stat.version == 1), "{results:?}");
        assert_eq!(results[4], OpResult::Deleted);

        assert_eq!(fw.get_data("/base/new").await.unwrap().0, b"new");
        assert_eq!(fw.get_data("/base/counter").await.unwrap().0, b"1");
        assert!(fw.exists("/base/old").await.unwrap().is_none());
        assert!(matches!(fw.delete("/").recursive().await, Err(Error::InvalidPath { .. })));
        fw.delete("/base").recursive().await.unwrap();
        fw.close().await;
        let raw = plain_framework(&connect, SESSION).await;
        // The namespace node is a container: the server may have removed it already.
        let _ = raw.delete(&format!("/{ns}")).recursive().await;
        raw.close().await;
    })
    .await;
}

/// Commits can run in spawned tasks; watches can be awaited in them.
#[test]
fn the_futures_are_send() {
    fn send<T: Send>(_: &T) {}
    let fw = Framework::builder("127.0.0.1:2181").build().unwrap();
    let commit = fw.transaction().check("/a").commit();
    send(&commit);
    send(&fw.create("/a").protected().into_future());
    send(&fw.get_data("/a").watch().into_future());
    send(&fw.delete("/a").guaranteed().into_future());
}

#[tokio::test]
async fn a_failing_operation_applies_nothing_and_is_named() {
    init_tracing();
    bounded(LIMIT, async {
        let fw = plain_framework(&shared_connect().await, SESSION).await;
        let base = unique_path("tx", "fails");
        fw.create(&base).await.unwrap();
        fw.create(&format!("{base}/v")).data(b"0").await.unwrap();

        let failed = fw
            .transaction()
            .create(&format!("{base}/a"), b"", CreateMode::Persistent)
            .set_data(&format!("{base}/v"), b"1")
            .set_data(&format!("{base}/missing"), b"")
            .create(&format!("{base}/b"), b"", CreateMode::Persistent)
            .commit()
            .await;
        match &failed {
            Err(Error::TransactionFailed { index: 2, path, error: ZkError::NoNode }) => {
                assert_eq!(*path, format!("{base}/missing"))
            }
            other => panic!("{other:?}"),
        }
        let stale = fw.transaction().check(&format!("{base}/v")).version(7).commit().await;
        assert!(
            matches!(stale, Err(Error::TransactionFailed { index: 0, error: ZkError::BadVersion, .. })),
            "{stale:?}"
        );
        assert_eq!(children(&fw, &base).await, ["v"], "nothing applied");
        assert_eq!(fw.get_data(&format!("{base}/v")).await.unwrap().0, b"0");
        fw.delete(&base).recursive().await.unwrap();
        fw.close().await;
    })
    .await;
}

#[tokio::test]
async fn bad_transactions_are_refused_before_anything_is_sent() {
    init_tracing();
    bounded(LIMIT, async {
        let proxy = CountingProxy::start(&shared_connect().await).await.unwrap();
        let fw = plain_framework(&proxy.connect_string(), SESSION).await;
        let base = unique_path("tx", "bad");
        let before = proxy.counts();

        let empty = fw.transaction().commit().await;
        assert!(matches!(empty, Err(Error::InvalidArgument { name: "transaction", .. })), "{empty:?}");
        let node = format!("{base}/n");
        let cases = [
            fw.transaction().create_with_ttl(&node, b"", CreateMode::Ephemeral, Duration::from_secs(1)),
            fw.transaction().create_with_ttl(&node, b"", CreateMode::Persistent, Duration::ZERO),
            fw.transaction().create_with_acl(&node, b"", CreateMode::Persistent, Vec::new()),
        ];
        for tx in cases {
            let refused = tx.commit().await;
            assert!(matches!(refused, Err(Error::InvalidArgument { .. })), "{refused:?}");
        }
        // A version after a create, or before any operation: refused, named `version`.
        let misplaced = [
            fw.transaction().create(&node, b"", CreateMode::Persistent).version(0),
            fw.transaction().version(0).check("/"),
        ];
        for tx in misplaced {
            let refused = tx.commit().await;
            assert!(matches!(refused, Err(Error::InvalidArgument { name: "version", .. })), "{refused:?}");
        }
        for bad in ["", "no-slash", "/a/", "/"] {
            let refused = fw.transaction().create(&node, b"", CreateMode::Persistent).delete(bad).commit().await;
            assert!(matches!(refused, Err(Error::InvalidPath { .. })), "{bad:?}: {refused:?}");
        }
        let big = vec![0u8; 600 << 10];
        let refused = fw.transaction().create(&node, &big, CreateMode::Persistent).set_data(&node, &big).commit().await;
        assert!(matches!(refused, Err(Error::TooLarge { .. })), "{refused:?}");
        // An ACL's own bytes count (before, 40 bytes an entry were counted whatever its id).
        let huge_acl = vec![Acl::new(Permission::ALL, AuthId::new("digest", &"u".repeat(2 << 20)))];
        let refused = fw.transaction().create_with_acl(&node, b"", CreateMode::Persistent, huge_acl).commit().await;
        assert!(matches!(refused, Err(Error::TooLarge { name: "acl", .. })), "{refused:?}");

        let sent = proxy.counts().since(&before);
        assert_eq!(sent.requests() - sent.get("ping"), 0, "nothing sent: {sent:?}");
        assert!(fw.exists(&base).await.unwrap().is_none(), "nothing created");
        fw.close().await;
    })
    .await;
}

/// The multi's reply is lost: it was applied, and the commit says the outcome is unknown
/// rather than sending it again (which would fail on its own creates).
#[tokio::test]
async fn a_transaction_through_a_lost_reply_is_not_sent_again() {
    init_tracing();
    bounded(LIMIT, async {
        let proxy = CountingProxy::start(&shared_connect().await).await.unwrap();
        let fw = framework(&proxy.connect_string(), SESSION).await;
        let base = unique_path("tx", "lost");
        fw.create(&base).await.unwrap();
        let before = proxy.counts();
        proxy.lose_reply_to("multi");
        let unknown = fw.transaction().create(&format!("{base}/a"), b"", CreateMode::Persistent).commit().await;
        assert!(matches!(unknown, Err(Error::OutcomeUnknown { operation: "transaction", .. })), "{unknown:?}");
        assert_eq!(proxy.counts().since(&before).get("multi"), 1);
        assert_eq!(children(&fw, &base).await, ["a"], "applied once");
        fw.delete(&base).recursive().await.unwrap();
        fw.close().await;
    })
    .await;
}

/// Writes `value` to `target` in a transaction fenced by `fence`.
async fn fenced_write(fw: &Framework, fence: &impl Fence, target: &str, value: &[u8]) -> zk_recipes::Result<()> {
    fence.fenced_transaction(fw).set_data(target, value).commit().await.map(drop)
}

/// A mutex guard whose session expired while another client took the lock cannot commit a
/// fenced write; the new holder's guard can. A node deleted under a live session fences too.
#[tokio::test]
async fn a_lost_mutex_guard_cannot_commit_a_fenced_write() {
    init_tracing();
    bounded(LIMIT, async {
        let faulty = FaultyServer::start().await;
        let fa = framework(&faulty.proxied(), SESSION).await;
        let fb = framework(&faulty.direct(), SESSION).await;
        let path = unique_path("tx", "fenced-mutex");
        let target = format!("{path}-state");
        fb.create(&target).data(b"initial").await.unwrap();

        let guard_a = InterProcessMutex::new(&fa, &path).unwrap().acquire().await.unwrap();
        fenced_write(&fa, &guard_a, &target, b"a1").await.unwrap();
        let mutex_b = InterProcessMutex::new(&fb, &path).unwrap();
        let waiting_b = tokio::spawn(async move { mutex_b.acquire().await });
        faulty.expire(&fa, LIMIT).await;
        let guard_b = within(LIMIT, "b's acquire", waiting_b).await.unwrap().unwrap();

        let lost = fenced_write(&fa, &guard_a, &target, b"a2").await;
        assert!(matches!(&lost, Err(Error::LockLost { path }) if path == guard_a.lock_path()), "{lost:?}");
        fenced_write(&fb, &guard_b, &target, b"b1").await.unwrap();
        assert_eq!(fb.get_data(&target).await.unwrap().0, b"b1");
        // Even through the other framework: the check is on the server.
        let lost = fenced_write(&fb, &guard_a, &target, b"a3").await;
        assert!(matches!(lost, Err(Error::LockLost { .. })), "{lost:?}");

        // A node deleted behind a live session's back.
        fb.delete(guard_b.lock_path()).await.unwrap();
        let lost = fenced_write(&fb, &guard_b, &target, b"b2").await;
        assert!(matches!(lost, Err(Error::LockLost { .. })), "{lost:?}");
        assert_eq!(fb.get_data(&target).await.unwrap().0, b"b1", "no fenced write after the loss");
        drop((guard_a, guard_b));
        fa.close().await;
        fb.close().await;
    })
    .await;
}

#[tokio::test]
async fn a_lost_semaphore_lease_cannot_commit_a_fenced_write() {
    init_tracing();
    bounded(LIMIT, async {
        let faulty = FaultyServer::start().await;
        let fa = framework(&faulty.proxied(), SESSION).await;
        let fb = framework(&faulty.direct(), SESSION).await;
        let path = unique_path("tx", "fenced-lease");
        let target = format!("{path}-state");
        fb.create(&target).await.unwrap();

        let lease_a = InterProcessSemaphore::new(&fa, &path, 1).unwrap().acquire().await.unwrap();
        fenced_write(&fa, &lease_a, &target, b"a1").await.unwrap();
        let semaphore_b = InterProcessSemaphore::new(&fb, &path, 1).unwrap();
        let waiting_b = tokio::spawn(async move { semaphore_b.acquire().await });
        faulty.expire(&fa, LIMIT).await;
        let lease_b = within(LIMIT, "b's lease", waiting_b).await.unwrap().unwrap();

        let lost = fenced_write(&fa, &lease_a, &target, b"a2").await;
        assert!(matches!(&lost, Err(Error::LockLost { path }) if path == lease_a.lease_path()), "{lost:?}");
        fenced_write(&fb, &lease_b, &target, b"b1").await.unwrap();
        assert_eq!(fb.get_data(&target).await.unwrap().0, b"b1");
        drop((lease_a, lease_b));
        fa.close().await;
        fb.close().await;
    })
    .await;
}

#[tokio::test]
async fn a_lost_leadership_term_cannot_commit_a_fenced_write() {
    init_tracing();
    bounded(LIMIT, async {
        let faulty = FaultyServer::start().await;
        let fa = framework(&faulty.proxied(), SESSION).await;
        let fb = framework(&faulty.direct(), SESSION).await;
        let path = unique_path("tx", "fenced-leader");
        let target = format!("{path}-state");
        fb.create(&target).await.unwrap();

        let latch_a = LeaderLatch::new(&fa, &path, "a").unwrap();
        latch_a.start().unwrap();
        let term_a = within(LIMIT, "a leads", latch_a.await_leadership()).await.unwrap();
        fenced_write(&fa, &term_a, &target, b"a1").await.unwrap();
        let latch_b = LeaderLatch::new(&fb, &path, "b").unwrap();
        latch_b.start().unwrap();
        children_count_becomes(&fb, &path, 2, LIMIT).await;
        faulty.expire(&fa, LIMIT).await;
        let term_b = within(LIMIT, "b leads", latch_b.await_leadership()).await.unwrap();

        let lost = fenced_write(&fa, &term_a, &target, b"a2").await;
        assert!(matches!(&lost, Err(Error::LockLost { path }) if path == term_a.node_path()), "{lost:?}");
        fenced_write(&fb, &term_b, &target, b"b1").await.unwrap();
        assert_eq!(fb.get_data(&target).await.unwrap().0, b"b1");
        latch_a.close().await.unwrap();
        latch_b.close().await.unwrap();
        fa.close().await;
        fb.close().await;
    })
    .await;
}
