//! The lock core under conditions that once broke it: throttled and refused deletes, requests
//! over the server's limit, `Duration::MAX` deadlines, stale guards of one task, a lost create
//! reply, a parent container reaped between two creates, an empty ACL. Each test's comment
//! says what went wrong before ("Before: ..."). Real servers throughout (the shared one, or a
//! dedicated one where the test configures or breaks it).

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use common::fixtures::*;
use common::timing::LIMIT;
use futures::{FutureExt, StreamExt};
use zk_recipes::retry::{ExponentialBackoffRetry, RetryForever, RetryNTimes, RetryUntilElapsed};
use zk_recipes::testing::{CountingProxy, RequestCounts, TestingServer, TestingServerBuilder};
use zk_recipes::zk::{Acl, AuthId, Permission};
use zk_recipes::{
    AclProvider, Error, FixedAclProvider, Framework, InterProcessMutex, InterProcessSemaphore, MultiLock, MutexGuard,
};

/// Long enough that no session of these tests expires unless a test expires it.
const SESSION: Duration = Duration::from_secs(20);

/// Whether the node at `path` exists, asked on `fw`'s session.
async fn exists(fw: &Framework, path: &str) -> bool {
    fw.exists(path).await.expect("exists").is_some()
}

/// Waits until `fw` has no background delete in progress.
async fn deletes_settle(fw: &Framework) {
    eventually(LIMIT, "background deletes settling", || async {
        match fw.pending_deletes() {
            0 => Ok(()),
            n => Err(format!("{n} pending")),
        }
    })
    .await
}

// ---------------------------------------------------------------------------------------------
// Release and reaper: every retryable error is retried; a permanent one is returned, not retried.

/// A server whose request throttler (ZooKeeper 3.8's `RequestThrottler`) admits one request
/// at a time into the pipeline, and whose transaction log holds a write made soon after
/// another for 500 ms before flushing it (`flushDelay` 1.5 s, polled every 500 ms), the write
/// keeping its admission all that time: whatever is queued behind it waits. `forceSync=no`
/// keeps the disk's speed out of it.
fn one_admission_server() -> TestingServerBuilder {
    TestingServer::builder()
        .system_property("zookeeper.request_throttle_max_requests", "1")
        .system_property("zookeeper.request_throttle_stall_time", "50")
        .system_property("zookeeper.flushDelay", "1500")
        .system_property("zookeeper.maxWriteQueuePollTime", "500")
        .system_property("zookeeper.forceSync", "no")
}

/// A [`one_admission_server`] that answers `THROTTLEDOP` (`Throttled`) to a request that
/// waited more than 50 ms for admission.
async fn throttling_server() -> TestingServer {
    let builder = one_admission_server().system_property("zookeeper.throttled_op_wait_time", "50");
    builder.start().await.expect("starting a throttling server")
}

/// A lock held on a [`throttling_server`], through a [`CountingProxy`].
struct ThrottledLock {
    _server: TestingServer,
    proxy: CountingProxy,
    fw: Framework,
    observer: Framework,
    path: String,
    /// The lock node.
    node: String,
    /// A node of our own to write to.
    scratch: String,
}

impl ThrottledLock {
    /// Takes a lock on a new directory of a throttling server. Before: the acquire sent the
    /// directory's create, the node's and the listing together, again after every refusal;
    /// the node's create, queued behind the directory's, was throttled each time, and the
    /// acquire never returned.
    async fn acquire(name: &str) -> (ThrottledLock, MutexGuard) {
        let server = throttling_server().await;
        let proxy = CountingProxy::start(&server.connect_string()).await.expect("counting proxy");
        let fw = framework(&proxy.connect_string(), SESSION).await;
        let observer = framework(&server.connect_string(), SESSION).await;
        let path = unique_path("hardening", name);
        let scratch = unique_path("hardening", "scratch");
        // Set-up, not under test: on this server, on a loaded machine, a create's connection
        // can be lost before its reply comes; the create is sent again, finds its node and
        // reports the outcome unknown (the first attempt landed, or someone else's create
        // did). The path is this test's alone: the node is ours either way.
        match fw.create(&scratch).await {
            Ok(_) => {}
            Err(zk_recipes::Error::OutcomeUnknown { error: zk_recipes::zk::Error::NodeExists, .. }) => {}
            Err(e) => panic!("creating {scratch}: {e}"),
        }
        let guard = InterProcessMutex::new(&fw, &path).unwrap().acquire().await.unwrap();
        let node = guard.lock_path().to_owned();
        (ThrottledLock { _server: server, proxy, fw, observer, path, node, scratch }, guard)
    }

