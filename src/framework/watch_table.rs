//! The framework's table of the watches its session holds on the server, by path: every
//! persistent watch (each added through one `SessionWatch`, whatever recipe made it) and every
//! one-shot watch the framework's own watched reads set.
//!
//! The server keeps one watch mode per session and path. On ZooKeeper 3.6-3.8 a one-shot watch
//! that a session sets on a path it already watches persistently turns the persistent watch
//! into a one-shot one (it stops hearing creations below the path: ZOOKEEPER-4466), and the
//! `RemoveWatches` that a one-shot watch dropped before it fired sends takes half of the
//! persistent watch with it (ZOOKEEPER-4472). So the table refuses:
//! - a persistent watch in the other mode on a path that one of the session's persistent
//!   watches holds (the server would switch the mode under the first one's feet);
//! - a one-shot watch of the framework's reads on a path watched persistently (the watched
//!   read then shares the persistent watch instead: `read.rs`).
//!
//! and when a one-shot watch set *before* the persistent one goes away unfired, it asks every
//! persistent watch of that path to be added again (each yields a resync).
//!
//! The table is the one door: the only code that adds persistent watches on the client
//! (`watch/session.rs`) enters it first, so its refusals cover every watcher of the session.

use std::sync::Arc;

use tokio::sync::Notify;
use zookeeper_client::{AddWatchMode, EventType, WatchedEvent};

use super::Framework;
use crate::error::{Error, Result};
use crate::sync::Mutex;

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

/// The framework's table (see the module docs).
#[derive(Debug, Default)]
pub(crate) struct WatchTable {
    next_id: u64,
    persistent: Vec<Persistent>,
    oneshots: Vec<Oneshot>,
}

#[derive(Debug)]
struct Persistent {
    id: u64,
    full_path: String,
    mode: WatchMode,
    /// Told when the watch must be added again.
    rearm: Arc<Rearm>,
}

#[derive(Debug)]
struct Oneshot {
    id: u64,
    full_path: String,
    /// A persistent watch was added on the path while this one lived: its end (unfired) may
    /// have removed part of it.
    shadowed: bool,
}

/// A persistent entry's requests to add its watch again: kept for its owner's next wait (an
/// async owner), and waking the task of an owner that polls.
#[derive(Debug, Default)]
struct Rearm {
    wanted: Notify,
    poller: futures::task::AtomicWaker,
}

impl Rearm {
    fn request(&self) {
        self.wanted.notify_one();
        self.poller.wake();
    }
}

/// An entry in the framework's table, removed when this drops.
pub(crate) struct Registered {
    table: Arc<Mutex<WatchTable>>,
    id: u64,
    /// Told when the watch must be added again (persistent entries).
    rearm: Arc<Rearm>,
    oneshot: bool,
}

impl std::fmt::Debug for Registered {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registered").field("id", &self.id).field("oneshot", &self.oneshot).finish()
    }
}

impl Registered {
    /// Completes when the watch must be added again. Cancel-safe (a notification that came
    /// while nobody waited is kept for the next wait).
    pub(crate) async fn rearm_wanted(&self) {
        self.rearm.wanted.notified().await;
    }

    /// Whether the watch must be added again, without waiting (for owners that poll): true
    /// once per request. When false, `cx` is woken by the next request.
    pub(crate) fn take_rearm(&self, cx: Option<&mut std::task::Context<'_>>) -> bool {
        if let Some(cx) = cx {
            self.rearm.poller.register(cx.waker());
        }
        futures::FutureExt::now_or_never(self.rearm.wanted.notified()).is_some()
    }

    /// A one-shot entry whose watch fired: its end removes nothing from the server. When a
    /// persistent watch of the path was added while it lived, that one is added again: the
    /// one-shot watch's request may have reached the server after the persistent one's (a
    /// read sent again after a connection loss), and ZooKeeper 3.6-3.8 then keep the
    /// one-shot mode for both, so the event that fired it took the persistent watch too.
    pub(crate) fn fired(&mut self) {
        if self.oneshot {
            let mut table = self.table.lock();
            if let Some(entry) = table.oneshots.iter_mut().find(|e| e.id == self.id) {
                if std::mem::take(&mut entry.shadowed) {
                    let path = entry.full_path.clone();
                    for watch in table.persistent.iter().filter(|w| w.full_path == path) {
                        watch.rearm.request();
                    }
                }
            }
        }
    }
}

