//! Cancellation matrix for `InterProcessMutex::acquire`: the future is dropped before its first
//! poll, right after it, at many points while it creates its node (with and without the lock
//! directory existing), while it waits behind a holder, and with connection cuts (FIN and RST
//! through a fault proxy) mixed in. Afterwards the lock directory holds no node of ours once
//! the reaper settles, and the next contender acquires.
//!
//! Stop points come from poll-stepping: the pinned future is polled by hand a given number of
//! times, with the runtime running other tasks (the ZooKeeper client's I/O) in between, so that
//! successive drops land at different await points of the acquire.

use crate::common;

use std::future::Future;
use std::pin::Pin;
use std::task::Poll;
use std::time::Duration;

use common::fixtures::{
    bounded, children, children_become, children_count_becomes, framework, init_tracing, shared_connect, unique_path,
    wait_connected, within, FaultyServer,
};
use common::timing::{EVENT, LIMIT, SESSION};
use zk_recipes::{Framework, InterProcessMutex, MutexGuard, Result};

/// How many polls each drop happens after, with a `yield_now` between polls (the client's I/O
/// runs on its own reactor, so replies arrive after a varying number of these). 0 drops the
/// future unpolled; 1 right after the first poll (create and listing sent, no reply yet).
const STEPS: &[usize] =
    &[0, 1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 16, 20, 24, 32, 40, 48, 64, 80, 96, 128, 160, 192, 256, 384, 512, 768, 1024];
/// The same with a 1 ms timer between polls: later stop points (parents created, watching).
const SLEEPY_STEPS: &[usize] = &[1, 2, 3, 4, 5, 6, 8];

fn path(name: &str) -> String {
    unique_path("mutex-cancel", name)
}

type AcquireFuture<'a> = Pin<Box<dyn Future<Output = Result<MutexGuard>> + Send + 'a>>;

/// Polls `fut` up to `steps` times, letting the runtime run between polls (a yield, or a 1 ms
/// timer when `sleepy`). Returns the guard if the acquire completed first; otherwise the
/// future is dropped here, mid-flight.
async fn poll_then_drop(mut fut: AcquireFuture<'_>, steps: usize, sleepy: bool) -> Option<MutexGuard> {
    for _ in 0..steps {
        if let Poll::Ready(result) = futures::poll!(fut.as_mut()) {
            return Some(result.expect("acquire failed"));
        }
        if sleepy {
            tokio::time::sleep(Duration::from_millis(1)).await;
        } else {
            tokio::task::yield_now().await;
        }
    }
    drop(fut);
    None
}

/// Every stop point: (steps, sleepy).
fn stop_points() -> impl Iterator<Item = (usize, bool)> {
    STEPS.iter().map(|&s| (s, false)).chain(SLEEPY_STEPS.iter().map(|&s| (s, true)))
}

/// An acquire dropped before its first poll sends nothing at all.
#[tokio::test]
async fn dropped_before_first_poll_creates_nothing() {
    init_tracing();
    bounded(LIMIT, async {
        let fw = framework(&shared_connect().await, SESSION).await;
        let path = path("unpolled");
        let mutex = InterProcessMutex::new(&fw, &path).unwrap();
        for _ in 0..10 {
            drop(mutex.acquire());
            drop(mutex.try_acquire());
            drop(mutex.acquire_timeout(EVENT));
        }
        assert!(fw.exists(&path).await.unwrap().is_none(), "not even the directory was created");
        assert_eq!(fw.pending_deletes(), 0, "nothing for the reaper to do");
        let guard = mutex.try_acquire().await.unwrap().expect("free lock");
        guard.release().await.unwrap();
        fw.close().await;
    })
    .await;
}