    /// Sends two writes of the scratch node now. The second comes right after a log flush,
    /// so one of them holds the throttler's only admission for about 500 ms, and the next
    /// request of the session, queued behind them, is throttled. Returns how many of the two
    /// were throttled themselves, once they are answered.
    fn hold_admission(&self) -> impl std::future::Future<Output = u64> {
        let client = self.fw.zk_client().expect("a session");
        let writes = [client.set_data(&self.scratch, b"0", None), client.set_data(&self.scratch, b"1", None)];
        async move {
            let replies = futures::future::join_all(writes).await;
            replies.iter().filter(|r| matches!(r, Err(zk_recipes::zk::Error::Throttled))).count() as u64
        }
    }

    /// Checks what crossed the proxy since `before`: the server refused our delete with
    /// `Throttled` (and with nothing else), and it was sent again. Then checks that the node
    /// is gone and another session takes the lock, and closes everything.
    async fn assert_retried_and_freed(self, before: &RequestCounts, writes_throttled: u64) {
        let sent = self.proxy.counts().since(before);
        let throttled = sent.get("error:throttled");
        assert_eq!(sent.errors(), throttled, "the only errors are throttling: {sent}");
        assert!(
            throttled > writes_throttled,
            "our delete was throttled ({writes_throttled} of the writes were): {sent}"
        );
        assert!(sent.get("delete") >= 2, "the throttled delete was sent again: {sent}");
        assert_eq!(self.fw.pending_deletes(), 0);
        assert!(!exists(&self.observer, &self.node).await, "{} must be gone", self.node);
        let other = InterProcessMutex::new(&self.observer, &self.path).unwrap();
        let taken = other.try_acquire().await.unwrap().expect("another session takes the lock");
        taken.release().await.unwrap();
        self.fw.delete(&self.scratch).await.unwrap();
        self.fw.close().await;
        self.observer.close().await;
    }
}

/// Before: `release()` gave up at the first `Throttled` reply (which `is_retryable` itself
/// calls retryable) and returned it; the reaper then tried once more and gave up too, leaving
/// a node that blocked every contender for the life of the session.
#[tokio::test]
async fn release_retries_a_throttled_delete_until_it_succeeds() {
    init_tracing();
    bounded(LIMIT, async {
        let (lock, guard) = ThrottledLock::acquire("throttled-release").await;
        let before = lock.proxy.counts();
        let (writes_throttled, released) = tokio::join!(lock.hold_admission(), guard.release());
        assert!(released.is_ok(), "a throttled delete must be retried, got {released:?}");
        lock.assert_retried_and_freed(&before, writes_throttled).await;
    })
    .await;
}

/// Before: the reaper gave up on a dropped guard's delete at the first `Throttled` reply;
/// `pending_deletes()` fell to 0 and the node stayed.
#[tokio::test]
async fn the_reaper_retries_a_throttled_delete_of_a_dropped_guard() {
    init_tracing();
    bounded(LIMIT, async {
        let (lock, guard) = ThrottledLock::acquire("throttled-drop").await;
        let before = lock.proxy.counts();
        let held = lock.hold_admission();
        drop(guard); // the delete is sent now, behind the writes
        let writes_throttled = held.await;
        deletes_settle(&lock.fw).await;
        lock.assert_retried_and_freed(&before, writes_throttled).await;
    })
    .await;
}

