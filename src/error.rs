//! The crate's one error type and its classification predicates.

use std::time::Duration;

/// The ZooKeeper client's error (public as `zk_recipes::zk::Error`).
pub(crate) use zookeeper_client::Error as ZkError;

/// A `Result` whose error is [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in this crate.
///
/// Errors from ZooKeeper itself arrive as [`Error::ZooKeeper`] with the client's own error
/// (`zk_recipes::zk::Error`) inside, so a caller can match exact server codes. The predicates
/// name the cases callers test for: one code each ([`is_no_node`](Error::is_no_node),
/// [`is_node_exists`](Error::is_node_exists), [`is_bad_version`](Error::is_bad_version),
/// [`is_connection_loss`](Error::is_connection_loss), [`is_session_expired`](Error::is_session_expired),
/// [`is_lock_lost`](Error::is_lock_lost), ...) and the classes that decide what to do next
/// ([`is_connection_error`](Error::is_connection_error), [`is_session_lost`](Error::is_session_lost),
/// [`is_retryable`](Error::is_retryable)).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An error reported by ZooKeeper or by the ZooKeeper client.
    #[error(transparent)]
    ZooKeeper(#[from] ZkError),

    /// A ZooKeeper path argument is not valid.
    #[error("invalid path {path:?}: {reason}")]
    InvalidPath {
        /// The path as given.
        path: String,
        /// What is wrong with it.
        reason: &'static str,
    },

    /// The connect string is empty or malformed.
    #[error("invalid connect string {connect_string:?}: {reason}")]
    InvalidConnectString {
        /// The connect string as given.
        connect_string: String,
        /// What is wrong with it.
        reason: String,
    },

    /// Some other argument is out of range (zero leases, zero timeout, ...).
    #[error("invalid argument `{name}`: {reason}")]
    InvalidArgument {
        /// The argument's name.
        name: &'static str,
        /// What is wrong with it.
        reason: String,
    },

    /// The framework was closed; nothing more can be done with it.
    #[error("framework is closed")]
    Closed,

    /// The framework was built but `start()` has not completed.
    #[error("framework is not started")]
    NotStarted,

    /// No connection to ZooKeeper within the allowed time.
    #[error("not connected to zookeeper within {0:?}")]
    ConnectionTimeout(Duration),

    /// The lock or lease is no longer held (its node is gone or its session ended).
    #[error("lock {path} is no longer held")]
    LockLost {
        /// The lock node's path.
        path: String,
    },

    /// The task holds the read lock of a read-write lock and asked for its write lock. The
    /// write node would queue behind the task's own read node and wait for it forever
    /// (Curator's acquire hangs there), so the request is refused before anything is sent.
    /// Release the read lock first, or take the write lock first and downgrade.
    #[error("upgrade refused on {path}: the task holds the read lock; release it before taking the write lock")]
    UpgradeRefused {
        /// The read-write lock's path.
        path: String,
    },

    /// A request would be larger than the server accepts (its `jute.maxbuffer`, by default
    /// 1 MiB). The server would drop the connection on every try, suspending every lock of
    /// the process, so it is refused before anything is sent.
    #[error("{name} is {size} bytes; the request limit leaves room for {limit}")]
    TooLarge {
        /// What is too large (`data`, `path`).
        name: &'static str,
        /// Its size in bytes.
        size: usize,
        /// The most it may have.
        limit: usize,
    },

    /// A [`LeaderLatch`](crate::LeaderLatch) or [`LeaderSelector`](crate::LeaderSelector) is
    /// not taking part in its election: it was not started yet, or it was closed.
    #[error("the leader election handle on {path} is {reason}")]
    NotInElection {
        /// The election path.
        path: String,
        /// `"not started"` or `"closed"`.
        reason: &'static str,
    },

    /// A request whose outcome cannot be known was not sent again: the connection broke while a
    /// sequential create (without protection) or a transaction was in flight, so it may have
    /// been applied on the server, or not. Sending it again could apply it twice (a second
    /// sequential node), so it is reported instead; read the state back to find out, or use a
    /// protected create, which finds its node after a connection loss.
    #[error("the outcome of {operation} on {path} is unknown: the connection broke while it was in flight ({error})")]
    OutcomeUnknown {
        /// What was sent (`create`, `transaction`).
        operation: &'static str,
        /// The path (namespace stripped; a transaction's first path).
        path: String,
        /// The connection error (or, for a create sent again, the `NodeExists` it found).
        error: ZkError,
    },

    /// A compare-and-set found another version: the node at `path` is not at version
    /// `expected` (someone else changed it since it was read).
    #[error("{path} is not at version {expected}")]
    BadVersion {
        /// The path (namespace stripped).
        path: String,
        /// The version the operation expected.
        expected: i32,
    },

    /// One operation of a transaction was refused, so none was applied.
    #[error("transaction operation {index} (on {path}) failed: {error}")]
    TransactionFailed {
        /// The failing operation's index, in the order the operations were added (a fence's
        /// check counts as an operation).
        index: usize,
        /// Its path (namespace stripped).
        path: String,
        /// The server's refusal.
        error: ZkError,
    },

    /// The server does not offer what the request needs (a TTL node on a server without
    /// `extendedTypesEnabled`, ...). Nothing was created.
    #[error("the server does not support {feature}: {reason}")]
    Unsupported {
        /// The feature (`ttl`, ...).
        feature: &'static str,
        /// What to do about it.
        reason: &'static str,
    },

    /// A recipe's node holds bytes its layout does not allow (a counter that is not exactly 4
    /// or 8 big-endian bytes, a queue item that is not Curator's item framing, ...). Nothing
    /// was written.
    #[error("{path} holds data that is not a valid {expected}: {reason}")]
    CorruptData {
        /// The node's path (namespace stripped).
        path: String,
        /// What the recipe expected there (`4-byte count`, `8-byte long`, ...).
        expected: &'static str,
        /// What is wrong with it.
        reason: String,
    },

    /// An acquire kept losing its node (the session ended, or someone deleted the node) and
    /// the retry policy gave up starting over.
    #[error("gave up acquiring {path} after {attempts} fresh attempts: its node kept vanishing")]
    RetriesExhausted {
        /// The lock path (namespace stripped).
        path: String,
        /// How many times the acquire started over.
        attempts: u32,
    },

    /// An operation breaks a rule of the framework's schema set (Curator's `SchemaViolation`);
    /// nothing was sent.
    #[error("schema violation at {path}: {violation}{}", schema.as_deref().map(|s| format!(" (schema {s:?})")).unwrap_or_default())]
    SchemaViolation {
        /// The name of the schema whose rule it breaks (`None` when no schema matches the
        /// path and the set has no default).
        schema: Option<String>,
        /// The path of the operation, without the namespace.
        path: String,
        /// The rule broken, in Curator's words (`Cannot be deleted`, `Must be ephemeral`, ...).
        violation: String,
    },

    /// A migration set does not match what is recorded as applied under its id, or its lock
    /// was not taken in time (curator-x-async's `MigrationException`).
    #[error("migration set {id}: {reason}")]
    Migration {
        /// The migration set's id.
        id: String,
        /// What is wrong.
        reason: String,
    },

    /// The lock directory's sequence counter wrapped past 2,147,483,647 creates: ZooKeeper now
    /// hands out negative suffixes, which sort ahead of older nodes, so the queue's order says
    /// nothing (Curator peers would misread it). The acquire fails, deleting its node. The
    /// counter starts over once the directory is deleted (an empty container is reaped) and
    /// created again.
    #[error("the sequence numbers of lock directory {path} wrapped past 2^31-1; its queue order cannot be trusted")]
    SequenceWrapped {
        /// The lock path (namespace stripped).
        path: String,
    },

    /// The ensemble refused a reconfiguration ([`Framework::reconfig`](crate::Framework::reconfig)).
    #[error("reconfiguration refused: {refusal}")]
    ReconfigRefused {
        /// Why.
        refusal: ReconfigRefusal,
    },
}

