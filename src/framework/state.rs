//! Connection states (Curator 5 semantics), snapshots, the error policy, and the pure
//! transition function the state manager runs.

use zookeeper_client::SessionState;

/// The framework's view of its connection, as Curator 5 reports it.
///
/// | state | meaning |
/// | --- | --- |
/// | `Connected` | first connection of this framework (sent once) |
/// | `Suspended` | connection lost; the session may still be alive; locks are uncertain |
/// | `Reconnected` | connected again after `Suspended`, `Lost` or `ReadOnly` |
/// | `Lost` | the session is gone (expired, or suspended for a whole session timeout); every lock and ephemeral node of it is gone; a new session follows |
/// | `ReadOnly` | connected to a read-only server (only with `can_be_read_only(true)`) |
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ConnectionState {
    /// The first successful connection of this framework.
    Connected,
    /// The connection was lost; the session may still be alive.
    Suspended,
    /// Connected again after `Suspended`, `Lost` or `ReadOnly`.
    Reconnected,
    /// The session is gone; a new session is being opened.
    Lost,
    /// Connected to a read-only server.
    ReadOnly,
}

impl ConnectionState {
    /// True for `Connected`, `Reconnected` and `ReadOnly` (Curator's `isConnected`).
    pub fn is_connected(self) -> bool {
        matches!(self, Self::Connected | Self::Reconnected | Self::ReadOnly)
    }

    /// True when, under `policy`, this state means a held lock can no longer be trusted.
    pub fn is_error_state(self, policy: ConnectionStateErrorPolicy) -> bool {
        match policy {
            ConnectionStateErrorPolicy::Standard => matches!(self, Self::Suspended | Self::Lost),
            ConnectionStateErrorPolicy::SessionOnly => self == Self::Lost,
        }
    }
}

/// A connection state with the session it applies to.
///
/// `epoch` counts sessions: it is 1 for the framework's first session and grows by one with
/// every new session opened after a `Lost`. A consumer that missed events still sees from the
/// epoch that the session changed (and with it, every lock).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct StateSnapshot {
    /// The connection state.
    pub state: ConnectionState,
    /// The ZooKeeper session id (0 while no session exists).
    pub session_id: i64,
    /// Which session of this framework this is (1 for the first; 0 before the first).
    pub epoch: u64,
}

/// Which connection states count as "the lock may be lost" for guards' `lost()` and
/// `is_held()` (Curator's `ConnectionStateErrorPolicy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum ConnectionStateErrorPolicy {
    /// `Suspended` and `Lost` (the default, and the safe choice: after `Suspended` another
    /// process may get the lock before this one hears that its session expired).
    #[default]
    Standard,
    /// Only `Lost`.
    SessionOnly,
}

/// What the state manager observed about the current session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Observation {
    /// The client reported a session state.
    Session(SessionState),
    /// `Suspended` lasted a whole session timeout (Curator's simulated expiry).
    SuspendedTooLong,
}

/// What the state manager must do after an observation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Transition {
    /// States to publish, in order.
    pub(crate) emit: Vec<ConnectionState>,
    /// The session is gone: open a new one.
    pub(crate) new_session: bool,
}

/// The state machine, as a pure function of the last published state and an observation.
///
/// A `SyncConnected` seen while already connected means the client's latest-value watcher
/// folded a `Disconnected`/`SyncConnected` pair into one: report the flap as `Suspended` then
/// `Reconnected` rather than hide it.
pub(crate) fn transition(current: ConnectionState, observed: Observation) -> Transition {
    use ConnectionState::*;
    let emit = |states: &[ConnectionState]| Transition { emit: states.to_vec(), new_session: false };
    match observed {
        Observation::Session(SessionState::Disconnected) => match current {
            Suspended | Lost => emit(&[]),
            _ => emit(&[Suspended]),
        },
        Observation::Session(SessionState::SyncConnected) => match current {
            Suspended | Lost | ReadOnly => emit(&[Reconnected]),
            Connected | Reconnected => emit(&[Suspended, Reconnected]),
        },
        Observation::Session(SessionState::ConnectedReadOnly) => match current {
            ReadOnly => emit(&[]),
            _ => emit(&[ReadOnly]),
        },
        Observation::Session(SessionState::Expired | SessionState::AuthFailed | SessionState::Closed)
        | Observation::SuspendedTooLong => {
            let emit = if current == Lost { vec![] } else { vec![Lost] };
            Transition { emit, new_session: true }
        }
    }
}

