//! The state manager task: turns the client's session states into connection states, confirms
//! every reconnect with a round trip before reporting it, reports `Lost` when no contact could
//! be vouched for during a whole session timeout, notices when its own runtime stalled, and
//! opens a new session after `Lost`.
//!
//! # Timing
//!
//! With `S` the negotiated session timeout (zookeeper-client's own timers derive from it the
//! same way, since the framework configures no client connection timeout):
//! - the simulated-expiry clock (`Lost` one `S` after it starts) starts at the first
//!   `Suspended` of an outage and is not restarted by a reconnect (`SyncConnected`): only a
//!   `sync` answered on the new connection ends the outage (each attempt bounded by the
//!   client's 2/5 `S` idle timeout);
//! - under [`ConnectionStateErrorPolicy::SessionOnly`], whose guards trust a lock until
//!   `Lost`, the clock starts earlier, at the last contact the framework can vouch for: the
//!   client notices a silent connection after 2/5 `S` without receiving anything, checked every
//!   `S`/20, so its last contact may lie up to 9/20 `S` before it reports `Disconnected`
//!   ([`Timing::silence`]), never before the last confirmed round trip. `Lost` then comes no
//!   later than the earliest moment the ensemble could expire the session. Under `Standard`
//!   (guards told at `Suspended`) the clock keeps Curator's start, so that a session survives
//!   an outage shorter than its timeout (a leader election that drops every client);
//! - the task beats every `S`/20; a gap of more than 3/10 `S` between two of its wake-ups means
//!   its runtime was starved or paused, and the connection is treated as possibly lost until a
//!   round trip confirms it; the simulated-expiry clock then starts at the last wake-up before
//!   the gap (the client had reported no trouble by then; under `SessionOnly`, a client's
//!   silence before it). [`Framework::snapshot`](super::Framework::snapshot) reports
//!   `Suspended` as soon as the beat is that late, before this task gets to run;
//! - with every beat the task tells the framework until when it vouches for the session: one
//!   `S` after the last contact it vouches for (while connected: now, less a client's silence
//!   under `SessionOnly`; while not: the start of the simulated-expiry clock). A reader that
//!   finds that moment passed reads `Lost` without waiting for this task, which reports `Lost`
//!   itself at the same moment once it runs;
//! - a session suspended for one beat (1/20 `S`, counted from the `Suspended`) on a client
//!   none of whose servers is a member of the tracked ensemble any more (they were replaced
//!   by a reconfiguration) is moved at once, without the round trip the old client would
//!   need to find that no server it knows serves any more (under `SessionOnly`, whose `Lost`
//!   comes about half an `S` after a dropped connection, that round trip left an attach
//!   during the election that follows a leader's removal too little time): a second client attaches to it through the
//!   current members (zookeeper-client cannot change a client's servers) and becomes the
//!   session's client (same epoch, same id); the move is reported as `Reconnected` once a
//!   round trip on it is answered. Tried again every tenth of `S` while it fails; an attach
//!   that finds the session expired is an expiry. The old client is kept until it ends by
//!   itself, or until the framework gives the session up (`Lost`, an expiry): then it is
//!   dropped, so that it closes the session at its next connection instead of keeping it
//!   (and the ephemeral nodes the framework has told its users are gone) open;
//! - the client's task serving the session is watched: if it ends without reporting a terminal
//!   state (it panicked, or the runtime it ran on shut down), the session is lost and a new one
//!   is opened.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Weak};
use std::time::Duration;

use tokio::time::{Instant, MissedTickBehavior};
use zookeeper_client::{Client, SessionState, StateWatcher};

use super::ensemble;
use super::inner::Inner;
use super::session::{self, Session};
use super::state::{
    first_connection_rule, transition, Confirm, ConnectionState, ConnectionStateErrorPolicy, Observation,
};
use crate::framework::metrics::Op;
use crate::retry::{RetryLoop, RetryPolicy};

