//! Real ZooKeeper servers, a fault-injecting proxy and a session killer, for tests (feature
//! `testing`); modeled on Curator's `curator-test`.
//!
//! # Which one do I use?
//!
//! | you want | use |
//! | --- | --- |
//! | a server, and your test never stops, pauses or restarts it | [`shared_server`] (one per test process) |
//! | a server your test stops, kills, restarts or pauses | [`TestingServer`] |
//! | an ensemble: leader changes, losing a server, read-only mode | [`TestingCluster`] |
//! | connection loss (FIN or RST), a silent network, refused connections | [`FaultProxy`] between the client and the server |
//! | a reconnect that is answered and then dies ("stale connected") | [`FaultProxy`] in [`ProxyMode::HandshakeThenRefuse`] |
//! | a stalled link: requests and replies held back, then delivered in order (a race made to happen) | [`FaultProxy`] in [`ProxyMode::Hold`] ([`FaultProxy::held_from_clients`]) |
//! | an ensemble whose membership changes (members added, removed, replaced) | [`TestingClusterBuilder::dynamic_reconfig`], [`TestingCluster::add_server`], [`TestingCluster::remove_server`] |
//! | an ensemble member cut off from the others | [`TestingCluster::isolate`] (build with [`quorum_proxies`](TestingClusterBuilder::quorum_proxies); with [`dynamic_reconfig`](TestingClusterBuilder::dynamic_reconfig) too, members added later included) |
//! | a session that the server expires (Curator's `KillSession`) | [`expire_session`] on a client behind a [`FaultProxy`] |
//! | how many server requests an operation costs, or which errors the server answered | clients behind a [`CountingProxy`] |
//! | a four-letter word's answer (`srvr`, `cons`, `wchc`, ...) | [`four_letter_word`] |
//! | the internals of this crate's lock mirrors, held or counted (for its own tests) | [`set_mirror_hooks`], [`hold_mirror_events`] and the `mirror_*` counters |
//! | a request that reached the server but whose reply was lost | [`CountingProxy::lose_reply_to`] |
//! | a server that speaks TLS, with a CA, server and client certificates made for it | [`TestingServerBuilder::tls`] ([`TlsFiles`]) |
//! | a server that logs clients in with SASL DIGEST-MD5 | [`TestingServerBuilder::sasl_digest_user`] |
//! | a server that logs clients in with Kerberos (SASL GSSAPI), and its KDC | `TestingServerBuilder::kerberos` and `TestingKdc` (feature `sasl-gssapi`; Debian's `krb5-kdc` and `krb5-admin-server`) |
//!
//! # Requirements
//!
//! Apache ZooKeeper 3.5+ and Java. On Debian and Ubuntu, `apt-get install zookeeper` provides
//! both (the jars land in `/usr/share/java`). Elsewhere, set `ZOOKEEPER_HOME` to an unpacked
//! release (jars directly in it or in `lib/`), and `JAVA_HOME` or `PATH` for Java. See
//! [`Installation`]. TLS servers ([`TestingServerBuilder::tls`]) also need the JDK's `keytool`
//! (Debian's JRE package has it) and `openssl`.
//!
//! # Process lifetime
//!
//! Every server is a JVM started through a small `sh` wrapper. Dropping the owner
//! ([`TestingServer`], [`TestingCluster`]) SIGKILLs the JVMs (bounded, without needing a
//! runtime) and removes their temporary directories, also while unwinding from a panic. If
//! the test process itself dies (SIGKILL, abort) or exits while a server is still owned by a
//! `static` (as the [`shared_server`] is), a watchdog started with each JVM notices that its
//! pipe from this process reached end-of-file, kills the JVM and removes the directory.
//!
//! What the watchdog does not cover: a server already stopped ([`TestingServer::stop`],
//! `kill`) has no JVM left to watch, so the directory of one stopped and never dropped stays
//! in the system's temporary directory if the process then dies; so does a `TestingKdc`'s.
//!
//! Servers do not belong to a tokio runtime: they can be created in one `#[tokio::test]` and
//! used from another. [`FaultProxy`] does run tasks on the runtime it was started on. The
//! module's async functions (starting, stopping, restarting, `settle`, the four-letter words,
//! [`expire_session`]) need a Tokio runtime with its time and I/O drivers, as a
//! `#[tokio::test]` has; outside one they panic.
//!
//! # Timing
//!
//! The servers run with `tickTime` 200 ms by default, so sessions can be as short as 400 ms
//! and expire within a tick of their timeout. A freshly started 3-node ensemble of ZooKeeper
//! 3.8 can leave a write sent to a follower unanswered for seconds in its first minute; call
//! [`TestingCluster::settle`] before a test that relies on timing, and derive timeouts from
//! what you configured.

mod cluster;
mod counting;
mod error;
mod install;
#[cfg(feature = "sasl-gssapi")]
mod kerberos;
mod member_proxies;
mod mirror_probe;
mod options;
mod process;
mod proxy;
mod reconfig;
mod security;
mod server;
mod session;

use std::time::Duration;

pub use self::cluster::{TestingCluster, TestingClusterBuilder};
pub use self::counting::{CountingProxy, RequestCounts};
pub use self::error::TestingError;
pub use self::install::Installation;
#[cfg(feature = "sasl-gssapi")]
pub use self::kerberos::{KerberosLogin, TestingKdc};
pub use self::mirror_probe::{
    hold_mirror_events, mirror_lease_guesses_missed, mirror_retained_entries, mirror_tasks_running,
    mirror_watches_added, mirror_witness_failures, set_mirror_hooks, MirrorHooks,
};
pub use self::proxy::{FaultProxy, ProxyMode};
pub use self::reconfig::MemberRole;
pub use self::security::TlsFiles;
pub use self::server::{TestingServer, TestingServerBuilder};
pub use self::session::expire_session;

/// The process-wide server for tests that inject no server faults.
static SHARED: tokio::sync::OnceCell<TestingServer> = tokio::sync::OnceCell::const_new();

/// One standalone server per test process, started on first use, for tests that never stop,
/// restart or pause it (use a chroot or unique paths per test to keep tests apart).
///
/// It is not tied to the runtime of the test that started it, so every `#[tokio::test]` in
/// the binary can use it. It lives until the process exits; the watchdog then kills the JVM
/// and removes its directory.
///
/// # Errors
/// As for [`TestingServer::start`]. A failed start is not cached: the next call tries again.
///
/// # Cancel safety
/// If the caller that is starting the server is cancelled, the half-started server is
/// dropped (killed) and the next waiting caller starts a new one.
pub async fn shared_server() -> Result<&'static TestingServer, TestingError> {
    SHARED.get_or_try_init(TestingServer::start).await
}

/// Sends a four-letter word (`ruok`, `srvr`, `stat`, `cons`, `dump`, `mntr`, …) to a server
/// and returns its whole answer. The servers of this module allow all of them.
///
/// # Errors
/// [`TestingError::Io`] if the server cannot be reached; [`TestingError::Timeout`] if it does
/// not answer within `timeout` (for example while paused).
///
/// # Cancel safety
/// Cancel-safe: the only state is the connection, which is closed on drop.
pub async fn four_letter_word(address: &str, word: &str, timeout: Duration) -> Result<String, TestingError> {
    process::four_letter_word_with_timeout(address, word, timeout).await
}
