//! Work that stops when leadership is lost (`Leadership::run`): the work's value when it
//! finishes; the work dropped and a `LockLost` naming the leader node when the leader's
//! session is expired mid-way, within the session timeout; and a caller that drops `run`
//! dropping the work with it while the term goes on.

use crate::common;

use std::sync::atomic::Ordering;

use common::fixtures::{bounded, endless_work, plain_framework, shared_connect, shared_framework, unique_path, within};
use common::timing::{EVENT, FAULT_SESSION, LIMIT, PROMPT};
use tokio::time::Instant;
use zk_recipes::testing::{expire_session, FaultProxy};
use zk_recipes::{Error, LeaderLatch};

/// Finished work returns its value; a dropped `run` drops the work and the term goes on (still
/// leading, the next `run` works).
#[tokio::test]
async fn finished_and_cancelled_work_leave_the_term_on() {
    bounded(LIMIT, async {
        let fw = shared_framework().await;
        let latch = LeaderLatch::new(&fw, &unique_path("leader-critical", "cancelled"), "a").unwrap();
        latch.start().unwrap();
        let leadership = within(EVENT, "leadership", latch.await_leadership()).await.unwrap();
        assert_eq!(leadership.run(async { 1 }).await, Ok(1));

        let (work, dropped, started) = endless_work();
        tokio::select! {
            _ = leadership.run(work) => panic!("the work cannot finish"),
            started = started => started.unwrap(),
        }
        assert!(dropped.load(Ordering::SeqCst), "dropping run() drops the work");
        assert!(leadership.is_leader() && latch.is_leader());
        assert_eq!(within(PROMPT, "more work", leadership.run(async { 2 })).await, Ok(2));
        latch.close().await.unwrap();
        fw.close().await;
    })
    .await;
}

/// The leader's session is expired on the server while its work runs: the work is dropped and
/// `run` fails with `LockLost` naming the leader node, within the session timeout of the
/// expiry's start.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_expired_mid_work_stops_it() {
    bounded(LIMIT, async {
        let direct = shared_connect().await;
        let proxy = FaultProxy::start(&direct).await.unwrap();
        let fw = plain_framework(&proxy.connect_string(), FAULT_SESSION).await;
        let latch = LeaderLatch::new(&fw, &unique_path("leader-critical", "expired"), "a").unwrap();
        latch.start().unwrap();
        let leadership = within(EVENT, "leadership", latch.await_leadership()).await.unwrap();

        let (work, dropped, started) = endless_work();
        let expire = async {
            started.await.unwrap();
            let began = Instant::now();
            let session = fw.zk_client().unwrap().session().clone();
            expire_session(&proxy, &direct, session).await.unwrap();
            began
        };
        let run = async {
            let outcome = leadership.run(work).await;
            (outcome, Instant::now())
        };
        let (began, (outcome, stopped)) = tokio::join!(expire, run);

        let lost = outcome.expect_err("the work cannot finish");
        assert_eq!(lost.path(), Some(leadership.node_path()));
        assert!(lost.to_string().contains("lock lost"), "{lost}");
        assert!(Error::from(lost).is_lock_lost());
        assert!(stopped.saturating_duration_since(began) < FAULT_SESSION, "stopped {:?} after", stopped - began);
        assert!(dropped.load(Ordering::SeqCst), "the work was not dropped");
        assert!(!leadership.is_leader());
        latch.close().await.unwrap();
        fw.close().await;
    })
    .await;
}