/// Uncontended: drops at every step, on fresh directories (so the acquire goes through
/// creating its parents) and on an existing one. Nothing of ours remains; another framework
/// then takes each lock at once.
#[tokio::test]
async fn uncontended_drops_at_every_step_leave_no_node() {
    init_tracing();
    bounded(LIMIT, async {
        let connect = shared_connect().await;
        let fw = framework(&connect, SESSION).await;
        let next = framework(&connect, SESSION).await;
        let existing = path("uncontended-existing");
        let mut paths = vec![existing.clone()];
        let mut completed = 0;
        let mut total = 0;
        for (steps, sleepy) in stop_points() {
            for lock in [existing.clone(), path("uncontended-fresh")] {
                let mutex = InterProcessMutex::new(&fw, &lock).unwrap();
                total += 1;
                if let Some(guard) = poll_then_drop(Box::pin(mutex.acquire()), steps, sleepy).await {
                    completed += 1;
                    guard.release().await.unwrap();
                }
                if lock != existing {
                    paths.push(lock);
                }
            }
            // Timed acquires are the same future under a timer: drop via short timeouts too.
            let mutex = InterProcessMutex::new(&fw, &existing).unwrap();
            let limit = Duration::from_micros(100 * steps as u64 + 1);
            if let Ok(result) = tokio::time::timeout(limit, mutex.acquire_timeout(EVENT)).await {
                result.unwrap().expect("uncontended").release().await.unwrap();
            }
        }
        eprintln!("{completed} of {total} stepped acquires completed before their drop");
        assert!(completed < total / 2, "most drops must land mid-flight to test anything");
        for lock in &paths {
            children_become(&fw, lock, &[], EVENT).await;
            let mutex = InterProcessMutex::new(&next, lock).unwrap();
            let guard = mutex.try_acquire().await.unwrap().unwrap_or_else(|| panic!("{lock} is free"));
            guard.release().await.unwrap();
        }
        eventually_no_pending_deletes(&fw).await;
        fw.close().await;
        next.close().await;
    })
    .await;
}

/// Contended: a holder in another framework; our acquires are dropped at every step (the
/// later ones while already waiting behind the holder). Only the holder's node remains, and
/// after its release a newcomer takes the lock at once (no orphan of ours ahead of it).
#[tokio::test]
async fn contended_drops_at_every_step_leave_only_the_holder() {
    init_tracing();
    bounded(LIMIT, async {
        let connect = shared_connect().await;
        let holder_fw = framework(&connect, SESSION).await;
        let fw = framework(&connect, SESSION).await;
        let path = path("contended");
        let holder = InterProcessMutex::new(&holder_fw, &path).unwrap().acquire().await.unwrap();
        let mutex = InterProcessMutex::new(&fw, &path).unwrap();
        for (steps, sleepy) in stop_points() {
            let got = poll_then_drop(Box::pin(mutex.acquire()), steps, sleepy).await;
            assert!(got.is_none(), "acquired a lock that is held elsewhere");
            let got = poll_then_drop(
                Box::pin(async { Ok(mutex.acquire_timeout(EVENT).await?.expect("not timed out yet")) }),
                steps,
                sleepy,
            )
            .await;
            assert!(got.is_none(), "acquired a lock that is held elsewhere");
        }
        // Some drops happened while waiting behind the holder: a waiter that is surely queued
        // (its node listed) is cancelled too, by dropping it inside a select.
        {
            let mut waiting = std::pin::pin!(mutex.acquire());
            tokio::select! {
                _ = &mut waiting => panic!("acquired a lock that is held elsewhere"),
                _ = children_count_becomes(&holder_fw, &path, 2, EVENT) => {}
            }
        }
        children_become(&holder_fw, &path, &[holder.lock_path().to_owned()], EVENT).await;
        holder.release().await.unwrap();
        let guard = mutex.try_acquire().await.unwrap().expect("no orphan ahead of the newcomer");
        guard.release().await.unwrap();
        eventually_no_pending_deletes(&fw).await;
        holder_fw.close().await;
        fw.close().await;
    })
    .await;
}

