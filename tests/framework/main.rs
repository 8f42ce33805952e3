//! The framework (connection manager) and its data plane against real ZooKeeper servers:
//! connection states, the framework's life, a 3-server ensemble, every operation, transactions
//! and fenced writes, persistent watches, TLS and SASL connections, and compile-time checks
//! that the public types cross threads.
//!
//! Every test here is named `framework::<module>::<test>`, so
//! `cargo test --features testing,tls,sasl,discovery,serde,schema -- framework::` runs them and the unit
//! tests of `src/framework/` (the same room).
//! `tests/README.md` maps behaviours to binaries and modules.

#[path = "../common/mod.rs"]
mod common;

// One module per file beside this one, inside a module named after the binary: its name
// starts every test's.
#[path = "."]
mod framework {
    /// Background errors (`Framework::errors`, `on_error`) provoked with ACLs.
    mod background_errors;
    /// The circuit-breaking state stream and listener under a flapping connection.
    mod circuit_breaker;
    /// `configure_client`: the raw client's connector, per session.
    mod client_config;
    /// Losing the connected server and the leader of an ensemble; read-only mode.
    mod cluster;
    /// Connection states, listeners, retries, namespaces, session expiry.
    mod connection;
    /// Ensemble tracking and reconfiguration: members replaced under clients given the originals.
    mod ensemble;
    /// Replies a server holds back (ZooKeeper 3.6.0-3.8.0 ensembles), let go by one read.
    mod held_replies;
    /// SASL GSSAPI (Kerberos) logins through a real MIT KDC (feature `sasl-gssapi`).
    mod kerberos;
    /// `close()` during `start()`, a session whose client task is gone.
    mod lifecycle;
    /// Metrics through a debugging recorder: lock waits, expiries, requests by operation, a cache.
    mod metrics;
    /// `MigrationManager`: sets applied once across racing frameworks; changed sets refused.
    mod migrations;
    /// `using_namespace`: several namespaces on one session, recipes under each, a new session.
    mod namespaces;
    /// Creates, reads, one-shot watches, versioned writes, deletes, ACLs.
    mod operations;
    /// `RetryPolicy::allow_retry`: which errors are retried.
    mod retry_policy;
    /// SASL DIGEST-MD5 logins (feature `sasl`).
    mod sasl;
    /// Schema sets: every operation checked before it is sent (feature `schema`).
    #[cfg(feature = "schema")]
    mod schema;
    /// Every public type and future is `Send` and `Sync` (compile time).
    mod send_sync;
    /// `TempFramework`: a session opened on use, closed when idle; a dead server, a lost session.
    mod temp_framework;
    /// TLS connections (feature `tls`).
    mod tls;
    /// All-or-nothing commits and fenced writes.
    mod transactions;
    /// The watch table: one-shot and persistent watches of one session kept apart; the server learned once per session.
    mod watch_table;
    /// Persistent watches: order, resync after faults, removal, hazards.
    mod watches;
}
