//! Persistent and persistent-recursive watches (ZooKeeper 3.6's `addWatch`) as a stream that
//! survives reconnects and new sessions.
//!
//! Each [`PersistentWatch`] has a task that owns the client's watcher and forwards its events.
//! ZooKeeper does not replay events that happened while a connection was down, and
//! zookeeper-client 0.11 does not register persistent watches again on a reconnect at all
//! (its watch reset sends only the one-shot watches), so the task registers the watch again
//! itself: after every reconnect of the session (it sees the client's own `SyncConnected`,
//! in order with the node events) and on every new session (it follows the framework's state
//! watch). It yields [`WatchEvent::Resync`] before any event of the new registration, and
//! drops the old registration only once the new one exists (the client then sends no
//! `removeWatches`). It never polls a watcher again after its session ended (the client's
//! watcher panics then).
//!
//! Dropping the stream ends the task (it notices the closed channel), whose watcher's drop
//! queues the `removeWatches` on the client: nothing in `Drop` blocks or spawns.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use futures::Stream;
use tokio::sync::{mpsc, watch as latest, Notify};
use zookeeper_client::{AddWatchMode, EventType, PersistentWatcher, SessionState, WatchedEvent};

use super::{ConnectionState, Framework, Session, StateSnapshot, WeakFramework};
use crate::error::{Error, Result, ZkError};
use crate::retry::Doubling;
use crate::sync::Mutex;

/// How much a watch's stream buffers before its task waits for the consumer (the events
/// then wait in the client's own unbounded queue).
const BUFFER: usize = 64;

/// Which nodes a persistent watch reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WatchMode {
    /// The node itself: created, deleted, data changed, and its children changed (Curator's
    /// `AddWatchMode.PERSISTENT`).
    Persistent,
    /// The node and every descendant: created, deleted, data changed; never "children
    /// changed" (Curator's `AddWatchMode.PERSISTENT_RECURSIVE`).
    PersistentRecursive,
}

impl From<WatchMode> for AddWatchMode {
    fn from(mode: WatchMode) -> Self {
        match mode {
            WatchMode::Persistent => AddWatchMode::Persistent,
            WatchMode::PersistentRecursive => AddWatchMode::PersistentRecursive,
        }
    }
}

/// What happened to a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum NodeEventKind {
    /// The node was created.
    Created,
    /// The node was deleted.
    Deleted,
    /// The node's data was written (even with the same bytes).
    DataChanged,
    /// A child was created or deleted ([`WatchMode::Persistent`] only).
    ChildrenChanged,
}

/// One change of one node, as the server reported it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct NodeEvent {
    /// What happened.
    pub kind: NodeEventKind,
    /// The node's path, without the namespace.
    pub path: String,
    /// The transaction that made the change, on servers that report it (3.9+; `None` before).
    pub zxid: Option<i64>,
}

impl NodeEvent {
    /// The event of a node (not a session event) as the user sees it: the namespace stripped.
    pub(crate) fn of(framework: &Framework, kind: EventType, event: &WatchedEvent) -> NodeEvent {
        let kind = match kind {
            EventType::NodeCreated => NodeEventKind::Created,
            EventType::NodeDeleted => NodeEventKind::Deleted,
            EventType::NodeDataChanged => NodeEventKind::DataChanged,
            _ => NodeEventKind::ChildrenChanged,
        };
        let zxid = (event.zxid != WatchedEvent::NO_ZXID).then_some(event.zxid);
        NodeEvent { kind, path: framework.unfix_path(&event.path).to_owned(), zxid }
    }
}

/// Why events may have been missed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ResyncReason {
    /// The connection was lost and came back on the same session: changes made while it was
    /// down were not reported (ZooKeeper does not replay them to persistent watches).
    Reconnected,
    /// The session ended and a new one began: everything since the last event of the old
    /// session may have been missed, ephemeral nodes of the old session are gone.
    NewSession,
    /// The watch was registered again on the same connection, because another kind of watch
    /// this framework set on the same path may have silenced it (see the crate docs,
    /// "Watches").
    Rearmed,
}

/// An item of a [`PersistentWatch`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum WatchEvent {
    /// A node changed.
    Node(NodeEvent),
    /// Events may have been missed before this point: re-read what you keep. Every event
    /// after it comes from the watch registered again, so reading after receiving it misses
    /// nothing.
    Resync {
        /// Why.
        reason: ResyncReason,
    },
}

