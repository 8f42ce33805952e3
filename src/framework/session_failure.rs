//! What an operation does when its session ends before it succeeds (Curator's
//! `SessionFailedRetryPolicy`).

use super::Session;
use crate::error::{Error, Result, ZkError};

/// Whether a framework operation that was interrupted by the end of its session is tried
/// again on the next session, or fails (Curator's `SessionFailedRetryPolicy`).
///
/// An operation's session can end under it: the server expires it (the operation fails with
/// `SessionExpired`), or the framework gives up on it after a whole session timeout without
/// contact (`Lost`) while the operation waits to be retried after a connection loss. With
/// [`Retry`](SessionFailurePolicy::Retry), the retry policy retries it on the new session, as
/// if nothing happened; with [`Fail`](SessionFailurePolicy::Fail), it fails with
/// `SessionExpired` instead, so code that must not carry a write over into another session
/// (because it reasoned about its own ephemeral nodes, say) learns that the session changed.
/// A session the framework moves to another client (after a reconfiguration) has not ended:
/// under either policy, an operation queued on the client it left goes again through the new
/// one.
///
/// ```
/// use zk_recipes::{Framework, SessionFailurePolicy};
///
/// let framework = Framework::builder("127.0.0.1:2181")
///     .session_failure_policy(SessionFailurePolicy::Fail)
///     .build()
///     .expect("valid configuration");
/// # drop(framework);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum SessionFailurePolicy {
    /// Retry on the next session, under the retry policy (the default; Curator's default).
    #[default]
    Retry,
    /// Fail with [`zk::Error::SessionExpired`](crate::zk::Error::SessionExpired) rather than
    /// retry on another session than the one the operation started on.
    Fail,
}

impl SessionFailurePolicy {
    /// Whether `error` may be retried under this policy (on top of being retryable at all).
    pub(crate) fn allows_retry(self, error: &Error) -> bool {
        match self {
            SessionFailurePolicy::Retry => true,
            SessionFailurePolicy::Fail => !matches!(error, Error::ZooKeeper(ZkError::SessionExpired)),
        }
    }

    /// The session a try of an operation runs on: under `Fail`, only the one its first try
    /// ran on (`first`, recorded here), otherwise `SessionExpired`.
    pub(crate) fn keep_session(self, first: &mut Option<u64>, session: Session) -> Result<Session> {
        match (self, *first) {
            (SessionFailurePolicy::Fail, Some(epoch)) if epoch != session.epoch => {
                Err(Error::ZooKeeper(ZkError::SessionExpired))
            }
            _ => {
                *first = Some(session.epoch);
                Ok(session)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fail_refuses_to_retry_an_expired_session_and_retry_allows_it() {
        let expired = Error::ZooKeeper(ZkError::SessionExpired);
        let loss = Error::ZooKeeper(ZkError::ConnectionLoss);
        assert!(SessionFailurePolicy::Retry.allows_retry(&expired));
        assert!(SessionFailurePolicy::Retry.allows_retry(&loss));
        assert!(!SessionFailurePolicy::Fail.allows_retry(&expired));
        assert!(SessionFailurePolicy::Fail.allows_retry(&loss), "a connection loss stays on the session");
        assert_eq!(SessionFailurePolicy::default(), SessionFailurePolicy::Retry);
    }
}
