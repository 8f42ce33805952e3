//! [`ServiceCache`]: one service's instances kept current on a [`CuratorCache`].

use std::collections::BTreeMap;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use futures::stream::BoxStream;
use futures::{FutureExt, Stream, StreamExt};
use serde::de::DeserializeOwned;
use tokio::sync::watch;

use super::instance::{JsonInstanceSerializer, ServiceInstance};
use crate::cache::{CacheEvent, CacheEventStream, CacheMode, ChildData, CuratorCache};
use crate::error::Result;
use crate::framework::{Framework, ListenerHandle};

/// The instances of one service, kept current by a [`CuratorCache`] of `<base>/<name>`
/// (Curator's `ServiceCache`). Nodes whose data is not an instance's JSON are left out, as
/// Curator leaves out an instance it cannot read.
///
/// Each node's JSON is parsed once, when the cache's event for it (created or changed) is
/// applied; [`instances`](Self::instances) hands out one shared list of what was parsed (made
/// again only after a change), so a query costs no parse, no copy and no request.
#[derive(Debug)]
pub struct ServiceCache<T = serde_json::Value> {
    cache: CuratorCache,
    parsed: Arc<Parsed<T>>,
    applier: Mutex<Option<ListenerHandle>>,
}

/// The parsed instances and the cache's events not applied yet. The events are those of one
/// subscription, so they are applied exactly in the order the cache emitted them.
struct Parsed<T> {
    /// The service's path: the cache also holds this node, which is no instance.
    dir: String,
    serializer: JsonInstanceSerializer,
    state: Mutex<ParsedState<T>>,
    /// Bumped whenever the instances change.
    generation: watch::Sender<u64>,
    /// `close()` was called: the cache's events end because it holds nothing any more (they
    /// also end when its task ends, its framework closed, and it then keeps what it held).
    closed: std::sync::atomic::AtomicBool,
}

struct ParsedState<T> {
    events: CacheEventStream,
    /// By node name, so in id order.
    instances: BTreeMap<String, Arc<ServiceInstance<T>>>,
    /// `instances` as handed out, until the next change.
    listed: Option<Arc<[Arc<ServiceInstance<T>>]>>,
}

impl<T> std::fmt::Debug for Parsed<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Parsed").finish_non_exhaustive()
    }
}

impl<T: DeserializeOwned> Parsed<T> {
    fn lock(&self) -> std::sync::MutexGuard<'_, ParsedState<T>> {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        // Every change the cache has made so far is queued on the subscription (it is sent
        // under the cache's lock, as the change is made): applying what is queued makes the
        // parsed view as current as the cache itself.
        let mut changed = false;
        while let Some(next) = state.events.next().now_or_never() {
            match next {
                Some(event) => changed |= self.apply(&mut state.instances, event),
                // The cache closed (it holds nothing), or its task ended (it keeps what it
                // held).
                None => {
                    if self.closed.load(std::sync::atomic::Ordering::Acquire) {
                        changed |= !state.instances.is_empty();
                        state.instances.clear();
                    }
                    break;
                }
            }
        }
        if changed {
            state.listed = None;
            self.generation.send_modify(|g| *g += 1);
        }
        state
    }

    /// The instances as one shared list, made again only after a change.
    fn snapshot(&self) -> Arc<[Arc<ServiceInstance<T>>]> {
        let mut state = self.lock();
        let state = &mut *state;
        state.listed.get_or_insert_with(|| state.instances.values().cloned().collect()).clone()
    }

    /// Applies one event; true when it changed the instances.
    fn apply(&self, instances: &mut BTreeMap<String, Arc<ServiceInstance<T>>>, event: CacheEvent) -> bool {
        if let CacheEvent::Lagged { nodes, .. } = event {
            // Events were dropped: the cache's nodes now are the whole truth.
            instances.clear();
            for node in nodes.iter().filter(|node| node.path() != self.dir) {
                if let Some(instance) = self.parse(node) {
                    instances.insert(node.name().to_owned(), Arc::new(instance));
                }
            }
            return true;
        }
        if !matches!(event.path(), Some(path) if path != self.dir) {
            return false;
        }
        match event {
            CacheEvent::Created(node) | CacheEvent::Changed(_, node) => match self.parse(&node) {
                Some(instance) => {
                    instances.insert(node.name().to_owned(), Arc::new(instance));
                    true
                }
                None => instances.remove(node.name()).is_some(),
            },
            CacheEvent::Deleted(node) => instances.remove(node.name()).is_some(),
            _ => false,
        }
    }

    fn parse(&self, node: &ChildData) -> Option<ServiceInstance<T>> {
        let data = node.data()?;
        match self.serializer.deserialize(data) {
            Ok(instance) => Some(instance),
            Err(e) => {
                tracing::debug!(path = node.path(), error = %e, "service cache: not an instance's JSON");
                None
            }
        }
    }
}