/// A persistent watch: a `Stream` of [`WatchEvent`]s, from [`Framework::watch`].
///
/// Items are `Ok` while the watch lives. An `Err` item is the last one: the watch could not be
/// registered again (the server refused it, for example after a move to a 3.5 server). The
/// stream ends (`None`) when the framework closes. Dropping it removes the watch from the
/// server (in the background).
#[must_use = "a watch reports nothing unless its stream is polled"]
pub struct PersistentWatch {
    path: String,
    mode: WatchMode,
    events: mpsc::Receiver<Result<WatchEvent>>,
}

impl std::fmt::Debug for PersistentWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PersistentWatch").field("path", &self.path).field("mode", &self.mode).finish()
    }
}

impl PersistentWatch {
    /// The watched path, as given (without the namespace).
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The watch's mode.
    pub fn mode(&self) -> WatchMode {
        self.mode
    }
}

impl Stream for PersistentWatch {
    type Item = Result<WatchEvent>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.events.poll_recv(cx)
    }
}

/// The framework's live persistent watches, by full path.
#[derive(Debug, Default)]
pub(crate) struct Table {
    next_id: u64,
    entries: Vec<Entry>,
}

#[derive(Debug)]
struct Entry {
    id: u64,
    full_path: String,
    mode: WatchMode,
    rearm: Arc<Notify>,
}

/// A persistent watch's entry in the framework's table, removed when this drops (when the
/// watch's task ends, or a recipe drops its own watcher).
pub(crate) struct Registered {
    table: Arc<Mutex<Table>>,
    id: u64,
}

impl Drop for Registered {
    fn drop(&mut self) {
        self.table.lock().entries.retain(|e| e.id != self.id);
    }
}

impl Framework {
    /// Sets a persistent watch on `path` (Curator's `watchers().add().withMode(..)`), and
    /// returns its events as a stream. The watch survives reconnects and new sessions: it is
    /// registered again after each, and the stream yields [`WatchEvent::Resync`] first,
    /// because ZooKeeper does not report what changed while the connection was down. The
    /// node need not exist.
    ///
    /// ```no_run
    /// # async fn example(framework: zk_recipes::Framework) -> zk_recipes::Result<()> {
    /// use futures::StreamExt;
    /// use zk_recipes::{WatchEvent, WatchMode};
    ///
    /// let mut watch = framework.watch("/config", WatchMode::PersistentRecursive).await?;
    /// while let Some(event) = watch.next().await {
    ///     match event? {
    ///         WatchEvent::Node(event) => println!("{:?} {}", event.kind, event.path),
    ///         WatchEvent::Resync { .. } => println!("events may have been missed: re-read"),
    ///         _ => {}
    ///     }
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// Two watches of this framework on the same path must have the same mode (the server
    /// keeps one mode per session and path).
    ///
    /// # Errors
    /// [`Error::InvalidPath`] before anything is sent; [`Error::InvalidArgument`] when the
    /// framework already watches `path` in the other mode; `Unimplemented` (as
    /// [`Error::ZooKeeper`]) from a server without persistent watches (ZooKeeper 3.5, or a
    /// server configured with `WatchManagerOptimized`, which answers `MarshallingError`); the framework's errors ([`Error::NotStarted`],
    /// [`Error::Closed`], connection errors once the retry policy gives up).
    ///
    /// # Cancel safety
    /// Cancel-safe: a cancelled call leaves no watch behind (the client drops a registration
    /// whose answer comes after the cancellation, which removes it from the server).
    pub async fn watch(&self, path: &str, mode: WatchMode) -> Result<PersistentWatch> {
        let full_path = self.full_path(path)?;
        if self.server_refuses_persistent_watches() {
            return Err(ZkError::Unimplemented.into());
        }
        let rearm = Arc::new(Notify::new());
        let registered = self.register_persistent_watch(&full_path, mode, rearm.clone())?;
        let mut state = self.state_watch();
        let (epoch, watcher) = self
            .with_retry(|session: Session| {
                let full_path = &full_path;
                async move {
                    let watcher = session.client.watch(full_path, mode.into()).await;
                    watcher.map(|w| (session.epoch, w))
                }
            })
            .await
            .map_err(|e| self.note_refusal(e, self.epoch()))?;
        state.mark_changed();
        let read_only = self.state() == ConnectionState::ReadOnly;
        let (tx, events) = mpsc::channel(BUFFER);
        let task = Task { weak: self.downgrade(), full_path, mode, tx, rearm, _registered: registered };
        tokio::spawn(task.run(watcher, epoch, read_only, state));
        Ok(PersistentWatch { path: path.to_owned(), mode, events })
    }

