//! The node and path-children views: filters on a cache's events (Curator 5's
//! `CuratorCacheListener.builder().forNodeCache(..)` and `.forPathChildrenCache(..)`), so the
//! old `NodeCache` and `PathChildrenCache` need no watch code of their own.

use std::pin::Pin;
use std::task::{Context, Poll};

use futures::Stream;

use super::handle::CuratorCache;
use super::listener::CacheEventStream;
use super::node::{CacheEvent, ChildData};
use crate::error::Result;

/// A path-children event (Curator's `PathChildrenCacheEvent` types, without the connection
/// events: watch [`Framework::state_changes`](crate::Framework::state_changes) for those).
#[non_exhaustive]
pub enum PathChildrenEvent<T = Vec<u8>> {
    /// `CHILD_ADDED`: the new child.
    ChildAdded(ChildData<T>),
    /// `CHILD_UPDATED`: the child's new value.
    ChildUpdated(ChildData<T>),
    /// `CHILD_REMOVED`: the child's last value.
    ChildRemoved(ChildData<T>),
    /// `INITIALIZED`: the cache's initial load is done.
    Initialized,
    /// The stream fell further behind than the cache's event capacity: `missed` events were
    /// dropped for it, and `children` are the parent's children now (replace what was built
    /// from earlier events with them).
    Lagged {
        /// How many of the cache's events were dropped.
        missed: u64,
        /// The parent's children as of this event.
        children: Vec<ChildData<T>>,
    },
}

impl<T: std::fmt::Debug> std::fmt::Debug for PathChildrenEvent<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PathChildrenEvent::ChildAdded(node) => f.debug_tuple("ChildAdded").field(node).finish(),
            PathChildrenEvent::ChildUpdated(node) => f.debug_tuple("ChildUpdated").field(node).finish(),
            PathChildrenEvent::ChildRemoved(node) => f.debug_tuple("ChildRemoved").field(node).finish(),
            PathChildrenEvent::Initialized => f.write_str("Initialized"),
            PathChildrenEvent::Lagged { missed, children } => {
                f.debug_struct("Lagged").field("missed", missed).field("children", &children.len()).finish()
            }
        }
    }
}

/// The events of one parent's direct children; see [`CuratorCache::path_children_events`].
pub struct PathChildrenStream<T = Vec<u8>> {
    events: CacheEventStream<T>,
    parent: String,
}

/// The value of one node after each of its changes; see [`CuratorCache::node_events`].
pub struct NodeStream<T = Vec<u8>> {
    events: CacheEventStream<T>,
    path: String,
    /// Whether anything was yielded before `Initialized`.
    yielded: bool,
}

impl<T> std::fmt::Debug for PathChildrenStream<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PathChildrenStream").field("parent", &self.parent).finish_non_exhaustive()
    }
}

impl<T> std::fmt::Debug for NodeStream<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeStream").field("path", &self.path).finish_non_exhaustive()
    }
}

impl<T: Send + Sync + 'static> CuratorCache<T> {
    /// The events of `parent`'s direct children, with Curator's `PathChildrenCache` meaning:
    /// a child created is `ChildAdded`, changed `ChildUpdated`, deleted `ChildRemoved`.
    /// Unlike Curator's `forPathChildrenCache` adapter, grandchildren are filtered out.
    /// Like [`events`](Self::events), it starts with the children held now.
    ///
    /// The crate's one rule for event streams: a stream of one path returns `Result`, its path
    /// checked when the stream is made (no I/O), so a bad path is a typed error rather than a
    /// stream that never yields; a stream of a whole recipe (`events()`, `leadership_events()`,
    /// `changes()`, `state_changes()`) has nothing to check and cannot fail.
    ///
    /// # Errors
    /// [`Error::InvalidPath`](crate::Error::InvalidPath) for an invalid path.
    pub fn path_children_events(&self, parent: &str) -> Result<PathChildrenStream<T>> {
        crate::path::validate(parent)?;
        Ok(PathChildrenStream { events: self.events(), parent: parent.to_owned() })
    }

    /// The value of the node at `path` after each change: `Some` after it is created or
    /// changed, `None` after it is deleted (Curator's `NodeCacheListener.nodeChanged()`
    /// followed by `getCurrentData()`). It starts with the current value (`None`, at the
    /// initial load, for a node that does not exist). It returns `Result` where
    /// [`events`](Self::events) does not for the reason given on
    /// [`path_children_events`](Self::path_children_events).
    ///
    /// # Errors
    /// [`Error::InvalidPath`](crate::Error::InvalidPath) for an invalid path.
    pub fn node_events(&self, path: &str) -> Result<NodeStream<T>> {
        crate::path::validate(path)?;
        Ok(NodeStream { events: self.events(), path: path.to_owned(), yielded: false })
    }
}

fn is_child_of(path: &str, parent: &str) -> bool {
    crate::path::parent(path) == Some(parent) && path != parent
}

impl<T> Stream for PathChildrenStream<T> {
    type Item = PathChildrenEvent<T>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<PathChildrenEvent<T>>> {
        loop {
            let Some(event) = futures::ready!(Pin::new(&mut self.events).poll_next(cx)) else {
                return Poll::Ready(None);
            };
            let event = match event {
                CacheEvent::Initialized => PathChildrenEvent::Initialized,
                CacheEvent::Lagged { missed, nodes } => {
                    let children = nodes.into_iter().filter(|node| is_child_of(node.path(), &self.parent)).collect();
                    PathChildrenEvent::Lagged { missed, children }
                }
                CacheEvent::Created(node) if is_child_of(node.path(), &self.parent) => {
                    PathChildrenEvent::ChildAdded(node)
                }
                CacheEvent::Changed(_, node) if is_child_of(node.path(), &self.parent) => {
                    PathChildrenEvent::ChildUpdated(node)
                }
                CacheEvent::Deleted(node) if is_child_of(node.path(), &self.parent) => {
                    PathChildrenEvent::ChildRemoved(node)
                }
                _ => continue,
            };
            return Poll::Ready(Some(event));
        }
    }
}

impl<T> Stream for NodeStream<T> {
    type Item = Option<ChildData<T>>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Option<ChildData<T>>>> {
        loop {
            let Some(event) = futures::ready!(Pin::new(&mut self.events).poll_next(cx)) else {
                return Poll::Ready(None);
            };
            let value = match event {
                CacheEvent::Initialized if !self.yielded => None,
                // Whatever was missed, this is the node's value now.
                CacheEvent::Lagged { nodes, .. } => nodes.into_iter().find(|node| node.path() == self.path),
                CacheEvent::Created(node) | CacheEvent::Changed(_, node) if node.path() == self.path => Some(node),
                CacheEvent::Deleted(node) if node.path() == self.path => None,
                _ => continue,
            };
            self.yielded = true;
            return Poll::Ready(Some(value));
        }
    }
}
