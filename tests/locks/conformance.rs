//! The base lock suite (Curator's `TestInterProcessMutexBase`), run over every lock of the
//! crate through [`Lockable`], the interface `MultiLock` composes: a mutex, a semaphore mutex,
//! a one-lease semaphore, a multi-lock of two mutexes, the write half of a read-write lock and
//! a revocable mutex (the read half shares, so the exclusive suite does not apply to it).
//!
//! Each scenario runs once per kind (a test per kind, so a failure names both). Reentrancy
//! scenarios assert reentrancy for the reentrant kinds and its absence (the second acquire
//! waits) for the others, as Curator's semaphore mutex suite does by design. Recipe-specific
//! checks (node names, data, participant lists) stay in each recipe's own test file.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use common::fixtures::*;
use common::timing::{EVENT, LIMIT, QUIET, SESSION};
use zk_recipes::{
    Framework, InterProcessMutex, InterProcessReadWriteLock, InterProcessSemaphore, InterProcessSemaphoreMutex,
    LockHold, Lockable, MultiLock,
};

/// A kind of lock, made into a [`Lockable`] on a path.
#[derive(Debug, Clone, Copy)]
enum Kind {
    Mutex,
    SemaphoreMutex,
    Semaphore,
    MultiLock,
    WriteLock,
    RevocableMutex,
}

impl Kind {
    /// Whether the task that holds the lock gets it again at once.
    fn reentrant(self) -> bool {
        matches!(self, Kind::Mutex | Kind::MultiLock | Kind::WriteLock | Kind::RevocableMutex)
    }

    fn lock(self, fw: &Framework, path: &str) -> Arc<dyn Lockable> {
        match self {
            Kind::Mutex => Arc::new(InterProcessMutex::new(fw, path).unwrap()),
            Kind::SemaphoreMutex => Arc::new(InterProcessSemaphoreMutex::new(fw, path).unwrap()),
            Kind::Semaphore => Arc::new(InterProcessSemaphore::new(fw, path, 1).unwrap()),
            Kind::MultiLock => {
                Arc::new(MultiLock::of_mutexes(fw, [format!("{path}/one"), format!("{path}/two")]).unwrap())
            }
            Kind::WriteLock => Arc::new(InterProcessReadWriteLock::new(fw, path).unwrap().write_lock()),
            Kind::RevocableMutex => Arc::new(InterProcessMutex::new(fw, path).unwrap().revocable()),
        }
    }
}

/// A timed acquire through the trait (dropping `lock()` is cancel-safe by contract).
async fn lock_within(lock: &Arc<dyn Lockable>, limit: Duration) -> Option<Box<dyn LockHold>> {
    tokio::time::timeout(limit, lock.lock()).await.ok().map(|held| held.expect("acquire failed"))
}

/// Polls until `path` and everything under it is gone.
async fn reaped(fw: &Framework, path: &str) {
    eventually(EVENT, &format!("{path} being reaped"), || async {
        match fw.exists(path).await.unwrap() {
            None => Ok(()),
            Some(stat) => Err(format!("still there with {} children", stat.num_children)),
        }
    })
    .await;
}

/// testLocker: a timed acquire holds the lock; the in-process flag follows the hold; the
/// guard reports it held with a fencing token per node.
async fn locker(kind: Kind) {
    let fw = framework(&shared_connect().await, SESSION).await;
    let lock = kind.lock(&fw, &unique_path("conformance", "locker"));
    assert!(!lock.is_acquired_in_this_process());
    let held = lock_within(&lock, EVENT).await.expect("a free lock is acquired");
    assert!(lock.is_acquired_in_this_process());
    assert!(held.is_held());
    let tokens = held.fencing_tokens();
    let nodes = if matches!(kind, Kind::MultiLock) { 2 } else { 1 };
    assert_eq!(tokens.len(), nodes, "a fencing token per node held");
    assert!(tokens.iter().all(|t| *t > 0));
    held.release().await.unwrap();
    assert!(!lock.is_acquired_in_this_process());
    fw.close().await;
}

/// testWaitingProcessKilledServer: two tasks of one client contend; the holder stops the
/// server until the client is no longer connected, then restarts it. The waiter gets the lock
/// after the outage, and both releases end (with a session error at worst).
async fn waiting_process_killed_server(kind: Kind) {
    let mut server = FaultyServer::start().await;
    let fw = framework(&server.direct(), SESSION).await;
    let lock = kind.lock(&fw, &unique_path("conformance", "killed-server"));
    let first = lock.lock().await.unwrap();
    let waiter = {
        let lock = lock.clone();
        tokio::spawn(async move { lock.lock().await })
    };
    server.server.stop().await.unwrap();
    wait_for_state(&fw, EVENT, "losing the connection", |s| !s.state.is_connected()).await;
    server.server.restart().await.unwrap();
    wait_connected(&fw, EVENT * 2, 1).await;
    if let Err(e) = first.release().await {
        assert!(e.is_session_lost() || e.is_connection_error(), "release failed for another reason: {e}");
    }
    let second = within(EVENT * 2, "the waiter acquiring after the outage", waiter).await.unwrap().unwrap();
    assert!(second.is_held(), "the waiter holds the lock on a connected session");
    if let Err(e) = second.release().await {
        assert!(e.is_session_lost() || e.is_connection_error(), "release failed for another reason: {e}");
    }
    fw.close().await;
}

