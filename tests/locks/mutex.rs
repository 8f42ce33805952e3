//! `InterProcessMutex` against a real ZooKeeper server (the process-wide shared one; every
//! test uses its own lock path): Curator's `TestInterProcessMutexBase`/`TestInterProcessMutex`
//! scenarios (without revocation and schemas), kazoo's `test_lock.py` scenarios, bad input,
//! foreign children, fencing tokens and `lost()`. What the base lock suite checks of every
//! lock (`conformance.rs`) is not repeated here; the Curator scenarios here check what is
//! the mutex's own (node names, data, participants, nested guards sharing one node).
//!
//! Tests that stop servers or cut connections are in `mutex_faults.rs`; cancellation is in
//! `mutex_cancellation.rs`.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use common::fixtures::shared_framework as fw;
use common::fixtures::{
    bounded, children, children_become, children_count_becomes, eventually, is_curator_lock_name, node_name,
    sequence_of, shared_connect, unique_path, within, Exclusion,
};
use common::timing::{EVENT, LIMIT, QUIET, SESSION};
use futures::FutureExt;
use tokio::sync::{mpsc, oneshot, Mutex as AsyncMutex};
use tokio::time::Instant;
use zk_recipes::zk::CreateMode;
use zk_recipes::{Error, Framework, InterProcessMutex};

fn path(name: &str) -> String {
    unique_path("mutex", name)
}

// ---------------------------------------------------------------------------------------------
// Curator TestInterProcessMutexBase / TestInterProcessMutex

/// testLocker: a timed acquire holds the lock; the in-process flags follow the hold.
#[tokio::test]
async fn locker_acquire_timeout_and_in_process_flags() {
    bounded(LIMIT, async {
        let fw = fw().await;
        let path = path("locker");
        let mutex = InterProcessMutex::with_data(&fw, &path, b"127.0.0.1".to_vec()).unwrap();
        assert_eq!(mutex.path(), path);
        assert!(!mutex.is_acquired_in_this_process());
        assert!(!mutex.is_owned_by_current_task());

        let guard = mutex.acquire_timeout(EVENT).await.unwrap().expect("a free lock is acquired");
        assert!(mutex.is_acquired_in_this_process());
        assert!(mutex.is_owned_by_current_task());
        assert!(guard.is_held());

        let lock_path = guard.lock_path().to_owned();
        assert_eq!(lock_path.rsplit_once('/').map(|(dir, _)| dir), Some(path.as_str()));
        assert!(is_curator_lock_name(node_name(&lock_path)), "Curator node name: {lock_path}");
        assert_eq!(mutex.participant_nodes().await.unwrap(), vec![lock_path.clone()]);
        let (data, stat) = fw.get_data(&lock_path).await.unwrap();
        assert_eq!(data, b"127.0.0.1");
        assert_eq!(stat.czxid, guard.fencing_token(), "the fencing token is the node's czxid");
        assert_eq!(stat.ephemeral_owner, fw.snapshot().session_id, "an ephemeral node of our session");

        guard.release().await.unwrap();
        assert!(!mutex.is_acquired_in_this_process());
        assert!(!mutex.is_owned_by_current_task());
        assert!(fw.exists(&lock_path).await.unwrap().is_none(), "release deletes the node");
        assert!(mutex.participant_nodes().await.unwrap().is_empty());
        fw.close().await;
    })
    .await;
}