/// The time spans the state manager works with, derived from the negotiated session timeout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Timing {
    /// The negotiated session timeout.
    pub(crate) session: Duration,
    /// How long the client may go without receiving anything before it reports
    /// `Disconnected`: its idle timeout (2/5) plus one of its timer ticks (1/20).
    pub(crate) silence: Duration,
    /// Bound of one confirming round trip: the client's idle timeout (2/5).
    pub(crate) round_trip: Duration,
    /// The heartbeat period (1/20).
    pub(crate) beat: Duration,
    /// A gap between wake-ups longer than this is a stall (3/10).
    pub(crate) stall: Duration,
}

impl Timing {
    pub(crate) fn of(session: Duration) -> Timing {
        Timing {
            session,
            silence: session * 9 / 20,
            round_trip: session * 2 / 5,
            beat: (session / 20).max(Duration::from_millis(1)),
            stall: session * 3 / 10,
        }
    }

    /// How long before the moment it can vouch for the client's last contact lies: under
    /// `SessionOnly`, whose guards trust a lock until `Lost`, a client's silence (the client
    /// reports a silent connection that late); under `Standard`, none (Curator's timing; the
    /// guards were told at `Suspended`).
    pub(crate) fn margin(&self, policy: ConnectionStateErrorPolicy) -> Duration {
        match policy {
            ConnectionStateErrorPolicy::SessionOnly => self.silence,
            _ => Duration::ZERO,
        }
    }
}

/// A confirming round trip in flight.
type Confirming = Pin<Box<dyn Future<Output = Result<(), zookeeper_client::Error>> + Send>>;

/// A second client attaching to the session through the ensemble's current members, with the
/// epoch of the session it attaches to.
type Moving = Pin<Box<dyn Future<Output = (u64, crate::error::Result<session::Connected>)> + Send>>;

/// What woke the task.
enum Wake {
    Session(SessionState),
    Confirm(Result<(), zookeeper_client::Error>),
    Expiry,
    Beat,
    /// The client's task serving the session is gone.
    TaskEnded,
    /// An attach to the session through the current members ended.
    Moved(u64, crate::error::Result<session::Connected>),
}

