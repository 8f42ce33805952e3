//! The cache's side of the mirror: the mirror under one lock, and the subscribers (streams and
//! listeners) that get its changes as [`CacheEvent`]s.

use std::sync::Arc;

use tokio::sync::watch;

use super::node::{CacheEvent, ChildData};
use super::subscription::{CatchUp, Receiver, Subscriber};
use crate::framework::metrics::{CacheEventKind, CacheMetrics};
use crate::mirror::driver::Host;
use crate::mirror::{Change, Item, Mirror, Scope, Status};
use crate::sync::Mutex;

/// Where the cache's life stands, for `initialized()`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Phase {
    /// Not started, or its start failed.
    Unstarted,
    /// A `start()` is in progress.
    Starting,
    Loading,
    Initialized,
    /// Closed, or its background task ended before the load completed (the framework closed,
    /// the server refused the watch): it will not be initialized.
    Closed,
}

pub(crate) struct Hub<T> {
    state: Mutex<HubState<T>>,
    phase: watch::Sender<Phase>,
    /// The root's path as users name it (no namespace).
    root: String,
    scope: Scope,
    metrics: CacheMetrics,
}

struct HubState<T> {
    mirror: Mirror<T>,
    subscribers: Vec<Arc<Subscriber<T>>>,
    initialized: bool,
    closed: bool,
    /// The background task ended (its framework closed, or its watch was refused): nothing
    /// more comes, so every stream ends once it has taken what is queued.
    ended: bool,
    /// The nodes counted in the size gauge (shared by the framework's caches without path
    /// labels: each adds its own).
    counted: usize,
}

impl<T> Hub<T> {
    pub(crate) fn new(root: String, scope: Scope, metrics: CacheMetrics) -> Self {
        let state = HubState {
            mirror: Mirror::new(scope),
            subscribers: Vec::new(),
            initialized: false,
            closed: false,
            ended: false,
            counted: 0,
        };
        Hub { state: Mutex::new(state), phase: watch::channel(Phase::Unstarted).0, root, scope, metrics }
    }

    pub(crate) fn metrics(&self) -> &CacheMetrics {
        &self.metrics
    }

    /// The user path of a path relative to the root.
    pub(crate) fn user_path(&self, rel: &str) -> String {
        match (self.root.as_str(), rel) {
            (root, "") => root.to_owned(),
            ("/", rel) => format!("/{rel}"),
            (root, rel) => format!("{root}/{rel}"),
        }
    }

