//! Caches: [`CuratorCache`] and its node and path-children views, on one mirror of a
//! ZooKeeper subtree (see the `mirror` module) kept current by one persistent watch.
//!
//! # Memory
//! A cached node costs the client about 600 bytes with 100 bytes of data: its entry in the
//! mirror, its path, stat and shared data. Measured as the growth of the client's resident
//! memory (RSS) while a cache of a two-level tree (100 parents, 100-byte data on every node)
//! is held, in a process doing nothing else (`tests/cache.rs`, `memory_per_cached_node` and
//! `memory_per_cached_node_100k`, run by name with `--ignored --nocapture`), December 2026,
//! Linux x86-64, glibc malloc, a debug build:
//!
//! | nodes cached | RSS before | RSS after | bytes per node |
//! | --- | --- | --- | --- |
//! | 10,001 | 11.6 MiB | 17.6 MiB | 634 |
//! | 100,001 | 14.6 MiB | 69.5 MiB | 576 |
//!
//! The figure is one run's, on a shared machine; the allocator's own overhead is included.

mod builder;
mod handle;
mod hub;
mod listener;
mod mode;
mod node;
mod views;

pub use self::builder::CuratorCacheBuilder;
pub use self::handle::CuratorCache;
pub use self::listener::{CacheEventStream, CuratorCacheListener};
pub use self::mode::CacheMode;
pub use self::node::{CacheEvent, ChildData};
pub use self::views::{NodeStream, PathChildrenEvent, PathChildrenStream};