/// testWithNamespace: acquire and release through a namespaced framework; paths shown to the
/// user have the namespace stripped, the server has them under `/<namespace>`.
#[tokio::test]
async fn with_namespace() {
    bounded(LIMIT, async {
        let plain = fw().await;
        let namespace = path("ns").trim_start_matches('/').to_owned();
        let namespaced = Framework::builder(&shared_connect().await)
            .session_timeout(SESSION)
            .namespace(&namespace)
            .start()
            .await
            .unwrap();
        let mutex = InterProcessMutex::new(&namespaced, "/locks/our-lock").unwrap();
        let guard = mutex.acquire_timeout(EVENT).await.unwrap().expect("acquired");
        let lock_path = guard.lock_path().to_owned();
        assert!(lock_path.starts_with("/locks/our-lock/_c_"), "namespace stripped: {lock_path}");
        assert_eq!(mutex.participant_nodes().await.unwrap(), vec![lock_path.clone()]);
        let on_server = format!("/{namespace}{lock_path}");
        let stat = plain.exists(&on_server).await.unwrap().expect("node under the namespace");
        assert_eq!(stat.czxid, guard.fencing_token());
        // A plain mutex on the full path contends with the namespaced one.
        let other = InterProcessMutex::new(&plain, &format!("/{namespace}/locks/our-lock")).unwrap();
        assert!(other.try_acquire().await.unwrap().is_none());
        assert_eq!(other.participant_nodes().await.unwrap(), vec![on_server.clone()]);
        guard.release().await.unwrap();
        assert!(plain.exists(&on_server).await.unwrap().is_none());
        let theirs = other.try_acquire().await.unwrap().expect("free after the namespaced release");
        theirs.release().await.unwrap();
        namespaced.close().await;
        plain.close().await;
    })
    .await;
}

/// testReentrant2Threads: task A holds three levels; task B on the same handle cannot get the
/// lock while any level is held; once A unwinds, B gets it.
#[tokio::test]
async fn reentrant_two_tasks_same_handle() {
    bounded(LIMIT, async {
        let fw = fw().await;
        let mutex = InterProcessMutex::new(&fw, &path("two-tasks")).unwrap();
        let a = {
            let mutex = mutex.clone();
            tokio::spawn(async move {
                let g1 = mutex.acquire().await.unwrap();
                let g2 = mutex.acquire().await.unwrap();
                let g3 = mutex.acquire_timeout(EVENT).await.unwrap().expect("reentrant timed acquire");
                for g in [&g2, &g3] {
                    assert_eq!(g.lock_path(), g1.lock_path(), "nested guards share the node");
                    assert_eq!(g.fencing_token(), g1.fencing_token());
                }
                assert_eq!(mutex.participant_nodes().await.unwrap().len(), 1, "no new node for nesting");

                // B, on the same handle, waits like another process would.
                let b = |timeout: Duration| {
                    let mutex = mutex.clone();
                    tokio::spawn(async move {
                        assert!(!mutex.is_owned_by_current_task());
                        mutex.acquire_timeout(timeout).await.unwrap().is_some()
                    })
                };
                let in_process = {
                    let mutex = mutex.clone();
                    tokio::spawn(async move { mutex.is_acquired_in_this_process() })
                };
                assert!(in_process.await.unwrap(), "B sees that this process holds the lock");
                assert!(!b(Duration::from_secs(1)).await.unwrap(), "B got the lock A holds (3 levels)");
                g3.release().await.unwrap();
                assert!(!b(QUIET).await.unwrap(), "B got the lock A holds (2 levels)");
                g2.release().await.unwrap();
                assert!(!b(QUIET).await.unwrap(), "B got the lock A holds (1 level)");
                assert!(mutex.is_owned_by_current_task());
                let waiting_b = b(EVENT);
                g1.release().await.unwrap();
                assert!(!mutex.is_owned_by_current_task());
                assert!(waiting_b.await.unwrap(), "B gets the lock once A unwound");
            })
        };
        within(LIMIT, "task A", a).await.unwrap();
        fw.close().await;
    })
    .await;
}