    /// The path relative to the root of a user path, if it is the root or below it.
    pub(crate) fn relative<'a>(&self, path: &'a str) -> Option<&'a str> {
        if path == self.root {
            return Some("");
        }
        let rest = if self.root == "/" {
            path.strip_prefix('/')
        } else {
            path.strip_prefix(self.root.as_str())?.strip_prefix('/')
        };
        rest.filter(|r| !r.is_empty())
    }

    fn child_data(&self, rel: &str, item: &Item<T>) -> ChildData<T> {
        ChildData::new(self.user_path(rel).into(), item.stat, item.data.clone())
    }

    pub(crate) fn phase(&self) -> watch::Receiver<Phase> {
        self.phase.subscribe()
    }

    /// A start began (`Starting`), failed (`Unstarted`) or succeeded (`Loading`); nothing
    /// changes once the cache is initialized or closed.
    pub(crate) fn starting(&self, phase: Phase) {
        self.phase.send_if_modified(|p| {
            let moves = matches!(p, Phase::Unstarted | Phase::Starting);
            if moves {
                *p = phase;
            }
            moves
        });
    }

    /// The background task ended: a load not complete by now never will be, and no event
    /// comes any more: every stream and listener ends once it has taken what is queued (what
    /// the cache holds stays readable until `close()`).
    pub(crate) fn ended(&self) {
        let mut state = self.state.lock();
        state.ended = true;
        // Kept: a later `close()` still drops what they hold and cancels a listener's call.
        for subscriber in &state.subscribers {
            subscriber.finish();
        }
        drop(state);
        self.phase.send_if_modified(|p| {
            let ends = !matches!(p, Phase::Initialized | Phase::Closed);
            if ends {
                *p = Phase::Closed;
            }
            ends
        });
    }

    pub(crate) fn is_complete(&self) -> bool {
        let state = self.state.lock();
        !state.closed && state.mirror.status() == Status::Complete
    }

    pub(crate) fn get(&self, path: &str) -> Option<ChildData<T>> {
        let rel = self.relative(path)?;
        let state = self.state.lock();
        state.mirror.tree().get(rel).map(|e| self.child_data(rel, &e.item))
    }

    pub(crate) fn children(&self, path: &str) -> Vec<ChildData<T>> {
        let Some(rel) = self.relative(path) else { return Vec::new() };
        let state = self.state.lock();
        state.mirror.tree().children(rel).into_iter().map(|(rel, e)| self.child_data(&rel, &e.item)).collect()
    }

    pub(crate) fn nodes(&self) -> Vec<ChildData<T>> {
        self.nodes_of(&self.state.lock())
    }

    pub(crate) fn len(&self) -> usize {
        self.state.lock().mirror.tree().len()
    }

    /// A new subscriber that may fall `capacity` events behind: it gets `Created` for every
    /// node held now (and `Initialized` if the initial load is done) before any later change.
    /// After `close()` its stream is empty.
    pub(crate) fn subscribe(self: &Arc<Self>, capacity: usize) -> Receiver<T>
    where
        T: Send + Sync + 'static,
    {
        let subscriber = Subscriber::new(capacity);
        let cache: std::sync::Weak<dyn CatchUp<T>> = Arc::downgrade(self) as std::sync::Weak<dyn CatchUp<T>>;
        let receiver = Receiver::new(subscriber.clone(), cache);
        let mut state = self.state.lock();
        if state.closed {
            subscriber.close();
            return receiver;
        }
        let mut first: Vec<CacheEvent<T>> = self.nodes_of(&state).into_iter().map(CacheEvent::Created).collect();
        if state.initialized {
            first.push(CacheEvent::Initialized);
        }
        subscriber.prime(first);
        if state.ended {
            subscriber.finish();
        }
        state.subscribers.push(subscriber);
        receiver
    }

    /// Brings the size gauge to what the mirror holds now.
    fn recount(&self, state: &mut HubState<T>) {
        let now = state.mirror.tree().len();
        self.metrics.resize(state.counted, now);
        state.counted = now;
    }

    fn nodes_of(&self, state: &HubState<T>) -> Vec<ChildData<T>> {
        state.mirror.tree().entries().into_iter().map(|(rel, e)| self.child_data(&rel, &e.item)).collect()
    }

    /// Ends every stream and listener, and forgets what the cache held.
    pub(crate) fn close(&self) {
        let mut state = self.state.lock();
        state.closed = true;
        for subscriber in state.subscribers.drain(..) {
            subscriber.close();
        }
        state.mirror = Mirror::new(self.scope);
        self.recount(&mut state);
        drop(state);
        self.phase.send_replace(Phase::Closed);
    }

    fn publish(&self, state: &mut HubState<T>, changes: Vec<Change<T>>) {
        let mut events: Vec<CacheEvent<T>> = changes
            .into_iter()
            .inspect(|change| self.metrics.event(event_kind(change)))
            .map(|change| match change {
                Change::Created { path, new } => CacheEvent::Created(self.child_data(&path, &new)),
                Change::Changed { path, old, new } => {
                    CacheEvent::Changed(self.child_data(&path, &old), self.child_data(&path, &new))
                }
                Change::Deleted { path, old } => CacheEvent::Deleted(self.child_data(&path, &old)),
            })
            .collect();
        let initialized_now = !state.initialized && state.mirror.completed() > 0;
        if initialized_now {
            state.initialized = true;
            events.push(CacheEvent::Initialized);
        }
        if !events.is_empty() {
            state.subscribers.retain(|subscriber| subscriber.send(&events));
        }
        if initialized_now {
            self.phase.send_replace(Phase::Initialized);
        }
    }
}

impl<T: Send + Sync + 'static> Host<Mirror<T>> for Hub<T> {
    fn update(&self, f: &mut dyn FnMut(&mut Mirror<T>)) {
        let mut state = self.state.lock();
        if state.closed {
            return;
        }
        f(&mut state.mirror);
        let changes = state.mirror.take_changes();
        if !changes.is_empty() {
            self.recount(&mut state);
        }
        self.publish(&mut state, changes);
    }
}

impl<T: Send + Sync + 'static> CatchUp<T> for Hub<T> {
    fn catch_up(&self, subscriber: &Subscriber<T>) -> Option<CacheEvent<T>> {
        let state = self.state.lock();
        if state.closed {
            return None;
        }
        let missed = subscriber.take_lag()?;
        self.metrics.lagged(missed);
        tracing::debug!(root = %self.root, missed, "cache: a subscriber lagged; it gets the whole cache");
        Some(CacheEvent::Lagged { missed, nodes: self.nodes_of(&state) })
    }
}

fn event_kind<T>(change: &Change<T>) -> CacheEventKind {
    match change {
        Change::Created { .. } => CacheEventKind::Created,
        Change::Changed { .. } => CacheEventKind::Changed,
        Change::Deleted { .. } => CacheEventKind::Deleted,
    }
}

impl<T> Drop for Hub<T> {
    fn drop(&mut self) {
        let state = self.state.lock();
        self.metrics.resize(state.counted, 0);
    }
}

impl<T> std::fmt::Debug for Hub<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hub").field("root", &self.root).field("scope", &self.scope).finish_non_exhaustive()
    }
}