pub(crate) async fn run(
    weak: Weak<Inner>,
    mut watcher: StateWatcher,
    mut current: ConnectionState,
    session_timeout: Duration,
) {
    let mut timing = Timing::of(session_timeout);
    // `Connected` is sent once, for the first read-write connection (Curator's rule).
    let mut connected_sent = current == ConnectionState::Connected;
    // Opening the session took a round trip (zookeeper-client's connect waits for the answer
    // to a first ping).
    let mut last_confirmed = Instant::now();
    // While not connected: the last contact the framework vouches for (Lost comes one session
    // timeout after it).
    let mut unconfirmed_since: Option<Instant> = None;
    let mut confirming: Option<Confirming> = None;
    let mut heartbeat = tokio::time::interval(timing.beat);
    heartbeat.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut last_wake = Instant::now();
    let Some(mut task_end) = session_task_end(&weak) else { return };
    let mut moving: Option<Moving> = None;
    // When the current `Suspended` began (the move waits a round trip from there).
    let mut suspended_at: Option<Instant> = None;
    let mut last_move: Option<Instant> = None;
    // Clients the session moved away from, kept until they end by themselves or the
    // framework gives the session up (why both: the module docs, on moves).
    let mut retired: Vec<Session> = Vec::new();
    // A state the client reached before its watcher was taken: the watcher reports only
    // later changes.
    let mut missed = missed_state(&watcher, current);
    loop {
        let expiry = unconfirmed_since.map(|since| since + timing.session);
        let wake = match missed.take() {
            Some(state) => Wake::Session(state),
            None => tokio::select! {
                biased;
                () = sleep_until_some(expiry) => Wake::Expiry,
                state = watcher.changed() => Wake::Session(state),
                () = &mut task_end => Wake::TaskEnded,
                result = poll_confirming(&mut confirming) => Wake::Confirm(result),
                (epoch, result) = poll_moving(&mut moving) => Wake::Moved(epoch, result),
                _ = heartbeat.tick() => Wake::Beat,
            },
        };
        let Some(inner) = weak.upgrade() else { return };
        if inner.is_closed() {
            return;
        }
        let policy = inner.config.error_policy;
        let margin = timing.margin(policy);
        let now = Instant::now();
        let stalled_since = (now.saturating_duration_since(last_wake) > timing.stall).then_some(last_wake);
        last_wake = now;

        let mut observations = Vec::with_capacity(2);
        if let Some(since) = stalled_since {
            tracing::warn!(stalled = ?now - since, "the framework's task did not run for a while; confirming the connection");
            // The client had reported no trouble when this task last ran: the last contact
            // it vouches for is then (under `SessionOnly`, a client's silence before then).
            observations.push((Observation::Stalled, since.checked_sub(margin).unwrap_or(last_confirmed)));
        }
        // The last contact before a disconnect: under `SessionOnly`, whose guards trust the
        // lock until `Lost`, the earliest it can be (a client's silence back), so that `Lost`
        // comes before the ensemble can expire the session; under `Standard`, whose guards
        // were told at `Suspended`, the disconnect itself (Curator's timing), so that a
        // session survives an outage (a leader election) shorter than its timeout.
        let silent_since = now.checked_sub(margin).unwrap_or(last_confirmed);
        retired.retain(|old| !old.client.state().is_terminated() && !old.task_ended());
        // Suspended (for a beat: not a passing flap) on a client none of whose servers is a
        // member any more: attach to the session through the members the ensemble names now.
        // The old client cannot come back: every server it knows has left the ensemble. The
        // same after a quarter of the session timeout when the ensemble names members the
        // client was not given: its own servers may all have left before it heard so (a
        // member removed from the ensemble drops its clients at once, and the new
        // configuration may not have reached them first).
        let suspended_for = suspended_at.map_or(Duration::ZERO, |since| now.saturating_duration_since(since));
        let stuck = current == ConnectionState::Suspended
            && suspended_for >= timing.beat
            && !last_move.is_some_and(|at| now.saturating_duration_since(at) < timing.session / 10);
        if stuck && moving.is_none() {
            if let (Ok(session), Some(ensemble)) = (inner.session(), inner.ensemble.current()) {
                let unreachable = ensemble::has_left(session.hosts(), &ensemble)
                    || suspended_for >= timing.session / 4 && ensemble::has_others(session.hosts(), &ensemble);
                if inner.config.ensemble_tracking && inner.ensemble.followed() && unreachable {
                    last_move = Some(now);
                    moving = Some(attach(&inner, session));
                }
            }
        }
        match wake {
            Wake::Session(state) => {
                if matches!(state, SessionState::SyncConnected | SessionState::ConnectedReadOnly) {
                    // A new connection (a reconnect makes one): set TCP_NODELAY on it.
                    if let Ok(session) = inner.session() {
                        super::nodelay::after_connect(session.hosts());
                    }
                }
                if current == ConnectionState::ReadOnly && state == SessionState::SyncConnected {
                    // The client left its read-only session for a new read-write one (a new id).
                    if let Ok(session) = inner.session() {
                        session.forget_id();
                    }
                }
                observations.push((Observation::Session(state), silent_since))
            }
            Wake::TaskEnded => {
                tracing::warn!("the ZooKeeper client's session task is gone; the session is lost");
                observations.push((Observation::Session(SessionState::Closed), silent_since));
            }
            Wake::Expiry => observations.push((Observation::SuspendedTooLong, silent_since)),
            Wake::Moved(epoch, Ok(connected)) => {
                moving = None;
                match inner.session() {
                    Ok(old) if old.epoch == epoch => {
                        let moved = old.moved(connected);
                        let new_watcher = moved.client.state_watcher();
                        let new_task_end = Box::pin(moved.task_end());
                        let state = new_watcher.peek_state();
                        if inner.replace_client(moved) {
                            watcher = new_watcher;
                            task_end = new_task_end;
                            retired.push(old);
                            confirming = None;
                            observations.push((Observation::Session(state), silent_since));
                        }
                    }
                    _ => {} // another session meanwhile: the attached client is dropped
                }
            }
            Wake::Moved(epoch, Err(error)) => {
                moving = None;
                tracing::info!(%error, "could not move the session to the ensemble's current members");
                let expired = matches!(error, crate::error::Error::ZooKeeper(zookeeper_client::Error::SessionExpired));
                if expired && inner.epoch() == epoch {
                    observations.push((Observation::Session(SessionState::Expired), silent_since));
                }
            }
            Wake::Confirm(Ok(())) => {
                confirming = None;
                // A read-only server answered: the state goes back to `ReadOnly`.
                let confirmed = match watcher.peek_state() {
                    SessionState::ConnectedReadOnly => Observation::Session(SessionState::ConnectedReadOnly),
                    _ => Observation::Confirmed,
                };
                observations.push((confirmed, now));
            }
            Wake::Confirm(Err(error)) => {
                confirming = None;
                // Try again while the client says connected; otherwise its next `SyncConnected`
                // starts a new round trip.
                tracing::debug!(%error, "confirming round trip failed");
                if matches!(watcher.peek_state(), SessionState::SyncConnected | SessionState::ConnectedReadOnly) {
                    confirming = confirm(&inner, timing, timing.beat);
                }
            }
            Wake::Beat => {}
        }
        // The simulated expiry comes first: a session that could have expired on the ensemble
        // is reported lost even if a round trip is about to succeed.
        if expiry.is_some_and(|expiry| expiry <= now) && !observations.iter().any(|(o, _)| is_expiry(*o)) {
            observations.insert(0, (Observation::SuspendedTooLong, now));
        }

        // Each observation comes with the last contact it lets the framework vouch for.
        let mut new_session = false;
        for (observed, contact) in observations {
            tracing::debug!(?observed, ?current, "session observation");
            let step = transition(current, observed);
            if observed == Observation::Confirmed {
                last_confirmed = now;
            }
            let next = step.emit.last().copied().unwrap_or(current);
            unconfirmed_since = match next {
                // The clock keeps running through unconfirmed reconnects.
                ConnectionState::Suspended => Some(unconfirmed_since.unwrap_or(contact.max(last_confirmed))),
                _ => None,
            };
            // A contact whose session timeout is over (a stall that long): lost now.
            let overdue = unconfirmed_since.is_some_and(|since| since + timing.session <= now);
            let vouched = vouched_for(unconfirmed_since, last_confirmed, margin, timing, now);
            for state in step.emit {
                let state = first_connection_rule(state, connected_sent);
                connected_sent |= state == ConnectionState::Connected;
                inner.publish(state, vouched);
                current = state;
            }
            match step.confirm {
                Confirm::Keep => {}
                Confirm::Start => {
                    if confirming.is_none() {
                        confirming = confirm(&inner, timing, Duration::ZERO);
                    }
                }
                Confirm::Stop => confirming = None,
            }
            if overdue && !step.new_session {
                let step = transition(current, Observation::SuspendedTooLong);
                for state in step.emit {
                    inner.publish(state, Duration::ZERO);
                    current = state;
                }
                new_session = true;
                break;
            }
            if step.new_session {
                new_session = true;
                break;
            }
        }
        suspended_at = match current {
            ConnectionState::Suspended => Some(suspended_at.unwrap_or(now)),
            _ => None,
        };
        if !new_session {
            inner.beat(vouched_for(unconfirmed_since, last_confirmed, margin, timing, Instant::now()));
            continue;
        }
        moving = None;
        suspended_at = None;
        // The session is given up: the clients it moved from are let go (see `retired`).
        if !retired.is_empty() {
            let session = inner.session().map_or(0, |s| s.id());
            tracing::debug!(
                session = format_args!("{session:#x}"),
                clients = retired.len(),
                "giving the session up: letting go of the clients it moved from"
            );
        }
        retired.clear();
        let Some(session) = open_new_session(&inner).await else { return };
        watcher = session.client.state_watcher();
        timing = Timing::of(session.client.session_timeout());
        task_end = Box::pin(session.task_end());
        let read_only = watcher.state() == SessionState::ConnectedReadOnly;
        // Opening the session took a round trip: it is vouched for a whole session timeout.
        if !inner.install_session(session, timing.stall, timing.session) {
            return; // closed meanwhile: the new session was dropped, which closes it
        }
        current = match read_only {
            true => ConnectionState::ReadOnly,
            false => first_connection_rule(ConnectionState::Reconnected, connected_sent),
        };
        connected_sent |= current == ConnectionState::Connected;
        inner.publish(current, timing.session);
        last_confirmed = Instant::now();
        last_wake = last_confirmed;
        unconfirmed_since = None;
        confirming = None;
        heartbeat = tokio::time::interval(timing.beat);
        heartbeat.set_missed_tick_behavior(MissedTickBehavior::Delay);
        missed = missed_state(&watcher, current);
    }
}

