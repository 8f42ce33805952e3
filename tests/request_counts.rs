//! Server requests per operation, counted by a proxy that reads the protocol's frames: a
//! regression in round trips or requests fails here, where a timing could not be asserted.

mod common;

use std::time::Duration;

use common::fixtures::*;
use zk_recipes::testing::{four_letter_word, CountingProxy, RequestCounts};
use zk_recipes::{Framework, InterProcessMutex, InterProcessSemaphore};

const LIMIT: Duration = Duration::from_secs(60);
/// Long enough that no ping falls into a measurement (pings are not counted anyway).
const SESSION: Duration = Duration::from_secs(60);
const CYCLES: u64 = 20;

/// Keeps `dir` from being reaped between cycles (an empty container is removed by the server
/// at any time, and re-creating it costs requests): a persistent child that sorts after every
/// sequence number, so it is never ahead of a lock node.
async fn pin(fw: &Framework, dir: &str) -> String {
    fw.create(&format!("{dir}/~pin"), b"", zk_recipes::zk::CreateMode::Persistent).await.expect("pin")
}

async fn counted() -> (CountingProxy, Framework) {
    let proxy = CountingProxy::start(&shared_connect().await).await.expect("counting proxy");
    let fw = plain_framework(&proxy.connect_string(), SESSION).await;
    (proxy, fw)
}

/// Counts per kind over `cycles` operations must be exactly `expected` (kind, per op). Pings
/// depend on idle time and round trips on the kernel (see `RequestCounts`), so neither is
/// compared.
fn assert_per_op(counts: &RequestCounts, cycles: u64, expected: &[(&str, u64)], what: &str) {
    let got: Vec<(&str, u64)> = counts.iter().filter(|(kind, _)| !matches!(*kind, "ping" | "round-trip")).collect();
    let want: Vec<(&str, u64)> = expected.iter().map(|(kind, n)| (*kind, n * cycles)).collect();
    assert_eq!(got, want, "{what}: requests over {cycles} operations ({})", counts.per_op(cycles as usize));
}

/// An uncontended acquire is the create with the listing right behind it (one round trip);
/// the release is the delete: three requests per cycle, awaited or dropped.
#[tokio::test]
async fn uncontended_mutex_cycle_costs_three_requests() {
    init_tracing();
    bounded(LIMIT, async {
        let (proxy, fw) = counted().await;
        let path = unique_path("counts", "mutex");
        let pinned = pin(&fw, &path).await;
        let mutex = InterProcessMutex::new(&fw, &path).unwrap();
        let before = proxy.counts();
        for _ in 0..CYCLES {
            mutex.acquire().await.unwrap().release().await.unwrap();
        }
        let awaited = proxy.counts().since(&before);
        assert_per_op(&awaited, CYCLES, &[("create2", 1), ("delete", 1), ("getChildren", 1)], "awaited release");

        let before = proxy.counts();
        for _ in 0..CYCLES {
            drop(mutex.acquire().await.unwrap());
        }
        eventually(LIMIT, "the last background delete", || async {
            match fw.pending_deletes() {
                0 => Ok(()),
                n => Err(format!("{n} pending")),
            }
        })
        .await;
        let dropped = proxy.counts().since(&before);
        assert_per_op(&dropped, CYCLES, &[("create2", 1), ("delete", 1), ("getChildren", 1)], "drop-style release");
        fw.delete(&pinned).await.unwrap();
        fw.close().await;
    })
    .await;
}

/// A waiter right behind the holder: create + listing, then the predecessor's and its own
/// node's data watches in one round trip; on the holder's delete it takes the lock without
/// listing again, and keeps its own node's watch (no RemoveWatches).
#[tokio::test]
async fn contended_handoff_costs_the_waiter_four_requests() {
    init_tracing();
    bounded(LIMIT, async {
        let path = unique_path("counts", "handoff");
        let holder_fw = plain_framework(&shared_connect().await, SESSION).await;
        let holder = InterProcessMutex::new(&holder_fw, &path).unwrap().acquire().await.unwrap();
        let (proxy, fw) = counted().await;
        let mutex = InterProcessMutex::new(&fw, &path).unwrap();
        let before = proxy.counts();
        let waiter = tokio::spawn(async move { mutex.acquire().await.unwrap() });
        // Release only once the server holds the waiter's watch on the holder's node.
        let server = shared_connect().await;
        eventually(LIMIT, "the waiter watching the holder", || async {
            let watches = four_letter_word(&server, "wchp", LIMIT).await.map_err(|e| e.to_string())?;
            let holder_node = watches.lines().any(|line| line.trim() == holder.lock_path());
            if holder_node {
                Ok(())
            } else {
                Err(watches)
            }
        })
        .await;
        holder.release().await.unwrap();
        let guard = waiter.await.unwrap();
        let acquisition = proxy.counts().since(&before);
        assert_per_op(
            &acquisition,
            1,
            &[("create2", 1), ("getChildren", 1), ("getData+watch", 2), ("watch-event", 1)],
            "a waiter's acquisition",
        );
        guard.release().await.unwrap();
        holder_fw.close().await;
        fw.close().await;
    })
    .await;
}

/// An uncontended semaphore lease: the internal lock's create and listing, the lease's create
/// and watched listing, the internal lock's delete; the lease's delete on release, whose
/// notification fires the listing's watch (kept with the lease, so no RemoveWatches).
#[tokio::test]
async fn uncontended_semaphore_lease_costs_six_requests() {
    init_tracing();
    bounded(LIMIT, async {
        let (proxy, fw) = counted().await;
        let path = unique_path("counts", "semaphore");
        let pins = [pin(&fw, &format!("{path}/locks")).await, pin(&fw, &format!("{path}/leases")).await];
        let semaphore = InterProcessSemaphore::new(&fw, &path, 3).unwrap();
        let before = proxy.counts();
        for _ in 0..CYCLES {
            semaphore.acquire().await.unwrap().release().await.unwrap();
        }
        let leases = proxy.counts().since(&before);
        assert_per_op(
            &leases,
            CYCLES,
            &[("create2", 2), ("delete", 2), ("getChildren", 1), ("getChildren+watch", 1), ("watch-event", 1)],
            "a semaphore lease",
        );
        for pinned in pins {
            fw.delete(&pinned).await.unwrap();
        }
        fw.close().await;
    })
    .await;
}
