//! [`ServiceCache`]: one service's instances kept current on a [`CuratorCache`].

use std::marker::PhantomData;

use serde::de::DeserializeOwned;

use super::instance::{JsonInstanceSerializer, ServiceInstance};
use crate::cache::{CacheMode, CuratorCache};
use crate::error::Result;
use crate::framework::Framework;

/// The instances of one service, kept current by a [`CuratorCache`] of `<base>/<name>`
/// (Curator's `ServiceCache`). Nodes whose data is not an instance's JSON are left out, as
/// Curator leaves out an instance it cannot read.
#[derive(Debug)]
pub struct ServiceCache<T = serde_json::Value> {
    cache: CuratorCache,
    dir: String,
    serializer: JsonInstanceSerializer,
    _payload: PhantomData<fn() -> T>,
}

impl<T: DeserializeOwned> ServiceCache<T> {
    pub(super) fn new(framework: &Framework, dir: &str, serializer: JsonInstanceSerializer) -> Result<Self> {
        let cache = CuratorCache::builder(framework, dir).mode(CacheMode::Children).build()?;
        Ok(ServiceCache { cache, dir: dir.to_owned(), serializer, _payload: PhantomData })
    }

    /// Starts the cache and waits for its first load.
    ///
    /// # Errors
    /// As [`CuratorCache::start`].
    ///
    /// # Cancel safety
    /// Cancel-safe: a cancelled start leaves the cache unstarted.
    pub async fn start(&self) -> Result<()> {
        self.cache.start().await?;
        self.cache.initialized().await
    }

    /// The instances held now, ordered by id.
    pub fn instances(&self) -> Vec<ServiceInstance<T>> {
        let mut nodes = self.cache.children(&self.dir);
        nodes.sort_by(|a, b| a.name().cmp(b.name()));
        nodes
            .iter()
            .filter_map(|node| {
                let data = node.data()?;
                match self.serializer.deserialize(data) {
                    Ok(instance) => Some(instance),
                    Err(e) => {
                        tracing::debug!(path = node.path(), error = %e, "service cache: not an instance's JSON");
                        None
                    }
                }
            })
            .collect()
    }

    /// The cache underneath (its events: [`CuratorCache::path_children_events`] of the
    /// service's path).
    pub fn curator_cache(&self) -> &CuratorCache {
        &self.cache
    }

    /// Closes the cache.
    ///
    /// # Cancel safety
    /// As [`CuratorCache::close`].
    pub async fn close(&self) {
        self.cache.close().await;
    }
}
