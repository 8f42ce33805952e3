//! Revocation against a real ZooKeeper server: Curator's `TestInterProcessMutex.testRevoking`,
//! and the cases Curator has no test for: read, write and waiting holders, other data ignored,
//! repeated requests, missing nodes, empty node data, non-revocable holders, re-acquires, the
//! end of the watch, namespaces, multi-locks and bad input.
//!
//! Interop with Curator's `Revoker` and `makeRevocable` is in `tests/interop/read_write_lock.rs`.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use common::fixtures::shared_framework as fw;
use common::fixtures::{
    bounded, children_count_becomes, classic_framework, init_tracing, shared_connect, unique_path, within,
};
use common::timing::{EVENT, LIMIT, QUIET, SESSION};
use zk_recipes::{
    Error, Framework, InterProcessMutex, InterProcessReadWriteLock, InterProcessSemaphore, Lockable, MultiLock, Revoker,
};

const REVOKE: &[u8] = b"__REVOKE__";

fn path(name: &str) -> String {
    unique_path("revoke", name)
}

/// Awaits `fut` and checks that it has not completed within [`QUIET`].
async fn stays_pending<T>(what: &str, fut: impl std::future::Future<Output = T>) {
    if tokio::time::timeout(QUIET, fut).await.is_ok() {
        panic!("{what} completed");
    }
}

/// testRevoking: a revocable holder; another task finds exactly one participant and revokes
/// it; the holder hears the request and releases; a new contender acquires within 5 s.
#[tokio::test]
async fn revoking_a_mutex_holder() {
    bounded(LIMIT, async {
        let fw = fw().await;
        let path = path("mutex");
        let mutex = InterProcessMutex::new(&fw, &path).unwrap();
        let (held_tx, held) = tokio::sync::oneshot::channel();
        let holder = {
            let mutex = mutex.clone();
            tokio::spawn(async move {
                let guard = mutex.revocable().acquire().await.unwrap();
                held_tx.send(()).unwrap();
                assert!(guard.revocation_requested().await, "the request arrives");
                assert!(guard.is_held(), "revocation is cooperative: still held");
                guard.release().await.unwrap();
            })
        };
        held.await.unwrap();
        let participants = mutex.participant_nodes().await.unwrap();
        assert_eq!(participants.len(), 1);
        Revoker::attempt_revoke(&fw, &participants[0]).await.unwrap();
        within(EVENT, "the holder releasing on request", holder).await.unwrap();
        let next = InterProcessMutex::new(&fw, &path).unwrap();
        within(Duration::from_secs(5), "a new acquire", next.acquire()).await.unwrap().release().await.unwrap();
        fw.close().await;
    })
    .await;
}

/// Read and write holders of the read-write lock are revocable independently, each with its
/// own requests.
#[tokio::test]
async fn revoking_read_and_write_holders() {
    bounded(LIMIT, async {
        let (fw, other) = (fw().await, fw().await);
        let lock = InterProcessReadWriteLock::new(&fw, &path("rw")).unwrap();
        let write = lock.write_lock().revocable().acquire().await.unwrap();
        // The same task downgrades revocably: two revocable nodes, one request each.
        let read = lock.read_lock().revocable().acquire().await.unwrap();
        Revoker::attempt_revoke(&other, write.lock_path()).await.unwrap();
        assert!(within(EVENT, "the write request", write.revocation_requested()).await);
        stays_pending("the read guard hearing the write node's request", read.revocation_requested()).await;
        write.release().await.unwrap();
        Revoker::attempt_revoke(&other, read.lock_path()).await.unwrap();
        assert!(within(EVENT, "the read request", read.revocation_requested()).await);
        read.release().await.unwrap();

        // A reader on another session, not a downgrade.
        let other_lock = InterProcessReadWriteLock::new(&other, lock.read_lock().path()).unwrap();
        let read = other_lock.read_lock().revocable().acquire().await.unwrap();
        Revoker::attempt_revoke(&fw, read.lock_path()).await.unwrap();
        assert!(within(EVENT, "the reader's request", read.revocation_requested()).await);
        read.release().await.unwrap();
        fw.close().await;
        other.close().await;
    })
    .await;
}