    /// Enters a persistent watch on `full_path` in the framework's table (for a recipe that
    /// adds its own watcher on the session's client): while the returned entry lives, a
    /// watched read of this framework on the path is refused, and a watch in the other mode
    /// too. `rearm` is notified if the watch must be added again.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when the framework already watches `full_path` in the other
    /// mode.
    pub(crate) fn register_persistent_watch(
        &self,
        full_path: &str,
        mode: WatchMode,
        rearm: Arc<Notify>,
    ) -> Result<Registered> {
        let registry = self.registry();
        let mut table = registry.watches.lock();
        if let Some(other) = table.entries.iter().find(|e| e.full_path == full_path && e.mode != mode) {
            return Err(Error::invalid_argument(
                "mode",
                format!(
                    "{full_path} is already watched as {:?} by this framework; a session keeps one mode per path",
                    other.mode
                ),
            ));
        }
        table.next_id += 1;
        let id = table.next_id;
        table.entries.push(Entry { id, full_path: full_path.to_owned(), mode, rearm });
        Ok(Registered { table: registry.watches.clone(), id })
    }

    /// Whether a persistent watch of this framework is set on `full_path` (for code that is
    /// about to set a one-shot watch there: on ZooKeeper 3.6-3.8 that silences the persistent
    /// watch's creations, and removing the one-shot again removes it).
    pub(crate) fn has_persistent_watch(&self, full_path: &str) -> bool {
        self.registry().watches.lock().entries.iter().any(|e| e.full_path == full_path)
    }

    /// Registers the persistent watches on `full_path` again, each yielding
    /// [`ResyncReason::Rearmed`] first: to be called after this framework set a one-shot watch
    /// on a persistently watched path, or dropped one before it fired (on ZooKeeper 3.6-3.8
    /// either leaves the persistent watch partly silenced).
    #[allow(dead_code)]
    pub(crate) fn rearm_persistent_watches(&self, full_path: &str) {
        for entry in self.registry().watches.lock().entries.iter().filter(|e| e.full_path == full_path) {
            entry.rearm.notify_one();
        }
    }

    /// Records a refused `addWatch` for the session it was sent on; every refusal of the
    /// feature is reported as `Unimplemented`.
    pub(crate) fn note_refusal(&self, error: Error, epoch: u64) -> Error {
        match error {
            Error::ZooKeeper(e) if refuses_persistent_watches(&e) => {
                self.note_persistent_watches_refused(epoch);
                ZkError::Unimplemented.into()
            }
            other => other,
        }
    }
}

/// Whether an `addWatch` error means the server has no persistent watches (3.5 answers
/// `Unimplemented`; a server with `WatchManagerOptimized`, `MarshallingError`).
fn refuses_persistent_watches(error: &ZkError) -> bool {
    matches!(error, ZkError::Unimplemented | ZkError::MarshallingError)
}

/// What a watch's task owns.
struct Task {
    weak: WeakFramework,
    full_path: String,
    mode: WatchMode,
    tx: mpsc::Sender<Result<WatchEvent>>,
    rearm: Arc<Notify>,
    _registered: Registered,
}

/// The outcome of registering the watch again.
enum Readd {
    Added(u64, PersistentWatcher),
    Failed(Error),
    Stop,
}

/// What woke the task.
enum Wake {
    Consumer,
    Event(WatchedEvent),
    State(Option<StateSnapshot>),
    Rearm,
}