/// testReentrant: nested acquires on one task; inner releases keep the lock, the last one
/// deletes the node, whichever order the guards end in.
#[tokio::test]
async fn reentrant_nested_release() {
    bounded(LIMIT, async {
        let fw = fw().await;
        let mutex = InterProcessMutex::new(&fw, &path("nested")).unwrap();
        let g1 = mutex.acquire().await.unwrap();
        let g2 = mutex.acquire().await.unwrap();
        let g3 = mutex.try_acquire().await.unwrap().expect("reentrant try_acquire");
        let node = g1.lock_path().to_owned();
        g3.release().await.unwrap();
        g2.release().await.unwrap();
        assert!(mutex.is_acquired_in_this_process());
        assert!(fw.exists(&node).await.unwrap().is_some());
        g1.release().await.unwrap();
        assert!(!mutex.is_acquired_in_this_process());
        assert!(fw.exists(&node).await.unwrap().is_none());

        // Outermost first: the hold lasts until the last nested guard ends.
        let outer = mutex.acquire().await.unwrap();
        let inner = mutex.acquire().await.unwrap();
        let node = outer.lock_path().to_owned();
        outer.release().await.unwrap();
        assert!(mutex.is_owned_by_current_task());
        assert!(inner.is_held());
        assert!(fw.exists(&node).await.unwrap().is_some());
        drop(inner);
        assert!(!mutex.is_acquired_in_this_process());
        // The dropped guard's delete went out on the session before this read.
        assert!(fw.exists(&node).await.unwrap().is_none());
        fw.close().await;
    })
    .await;
}

// ---------------------------------------------------------------------------------------------
// kazoo test_lock.py scenarios

/// test_lock_non_blocking: try_acquire never waits and leaves nothing behind when it fails.
#[tokio::test]
async fn try_acquire_does_not_wait() {
    bounded(LIMIT, async {
        let (fw1, fw2) = (fw().await, fw().await);
        let path = path("non-blocking");
        let m1 = InterProcessMutex::new(&fw1, &path).unwrap();
        let m2 = InterProcessMutex::new(&fw2, &path).unwrap();
        let g1 = m1.try_acquire().await.unwrap().expect("free lock");
        let started = Instant::now();
        assert!(m2.try_acquire().await.unwrap().is_none());
        assert!(started.elapsed() < EVENT);
        // The failed attempt's delete was sent before this read on the same session.
        assert_eq!(m2.participant_nodes().await.unwrap(), vec![g1.lock_path().to_owned()]);
        g1.release().await.unwrap();
        let g2 = m2.try_acquire().await.unwrap().expect("free again");
        g2.release().await.unwrap();
        fw1.close().await;
        fw2.close().await;
    })
    .await;
}

/// test_lock_fail_first_call: the first acquire fails (the lock's parent is an ephemeral node,
/// which cannot have children); once the cause is gone, the same handle acquires, and the
/// failure left nothing behind.
#[tokio::test]
async fn first_call_fails_then_acquire_works() {
    bounded(LIMIT, async {
        let (fw1, fw2) = (fw().await, fw().await);
        let parent = path("fail-first");
        fw2.create(&parent).mode(CreateMode::Ephemeral).await.unwrap();
        let lock = format!("{parent}/lock");
        let mutex = InterProcessMutex::new(&fw1, &lock).unwrap();
        match mutex.acquire().await {
            Err(Error::ZooKeeper(zk_recipes::zk::Error::NoChildrenForEphemerals)) => {}
            other => panic!("expected NoChildrenForEphemerals, got {other:?}"),
        }
        assert!(!mutex.is_acquired_in_this_process());
        fw2.delete(&parent).await.unwrap();
        let guard = within(EVENT, "the second acquire", mutex.acquire()).await.unwrap();
        assert_eq!(mutex.participant_nodes().await.unwrap(), vec![guard.lock_path().to_owned()]);
        guard.release().await.unwrap();
        fw1.close().await;
        fw2.close().await;
    })
    .await;
}

