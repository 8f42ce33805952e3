//! [`ModeledCache`]: a [`CuratorCache`] of a [`ModelSpec`]'s nodes, decoded (Curator's
//! `CachedModeledFramework`), that keeps the last value of each node that decoded.

use std::collections::BTreeMap;
use std::fmt;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures::stream::BoxStream;
use futures::{Stream, StreamExt};
use tokio::sync::{broadcast, watch};
use tokio::task::AbortHandle;
use zookeeper_client::Stat;

use super::codec::{Codec, JsonCodec};
use super::framework::ModeledFramework;
use super::zpath::ZPath;
use crate::cache::{CacheEvent, CacheEventStream, CacheMode, ChildData, CuratorCache};
use crate::error::{Error, Result};
use crate::sync::Mutex;

/// What the cache holds per node: the value, or why the bytes did not decode.
type Decoded<T> = std::result::Result<Arc<T>, String>;

/// Events a slow [`ModeledCache::events`] reader may fall behind before it gets
/// [`ModeledCacheEvent::Lagged`].
const EVENT_CAPACITY: usize = 1024;

/// A node of a [`ModeledCache`]: its path, the values of its path's parameters, and the last
/// value of it that decoded with the stat it had then.
#[non_exhaustive]
pub struct CachedModel<T> {
    /// The node's path (namespace stripped).
    pub path: String,
    /// The values of the template's parameters in the path, in order.
    pub ids: Vec<String>,
    /// The node's stat when it held `value`.
    pub stat: Stat,
    /// The value.
    pub value: Arc<T>,
}

impl<T> Clone for CachedModel<T> {
    fn clone(&self) -> Self {
        CachedModel { path: self.path.clone(), ids: self.ids.clone(), stat: self.stat, value: Arc::clone(&self.value) }
    }
}

impl<T: fmt::Debug> fmt::Debug for CachedModel<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CachedModel")
            .field("path", &self.path)
            .field("version", &self.stat.version)
            .field("value", &self.value)
            .finish()
    }
}

/// A node's data that did not decode: the node, the version that held it, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct DecodeFailure {
    /// The node's path (namespace stripped).
    pub path: String,
    /// The node's version (`stat.version`) that held the data.
    pub version: i32,
    /// The transaction that wrote it (`stat.mzxid`).
    pub mzxid: i64,
    /// Why it did not decode (the codec's or the decompressor's words).
    pub error: String,
}

impl DecodeFailure {
    pub(crate) fn new(path: &str, version: i32, mzxid: i64, error: String) -> Self {
        DecodeFailure { path: path.to_owned(), version, mzxid, error }
    }
}

/// A change in a [`ModeledCache`] (Curator's `ModeledCacheListener` events).
#[non_exhaustive]
pub enum ModeledCacheEvent<T> {
    /// A node's value decoded for the first time (a new node, or one found by the load).
    Added(CachedModel<T>),
    /// A node has a new value.
    Updated(CachedModel<T>),
    /// A node is gone: its last value.
    Removed(CachedModel<T>),
    /// A node's new data did not decode. The cache keeps the node's last value that did
    /// (if any); nothing else changes. Told once per version.
    DecodeFailed(DecodeFailure),
    /// The initial load is applied.
    Initialized,
    /// This reader fell behind by `missed` events, which were dropped for it: read
    /// [`ModeledCache::models`] for the current state; the events that follow go on from it.
    Lagged {
        /// How many events were dropped.
        missed: u64,
    },
}

impl<T> Clone for ModeledCacheEvent<T> {
    fn clone(&self) -> Self {
        match self {
            ModeledCacheEvent::Added(m) => ModeledCacheEvent::Added(m.clone()),
            ModeledCacheEvent::Updated(m) => ModeledCacheEvent::Updated(m.clone()),
            ModeledCacheEvent::Removed(m) => ModeledCacheEvent::Removed(m.clone()),
            ModeledCacheEvent::DecodeFailed(f) => ModeledCacheEvent::DecodeFailed(f.clone()),
            ModeledCacheEvent::Initialized => ModeledCacheEvent::Initialized,
            ModeledCacheEvent::Lagged { missed } => ModeledCacheEvent::Lagged { missed: *missed },
        }
    }
}

