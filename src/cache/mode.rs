//! Which nodes a cache holds.

/// Which nodes a cache holds (Curator's `CuratorCache.Options` and the old cache classes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum CacheMode {
    /// The node and all its descendants (Curator's default; the old `TreeCache`).
    #[default]
    Tree,
    /// The node alone (Curator's `SINGLE_NODE_CACHE`; the old `NodeCache`). One persistent,
    /// non-recursive watch: no event for anything below the node reaches the client.
    SingleNode,
    /// The node's direct children, not the node itself (the old `PathChildrenCache`). Events
    /// below the children still reach the client (the watch is recursive, so that a child's
    /// data change is seen) and are ignored there.
    Children,
}