/// test_lock_cancel: a waiting acquire is cancelled (its task aborted); its node goes away
/// and the next contender is not blocked by it.
#[tokio::test]
async fn cancelled_waiter_leaves_no_node() {
    bounded(LIMIT, async {
        let (fw1, fw2, fw3) = (fw().await, fw().await, fw().await);
        let path = path("cancel");
        let holder = InterProcessMutex::new(&fw1, &path).unwrap().acquire().await.unwrap();
        let waiter = {
            let mutex = InterProcessMutex::new(&fw2, &path).unwrap();
            tokio::spawn(async move { mutex.acquire().await })
        };
        children_count_becomes(&fw1, &path, 2, EVENT).await;
        waiter.abort();
        assert!(waiter.await.unwrap_err().is_cancelled());
        children_become(&fw1, &path, &[holder.lock_path().to_owned()], EVENT).await;
        holder.release().await.unwrap();
        let next = InterProcessMutex::new(&fw3, &path).unwrap();
        let guard = next.try_acquire().await.unwrap().expect("no orphan ahead of the next contender");
        guard.release().await.unwrap();
        for fw in [fw1, fw2, fw3] {
            fw.close().await;
        }
    })
    .await;
}

/// test_lock_no_double_calls: another task on the same handle gets `None` from a timed
/// acquire while the lock is held (the holding task itself would re-enter instead).
#[tokio::test]
async fn second_task_on_same_handle_times_out() {
    bounded(LIMIT, async {
        let fw = fw().await;
        let mutex = InterProcessMutex::new(&fw, &path("no-double")).unwrap();
        let guard = mutex.acquire().await.unwrap();
        let other = {
            let mutex = mutex.clone();
            tokio::spawn(async move { mutex.acquire_timeout(QUIET).await.unwrap().is_none() })
        };
        assert!(other.await.unwrap(), "the other task timed out");
        // Its node was deleted (the delete was sent before this listing).
        assert_eq!(mutex.participant_nodes().await.unwrap(), vec![guard.lock_path().to_owned()]);
        let nested = mutex.acquire_timeout(QUIET).await.unwrap().expect("the holder re-enters");
        nested.release().await.unwrap();
        guard.release().await.unwrap();
        fw.close().await;
    })
    .await;
}

/// test_lock_many_threads: 20 tasks over 4 frameworks, 5 rounds each, one at a time.
#[tokio::test]
async fn many_tasks_over_four_frameworks() {
    bounded(LIMIT, async {
        let path = path("many");
        let exclusion = Exclusion::default();
        let mut frameworks = Vec::new();
        let mut tasks = Vec::new();
        for f in 0..4 {
            let fw = fw().await;
            for t in 0..5 {
                let mutex = InterProcessMutex::new(&fw, &path).unwrap();
                let exclusion = exclusion.clone();
                tasks.push(tokio::spawn(async move {
                    for _ in 0..5 {
                        let guard = mutex.acquire().await.unwrap();
                        exclusion.enter(&format!("framework {f} task {t}"));
                        tokio::task::yield_now().await;
                        exclusion.exit();
                        guard.release().await.unwrap();
                    }
                }));
            }
            frameworks.push(fw);
        }
        for task in tasks {
            within(LIMIT, "a task finishing", task).await.unwrap();
        }
        assert_eq!(exclusion.entries(), 100);
        assert!(children(&frameworks[0], &path).await.is_empty());
        for fw in frameworks {
            fw.close().await;
        }
    })
    .await;
}

/// test_lock_reacquire: release then acquire again on the same handle: a new node, later in
/// sequence, with a larger fencing token.
#[tokio::test]
async fn reacquire_gets_a_new_node() {
    bounded(LIMIT, async {
        let fw = fw().await;
        let path = path("reacquire");
        // A persistent directory: an empty lock directory is a container the server may reap
        // between the two holds, and a new directory numbers its children from 0 again.
        fw.create(&path).await.unwrap();
        let mutex = InterProcessMutex::new(&fw, &path).unwrap();
        let first = mutex.acquire().await.unwrap();
        let (node1, token1) = (first.lock_path().to_owned(), first.fencing_token());
        first.release().await.unwrap();
        let second = mutex.acquire().await.unwrap();
        assert_ne!(second.lock_path(), node1);
        assert!(sequence_of(second.lock_path()) > sequence_of(&node1));
        assert!(second.fencing_token() > token1);
        second.release().await.unwrap();
        fw.delete(&path).await.unwrap();
        fw.close().await;
    })
    .await;
}