/// The client's state now when it is not the one `published` stands for (the connection
/// broke after the state was read): the state manager takes it as the first change.
fn missed_state(watcher: &StateWatcher, published: ConnectionState) -> Option<SessionState> {
    let expected = match published {
        ConnectionState::ReadOnly => SessionState::ConnectedReadOnly,
        _ => SessionState::SyncConnected,
    };
    let state = watcher.peek_state();
    (state != expected).then_some(state)
}

/// How long from `now` the framework vouches for the session: one session timeout after the
/// last contact it vouches for (the start of the simulated-expiry clock while not connected;
/// now less `margin`, and never before the last confirmed round trip, while connected).
fn vouched_for(
    unconfirmed_since: Option<Instant>,
    last_confirmed: Instant,
    margin: Duration,
    timing: Timing,
    now: Instant,
) -> Duration {
    let contact = unconfirmed_since.unwrap_or_else(|| now.checked_sub(margin).unwrap_or(now).max(last_confirmed));
    (contact + timing.session).saturating_duration_since(now)
}

/// The end of the current session's task, pinned; `None` when the framework is gone.
fn session_task_end(weak: &Weak<Inner>) -> Option<Pin<Box<dyn Future<Output = ()> + Send>>> {
    let inner = weak.upgrade()?;
    let end: Pin<Box<dyn Future<Output = ()> + Send>> = match inner.session() {
        Ok(session) => Box::pin(session.task_end()),
        Err(_) => Box::pin(std::future::pending()),
    };
    Some(end)
}