/// Why the ensemble refused a reconfiguration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ReconfigRefusal {
    /// The servers run without `reconfigEnabled=true`.
    #[error("dynamic reconfiguration is disabled on the ensemble (reconfigEnabled=false)")]
    Disabled,
    /// The session may not reconfigure: only the superuser may (or anyone on servers with
    /// `skipACL=yes`).
    #[error("not authorized: reconfiguration needs the superuser (or servers with skipACL=yes)")]
    NotAuthorized,
    /// The configuration is no longer at the version given to `from_config`.
    #[error("the configuration changed since the version given to from_config")]
    ConfigChanged,
    /// The new configuration would have no quorum of servers connected to the leader.
    #[error("the new configuration has no quorum of connected servers")]
    NoQuorum,
    /// Another reconfiguration is under way; try again.
    #[error("another reconfiguration is in progress")]
    InProgress,
    /// A server entry is malformed, or the change leaves the ensemble unchanged or invalid.
    #[error("the server entries are invalid or change nothing")]
    InvalidMembers,
}

impl Error {
    /// True when the connection broke while the operation was in flight: its outcome on the
    /// server is unknown, and it may be retried once the connection is back.
    ///
    /// zookeeper-client reports some transport failures (reset, idle timeout) as `Custom`
    /// errors rather than `ConnectionLoss`; both count here.
    pub fn is_connection_error(&self) -> bool {
        match self {
            Error::ZooKeeper(e) => is_zk_connection_error(e),
            Error::ConnectionTimeout(_) => true,
            _ => false,
        }
    }

