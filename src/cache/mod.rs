//! Caches: [`CuratorCache`] and its node and path-children views, on one mirror of a
//! ZooKeeper subtree (see the `mirror` module) kept current by one persistent watch.

mod builder;
mod handle;
mod hub;
mod listener;
mod node;
mod views;

pub use self::builder::{CacheMode, CuratorCacheBuilder};
pub use self::handle::CuratorCache;
pub use self::listener::{CacheEventStream, CuratorCacheListener};
pub use self::node::{CacheEvent, ChildData};
pub use self::views::{NodeStream, PathChildrenEvent, PathChildrenStream};
