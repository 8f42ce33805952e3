#![doc = include_str!("docs/crate.md")]
// With TLS, one call is `unsafe` by zookeeper-client's choice (turning off hostname
// verification, a warning rather than a memory hazard); everything else stays free of it.
#![cfg_attr(not(feature = "tls"), forbid(unsafe_code))]
#![cfg_attr(feature = "tls", deny(unsafe_code))]
#![warn(missing_docs, missing_debug_implementations, unreachable_pub, rust_2018_idioms)]
#![cfg_attr(docsrs, feature(doc_cfg))]

mod atomic;
mod barriers;
mod cache;
#[cfg(feature = "discovery")]
#[cfg_attr(docsrs, doc(cfg(feature = "discovery")))]
pub mod discovery;
mod error;
mod framework;
pub mod guide;
mod leader;
mod lease;
mod locks;
mod mirror;
mod nodes;
mod partition;
pub mod path;
pub mod protocol;
mod queue;
pub mod retry;
mod shared;
mod sync;
#[cfg(feature = "testing")]
#[cfg_attr(docsrs, doc(cfg(feature = "testing")))]
pub mod testing;
mod watch;

/// The attribute [`ConnectionStateListener`] is written with: `#[zk_recipes::async_trait]` on an
/// `impl ConnectionStateListener for ...` block, without a dependency of your own.
pub use async_trait::async_trait;
pub use atomic::{
    AtomicNumber, AtomicStats, AtomicValue, DistributedAtomicInteger, DistributedAtomicLong, DistributedAtomicNumber,
    DistributedAtomicValue, PromotedToLock,
};
pub use atomic::{CachedAtomicInteger, CachedAtomicLong, CachedAtomicNumber};
pub use barriers::{DistributedBarrier, DistributedDoubleBarrier};
pub use cache::{
    CacheEvent, CacheEventStream, CacheMode, ChildData, CuratorCache, CuratorCacheBuilder, CuratorCacheListener,
    NodeStream, PathChildrenEvent, PathChildrenStream,
};
pub use error::{Error, Result};
pub use framework::session_failure::SessionFailurePolicy;
pub use framework::wait_strategy::WaitStrategy;
pub use framework::{
    AclProvider, ConnectionState, ConnectionStateErrorPolicy, ConnectionStateListener, ConnectionStateStream,
    FixedAclProvider, Framework, FrameworkBuilder, ListenerHandle, OpenAclProvider, ServerInfo, StateSnapshot,
};
pub use framework::{
    CreateBuilder, Created, Delete, Exists, ExistsWatched, Fence, GetChildren, GetChildrenWatched, GetChildrenWithStat,
    GetData, GetDataWatched, OneshotWatch, OpResult, Parents, SetData, Transaction,
};
pub use framework::{NodeEvent, NodeEventKind, WatchMode};
pub use leader::{CloseMode, LeaderLatch, LeaderSelector, Leadership, LeadershipEvent, LeadershipEvents, Participant};
pub use leader::{ElectionKind, LeaderChanges, LeaderObserver};
pub use lease::{MultiNonBlockingLease, NonBlockingLease};
pub use locks::{FastPathFallback, FastPathStats, LockHold, Lockable, MultiLock, MultiLockGuard};
pub use locks::{InterProcessMutex, MutexGuard};
pub use locks::{InterProcessReadWriteLock, ReadLock, ReadLockGuard, WriteLock, WriteLockGuard};
pub use locks::{InterProcessSemaphore, InterProcessSemaphoreMutex, SemaphoreLease, SemaphoreMutexGuard};
pub use locks::{Revocable, Revoker};
pub use nodes::{
    GroupMember, MembershipEvent, MembershipEvents, PersistentNode, PersistentNodeBuilder, PersistentTtlNode,
    PersistentTtlNodeBuilder,
};
pub use partition::{PartitionFunc, PartitionState, SetPartitioner, SetPartitionerBuilder};
pub use queue::{
    DistributedDelayQueue, DistributedIdQueue, DistributedPriorityQueue, DistributedQueue, QueueStream,
    SimpleDistributedQueue,
};
pub use queue::{PutEvent, PutEvents, QueueSharder, QueueSharderPolicies};
pub use shared::{SharedCount, SharedCountChanges, SharedValue, SharedValueChanges, VersionedValue};
pub use watch::stream::{PersistentWatch, ResyncReason, WatchEvent};
/// The ZooKeeper client this crate builds on, for every type of its own (`Client`, `Error`,
/// `WatchedEvent`, ...); the ones this crate's API takes or returns are also at the root.
pub use zookeeper_client as zk;
/// The client's types that this crate's API takes or returns: [`Framework::create`] takes a
/// [`CreateMode`], [`Framework::get_data`] and [`Framework::exists`] return a [`Stat`], an
/// [`AclProvider`] answers with [`Acl`]s (built from a [`Permission`] and an [`AuthId`]).
pub use zookeeper_client::{Acl, AuthId, CreateMode, Permission, Stat};