    /// True when the session is gone for good: ephemeral nodes (and the locks they stood for)
    /// were deleted by the server, or the session could not be used any more.
    pub fn is_session_lost(&self) -> bool {
        match self {
            Error::ZooKeeper(e) => is_zk_session_lost(e),
            Error::LockLost { .. } => true,
            _ => false,
        }
    }

    /// True when repeating the operation later may succeed (Curator's default retryable set:
    /// connection loss, session moved, session expired, plus server throttling).
    pub fn is_retryable(&self) -> bool {
        match self {
            Error::ZooKeeper(e) => is_zk_retryable(e),
            Error::ConnectionTimeout(_) | Error::RetriesExhausted { .. } => true,
            _ => false,
        }
    }

    /// True when the node does not exist (ZooKeeper's `NoNode`).
    pub fn is_no_node(&self) -> bool {
        matches!(self, Error::ZooKeeper(ZkError::NoNode))
    }

    /// True when the node already exists (ZooKeeper's `NodeExists`).
    pub fn is_node_exists(&self) -> bool {
        matches!(self, Error::ZooKeeper(ZkError::NodeExists))
    }

    /// True when a versioned write found another version: ZooKeeper's `BadVersion`, or the
    /// framework's [`Error::BadVersion`] that names the path and the version expected.
    pub fn is_bad_version(&self) -> bool {
        matches!(self, Error::ZooKeeper(ZkError::BadVersion) | Error::BadVersion { .. })
    }

    /// True when a node to delete still has children (ZooKeeper's `NotEmpty`).
    pub fn is_not_empty(&self) -> bool {
        matches!(self, Error::ZooKeeper(ZkError::NotEmpty))
    }

    /// True when the node's ACL refuses this client (ZooKeeper's `NoAuth`).
    pub fn is_no_auth(&self) -> bool {
        matches!(self, Error::ZooKeeper(ZkError::NoAuth))
    }

    /// True when the connection broke while the request was in flight (ZooKeeper's
    /// `ConnectionLoss`, or a transport failure the client reports as `Custom`): its outcome
    /// on the server is unknown. [`is_connection_error`](Error::is_connection_error) also
    /// counts [`Error::ConnectionTimeout`].
    pub fn is_connection_loss(&self) -> bool {
        matches!(self, Error::ZooKeeper(e) if is_zk_connection_error(e))
    }

    /// True when the server expired the session (ZooKeeper's `SessionExpired`): its ephemeral
    /// nodes are gone. [`is_session_lost`](Error::is_session_lost) also counts a closed
    /// client, failed authentication and [`Error::LockLost`].
    pub fn is_session_expired(&self) -> bool {
        matches!(self, Error::ZooKeeper(ZkError::SessionExpired))
    }

    /// True when no connection came within the allowed time ([`Error::ConnectionTimeout`]).
    pub fn is_connection_timeout(&self) -> bool {
        matches!(self, Error::ConnectionTimeout(_))
    }

    /// True when a lock or lease is no longer held ([`Error::LockLost`]).
    pub fn is_lock_lost(&self) -> bool {
        matches!(self, Error::LockLost { .. })
    }

    /// True when the framework (or the ZooKeeper client under it) was closed.
    pub fn is_closed(&self) -> bool {
        matches!(self, Error::Closed | Error::ZooKeeper(ZkError::ClientClosed))
    }

    /// True when an argument was refused before anything was sent: a path, a connect string,
    /// another argument, or a request too large.
    pub fn is_invalid_argument(&self) -> bool {
        matches!(
            self,
            Error::InvalidPath { .. }
                | Error::InvalidConnectString { .. }
                | Error::InvalidArgument { .. }
                | Error::TooLarge { .. }
        )
    }

    /// The ZooKeeper error inside, if this is one.
    pub fn zk(&self) -> Option<&ZkError> {
        match self {
            Error::ZooKeeper(e) => Some(e),
            _ => None,
        }
    }

    pub(crate) fn invalid_argument(name: &'static str, reason: impl Into<String>) -> Error {
        Error::InvalidArgument { name, reason: reason.into() }
    }
}

pub(crate) fn is_zk_connection_error(e: &ZkError) -> bool {
    matches!(e, ZkError::ConnectionLoss | ZkError::Custom(_))
}

pub(crate) fn is_zk_session_lost(e: &ZkError) -> bool {
    matches!(e, ZkError::SessionExpired | ZkError::ClientClosed | ZkError::AuthFailed)
}