/// A permanent refusal (`NoAuth`: the lock directory lets us create children but not delete
/// them) is returned by `release()` after one delete, and is not handed to the reaper to be
/// tried again. Before: the same error came back, but the reaper was handed the node and
/// sent a second delete.
#[tokio::test]
async fn release_returns_a_permanent_refusal_without_retrying_it() {
    init_tracing();
    bounded(LIMIT, async {
        let connect = shared_connect().await;
        // Anyone may list and create children of the directory; only its creator may delete them.
        let acl = vec![
            Acl::new(Permission::READ | Permission::CREATE, AuthId::anyone()),
            Acl::new(Permission::ALL, AuthId::authed()),
        ];
        let admin = Framework::builder(&connect)
            .auth("digest", b"hardening-admin:secret")
            .acl_provider(FixedAclProvider::new(acl))
            .start()
            .await
            .unwrap();
        let path = unique_path("hardening", "no-auth");
        admin.create(&path).await.unwrap();

        let proxy = CountingProxy::start(&connect).await.expect("counting proxy");
        let fw = framework(&proxy.connect_string(), SESSION).await;
        let guard = InterProcessMutex::new(&fw, &path).unwrap().acquire().await.unwrap();
        let node = guard.lock_path().to_owned();
        let before = proxy.counts();
        let released = within(LIMIT, "the release", guard.release()).await;
        assert!(
            matches!(released, Err(Error::ZooKeeper(zk_recipes::zk::Error::NoAuth))),
            "expected NoAuth, got {released:?}"
        );
        // Nothing was left to retry: no background delete, one delete sent in all.
        assert_eq!(fw.pending_deletes(), 0, "a permanent refusal is not handed to the reaper");
        let sent = proxy.counts().since(&before);
        assert_eq!((sent.get("delete"), sent.get("error:no-auth")), (1, 1), "{sent}");
        assert!(exists(&admin, &node).await, "the refused node stays until its session ends");

        // A dropped guard's refused delete: the reaper tries once and gives up too.
        let mutex = InterProcessMutex::new(&fw, &path).unwrap();
        let dropped = within(LIMIT, "a second node, queued behind the first", async {
            let (guard, ()) = tokio::join!(mutex.acquire(), async {
                children_count_becomes(&admin, &path, 2, LIMIT).await;
                admin.delete(&node).await.unwrap(); // the admin may
            });
            guard.unwrap()
        })
        .await;
        let second = dropped.lock_path().to_owned();
        let before = proxy.counts();
        drop(dropped);
        deletes_settle(&fw).await;
        let sent = proxy.counts().since(&before);
        assert_eq!((sent.get("delete"), sent.get("error:no-auth")), (1, 1), "{sent}");
        assert!(exists(&admin, &second).await);

        fw.close().await;
        assert!(!exists(&admin, &second).await, "the session's end removes it");
        admin.delete(&path).await.unwrap();
        admin.close().await;
    })
    .await;
}

// ---------------------------------------------------------------------------------------------

/// Before: `MultiLock::acquire_timeout(Duration::MAX)` panicked computing its deadline
/// (`Instant + Duration` overflow).
#[tokio::test]
async fn acquire_timeout_of_duration_max_waits_without_panicking() {
    init_tracing();
    bounded(LIMIT, async {
        let fw = framework(&shared_connect().await, SESSION).await;
        let (a, b) = (unique_path("hardening", "max-a"), unique_path("hardening", "max-b"));
        let multi = MultiLock::of_mutexes(&fw, [&a, &b]).unwrap();
        let guard = multi.acquire_timeout(Duration::MAX).await.unwrap().expect("the multi-lock is free");
        assert_eq!(guard.fencing_tokens().len(), 2);
        guard.release().await.unwrap();

        let mutex = InterProcessMutex::new(&fw, &a).unwrap();
        let guard = mutex.acquire_timeout(Duration::MAX).await.unwrap().expect("the mutex is free");
        guard.release().await.unwrap();

        let semaphore = InterProcessSemaphore::new(&fw, &b, 2).unwrap();
        let lease = semaphore.acquire_timeout(Duration::MAX).await.unwrap().expect("a lease is free");
        lease.release().await.unwrap();
        let leases = semaphore.acquire_many_timeout(2, Duration::MAX).await.unwrap().expect("both leases are free");
        zk_recipes::SemaphoreLease::release_all(leases).await.unwrap();
        fw.close().await;
    })
    .await;
}

