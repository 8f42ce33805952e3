//! [`CuratorCache`]: the public handle on one mirror.

use std::sync::Arc;

use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::hub::{Hub, Phase};
use super::listener::{self, CacheEventStream, CuratorCacheListener};
use super::mode::CacheMode;
use super::node::{CacheEvent, ChildData};
use crate::error::{Error, Result};
use crate::framework::metrics::{CacheMetrics, Resyncs};
use crate::framework::{Framework, ListenerHandle, WatchMode};
use crate::mirror::driver::{self, Decode};
use crate::mirror::{Mirror, Reads, Scope};
use crate::sync::Mutex;
use crate::watch::{Depth, SessionWatch};

/// A local copy of a ZooKeeper node and (by [`CacheMode`]) its descendants or its children,
/// kept current by one persistent watch (Curator's `CuratorCache`).
///
/// ```no_run
/// # async fn example(framework: zk_recipes::Framework) -> zk_recipes::Result<()> {
/// use futures::StreamExt;
/// use zk_recipes::{CacheEvent, CuratorCache};
///
/// let cache = CuratorCache::builder(&framework, "/config").build()?;
/// let mut events = cache.events();
/// cache.start().await?;
/// while let Some(event) = events.next().await {
///     match event {
///         CacheEvent::Created(node) => println!("+ {}", node.path()),
///         CacheEvent::Changed(_, node) => println!("~ {} v{}", node.path(), node.stat().version),
///         CacheEvent::Deleted(node) => println!("- {}", node.path()),
///         CacheEvent::Initialized => println!("loaded {} nodes", cache.len()),
///         _ => {}
///     }
/// }
/// # Ok(()) }
/// ```
///
/// # How it stays current
/// `start()` adds one persistent recursive watch on the path (a persistent one for
/// [`CacheMode::SingleNode`]); the path need not exist. Then the cache lists and reads the
/// subtree, at most 64 reads pipelined ([`max_reads_in_flight`]), and applies the watch's
/// events on top. Events for one path are applied in the order the server applied the
/// changes; across paths, a deletion (applied at its event) can be told before an earlier
/// create or change of another path (applied when its read returns).
///
/// # Requests
/// An event names a node and what happened to it, not its stat or data, so:
/// - a created or changed node costs one read of it (`getData`; `exists` with
///   [`stats_only`]), sent as the event arrives (with data kept, the reads of events that
///   arrive together go as one `multiRead`); a node has at most two reads out (the second
///   sent at the change that comes while the first is out; later events share it), never more
///   reads than events;
/// - a deleted node costs nothing;
/// - the load, and each resync, cost one `addWatch`, a `getData` of every node (those found
///   by one listing go together, in `multiRead` requests) and one `getChildren` per node that
///   has children (with [`stats_only`]: one `getChildren` per node, which carries the stat).
///
/// [`max_reads_in_flight`]: crate::CuratorCacheBuilder::max_reads_in_flight
/// [`stats_only`]: crate::CuratorCacheBuilder::stats_only
///
/// # Through faults
/// While the connection is down, and after a session is lost, the cache keeps its last view
/// and says so: [`is_complete`](Self::is_complete) is false, reads return that last view. When
/// the connection is back (or a new session is open), the cache adds its watch again, reads
/// the subtree again and emits the differences as events: nodes gone (for example the old
/// session's ephemeral nodes) as `Deleted`, changed ones as `Changed`, new ones as `Created`.
/// Changes made and undone while it was away may not show; it never ends on a stale value.
/// `Initialized` is sent once, after the first load.
///
/// # Servers
/// Persistent watches need ZooKeeper 3.6 or newer. On a server without them (ZooKeeper 3.5,
/// or a 3.6+ server configured with `WatchManagerOptimized`) the cache falls back to one-shot
/// watches, as Curator's `CuratorCacheBridge` falls back to a `TreeCache`: every cached node
/// holds a data watch (an `exists`) and, above the mode's depth, a children watch (a
/// `getChildren`), each set again by the read that follows its firing. Events, views and
/// convergence are the same; what differs is the cost (two more reads per node at each load
/// and after each new session, three more per created node, one more per changed or deleted
/// node, two watches per node on the server)
/// and that changes made while a watch is being set again come as one event. A cache that
/// fell back stays on one-shot watches for its life, on every session.
///
/// While the cache runs, the framework refuses one-shot watches of its own on the cache's root
/// (an `exists` or `getData` watch there would make ZooKeeper 3.6-3.8 stop sending the
/// recursive watch's create events for the root's children: ZOOKEEPER-4466), and a persistent
/// watch of the other mode on it. A second framework, or a watch on another path, avoids
/// that. Code that sets watches through [`Framework::zk_client`] is not seen: it must set
/// none on the cache's root.
///
/// Nodes the session may not read are left out: their events are not delivered by servers
/// that filter events by ACL (3.8.4+, 3.9.2+ and some distribution builds), and their reads
/// are refused.
///
/// # Closing
/// [`close`](Self::close) (or dropping the cache) stops the watch; streams end and listeners
/// are unregistered; the cache then holds nothing (Curator's default).
pub struct CuratorCache<T = Vec<u8>> {
    framework: Framework,
    path: String,
    full: String,
    mode: CacheMode,
    reads: Reads,
    decode: Decode<T>,
    concurrency: usize,
    event_capacity: usize,
    hub: Arc<Hub<T>>,
    lifecycle: Mutex<Lifecycle>,
}

