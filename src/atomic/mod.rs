//! Atomic values (Curator's `recipes.atomic` package): [`DistributedAtomicLong`] (8 bytes),
//! [`DistributedAtomicInteger`] (4 bytes) and [`DistributedAtomicValue`] (raw bytes), each
//! one persistent node changed by versioned writes, optionally promoted to a lock, and
//! [`CachedAtomicLong`] / [`CachedAtomicInteger`], which hand out a counter's values in
//! reserved blocks.

mod bytes;
mod cached;
mod engine;
mod known;
mod number;
mod result;

pub use self::bytes::DistributedAtomicValue;
pub use self::cached::{CachedAtomicInteger, CachedAtomicLong, CachedAtomicNumber};
pub use self::number::{AtomicNumber, DistributedAtomicInteger, DistributedAtomicLong, DistributedAtomicNumber};
pub use self::result::{AtomicStats, AtomicValue, PromotedToLock};
