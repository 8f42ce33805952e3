//! The state manager task: turns the client's session states into connection states, reports
//! `Lost` when `Suspended` outlasts the session timeout, and opens a new session after `Lost`.

use std::sync::{Arc, Weak};
use std::time::Duration;

use tokio::time::Instant;
use zookeeper_client::{SessionState, StateWatcher};

use super::session::{self, Session};
use super::state::{first_connection_rule, transition, ConnectionState, Observation};
use super::Inner;
use crate::retry::{RetryLoop, RetryPolicy};

pub(crate) async fn run(
    weak: Weak<Inner>,
    mut watcher: StateWatcher,
    mut current: ConnectionState,
    mut session_timeout: Duration,
) {
    let mut suspended_since: Option<Instant> = None;
    // `Connected` is sent once, for the first read-write connection (Curator's rule).
    let mut connected_sent = current == ConnectionState::Connected;
    loop {
        let observed = match suspended_since {
            Some(since) => tokio::select! {
                state = watcher.changed() => Observation::Session(state),
                () = tokio::time::sleep_until(since + session_timeout) => Observation::SuspendedTooLong,
            },
            None => Observation::Session(watcher.changed().await),
        };
        let Some(inner) = weak.upgrade() else { return };
        if inner.is_closed() {
            return;
        }
        tracing::debug!(?observed, ?current, "session observation");
        if current == ConnectionState::ReadOnly && observed == Observation::Session(SessionState::SyncConnected) {
            // The client left its read-only session for a new read-write one (a new id).
            if let Ok(session) = inner.session() {
                session.forget_id();
            }
        }
        let step = transition(current, observed);
        for state in step.emit {
            let state = first_connection_rule(state, connected_sent);
            connected_sent |= state == ConnectionState::Connected;
            inner.publish(state);
            current = state;
        }
        suspended_since = match current {
            ConnectionState::Suspended => suspended_since.or_else(|| Some(Instant::now())),
            _ => None,
        };
        if step.new_session {
            let Some(session) = open_new_session(&inner).await else { return };
            watcher = session.client.state_watcher();
            session_timeout = session.client.session_timeout();
            let read_only = watcher.state() == SessionState::ConnectedReadOnly;
            if !inner.install_session(session) {
                return; // closed meanwhile: the new session was dropped, which closes it
            }
            current = match read_only {
                true => ConnectionState::ReadOnly,
                false => first_connection_rule(ConnectionState::Reconnected, connected_sent),
            };
            connected_sent |= current == ConnectionState::Connected;
            inner.publish(current);
        }
    }
}

/// Opens the next session, retrying (with the retry policy's delays, starting over when it
/// gives up) until it succeeds or the framework closes.
async fn open_new_session(inner: &Inner) -> Option<Session> {
    let epoch = inner.epoch() + 1;
    let policy = Restarting(inner.config.retry_policy.clone());
    let mut retry = RetryLoop::new(&policy).stop_when(inner);
    let connect = || session::connect(&inner.config);
    match retry.run(connect, |_| true).await {
        Ok(client) => Some(Session::new(client, epoch)),
        Err(error) => {
            tracing::debug!(%error, "no new session: the framework closed");
            None
        }
    }
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