/// test_lock_timeout: a timed acquire behind a holder gives up after its timeout (not much
/// later), deletes its node, and a zero timeout is refused.
#[tokio::test]
async fn acquire_timeout_gives_up_in_time() {
    bounded(LIMIT, async {
        let (fw1, fw2) = (fw().await, fw().await);
        let path = path("timeout");
        let holder = InterProcessMutex::new(&fw1, &path).unwrap().acquire().await.unwrap();
        let mutex = InterProcessMutex::new(&fw2, &path).unwrap();
        let timeout = Duration::from_millis(500);
        let started = Instant::now();
        assert!(mutex.acquire_timeout(timeout).await.unwrap().is_none());
        let took = started.elapsed();
        assert!(took >= timeout && took < timeout + Duration::from_secs(2), "gave up after {took:?}");
        assert_eq!(mutex.participant_nodes().await.unwrap(), vec![holder.lock_path().to_owned()]);
        assert!(matches!(mutex.acquire_timeout(Duration::ZERO).await, Err(Error::InvalidArgument { .. })));

        let waiting = {
            let mutex = mutex.clone();
            tokio::spawn(async move { mutex.acquire_timeout(EVENT).await.unwrap() })
        };
        children_count_becomes(&fw1, &path, 2, EVENT).await;
        holder.release().await.unwrap();
        let guard = waiting.await.unwrap().expect("acquired within the timeout after the release");
        guard.release().await.unwrap();
        fw1.close().await;
        fw2.close().await;
    })
    .await;
}

// ---------------------------------------------------------------------------------------------
// Fencing tokens, bad input, foreign children, nodes deleted under us

/// Fencing tokens strictly increase across successive holders (in different sessions).
#[tokio::test]
async fn fencing_tokens_strictly_increase() {
    bounded(LIMIT, async {
        let path = path("fencing");
        let frameworks = vec![fw().await, fw().await, fw().await];
        let order = Arc::new(AsyncMutex::new(Vec::new()));
        let mut tasks = Vec::new();
        for (i, fw) in frameworks.iter().enumerate() {
            for _ in 0..4 {
                let mutex = InterProcessMutex::new(fw, &path).unwrap();
                let order = order.clone();
                tasks.push(tokio::spawn(async move {
                    let guard = mutex.acquire().await.unwrap();
                    order.lock().await.push((guard.fencing_token(), i, guard.lock_path().to_owned()));
                    guard.release().await.unwrap();
                }));
            }
        }
        for task in tasks {
            within(EVENT, "a holder", task).await.unwrap();
        }
        let order = order.lock().await;
        assert_eq!(order.len(), 12);
        for pair in order.windows(2) {
            assert!(pair[1].0 > pair[0].0, "fencing token did not increase: {pair:?}");
        }
        let sessions: std::collections::HashSet<usize> = order.iter().map(|(_, i, _)| *i).collect();
        assert_eq!(sessions.len(), 3, "holders from every session");
        for fw in frameworks {
            fw.close().await;
        }
    })
    .await;
}

#[tokio::test]
async fn invalid_paths_and_zero_timeout_are_typed_errors() {
    bounded(LIMIT, async {
        let fw = fw().await;
        let bad = [
            "",
            "/",
            "locks",
            "locks/a",
            "/locks/",
            "/locks//a",
            "/locks/./a",
            "/locks/../a",
            "/.",
            "/..",
            "/locks/a\0b",
            "/locks/\u{1}",
            "/zookeeper",
            "/zookeeper/locks",
        ];
        for path in bad {
            match InterProcessMutex::new(&fw, path) {
                Err(Error::InvalidPath { path: reported, .. }) => assert_eq!(reported, path),
                other => panic!("{path:?}: expected InvalidPath, got {other:?}"),
            }
        }
        for path in ["/a", "/locks/a.b", "/locks/..a", "/ünïcødé/lock", "/locks/our-lock"] {
            assert!(InterProcessMutex::new(&fw, path).is_ok(), "{path:?} is valid");
        }
        let mutex = InterProcessMutex::new(&fw, &path("zero-timeout")).unwrap();
        match mutex.acquire_timeout(Duration::ZERO).await {
            Err(Error::InvalidArgument { name, .. }) => assert_eq!(name, "timeout"),
            other => panic!("zero timeout: expected InvalidArgument, got {other:?}"),
        }
        assert!(!mutex.is_acquired_in_this_process());
        assert!(children(&fw, mutex.path()).await.is_empty(), "a refused call creates nothing");
        fw.close().await;
    })
    .await;
}

