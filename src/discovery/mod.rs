//! Service discovery wire-compatible with curator-x-discovery 5.x (feature `discovery`).
//!
//! Instances live at `<base>/<name>/<id>`, each node's data the instance's JSON exactly as
//! Curator's `JsonInstanceSerializer` writes it ([`JsonInstanceSerializer`]). A dynamic
//! instance is an ephemeral node, made again after every new session (a
//! [`PersistentNode`](crate::PersistentNode)); static and permanent instances are persistent
//! nodes. [`ServiceDiscovery`] registers and queries, [`ServiceCache`] keeps one service's
//! instances current on a [`CuratorCache`](crate::CuratorCache), and [`ServiceProvider`] picks
//! one (round robin, random, sticky, or an [`InstanceStrategy`] of the caller's) leaving out
//! instances noted as failing and those the caller's filters refuse;
//! [`ServiceCache::changes`] streams the instances after every change.

mod cache;
mod instance;
mod provider;
mod registry;

pub use self::cache::{ServiceCache, ServiceCacheChanges};
pub use self::instance::{
    JsonInstanceSerializer, ServiceInstance, ServiceInstanceBuilder, ServiceType, UriPart, UriSpec,
};
pub use self::provider::{DownInstancePolicy, InstanceStrategy, ProviderStrategy, ServiceProvider};
pub use self::registry::ServiceDiscovery;