// ---------------------------------------------------------------------------------------------
// Requests over the servers' limit.

/// Before: lock data (or a path) over ZooKeeper's request limit was accepted, and every try to
/// send it made the server drop the connection, which suspended the framework and fired
/// `lost()` on every guard of the process. Now it is refused with `TooLarge` before anything
/// is sent.
#[tokio::test]
async fn requests_over_the_limit_are_refused_before_anything_is_sent() {
    init_tracing();
    bounded(LIMIT, async {
        let proxy = CountingProxy::start(&shared_connect().await).await.expect("counting proxy");
        let fw = framework(&proxy.connect_string(), SESSION).await;
        let connected = fw.snapshot();
        let mut events = fw.state_changes();
        let path = unique_path("hardening", "too-large");
        // ZooKeeper's default jute.maxbuffer is 1 MiB - 1: this alone does not fit.
        let big = vec![7u8; 1 << 20];
        let long_path = format!("{path}/{}", "p".repeat(1 << 20));
        let before = proxy.counts();

        let refused = InterProcessMutex::with_data(&fw, &path, big.clone()).map(drop);
        assert!(matches!(refused, Err(Error::TooLarge { name: "data", size, .. }) if size == big.len()), "{refused:?}");
        let refused = InterProcessSemaphore::with_data(&fw, &path, 3, big.clone()).map(drop);
        assert!(matches!(refused, Err(Error::TooLarge { name: "data", .. })), "{refused:?}");
        let refused = InterProcessMutex::new(&fw, &long_path).map(drop);
        assert!(matches!(refused, Err(Error::TooLarge { name: "path", .. })), "{refused:?}");
        let refused = fw.create(&path).data(&big).await;
        assert!(matches!(refused, Err(Error::TooLarge { name: "data", .. })), "{refused:?}");
        let refused = fw.create(&long_path).await;
        assert!(matches!(refused, Err(Error::TooLarge { name: "path", .. })), "{refused:?}");
        let refused = fw.set_data(&path, &big).await;
        assert!(matches!(refused, Err(Error::TooLarge { name: "data", .. })), "{refused:?}");

        let sent = proxy.counts().since(&before);
        assert_eq!(sent.requests(), 0, "nothing may be sent: {sent}");
        // One round trip on the same connection: it is still up, nothing was created, and the
        // framework never left Connected.
        assert!(!exists(&fw, &path).await);
        assert_eq!(fw.snapshot(), connected);
        assert!(events.next().now_or_never().is_none(), "no state change may happen");
        fw.close().await;
    })
    .await;
}

/// `max_request_bytes` sets the limit for servers with another `jute.maxbuffer`.
#[tokio::test]
async fn a_configured_request_limit_is_applied() {
    init_tracing();
    bounded(LIMIT, async {
        let fw = Framework::builder(&shared_connect().await)
            .session_timeout(SESSION)
            .max_request_bytes(2048)
            .start()
            .await
            .unwrap();
        let path = unique_path("hardening", "small-limit");
        let refused = InterProcessMutex::with_data(&fw, &path, vec![1; 2000]).map(drop);
        assert!(matches!(refused, Err(Error::TooLarge { name: "data", limit, .. }) if limit < 2000), "{refused:?}");
        let refused = fw.create(&path).data(&[1; 2000]).await;
        assert!(matches!(refused, Err(Error::TooLarge { name: "data", .. })), "{refused:?}");
        let refused = fw.set_data(&path, &[1; 2048]).await;
        assert!(matches!(refused, Err(Error::TooLarge { name: "data", .. })), "{refused:?}");

        // What fits goes through.
        let mutex = InterProcessMutex::with_data(&fw, &path, vec![1; 1000]).unwrap();
        let guard = mutex.acquire().await.unwrap();
        assert_eq!(fw.get_data(guard.lock_path()).await.unwrap().0, vec![1; 1000]);
        guard.release().await.unwrap();
        fw.close().await;
    })
    .await;
}

