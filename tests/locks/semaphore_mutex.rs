//! `InterProcessSemaphoreMutex` against a real ZooKeeper server: Curator's
//! `TestInterProcessSemaphoreMutex` beyond the base lock suite (which `conformance.rs`
//! runs over it, without reentrancy), release from another task, the holder's session ending,
//! and bad input.

use crate::common;

use std::time::Duration;

use common::fixtures::{
    bounded, children_count_becomes, plain_framework, semaphore_settles, shared_connect, unique_path,
};
use common::timing::{LIMIT, PROMPT, QUIET as BLOCKED, SESSION};
use tokio::time::timeout;
use zk_recipes::{Error, InterProcessSemaphoreMutex};

/// test2Clients: two clients exclude each other; the release lets the other in.
#[tokio::test]
async fn semaphore_mutex_two_clients() {
    bounded(LIMIT, async {
        let connect = shared_connect().await;
        let path = unique_path("sem", "semmutex-2clients");
        let (fw1, fw2) = (plain_framework(&connect, SESSION).await, plain_framework(&connect, SESSION).await);
        let m1 = InterProcessSemaphoreMutex::new(&fw1, &path).unwrap();
        let m2 = InterProcessSemaphoreMutex::new(&fw2, &path).unwrap();
        let g1 = m1.acquire().await.unwrap();
        assert!(m1.is_acquired_in_this_process() && !m2.is_acquired_in_this_process());
        let waiting = {
            let m2 = m2.clone();
            tokio::spawn(async move { m2.acquire().await })
        };
        assert!(timeout(BLOCKED, async {
            while !waiting.is_finished() {
                tokio::task::yield_now().await
            }
        })
        .await
        .is_err());
        assert_eq!(m1.participant_nodes().await.unwrap().len(), 2, "holder and waiter");
        g1.release().await.unwrap();
        assert!(!m1.is_acquired_in_this_process());
        let g2 = timeout(PROMPT, waiting).await.expect("other client gets it").unwrap().unwrap();
        assert!(m2.is_acquired_in_this_process());
        assert!(g2.lock_path().starts_with(&format!("{path}/leases/")));
        g2.release().await.unwrap();
        semaphore_settles(&fw1, &path, 0).await;
    })
    .await;
}

/// Not reentrant: the holding task's second acquire waits (times out); the lock is released
/// from another task (CURATOR-530).
#[tokio::test]
async fn semaphore_mutex_is_not_reentrant_and_releasable_anywhere() {
    bounded(LIMIT, async {
        let fw = plain_framework(&shared_connect().await, SESSION).await;
        let path = unique_path("sem", "semmutex-reentrant");
        let mutex = InterProcessSemaphoreMutex::new(&fw, &path).unwrap();
        let guard = mutex.acquire_timeout(PROMPT).await.unwrap().expect("locked");
        assert!(mutex.acquire_timeout(BLOCKED).await.unwrap().is_none(), "a second acquire waits");
        assert!(mutex.try_acquire().await.unwrap().is_none());
        assert!(guard.is_held());
        tokio::spawn(async move { guard.release().await }).await.unwrap().unwrap();
        assert!(!mutex.is_acquired_in_this_process());
        let again = mutex.try_acquire().await.unwrap().expect("free again");
        drop(again); // Drop releases in the background.
        assert!(!mutex.is_acquired_in_this_process());
        semaphore_settles(&fw, &path, 0).await;
    })
    .await;
}

/// testKilledSession-like: the holder's session ends (its framework is closed); a waiter of
/// another client gets the lock.
#[tokio::test]
async fn semaphore_mutex_holder_session_ends() {
    bounded(LIMIT, async {
        let connect = shared_connect().await;
        let path = unique_path("sem", "semmutex-session");
        let (fw1, fw2) = (plain_framework(&connect, SESSION).await, plain_framework(&connect, SESSION).await);
        let m1 = InterProcessSemaphoreMutex::new(&fw1, &path).unwrap();
        let m2 = InterProcessSemaphoreMutex::new(&fw2, &path).unwrap();
        let g1 = m1.acquire().await.unwrap();
        let waiting = tokio::spawn(async move { m2.acquire().await });
        children_count_becomes(&fw2, &format!("{path}/leases"), 2, PROMPT).await;
        fw1.close().await;
        let g2 = timeout(PROMPT, waiting).await.expect("waiter gets the lock").unwrap().unwrap();
        assert!(!g1.is_held(), "a closed framework holds nothing");
        drop(g1);
        g2.release().await.unwrap();
        semaphore_settles(&fw2, &path, 0).await;
    })
    .await;
}

/// Invalid paths and a zero timeout are typed errors, and nothing is created.
#[tokio::test]
async fn bad_input_gives_typed_errors() {
    bounded(LIMIT, async {
        let fw = plain_framework(&shared_connect().await, SESSION).await;
        let path = unique_path("semmutex", "bad-input");
        for bad in ["", "relative", "/trailing/", "/", "/a//b", "/zookeeper/x", "/a/./b"] {
            let e = InterProcessSemaphoreMutex::new(&fw, bad).unwrap_err();
            assert!(matches!(e, Error::InvalidPath { .. }), "{bad:?}: {e}");
        }
        let mutex = InterProcessSemaphoreMutex::new(&fw, &path).unwrap();
        let e = mutex.acquire_timeout(Duration::ZERO).await.map(drop).unwrap_err();
        assert!(matches!(e, Error::InvalidArgument { .. }), "{e}");
        assert!(fw.exists(&path).await.unwrap().is_none(), "nothing was created by the refused calls");
    })
    .await;
}
