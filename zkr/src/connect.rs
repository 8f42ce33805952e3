//! Connecting to ZooKeeper from the global options, with a progress line while it takes time.

use std::future::Future;
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::time::Duration;

use tokio::time::Instant;
use zk_recipes::retry::RetryUntilElapsed;
use zk_recipes::{Framework, FrameworkBuilder};

use crate::exit::Failure;

/// Where `zkr locks` and `zkr revoke` connect without `--connect` (zkCli's default too).
pub const DEFAULT_CONNECT: &str = "127.0.0.1:2181";

/// How long a wait goes before the progress line appears.
const QUIET_FOR: Duration = Duration::from_millis(500);

/// The global options.
#[derive(Debug, Clone)]
pub struct Options {
    pub connect: Option<String>,
    pub namespace: Option<String>,
    pub session_timeout: Duration,
    pub connection_timeout: Duration,
    pub digest: Option<String>,
    /// `--tls-ca`, `--tls-cert`, `--tls-key`: TLS with this CA bundle, and mutual TLS.
    pub tls_ca: Option<PathBuf>,
    pub tls_cert: Option<PathBuf>,
    pub tls_key: Option<PathBuf>,
    /// `--sasl user:password`: SASL DIGEST-MD5.
    pub sasl: Option<String>,
}

impl Options {
    /// `--connect`, else [`DEFAULT_CONNECT`].
    pub fn connect_string(&self) -> &str {
        self.connect.as_deref().unwrap_or(DEFAULT_CONNECT)
    }

    /// A framework for `connect` with these options, not yet started: invalid options fail
    /// here, before any connection attempt. Operations that lose the connection are retried
    /// for at most the connection timeout.
    pub fn build(&self, connect: &str) -> Result<Framework, Failure> {
        self.build_with(connect, |builder| builder)
    }

    /// [`build`](Self::build), with `more` settings (a command's own) applied last.
    pub fn build_with(
        &self,
        connect: &str,
        more: impl FnOnce(FrameworkBuilder) -> FrameworkBuilder,
    ) -> Result<Framework, Failure> {
        let mut builder = Framework::builder(connect)
            .session_timeout(self.session_timeout)
            .connection_timeout(self.connection_timeout)
            .retry_policy(RetryUntilElapsed::new(self.connection_timeout, Duration::from_millis(200)));
        if let Some(namespace) = &self.namespace {
            builder = builder.namespace(namespace);
        }
        if let Some(digest) = &self.digest {
            builder = builder.auth("digest", digest.as_bytes());
        }
        if let Some(ca) = &self.tls_ca {
            builder = builder.tls_ca_file(ca);
        }
        if let (Some(cert), Some(key)) = (&self.tls_cert, &self.tls_key) {
            builder = builder.tls_client_identity(cert, key);
        }
        if let Some((user, password)) = self.sasl.as_deref().and_then(|sasl| sasl.split_once(':')) {
            builder = builder.sasl_digest(user, password);
        }
        more(builder).build().map_err(|e| Failure::from_error(e, "checking the options", connect))
    }

    /// Starts `framework` (built by [`build`](Self::build) for `connect`), showing progress.
    pub async fn start(&self, framework: &Framework, connect: &str) -> Result<(), Failure> {
        with_progress(&format!("connecting to {connect}"), framework.start())
            .await
            .map_err(|e| Failure::from_error(e, "connecting", connect))
    }
}

/// Awaits `fut`; if it takes longer than half a second, says on stderr what is being waited
/// for: one line updated in place on a terminal, otherwise a line now and every five seconds.
pub async fn with_progress<F: Future>(what: &str, fut: F) -> F::Output {
    let mut fut = std::pin::pin!(fut);
    let mut progress = Progress { what, started: Instant::now(), tty: std::io::stderr().is_terminal(), shown: None };
    let mut ticks = tokio::time::interval(Duration::from_millis(250));
    loop {
        tokio::select! {
            output = &mut fut => {
                progress.done();
                return output;
            }
            _ = ticks.tick() => progress.tick(),
        }
    }
}

struct Progress<'a> {
    what: &'a str,
    started: Instant,
    tty: bool,
    /// When the line was last printed.
    shown: Option<Instant>,
}

impl Progress<'_> {
    fn tick(&mut self) {
        let elapsed = self.started.elapsed();
        if elapsed < QUIET_FOR {
            return;
        }
        let mut stderr = std::io::stderr().lock();
        if self.tty {
            let _ = write!(stderr, "\r\x1b[Kzkr: {} ... {}s", self.what, elapsed.as_secs());
            let _ = stderr.flush();
            self.shown = Some(Instant::now());
        } else if self.shown.map_or(true, |at| at.elapsed() >= Duration::from_secs(5)) {
            let _ = writeln!(stderr, "zkr: {} ... ({}s)", self.what, elapsed.as_secs());
            self.shown = Some(Instant::now());
        }
    }

    fn done(&mut self) {
        if self.tty && self.shown.is_some() {
            let mut stderr = std::io::stderr().lock();
            let _ = write!(stderr, "\r\x1b[K");
            let _ = stderr.flush();
        }
    }
}