// ---------------------------------------------------------------------------------------------

/// Before: two acquires of one mutex running at once in one task shared the owner's hold.
/// After a session loss the second's hold replaced the first's, and dropping the first (now
/// stale) guard ended the newer hold and deleted its node. Now a guard only ends its own hold.
#[tokio::test]
async fn a_stale_guard_of_the_same_task_never_ends_a_newer_hold() {
    init_tracing();
    bounded(LIMIT, async {
        let server = FaultyServer::start().await;
        let fw = framework(&server.proxied(), SESSION).await;
        let observer = framework(&server.direct(), SESSION).await;
        let path = unique_path("hardening", "stale-guard");
        observer.create(&path).await.unwrap();
        let mutex = InterProcessMutex::new(&fw, &path).unwrap();

        // The task holds; its session then expires under the hold.
        let first = mutex.acquire().await.unwrap();
        server.expire(&fw, LIMIT).await;
        within(LIMIT, "the stale hold's lost()", first.lost()).await;
        assert!(!first.is_held(), "the first hold went with its session");
        // While a guard of the stale hold lives, the task cannot nest in it (someone else may
        // hold the lock now) and gets no second hold beside it either.
        let refused = mutex.acquire().await;
        assert!(matches!(refused, Err(Error::LockLost { .. })), "reentry into a stale hold: {refused:?}");

        // Once the stale guard is gone, the task acquires afresh on the new session; whatever
        // the stale guard's drop sent went out before, and cannot touch the new node.
        drop(first);
        let second = mutex.acquire().await.unwrap();
        assert!(second.is_held());
        deletes_settle(&fw).await;
        assert!(exists(&fw, second.lock_path()).await, "the stale guard deleted the newer hold's node");
        assert!(exists(&observer, second.lock_path()).await);
        assert!(second.is_held());
        assert!(mutex.is_owned_by_current_task());
        let other = InterProcessMutex::new(&observer, &path).unwrap();
        assert!(other.try_acquire().await.unwrap().is_none(), "the second guard still holds the lock");

        second.release().await.unwrap();
        assert!(!mutex.is_acquired_in_this_process());
        fw.close().await;
        observer.close().await;
    })
    .await;
}

/// Before: `is_held()` stayed true after someone else deleted the node, even once `lost()`
/// had returned because of it.
#[tokio::test]
async fn is_held_is_false_once_lost_saw_the_node_deleted() {
    init_tracing();
    bounded(LIMIT, async {
        let connect = shared_connect().await;
        let fw = framework(&connect, SESSION).await;
        let admin = framework(&connect, SESSION).await;
        let path = unique_path("hardening", "deleted-node");
        let guard = InterProcessMutex::new(&fw, &path).unwrap().acquire().await.unwrap();
        assert!(guard.is_held());

        admin.delete(guard.lock_path()).await.unwrap();
        within(LIMIT, "lost() after the deletion", guard.lost()).await;
        assert!(fw.state().is_connected(), "the session is fine: only the node went");
        assert!(!guard.is_held(), "is_held() must agree with lost()");
        guard.release().await.unwrap(); // already gone: released
        fw.close().await;
        admin.close().await;
    })
    .await;
}

