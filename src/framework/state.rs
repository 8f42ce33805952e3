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
///
/// # How the framework decides them
/// `Reconnected` is reported only once a round trip (a `sync`) has been answered on the new
/// connection: zookeeper-client says "connected" as soon as the server answers the reconnect
/// handshake, which a connection that dies right after it would otherwise leave standing.
/// `Lost` also comes when an outage lasts a whole negotiated session timeout (Curator's
/// simulated expiry), counted from the first `Suspended`; reconnects that no round trip
/// confirmed do not restart the count. Under
/// [`SessionOnly`](crate::ConnectionStateErrorPolicy::SessionOnly) it counts from the last
/// contact the framework can vouch for instead (a silent connection is only noticed after 2/5
/// of the timeout), so that `Lost` comes before the ensemble can expire the session. If the
/// framework's background task does not get to run for 3/10 of the session timeout (a starved
/// or paused runtime), `state()` and guards' `is_held()` read `Suspended` at once and the
/// connection is confirmed again before `Reconnected`; once the last contact it vouched for is
/// a whole session timeout old (under `SessionOnly`, counted from a client's silence before
/// its last run, so after 11/20 of the timeout), they read `Lost`. A session whose client task
/// is gone (it panicked, or the runtime it was started on shut down) reads `Lost` too. Quick
/// disconnect/reconnect flaps that the client folds into one state change are still reported
/// as `Suspended` then `Reconnected`.
///
/// `ReadOnly` needs `can_be_read_only(true)` and servers with `readonlymode.enabled=true`
/// **and** `localSessionsEnabled=true` (read-only sessions are local sessions; without it a
/// ZooKeeper 3.8 read-only member refuses them). As in Curator, a session that starts on a
/// read-only member reports `ReadOnly`, and its first read-write connection reports
/// `Connected`. A session that started read-write is not moved to a read-only member
/// (zookeeper-client's rule): it stays `Suspended` until a quorum is back or the session is
/// lost.
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

impl StateSnapshot {
    /// Whether session `epoch` is over as of this snapshot: another session replaced it, or
    /// it was lost.
    pub(crate) fn session_over(&self, epoch: u64) -> bool {
        self.epoch != epoch || self.state == ConnectionState::Lost
    }
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
    /// A round trip to the ensemble was answered (a `sync` sent after the client reported
    /// `SyncConnected`): the session is alive and the connection carries requests.
    Confirmed,
    /// The framework's own task did not run for a while (a starved or paused runtime): its
    /// view of the connection is out of date.
    Stalled,
    /// No contact for a whole session timeout (Curator's simulated expiry).
    SuspendedTooLong,
}

/// What to do about confirming the connection with a round trip.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Confirm {
    /// Leave it as it is (a round trip in flight stays in flight).
    Keep,
    /// Send a round trip (unless one is in flight) and report `Reconnected` when it is answered.
    Start,
    /// Drop any round trip in flight: the connection it was sent on is gone.
    Stop,
}

/// What the state manager must do after an observation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Transition {
    /// States to publish, in order.
    pub(crate) emit: Vec<ConnectionState>,
    /// The session is gone: open a new one.
    pub(crate) new_session: bool,
    /// Whether to confirm the connection.
    pub(crate) confirm: Confirm,
}