/// Many waiters of one session queue at once (so that their listings are shared: a few go out
/// at once, the rest join one sent later) and are dropped at staggered points, some while
/// their shared listing is still to be sent or in flight. None acquires, none leaves a node,
/// and the session lists and acquires normally afterwards.
#[tokio::test]
async fn waiters_sharing_listings_dropped_at_staggered_points_leave_only_the_holder() {
    const WAITERS: usize = 64;
    init_tracing();
    bounded(LIMIT, async {
        let connect = shared_connect().await;
        let holder_fw = framework(&connect, SESSION).await;
        let fw = framework(&connect, SESSION).await;
        let path = path("shared-listings");
        let holder = InterProcessMutex::new(&holder_fw, &path).unwrap().acquire().await.unwrap();
        for round in 0..4 {
            let drops = (0..WAITERS).map(|i| {
                let mutex = InterProcessMutex::new(&fw, &path).unwrap();
                async move {
                    let steps = STEPS[(i * 7 + round) % STEPS.len()];
                    poll_then_drop(Box::pin(async move { mutex.acquire().await }), steps, false).await
                }
            });
            let got = futures::future::join_all(drops).await;
            assert!(got.iter().all(Option::is_none), "round {round}: acquired a lock that is held elsewhere");
        }
        children_become(&holder_fw, &path, &[holder.lock_path().to_owned()], EVENT).await;
        let waiters: Vec<_> = (0..8)
            .map(|_| {
                let mutex = InterProcessMutex::new(&fw, &path).unwrap();
                tokio::spawn(async move { mutex.acquire().await.unwrap().release().await.unwrap() })
            })
            .collect();
        children_count_becomes(&holder_fw, &path, 9, EVENT).await;
        holder.release().await.unwrap();
        for waiter in waiters {
            within(EVENT, "each waiter acquiring after the drops", waiter).await.unwrap();
        }
        eventually_no_pending_deletes(&fw).await;
        assert!(children(&fw, &path).await.is_empty());
        holder_fw.close().await;
        fw.close().await;
    })
    .await;
}

/// A waiter in the middle of the queue is cancelled: the one behind it re-watches the node
/// ahead, and the queue keeps its order (holder, first waiter, last waiter).
#[tokio::test]
async fn cancelled_waiter_in_the_middle_of_the_queue() {
    init_tracing();
    bounded(LIMIT, async {
        let connect = shared_connect().await;
        let fws = [
            framework(&connect, SESSION).await,
            framework(&connect, SESSION).await,
            framework(&connect, SESSION).await,
            framework(&connect, SESSION).await,
        ];
        let path = path("middle");
        let holder = InterProcessMutex::new(&fws[0], &path).unwrap().acquire().await.unwrap();
        let (order_tx, mut order) = tokio::sync::mpsc::unbounded_channel();
        let spawn_waiter = |fw: &Framework, name: &'static str| {
            let (mutex, order_tx) = (InterProcessMutex::new(fw, &path).unwrap(), order_tx.clone());
            tokio::spawn(async move {
                let guard = mutex.acquire().await.unwrap();
                order_tx.send(name).unwrap();
                guard.release().await.unwrap();
            })
        };
        let first = spawn_waiter(&fws[1], "first");
        children_count_becomes(&fws[0], &path, 2, EVENT).await;
        let middle = spawn_waiter(&fws[2], "middle");
        children_count_becomes(&fws[0], &path, 3, EVENT).await;
        let last = spawn_waiter(&fws[3], "last");
        children_count_becomes(&fws[0], &path, 4, EVENT).await;
        middle.abort();
        assert!(middle.await.unwrap_err().is_cancelled());
        children_count_becomes(&fws[0], &path, 3, EVENT).await;
        holder.release().await.unwrap();
        within(EVENT, "the first waiter", first).await.unwrap();
        within(EVENT, "the last waiter", last).await.unwrap();
        assert_eq!(order.recv().await, Some("first"));
        assert_eq!(order.recv().await, Some("last"));
        assert!(children(&fws[0], &path).await.is_empty());
        for fw in fws {
            fw.close().await;
        }
    })
    .await;
}