impl Drop for Registered {
    fn drop(&mut self) {
        let mut table = self.table.lock();
        if !self.oneshot {
            table.persistent.retain(|e| e.id != self.id);
            return;
        }
        let Some(index) = table.oneshots.iter().position(|e| e.id == self.id) else { return };
        let entry = table.oneshots.swap_remove(index);
        if entry.shadowed {
            // The client sends `RemoveWatches` for an unfired one-shot watch: on ZooKeeper
            // 3.6-3.8 that takes the persistent watches of the path with it.
            for watch in table.persistent.iter().filter(|w| w.full_path == entry.full_path) {
                watch.rearm.request();
            }
        }
    }
}

impl Framework {
    /// Enters a persistent watch on `full_path` in the framework's table. Only the session
    /// watch (`watch/session.rs`) calls this, before it adds the watch on the client.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when the framework already watches `full_path` in the other
    /// mode (the server keeps one mode per session and path).
    pub(crate) fn enter_persistent_watch(&self, full_path: &str, mode: WatchMode) -> Result<Registered> {
        let table_arc = self.registry().watches.clone();
        let mut table = table_arc.lock();
        if let Some(other) = table.persistent.iter().find(|e| e.full_path == full_path && e.mode != mode) {
            return Err(Error::invalid_argument(
                "mode",
                format!(
                    "{} is already watched as {:?} by this framework; a session keeps one watch mode per path",
                    self.unfix_path(full_path),
                    other.mode
                ),
            ));
        }
        for oneshot in table.oneshots.iter_mut().filter(|e| e.full_path == full_path) {
            oneshot.shadowed = true;
        }
        table.next_id += 1;
        let id = table.next_id;
        let rearm = Arc::new(Rearm::default());
        table.persistent.push(Persistent { id, full_path: full_path.to_owned(), mode, rearm: rearm.clone() });
        drop(table);
        Ok(Registered { table: table_arc, id, rearm, oneshot: false })
    }

    /// Enters a one-shot watch on `full_path` (a watched read of this framework's), to be kept
    /// while the watch is armed.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when this framework watches the path persistently: on
    /// ZooKeeper 3.6 to 3.8 the one-shot watch would silence the persistent watch's creations
    /// below it, and removing it before it fired would remove half of the persistent one.
    pub(crate) fn enter_oneshot_watch(&self, full_path: &str) -> Result<Registered> {
        // Without persistent watches on the server, the table's persistent rows are one-shot
        // stand-ins: nothing there for a one-shot watch to silence.
        let stand_ins = self.server_refuses_persistent_watches();
        let table_arc = self.registry().watches.clone();
        let mut table = table_arc.lock();
        if let Some(watch) = table.persistent.iter().find(|e| e.full_path == full_path && !stand_ins) {
            return Err(Error::InvalidArgument {
                name: "path",
                reason: format!(
                    "{} is watched persistently ({:?}) by this framework (a watch, a cache or a lock's mirror); a \
                     one-shot watch there would silence it on ZooKeeper 3.6-3.8: read it without .watch(), or from \
                     another framework",
                    self.unfix_path(full_path),
                    watch.mode
                ),
            });
        }
        table.next_id += 1;
        let id = table.next_id;
        table.oneshots.push(Oneshot { id, full_path: full_path.to_owned(), shadowed: false });
        drop(table);
        Ok(Registered { table: table_arc, id, rearm: Arc::default(), oneshot: true })
    }

    /// The mode of this framework's persistent watches on `full_path`, if it has one there: a
    /// recipe whose one-shot watch the table refuses can share a persistent watch in that mode.
    /// `None` on a server without persistent watches, where the table refuses no one-shot
    /// watch.
    pub(crate) fn persistent_watch_mode(&self, full_path: &str) -> Option<WatchMode> {
        if self.server_refuses_persistent_watches() {
            return None;
        }
        self.registry().watches.lock().persistent.iter().find(|e| e.full_path == full_path).map(|e| e.mode)
    }

    /// Whether this framework may set a one-shot watch on `full_path` with the raw client (for
    /// recipe code that does, such as the lock fast path's watch on its directory): false when
    /// a persistent watch of this framework holds the path.
    pub(crate) fn may_watch_once(&self, full_path: &str) -> bool {
        !self.registry().watches.lock().persistent.iter().any(|e| e.full_path == full_path)
    }
}
