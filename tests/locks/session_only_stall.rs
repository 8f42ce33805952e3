//! `ConnectionStateErrorPolicy::SessionOnly` trusts a lock through `Suspended`, so it must
//! report `Lost` in time by itself: once the last contact the framework can vouch for is a
//! session timeout old (less a client's silence, the time a silent connection takes to be
//! noticed), whether or not the framework's own task got to run. A holder whose runtime was
//! starved meanwhile must read "not held" the moment it runs again.

use crate::common;

use std::time::Duration;

use common::fixtures::{bounded, children_count_becomes, framework, init_tracing, unique_path, within};
use tokio::time::Instant;
use zk_recipes::retry::RetryForever;
use zk_recipes::{ConnectionState, ConnectionStateErrorPolicy, Framework, InterProcessMutex};

const LIMIT: Duration = Duration::from_secs(120);
const EVENT: Duration = Duration::from_secs(20);

/// What the holder saw the moment its runtime ran again, and right after its framework's task
/// had its turn.
#[derive(Debug)]
struct AfterStall {
    woke: Instant,
    is_held: bool,
    lost_ready: bool,
    state: ConnectionState,
    held_later: bool,
}

/// The holder's `current_thread` runtime is blocked (`std::thread::sleep`) for 2.5 session
/// timeouts while another client waits for the lock; the server expires the holder's session
/// and the other client acquires during the stall. Under `SessionOnly` the first check after
/// the stall must say not held (`is_held()` false, `lost()` ready, `state()` `Lost`), and it
/// must not say held again once the framework's task has caught up.
#[tokio::test]
async fn starved_holder_under_session_only_says_lost_when_it_runs_again() {
    init_tracing();
    bounded(LIMIT, async {
        let session = Duration::from_secs(2);
        let connect = common::fixtures::shared_connect().await;
        let path = unique_path("session-only-stall", "starved");
        let other = framework(&connect, session).await;
        let (holding_tx, holding_rx) = tokio::sync::oneshot::channel::<i64>();
        let (queued_tx, queued_rx) = tokio::sync::oneshot::channel::<()>();
        let (after_tx, after_rx) = tokio::sync::oneshot::channel::<AfterStall>();
        let holder_thread = {
            let (connect, path) = (connect.clone(), path.clone());
            std::thread::spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
                runtime.block_on(async move {
                    let holder = Framework::builder(&connect)
                        .session_timeout(session)
                        .error_policy(ConnectionStateErrorPolicy::SessionOnly)
                        .retry_policy(RetryForever::new(Duration::from_millis(50)))
                        .start()
                        .await
                        .expect("starting the holder's framework");
                    let negotiated = holder.negotiated_session_timeout().unwrap();
                    let guard = InterProcessMutex::new(&holder, &path).unwrap().acquire().await.unwrap();
                    holding_tx.send(guard.fencing_token()).unwrap();
                    queued_rx.await.unwrap();
                    // The stall: nothing else on this runtime runs meanwhile.
                    std::thread::sleep(negotiated * 5 / 2);
                    let woke = Instant::now();
                    let (is_held, state) = (guard.is_held(), holder.state());
                    let lost_ready = futures::FutureExt::now_or_never(guard.lost()).is_some();
                    // Let the framework's task run (it publishes what it finds), then look again.
                    let mut states = holder.state_watch();
                    let _ =
                        tokio::time::timeout(negotiated, states.wait_for(|s| s.state == ConnectionState::Lost)).await;
                    let held_later = guard.is_held();
                    after_tx.send(AfterStall { woke, is_held, lost_ready, state, held_later }).unwrap();
                    within(negotiated * 4, "lost() after the stall", guard.lost()).await;
                    drop(guard);
                    holder.close().await;
                })
            })
        };
        let token = within(EVENT, "the holder acquiring", holding_rx).await.unwrap();
        let waiter = {
            let mutex = InterProcessMutex::new(&other, &path).unwrap();
            tokio::spawn(async move {
                let guard = mutex.acquire().await.unwrap();
                (Instant::now(), guard)
            })
        };
        children_count_becomes(&other, &path, 2, EVENT).await;
        let stall_started = Instant::now();
        queued_tx.send(()).unwrap();
        let (stolen, stolen_guard) = within(session * 5, "the other client acquiring", waiter).await.unwrap();
        let after = within(session * 5, "the holder waking", after_rx).await.unwrap();
        eprintln!(
            "holder stalled from 0.00s to {:+.2}s; other client acquired {:+.2}s; at wake: {after:?}",
            (after.woke - stall_started).as_secs_f64(),
            (stolen - stall_started).as_secs_f64()
        );
        assert!(stolen < after.woke, "the other client acquired during the stall");
        assert!(stolen_guard.fencing_token() > token);
        assert!(!after.is_held, "the stalled SessionOnly holder said held while another client held the lock");
        assert!(after.lost_ready, "lost() was not ready at once after the stall");
        assert_eq!(after.state, ConnectionState::Lost, "the framework's state right after the stall");
        assert!(!after.held_later, "the guard said held again once the framework's task had run");
        stolen_guard.release().await.unwrap();
        tokio::task::spawn_blocking(move || holder_thread.join()).await.unwrap().expect("holder thread");
        other.close().await;
    })
    .await;
}