/// Cancellation with connection cuts: our framework connects through a fault proxy that
/// drops (FIN) or resets (RST) its connections at varying points of an acquire that is then
/// dropped, contended and uncontended. Replies lost with the connection leave nodes whose
/// names we never learned: the reaper must find them by their protected prefix.
#[tokio::test]
async fn drops_mixed_with_connection_cuts_leave_no_node() {
    init_tracing();
    bounded(LIMIT, async {
        let servers = FaultyServer::start().await;
        let holder_fw = framework(&servers.direct(), SESSION).await;
        let fw = framework(&servers.proxied(), SESSION).await;
        let contended = path("cuts-contended");
        let uncontended = path("cuts-uncontended");
        let holder = InterProcessMutex::new(&holder_fw, &contended).unwrap().acquire().await.unwrap();
        let cut_steps = [0usize, 1, 2, 3, 5, 8, 13, 21, 34, 55];
        for (i, &before_cut) in cut_steps.iter().enumerate() {
            for lock in [&contended, &uncontended] {
                let mutex = InterProcessMutex::new(&fw, lock).unwrap();
                let mut fut: AcquireFuture<'_> = Box::pin(mutex.acquire());
                let mut got = None;
                for step in 0..before_cut + 20 {
                    if step == before_cut {
                        if i % 2 == 0 {
                            servers.proxy.drop_connections();
                        } else {
                            servers.proxy.reset_connections();
                        }
                    }
                    if let Poll::Ready(result) = futures::poll!(fut.as_mut()) {
                        got = Some(result.expect("acquire through connection cuts"));
                        break;
                    }
                    tokio::time::sleep(Duration::from_micros(300)).await;
                }
                drop(fut);
                if let Some(guard) = got {
                    assert_eq!(lock, &uncontended, "acquired a lock that is held elsewhere");
                    guard.release().await.unwrap();
                }
            }
        }
        wait_connected(&fw, EVENT, 1).await;
        assert_eq!(fw.snapshot().epoch, 1, "cuts only: the session survived");
        children_become(&holder_fw, &contended, &[holder.lock_path().to_owned()], EVENT).await;
        children_become(&holder_fw, &uncontended, &[], EVENT).await;
        eventually_no_pending_deletes(&fw).await;

        holder.release().await.unwrap();
        for lock in [&contended, &uncontended] {
            let guard = InterProcessMutex::new(&fw, lock).unwrap().try_acquire().await.unwrap();
            guard.expect("the next contender acquires").release().await.unwrap();
        }
        holder_fw.close().await;
        fw.close().await;
    })
    .await;
}

/// A guard dropped (not released) deletes its node in the background, also when dropped on a
/// thread outside any runtime.
#[tokio::test]
async fn dropped_guards_delete_their_nodes() {
    init_tracing();
    bounded(LIMIT, async {
        let connect = shared_connect().await;
        let fw = framework(&connect, SESSION).await;
        let other = framework(&connect, SESSION).await;
        let path = path("dropped-guard");
        let mutex = InterProcessMutex::new(&fw, &path).unwrap();
        let theirs = InterProcessMutex::new(&other, &path).unwrap();

        let guard = mutex.acquire().await.unwrap();
        drop(guard);
        assert!(!mutex.is_acquired_in_this_process());
        let next = within(EVENT, "acquire after a dropped guard", theirs.acquire()).await.unwrap();
        next.release().await.unwrap();

        let guard = mutex.acquire().await.unwrap();
        std::thread::spawn(move || drop(guard)).join().unwrap();
        let next = within(EVENT, "acquire after a guard dropped off-runtime", theirs.acquire()).await.unwrap();
        next.release().await.unwrap();
        eventually_no_pending_deletes(&fw).await;
        fw.close().await;
        other.close().await;
    })
    .await;
}

async fn eventually_no_pending_deletes(fw: &Framework) {
    common::fixtures::eventually(EVENT, "the reaper settling", || async {
        match fw.pending_deletes() {
            0 => Ok(()),
            n => Err(format!("{n} pending")),
        }
    })
    .await;
}