impl<T: DeserializeOwned> ServiceCache<T> {
    pub(super) fn new(framework: &Framework, dir: &str, serializer: JsonInstanceSerializer) -> Result<Self> {
        let cache = CuratorCache::builder(framework, dir).mode(CacheMode::Children).build()?;
        let state = ParsedState { events: cache.events(), instances: BTreeMap::new(), listed: None };
        let generation = watch::channel(0).0;
        let parsed = Arc::new(Parsed {
            dir: dir.to_owned(),
            serializer,
            state: Mutex::new(state),
            generation,
            closed: std::sync::atomic::AtomicBool::new(false),
        });
        Ok(ServiceCache { cache, parsed, applier: Mutex::new(None) })
    }

    /// Starts the cache and waits for its first load. From then on the cache's events are
    /// parsed as they come (by a listener on the cache), and by every
    /// [`instances`](Self::instances) call before it answers.
    ///
    /// # Errors
    /// As [`CuratorCache::start`].
    ///
    /// # Cancel safety
    /// Cancel-safe: a cancelled start leaves the cache unstarted.
    pub async fn start(&self) -> Result<()>
    where
        T: Send + Sync + 'static,
    {
        self.ensure_applier()?;
        self.cache.start().await?;
        self.cache.initialized().await
    }

    /// Parses the events as they come, so they do not pile up between queries. The listener's
    /// own events only wake it; what it applies is the shared subscription's.
    fn ensure_applier(&self) -> Result<()>
    where
        T: Send + Sync + 'static,
    {
        let mut applier = self.applier.lock().unwrap_or_else(|e| e.into_inner());
        if applier.is_none() {
            let parsed = Arc::downgrade(&self.parsed);
            let handle = self.cache.on_event(move |_| {
                if let Some(parsed) = parsed.upgrade() {
                    drop(parsed.lock());
                }
                async {}
            })?;
            *applier = Some(handle);
        }
        Ok(())
    }

    /// The instances held now, ordered by id: one shared list of the instances as parsed
    /// when their nodes last changed (no parse, no request; the list is made once per change
    /// of the service, and every query until the next change gets the same one).
    pub fn instances(&self) -> Arc<[Arc<ServiceInstance<T>>]> {
        self.parsed.snapshot()
    }

    /// The instances after every change (Curator's `ServiceCacheListener.cacheChanged`, with
    /// the instances): first those held now, then the list after each change of the
    /// service's instances (an instance registered, changed or gone; a resync after the
    /// cache missed events). Changes closer together than the reader reads are merged into
    /// one list, the latest. After [`close`](Self::close) it yields an empty list and waits.
    pub fn changes(&self) -> ServiceCacheChanges<T>
    where
        T: Send + Sync + 'static,
    {
        let parsed = self.parsed.clone();
        let generation = parsed.generation.subscribe();
        let stream =
            futures::stream::unfold((parsed, generation, true), |(parsed, mut generation, first)| async move {
                if !first && generation.changed().await.is_err() {
                    return None;
                }
                generation.borrow_and_update();
                let instances = parsed.snapshot();
                Some((instances, (parsed, generation, false)))
            });
        ServiceCacheChanges { inner: stream.boxed() }
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
        self.parsed.closed.store(true, std::sync::atomic::Ordering::Release);
        self.cache.close().await;
        drop(self.applier.lock().unwrap_or_else(|e| e.into_inner()).take());
        // The parsed view learns of the close (it holds nothing now), and `changes()` says so.
        drop(self.parsed.lock());
    }
}

/// The stream of [`ServiceCache::changes`]: the instances after each change.
pub struct ServiceCacheChanges<T = serde_json::Value> {
    inner: BoxStream<'static, Arc<[Arc<ServiceInstance<T>>]>>,
}

impl<T> std::fmt::Debug for ServiceCacheChanges<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServiceCacheChanges").finish_non_exhaustive()
    }
}

impl<T> Stream for ServiceCacheChanges<T> {
    type Item = Arc<[Arc<ServiceInstance<T>>]>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.inner.poll_next_unpin(cx)
    }
}
