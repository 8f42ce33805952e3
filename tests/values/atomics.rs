//! `DistributedAtomicLong`, `DistributedAtomicInteger` and `DistributedAtomicValue` against
//! real servers: Curator's node layout (8 and 4 big-endian bytes, raw bytes), two sessions
//! incrementing adding up exactly (optimistic, and promoted to the lock), attempt counts,
//! compare-and-set, initialize and force_set, nodes that hold no number, and increments through
//! a connection that keeps breaking: every increment reported applied is in the final value,
//! none is applied twice, and the ones whose outcome is unknown are reported as such.

use crate::common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::fixtures::*;
use common::timing::{LIMIT, SESSION};
use zk_recipes::retry::{RetryNTimes, RetryUntilElapsed};
use zk_recipes::{DistributedAtomicInteger, DistributedAtomicLong, DistributedAtomicValue, Error, PromotedToLock};

fn patient() -> RetryUntilElapsed {
    RetryUntilElapsed::new(Duration::from_secs(30), Duration::from_millis(2))
}

#[tokio::test]
async fn the_nodes_hold_curators_bytes() {
    init_tracing();
    bounded(LIMIT, async {
        let fw = plain_framework(&shared_connect().await, SESSION).await;
        let base = unique_path("atomic", "layout");
        let long = DistributedAtomicLong::new(&fw, &format!("{base}/a/long"), patient()).unwrap();
        let first = long.increment().await.unwrap();
        assert!(first.succeeded());
        assert_eq!((*first.pre_value(), *first.post_value()), (0, 1));
        assert_eq!(first.stats().optimistic_tries, 1);
        assert_eq!(first.stats().promoted_lock_tries, 0);
        assert_eq!(fw.get_data(long.path()).await.unwrap().0, [0, 0, 0, 0, 0, 0, 0, 1]);
        assert_eq!(*long.add(257).await.unwrap().post_value(), 258);
        assert_eq!(*long.subtract(300).await.unwrap().post_value(), -42);
        assert_eq!(*long.decrement().await.unwrap().post_value(), -43);
        assert_eq!(fw.get_data(long.path()).await.unwrap().0, (-43i64).to_be_bytes());
        let got = long.get().await.unwrap();
        assert!(got.succeeded() && *got.pre_value() == -43 && *got.post_value() == -43);

        let int = DistributedAtomicInteger::new(&fw, &format!("{base}/int"), patient()).unwrap();
        assert_eq!(*int.add(-2).await.unwrap().post_value(), -2);
        assert_eq!(fw.get_data(int.path()).await.unwrap().0, [0xff, 0xff, 0xff, 0xfe]);

        let value = DistributedAtomicValue::new(&fw, &format!("{base}/value"), patient()).unwrap();
        assert_eq!(*value.get().await.unwrap().pre_value(), None);
        let set = value.try_set(b"raw").await.unwrap();
        assert!(set.succeeded() && set.pre_value().is_none() && set.post_value().as_deref() == Some(&b"raw"[..]));
        assert_eq!(fw.get_data(value.path()).await.unwrap().0, b"raw");
        fw.delete(&base).recursive().await.unwrap();
        fw.close().await;
    })
    .await;
}

#[tokio::test]
async fn compare_and_set_initialize_and_force_set_follow_curator() {
    init_tracing();
    bounded(LIMIT, async {
        let fw = plain_framework(&shared_connect().await, SESSION).await;
        let path = unique_path("atomic", "cas");
        let long = DistributedAtomicLong::new(&fw, &path, patient()).unwrap();
        // A missing node: compare-and-set fails and creates nothing.
        let missed = long.compare_and_set(0, 5).await.unwrap();
        assert!(!missed.succeeded());
        assert!(fw.exists(&path).await.unwrap().is_none());
        assert!(long.initialize(10).await.unwrap());
        assert!(!long.initialize(11).await.unwrap(), "initialize never overwrites");
        assert!(!long.compare_and_set(9, 5).await.unwrap().succeeded());
        let swapped = long.compare_and_set(10, 5).await.unwrap();
        assert!(swapped.succeeded() && *swapped.pre_value() == 10 && *swapped.post_value() == 5);
        long.force_set(99).await.unwrap();
        assert_eq!(*long.get().await.unwrap().post_value(), 99);
        fw.delete(&path).await.unwrap();
        long.force_set(7).await.unwrap();
        assert_eq!(fw.get_data(&path).await.unwrap().0, 7i64.to_be_bytes(), "force_set creates");
        assert_eq!(*long.try_set(3).await.unwrap().post_value(), 3);
        fw.delete(&path).await.unwrap();
        fw.close().await;
    })
    .await;
}