impl<T: fmt::Debug> fmt::Debug for ModeledCacheEvent<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ModeledCacheEvent::Added(m) => f.debug_tuple("Added").field(m).finish(),
            ModeledCacheEvent::Updated(m) => f.debug_tuple("Updated").field(m).finish(),
            ModeledCacheEvent::Removed(m) => f.debug_tuple("Removed").field(m).finish(),
            ModeledCacheEvent::DecodeFailed(e) => f.debug_tuple("DecodeFailed").field(e).finish(),
            ModeledCacheEvent::Initialized => f.write_str("Initialized"),
            ModeledCacheEvent::Lagged { missed } => f.debug_struct("Lagged").field("missed", missed).finish(),
        }
    }
}

/// What the cache's task keeps.
struct State<T> {
    models: BTreeMap<String, CachedModel<T>>,
    /// The nodes whose current data does not decode.
    failures: BTreeMap<String, DecodeFailure>,
}

/// The nodes of a [`ModelSpec`](crate::ModelSpec)'s path template, decoded and kept current
/// (Curator's `CachedModeledFramework`), built by [`ModeledFramework::cached`].
///
/// It is one [`CuratorCache`] (one persistent watch) on the template's fixed part: the node
/// itself for a resolved path, the parent's children for `/orders/{id}`, the subtree below the
/// first parameter otherwise, keeping only nodes whose path fits the template. Each node's
/// bytes are decoded once, when read.
///
/// A node whose new data does not decode (written by a peer with another version of the
/// model, or by hand) keeps its last value that did: [`get`](Self::get) and
/// [`models`](Self::models) go on returning it, and the failure is told as
/// [`ModeledCacheEvent::DecodeFailed`] (path, version, error) and listed by
/// [`failures`](Self::failures) until the node holds data that decodes again. A configuration
/// is never lost to a bad write.
///
/// ```no_run
/// # async fn example(orders: zk_recipes::ModeledFramework<String>) -> zk_recipes::Result<()> {
/// use futures::StreamExt;
/// use zk_recipes::ModeledCacheEvent;
///
/// let cache = orders.cached()?;
/// let mut events = cache.events();
/// cache.start().await?;
/// while let Some(event) = events.next().await {
///     match event {
///         ModeledCacheEvent::Added(order) | ModeledCacheEvent::Updated(order) => {
///             println!("{:?} = {}", order.ids, order.value)
///         }
///         ModeledCacheEvent::DecodeFailed(bad) => eprintln!("{} v{}: {}", bad.path, bad.version, bad.error),
///         _ => {}
///     }
/// }
/// # Ok(()) }
/// ```
#[doc(alias = "CachedModeledFramework")]
pub struct ModeledCache<T, C = JsonCodec> {
    cache: CuratorCache<Decoded<T>>,
    template: ZPath,
    state: Arc<Mutex<State<T>>>,
    /// Taken by `close`, so that streams end.
    events: Arc<Mutex<Option<broadcast::Sender<ModeledCacheEvent<T>>>>>,
    phase: watch::Sender<Phase>,
    task: Mutex<Option<AbortHandle>>,
    codec: std::marker::PhantomData<fn() -> C>,
}

/// Where a [`ModeledCache`] is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Loading,
    Initialized,
    Closed,
}

impl<T, C> fmt::Debug for ModeledCache<T, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ModeledCache").field("template", &self.template).finish_non_exhaustive()
    }
}

impl<T, C> ModeledFramework<T, C>
where
    T: Send + Sync + 'static,
    C: Codec<T>,
{
    /// A cache of this spec's nodes (Curator's `cached()`); start it with
    /// [`ModeledCache::start`]. Does no I/O.
    ///
    /// # Errors
    /// As [`CuratorCache::builder`]'s `build()`.
    pub fn cached(&self) -> Result<ModeledCache<T, C>> {
        let template = self.path().clone();
        let (root, mode) = if template.is_resolved() {
            (template.clone(), CacheMode::SingleNode)
        } else if template.is_resolved_but_last() {
            (template.parent().unwrap_or_else(ZPath::root), CacheMode::Children)
        } else {
            (template.fixed_prefix(), CacheMode::Tree)
        };
        let this = self.clone();
        let cache = CuratorCache::builder(self.framework(), &root.full_path()?)
            .mode(mode)
            .decoder(move |bytes: Vec<u8>| {
                Ok::<_, std::convert::Infallible>(this.decode("", &bytes).map(Arc::new).map_err(|e| match e {
                    Error::CorruptData { reason, expected, .. } => format!("not a valid {expected}: {reason}"),
                    other => other.to_string(),
                }))
            })
            .build()?;
        let (events, _) = broadcast::channel(EVENT_CAPACITY);
        Ok(ModeledCache {
            cache,
            template,
            state: Arc::new(Mutex::new(State { models: BTreeMap::new(), failures: BTreeMap::new() })),
            events: Arc::new(Mutex::new(Some(events))),
            phase: watch::channel(Phase::Loading).0,
            task: Mutex::new(None),
            codec: std::marker::PhantomData,
        })
    }
}

