//! The mirror's storage: a prefix tree of path segments, so a node's entry stores its own name
//! once and never its ancestors' (10,000 children of `/config/services/<name>` keep one copy of
//! the prefix, not 10,000).
//!
//! Paths here are relative to the mirror's root: `""` is the root itself, `"a/b"` the
//! grandchild `<root>/a/b`. A tree node without an entry is a placeholder that only holds the
//! way to entries below it; placeholders are pruned as soon as nothing is below them.

use std::collections::BTreeMap;
use std::sync::Arc;

use zookeeper_client::Stat;

/// What the mirror knows of one node: its stat and, when data is kept, its decoded data.
/// Cheap to clone (the data is shared).
#[derive(Debug)]
pub(crate) struct Item<T> {
    pub(crate) stat: Stat,
    pub(crate) data: Option<Arc<T>>,
}

impl<T> Clone for Item<T> {
    fn clone(&self) -> Self {
        Item { stat: self.stat, data: self.data.clone() }
    }
}

/// An item and the resync generation that last confirmed it.
#[derive(Debug)]
pub(crate) struct Entry<T> {
    pub(crate) item: Item<T>,
    pub(crate) mark: u64,
}

#[derive(Debug)]
struct Node<T> {
    entry: Option<Entry<T>>,
    children: BTreeMap<Box<str>, Node<T>>,
}

impl<T> Node<T> {
    fn empty() -> Self {
        Node { entry: None, children: BTreeMap::new() }
    }

    fn is_vacant(&self) -> bool {
        self.entry.is_none() && self.children.is_empty()
    }
}

/// The segments of a relative path (none for the root).
fn segments(rel: &str) -> impl Iterator<Item = &str> {
    rel.split('/').filter(|s| !s.is_empty())
}

/// `parent/name` in relative form.
pub(crate) fn join(parent: &str, name: &str) -> String {
    if parent.is_empty() {
        name.to_owned()
    } else {
        format!("{parent}/{name}")
    }
}

/// The relative parent of a relative path (`None` for the root).
pub(crate) fn parent(rel: &str) -> Option<&str> {
    if rel.is_empty() {
        None
    } else {
        Some(rel.rfind('/').map_or("", |i| &rel[..i]))
    }
}

/// How deep a relative path is (0 for the root).
pub(crate) fn depth(rel: &str) -> usize {
    segments(rel).count()
}

#[derive(Debug)]
pub(crate) struct Tree<T> {
    root: Node<T>,
    len: usize,
}

impl<T> Default for Tree<T> {
    fn default() -> Self {
        Tree { root: Node::empty(), len: 0 }
    }
}

impl<T> Tree<T> {
    /// How many entries the tree holds.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    fn node(&self, rel: &str) -> Option<&Node<T>> {
        let mut node = &self.root;
        for segment in segments(rel) {
            node = node.children.get(segment)?;
        }
        Some(node)
    }

    pub(crate) fn get(&self, rel: &str) -> Option<&Entry<T>> {
        self.node(rel)?.entry.as_ref()
    }

    pub(crate) fn get_mut(&mut self, rel: &str) -> Option<&mut Entry<T>> {
        let mut node = &mut self.root;
        for segment in segments(rel) {
            node = node.children.get_mut(segment)?;
        }
        node.entry.as_mut()
    }

    /// Puts `entry` at `rel` (placeholders on the way as needed); returns the entry it replaced.
    pub(crate) fn insert(&mut self, rel: &str, entry: Entry<T>) -> Option<Entry<T>> {
        let mut node = &mut self.root;
        for segment in segments(rel) {
            node = node.children.entry(segment.into()).or_insert_with(Node::empty);
        }
        let old = node.entry.replace(entry);
        if old.is_none() {
            self.len += 1;
        }
        old
    }

    /// Removes the entry at `rel` and every entry below it; returns them with their relative
    /// paths, deepest first (children before their parent, as the server deletes them).
    pub(crate) fn remove_subtree(&mut self, rel: &str) -> Vec<(String, Entry<T>)> {
        let mut removed = Vec::new();
        let Some(node) = Self::detach(&mut self.root, &segments(rel).collect::<Vec<_>>()) else { return removed };
        collect_post_order(node, rel.to_owned(), &mut removed);
        self.len -= removed.len();
        removed
    }

    /// Detaches the tree node at `path` under `node` (pruning vacant placeholders above it).
    fn detach(node: &mut Node<T>, path: &[&str]) -> Option<Node<T>> {
        let (first, rest) = path.split_first()?;
        if rest.is_empty() {
            return node.children.remove(*first);
        }
        let child = node.children.get_mut(*first)?;
        let detached = Self::detach(child, rest);
        if child.is_vacant() {
            node.children.remove(*first);
        }
        detached
    }

    /// Removes everything (for the root: `remove_subtree("")`).
    fn clear(&mut self) -> Vec<(String, Entry<T>)> {
        let mut removed = Vec::new();
        let root = std::mem::replace(&mut self.root, Node::empty());
        collect_post_order(root, String::new(), &mut removed);
        self.len = 0;
        removed
    }

    /// Removes the whole subtree at `rel`, the root included.
    pub(crate) fn remove_all_at(&mut self, rel: &str) -> Vec<(String, Entry<T>)> {
        if rel.is_empty() {
            self.clear()
        } else {
            self.remove_subtree(rel)
        }
    }

    /// The direct children of `rel` that have entries, in name order.
    pub(crate) fn children(&self, rel: &str) -> Vec<(String, &Entry<T>)> {
        let Some(node) = self.node(rel) else { return Vec::new() };
        node.children.iter().filter_map(|(name, child)| Some((join(rel, name), child.entry.as_ref()?))).collect()
    }

    /// Every entry, parents before children and siblings in name order.
    pub(crate) fn entries(&self) -> Vec<(String, &Entry<T>)> {
        let mut out = Vec::with_capacity(self.len);
        let mut stack: Vec<(String, &Node<T>)> = vec![(String::new(), &self.root)];
        while let Some((rel, node)) = stack.pop() {
            for (name, child) in node.children.iter().rev() {
                stack.push((join(&rel, name), child));
            }
            if let Some(entry) = node.entry.as_ref() {
                out.push((rel, entry));
            }
        }
        out
    }

    /// Removes every entry whose mark is below `mark`; returns them, deepest first.
    pub(crate) fn sweep(&mut self, mark: u64) -> Vec<(String, Entry<T>)> {
        let mut removed = Vec::new();
        sweep_node(&mut self.root, String::new(), mark, &mut removed);
        self.len -= removed.len();
        removed
    }
}