#[tokio::test]
async fn nodes_that_hold_no_number_are_corrupt_data_and_left_alone() {
    init_tracing();
    bounded(LIMIT, async {
        let fw = plain_framework(&shared_connect().await, SESSION).await;
        for bad in [&[1u8, 2, 3][..], &[0, 0, 0, 0, 0, 0, 0, 1, 0]] {
            let path = unique_path("atomic", "corrupt");
            fw.create(&path).data(bad).await.unwrap();
            let long = DistributedAtomicLong::new(&fw, &path, patient()).unwrap();
            assert!(matches!(long.get().await, Err(Error::CorruptData { .. })));
            let refused = long.increment().await;
            assert!(matches!(&refused, Err(Error::CorruptData { path: p, .. }) if *p == path), "{refused:?}");
            let int = DistributedAtomicInteger::new(&fw, &path, patient()).unwrap();
            assert!(matches!(int.add(1).await, Err(Error::CorruptData { .. })));
            assert_eq!(fw.get_data(&path).await.unwrap().0, bad, "nothing written over it");
            fw.delete(&path).await.unwrap();
        }
        // A long's node is no integer.
        let path = unique_path("atomic", "long-as-int");
        let long = DistributedAtomicLong::new(&fw, &path, patient()).unwrap();
        long.increment().await.unwrap();
        let int = DistributedAtomicInteger::new(&fw, &path, patient()).unwrap();
        assert!(matches!(int.get().await, Err(Error::CorruptData { .. })));
        fw.delete(&path).await.unwrap();
        assert!(matches!(DistributedAtomicLong::new(&fw, "/", patient()), Err(Error::InvalidPath { .. })));
        let bad_lock = PromotedToLock::new("no-slash");
        assert!(matches!(
            DistributedAtomicLong::with_promotion(&fw, &path, patient(), bad_lock),
            Err(Error::InvalidPath { .. })
        ));
        // A policy that retries without sleeping would race the server in a busy loop: refused,
        // as a framework refuses it, for the tries and for the tries under the lock.
        let busy = || RetryNTimes::new(3, Duration::ZERO);
        let refused = |r: Result<(), Error>| matches!(r, Err(Error::InvalidArgument { name: "retry_policy", .. }));
        assert!(refused(DistributedAtomicLong::new(&fw, &path, busy()).map(drop)));
        assert!(refused(DistributedAtomicValue::new(&fw, &path, busy()).map(drop)));
        let busy_lock = PromotedToLock::new(&format!("{path}-lock")).retry_policy(busy());
        assert!(refused(DistributedAtomicLong::with_promotion(&fw, &path, patient(), busy_lock).map(drop)));
        fw.close().await;
    })
    .await;
}

/// Increments `n` times on its own session; returns (successes, post values, tries, promoted tries).
async fn increments(connect: String, path: String, n: usize, promoted: Option<String>) -> (Vec<i64>, u32, u32) {
    let fw = plain_framework(&connect, SESSION).await;
    let long = match promoted {
        None => DistributedAtomicLong::new(&fw, &path, patient()).unwrap(),
        Some(lock) => DistributedAtomicLong::with_promotion(
            &fw,
            &path,
            RetryNTimes::new(0, Duration::from_millis(1)),
            PromotedToLock::new(&lock).retry_policy(patient()),
        )
        .unwrap(),
    };
    let (mut posts, mut tries, mut promoted_tries) = (Vec::new(), 0, 0);
    for _ in 0..n {
        let result = long.increment().await.unwrap();
        assert!(result.succeeded(), "{result:?}");
        assert_eq!(*result.post_value(), result.pre_value() + 1);
        posts.push(*result.post_value());
        tries += result.stats().optimistic_tries;
        promoted_tries += result.stats().promoted_lock_tries;
    }
    fw.close().await;
    (posts, tries, promoted_tries)
}

async fn two_sessions_add_up(promoted: bool) {
    const N: usize = 40;
    let connect = shared_connect().await;
    let path = unique_path("atomic", "contended");
    let lock = format!("{path}-lock");
    let promoted = promoted.then(|| lock.clone());
    let a = tokio::spawn(increments(connect.clone(), path.clone(), N, promoted.clone()));
    let b = tokio::spawn(increments(connect.clone(), path.clone(), N, promoted.clone()));
    let (a, b) = (a.await.unwrap(), b.await.unwrap());
    let mut posts: Vec<i64> = a.0.iter().chain(&b.0).copied().collect();
    posts.sort_unstable();
    let expected: Vec<i64> = (1..=2 * N as i64).collect();
    assert_eq!(posts, expected, "each increment applied once, each value seen once");
    let fw = plain_framework(&connect, SESSION).await;
    assert_eq!(fw.get_data(&path).await.unwrap().0, (2 * N as i64).to_be_bytes());
    if promoted.is_some() {
        assert_eq!(a.1 + b.1, 2 * N as u32, "exactly one optimistic try each");
        assert!(a.2 + b.2 > 0, "the lost races went to the lock");
        assert!(children(&fw, &lock).await.is_empty(), "no lock node left behind");
        let _ = fw.delete(&lock).await;
    } else {
        assert!(a.1 + b.1 >= 2 * N as u32);
    }
    fw.delete(&path).await.unwrap();
    fw.close().await;
}

