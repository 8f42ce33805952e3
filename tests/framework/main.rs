//! The framework (connection manager) and its data plane against real ZooKeeper servers:
//! connection states, the framework's life, a 3-server ensemble, every operation, transactions
//! and fenced writes, persistent watches, TLS and SASL connections, and compile-time checks
//! that the public types cross threads.
//!
//! Every test here is named `framework::<module>::<test>`, so
//! `cargo test --features testing,tls,sasl,discovery -- framework::` runs them and the unit
//! tests of `src/framework/` (the same room).
//! `tests/README.md` maps behaviours to binaries and modules.

#[path = "../common/mod.rs"]
mod common;

// One module per file beside this one, inside a module named after the binary: its name
// starts every test's.
#[path = "."]
mod framework {
    /// Losing the connected server and the leader of an ensemble; read-only mode.
    mod cluster;
    /// Connection states, listeners, retries, namespaces, session expiry.
    mod connection;
    /// SASL GSSAPI (Kerberos) logins through a real MIT KDC (feature `sasl-gssapi`).
    mod kerberos;
    /// `close()` during `start()`, a session whose client task is gone.
    mod lifecycle;
    /// Creates, reads, one-shot watches, versioned writes, deletes, ACLs.
    mod operations;
    /// SASL DIGEST-MD5 logins (feature `sasl`).
    mod sasl;
    /// Every public type and future is `Send` and `Sync` (compile time).
    mod send_sync;
    /// TLS connections (feature `tls`).
    mod tls;
    /// All-or-nothing commits and fenced writes.
    mod transactions;
    /// The watch table: one-shot and persistent watches of one session kept apart; the server learned once per session.
    mod watch_table;
    /// Persistent watches: order, resync after faults, removal, hazards.
    mod watches;
}