/// The state machine, as a pure function of the last published state and an observation.
///
/// `SyncConnected` alone never makes the framework connected again: zookeeper-client 0.11.2
/// reports it as soon as the server answers the reconnect handshake, before any request went
/// through, and a connection that dies right after the handshake goes on reading
/// "connected" while the client backs off between connect attempts. So `SyncConnected` after
/// `Suspended` starts a confirming round trip, and `Reconnected` is published only when it is
/// answered. A `SyncConnected` seen while already connected means the client's latest-value
/// watcher folded a `Disconnected`/`SyncConnected` pair into one: report the flap as
/// `Suspended` and confirm before `Reconnected`.
pub(crate) fn transition(current: ConnectionState, observed: Observation) -> Transition {
    use ConnectionState::*;
    let step = |states: &[ConnectionState], confirm: Confirm| Transition {
        emit: states.to_vec(),
        new_session: false,
        confirm,
    };
    match observed {
        Observation::Session(SessionState::Disconnected) => match current {
            Suspended | Lost => step(&[], Confirm::Stop),
            _ => step(&[Suspended], Confirm::Stop),
        },
        Observation::Session(SessionState::SyncConnected) => match current {
            Suspended | Lost | ReadOnly => step(&[], Confirm::Start),
            Connected | Reconnected => step(&[Suspended], Confirm::Start),
        },
        Observation::Session(SessionState::ConnectedReadOnly) => match current {
            ReadOnly => step(&[], Confirm::Stop),
            _ => step(&[ReadOnly], Confirm::Stop),
        },
        Observation::Confirmed => match current {
            Suspended | Lost | ReadOnly => step(&[Reconnected], Confirm::Stop),
            Connected | Reconnected => step(&[], Confirm::Stop),
        },
        Observation::Stalled => match current {
            Suspended | Lost => step(&[], Confirm::Keep),
            Connected | Reconnected | ReadOnly => step(&[Suspended], Confirm::Start),
        },
        Observation::Session(SessionState::Expired | SessionState::AuthFailed | SessionState::Closed)
        | Observation::SuspendedTooLong => {
            let emit = if current == Lost { vec![] } else { vec![Lost] };
            Transition { emit, new_session: true, confirm: Confirm::Stop }
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
    fn sync_connected_alone_never_reconnects() {
        // A reconnect handshake is answered: nothing is published until a round trip confirms it.
        for from in [Suspended, Lost, ReadOnly] {
            let tr = transition(from, Observation::Session(SessionState::SyncConnected));
            assert!(tr.emit.is_empty(), "{from:?}: {:?}", tr.emit);
            assert_eq!(tr.confirm, Confirm::Start);
            assert!(!tr.new_session);
        }
        // A folded Disconnected/SyncConnected pair: Suspended now, Reconnected after the round trip.
        for from in [Connected, Reconnected] {
            let tr = transition(from, Observation::Session(SessionState::SyncConnected));
            assert_eq!(tr.emit, [Suspended]);
            assert_eq!(tr.confirm, Confirm::Start);
        }
    }

    #[test]
    fn a_confirmed_round_trip_reconnects() {
        assert_eq!(transition(Suspended, Observation::Confirmed).emit, [Reconnected]);
        assert_eq!(transition(ReadOnly, Observation::Confirmed).emit, [Reconnected]);
        assert!(transition(Reconnected, Observation::Confirmed).emit.is_empty());
        assert!(transition(Connected, Observation::Confirmed).emit.is_empty());
    }

    #[test]
    fn disconnect_drops_a_confirmation_in_flight() {
        for from in [Suspended, Connected, Reconnected, ReadOnly] {
            assert_eq!(transition(from, Observation::Session(SessionState::Disconnected)).confirm, Confirm::Stop);
        }
    }

    #[test]
    fn a_stall_suspends_until_confirmed() {
        for from in [Connected, Reconnected, ReadOnly] {
            let tr = transition(from, Observation::Stalled);
            assert_eq!((tr.emit, tr.confirm), (vec![Suspended], Confirm::Start));
        }
        let tr = transition(Suspended, Observation::Stalled);
        assert_eq!((tr.emit, tr.confirm), (vec![], Confirm::Keep));
    }

    #[test]
    fn expiry_and_simulated_expiry_lose_the_session() {
        for s in [SessionState::Expired, SessionState::AuthFailed, SessionState::Closed] {
            let tr = transition(Suspended, Observation::Session(s));
            assert_eq!(tr.emit, [Lost]);
            assert!(tr.new_session);
        }
        let tr = transition(Suspended, Observation::SuspendedTooLong);
        assert_eq!(tr, Transition { emit: vec![Lost], new_session: true, confirm: Confirm::Stop });
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