fn is_expiry(observation: Observation) -> bool {
    matches!(observation, Observation::SuspendedTooLong)
}

/// Sleeps until `deadline`; pending forever without one.
async fn sleep_until_some(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

/// The outcome of the round trip in flight; pending forever without one.
async fn poll_confirming(confirming: &mut Option<Confirming>) -> Result<(), zookeeper_client::Error> {
    match confirming {
        Some(round_trip) => round_trip.await,
        None => std::future::pending().await,
    }
}

/// The outcome of the attach in flight; pending forever without one.
async fn poll_moving(moving: &mut Option<Moving>) -> (u64, crate::error::Result<session::Connected>) {
    match moving {
        Some(attach) => attach.await,
        None => std::future::pending().await,
    }
}

/// Attaches a second client to `session` through the current members (see
/// [`session::attach`]).
fn attach(inner: &Inner, session: Session) -> Moving {
    let config = inner.config.clone();
    let hosts = inner.connect_string();
    tracing::info!(
        session = format_args!("{:#x}", session.id()),
        from = %session.hosts(),
        to = %hosts,
        "moving the session to the members the ensemble names now"
    );
    Box::pin(async move {
        let epoch = session.epoch;
        (epoch, session::attach(&config, &hosts, &session).await)
    })
}

/// Sends a `sync` on the current session after `delay`, bounded by one round-trip timeout.
/// A `sync` goes through the ensemble's leader, so its answer also shows that the member we
/// talk to still follows one. A read-only server refuses every `sync` (`NotReadOnly`): on a
/// read-only connection an `exists` of the root confirms it instead. `None` when there is no
/// session (closing).
fn confirm(inner: &Inner, timing: Timing, delay: Duration) -> Option<Confirming> {
    let session = inner.session().ok()?;
    let client: Client = session.client.clone();
    let read_only = client.state() == SessionState::ConnectedReadOnly;
    session.sent(if read_only { Op::Exists } else { Op::Sync });
    Some(Box::pin(async move {
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
        let answered = async {
            if read_only {
                client.check_stat("/").await.map(drop)
            } else {
                client.sync("/").await
            }
        };
        match tokio::time::timeout(timing.round_trip, answered).await {
            Ok(result) => result,
            Err(_) => Err(zookeeper_client::Error::ConnectionLoss),
        }
    }))
}

/// Opens the next session, retrying (with the retry policy's delays, starting over when it
/// gives up) until it succeeds or the framework closes.
async fn open_new_session(inner: &Arc<Inner>) -> Option<Session> {
    let epoch = inner.epoch() + 1;
    let policy = Restarting(inner.config.retry_policy.clone());
    let abandoned = Abandoned(inner);
    let mut retry = RetryLoop::new(&policy).stop_when(&abandoned);
    // The members last seen, so that a client given servers that have since left the
    // ensemble finds its new members.
    let connect = || async {
        let hosts = inner.connect_string();
        tracing::debug!(%hosts, "opening a new session");
        session::connect(&inner.config, &hosts).await
    };
    match retry.run(connect, |_| true).await {
        Ok(connected) => Some(Session::new(connected, epoch, inner.observer.clone())),
        Err(error) => {
            tracing::debug!(%error, "no new session: the framework closed");
            None
        }
    }
}

/// Ends the search for a new session once the framework is closed, or once nothing but this
/// task holds it (every handle dropped without `close()`): a session opened then would only be
/// dropped.
struct Abandoned<'a>(&'a Arc<Inner>);