#[tokio::test]
async fn two_sessions_incrementing_optimistically_add_up_exactly() {
    init_tracing();
    bounded(LIMIT, two_sessions_add_up(false)).await;
}

#[tokio::test]
async fn two_sessions_promoted_to_the_lock_add_up_exactly() {
    init_tracing();
    bounded(LIMIT, two_sessions_add_up(true)).await;
}

/// The connection breaks again and again while two sessions increment: every increment
/// reported applied is in the final value, none twice, and the final value exceeds them only
/// by increments reported as unknown.
/// A promotion with `max_lock_time(ZERO)` takes the lock only if it is free at once (as
/// Curator's `acquire(0, unit)`): with the lock held elsewhere, the operation fails without
/// an error (before, it ended with "use try_acquire()", a call the user never made).
#[tokio::test]
async fn a_promotion_of_no_time_tries_the_lock_once() {
    init_tracing();
    bounded(LIMIT, async {
        let connect = shared_connect().await;
        let path = unique_path("atomic", "promoted-zero");
        let lock = format!("{path}-lock");
        let holder = plain_framework(&connect, SESSION).await;
        let held = zk_recipes::InterProcessMutex::new(&holder, &lock).unwrap().acquire().await.unwrap();
        holder.create(&path).data(0i64.to_be_bytes().as_slice()).await.unwrap();
        let proxy = zk_recipes::testing::CountingProxy::start(&connect).await.expect("a proxy");
        let fw = plain_framework(&proxy.connect_string(), SESSION).await;
        let long = DistributedAtomicLong::with_promotion(
            &fw,
            &path,
            RetryNTimes::new(0, Duration::from_millis(1)),
            PromotedToLock::new(&lock).max_lock_time(Duration::ZERO),
        )
        .unwrap();
        // The one optimistic try is told its version moved on (-103: BadVersion), so the
        // operation goes to the lock.
        proxy.refuse_next("setData", -103);
        let result = long.increment().await.unwrap();
        assert!(!result.succeeded(), "{result:?}");
        assert_eq!((result.stats().optimistic_tries, result.stats().promoted_lock_tries), (1, 0));
        held.release().await.unwrap();
        fw.close().await;
        holder.delete(&path).await.unwrap();
        holder.close().await;
    })
    .await;
}

#[tokio::test]
async fn increments_through_a_breaking_connection_are_applied_once_or_reported_unknown() {
    init_tracing();
    bounded(LIMIT, async {
        const N: usize = 60;
        let faulty = Arc::new(FaultyServer::start().await);
        let path = unique_path("atomic", "faults");
        // Both sessions are open before the connection starts breaking (a start that keeps
        // being reset only times out).
        let mut frameworks = Vec::new();
        for _ in 0..2 {
            frameworks.push(framework(&faulty.proxied(), SESSION).await);
        }
        let stop = Arc::new(AtomicBool::new(false));
        let breaker = {
            let (stop, faulty) = (stop.clone(), faulty.clone());
            tokio::spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    tokio::time::sleep(Duration::from_millis(40)).await;
                    faulty.proxy.reset_connections();
                }
            })
        };
        let mut tasks = Vec::new();
        for fw in frameworks {
            let path = path.clone();
            tasks.push(tokio::spawn(async move {
                let long = DistributedAtomicLong::new(&fw, &path, patient()).unwrap();
                let (mut applied, mut unknown) = (0u64, 0u64);
                for _ in 0..N {
                    match long.increment().await {
                        Ok(result) if result.succeeded() => applied += 1,
                        Ok(result) => panic!("the policy gave up: {result:?}"),
                        Err(Error::OutcomeUnknown { .. }) => unknown += 1,
                        Err(e) => panic!("increment: {e}"),
                    }
                }
                fw.close().await;
                (applied, unknown)
            }));
        }
        let (mut applied, mut unknown) = (0, 0);
        for task in tasks {
            let (a, u) = task.await.unwrap();
            applied += a;
            unknown += u;
        }
        stop.store(true, Ordering::Relaxed);
        breaker.await.unwrap();
        let fw = plain_framework(&faulty.direct(), SESSION).await;
        let data = fw.get_data(&path).await.unwrap().0;
        let total = i64::from_be_bytes(data.try_into().unwrap()) as u64;
        eprintln!("applied {applied}, unknown {unknown}, final {total}");
        assert_eq!(applied + unknown, 2 * N as u64);
        assert!(total >= applied && total <= applied + unknown, "applied {applied}, unknown {unknown}, final {total}");
        fw.close().await;
    })
    .await;
}

