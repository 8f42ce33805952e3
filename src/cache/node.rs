//! What a cache holds and tells: a node's data ([`ChildData`]) and the events ([`CacheEvent`]).

use std::fmt;
use std::sync::Arc;

use zookeeper_client::Stat;

/// One cached node: its path, its stat and (unless the cache keeps stats only, or the decoder
/// refused the bytes) its data. Cheap to clone: the data is shared, not copied.
pub struct ChildData<T = Vec<u8>> {
    path: Arc<str>,
    stat: Stat,
    data: Option<Arc<T>>,
}

impl<T> ChildData<T> {
    pub(crate) fn new(path: Arc<str>, stat: Stat, data: Option<Arc<T>>) -> Self {
        ChildData { path, stat, data }
    }

    /// The node's full path (as given to the framework: without the namespace).
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The last segment of the path.
    pub fn name(&self) -> &str {
        crate::path::node_name(&self.path)
    }

    /// The node's stat as of the read that brought this value. The child fields (`cversion`,
    /// `num_children`, `pzxid`) are as of that read: a change among the children does not
    /// re-read the parent.
    pub fn stat(&self) -> &Stat {
        &self.stat
    }

    /// The node's data: `None` when the cache keeps stats only or the decoder refused it.
    pub fn data(&self) -> Option<&T> {
        self.data.as_deref()
    }

    /// The node's data as a shared handle.
    pub fn shared_data(&self) -> Option<Arc<T>> {
        self.data.clone()
    }
}

impl<T> Clone for ChildData<T> {
    fn clone(&self) -> Self {
        ChildData { path: Arc::clone(&self.path), stat: self.stat, data: self.data.clone() }
    }
}

impl<T: fmt::Debug> fmt::Debug for ChildData<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ChildData")
            .field("path", &self.path)
            .field("version", &self.stat.version)
            .field("mzxid", &self.stat.mzxid)
            .field("data", &self.data)
            .finish()
    }
}

impl<T: PartialEq> PartialEq for ChildData<T> {
    fn eq(&self, other: &Self) -> bool {
        self.path == other.path && self.stat == other.stat && self.data == other.data
    }
}

/// A change in a cache (Curator's `CuratorCacheListener` event types, plus `Initialized`).
///
/// For one path, events come in the order the server applied the changes. A change made and
/// undone while the client was disconnected may not show (the cache compares what it held
/// with what it reads after the gap), and two quick writes may show as one `Changed`.
#[non_exhaustive]
pub enum CacheEvent<T = Vec<u8>> {
    /// A node entered the cache (created, or found by the initial load or a resync).
    Created(ChildData<T>),
    /// A node's data or stat changed: the old value and the new one. A node deleted and
    /// created again while the client was away shows as a change with a new `czxid`.
    Changed(ChildData<T>, ChildData<T>),
    /// A node left the cache: its last value.
    Deleted(ChildData<T>),
    /// The initial load is complete (once per cache; a listener or stream added later gets
    /// it right after the current nodes).
    Initialized,
    /// This stream (or listener) fell further behind than its capacity
    /// ([`CuratorCacheBuilder::event_capacity`](crate::CuratorCacheBuilder::event_capacity)):
    /// `missed` events were dropped for it. `nodes` is every node the cache holds now, parents
    /// before children: replace what was built from earlier events with it; the events that
    /// follow go on from there. When an `Initialized` was among the events dropped, it comes
    /// right after this one (it is sent once per cache).
    Lagged {
        /// How many events were dropped.
        missed: u64,
        /// The cache's nodes as of this event.
        nodes: Vec<ChildData<T>>,
    },
}

impl<T> CacheEvent<T> {
    /// The path the event is about (`None` for `Initialized`).
    pub fn path(&self) -> Option<&str> {
        match self {
            CacheEvent::Created(node) | CacheEvent::Changed(_, node) | CacheEvent::Deleted(node) => Some(node.path()),
            CacheEvent::Initialized | CacheEvent::Lagged { .. } => None,
        }
    }
}

impl<T> Clone for CacheEvent<T> {
    fn clone(&self) -> Self {
        match self {
            CacheEvent::Created(node) => CacheEvent::Created(node.clone()),
            CacheEvent::Changed(old, new) => CacheEvent::Changed(old.clone(), new.clone()),
            CacheEvent::Deleted(node) => CacheEvent::Deleted(node.clone()),
            CacheEvent::Initialized => CacheEvent::Initialized,
            CacheEvent::Lagged { missed, nodes } => CacheEvent::Lagged { missed: *missed, nodes: nodes.clone() },
        }
    }
}

impl<T: fmt::Debug> fmt::Debug for CacheEvent<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CacheEvent::Created(node) => f.debug_tuple("Created").field(node).finish(),
            CacheEvent::Changed(old, new) => f.debug_tuple("Changed").field(old).field(new).finish(),
            CacheEvent::Deleted(node) => f.debug_tuple("Deleted").field(node).finish(),
            CacheEvent::Initialized => f.write_str("Initialized"),
            CacheEvent::Lagged { missed, nodes } => {
                f.debug_struct("Lagged").field("missed", missed).field("nodes", &nodes.len()).finish()
            }
        }
    }
}