/// Curator sends `Connected` once, for the first read-write connection: until it has been
/// sent (a read-only start), a `Reconnected` is reported as `Connected`.
pub(crate) fn first_connection_rule(state: ConnectionState, connected_sent: bool) -> ConnectionState {
    match state {
        ConnectionState::Reconnected if !connected_sent => ConnectionState::Connected,
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::ConnectionState::*;
    use super::*;

    fn t(current: ConnectionState, s: SessionState) -> Vec<ConnectionState> {
        transition(current, Observation::Session(s)).emit
    }

    #[test]
    fn disconnect_suspends_once() {
        assert_eq!(t(Connected, SessionState::Disconnected), [Suspended]);
        assert_eq!(t(Reconnected, SessionState::Disconnected), [Suspended]);
        assert_eq!(t(ReadOnly, SessionState::Disconnected), [Suspended]);
        assert!(t(Suspended, SessionState::Disconnected).is_empty());
        assert!(t(Lost, SessionState::Disconnected).is_empty());
    }

    #[test]
    fn reconnect_and_coalesced_flap() {
        assert_eq!(t(Suspended, SessionState::SyncConnected), [Reconnected]);
        assert_eq!(t(ReadOnly, SessionState::SyncConnected), [Reconnected]);
        assert_eq!(t(Connected, SessionState::SyncConnected), [Suspended, Reconnected]);
        assert_eq!(t(Reconnected, SessionState::SyncConnected), [Suspended, Reconnected]);
    }

    #[test]
    fn expiry_and_simulated_expiry_lose_the_session() {
        for s in [SessionState::Expired, SessionState::AuthFailed, SessionState::Closed] {
            let tr = transition(Suspended, Observation::Session(s));
            assert_eq!(tr.emit, [Lost]);
            assert!(tr.new_session);
        }
        let tr = transition(Suspended, Observation::SuspendedTooLong);
        assert_eq!(tr, Transition { emit: vec![Lost], new_session: true });
        // already Lost: no duplicate event, but still a new session
        let tr = transition(Lost, Observation::Session(SessionState::Expired));
        assert!(tr.emit.is_empty() && tr.new_session);
    }

    #[test]
    fn connected_is_sent_once_for_the_first_read_write_connection() {
        assert_eq!(first_connection_rule(Reconnected, false), Connected);
        assert_eq!(first_connection_rule(Reconnected, true), Reconnected);
        assert_eq!(first_connection_rule(ReadOnly, false), ReadOnly);
        assert_eq!(first_connection_rule(Suspended, false), Suspended);
    }

    #[test]
    fn read_only() {
        assert_eq!(t(Suspended, SessionState::ConnectedReadOnly), [ReadOnly]);
        assert!(t(ReadOnly, SessionState::ConnectedReadOnly).is_empty());
    }

    #[test]
    fn error_policy() {
        assert!(Suspended.is_error_state(ConnectionStateErrorPolicy::Standard));
        assert!(!Suspended.is_error_state(ConnectionStateErrorPolicy::SessionOnly));
        assert!(Lost.is_error_state(ConnectionStateErrorPolicy::SessionOnly));
        assert!(!Reconnected.is_error_state(ConnectionStateErrorPolicy::Standard));
        assert!(ReadOnly.is_connected() && !Lost.is_connected());
    }
}