/// A waiting contender is revocable too: the handle hears the request while the acquire waits
/// (so it can give up), and the guard reports it once acquired.
#[tokio::test]
async fn revoking_a_waiting_contender() {
    bounded(LIMIT, async {
        let fw = fw().await;
        let path = path("waiting");
        let holder = InterProcessReadWriteLock::new(&fw, &path).unwrap().write_lock().acquire().await.unwrap();
        let lock = InterProcessReadWriteLock::new(&fw, &path).unwrap();

        // 1. The waiter gives up when asked; its node goes.
        let revocable = lock.write_lock().revocable();
        let revoker = {
            let (fw, lock) = (fw.clone(), lock.clone());
            tokio::spawn(async move {
                let nodes = loop {
                    let nodes = lock.write_lock().participant_nodes().await.unwrap();
                    if nodes.len() == 2 {
                        break nodes;
                    }
                    tokio::time::sleep(Duration::from_millis(20)).await;
                };
                Revoker::attempt_revoke(&fw, &nodes[1]).await.unwrap();
            })
        };
        let gave_up = within(EVENT, "the waiter hearing the request", async {
            tokio::select! {
                guard = revocable.acquire() => panic!("acquired beside the holder: {guard:?}"),
                () = revocable.revocation_requested() => true,
            }
        })
        .await;
        assert!(gave_up);
        revoker.await.unwrap();
        children_count_becomes(&fw, &path, 1, EVENT).await;

        // 2. A request while waiting is reported by the guard once acquired.
        let waiting = {
            let revocable = lock.read_lock().revocable();
            tokio::spawn(async move { revocable.acquire().await.unwrap() })
        };
        let queued = loop {
            let nodes = lock.read_lock().participant_nodes().await.unwrap();
            if let Some(node) = nodes.first() {
                break node.clone();
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        Revoker::attempt_revoke(&fw, &queued).await.unwrap();
        tokio::time::sleep(QUIET).await; // the request lands while it waits
        assert!(!waiting.is_finished());
        holder.release().await.unwrap();
        let read = within(EVENT, "the reader's turn", waiting).await.unwrap();
        assert_eq!(read.lock_path(), queued);
        assert!(within(EVENT, "the request made while waiting", read.revocation_requested()).await);
        read.release().await.unwrap();
        fw.close().await;
    })
    .await;
}

/// Only the exact ten bytes are a request: other data (garbage, a prefix, the message with a
/// trailing byte) is ignored, re-arming the watch; `lost()` does not fire on a data change.
#[tokio::test]
async fn other_data_is_not_a_request() {
    bounded(LIMIT, async {
        let (fw, other) = (fw().await, fw().await);
        let mutex = InterProcessMutex::new(&fw, &path("garbage")).unwrap();
        let guard = mutex.revocable().acquire().await.unwrap();
        for garbage in [&b"garbage"[..], b"__REVOKE_", b"__REVOKE__\n", b"__revoke__", b"", &[0xff; 64]] {
            other.set_data(guard.lock_path(), garbage).await.unwrap();
        }
        stays_pending("a request on other data", guard.revocation_requested()).await;
        stays_pending("lost() on a data change", guard.lost()).await;
        assert!(guard.is_held());
        Revoker::attempt_revoke(&other, guard.lock_path()).await.unwrap();
        assert!(within(EVENT, "the real request after garbage", guard.revocation_requested()).await);
        guard.release().await.unwrap();
        fw.close().await;
        other.close().await;
    })
    .await;
}

/// Every matching write is a request: two revokes fire twice (and nested guards of the hold
/// each hear them).
#[tokio::test]
async fn two_revokes_fire_twice() {
    bounded(LIMIT, async {
        let (fw, other) = (fw().await, fw().await);
        let mutex = InterProcessMutex::new(&fw, &path("twice")).unwrap();
        let guard = mutex.revocable().acquire().await.unwrap();
        let nested = mutex.acquire().await.unwrap();
        for round in 1..=2 {
            Revoker::attempt_revoke(&other, guard.lock_path()).await.unwrap();
            assert!(within(EVENT, &format!("request {round}"), guard.revocation_requested()).await);
            assert!(within(EVENT, &format!("request {round}, nested"), nested.revocation_requested()).await);
            stays_pending("a request counted twice", guard.revocation_requested()).await;
        }
        nested.release().await.unwrap();
        guard.release().await.unwrap();
        fw.close().await;
        other.close().await;
    })
    .await;
}

/// Revoking a node that no longer exists is not an error; a guard whose node is deleted
/// reports that no request can come (`false`) and `lost()` fires.
#[tokio::test]
async fn missing_nodes_and_the_end_of_the_watch() {
    bounded(LIMIT, async {
        let (fw, other) = (fw().await, fw().await);
        let path = path("missing");
        Revoker::attempt_revoke(&fw, &format!("{path}/_c_3f1c2b9e-8d6a-4e1f-9b0a-1c2d3e4f5a6b-lock-0000000001"))
            .await
            .unwrap();
        let mutex = InterProcessMutex::new(&fw, &path).unwrap();
        let guard = mutex.revocable().acquire().await.unwrap();
        let node = guard.lock_path().to_owned();
        {
            let waiting = guard.revocation_requested();
            tokio::pin!(waiting);
            stays_pending("a request before anything happened", &mut waiting).await;
            other.delete(&node).await.unwrap();
            assert!(!within(EVENT, "the watch ending on delete", waiting).await, "ends quietly");
        }
        within(EVENT, "lost() on delete", guard.lost()).await;
        assert!(!guard.is_held());
        assert!(!guard.revocation_requested().await, "and stays ended");
        guard.release().await.unwrap();
        Revoker::attempt_revoke(&fw, &node).await.unwrap(); // released: nothing to revoke
        fw.close().await;
        other.close().await;
    })
    .await;
}

/// A revocable node carries no data, whatever the lock's data (Curator writes it empty).
#[tokio::test]
async fn revocable_nodes_carry_no_data() {
    bounded(LIMIT, async {
        let fw = fw().await;
        let mutex = InterProcessMutex::with_data(&fw, &path("data"), b"10.1.2.3".to_vec()).unwrap();
        let plain = mutex.acquire().await.unwrap();
        assert_eq!(fw.get_data(plain.lock_path()).await.unwrap().0, b"10.1.2.3");
        plain.release().await.unwrap();
        let revocable = mutex.revocable().acquire().await.unwrap();
        assert!(fw.get_data(revocable.lock_path()).await.unwrap().0.is_empty());
        revocable.release().await.unwrap();

        let lock = InterProcessReadWriteLock::with_data(&fw, &path("rw-data"), b"x".to_vec()).unwrap();
        let write = lock.write_lock().revocable().acquire().await.unwrap();
        let read = lock.read_lock().revocable().acquire().await.unwrap(); // the downgrade node
        assert!(fw.get_data(write.lock_path()).await.unwrap().0.is_empty());
        assert!(fw.get_data(read.lock_path()).await.unwrap().0.is_empty());
        write.release().await.unwrap();
        read.release().await.unwrap();
        fw.close().await;
    })
    .await;
}

/// A holder that did not acquire revocably is not asked: its guard says so at once, and a
/// revoke only rewrites the node's data. A re-acquire without `revocable()` after a revocable
/// hold is not revocable either (Curator clears its spec on release).
#[tokio::test]
async fn non_revocable_holders_ignore_requests() {
    bounded(LIMIT, async {
        let (fw, other) = (fw().await, fw().await);
        let mutex = InterProcessMutex::new(&fw, &path("plain")).unwrap();
        let guard = mutex.acquire().await.unwrap();
        assert!(!guard.revocation_requested().await, "not revocable: false at once");
        Revoker::attempt_revoke(&other, guard.lock_path()).await.unwrap();
        assert_eq!(fw.get_data(guard.lock_path()).await.unwrap().0, REVOKE);
        stays_pending("lost() on a revoke to a plain holder", guard.lost()).await;
        assert!(guard.is_held());
        guard.release().await.unwrap();

        let revocable = mutex.revocable().acquire().await.unwrap();
        revocable.release().await.unwrap();
        let again = mutex.acquire().await.unwrap();
        Revoker::attempt_revoke(&other, again.lock_path()).await.unwrap();
        assert!(!again.revocation_requested().await, "a plain re-acquire is not revocable");
        assert!(again.is_held());
        again.release().await.unwrap();

        // A revocable acquire by a task that already holds: a nested guard of the plain hold.
        let plain = mutex.acquire().await.unwrap();
        let nested = mutex.revocable().acquire().await.unwrap();
        assert!(!nested.revocation_requested().await, "the hold was not acquired revocably");
        nested.release().await.unwrap();
        plain.release().await.unwrap();
        fw.close().await;
        other.close().await;
    })
    .await;
}

/// Under a namespace, the revoker takes the path as `lock_path()` and `participant_nodes()`
/// give it (namespace stripped).
#[tokio::test]
async fn revoking_under_a_namespace() {
    bounded(LIMIT, async {
        init_tracing();
        let connect = shared_connect().await;
        let namespace = path("ns").trim_start_matches('/').to_owned();
        let namespaced =
            Framework::builder(&connect).session_timeout(SESSION).namespace(&namespace).start().await.unwrap();
        let plain = fw().await;
        let mutex = InterProcessMutex::new(&namespaced, "/locks/a").unwrap();
        let guard = mutex.revocable().acquire().await.unwrap();
        Revoker::attempt_revoke(&namespaced, guard.lock_path()).await.unwrap();
        assert!(within(EVENT, "a namespaced request", guard.revocation_requested()).await);
        Revoker::attempt_revoke(&plain, &format!("/{namespace}{}", guard.lock_path())).await.unwrap();
        assert!(within(EVENT, "a request from outside the namespace", guard.revocation_requested()).await);
        guard.release().await.unwrap();
        namespaced.close().await;
        plain.close().await;
    })
    .await;
}

/// A revocable lock in a multi-lock: its handle hears requests to its node while the
/// multi-lock holds it (the multi-lock's guard does not expose revocation).
#[tokio::test]
async fn a_revocable_lock_inside_a_multi_lock() {
    bounded(LIMIT, async {
        let (fw, other) = (fw().await, fw().await);
        let mutex = InterProcessMutex::new(&fw, &path("multi-a")).unwrap();
        let revocable = Arc::new(mutex.revocable());
        let lock = InterProcessReadWriteLock::new(&fw, &path("multi-b")).unwrap();
        let multi = MultiLock::new([revocable.clone() as Arc<dyn Lockable>, Arc::new(lock.read_lock())]).unwrap();
        let guard = multi.acquire().await.unwrap();
        let requested = revocable.revocation_requested();
        let node = mutex.participant_nodes().await.unwrap().remove(0);
        assert!(fw.get_data(&node).await.unwrap().0.is_empty(), "created revocably");
        Revoker::attempt_revoke(&other, &node).await.unwrap();
        within(EVENT, "the handle hearing the request", requested).await;
        guard.release().await.unwrap();
        fw.close().await;
        other.close().await;
    })
    .await;
}

/// Bad input: a path that is no lock node (its data is left alone), an invalid path, a
/// semaphore lease (not revocable, in Curator either).
#[tokio::test]
async fn revoking_what_is_not_a_lock_node_is_refused() {
    bounded(LIMIT, async {
        let fw = fw().await;
        let base = path("not-a-lock");
        let config = format!("{base}/config");
        fw.create(&config).data(b"keep me").await.unwrap();
        for bad in [config.as_str(), base.as_str(), "/zookeeper/config", "/a/lock-", "/a/lock-12"] {
            let refused = Revoker::attempt_revoke(&fw, bad).await;
            assert!(matches!(refused, Err(Error::InvalidPath { .. })), "{bad}: {refused:?}");
        }
        assert_eq!(fw.get_data(&config).await.unwrap().0, b"keep me");
        for bad in ["", "lock-0000000001", "/a/", "/a//lock-0000000001"] {
            let refused = Revoker::attempt_revoke(&fw, bad).await;
            assert!(matches!(refused, Err(Error::InvalidPath { .. })), "{bad:?}: {refused:?}");
        }
        let semaphore = InterProcessSemaphore::new(&fw, &format!("{base}/semaphore"), 1).unwrap();
        let lease = semaphore.acquire().await.unwrap();
        let refused = Revoker::attempt_revoke(&fw, lease.lease_path()).await;
        assert!(matches!(refused, Err(Error::InvalidPath { .. })), "{refused:?}");
        lease.release().await.unwrap();
        fw.delete(&config).await.unwrap();
        fw.close().await;
    })
    .await;
}

/// The mutex's fast path (the create alone takes an uncontended lock) makes revocable holds
/// too: empty data, and requests heard.
#[tokio::test]
async fn a_fast_path_hold_is_revocable_too() {
    bounded(LIMIT, async {
        // The fast path is the per-waiter watch's (the mirror takes such a lock with the
        // create alone in its own way).
        let other = fw().await;
        let fw = classic_framework(&shared_connect().await, SESSION).await;
        // A persistent directory: an empty lock directory is a container the server may reap
        // between two holds (within 100 ms here), and its watch firing rightly turns the fast
        // path down.
        let path = path("fast-path");
        fw.create(&path).await.unwrap();
        let mutex = InterProcessMutex::new(&fw, &path).unwrap();
        for _ in 0..2 {
            mutex.revocable().acquire().await.unwrap().release().await.unwrap();
        }
        let hits = mutex.fast_path_stats().hits;
        let guard = mutex.revocable().acquire().await.unwrap();
        assert_eq!(mutex.fast_path_stats().hits, hits + 1, "{:?}", mutex.fast_path_stats());
        assert!(fw.get_data(guard.lock_path()).await.unwrap().0.is_empty());
        Revoker::attempt_revoke(&other, guard.lock_path()).await.unwrap();
        assert!(within(EVENT, "the request to a fast-path hold", guard.revocation_requested()).await);
        guard.release().await.unwrap();
        fw.delete(&path).await.unwrap();
        fw.close().await;
        other.close().await;
    })
    .await;
}