impl crate::retry::Ends for Abandoned<'_> {
    fn has_ended(&self) -> bool {
        self.0.is_closed() || Arc::strong_count(self.0) == 1
    }

    // A try to open a session is no request tried again: `retries_total` does not count it.
}

/// The framework's policy for opening a new session, which never gives up (a framework
/// without a session is useless): when the policy would give up it starts over, and no sleep
/// is longer than 5 s, so the session is back soon after the ensemble is.
#[derive(Debug)]
struct Restarting(Arc<dyn RetryPolicy>);

impl RetryPolicy for Restarting {
    fn next_delay(&self, attempt: u32, elapsed: Duration) -> Option<Duration> {
        let delay = self.0.next_delay(attempt, elapsed).unwrap_or(Duration::from_secs(1));
        Some(delay.min(Duration::from_secs(5)))
    }
}

#[cfg(test)]
mod tests {
    use super::{vouched_for, Timing};
    use crate::framework::ConnectionStateErrorPolicy;
    use std::time::Duration;
    use tokio::time::Instant;

    #[test]
    fn the_session_is_vouched_for_one_timeout_after_the_last_contact() {
        let t = Timing::of(Duration::from_secs(4));
        let now = Instant::now() + Duration::from_secs(60);
        let long_ago = now - Duration::from_secs(30);
        // Connected, Standard: the contact is now.
        let standard = t.margin(ConnectionStateErrorPolicy::Standard);
        assert_eq!(vouched_for(None, long_ago, standard, t, now), Duration::from_secs(4));
        // Connected, SessionOnly: a client's silence back, unless a round trip was answered since.
        let session_only = t.margin(ConnectionStateErrorPolicy::SessionOnly);
        assert_eq!(vouched_for(None, long_ago, session_only, t, now), Duration::from_millis(2200));
        let just_confirmed = now - Duration::from_millis(100);
        assert_eq!(vouched_for(None, just_confirmed, session_only, t, now), Duration::from_millis(3900));
        // Suspended: one timeout after the start of the clock, whatever the policy; none left
        // once that is over.
        let since = now - Duration::from_secs(1);
        assert_eq!(vouched_for(Some(since), long_ago, session_only, t, now), Duration::from_secs(3));
        assert_eq!(vouched_for(Some(long_ago), long_ago, standard, t, now), Duration::ZERO);
    }

    #[test]
    fn timing_derives_from_the_session_timeout() {
        let t = Timing::of(Duration::from_secs(4));
        assert_eq!(t.silence, Duration::from_millis(1800));
        assert_eq!(t.round_trip, Duration::from_millis(1600));
        assert_eq!(t.beat, Duration::from_millis(200));
        assert_eq!(t.stall, Duration::from_millis(1200));
        // The silence the client allows is shorter than the session: Lost never precedes the
        // disconnect it follows.
        assert!(t.silence < t.session && t.stall > t.beat);
    }
}