/// A create whose reply is lost is looked for by its protected prefix after a `sync` (so that
/// a create still in flight through another ensemble member has landed), adopted, and not
/// sent again. Before: the listing went without a `sync`.
#[tokio::test]
async fn a_lost_create_reply_is_recovered_after_a_sync() {
    init_tracing();
    bounded(LIMIT, async {
        let connect = shared_connect().await;
        let proxy = CountingProxy::start(&connect).await.expect("counting proxy");
        let fw = framework(&proxy.connect_string(), SESSION).await;
        let observer = framework(&connect, SESSION).await;
        let path = unique_path("hardening", "lost-create");
        observer.create(&path).await.unwrap();
        let mutex = InterProcessMutex::new(&fw, &path).unwrap();

        let before = proxy.counts();
        proxy.lose_reply_to("create2");
        let guard = within(LIMIT, "the acquire", mutex.acquire()).await.unwrap();
        let sent = proxy.counts().since(&before);
        assert_eq!(sent.get("create2"), 1, "the lost create must be adopted, not sent again: {sent}");
        assert!(sent.get("sync") >= 1, "the recovery must sync before it lists: {sent}");
        assert_eq!(children(&observer, &path).await, vec![node_name(guard.lock_path()).to_owned()]);
        assert_eq!(fw.snapshot().epoch, 1, "same session");

        guard.release().await.unwrap();
        observer.delete(&path).await.unwrap();
        fw.close().await;
        observer.close().await;
    })
    .await;
}

/// A parent container the server removes between our create of it (which found it there)
/// and our create of its child: the child's create fails with `NoNode`. Found by the suite
/// (a semaphore acquire on a path just used, and emptied, by a mutex failed with a bare
/// `NoNode`). Before: `ensure_path` and every lock acquire that had to create their parents
/// returned that `NoNode`; now every level is created again.
///
/// To make the race certain, the server is a [`one_admission_server`]: our create of the
/// parent is held while the container manager (every 100 ms) deletes the then empty parent,
/// bypassing the admission, and our create of the child comes after it.
#[tokio::test]
async fn a_parent_container_removed_between_two_creates_is_created_again() {
    init_tracing();
    bounded(LIMIT, async {
        let server = one_admission_server().start().await.expect("starting a server");
        let fw = framework(&server.connect_string(), SESSION).await;
        let parent = unique_path("hardening", "reaped-parent");
        let child = format!("{parent}/child");
        fw.create(&child).await.unwrap(); // the parent is a container
        let wanted = format!("{parent}/x");

        // Sent back to back: the delete empties the parent, then `ensure_path` creates the
        // parent (it exists: NodeExists, held) and the child.
        let emptied = fw.zk_client().unwrap().delete(&child, None);
        let (emptied, ensured) = tokio::join!(emptied, fw.ensure_path(&wanted));
        emptied.unwrap();
        assert!(ensured.is_ok(), "the vanished parent must be created again: {ensured:?}");
        assert!(exists(&fw, &wanted).await);
        fw.close().await;
    })
    .await;
}

// ---------------------------------------------------------------------------------------------

#[derive(Debug)]
struct EmptyAcl;

impl AclProvider for EmptyAcl {
    fn acl_for_path(&self, _path: &str) -> Vec<Acl> {
        Vec::new()
    }
}

/// Before: an ACL provider that returned an empty list got the open ACL in its place, so the
/// nodes were writable by anyone. Now nothing is created and the error says why.
#[tokio::test]
async fn an_empty_acl_from_the_provider_is_refused() {
    init_tracing();
    bounded(LIMIT, async {
        let connect = shared_connect().await;
        let fw = Framework::builder(&connect).session_timeout(SESSION).acl_provider(EmptyAcl).start().await.unwrap();
        let observer = framework(&connect, SESSION).await;
        let path = unique_path("hardening", "empty-acl");
        let acl_refused = |r: &Result<(), Error>| matches!(r, Err(Error::InvalidArgument { name: "acl_provider", .. }));

        let refused = InterProcessMutex::new(&fw, &path).map(drop);
        assert!(acl_refused(&refused), "{refused:?}");
        let refused = InterProcessSemaphore::new(&fw, &path, 2).map(drop);
        assert!(acl_refused(&refused), "{refused:?}");
        let refused = fw.create(&path).await.map(drop);
        assert!(acl_refused(&refused), "{refused:?}");
        let refused = fw.ensure_path(&path).await;
        assert!(acl_refused(&refused), "{refused:?}");
        assert!(!exists(&observer, &path).await, "nothing may be created");
        fw.close().await;
        observer.close().await;
    })
    .await;
}

// ---------------------------------------------------------------------------------------------

