//! `InterProcessSemaphore::with_count`: a semaphore whose number of leases is a `SharedCount`'s
//! value (Curator's `InterProcessSemaphoreV2(client, path, SharedCountReader)`). Raising the
//! count wakes the waiting contender; lowering it revokes nothing and admits nobody new until
//! the holders are below it; Rust and Curator 5.4 contenders share the pool and the count.

use crate::common;

use common::curator::CuratorPeer;
use common::fixtures::*;
use common::timing::{EVENT, INTEROP_SESSION, LIMIT, QUIET, SESSION, SLOW_LIMIT};
use zk_recipes::{InterProcessSemaphore, SharedCount};

#[tokio::test]
async fn the_count_in_force_admits_and_a_lower_count_revokes_nothing() {
    init_tracing();
    bounded(LIMIT, async {
        let connect = shared_connect().await;
        let fw = plain_framework(&connect, SESSION).await;
        let operator = plain_framework(&connect, SESSION).await;
        let base = unique_path("semcount", "local");
        let (path, count_path) = (format!("{base}/sem"), format!("{base}/count"));
        let count = SharedCount::new(&fw, &count_path, 2).unwrap();
        count.start().await.unwrap();
        let knob = SharedCount::new(&operator, &count_path, 99).unwrap();
        knob.start().await.unwrap();
        assert_eq!(knob.count().unwrap(), 2, "the first seed stays");
        let semaphore = InterProcessSemaphore::with_count(&fw, &path, &count).unwrap();
        assert_eq!(semaphore.max_leases(), 2);

        let a = semaphore.acquire().await.unwrap();
        let b = semaphore.acquire().await.unwrap();
        assert!(semaphore.try_acquire().await.unwrap().is_none(), "two of two");
        let waiter = {
            let semaphore = semaphore.clone();
            tokio::spawn(async move { semaphore.acquire().await })
        };
        tokio::time::sleep(QUIET).await;
        assert!(!waiter.is_finished());
        knob.set(3).await.unwrap();
        let c = within(EVENT, "the waiter after the count was raised", waiter).await.unwrap().unwrap();

        // Lowered to 1 with three held: nobody loses a lease, nobody new gets in.
        knob.set(1).await.unwrap();
        eventually(EVENT, "the lower count", || async {
            if semaphore.max_leases() == 1 {
                Ok(())
            } else {
                Err(semaphore.max_leases().to_string())
            }
        })
        .await;
        assert!(a.is_held() && b.is_held() && c.is_held());
        a.release().await.unwrap();
        b.release().await.unwrap();
        assert!(semaphore.try_acquire().await.unwrap().is_none(), "one held, one allowed");
        let waiter = {
            let semaphore = semaphore.clone();
            tokio::spawn(async move { semaphore.acquire().await })
        };
        tokio::time::sleep(QUIET).await;
        assert!(!waiter.is_finished());
        c.release().await.unwrap();
        let d = within(EVENT, "the waiter once the holders fell below the count", waiter).await.unwrap().unwrap();
        d.release().await.unwrap();

        // A count below 1 admits nobody.
        knob.set(0).await.unwrap();
        eventually(EVENT, "the zero count", || async {
            if semaphore.max_leases() == 0 {
                Ok(())
            } else {
                Err(semaphore.max_leases().to_string())
            }
        })
        .await;
        assert!(semaphore.try_acquire().await.unwrap().is_none());
        operator.close().await;
        fw.close().await;
    })
    .await;
}

/// Curator's SharedCount-sized semaphore and ours on one path and one count: the count set from
/// Rust wakes a Curator waiter, and the count set from Curator lets a Rust contender in.
#[tokio::test]
async fn rust_and_curator_share_a_pool_sized_by_one_count() {
    init_tracing();
    bounded(SLOW_LIMIT, async {
        let connect = shared_connect().await;
        let Some(mut java) = CuratorPeer::started(&connect, INTEROP_SESSION).await else { return };
        let fw = plain_framework(&connect, SESSION).await;
        let base = unique_path("semcount", "interop");
        let (path, count_path) = (format!("{base}/sem"), format!("{base}/count"));
        let count = SharedCount::new(&fw, &count_path, 1).unwrap();
        count.start().await.unwrap();
        let semaphore = InterProcessSemaphore::with_count(&fw, &path, &count).unwrap();
        java.command(&format!("semaphore_count J {path} {count_path}")).await.unwrap();

        let ours = semaphore.acquire().await.unwrap();
        assert_eq!(java.command("acquire J 500").await.unwrap(), "timeout J", "one of one held by Rust");
        java.send("acquire J").await.unwrap();
        tokio::time::sleep(QUIET).await;
        assert!(java.take_buffered("acquired J").is_none());
        count.set(2).await.unwrap();
        java.wait_for("acquired J", EVENT).await.unwrap();
        assert!(semaphore.try_acquire().await.unwrap().is_none(), "two of two");

        java.value_command(&format!("count_set K {count_path} 3"), LIMIT).await.unwrap();
        let third = eventually(EVENT, "a lease under the count Curator raised", || async {
            match semaphore.try_acquire().await.unwrap() {
                Some(lease) => Ok(lease),
                None => Err(format!("count {}", semaphore.max_leases())),
            }
        })
        .await;
        assert_eq!(semaphore.participant_nodes().await.unwrap().len(), 3);
        third.release().await.unwrap();
        ours.release().await.unwrap();
        assert_eq!(java.command("release J").await.unwrap(), "released J");
        fw.close().await;
        java.quit().await.unwrap();
    })
    .await;
}
