//! The lock's promise under faults that single-fault tests miss: a holder is told before
//! anyone else can take its lock.
//!
//! - a reconnect whose handshake is answered and whose connection dies right after (a stale
//!   "connected");
//! - a client on a follower that is cut off from the leader;
//! - the whole ensemble paused for longer than the session timeout;
//! - the holder's own runtime starved for longer than the session timeout.
//!
//! Each test prints what it measured (`cargo test --features testing --test locks -- --nocapture locks::safety::`); the
//! assertions are about order, with margins derived from the configured session timeout.

use crate::common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::fixtures::{
    bounded, children_count_becomes, framework, init_tracing, unique_path, wait_connected, wait_for_state, within,
};
use common::timing::{EVENT, SLOW_LIMIT as LIMIT};
use tokio::time::Instant;
use zk_recipes::retry::RetryForever;
use zk_recipes::testing::{FaultProxy, ProxyMode, TestingCluster, TestingServer};
use zk_recipes::{ConnectionState, ConnectionStateErrorPolicy, Framework, InterProcessMutex, MutexGuard};

fn path(name: &str) -> String {
    unique_path("safety", name)
}

/// Every change of a guard's `is_held()` and of its framework's state, with the time it was
/// seen (one monotonic clock), recorded by a task that follows the framework's state watch
/// (`is_held()` is a function of that state).
#[derive(Clone, Default)]
struct HoldLog {
    entries: Arc<Mutex<Vec<(Instant, bool, ConnectionState)>>>,
}

impl HoldLog {
    /// Starts recording `guard` on `fw`; the returned task ends when the framework closes.
    fn follow(fw: &Framework, guard: Arc<MutexGuard>) -> (HoldLog, tokio::task::JoinHandle<()>) {
        let log = HoldLog::default();
        let mut rx = fw.state_watch();
        let entries = log.entries.clone();
        let task = tokio::spawn(async move {
            loop {
                let state = rx.borrow_and_update().state;
                entries.lock().unwrap().push((Instant::now(), guard.is_held(), state));
                if state == ConnectionState::Lost || rx.changed().await.is_err() {
                    return;
                }
            }
        });
        (log, task)
    }

    fn entries(&self) -> Vec<(Instant, bool, ConnectionState)> {
        self.entries.lock().unwrap().clone()
    }

    /// When the guard stopped saying held for good before `at`: the start of the last
    /// not-held run before `at`. `None` if it said held at `at`.
    fn told_before(&self, at: Instant) -> Option<Instant> {
        let entries: Vec<_> = self.entries().into_iter().filter(|(t, _, _)| *t <= at).collect();
        if entries.last().map_or(true, |(_, held, _)| *held) {
            return None;
        }
        let last_held = entries.iter().rposition(|(_, held, _)| *held);
        Some(entries[last_held.map_or(0, |i| i + 1)].0)
    }

    /// Whether the guard said held again after it had once said not held (before `at`).
    fn held_again_before(&self, at: Instant) -> bool {
        let held: Vec<bool> = self.entries().into_iter().filter(|(t, _, _)| *t <= at).map(|(_, h, _)| h).collect();
        held.iter().skip_while(|h| **h).any(|h| *h)
    }

    /// When the framework first reported `state`.
    fn first(&self, state: ConnectionState) -> Option<Instant> {
        self.entries().into_iter().find(|(_, _, s)| *s == state).map(|(t, _, _)| t)
    }

