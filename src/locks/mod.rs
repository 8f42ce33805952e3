//! Distributed locks, wire-compatible with Curator's lock recipes.
//!
//! Inside, from the bottom up:
//!
//! | file | holds |
//! | --- | --- |
//! | `node.rs` | a lock node's life as types (pending create, created node) and protected creation |
//! | `held.rs` | the one release core (`HeldNode`) and the non-owning `NodeWatch` guards observe |
//! | `driver.rs` | who holds: sort keys and predicates over the children (pure) |
//! | `internals.rs` | the one wait engine (Curator's `LockInternals`) and the start-over loop |
//! | `reentrant.rs` | per-task reentrancy: holds, their guards, who owns them |
//! | `acquire.rs` | the one acquire front-end: the acquire forms, `Lockable` and `LockHold` |
//! | `mutex.rs`, `semaphore.rs`, `semaphore_mutex.rs`, `multi.rs` | the recipes, thin |

mod acquire;
mod driver;
mod held;
mod internals;
mod multi;
mod mutex;
mod node;
mod reentrant;
mod semaphore;
mod semaphore_mutex;

// The lock core, for the recipes built on it outside this module (the leader recipes).
pub(crate) use self::acquire::Block;
pub(crate) use self::driver::{Driver, StandardDriver, Verdict};
pub(crate) use self::held::{HeldNode, NodeWatch};
pub(crate) use self::internals::LockInternals;
pub(crate) use self::node::{retry_request, Failure};

pub use self::acquire::{LockHold, Lockable};
pub use self::multi::{MultiLock, MultiLockGuard};
pub use self::mutex::{InterProcessMutex, MutexGuard};
pub use self::semaphore::{InterProcessSemaphore, SemaphoreLease};
pub use self::semaphore_mutex::{InterProcessSemaphoreMutex, SemaphoreMutexGuard};