/// testKilledSession: two handles on one client; the holder's session is expired on the
/// server; the other handle's waiting acquire then gets the lock (the stale node went with the
/// session and the waiter queued again on the new one).
async fn killed_session(kind: Kind) {
    let server = FaultyServer::start().await;
    let fw = framework(&server.proxied(), SESSION).await;
    let path = unique_path("conformance", "killed-session");
    let (holder_lock, waiter_lock) = (kind.lock(&fw, &path), kind.lock(&fw, &path));
    let held = holder_lock.lock().await.unwrap();
    let waiter = tokio::spawn(async move { waiter_lock.lock().await });
    tokio::time::sleep(QUIET).await;
    assert!(!waiter.is_finished(), "the waiter must wait while the lock is held");
    // Every stage has a bound of its own, together well inside the test's: a stage that
    // hangs is named.
    server.expire(&fw, EVENT).await;
    let acquired = within(EVENT, "the waiter acquiring after the expiry", waiter).await.unwrap().unwrap();
    assert!(!held.is_held(), "the expired hold is not trusted");
    assert!(acquired.is_held());
    drop(held);
    within(EVENT / 2, "releasing the waiter's hold", acquired.release()).await.unwrap();
    within(EVENT / 2, "closing the framework", fw.close()).await;
}

/// testContainerCleanup: ten tasks take turns; afterwards the parents, created as containers,
/// are removed by the server, and the next acquire creates them again.
async fn container_cleanup(kind: Kind) {
    let fw = framework(&shared_connect().await, SESSION).await;
    let base = unique_path("conformance", "containers");
    let exclusion = Exclusion::default();
    let mut tasks = Vec::new();
    for i in 0..10 {
        let (lock, exclusion) = (kind.lock(&fw, &format!("{base}/locks/our-lock")), exclusion.clone());
        tasks.push(tokio::spawn(async move {
            let held = lock.lock().await.unwrap();
            exclusion.enter(&format!("task {i}"));
            tokio::task::yield_now().await;
            exclusion.exit();
            held.release().await.unwrap();
        }));
    }
    for task in tasks {
        within(EVENT, "a contender finishing", task).await.unwrap();
    }
    assert_eq!(exclusion.entries(), 10);
    reaped(&fw, &base).await;
    let again = kind.lock(&fw, &format!("{base}/locks/our-lock")).lock().await.unwrap();
    again.release().await.unwrap();
    fw.close().await;
}

/// testWithNamespace: a timed acquire and a release through a namespaced framework; the nodes
/// are under the namespace on the server.
async fn with_namespace(kind: Kind) {
    let connect = shared_connect().await;
    let plain = framework(&connect, SESSION).await;
    let namespace = unique_path("conformance", "ns").trim_start_matches('/').to_owned();
    let namespaced = Framework::builder(&connect).session_timeout(SESSION).namespace(&namespace).start().await.unwrap();
    let lock = kind.lock(&namespaced, "/locks/our-lock");
    let held = lock_within(&lock, EVENT).await.expect("acquired");
    let on_server = plain.exists(&format!("/{namespace}/locks/our-lock")).await.unwrap();
    assert!(on_server.expect("the lock lives under the namespace").num_children > 0);
    held.release().await.unwrap();
    reaped(&plain, &format!("/{namespace}")).await;
    namespaced.close().await;
    plain.close().await;
}

/// testReentrantSingleLock: ten tasks share one handle and never hold at once.
async fn single_handle_many_tasks(kind: Kind) {
    let fw = framework(&shared_connect().await, SESSION).await;
    let lock = kind.lock(&fw, &unique_path("conformance", "single-handle"));
    let exclusion = Exclusion::default();
    let mut tasks = Vec::new();
    for i in 0..10 {
        let (lock, exclusion) = (lock.clone(), exclusion.clone());
        tasks.push(tokio::spawn(async move {
            for _ in 0..3 {
                let held = lock.lock().await.unwrap();
                exclusion.enter(&format!("task {i}"));
                tokio::task::yield_now().await;
                exclusion.exit();
                held.release().await.unwrap();
            }
        }));
    }
    for task in tasks {
        within(EVENT * 2, "a task finishing", task).await.unwrap();
    }
    assert_eq!(exclusion.entries(), 30);
    assert!(!lock.is_acquired_in_this_process());
    fw.close().await;
}

