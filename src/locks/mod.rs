//! Distributed locks, wire-compatible with Curator's lock recipes.
//!
//! | you want | use | Curator class |
//! | --- | --- | --- |
//! | one holder at a time, reentrant per task | [`InterProcessMutex`] | `InterProcessMutex` |
//! | up to N holders (leases) at a time | [`InterProcessSemaphore`] | `InterProcessSemaphoreV2` |
//! | one holder, not reentrant, releasable from any task | [`InterProcessSemaphoreMutex`] | `InterProcessSemaphoreMutex` |
//! | several locks at once, all or nothing | [`MultiLock`] | `InterProcessMultiLock` |
//!
//! Inside: one wait engine (`internals`), the rules for who holds (`driver`), and the one
//! release core (`held`) that every guard ends in.

mod driver;
mod held;
mod internals;
mod multi;
mod mutex;
mod owner;
mod semaphore;
mod semaphore_mutex;

pub use self::multi::{LockHold, Lockable, MultiLock, MultiLockGuard};
pub use self::mutex::{InterProcessMutex, MutexGuard};
pub use self::semaphore::{InterProcessSemaphore, SemaphoreLease};
pub use self::semaphore_mutex::{InterProcessSemaphoreMutex, SemaphoreMutexGuard};