impl<T: Send + Sync + 'static, C> ModeledCache<T, C> {
    /// Starts the cache: adds its watch and loads in the background (see
    /// [`initialized`](Self::initialized)). Starting a started cache does nothing.
    ///
    /// # Errors
    /// As [`CuratorCache::start`].
    ///
    /// # Cancel safety
    /// Cancel-safe: a cancelled start leaves the cache unstarted.
    pub async fn start(&self) -> Result<()> {
        if self.task.lock().is_some() {
            return Ok(());
        }
        let Some(sender) = self.events.lock().clone() else { return Err(Error::Closed) };
        let events = self.cache.events();
        self.cache.start().await?;
        let mut task = self.task.lock();
        if task.is_none() {
            let applier = Applier {
                template: self.template.clone(),
                state: Arc::clone(&self.state),
                events: sender,
                slot: Arc::clone(&self.events),
                phase: self.phase.clone(),
            };
            *task = Some(tokio::spawn(applier.run(events)).abort_handle());
        }
        Ok(())
    }

    /// Waits until the initial load is applied (at once if it is).
    ///
    /// # Errors
    /// [`Error::NotStarted`] when the cache was not started (or its start failed);
    /// [`Error::Closed`] when the cache is closed first, or its framework (the load then never
    /// completes).
    ///
    /// # Cancel safety
    /// Cancel-safe: it only observes.
    pub async fn initialized(&self) -> Result<()> {
        let mut phase = self.phase.subscribe();
        let applied = phase.wait_for(|p| *p != Phase::Loading);
        // What ends the underlying load before it completes (no start, a failed one, a closed
        // framework) ends this wait; a load it completed is applied here next.
        let ended = async {
            match self.cache.initialized().await {
                Ok(()) => std::future::pending().await,
                Err(error) => error,
            }
        };
        tokio::select! {
            biased;
            applied = applied => match applied.map(|p| *p) {
                Ok(Phase::Initialized) => Ok(()),
                _ => Err(Error::Closed),
            },
            error = ended => Err(error),
        }
    }

    /// Stops the cache (as dropping it does); event streams end.
    ///
    /// # Cancel safety
    /// Cancel-safe: everything is stopped at the first poll.
    pub async fn close(&self) {
        self.stop();
        self.cache.close().await;
    }

    /// The path template.
    pub fn template(&self) -> &ZPath {
        &self.template
    }

    /// True while the underlying cache holds every change (see [`CuratorCache::is_complete`]).
    pub fn is_complete(&self) -> bool {
        self.cache.is_complete()
    }

    /// The node whose path has the template's parameters set to `ids`, with its last value
    /// that decoded.
    pub fn get<I>(&self, ids: I) -> Option<CachedModel<T>>
    where
        I: IntoIterator,
        I::Item: fmt::Display,
    {
        let path = self.template.resolved(ids).ok()?.full_path().ok()?;
        self.get_path(&path)
    }

    /// The node at `path` (namespace stripped), with its last value that decoded.
    pub fn get_path(&self, path: &str) -> Option<CachedModel<T>> {
        self.state.lock().models.get(path).cloned()
    }

    /// Every node with a value, in path order.
    pub fn models(&self) -> Vec<CachedModel<T>> {
        self.state.lock().models.values().cloned().collect()
    }

    /// The nodes whose current data does not decode, in path order (their last good value,
    /// if any, is still in [`models`](Self::models)).
    pub fn failures(&self) -> Vec<DecodeFailure> {
        self.state.lock().failures.values().cloned().collect()
    }

    /// Every change from now on (read [`models`](Self::models) for the state so far). The
    /// stream ends when the cache is closed or dropped, or when the underlying cache's task
    /// ends (its framework closed).
    pub fn events(&self) -> ModeledCacheEvents<T> {
        let rx = match &*self.events.lock() {
            Some(sender) => sender.subscribe(),
            // Closed: a stream that ends at once.
            None => broadcast::channel(1).1,
        };
        let inner = futures::stream::unfold(rx, |mut rx| async move {
            match rx.recv().await {
                Ok(event) => Some((event, rx)),
                Err(broadcast::error::RecvError::Lagged(missed)) => Some((ModeledCacheEvent::Lagged { missed }, rx)),
                Err(broadcast::error::RecvError::Closed) => None,
            }
        });
        ModeledCacheEvents { inner: inner.boxed() }
    }
}