/// Foreign children are contenders too (Curator sorts every child): a persistent `zzz` sorts
/// after every sequence and changes nothing; a `0` sorts first, and from then on nobody may
/// hold the lock together with anybody else. Exclusion is asserted, not liveness.
#[tokio::test]
async fn foreign_children_do_not_break_exclusion() {
    bounded(LIMIT, async {
        let (fw1, fw2, fw3) = (fw().await, fw().await, fw().await);
        let path = path("foreign");
        fw1.create(&format!("{path}/zzz")).await.unwrap();

        // `zzz` sorts last: contenders keep taking turns, and see it listed last.
        let exclusion = Exclusion::default();
        let mut tasks = Vec::new();
        for (i, fw) in [&fw1, &fw2, &fw3].into_iter().enumerate() {
            let (mutex, exclusion) = (InterProcessMutex::new(fw, &path).unwrap(), exclusion.clone());
            tasks.push(tokio::spawn(async move {
                for _ in 0..3 {
                    let guard = mutex.acquire().await.unwrap();
                    exclusion.enter(&format!("framework {i}"));
                    let nodes = mutex.participant_nodes().await.unwrap();
                    assert_eq!(nodes.first().map(String::as_str), Some(guard.lock_path()));
                    assert!(nodes.last().unwrap().ends_with("/zzz"), "{nodes:?}");
                    exclusion.exit();
                    guard.release().await.unwrap();
                }
            }));
        }
        for task in tasks {
            within(EVENT, "a contender", task).await.unwrap();
        }
        assert_eq!(exclusion.entries(), 9);

        // A holder and a waiter; then `0` appears (sorting first) and the holder releases.
        let m1 = InterProcessMutex::new(&fw1, &path).unwrap();
        let m2 = InterProcessMutex::new(&fw2, &path).unwrap();
        let m3 = InterProcessMutex::new(&fw3, &path).unwrap();
        let holder = m1.acquire().await.unwrap();
        let waiter = {
            let m2 = m2.clone();
            tokio::spawn(async move { m2.acquire_timeout(EVENT).await.unwrap() })
        };
        children_count_becomes(&fw1, &path, 3, EVENT).await;
        fw1.create(&format!("{path}/0")).await.unwrap();
        holder.release().await.unwrap();
        // Whatever the waiter decides, a newcomer and the waiter never both hold.
        let newcomer = m3.acquire_timeout(Duration::from_secs(1)).await.unwrap();
        let waiter = if newcomer.is_some() {
            // The newcomer holds: the waiter must not.
            if let Some(result) = waiter.now_or_never() {
                assert!(result.unwrap().is_none(), "the waiter and the newcomer both hold");
            }
            None
        } else {
            Some(waiter)
        };
        if let Some(newcomer) = newcomer {
            newcomer.release().await.unwrap();
        }
        // With `0` first, a fresh contender waits on it (Curator: CURATOR-43).
        assert!(m3.try_acquire().await.unwrap().is_none(), "a child named 0 sorts first and blocks");
        if let Some(waiter) = waiter {
            if let Some(guard) = waiter.await.unwrap() {
                guard.release().await.unwrap();
            }
        }
        for fw in [fw1, fw2, fw3] {
            fw.close().await;
        }
    })
    .await;
}

