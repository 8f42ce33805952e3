//! `CachedAtomicLong` and `CachedAtomicInteger` against real servers: blocks reserved with one
//! write each on a `DistributedAtomicLong`'s node, values never handed out twice across
//! sessions, across Rust and Curator 5.4's `CachedAtomicLong`, and through a connection that
//! keeps breaking; bad block sizes refused.

use crate::common;

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::fixtures::*;
use common::timing::{LIMIT, SESSION};
use zk_recipes::retry::RetryUntilElapsed;
use zk_recipes::{CachedAtomicInteger, CachedAtomicLong, DistributedAtomicInteger, DistributedAtomicLong, Error};

fn patient() -> RetryUntilElapsed {
    RetryUntilElapsed::new(Duration::from_secs(30), Duration::from_millis(2))
}

/// `n` values from a `CachedAtomicLong` of `factor` on a session of its own.
async fn take(connect: String, path: String, factor: u32, n: usize) -> Vec<i64> {
    let fw = plain_framework(&connect, SESSION).await;
    let cached = CachedAtomicLong::new(DistributedAtomicLong::new(&fw, &path, patient()).unwrap(), factor).unwrap();
    let mut values = Vec::with_capacity(n);
    for _ in 0..n {
        let next = cached.next().await.unwrap();
        assert!(next.succeeded(), "{next:?}");
        assert_eq!(*next.post_value(), next.pre_value() + 1);
        values.push(*next.pre_value());
    }
    fw.close().await;
    values
}

#[tokio::test]
async fn blocks_are_reserved_with_one_add_and_handed_out_in_order() {
    init_tracing();
    bounded(LIMIT, async {
        let fw = plain_framework(&shared_connect().await, SESSION).await;
        let path = unique_path("cached", "blocks");
        let counter = DistributedAtomicLong::new(&fw, &path, patient()).unwrap();
        let cached = CachedAtomicLong::new(counter, 5).unwrap();
        assert_eq!(cached.remaining(), Some(0));
        let first = cached.next().await.unwrap();
        assert!(first.succeeded());
        assert_eq!((*first.pre_value(), *first.post_value()), (0, 1));
        assert_eq!(first.stats().optimistic_tries, 1, "the reservation's stats");
        assert_eq!(fw.get_data(&path).await.unwrap().0, 5i64.to_be_bytes(), "one block reserved");
        assert_eq!(cached.remaining(), Some(4));
        // Another process's increment between two blocks: the next block starts after it.
        DistributedAtomicLong::new(&fw, &path, patient()).unwrap().increment().await.unwrap();
        let mut values = vec![*first.pre_value()];
        for _ in 0..6 {
            let next = cached.next().await.unwrap();
            values.push(*next.pre_value());
        }
        assert_eq!(values, [0, 1, 2, 3, 4, 6, 7]);
        assert_eq!(fw.get_data(&path).await.unwrap().0, 11i64.to_be_bytes());

        // An integer: 4 bytes on the node, as Curator's CachedAtomicInteger.
        let int_path = format!("{path}-int");
        let int =
            CachedAtomicInteger::new(DistributedAtomicInteger::new(&fw, &int_path, patient()).unwrap(), 3).unwrap();
        let got: Vec<i32> = {
            let mut got = Vec::new();
            for _ in 0..4 {
                got.push(*int.next().await.unwrap().pre_value());
            }
            got
        };
        assert_eq!(got, [0, 1, 2, 3]);
        assert_eq!(fw.get_data(&int_path).await.unwrap().0, 6i32.to_be_bytes());
        fw.delete(&path).await.unwrap();
        fw.delete(&int_path).await.unwrap();
        fw.close().await;
    })
    .await;
}

#[tokio::test]
async fn bad_block_sizes_are_refused() {
    init_tracing();
    bounded(LIMIT, async {
        let fw = plain_framework(&shared_connect().await, SESSION).await;
        let path = unique_path("cached", "bad");
        let long = || DistributedAtomicLong::new(&fw, &path, patient()).unwrap();
        assert!(matches!(CachedAtomicLong::new(long(), 0), Err(Error::InvalidArgument { name: "cache_factor", .. })));
        assert!(CachedAtomicLong::new(long(), u32::MAX).is_ok(), "any u32 fits a long");
        let int = || DistributedAtomicInteger::new(&fw, &path, patient()).unwrap();
        assert!(matches!(
            CachedAtomicInteger::new(int(), i32::MAX as u32 + 1),
            Err(Error::InvalidArgument { name: "cache_factor", .. })
        ));
        assert!(fw.exists(&path).await.unwrap().is_none(), "nothing written");
        fw.close().await;
    })
    .await;
}

