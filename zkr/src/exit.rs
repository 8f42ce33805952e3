//! Exit codes and the message printed with each failure.

use std::process::ExitCode;

use zk_recipes::zk::Error as ZkError;

/// Why `zkr` stopped; the numbers are part of its interface (documented in `--help`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Code {
    /// Anything not listed below (an unexpected ZooKeeper error).
    Other = 1,
    /// Bad arguments: usage, an invalid path, connect string, duration or `--digest`.
    Usage = 2,
    /// No connection to ZooKeeper within the connection timeout, or it was lost.
    Unreachable = 3,
    /// The path does not exist.
    Missing = 4,
    /// The server refused our credentials, or a node's ACL refuses this client.
    Auth = 5,
    /// The path exists but does not hold the layout asked for: no lock directory (its children
    /// are no recipe's nodes), no counter, barrier or queue.
    WrongLayout = 6,
    /// `zkr demo` found a violation of what the recipes promise.
    Violation = 7,
}

impl From<Code> for ExitCode {
    fn from(code: Code) -> ExitCode {
        ExitCode::from(code as u8)
    }
}

/// A failure: its exit code and the message for stderr.
#[derive(Debug)]
pub struct Failure {
    pub code: Code,
    pub message: String,
}

impl Failure {
    pub fn new(code: Code, message: impl Into<String>) -> Self {
        Self { code, message: message.into() }
    }

    pub fn other(message: impl Into<String>) -> Self {
        Self::new(Code::Other, message)
    }

    pub fn usage(message: impl Into<String>) -> Self {
        Self::new(Code::Usage, message)
    }

    /// Classifies a library error. `what` says what was being done (`listing /locks/a`),
    /// `connect` where (for the unreachable message).
    pub fn from_error(err: zk_recipes::Error, what: &str, connect: &str) -> Self {
        use zk_recipes::Error;
        match &err {
            Error::InvalidPath { .. } | Error::InvalidConnectString { .. } | Error::InvalidArgument { .. } => {
                Self::usage(err.to_string())
            }
            Error::ConnectionTimeout(timeout) => Self::new(
                Code::Unreachable,
                format!(
                    "cannot reach ZooKeeper at {connect} within {timeout:?} (is it running? set --connect or \
                     ZK_CONNECT; --connection-timeout waits longer)"
                ),
            ),
            _ if err.is_connection_error() => {
                Self::new(Code::Unreachable, format!("lost the connection to ZooKeeper at {connect} while {what}: {err}"))
            }
            _ => match err.zk() {
                Some(ZkError::NoNode) => Self::new(Code::Missing, format!("{what}: no such node")),
                Some(ZkError::NoAuth) => Self::new(
                    Code::Auth,
                    format!("{what}: not authorized (the node's ACL refuses this client; authenticate with --digest user:password)"),
                ),
                Some(ZkError::AuthFailed) => {
                    Self::new(Code::Auth, format!("authentication failed at {connect}: the server refused the credentials"))
                }
                _ => Self::other(format!("{what}: {err}")),
            },
        }
    }

    /// Prints the message and returns the exit code.
    pub fn report(self) -> ExitCode {
        eprintln!("zkr: {}", self.message);
        self.code.into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classification() {
        let code = |e: zk_recipes::Error| Failure::from_error(e, "listing /a", "h:1").code;
        assert_eq!(code(ZkError::NoNode.into()), Code::Missing);
        assert_eq!(code(ZkError::NoAuth.into()), Code::Auth);
        assert_eq!(code(ZkError::AuthFailed.into()), Code::Auth);
        assert_eq!(code(ZkError::ConnectionLoss.into()), Code::Unreachable);
        assert_eq!(code(zk_recipes::Error::ConnectionTimeout(std::time::Duration::from_secs(1))), Code::Unreachable);
        assert_eq!(code(ZkError::BadVersion.into()), Code::Other);
        let invalid = zk_recipes::path::validate("relative").unwrap_err();
        assert_eq!(code(invalid), Code::Usage);
    }

    #[test]
    fn codes_are_distinct_and_stable() {
        let codes = [
            Code::Other,
            Code::Usage,
            Code::Unreachable,
            Code::Missing,
            Code::Auth,
            Code::WrongLayout,
            Code::Violation,
        ];
        let numbers: Vec<u8> = codes.iter().map(|c| *c as u8).collect();
        assert_eq!(numbers, [1, 2, 3, 4, 5, 6, 7]);
    }
}