/// A waiter whose node is deleted by someone else holds nothing: it must queue again with a
/// new node, never take the lock with a node that no longer exists (while the contender that
/// queued behind the holder takes it too). Curator notices at its next wake-up (the node is
/// missing from the listing); either way, exactly one contender holds at a time.
#[tokio::test]
async fn waiter_whose_node_was_deleted_requeues() {
    bounded(LIMIT, async {
        let (fw1, fw2, fw3) = (fw().await, fw().await, fw().await);
        let path = path("deleted-waiter");
        let holder = InterProcessMutex::new(&fw1, &path).unwrap().acquire().await.unwrap();

        // Each contender reports its lock path when it holds, then holds until told to release.
        let contender =
            |fw: &Framework, name: &'static str, acquired: mpsc::UnboundedSender<(&'static str, String)>| {
                let mutex = InterProcessMutex::new(fw, &path).unwrap();
                let (release_tx, release_rx) = oneshot::channel::<()>();
                let task = tokio::spawn(async move {
                    let guard = mutex.acquire().await.unwrap();
                    acquired.send((name, guard.lock_path().to_owned())).unwrap();
                    let _ = release_rx.await;
                    guard.release().await.unwrap();
                });
                (task, release_tx)
            };
        // The queue: (full path, owning session), in lock order.
        let queue = || async {
            let mut nodes = Vec::new();
            for name in children(&fw1, &path).await {
                let node = format!("{path}/{name}");
                if let Some(stat) = fw1.exists(&node).await.unwrap() {
                    nodes.push((node, stat.ephemeral_owner));
                }
            }
            nodes.sort_by_key(|(node, _)| sequence_of(node));
            nodes
        };
        let (sid2, sid3) = (fw2.snapshot().session_id, fw3.snapshot().session_id);
        let (acquired_tx, mut acquired) = mpsc::unbounded_channel();
        let (b, release_b) = contender(&fw2, "B", acquired_tx.clone());
        let nodes = children_count_becomes(&fw1, &path, 2, EVENT).await;
        let b_node = nodes.iter().find(|n| format!("{path}/{n}") != holder.lock_path()).unwrap().clone();
        fw3.delete(&format!("{path}/{b_node}")).await.unwrap();
        let (c, release_c) = contender(&fw3, "C", acquired_tx);
        // C queued behind the holder (B may have queued again already, or may do so later).
        eventually(EVENT, "C queued behind the holder", || async {
            let q = queue().await;
            if q.first().map(|(node, _)| node.as_str()) == Some(holder.lock_path()) && q.iter().any(|(_, o)| *o == sid3)
            {
                Ok(())
            } else {
                Err(format!("{q:?}"))
            }
        })
        .await;
        holder.release().await.unwrap();

        let (first, first_node) = within(EVENT, "a contender acquiring", acquired.recv()).await.unwrap();
        let other_sid = if first == "B" { sid3 } else { sid2 };
        // The holder's node exists and is first; the other contender has a node behind it.
        let expected = eventually(EVENT, "one holder, the other contender queued behind it", || async {
            let q = queue().await;
            if q.len() == 2 && q[0].0 == first_node && q[1].1 == other_sid {
                Ok(q)
            } else {
                Err(format!("{first} holds {first_node}; queue {q:?}"))
            }
        })
        .await;
        assert!(acquired.try_recv().is_err(), "{first} holds and the other contender too");

        let (release_first, release_second) =
            if first == "B" { (release_b, release_c) } else { (release_c, release_b) };
        release_first.send(()).unwrap();
        let (second, second_node) = within(EVENT, "the other contender acquiring", acquired.recv()).await.unwrap();
        assert_ne!(second, first);
        assert_eq!(second_node, expected[1].0);
        release_second.send(()).unwrap();
        b.await.unwrap();
        c.await.unwrap();
        for fw in [fw1, fw2, fw3] {
            fw.close().await;
        }
    })
    .await;
}

