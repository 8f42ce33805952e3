//! Distributed locks, wire-compatible with Curator's lock recipes.
//!
//! | you want | use | Curator class |
//! | --- | --- | --- |
//! | one holder at a time, reentrant per task | [`InterProcessMutex`] | `InterProcessMutex` |
//!
//! Inside: one wait engine (`internals`), the rules for who holds (`driver`), and the one
//! release core (`held`) that every guard ends in.

mod driver;
mod held;
mod internals;
mod mutex;
mod owner;

pub use self::mutex::{InterProcessMutex, MutexGuard};
