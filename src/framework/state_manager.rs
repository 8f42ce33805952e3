//! The state manager task: turns the client's session states into connection states, reports
//! `Lost` when `Suspended` outlasts the session timeout, and opens a new session after `Lost`.

use std::sync::Weak;
use std::time::Duration;

use tokio::time::Instant;
use zookeeper_client::StateWatcher;

use super::session::{self, Session};
use super::state::{first_connection_rule, transition, ConnectionState, Observation};
use super::Inner;

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
            let read_only = watcher.state() == zookeeper_client::SessionState::ConnectedReadOnly;
            inner.install_session(session);
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
    let started = Instant::now();
    let mut attempt = 0u32;
    loop {
        if inner.is_closed() {
            return None;
        }
        match session::connect(&inner.config).await {
            Ok(client) => return Some(Session { client, epoch }),
            Err(error) => {
                let delay = inner
                    .config
                    .retry_policy
                    .next_delay(attempt, started.elapsed())
                    .unwrap_or(Duration::from_secs(1))
                    .min(Duration::from_secs(5));
                tracing::debug!(%error, attempt, ?delay, "could not open a new session yet");
                attempt = attempt.saturating_add(1);
                tokio::time::sleep(delay).await;
            }
        }
    }
}