impl Task {
    async fn run(
        self,
        watcher: PersistentWatcher,
        mut epoch: u64,
        mut read_only: bool,
        mut state: latest::Receiver<StateSnapshot>,
    ) {
        // `None` once its session ended: the client's watcher must not be polled again.
        let mut watcher = Some(watcher);
        let mut resync: Option<ResyncReason> = None;
        loop {
            if let Some(reason) = resync.take() {
                match self.readd(&mut state).await {
                    Readd::Added(new_epoch, new_watcher) => {
                        let reason = if new_epoch != epoch { ResyncReason::NewSession } else { reason };
                        tracing::debug!(path = %self.full_path, ?reason, "persistent watch registered again");
                        epoch = new_epoch;
                        // The old watcher goes only now: with the new one in place on the same
                        // client, its drop sends no removeWatches.
                        drop(watcher.replace(new_watcher));
                        if !self.send(Ok(WatchEvent::Resync { reason })).await {
                            return;
                        }
                    }
                    Readd::Failed(error) => {
                        tracing::warn!(path = %self.full_path, %error, "persistent watch could not be registered again");
                        self.send(Err(error)).await;
                        return;
                    }
                    Readd::Stop => return,
                }
            }
            let wake = tokio::select! {
                biased;
                () = self.tx.closed() => Wake::Consumer,
                event = next_event(&mut watcher) => Wake::Event(event),
                changed = state.changed() => Wake::State(changed.ok().map(|()| *state.borrow_and_update())),
                () = self.rearm.notified() => Wake::Rearm,
            };
            match wake {
                Wake::Consumer | Wake::State(None) => return,
                Wake::Rearm => resync = Some(ResyncReason::Rearmed),
                Wake::State(Some(snapshot)) => {
                    let open = self.weak.upgrade().is_some_and(|framework| !framework.is_closed());
                    if !open {
                        return;
                    }
                    if snapshot.epoch > epoch && snapshot.state.is_connected() {
                        resync = Some(ResyncReason::NewSession);
                    }
                }
                Wake::Event(event) => match event.event_type {
                    EventType::Session => match event.session_state {
                        // A new connection of the session: the server holds no watch for
                        // us. A session that started read-only gets a new session (with the
                        // same client) at its first read-write server.
                        connected @ (SessionState::SyncConnected | SessionState::ConnectedReadOnly) => {
                            let left_read_only = read_only && connected == SessionState::SyncConnected;
                            read_only = connected == SessionState::ConnectedReadOnly;
                            resync = Some(match left_read_only {
                                true => ResyncReason::NewSession,
                                false => ResyncReason::Reconnected,
                            });
                        }
                        state if state.is_terminated() => watcher = None,
                        _ => {}
                    },
                    kind => {
                        let Some(item) = self.node_event(kind, event) else { return };
                        if !self.send(Ok(WatchEvent::Node(item))).await {
                            return;
                        }
                    }
                },
            }
        }
    }

    /// Sends an item; false when the consumer is gone.
    async fn send(&self, item: Result<WatchEvent>) -> bool {
        self.tx.send(item).await.is_ok()
    }

    /// The event as the user sees it; `None` when the framework is gone.
    fn node_event(&self, kind: EventType, event: WatchedEvent) -> Option<NodeEvent> {
        let framework = self.weak.upgrade()?;
        Some(NodeEvent::of(&framework, kind, &event))
    }

    /// Registers the watch on the current session, trying again (through connection loss and
    /// new sessions) until it is registered, the server refuses it, the framework closes or
    /// the consumer leaves.
    async fn readd(&self, state: &mut latest::Receiver<StateSnapshot>) -> Readd {
        let spacing = Doubling { first: Duration::from_millis(50), max: Duration::from_secs(1) };
        let mut attempt = 0;
        loop {
            let Some(framework) = self.weak.upgrade() else { return Readd::Stop };
            if framework.is_closed() {
                return Readd::Stop;
            }
            if framework.server_refuses_persistent_watches() {
                return Readd::Failed(ZkError::Unimplemented.into());
            }
            let Ok(session) = framework.session() else { return Readd::Stop };
            // The task must not keep the framework alive while it waits.
            drop(framework);
            let registering = session.client.watch(&self.full_path, self.mode.into());
            let result = tokio::select! {
                result = registering => result,
                () = self.tx.closed() => return Readd::Stop,
            };
            match result {
                Ok(watcher) => return Readd::Added(session.epoch, watcher),
                Err(e) if refuses_persistent_watches(&e) => {
                    if let Some(framework) = self.weak.upgrade() {
                        framework.note_persistent_watches_refused(session.epoch);
                    }
                    return Readd::Failed(ZkError::Unimplemented.into());
                }
                Err(e) if crate::error::is_zk_retryable(&e) || matches!(e, ZkError::ClientClosed) => {
                    tracing::debug!(path = %self.full_path, error = %e, "registering the watch again failed; retrying");
                }
                Err(e) => return Readd::Failed(e.into()),
            }
            let delay = crate::retry::RetryPolicy::next_delay(&spacing, attempt, Duration::ZERO).unwrap_or_default();
            attempt += 1;
            tokio::select! {
                _ = state.changed() => {}
                () = tokio::time::sleep(delay) => {}
                () = self.tx.closed() => return Readd::Stop,
            }
        }
    }
}

