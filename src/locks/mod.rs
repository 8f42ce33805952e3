//! Distributed locks, wire-compatible with Curator's lock recipes.
//!
//! A lock waits in one of two ways (the framework's [`WaitStrategy`](crate::WaitStrategy)):
//! each waiter lists the directory and watches the node ahead of it (Curator's way), or each
//! session keeps one mirror of the directory (one persistent recursive watch and one listing,
//! shared by every handle and waiter of the session) and waiters decide from it: two requests
//! per contended cycle instead of four to seven, paid for with one notification per change per
//! mirroring session (the cost model and the crossover are on `WaitStrategy`). Waiting on the
//! node ahead, a mutex waiter two or more places back lists the children while the node ahead
//! holds, so that the holder's deletion alone hands it the lock (`internals.rs`).
//!
//! Who holds (sort keys and predicates over the children) is Curator's protocol and lives in
//! `protocol/driver.rs`; a node's life as types and the protected create live in
//! `framework/node.rs` and `framework/protected.rs`. Inside, from the bottom up:
//!
//! | file | holds |
//! | --- | --- |
//! | `fast_path.rs` | the uncontended mutex taken with the create alone, when provably safe |
//! | `node_watch.rs` | the data watch on a held node, kept through connection trouble (deletion, revocation) |
//! | `held.rs` | the one release core (`HeldNode`) and the non-owning `NodeWatch` guards observe |
//! | `internals.rs` | the one wait engine (Curator's `LockInternals`) |
//! | `mirror_wait.rs` | a session's view of a lock directory from one recursive watch and one listing, and when it may decide in a listing's place (pure), held with its waiters as the mirror driver's view |
//! | `dir_mirror.rs` | the session's live mirror of a lock directory: its handles and the waits on it |
//! | `mirror_slot.rs` | a handle's place for that mirror: none for a first attempt unless one runs, none while the directory is crowded |
//! | `start_over.rs` | the start-over loop: a fresh node when the last one went missing |
//! | `reentrant.rs` | per-task reentrancy: the one reentrant acquire core (an owner's acquires take turns; downgrade and upgrade refusal are its hooks), holds, and the ticket guard behind the public guards |
//! | `acquire.rs` | the one acquire front-end: the acquire forms, `Lockable` and `LockHold` |
//! | `critical_section.rs` | the one `run` behind every hold's: a critical section stopped when the hold is lost, and `LockLost` |
//! | `revocation.rs` | revocation: the watch on a revocable node, `Revocable`, `Revoker` |
//! | `mutex.rs`, `read_write.rs`, `semaphore.rs`, `semaphore_mutex.rs`, `multi.rs` | the recipes, thin |

mod acquire;
mod critical_section;
mod dir_mirror;
mod fast_path;
mod fence;
mod held;
mod internals;
pub(crate) mod kazoo;
mod mirror_slot;
mod mirror_wait;
mod multi;
mod mutex;
mod node_watch;
mod read_write;
mod reentrant;
mod revocation;
mod semaphore;
mod semaphore_mutex;
mod start_over;

// The lock core, for the recipes built on it outside this module (the leader recipes).
pub(crate) use self::acquire::Block;
pub(crate) use self::critical_section::run_until_lost;
pub(crate) use self::held::{HeldNode, NodeWatch};
pub(crate) use self::internals::LockInternals;

pub use self::acquire::{LockHold, Lockable};
pub use self::critical_section::LockLost;
pub use self::fast_path::{FastPathFallback, FastPathStats};
pub use self::multi::{MultiLock, MultiLockGuard};
pub use self::mutex::{InterProcessMutex, MutexGuard};
pub use self::read_write::{InterProcessReadWriteLock, ReadLock, ReadLockGuard, WriteLock, WriteLockGuard};
pub use self::revocation::{Revocable, Revoker};
pub use self::semaphore::{InterProcessSemaphore, SemaphoreLease};
pub use self::semaphore_mutex::{InterProcessSemaphoreMutex, SemaphoreMutexGuard};