/// testReentrant2Threads: task A holds (three levels when reentrant); task B, on the same
/// handle, does not get the lock while A holds any level, and gets it once A let go.
async fn second_task_waits_for_the_first(kind: Kind) {
    let fw = framework(&shared_connect().await, SESSION).await;
    let lock = kind.lock(&fw, &unique_path("conformance", "two-tasks"));
    let a = {
        let lock = lock.clone();
        tokio::spawn(async move {
            let levels = if kind.reentrant() { 3 } else { 1 };
            let mut holds = Vec::new();
            for _ in 0..levels {
                holds.push(lock_within(&lock, EVENT).await.expect("the holder's own acquire"));
            }
            let b = |limit: Duration| {
                let lock = lock.clone();
                tokio::spawn(async move { lock_within(&lock, limit).await.map(|held| held.release()) })
            };
            while let Some(held) = holds.pop() {
                assert!(b(QUIET).await.unwrap().is_none(), "B got the lock while A holds {} levels", holds.len() + 1);
                held.release().await.unwrap();
            }
            let released = b(EVENT).await.unwrap().expect("B gets the lock once A let go");
            released.await.unwrap();
        })
    };
    within(LIMIT, "task A", a).await.unwrap();
    fw.close().await;
}

/// testReentrant: nested acquires on one task. Reentrant kinds hold until the last nested
/// release; the others make the nested acquire wait (it times out, holding nothing).
async fn nested_acquire_on_one_task(kind: Kind) {
    let fw = framework(&shared_connect().await, SESSION).await;
    let lock = kind.lock(&fw, &unique_path("conformance", "nested"));
    let outer = lock.lock().await.unwrap();
    if kind.reentrant() {
        let inner = lock_within(&lock, EVENT).await.expect("reentrant acquire");
        let innermost = lock.try_lock().await.unwrap().expect("reentrant try_lock");
        innermost.release().await.unwrap();
        inner.release().await.unwrap();
        assert!(lock.is_acquired_in_this_process(), "held until the outermost release");
        assert!(outer.is_held());
    } else {
        assert!(lock_within(&lock, QUIET).await.is_none(), "not reentrant: the nested acquire waits");
        assert!(lock.try_lock().await.unwrap().is_none(), "not reentrant: try_lock gives up");
        assert!(outer.is_held());
    }
    outer.release().await.unwrap();
    assert!(!lock.is_acquired_in_this_process());
    let again = lock.try_lock().await.unwrap().expect("free after the release");
    again.release().await.unwrap();
    fw.close().await;
}

/// test2Clients: two frameworks on one path; one holds at a time and a release hands over.
async fn two_clients(kind: Kind) {
    let connect = shared_connect().await;
    let (fw1, fw2) = (framework(&connect, SESSION).await, framework(&connect, SESSION).await);
    let path = unique_path("conformance", "two-clients");
    let (l1, l2) = (kind.lock(&fw1, &path), kind.lock(&fw2, &path));
    for _ in 0..2 {
        let held = l1.lock().await.unwrap();
        assert!(lock_within(&l2, QUIET).await.is_none(), "the other client waits");
        assert!(!l2.is_acquired_in_this_process());
        let waiting = {
            let l2 = l2.clone();
            tokio::spawn(async move { l2.lock().await })
        };
        tokio::time::sleep(QUIET).await;
        assert!(!waiting.is_finished(), "the other client waits");
        held.release().await.unwrap();
        let theirs = within(EVENT, "the second client acquiring", waiting).await.unwrap().unwrap();
        assert!(l1.try_lock().await.unwrap().is_none(), "the first client waits now");
        theirs.release().await.unwrap();
    }
    fw1.close().await;
    fw2.close().await;
}

macro_rules! conformance {
    ($($module:ident => $kind:ident),* $(,)?) => {
        $(
            mod $module {
                use super::*;

                async fn run(scenario: impl std::future::Future<Output = ()>) {
                    init_tracing();
                    bounded(LIMIT, scenario).await
                }

                #[tokio::test]
                async fn locker() {
                    run(super::locker(Kind::$kind)).await
                }

                #[tokio::test]
                async fn waiting_process_killed_server() {
                    run(super::waiting_process_killed_server(Kind::$kind)).await
                }

                #[tokio::test]
                async fn killed_session() {
                    run(super::killed_session(Kind::$kind)).await
                }

                #[tokio::test]
                async fn container_cleanup() {
                    run(super::container_cleanup(Kind::$kind)).await
                }

                #[tokio::test]
                async fn with_namespace() {
                    run(super::with_namespace(Kind::$kind)).await
                }

                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn single_handle_many_tasks() {
                    run(super::single_handle_many_tasks(Kind::$kind)).await
                }

                #[tokio::test]
                async fn second_task_waits_for_the_first() {
                    run(super::second_task_waits_for_the_first(Kind::$kind)).await
                }

                #[tokio::test]
                async fn nested_acquire_on_one_task() {
                    run(super::nested_acquire_on_one_task(Kind::$kind)).await
                }

                #[tokio::test]
                async fn two_clients() {
                    run(super::two_clients(Kind::$kind)).await
                }
            }
        )*
    };
}

conformance!(
    mutex => Mutex,
    semaphore_mutex => SemaphoreMutex,
    semaphore => Semaphore,
    multi_lock => MultiLock,
    write_lock => WriteLock,
    revocable_mutex => RevocableMutex,
);