    fn describe(&self, origin: Instant) -> String {
        self.entries()
            .iter()
            .map(|(t, held, state)| format!("{:+.2}s {state:?} held={held}", secs(*t, origin)))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// `t - origin` in seconds, negative when `t` is earlier.
fn secs(t: Instant, origin: Instant) -> f64 {
    if t >= origin {
        (t - origin).as_secs_f64()
    } else {
        -(origin - t).as_secs_f64()
    }
}

async fn policy_framework(connect: &str, session: Duration, policy: ConnectionStateErrorPolicy) -> Framework {
    Framework::builder(connect)
        .session_timeout(session)
        .error_policy(policy)
        .retry_policy(RetryForever::new(Duration::from_millis(50)))
        .start()
        .await
        .expect("starting a framework")
}

/// The stale "connected" hazard. The holder's network goes silent; the client notices
/// (`Suspended`) and reconnects; the proxy passes the server's answer to the reconnect
/// handshake, resets the connection right after it and refuses every later connect. The
/// server restarted the session's clock at the handshake, so another client gets the lock one
/// session timeout after it.
///
/// zookeeper-client reports `SyncConnected` on the handshake alone. The holder must not be
/// told "held" again over the dead connection: under the `Standard` policy the guard stays
/// not held from `Suspended` on (about 2/5 of the session timeout after the last contact), and
/// under `SessionOnly` the framework reports `Lost` before the other client acquires.
#[tokio::test]
async fn stale_connected_holder_is_told_before_another_client_acquires() {
    init_tracing();
    bounded(LIMIT, async {
        let session = Duration::from_secs(4);
        let server = TestingServer::start().await.unwrap();
        let other = framework(&server.connect_string(), session).await;
        let mut runs = Vec::new();
        for policy in [ConnectionStateErrorPolicy::Standard, ConnectionStateErrorPolicy::SessionOnly] {
            let proxy = FaultProxy::start(&server.connect_string()).await.unwrap();
            let holder = policy_framework(&proxy.connect_string(), session, policy).await;
            let path = path(&format!("stale-{policy:?}"));
            let guard = Arc::new(InterProcessMutex::new(&holder, &path).unwrap().acquire().await.unwrap());
            let waiter = {
                let mutex = InterProcessMutex::new(&other, &path).unwrap();
                tokio::spawn(async move {
                    let guard = mutex.acquire().await.unwrap();
                    (Instant::now(), guard)
                })
            };
            children_count_becomes(&other, &path, 2, EVENT).await;
            let (log, follower) = HoldLog::follow(&holder, guard.clone());
            runs.push((policy, proxy, holder, guard, waiter, log, follower));
        }
        let negotiated = runs[0].2.negotiated_session_timeout().unwrap();

        // The last real contact is at most this moment.
        let cut = Instant::now();
        for (_, proxy, ..) in &runs {
            proxy.set_mode(ProxyMode::HandshakeThenRefuse);
        }
        let mut failures = Vec::new();
        for (policy, proxy, holder, guard, waiter, log, follower) in runs {
            let handshake = within(negotiated * 2, "the reconnect handshake passing", proxy.handshake_passed()).await;
            let (stolen, stolen_guard) = within(negotiated * 3, "the other client acquiring", waiter).await.unwrap();
            let told = log.told_before(stolen);
            let lost = log.first(ConnectionState::Lost);
            eprintln!(
                "{policy:?}: handshake answered {:+.2}s after the cut; other client acquired {:+.2}s; \
                 holder told {}; framework Lost {}; log: {}",
                secs(handshake, cut),
                secs(stolen, cut),
                told.map_or("never".into(), |t| format!("{:+.2}s (margin {:.2}s)", secs(t, cut), secs(stolen, t))),
                lost.map_or("not before the steal".into(), |t| format!(
                    "{:+.2}s (margin {:.2}s)",
                    secs(t, cut),
                    secs(stolen, t)
                )),
                log.describe(cut),
            );
            match policy {
                ConnectionStateErrorPolicy::Standard => {
                    if log.held_again_before(stolen) {
                        failures.push(format!("{policy:?}: held again over a dead connection"));
                    }
                    match told {
                        None => failures.push(format!("{policy:?}: not told before the other client acquired")),
                        Some(told) if stolen - told < negotiated / 4 => failures.push(format!(
                            "{policy:?}: told only {:?} before the other client acquired",
                            stolen - told
                        )),
                        Some(told) if told - cut >= negotiated * 3 / 4 => {
                            failures.push(format!("{policy:?}: told {:?} after the cut", told - cut))
                        }
                        Some(_) => {}
                    }
                }
                _ => match lost.filter(|t| *t <= stolen) {
                    None => failures.push(format!("{policy:?}: no Lost before the other client acquired")),
                    Some(lost) if stolen - lost < negotiated / 8 => failures
                        .push(format!("{policy:?}: Lost only {:?} before the other client acquired", stolen - lost)),
                    Some(_) => {}
                },
            }
            // Back to normal: the holder gets a new session; the old guard stays lost.
            proxy.set_mode(ProxyMode::Pass);
            wait_connected(&holder, EVENT, 2).await;
            assert!(!guard.is_held());
            stolen_guard.release().await.unwrap();
            holder.close().await;
            within(EVENT, "the hold log ending", follower).await.unwrap();
            let guard = Arc::into_inner(guard).expect("the log task let go of the guard");
            guard.release().await.expect("releasing a guard whose session is gone");
        }
        other.close().await;
        assert!(failures.is_empty(), "{failures:#?}");
    })
    .await;
}

/// The isolated-follower hazard. A follower cut off from its leader keeps answering its
/// clients' pings for `syncLimit × tickTime`, while the leader, which hears nothing of those
/// sessions any more, may expire them one session timeout after the cut. Two holders connect
/// to that follower only: one with a session timeout below `syncLimit × tickTime`, one above.
/// Another client, on the leader, waits for each lock.
///
/// Below the rule the other client acquires before the holder hears anything (the hazard,
/// reproduced: nothing on the client side can tell it in time); above it the holder is told
/// first, with about the difference of the two as margin.
#[tokio::test]
async fn isolated_follower_tells_its_holder_in_time_only_when_the_session_outlasts_sync_limit() {
    init_tracing();
    bounded(LIMIT, async {
        let cluster = TestingCluster::builder().quorum_proxies(true).start().await.unwrap();
        cluster.settle(Duration::from_secs(60)).await.unwrap();
        let sync = cluster.sync_timeout();
        let leader = cluster.leader().await.expect("a leader");
        let follower = (0..cluster.len()).find(|&i| i != leader).unwrap();
        let other = framework(&cluster.server_connect_string(leader), sync * 2).await;
        let mut runs = Vec::new();
        for session in [sync * 3 / 5, sync * 2] {
            let holder = framework(&cluster.server_connect_string(follower), session).await;
            let negotiated = holder.negotiated_session_timeout().unwrap();
            assert_eq!(negotiated, session);
            let path = path(&format!("isolated-{}ms", session.as_millis()));
            let guard = Arc::new(InterProcessMutex::new(&holder, &path).unwrap().acquire().await.unwrap());
            let waiter = {
                let mutex = InterProcessMutex::new(&other, &path).unwrap();
                tokio::spawn(async move {
                    let guard = mutex.acquire().await.unwrap();
                    (Instant::now(), guard)
                })
            };
            children_count_becomes(&other, &path, 2, EVENT).await;
            let (log, follower_task) = HoldLog::follow(&holder, guard.clone());
            runs.push((session, holder, guard, waiter, log, follower_task));
        }

        let cut = Instant::now();
        cluster.isolate(follower).unwrap();
        let mut margins = Vec::new();
        let mut stolen_guards = Vec::new();
        for (session, holder, _, waiter, log, _) in &mut runs {
            let (stolen, stolen_guard) = within(sync * 4, "the other client acquiring", waiter).await.unwrap();
            stolen_guards.push(stolen_guard);
            let told =
                wait_for_state(holder, sync * 4, "the holder leaving the connected state", |s| !s.state.is_connected())
                    .await;
            let told_at = log.first(told.state).unwrap_or_else(Instant::now);
            eprintln!(
                "session {session:?} (syncLimit x tickTime {sync:?}): other client acquired {:+.2}s after the cut, \
                 holder told {:+.2}s: margin {:+.2}s; log: {}",
                secs(stolen, cut),
                secs(told_at, cut),
                secs(stolen, told_at),
                log.describe(cut)
            );
            margins.push((*session, secs(stolen, told_at)));
        }
        let (short, long) = (margins[0], margins[1]);
        assert!(short.1 < 0.0, "session {:?} < {sync:?}: expected the steal before the holder is told", short.0);
        assert!(
            long.1 >= (long.0 - sync).as_secs_f64() / 4.0,
            "session {:?} > {sync:?}: holder told only {:.2}s before the steal",
            long.0,
            long.1
        );

        cluster.heal(follower).unwrap();
        for ((_, holder, guard, _, _, log_task), stolen_guard) in runs.into_iter().zip(stolen_guards) {
            stolen_guard.release().await.unwrap();
            wait_connected(&holder, Duration::from_secs(60), 2).await;
            holder.close().await;
            within(EVENT, "the hold log ending", log_task).await.unwrap();
            Arc::into_inner(guard).expect("sole owner").release().await.unwrap();
        }
        other.close().await;
    })
    .await;
}

/// The whole ensemble paused (SIGSTOP) for longer than the session timeout while a lock is
/// held and another client waits, then resumed. The holder is told (`Suspended`, then `Lost`)
/// before the other client gets the lock, and never says held again.
#[tokio::test]
async fn whole_ensemble_paused_longer_than_the_session_holds_nothing_twice() {
    init_tracing();
    bounded(LIMIT, async {
        let session = Duration::from_secs(4);
        let cluster = TestingCluster::start().await.unwrap();
        cluster.settle(Duration::from_secs(60)).await.unwrap();
        let holder = framework(&cluster.connect_string(), session).await;
        let other = framework(&cluster.connect_string(), session).await;
        let negotiated = holder.negotiated_session_timeout().unwrap();
        let path = path("ensemble-paused");
        let guard = Arc::new(InterProcessMutex::new(&holder, &path).unwrap().acquire().await.unwrap());
        let token = guard.fencing_token();
        let waiter = {
            let mutex = InterProcessMutex::new(&other, &path).unwrap();
            tokio::spawn(async move {
                let guard = mutex.acquire().await.unwrap();
                (Instant::now(), guard)
            })
        };
        children_count_becomes(&other, &path, 2, EVENT).await;
        let (log, log_task) = HoldLog::follow(&holder, guard.clone());

        let paused = Instant::now();
        for i in 0..cluster.len() {
            cluster.pause(i).unwrap();
        }
        wait_for_state(&holder, negotiated * 2, "the holder suspended", |s| !s.state.is_connected()).await;
        tokio::time::sleep(negotiated * 3 / 2).await; // the outage under test
        for i in 0..cluster.len() {
            cluster.resume(i).unwrap();
        }
        let resumed = Instant::now();
        let (stolen, stolen_guard) = within(negotiated * 6, "the other client acquiring", waiter).await.unwrap();
        let told = log.told_before(stolen);
        eprintln!(
            "ensemble paused for {:.2}s: other client acquired {:+.2}s after the pause; holder told {}; log: {}",
            secs(resumed, paused),
            secs(stolen, paused),
            told.map_or("never".into(), |t| format!("{:+.2}s (margin {:.2}s)", secs(t, paused), secs(stolen, t))),
            log.describe(paused)
        );
        assert!(!log.held_again_before(stolen), "held again after the loss signal");
        let told = told.expect("the holder was told before the other client acquired");
        assert!(told < resumed, "told only after the ensemble came back");
        assert!(stolen_guard.fencing_token() > token);
        assert!(!guard.is_held());
        stolen_guard.release().await.unwrap();
        holder.close().await;
        within(EVENT, "the hold log ending", log_task).await.unwrap();
        Arc::into_inner(guard).expect("sole owner").release().await.unwrap();
        other.close().await;
    })
    .await;
}

/// What the holder saw the moment its runtime ran again.
#[derive(Debug)]
struct AfterStall {
    woke: Instant,
    is_held: bool,
    lost_ready: bool,
    state: ConnectionState,
}

/// The holder's own runtime starved: a `current_thread` runtime whose one thread the holder's
/// task blocks (`std::thread::sleep`) for longer than the session timeout, so neither the
/// client's pings nor the framework's task run. The server expires the session and another
/// client takes the lock meanwhile. The first thing the holder checks when it runs again must
/// say "not held" (`is_held()` false, `lost()` ready), before any of its tasks had a chance to
/// hear from the server.
#[tokio::test]
async fn starved_holder_runtime_says_not_held_when_it_runs_again() {
    init_tracing();
    bounded(LIMIT, async {
        let session = Duration::from_secs(2);
        let connect = common::fixtures::shared_connect().await;
        let path = path("starved");
        let other = framework(&connect, session).await;
        let (holding_tx, holding_rx) = tokio::sync::oneshot::channel::<i64>();
        let (queued_tx, queued_rx) = tokio::sync::oneshot::channel::<()>();
        let (after_tx, after_rx) = tokio::sync::oneshot::channel::<AfterStall>();
        let holder_thread = {
            let (connect, path) = (connect.clone(), path.clone());
            std::thread::spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
                runtime.block_on(async move {
                    let holder = framework(&connect, session).await;
                    let negotiated = holder.negotiated_session_timeout().unwrap();
                    let guard = InterProcessMutex::new(&holder, &path).unwrap().acquire().await.unwrap();
                    holding_tx.send(guard.fencing_token()).unwrap();
                    queued_rx.await.unwrap();
                    // The stall: nothing else on this runtime runs meanwhile.
                    std::thread::sleep(negotiated * 2);
                    let after = AfterStall {
                        woke: Instant::now(),
                        is_held: guard.is_held(),
                        lost_ready: futures::FutureExt::now_or_never(guard.lost()).is_some(),
                        state: holder.state(),
                    };
                    after_tx.send(after).unwrap();
                    within(negotiated * 4, "lost() after the stall", guard.lost()).await;
                    guard.release().await.unwrap();
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
        let (stolen, stolen_guard) = within(session * 4, "the other client acquiring", waiter).await.unwrap();
        let after = within(session * 4, "the holder waking", after_rx).await.unwrap();
        eprintln!(
            "holder stalled from {:+.2}s to {:+.2}s; other client acquired {:+.2}s; at wake: {after:?}",
            0.0,
            secs(after.woke, stall_started),
            secs(stolen, stall_started)
        );
        assert!(stolen < after.woke, "the other client acquired during the stall");
        assert!(stolen_guard.fencing_token() > token);
        assert!(!after.is_held, "the stalled holder said held while another client held the lock");
        assert!(after.lost_ready, "lost() was not ready at once after the stall");
        assert!(!after.state.is_connected(), "the framework said {:?} right after the stall", after.state);
        stolen_guard.release().await.unwrap();
        tokio::task::spawn_blocking(move || holder_thread.join()).await.unwrap().expect("holder thread");
        other.close().await;
    })
    .await;
}