/// The lock directory (a container) can vanish between uses: the server's container reaper
/// deletes it once empty. Here another session deletes it as fast as it can whenever it is
/// empty, so acquires keep finding it gone, or losing it between creating it and creating
/// their node. Every acquire must still succeed (Curator starts a fresh attempt on NoNode).
#[tokio::test]
async fn lock_directory_deleted_between_uses() {
    bounded(LIMIT, async {
        let (fw1, fw2) = (fw().await, fw().await);
        let path = path("vanishing-dir");
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let deleter = {
            let (client, path, stop) = (fw2.zk_client().unwrap(), path.clone(), stop.clone());
            tokio::spawn(async move {
                let mut deletes = 0u64;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    // Several deletes in flight at once, so one reaches the server at any moment.
                    let batch: Vec<_> = (0..8).map(|_| client.delete(&path, None)).collect();
                    deletes += futures::future::join_all(batch).await.iter().filter(|r| r.is_ok()).count() as u64;
                }
                deletes
            })
        };
        let mutex = InterProcessMutex::new(&fw1, &path).unwrap();
        for round in 0..15 {
            let guard = match within(EVENT, "an acquire", mutex.acquire()).await {
                Ok(guard) => guard,
                Err(e) => panic!("round {round}: acquire failed while the directory came and went: {e}"),
            };
            guard.release().await.unwrap();
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let deletes = deleter.await.unwrap();
        assert!(deletes > 0, "the directory was deleted between uses");
        fw1.close().await;
        fw2.close().await;
    })
    .await;
}

// ---------------------------------------------------------------------------------------------
// lost()

/// `lost()` completes when the lock node is deleted by someone else.
#[tokio::test]
async fn lost_fires_when_the_node_is_deleted() {
    bounded(LIMIT, async {
        let (fw1, fw2) = (fw().await, fw().await);
        let path = path("lost-deleted");
        let mutex = InterProcessMutex::new(&fw1, &path).unwrap();
        let guard = mutex.acquire().await.unwrap();
        {
            let mut lost = std::pin::pin!(guard.lost());
            assert!(tokio::time::timeout(QUIET, &mut lost).await.is_err(), "lost() before anything happened");
            fw2.delete(guard.lock_path()).await.unwrap();
            within(EVENT, "lost() after the node was deleted", lost).await;
        }
        // A lock whose node is gone releases cleanly (NoNode counts as released).
        guard.release().await.unwrap();
        assert!(!mutex.is_acquired_in_this_process());
        fw1.close().await;
        fw2.close().await;
    })
    .await;
}

/// `lost()` does not complete on clean releases: not when an outer nested guard of the same
/// hold ends, nor when another lock of the same framework is released.
#[tokio::test]
async fn lost_does_not_fire_on_clean_release() {
    bounded(LIMIT, async {
        let fw = fw().await;
        let (p1, p2) = (path("lost-clean-1"), path("lost-clean-2"));
        let m1 = InterProcessMutex::new(&fw, &p1).unwrap();
        let m2 = InterProcessMutex::new(&fw, &p2).unwrap();
        let outer = m1.acquire().await.unwrap();
        let inner = m1.acquire().await.unwrap();
        let other = m2.acquire().await.unwrap();
        {
            let mut inner_lost = std::pin::pin!(inner.lost());
            let mut other_lost = std::pin::pin!(other.lost());
            assert!(futures::poll!(&mut inner_lost).is_pending());
            assert!(futures::poll!(&mut other_lost).is_pending());

            outer.release().await.unwrap();
            assert!(inner.is_held() && other.is_held());
            let quiet = tokio::time::timeout(QUIET, futures::future::select(&mut inner_lost, &mut other_lost)).await;
            assert!(quiet.is_err(), "lost() fired after releasing the outer guard");
        }
        let node = inner.lock_path().to_owned();
        inner.release().await.unwrap();
        assert!(fw.exists(&node).await.unwrap().is_none());
        {
            let mut other_lost = std::pin::pin!(other.lost());
            assert!(tokio::time::timeout(QUIET, &mut other_lost).await.is_err(), "lost() fired for another lock");
        }
        assert!(other.is_held());
        other.release().await.unwrap();
        fw.close().await;
    })
    .await;
}
