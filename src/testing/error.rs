//! The error type of the testing module.

use std::path::PathBuf;
use std::time::Duration;

/// Everything that can go wrong while starting, controlling or faulting test servers.
///
/// Start failures carry the last lines of the server's log, so a failing test shows why the
/// JVM did not come up without anyone having to find its (already removed) data directory.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TestingError {
    /// No ZooKeeper installation was found.
    #[error(
        "no ZooKeeper installation found (looked in: {searched}); install Debian's package \
         (`apt-get install zookeeper`) or set ZOOKEEPER_HOME to a directory that holds the \
         ZooKeeper jars, directly or in lib/"
    )]
    InstallationNotFound {
        /// The directories that were searched, comma separated.
        searched: String,
    },

    /// No Java runtime was found.
    #[error(
        "no Java runtime found (looked in: {searched}); install one (`apt-get install zookeeper` \
         pulls in a JRE) or set JAVA_HOME"
    )]
    JavaNotFound {
        /// The places that were searched, comma separated.
        searched: String,
    },

    /// An operating-system operation failed.
    #[error("{context}")]
    Io {
        /// What was being done.
        context: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },

    /// A server process exited while it was expected to come up.
    #[error("ZooKeeper server {name} exited during startup ({status}); last lines of {log:?}:\n{log_tail}")]
    ServerExited {
        /// Which server (for example `standalone` or `node1`).
        name: String,
        /// How the process ended.
        status: String,
        /// The server's log file (removed together with the data directory).
        log: PathBuf,
        /// The last lines of the log.
        log_tail: String,
    },

    /// A server did not start serving in time.
    #[error("ZooKeeper server {name} did not start serving within {timeout:?}; last lines of {log:?}:\n{log_tail}")]
    StartTimeout {
        /// Which server.
        name: String,
        /// How long we waited.
        timeout: Duration,
        /// The server's log file.
        log: PathBuf,
        /// The last lines of the log.
        log_tail: String,
    },

    /// An operation did not finish in time.
    #[error("{operation} did not finish within {timeout:?}")]
    Timeout {
        /// What was being waited for.
        operation: String,
        /// How long we waited.
        timeout: Duration,
    },

    /// A ZooKeeper client operation failed (settling a cluster, expiring a session).
    #[error("ZooKeeper client error while {operation}")]
    ZooKeeper {
        /// What was being done.
        operation: String,
        /// The client's error.
        #[source]
        source: zookeeper_client::Error,
    },

    /// A cluster server index was out of range.
    #[error("no server {index} in a cluster of {len}")]
    NoSuchServer {
        /// The index asked for.
        index: usize,
        /// The cluster size.
        len: usize,
    },

    /// The server is not running (stopped or killed), so it cannot be paused or resumed.
    #[error("ZooKeeper server {name} is not running")]
    NotRunning {
        /// Which server.
        name: String,
    },

    /// Sending a signal to a server process failed.
    #[error("sending SIG{signal} to ZooKeeper server process {pid} failed: {detail}")]
    Signal {
        /// The signal name without the `SIG` prefix.
        signal: &'static str,
        /// The process id.
        pid: u32,
        /// What `kill` reported.
        detail: String,
    },

    /// A helper program failed (`keytool` or `openssl`, making a TLS server's certificates).
    #[error("{command} failed ({detail})")]
    ToolFailed {
        /// The program and its first argument.
        command: String,
        /// Its exit status and output.
        detail: String,
    },

    /// A builder was given a configuration that cannot work.
    #[error("invalid testing configuration: {0}")]
    InvalidConfig(String),
}

impl TestingError {
    pub(crate) fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        TestingError::Io { context: context.into(), source }
    }

    pub(crate) fn zk(operation: impl Into<String>, source: zookeeper_client::Error) -> Self {
        TestingError::ZooKeeper { operation: operation.into(), source }
    }

    pub(crate) fn timeout(operation: impl Into<String>, timeout: Duration) -> Self {
        TestingError::Timeout { operation: operation.into(), timeout }
    }

    /// Whether a start failed because a port was taken between choosing and binding it.
    pub(crate) fn is_address_in_use(&self) -> bool {
        match self {
            TestingError::ServerExited { log_tail, .. } | TestingError::StartTimeout { log_tail, .. } => {
                log_tail.contains("Address already in use") || log_tail.contains("BindException")
            }
            _ => false,
        }
    }
}

const _: () = {
    const fn assert_send_sync<T: Send + Sync + 'static>() {}
    assert_send_sync::<TestingError>();
};
