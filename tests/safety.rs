//! The lock's promise under faults that single-fault tests miss: a holder is told before
//! anyone else can take its lock.
//!
//! - a reconnect whose handshake is answered and whose connection dies right after (a stale
//!   "connected");
//! - a client on a follower that is cut off from the leader;
//! - the whole ensemble paused for longer than the session timeout;
//! - the holder's own runtime starved for longer than the session timeout.
//!
//! Each test prints what it measured (`cargo test --test safety -- --nocapture`); the
//! assertions are about order, with margins derived from the configured session timeout.

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::fixtures::{bounded, children_count_becomes, framework, init_tracing, unique_path, wait_connected, within};
use tokio::time::Instant;
use zk_recipes::retry::RetryForever;
use zk_recipes::testing::{FaultProxy, ProxyMode, TestingServer};
use zk_recipes::{ConnectionState, ConnectionStateErrorPolicy, Framework, InterProcessMutex, MutexGuard};

/// Upper bound for each whole test.
const LIMIT: Duration = Duration::from_secs(120);
/// Bound for one asynchronous event that needs no timeout to pass.
const EVENT: Duration = Duration::from_secs(20);

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