pub(crate) fn is_zk_retryable(e: &ZkError) -> bool {
    is_zk_connection_error(e) || matches!(e, ZkError::SessionMoved | ZkError::Throttled | ZkError::SessionExpired)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_send_sync<T: Send + Sync + 'static>() {}

    #[test]
    fn error_is_send_sync_static() {
        assert_send_sync::<Error>();
    }

    #[test]
    fn classification() {
        let loss = Error::from(ZkError::ConnectionLoss);
        assert!(loss.is_connection_error() && loss.is_retryable() && !loss.is_session_lost());

        let expired = Error::from(ZkError::SessionExpired);
        assert!(expired.is_session_lost() && expired.is_retryable() && !expired.is_connection_error());

        let no_node = Error::from(ZkError::NoNode);
        assert!(!no_node.is_retryable() && !no_node.is_connection_error() && !no_node.is_session_lost());

        let bad = Error::invalid_argument("max_leases", "must be at least 1");
        assert!(!bad.is_retryable());
        assert!(bad.to_string().contains("max_leases"));
        assert!(Error::LockLost { path: "/a".into() }.is_session_lost());
        let upgrade = Error::UpgradeRefused { path: "/rw".into() };
        assert!(!upgrade.is_retryable() && !upgrade.is_session_lost() && !upgrade.is_connection_error());
        assert!(upgrade.to_string().contains("/rw"));

        // What the release core and the reaper retry while the node's session is current.
        for retried in [ZkError::Throttled, ZkError::SessionMoved, ZkError::ConnectionLoss] {
            assert!(Error::from(retried).is_retryable());
        }
        for permanent in [ZkError::NoAuth, ZkError::NoNode, ZkError::BadVersion] {
            assert!(!Error::from(permanent).is_retryable());
        }
    }

    #[test]
    fn each_predicate_names_one_case() {
        type Predicate = fn(&Error) -> bool;
        let predicates: [(&str, Predicate); 11] = [
            ("no_node", Error::is_no_node),
            ("node_exists", Error::is_node_exists),
            ("bad_version", Error::is_bad_version),
            ("not_empty", Error::is_not_empty),
            ("no_auth", Error::is_no_auth),
            ("connection_loss", Error::is_connection_loss),
            ("session_expired", Error::is_session_expired),
            ("connection_timeout", Error::is_connection_timeout),
            ("lock_lost", Error::is_lock_lost),
            ("closed", Error::is_closed),
            ("invalid_argument", Error::is_invalid_argument),
        ];
        let cases: Vec<(Error, &[&str])> = vec![
            (ZkError::NoNode.into(), &["no_node"]),
            (ZkError::NodeExists.into(), &["node_exists"]),
            (ZkError::BadVersion.into(), &["bad_version"]),
            (Error::BadVersion { path: "/a".into(), expected: 3 }, &["bad_version"]),
            (ZkError::NotEmpty.into(), &["not_empty"]),
            (ZkError::NoAuth.into(), &["no_auth"]),
            (ZkError::ConnectionLoss.into(), &["connection_loss"]),
            (ZkError::SessionExpired.into(), &["session_expired"]),
            (ZkError::ClientClosed.into(), &["closed"]),
            (Error::ConnectionTimeout(Duration::from_secs(1)), &["connection_timeout"]),
            (Error::LockLost { path: "/a".into() }, &["lock_lost"]),
            (Error::Closed, &["closed"]),
            (Error::NotStarted, &[]),
            (Error::InvalidPath { path: "a".into(), reason: "r" }, &["invalid_argument"]),
            (Error::invalid_argument("n", "r"), &["invalid_argument"]),
            (Error::TooLarge { name: "data", size: 2, limit: 1 }, &["invalid_argument"]),
            (Error::UpgradeRefused { path: "/rw".into() }, &[]),
        ];
        for (error, expected) in &cases {
            for (name, predicate) in &predicates {
                assert_eq!(predicate(error), expected.contains(name), "is_{name}() on {error:?}");
            }
        }
        // The narrow predicates agree with the broad ones.
        let loss = Error::from(ZkError::ConnectionLoss);
        assert!(loss.is_connection_loss() && loss.is_connection_error());
        let timeout = Error::ConnectionTimeout(Duration::from_secs(1));
        assert!(timeout.is_connection_error() && !timeout.is_connection_loss());
        let expired = Error::from(ZkError::SessionExpired);
        assert!(expired.is_session_expired() && expired.is_session_lost());
    }

    #[test]
    fn a_wrapped_client_error_is_printed_once_in_a_chain() {
        let e = Error::from(ZkError::NoNode);
        assert_eq!(e.to_string(), ZkError::NoNode.to_string());
        // transparent: the chain does not repeat the message one level down
        if let Some(source) = std::error::Error::source(&e) {
            assert_ne!(source.to_string(), e.to_string());
        }
    }
}