impl<T, C> ModeledCache<T, C> {
    /// Stops the task and ends the streams; never blocks.
    fn stop(&self) {
        if let Some(task) = self.task.lock().take() {
            task.abort();
        }
        self.events.lock().take();
        self.phase.send_replace(Phase::Closed);
    }
}

impl<T, C> Drop for ModeledCache<T, C> {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The events of a [`ModeledCache`] ([`ModeledCache::events`]).
#[must_use = "streams do nothing unless polled"]
pub struct ModeledCacheEvents<T> {
    inner: BoxStream<'static, ModeledCacheEvent<T>>,
}

impl<T> fmt::Debug for ModeledCacheEvents<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ModeledCacheEvents").finish_non_exhaustive()
    }
}

impl<T> Stream for ModeledCacheEvents<T> {
    type Item = ModeledCacheEvent<T>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.inner.as_mut().poll_next(cx)
    }
}

/// The cache's task: applies the underlying cache's events to the typed state.
struct Applier<T> {
    template: ZPath,
    state: Arc<Mutex<State<T>>>,
    events: broadcast::Sender<ModeledCacheEvent<T>>,
    /// The cache's own sender: taken when the underlying cache's events end (its task ended:
    /// its framework closed), so that every stream ends too.
    slot: Arc<Mutex<Option<broadcast::Sender<ModeledCacheEvent<T>>>>>,
    phase: watch::Sender<Phase>,
}

impl<T: Send + Sync + 'static> Applier<T> {
    async fn run(self, mut events: CacheEventStream<Decoded<T>>) {
        while let Some(event) = events.next().await {
            match event {
                CacheEvent::Created(node) | CacheEvent::Changed(_, node) => self.upsert(&node),
                CacheEvent::Deleted(node) => self.remove(node.path()),
                CacheEvent::Initialized => {
                    self.phase.send_if_modified(|phase| {
                        let loading = *phase == Phase::Loading;
                        if loading {
                            *phase = Phase::Initialized;
                        }
                        loading
                    });
                    let _ = self.events.send(ModeledCacheEvent::Initialized);
                }
                CacheEvent::Lagged { nodes, .. } => {
                    let present: std::collections::HashSet<&str> = nodes.iter().map(ChildData::path).collect();
                    let gone: Vec<String> = {
                        let state = self.state.lock();
                        state
                            .models
                            .keys()
                            .chain(state.failures.keys())
                            .filter(|p| !present.contains(p.as_str()))
                            .cloned()
                            .collect()
                    };
                    for path in gone {
                        self.remove(&path);
                    }
                    for node in &nodes {
                        self.upsert(node);
                    }
                }
            }
        }
        // Nothing more comes: the streams end once they have taken what is queued.
        drop(self.slot.lock().take());
    }

    fn upsert(&self, node: &ChildData<Decoded<T>>) {
        let Some(ids) = self.template.ids(node.path()) else { return };
        let Some(decoded) = node.data() else { return };
        let stat = *node.stat();
        let event = {
            let mut state = self.state.lock();
            match decoded {
                Ok(value) => {
                    state.failures.remove(node.path());
                    let model = CachedModel { path: node.path().to_owned(), ids, stat, value: Arc::clone(value) };
                    match state.models.insert(model.path.clone(), model.clone()) {
                        Some(old) if old.stat.mzxid == stat.mzxid && old.stat.czxid == stat.czxid => None,
                        Some(_) => Some(ModeledCacheEvent::Updated(model)),
                        None => Some(ModeledCacheEvent::Added(model)),
                    }
                }
                Err(error) => {
                    let failure = DecodeFailure {
                        path: node.path().to_owned(),
                        version: stat.version,
                        mzxid: stat.mzxid,
                        error: error.clone(),
                    };
                    tracing::warn!(path = node.path(), version = stat.version, %error, "modeled cache: the node's data does not decode; keeping its last value");
                    match state.failures.insert(failure.path.clone(), failure.clone()) {
                        Some(old) if old.mzxid == failure.mzxid => None,
                        _ => Some(ModeledCacheEvent::DecodeFailed(failure)),
                    }
                }
            }
        };
        if let Some(event) = event {
            let _ = self.events.send(event);
        }
    }

    fn remove(&self, path: &str) {
        let removed = {
            let mut state = self.state.lock();
            state.failures.remove(path);
            state.models.remove(path)
        };
        if let Some(model) = removed {
            let _ = self.events.send(ModeledCacheEvent::Removed(model));
        }
    }
}
