#![doc = include_str!("docs/crate.md")]
#![forbid(unsafe_code)]
#![warn(missing_docs, missing_debug_implementations, unreachable_pub, rust_2018_idioms)]
#![cfg_attr(docsrs, feature(doc_cfg))]

mod cache;
mod error;
mod framework;
pub mod guide;
mod leader;
mod locks;
mod mirror;
pub mod path;
pub mod retry;
mod sync;
#[cfg(feature = "testing")]
#[cfg_attr(docsrs, doc(cfg(feature = "testing")))]
pub mod testing;

pub use cache::{
    CacheEvent, CacheEventStream, CacheMode, ChildData, CuratorCache, CuratorCacheBuilder, CuratorCacheListener,
    NodeStream, PathChildrenEvent, PathChildrenStream,
};
pub use error::{Error, Result};
pub use framework::{
    AclProvider, ConnectionState, ConnectionStateErrorPolicy, ConnectionStateListener, ConnectionStateStream,
    FixedAclProvider, Framework, FrameworkBuilder, ListenerHandle, OpenAclProvider, StateSnapshot,
};
pub use leader::{CloseMode, LeaderLatch, LeaderSelector, Leadership, LeadershipEvent, LeadershipEvents, Participant};
pub use locks::{FastPathFallback, FastPathStats, LockHold, Lockable, MultiLock, MultiLockGuard};
pub use locks::{InterProcessMutex, MutexGuard};
pub use locks::{InterProcessReadWriteLock, ReadLock, ReadLockGuard, WriteLock, WriteLockGuard};
pub use locks::{InterProcessSemaphore, InterProcessSemaphoreMutex, SemaphoreLease, SemaphoreMutexGuard};
pub use locks::{Revocable, Revoker};
/// The ZooKeeper client this crate builds on, for its types (`Acl`, `CreateMode`, `Stat`, ...).
pub use zookeeper_client as zk;
