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
mod deadline;
#[cfg(feature = "discovery")]
#[cfg_attr(docsrs, doc(cfg(feature = "discovery")))]
pub mod discovery;
mod error;
mod framework;
pub mod guide;
mod leader;
mod lease;
mod locks;
pub mod migrations;
mod mirror;
#[cfg(feature = "serde")]
mod modeled;
mod nodes;
mod partition;
pub mod path;
pub mod protocol;
mod queue;
pub mod retry;
mod runtime;
#[cfg(feature = "schema")]
#[cfg_attr(docsrs, doc(cfg(feature = "schema")))]
pub mod schema;
mod shared;
mod sync;
#[cfg(feature = "testing")]
#[cfg_attr(docsrs, doc(cfg(feature = "testing")))]
pub mod testing;
mod watch;

// The README's Rust blocks, compiled (and run) as doctests so that it stays true to the code.
#[cfg(all(doctest, feature = "testing", feature = "discovery"))]
#[doc = include_str!("../README.md")]
mod readme {}

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
pub use error::ReconfigRefusal;
pub use error::{Error, Result};
pub use framework::session_failure::SessionFailurePolicy;
pub use framework::wait_strategy::WaitStrategy;
pub use framework::CircuitBreakingStream;
pub use framework::TempFramework;
pub use framework::{
    AclProvider, ConnectionState, ConnectionStateErrorPolicy, ConnectionStateListener, ConnectionStateStream,
    FixedAclProvider, Framework, FrameworkBuilder, ListenerHandle, OpenAclProvider, ServerInfo, StateSnapshot,
};
pub use framework::{BackgroundError, BackgroundErrorKind, BackgroundErrors, BackgroundEvent};
pub use framework::{
    CreateBuilder, Created, Delete, Exists, ExistsWatched, Fence, GetChildren, GetChildrenWatched, GetChildrenWithStat,
    GetData, GetDataWatched, OneshotWatch, OpResult, Parents, SetData, Transaction, TransactionOp,
};
pub use framework::{Ensemble, EnsembleMember, Reconfig, ServerRole};
pub use framework::{NodeEvent, NodeEventKind, WatchMode};
pub use leader::{CloseMode, LeaderLatch, LeaderSelector, Leadership, LeadershipEvent, LeadershipEvents, Participant};
pub use leader::{ElectionKind, LeaderChanges, LeaderObserver};
pub use lease::{MultiNonBlockingLease, NonBlockingLease};
pub use locks::LockLost;
pub use locks::{FastPathFallback, FastPathStats, LockHold, Lockable, MultiLock, MultiLockGuard};
pub use locks::{InterProcessMutex, MutexGuard};
pub use locks::{InterProcessReadWriteLock, ReadLock, ReadLockGuard, WriteLock, WriteLockGuard};
pub use locks::{InterProcessSemaphore, InterProcessSemaphoreMutex, SemaphoreLease, SemaphoreMutexGuard};
pub use locks::{Revocable, Revoker};
#[cfg(feature = "serde")]
#[cfg_attr(docsrs, doc(cfg(feature = "serde")))]
pub use modeled::{
    CachedModel, Codec, CodecError, DecodeFailure, JsonCodec, ModelSpec, ModeledCache, ModeledCacheEvent,
    ModeledCacheEvents, ModeledFramework, ZNode, ZPath,
};
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
#[cfg(feature = "serde")]
#[cfg_attr(docsrs, doc(cfg(feature = "serde")))]
pub use shared::{TypedSharedValue, TypedSharedValueChanges};
pub use watch::stream::{PersistentWatch, ResyncReason, WatchEvent};
/// The ZooKeeper client this crate builds on, for every type of its own (`Client`, `Error`,
/// `WatchedEvent`, ...); the ones this crate's API takes or returns are also at the root.
pub use zookeeper_client as zk;
/// The client's types that this crate's API takes or returns: [`Framework::create`] takes a
/// [`CreateMode`], [`Framework::get_data`] and [`Framework::exists`] return a [`Stat`], an
/// [`AclProvider`] answers with [`Acl`]s (built from a [`Permission`] and an [`AuthId`]).
pub use zookeeper_client::{Acl, AuthId, CreateMode, Permission, Stat};
