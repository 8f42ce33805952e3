//! The time bounds the integration tests share. Each bounds something that normally takes
//! milliseconds, so that a slow or loaded machine does not fail a test, except [`QUIET`], which
//! is how long a test watches for something that must not happen.
#![allow(dead_code)] // each test binary uses a different part of this module

use std::time::Duration;

/// Upper bound for one whole test on the shared server.
pub const LIMIT: Duration = Duration::from_secs(90);

/// Upper bound for one whole test that starts a JVM (a Curator peer) or a 3-server ensemble.
pub const SLOW_LIMIT: Duration = Duration::from_secs(150);

/// Session timeout of tests that inject no faults: it only bounds how long the sessions of a
/// failed test outlive it.
pub const SESSION: Duration = Duration::from_secs(10);

/// Session timeout of tests that cut connections, stop servers or expire sessions: short, so
/// that what follows a loss comes soon. Their time windows derive from it.
pub const FAULT_SESSION: Duration = Duration::from_secs(4);

/// Session timeout of the tests that count requests: long enough that no ping falls into a
/// measurement (pings are not counted anyway).
pub const COUNTING_SESSION: Duration = Duration::from_secs(60);

/// Session timeout of tests with a Curator peer (the Java client and our frameworks alike):
/// the JVM's pauses stay far below it.
pub const INTEROP_SESSION: Duration = Duration::from_secs(15);

/// Bound for one asynchronous event (a handoff, a reconnect, a background delete, a watch
/// firing, a container reaped).
pub const EVENT: Duration = Duration::from_secs(20);

/// Bound for one asynchronous event that goes through a Curator peer (a handoff, a loop
/// finishing, a request arriving).
pub const INTEROP_EVENT: Duration = Duration::from_secs(30);

/// Bound for an event that follows promptly on the shared server (a freed lock or lease
/// reaching a waiter, the reaper finishing): a fraction of [`SESSION`].
pub const PROMPT: Duration = Duration::from_secs(5);

/// How long after a fault a registration (a `PersistentNode`) must be back: the session's expiry
/// (the server's tick slack included) plus the framework's reconnect and one create.
pub fn back_within(session: Duration) -> Duration {
    session * 3 + Duration::from_secs(5)
}

/// A wait that must not end: long enough for several round trips on loopback. Negative checks
/// cannot await an event; this bounds nothing.
pub const QUIET: Duration = Duration::from_millis(300);