/// Two Curator 5.4 processes and two Rust sessions increment one `DistributedAtomicLong`
/// N times each: the node ends at exactly 4N, and Curator reads the value Rust wrote.
#[tokio::test]
async fn curator_and_rust_incrementing_one_long_add_up_exactly() {
    use common::curator::CuratorPeer;
    use common::timing::INTEROP_SESSION;
    init_tracing();
    const N: usize = 30;
    bounded(common::timing::SLOW_LIMIT, async {
        let connect = shared_connect().await;
        let Some(mut java_a) = CuratorPeer::started(&connect, INTEROP_SESSION).await else { return };
        let Some(mut java_b) = CuratorPeer::started(&connect, INTEROP_SESSION).await else { return };
        let path = unique_path("atomic", "interop");
        java_a.send(&format!("atomic_incr A {path} {N}")).await.unwrap();
        java_b.send(&format!("atomic_incr B {path} {N}")).await.unwrap();
        let rust_a = tokio::spawn(increments(connect.clone(), path.clone(), N, None));
        let rust_b = tokio::spawn(increments(connect.clone(), path.clone(), N, None));
        let (rust_a, rust_b) = (rust_a.await.unwrap(), rust_b.await.unwrap());
        java_a.value_reply("atomic_incr A", LIMIT).await.unwrap();
        java_b.value_reply("atomic_incr B", LIMIT).await.unwrap();
        let fw = plain_framework(&connect, SESSION).await;
        assert_eq!(fw.get_data(&path).await.unwrap().0, (4 * N as i64).to_be_bytes());
        let mut rust_posts: Vec<i64> = rust_a.0.iter().chain(&rust_b.0).copied().collect();
        rust_posts.sort_unstable();
        rust_posts.dedup();
        assert_eq!(rust_posts.len(), 2 * N, "every Rust increment saw its own value");
        let seen = java_a.value_command(&format!("atomic_get A {path}"), LIMIT).await.unwrap();
        assert_eq!(seen, [(4 * N).to_string()]);
        fw.delete(&path).await.unwrap();
        fw.close().await;
        java_a.quit().await.unwrap();
        java_b.quit().await.unwrap();
    })
    .await;
}

/// The session expires while a session increments: every increment reported applied is in
/// the final value, none twice; those whose outcome the expiry left unknown are reported so.
#[tokio::test]
async fn increments_across_a_session_expiry_are_applied_once_or_reported_unknown() {
    use common::timing::{EVENT, FAULT_SESSION};
    init_tracing();
    bounded(LIMIT, async {
        const N: usize = 150;
        let faulty = FaultyServer::start().await;
        let path = unique_path("atomic", "expiry");
        let fw = framework(&faulty.proxied(), FAULT_SESSION).await;
        let worker = {
            let (fw, path) = (fw.clone(), path.clone());
            tokio::spawn(async move {
                let long = DistributedAtomicLong::new(&fw, &path, patient()).unwrap();
                let (mut applied, mut unknown) = (0u64, 0u64);
                for _ in 0..N {
                    match long.increment().await {
                        Ok(result) if result.succeeded() => applied += 1,
                        Ok(result) => panic!("the policy gave up: {result:?}"),
                        Err(Error::OutcomeUnknown { .. }) => unknown += 1,
                        Err(e) => panic!("increment: {e}"),
                    }
                }
                (applied, unknown)
            })
        };
        let observer = plain_framework(&faulty.direct(), SESSION).await;
        let value = |data: Vec<u8>| i64::from_be_bytes(data.try_into().unwrap()) as u64;
        eventually(EVENT, "a third of the increments", || async {
            match observer.get_data(&path).await {
                Ok((data, _)) if value(data.clone()) >= N as u64 / 3 => Ok(()),
                other => Err(format!("{other:?}")),
            }
        })
        .await;
        let before = fw.snapshot().epoch;
        faulty.expire(&fw, EVENT).await;
        assert!(fw.snapshot().epoch > before, "a new session");
        let (applied, unknown) = within(LIMIT, "the increments", worker).await.unwrap();
        let total = value(observer.get_data(&path).await.unwrap().0);
        eprintln!("applied {applied}, unknown {unknown}, final {total}");
        assert_eq!(applied + unknown, N as u64);
        assert!(total >= applied && total <= applied + unknown, "applied {applied}, unknown {unknown}, final {total}");
        observer.close().await;
        fw.close().await;
    })
    .await;
}