enum Lifecycle {
    Built,
    Starting,
    Started { stop: watch::Sender<bool>, task: JoinHandle<()> },
    Closed,
}

impl<T> std::fmt::Debug for CuratorCache<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CuratorCache")
            .field("path", &self.path)
            .field("mode", &self.mode)
            .field("len", &self.hub.len())
            .field("complete", &self.hub.is_complete())
            .finish_non_exhaustive()
    }
}

/// What a cache is built with (checked by its builder).
pub(super) struct Settings<T> {
    pub(super) path: String,
    /// The path with the namespace.
    pub(super) full: String,
    pub(super) mode: CacheMode,
    pub(super) stats_only: bool,
    pub(super) decode: Decode<T>,
    pub(super) concurrency: usize,
    pub(super) event_capacity: usize,
}

impl<T: Send + Sync + 'static> CuratorCache<T> {
    pub(super) fn from_settings(framework: Framework, settings: Settings<T>) -> Self {
        let Settings { path, full, mode, stats_only, decode, concurrency, event_capacity } = settings;
        let scope = match mode {
            CacheMode::Tree => Scope::Tree,
            CacheMode::SingleNode => Scope::Node,
            CacheMode::Children => Scope::Children,
        };
        let reads = if stats_only { Reads::Stat } else { Reads::Data };
        CuratorCache {
            hub: Arc::new(Hub::new(
                path.clone(),
                scope,
                CacheMetrics::new(&framework.observer().metrics.labels, &path),
            )),
            framework,
            path,
            full,
            mode,
            reads,
            decode,
            concurrency,
            event_capacity,
            lifecycle: Mutex::new(Lifecycle::Built),
        }
    }

    /// Adds the watch and starts loading; returns once the server accepted the watch (the
    /// load goes on in the background: see [`initialized`](Self::initialized) and
    /// [`CacheEvent::Initialized`]). Starting a started cache does nothing.
    ///
    /// # Errors
    /// [`Error::Closed`] after `close()`, also one made while this start was under way (the
    /// cache stays closed); [`Error::NotStarted`] when the framework is not
    /// started; the server's refusal of the watch (a server without persistent watches is no
    /// refusal: the cache falls back to one-shot watches, set in the background);
    /// [`Error::InvalidArgument`] while another `start()` is in progress, or when this
    /// framework watches the path in the other mode (a [`Framework::watch`], another cache, a
    /// lock's mirror of its directory: a session keeps one watch mode per path).
    ///
    /// # Cancel safety
    /// Cancel-safe: a cancelled start leaves the cache unstarted (it may be started again).
    pub async fn start(&self) -> Result<()> {
        {
            let mut lifecycle = self.lifecycle.lock();
            match *lifecycle {
                Lifecycle::Closed => return Err(Error::Closed),
                Lifecycle::Started { .. } => return Ok(()),
                Lifecycle::Starting => return Err(Error::invalid_argument("start", "another start() is in progress")),
                Lifecycle::Built => *lifecycle = Lifecycle::Starting,
            }
        }
        self.hub.starting(Phase::Starting);
        let reset = ResetOnDrop(&self.lifecycle, &self.hub);
        let (mode, depth) = match self.mode {
            CacheMode::SingleNode => (WatchMode::Persistent, Depth::Node),
            CacheMode::Children => (WatchMode::PersistentRecursive, Depth::Children),
            CacheMode::Tree => (WatchMode::PersistentRecursive, Depth::Tree),
        };
        // Without persistent watches (ZooKeeper 3.5), one-shot watches stand in.
        let watch = SessionWatch::add_or_emulate(&self.framework, &self.full, mode, depth).await?;
        let config = driver::Config {
            root: self.full.clone(),
            reads: self.reads,
            decode: Arc::clone(&self.decode),
            concurrency: self.concurrency,
            report: driver::Report {
                observer: self.framework.observer().clone(),
                recipe: "cache",
                resyncs: Resyncs::Cache(self.hub.metrics().clone()),
            },
            no_multi_read: std::sync::atomic::AtomicBool::new(false),
        };
        let (stop, stopped) = watch::channel(false);
        self.hub.starting(Phase::Loading);
        let (framework, hub) = (self.framework.clone(), Arc::clone(&self.hub));
        let task = tokio::spawn(async move {
            driver::run::<Mirror<T>, _>(framework, Arc::clone(&hub), watch, config, stopped).await;
            hub.ended();
        });
        std::mem::forget(reset);
        {
            let mut lifecycle = self.lifecycle.lock();
            if matches!(*lifecycle, Lifecycle::Closed) {
                // Closed while this start was under way: the close found nothing to stop, so
                // what started stops here (a closed cache stays closed).
                drop(lifecycle);
                let _ = stop.send(true);
                task.abort();
                return Err(Error::Closed);
            }
            *lifecycle = Lifecycle::Started { stop, task };
        }
        tracing::debug!(path = %self.path, mode = ?self.mode, "cache started");
        Ok(())
    }

    /// Waits until the initial load is complete (at once if it is); a `start()` in progress
    /// is waited for.
    ///
    /// # Errors
    /// [`Error::NotStarted`] when the cache was not started (or its start failed);
    /// [`Error::Closed`] when the cache is closed first, or its framework (the load then never
    /// completes).
    ///
    /// # Cancel safety
    /// Cancel-safe: it only observes.
    pub async fn initialized(&self) -> Result<()> {
        let mut phase = self.hub.phase();
        match phase.wait_for(|p| !matches!(p, Phase::Starting | Phase::Loading)).await.map(|p| *p) {
            Ok(Phase::Initialized) => Ok(()),
            Ok(Phase::Unstarted) => Err(Error::NotStarted),
            _ => Err(Error::Closed),
        }
    }

    /// Stops the watch and the background task; every stream ends (events not yet taken are
    /// dropped), every listener is unregistered (a call in progress is cancelled, and no other
    /// is made), and the cache forgets what it held. Once it returns, the watch is gone
    /// from the framework's table (its path is free for other watches of this framework).
    /// Closing twice does nothing.
    ///
    /// # Cancel safety
    /// Cancel-safe: everything is stopped at the first poll; only the wait for the
    /// background task's end is cut short.
    pub async fn close(&self) {
        let previous = std::mem::replace(&mut *self.lifecycle.lock(), Lifecycle::Closed);
        self.hub.close();
        if let Lifecycle::Started { stop, task } = previous {
            let _ = stop.send(true);
            task.abort();
            let _ = task.await;
        }
    }

    /// The path the cache was built for.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// True while the cache holds every change up to the last event the server sent it: the
    /// watch is in place and the latest load or resync is done. False before the first load
    /// completes, while disconnected, after a session loss until the resync is done, and
    /// after `close()`. A node whose create or change event just arrived shows its previous
    /// state until its read returns (one round trip).
    pub fn is_complete(&self) -> bool {
        self.hub.is_complete()
    }

    /// The cached node at `path` (a full path, as Curator's `get`).
    pub fn get(&self, path: &str) -> Option<ChildData<T>> {
        self.hub.get(path)
    }

    /// The cached direct children of `path`, in name order.
    pub fn children(&self, path: &str) -> Vec<ChildData<T>> {
        self.hub.children(path)
    }

    /// Every cached node, parents before children, siblings in name order.
    pub fn nodes(&self) -> Vec<ChildData<T>> {
        self.hub.nodes()
    }

    /// How many nodes the cache holds.
    pub fn len(&self) -> usize {
        self.hub.len()
    }

    /// True when the cache holds no node.
    pub fn is_empty(&self) -> bool {
        self.hub.len() == 0
    }

    /// Every change from now on, as a stream, starting with a `Created` for each node held
    /// now and `Initialized` if the initial load is done. The stream ends when the cache
    /// closes, or when its background task ends (its framework closed, its watch refused),
    /// once it has taken what is queued. A stream that falls more than the cache's event capacity behind gets
    /// [`CacheEvent::Lagged`] (with the whole cache) instead of what it missed.
    pub fn events(&self) -> CacheEventStream<T> {
        CacheEventStream::new(self.hub.subscribe(self.event_capacity))
    }

    /// Registers a listener (Curator's `listenable().addListener`); it is called once per
    /// event, in order, on its own task, starting with the current nodes as for
    /// [`events`](Self::events). Dropping the handle unregisters it.
    ///
    /// # Errors
    /// [`Error::NotStarted`] outside a Tokio runtime.
    pub fn add_listener(&self, listener: Arc<dyn CuratorCacheListener<T>>) -> Result<ListenerHandle> {
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| Error::NotStarted)?;
        let events = self.hub.subscribe(self.event_capacity);
        let task = runtime.spawn(listener::run(events, listener));
        Ok(ListenerHandle::new(task.abort_handle()))
    }

    /// Registers a closure as a listener; see [`add_listener`](Self::add_listener).
    ///
    /// # Errors
    /// As [`add_listener`](Self::add_listener).
    pub fn on_event<F, Fut>(&self, f: F) -> Result<ListenerHandle>
    where
        F: Fn(CacheEvent<T>) -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = ()> + Send + 'static,
    {
        self.add_listener(Arc::new(listener::FnListener(f)))
    }
}

impl<T: Send + Sync + 'static> IntoIterator for &CuratorCache<T> {
    type Item = ChildData<T>;
    type IntoIter = std::vec::IntoIter<ChildData<T>>;

    /// The nodes held now (as [`CuratorCache::nodes`]).
    fn into_iter(self) -> Self::IntoIter {
        self.nodes().into_iter()
    }
}

impl<T> Drop for CuratorCache<T> {
    fn drop(&mut self) {
        if let Lifecycle::Started { task, .. } = std::mem::replace(self.lifecycle.get_mut(), Lifecycle::Closed) {
            task.abort();
        }
        self.hub.close();
    }
}

/// Puts a cache whose `start()` was cancelled or failed back to `Built`.
struct ResetOnDrop<'a, T>(&'a Mutex<Lifecycle>, &'a Hub<T>);

impl<T> Drop for ResetOnDrop<'_, T> {
    fn drop(&mut self) {
        let mut lifecycle = self.0.lock();
        if matches!(*lifecycle, Lifecycle::Starting) {
            *lifecycle = Lifecycle::Built;
            self.1.starting(Phase::Unstarted);
        }
    }
}
