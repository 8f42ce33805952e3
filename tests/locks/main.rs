//! The lock recipes against real ZooKeeper servers: the mutex, the semaphore and the
//! semaphore mutex, the read-write lock, the multi-lock and revocation, the base lock suite over
//! all of them, and the lock core's concerns (fast path, mirror waits, cancellation, faults,
//! hardening, safety, request counts, scale and memory).
//!
//! Every test here is named `locks::<module>::<test>`, so
//! `cargo test --features testing,tls,sasl,discovery,serde,schema -- locks::` runs them and the unit
//! tests of `src/locks/` (the same room).
//! `tests/README.md` maps behaviours to binaries and modules.

#[path = "../common/mod.rs"]
mod common;

// One module per file beside this one, inside a module named after the binary: its name
// starts every test's.
#[path = "."]
mod locks {
    /// The base lock suite (Curator's `TestInterProcessMutexBase`) over every lock.
    mod conformance;
    /// `run` on every guard and lease: a critical section stopped when the hold is lost.
    mod critical_section;
    /// The uncontended fast path and every condition that disables it.
    mod fast_path;
    /// The fast path's directory watch must predate the delete.
    mod fast_path_watch_identity;
    /// A handoff after a reconnect is confirmed by a listing.
    mod handoff_after_reconnect;
    /// Conditions that once broke the lock core (throttling, limits, stale guards).
    mod hardening;
    /// The mirror beyond its scenarios: other watches on its directory refused, a count past 2^30, a throttled listing, a holder under 100,000 tries.
    mod mirror_findings;
    /// Lock waits on the session's mirror (`WaitStrategy::Mirror`).
    mod mirror_wait;
    /// `MultiLock`: all or nothing, rollback, one deadline.
    mod multi_lock;
    /// `InterProcessMutex`: Curator's and kazoo's scenarios, fencing tokens, `lost()`.
    mod mutex;
    /// An acquire future dropped at every point.
    mod mutex_cancellation;
    /// The mutex under server and network faults (own servers).
    mod mutex_faults;
    /// No herd effect; 2,000 waiters acquiring in sequence order.
    mod mutex_scale;
    /// The watch a guard keeps on its own node.
    mod node_watch;
    /// `InterProcessReadWriteLock`, downgrade, ACLs.
    mod read_write_lock;
    /// Two acquires of one lock in flight in one task.
    mod reentrant_in_flight;
    /// Server requests per lock operation, counted by a proxy.
    mod request_counts;
    /// Revocation requests to holders and waiters.
    mod revocation;
    /// A holder is told before anyone else can take its lock, under compound faults.
    mod safety;
    /// `InterProcessSemaphore`: Curator's and kazoo's scenarios, cancellation.
    mod semaphore;
    /// The semaphore on a 3-server ensemble losing its leader and quorum.
    mod semaphore_cluster;
    /// A semaphore sized by a `SharedCount`.
    mod semaphore_count;
    /// `InterProcessSemaphoreMutex`.
    mod semaphore_mutex;
    /// `SessionOnly` reports `Lost` in time though its runtime stalled.
    mod session_only_stall;
    /// A mutex waiter two places back lists while the node ahead holds; waits given up ahead hand it nothing.
    mod two_ahead;
    /// Memory of a long queue of waiters.
    mod waiter_memory;
}