/// The next event of the watcher; pending forever without one.
async fn next_event(watcher: &mut Option<PersistentWatcher>) -> WatchedEvent {
    match watcher {
        Some(watcher) => watcher.changed().await,
        None => std::future::pending().await,
    }
}

#[cfg(all(test, feature = "testing"))]
mod tests {
    use std::time::Duration;

    use futures::StreamExt;

    use super::*;

    async fn next_item(watch: &mut PersistentWatch) -> WatchEvent {
        match tokio::time::timeout(Duration::from_secs(10), watch.next()).await {
            Ok(Some(Ok(item))) => item,
            other => panic!("no watch item: {other:?}"),
        }
    }

    fn node(kind: NodeEventKind, path: &str) -> WatchEvent {
        WatchEvent::Node(NodeEvent { kind, path: path.to_owned(), zxid: None })
    }

    /// Creates and deletes `{dir}/{name}` and returns the next item: `Created` when the watch
    /// hears creations, `Deleted` when they are silenced (deletions still arrive).
    async fn probe(fw: &Framework, watch: &mut PersistentWatch, dir: &str, name: &str) -> WatchEvent {
        let path = format!("{dir}/{name}");
        fw.create(&path).data(b"").await.unwrap();
        fw.delete(&path).await.unwrap();
        let item = next_item(watch).await;
        if item == node(NodeEventKind::Created, &path) {
            assert_eq!(next_item(watch).await, node(NodeEventKind::Deleted, &path));
        }
        item
    }

    /// ZooKeeper 3.6-3.8 keep one watch mode per session and path: a one-shot watch set on a
    /// persistently watched path silences the creations below it (ZOOKEEPER-4466), and the
    /// one-shot's removal (the client sends it when the watcher is dropped before firing)
    /// removes half of the persistent watch (ZOOKEEPER-4472). The framework's remedy: register
    /// the persistent watch again afterwards, with a `Resync` first.
    #[tokio::test]
    async fn a_one_shot_watch_on_the_same_path_and_session_silences_creations_until_rearmed() {
        let test = async {
            let server = crate::testing::shared_server().await.expect("shared server");
            let fw = Framework::connect(&server.connect_string()).await.expect("framework");
            let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
            let dir = format!("/watch-hazards-{}-{nanos}", std::process::id());
            fw.create(&dir).data(b"").await.unwrap();
            let mut watch = fw.watch(&dir, WatchMode::PersistentRecursive).await.unwrap();
            assert!(fw.has_persistent_watch(&dir));
            assert_eq!(
                probe(&fw, &mut watch, &dir, "before").await,
                node(NodeEventKind::Created, &format!("{dir}/before"))
            );

            // ZOOKEEPER-4466: an `exists` watch on the directory, on the same session.
            let client = fw.zk_client().unwrap();
            let (_, oneshot) = client.check_and_watch_stat(&dir).await.unwrap();
            let silenced = format!("{dir}/silenced");
            assert_eq!(probe(&fw, &mut watch, &dir, "silenced").await, node(NodeEventKind::Deleted, &silenced));
            fw.rearm_persistent_watches(&dir);
            assert_eq!(next_item(&mut watch).await, WatchEvent::Resync { reason: ResyncReason::Rearmed });
            assert_eq!(
                probe(&fw, &mut watch, &dir, "rearmed").await,
                node(NodeEventKind::Created, &format!("{dir}/rearmed"))
            );

            // ZOOKEEPER-4472: the one-shot dropped before it fired sends removeWatches(dir, data).
            drop(oneshot);
            let removed = format!("{dir}/removed");
            assert_eq!(probe(&fw, &mut watch, &dir, "removed").await, node(NodeEventKind::Deleted, &removed));
            fw.rearm_persistent_watches(&dir);
            assert_eq!(next_item(&mut watch).await, WatchEvent::Resync { reason: ResyncReason::Rearmed });
            assert_eq!(
                probe(&fw, &mut watch, &dir, "back").await,
                node(NodeEventKind::Created, &format!("{dir}/back"))
            );

            drop(watch);
            fw.delete(&dir).await.unwrap();
            fw.close().await;
        };
        tokio::time::timeout(Duration::from_secs(60), test).await.expect("test finished in time");
    }
}