fn collect_post_order<T>(node: Node<T>, rel: String, out: &mut Vec<(String, Entry<T>)>) {
    for (name, child) in node.children {
        let child_rel = join(&rel, &name);
        collect_post_order(child, child_rel, out);
    }
    if let Some(entry) = node.entry {
        out.push((rel, entry));
    }
}

fn sweep_node<T>(node: &mut Node<T>, rel: String, mark: u64, out: &mut Vec<(String, Entry<T>)>) {
    node.children.retain(|name, child| {
        sweep_node(child, join(&rel, name), mark, out);
        !child.is_vacant()
    });
    if node.entry.as_ref().is_some_and(|e| e.mark < mark) {
        if let Some(entry) = node.entry.take() {
            out.push((rel, entry));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stat(czxid: i64) -> Stat {
        Stat {
            czxid,
            mzxid: czxid,
            pzxid: czxid,
            ctime: 0,
            mtime: 0,
            version: 0,
            cversion: 0,
            aversion: 0,
            ephemeral_owner: 0,
            data_length: 0,
            num_children: 0,
        }
    }

    fn entry(czxid: i64, mark: u64) -> Entry<()> {
        Entry { item: Item { stat: stat(czxid), data: None }, mark }
    }

    #[test]
    fn insert_get_remove_and_prune() {
        let mut tree = Tree::default();
        assert!(tree.insert("a/b/c", entry(3, 0)).is_none());
        assert_eq!(tree.len(), 1);
        assert!(tree.get("a/b").is_none(), "placeholders are not entries");
        assert!(tree.insert("a", entry(1, 0)).is_none());
        assert_eq!(tree.get("a/b/c").map(|e| e.item.stat.czxid), Some(3));
        assert_eq!(tree.children("a").len(), 0, "a/b is a placeholder");
        assert_eq!(tree.entries().iter().map(|(p, _)| p.as_str()).collect::<Vec<_>>(), ["a", "a/b/c"]);
        assert_eq!(tree.remove_subtree("a/b/c").len(), 1);
        assert_eq!(tree.len(), 1);
        assert!(tree.node("a/b").is_none(), "the vacant placeholder went with it");
        assert_eq!(tree.remove_all_at("").len(), 1);
        assert_eq!(tree.len(), 0);
    }

    #[test]
    fn subtree_removal_is_deepest_first_and_sweep_keeps_marked() {
        let mut tree = Tree::default();
        for (path, mark) in [("", 1), ("x", 1), ("x/y", 2), ("x/y/z", 1), ("w", 2)] {
            tree.insert(path, entry(1, mark));
        }
        let swept: Vec<String> = tree.sweep(2).into_iter().map(|(p, _)| p).collect();
        assert_eq!(swept, ["x/y/z", "x", ""]);
        assert_eq!(tree.entries().iter().map(|(p, _)| p.as_str()).collect::<Vec<_>>(), ["w", "x/y"]);
        let removed: Vec<String> = tree.remove_subtree("x").into_iter().map(|(p, _)| p).collect();
        assert_eq!(removed, ["x/y"]);
        assert_eq!(tree.len(), 1);
        assert_eq!(parent("x/y"), Some("x"));
        assert_eq!(parent("x"), Some(""));
        assert_eq!(parent(""), None);
        assert_eq!(depth("x/y"), 2);
        assert_eq!(depth(""), 0);
    }
}
