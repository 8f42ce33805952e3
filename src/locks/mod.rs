//! Distributed locks, wire-compatible with Curator's lock recipes.
//!
//! Inside, from the bottom up:
//!
//! | file | holds |
//! | --- | --- |
//! | `node.rs` | a lock node's life as types (pending create, created node) and protected creation |
//! | `held.rs` | the one release core (`HeldNode`) and the non-owning `NodeWatch` guards observe |
//! | `driver.rs` | who holds: sort keys and predicates over the children (pure) |
//! | `internals.rs` | the one wait engine (Curator's `LockInternals`) |
//! | `start_over.rs` | the start-over loop: a fresh node when the last one went missing |
//! | `fast_path.rs` | the uncontended mutex taken with the create alone, when provably safe |
//! | `reentrant.rs` | per-task reentrancy: holds, their guards, who owns them |
//! | `acquire.rs` | the one acquire front-end: the acquire forms, `Lockable` and `LockHold` |
//! | `revocation.rs` | revocation: the watch on a revocable node, `Revocable`, `Revoker` |
//! | `mutex.rs`, `read_write.rs`, `semaphore.rs`, `semaphore_mutex.rs`, `multi.rs` | the recipes, thin |

mod acquire;
mod driver;
mod fast_path;
mod fence;
mod held;
mod internals;
mod multi;
mod mutex;
mod node;
mod read_write;
mod reentrant;
mod revocation;
mod semaphore;
mod semaphore_mutex;
mod start_over;

// The lock core, for the recipes built on it outside this module (the leader recipes).
pub(crate) use self::acquire::Block;
pub(crate) use self::driver::{Driver, ReadDriver, StandardDriver, Verdict, WriteDriver};
pub(crate) use self::held::{HeldNode, NodeWatch};
pub(crate) use self::internals::LockInternals;
pub(crate) use self::node::{retry_request, Failure, PendingCreate};

pub use self::acquire::{LockHold, Lockable};
pub use self::fast_path::{FastPathFallback, FastPathStats};
pub use self::multi::{MultiLock, MultiLockGuard};
pub use self::mutex::{InterProcessMutex, MutexGuard};
pub use self::read_write::{InterProcessReadWriteLock, ReadLock, ReadLockGuard, WriteLock, WriteLockGuard};
pub use self::revocation::{Revocable, Revoker};
pub use self::semaphore::{InterProcessSemaphore, SemaphoreLease};
pub use self::semaphore_mutex::{InterProcessSemaphoreMutex, SemaphoreMutexGuard};