/// Before: an absurd event capacity panicked in `build()` (the channel allocates it up front),
/// `acquire_many(usize::MAX)` panicked allocating for the leases, and retry policies with a
/// zero sleep were accepted (and spun). None of these needs a server.
#[tokio::test]
async fn absurd_arguments_get_typed_errors() {
    let builder = || Framework::builder("127.0.0.1:2181");
    let refused = builder().event_capacity(usize::MAX).build().map(drop);
    assert!(matches!(refused, Err(Error::InvalidArgument { name: "event_capacity", .. })), "{refused:?}");

    let fw = builder().build().unwrap();
    let semaphore = InterProcessSemaphore::new(&fw, "/hardening/many", usize::MAX).unwrap();
    let refused = semaphore.acquire_many(usize::MAX).await.map(drop);
    assert!(matches!(refused, Err(Error::InvalidArgument { name: "n", .. })), "{refused:?}");
    let refused = semaphore.try_acquire_many(usize::MAX).await.map(drop);
    assert!(matches!(refused, Err(Error::InvalidArgument { name: "n", .. })), "{refused:?}");

    let zero = Duration::ZERO;
    let spinning: [Arc<dyn Fn() -> Result<Framework, Error>>; 4] = [
        Arc::new(move || builder().retry_policy(RetryForever::new(zero)).build()),
        Arc::new(move || builder().retry_policy(RetryNTimes::new(3, zero)).build()),
        Arc::new(move || builder().retry_policy(RetryUntilElapsed::new(Duration::from_secs(1), zero)).build()),
        Arc::new(move || builder().retry_policy(ExponentialBackoffRetry::new(zero, 3)).build()),
    ];
    for (i, build) in spinning.iter().enumerate() {
        let refused = build().map(drop);
        assert!(matches!(refused, Err(Error::InvalidArgument { name: "retry_policy", .. })), "policy {i}: {refused:?}");
    }
}

/// Before: an acquire whose node kept vanishing reported a bare `NoNode` when the retry policy
/// gave up starting over. Now it says what happened: `RetriesExhausted`, with the lock path
/// and how many fresh attempts were made.
#[tokio::test]
async fn an_acquire_whose_node_keeps_vanishing_reports_retries_exhausted() {
    init_tracing();
    bounded(LIMIT, async {
        let connect = shared_connect().await;
        let fw = Framework::builder(&connect)
            .session_timeout(SESSION)
            .retry_policy(RetryNTimes::new(2, Duration::from_millis(10)))
            .start()
            .await
            .unwrap();
        let holder_fw = framework(&connect, SESSION).await;
        let path = unique_path("hardening", "vanishing");
        let holder = InterProcessMutex::new(&holder_fw, &path).unwrap().acquire().await.unwrap();
        let holder_name = node_name(holder.lock_path()).to_owned();

        // The adversary deletes every other node of the lock as soon as it appears.
        let raw = holder_fw.zk_client().unwrap();
        let adversary = async {
            loop {
                let (names, watcher) = raw.list_and_watch_children(&path).await.expect("listing the lock");
                for name in names.iter().filter(|n| **n != holder_name) {
                    match raw.delete(&format!("{path}/{name}"), None).await {
                        Ok(()) | Err(zk_recipes::zk::Error::NoNode) => {}
                        Err(e) => panic!("adversary: {e}"),
                    }
                }
                watcher.changed().await;
            }
        };
        let waiter = InterProcessMutex::new(&fw, &path).unwrap();
        let outcome = tokio::select! {
            outcome = waiter.acquire() => outcome.map(drop),
            () = adversary => unreachable!("the adversary never stops"),
        };
        match outcome {
            Err(Error::RetriesExhausted { path: reported, attempts }) => {
                assert_eq!((reported.as_str(), attempts), (path.as_str(), 2));
            }
            other => panic!("expected RetriesExhausted, got {other:?}"),
        }
        assert!(!waiter.is_acquired_in_this_process());
        holder.release().await.unwrap();
        fw.close().await;
        holder_fw.close().await;
    })
    .await;
}