/// Three sessions take values from one counter in blocks of 7 at once: no value twice, and
/// the node holds the end of the blocks reserved.
#[tokio::test]
async fn sessions_sharing_a_counter_never_get_a_value_twice() {
    init_tracing();
    bounded(LIMIT, async {
        const N: usize = 100;
        let connect = shared_connect().await;
        let path = unique_path("cached", "shared");
        let tasks: Vec<_> = (0..3).map(|_| tokio::spawn(take(connect.clone(), path.clone(), 7, N))).collect();
        let mut all = Vec::new();
        for task in tasks {
            all.extend(task.await.unwrap());
        }
        let distinct: HashSet<i64> = all.iter().copied().collect();
        assert_eq!(distinct.len(), 3 * N, "no value handed out twice");
        let fw = plain_framework(&connect, SESSION).await;
        let end = i64::from_be_bytes(fw.get_data(&path).await.unwrap().0.try_into().unwrap());
        assert_eq!(end % 7, 0, "whole blocks reserved");
        assert_eq!(end, 3 * 7 * (N as i64 + 6).div_euclid(7), "each session reserved the blocks it needed");
        assert!(all.iter().all(|v| (0..end).contains(v)));
        fw.delete(&path).await.unwrap();
        fw.close().await;
    })
    .await;
}

/// The connection breaks again and again while two sessions take values: values handed out
/// are never repeated, and every reservation whose outcome was unknown only skipped values.
#[tokio::test]
async fn values_through_a_breaking_connection_are_never_repeated() {
    init_tracing();
    bounded(LIMIT, async {
        const N: usize = 150;
        let faulty = Arc::new(FaultyServer::start().await);
        let path = unique_path("cached", "faults");
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
                let counter = DistributedAtomicLong::new(&fw, &path, patient()).unwrap();
                let cached = CachedAtomicLong::new(counter, 4).unwrap();
                let (mut values, mut unknown) = (Vec::new(), 0u32);
                while values.len() < N {
                    match cached.next().await {
                        Ok(next) if next.succeeded() => values.push(*next.pre_value()),
                        Ok(next) => panic!("the policy gave up: {next:?}"),
                        Err(Error::OutcomeUnknown { .. }) => unknown += 1,
                        Err(e) => panic!("next: {e}"),
                    }
                }
                fw.close().await;
                (values, unknown)
            }));
        }
        let (mut all, mut unknown) = (Vec::new(), 0);
        for task in tasks {
            let (values, u) = task.await.unwrap();
            all.extend(values);
            unknown += u;
        }
        stop.store(true, Ordering::Relaxed);
        breaker.await.unwrap();
        let distinct: HashSet<i64> = all.iter().copied().collect();
        assert_eq!(distinct.len(), 2 * N, "no value handed out twice");
        let fw = plain_framework(&faulty.direct(), SESSION).await;
        let end = i64::from_be_bytes(fw.get_data(&path).await.unwrap().0.try_into().unwrap());
        eprintln!("{} values, {unknown} reservations unknown, counter at {end}", all.len());
        assert!(all.iter().all(|v| (0..end).contains(v)), "every value from a reserved block");
        assert!(end as usize <= 4 * (2 * N.div_ceil(4) + unknown as usize), "no more blocks than asked for");
        fw.close().await;
    })
    .await;
}

/// Two Curator 5.4 `CachedAtomicLong`s and two Rust ones take values from one counter at
/// once (Curator's `DistributedAtomicLong` layout): no value is handed out twice.
#[tokio::test]
async fn curator_and_rust_cached_longs_never_share_a_value() {
    use common::curator::CuratorPeer;
    use common::timing::{INTEROP_EVENT, INTEROP_SESSION};
    init_tracing();
    const N: usize = 60;
    bounded(common::timing::SLOW_LIMIT, async {
        let connect = shared_connect().await;
        let Some(mut java_a) = CuratorPeer::started(&connect, INTEROP_SESSION).await else { return };
        let Some(mut java_b) = CuratorPeer::started(&connect, INTEROP_SESSION).await else { return };
        let path = unique_path("cached", "interop");
        java_a.send(&format!("cached_next A {path} 5 {N}")).await.unwrap();
        java_b.send(&format!("cached_next B {path} 3 {N}")).await.unwrap();
        let rust_a = tokio::spawn(take(connect.clone(), path.clone(), 5, N));
        let rust_b = tokio::spawn(take(connect.clone(), path.clone(), 4, N));
        let mut all = rust_a.await.unwrap();
        all.extend(rust_b.await.unwrap());
        for reply in [
            java_a.value_reply("cached_next A", INTEROP_EVENT).await.unwrap(),
            java_b.value_reply("cached_next B", INTEROP_EVENT).await.unwrap(),
        ] {
            assert_eq!(reply.len(), N, "{reply:?}");
            all.extend(reply.iter().map(|v| v.parse::<i64>().unwrap()));
        }
        let distinct: HashSet<i64> = all.iter().copied().collect();
        assert_eq!(distinct.len(), 4 * N, "no value handed out twice across Rust and Java");
        let fw = plain_framework(&connect, SESSION).await;
        let end = i64::from_be_bytes(fw.get_data(&path).await.unwrap().0.try_into().unwrap());
        let blocks = |factor: i64| factor * (N as i64 + factor - 1).div_euclid(factor);
        assert_eq!(end, 2 * blocks(5) + blocks(3) + blocks(4), "each reserved exactly the blocks it needed");
        assert!(all.iter().all(|v| (0..end).contains(v)));
        fw.delete(&path).await.unwrap();
        fw.close().await;
        java_a.quit().await.unwrap();
        java_b.quit().await.unwrap();
    })
    .await;
}
