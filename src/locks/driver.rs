//! Who gets the lock: sort keys and predicates over the sorted children of a lock path
//! (Curator's `LockInternalsDriver`s). Pure functions, no I/O.

use crate::path;

/// What a contender should do, given the sorted children.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// It holds the lock.
    Acquired,
    /// It must wait until this child (a name) changes or goes away.
    Watch {
        /// The child to watch.
        node: String,
        /// The child's index in the sorted list.
        index: usize,
    },
    /// Its own node is not among the children: it holds nothing (session lost, or deleted).
    Missing,
}

/// A lock family's ordering and admission rule.
pub(crate) trait Driver: Send + Sync + std::fmt::Debug + 'static {
    /// The marker in node names (`lock-`, `lease-`, `__READ__`, `__WRIT__`).
    fn lock_name(&self) -> &'static str;

    /// The key children are sorted by.
    fn sort_key<'a>(&self, name: &'a str) -> &'a str;

    /// Whether `our` (a child name) holds the lock among `sorted` children.
    fn verdict(&self, sorted: &[String], our: &str) -> Verdict;

    /// Whether a waiter that watched the child at index 0 (the holder) and saw it deleted may
    /// take the lock without listing the children again. True only where every node created
    /// after our listing sorts after us (sequence numbers only grow), and no one else can be
    /// admitted alongside; see `StandardDriver`.
    fn first_after_holder_leaves(&self) -> bool {
        false
    }

    /// Sorts children by [`sort_key`](Self::sort_key), stably (Curator's `getSortedChildren`).
    fn sort(&self, children: &mut [String]) {
        children.sort_by(|a, b| self.sort_key(a).cmp(self.sort_key(b)));
    }
}

/// Curator's `StandardLockInternalsDriver`: the first `max_leases` children hold the lock; a
/// waiter watches the child `max_leases` places ahead of it (its predecessor, for a mutex).
#[derive(Debug, Clone)]
pub(crate) struct StandardDriver {
    pub(crate) lock_name: &'static str,
    pub(crate) max_leases: usize,
}

impl StandardDriver {
    pub(crate) const MUTEX: StandardDriver = StandardDriver { lock_name: "lock-", max_leases: 1 };
}

impl Driver for StandardDriver {
    fn lock_name(&self) -> &'static str {
        self.lock_name
    }

    fn sort_key<'a>(&self, name: &'a str) -> &'a str {
        path::sort_key(name, self.lock_name)
    }

    fn verdict(&self, sorted: &[String], our: &str) -> Verdict {
        match sorted.iter().position(|c| c == our) {
            None => Verdict::Missing,
            Some(i) if i < self.max_leases => Verdict::Acquired,
            Some(i) => Verdict::Watch { node: sorted[i - self.max_leases].clone(), index: i - self.max_leases },
        }
    }

    /// Safe for a mutex: we listed the children and saw only the holder ahead of us. Nodes
    /// created later by any Curator-protocol peer carry a larger sequence and sort after us.
    /// A foreign node without the marker could sort ahead of us later, but it is nobody's
    /// lock: every other contender would then wait on it, so exclusion holds.
    fn first_after_holder_leaves(&self) -> bool {
        self.max_leases == 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn mutex_holds_first_and_watches_predecessor() {
        let d = StandardDriver::MUTEX;
        let mut children = names(&["_c_b-lock-0000000003", "_c_a-lock-0000000001", "_c_c-lock-0000000002"]);
        d.sort(&mut children);
        assert_eq!(d.verdict(&children, "_c_a-lock-0000000001"), Verdict::Acquired);
        assert_eq!(
            d.verdict(&children, "_c_b-lock-0000000003"),
            Verdict::Watch { node: "_c_c-lock-0000000002".into(), index: 1 }
        );
        assert_eq!(d.verdict(&children, "_c_z-lock-0000000009"), Verdict::Missing);
    }

    #[test]
    fn foreign_children_count_as_contenders() {
        let d = StandardDriver::MUTEX;
        let mut children = names(&["_c_a-lock-0000000001", "0", "lock-0000000000"]);
        d.sort(&mut children);
        assert_eq!(children[0], "0");
        assert_eq!(
            d.verdict(&children, "_c_a-lock-0000000001"),
            Verdict::Watch { node: "lock-0000000000".into(), index: 1 }
        );
    }

    #[test]
    fn semaphore_v1_style_max_leases() {
        let d = StandardDriver { lock_name: "lease-", max_leases: 2 };
        let children = names(&["x-lease-0000000001", "x-lease-0000000002", "x-lease-0000000003"]);
        assert_eq!(d.verdict(&children, "x-lease-0000000002"), Verdict::Acquired);
        assert_eq!(
            d.verdict(&children, "x-lease-0000000003"),
            Verdict::Watch { node: "x-lease-0000000001".into(), index: 0 }
        );
        assert!(!d.first_after_holder_leaves());
        assert!(StandardDriver::MUTEX.first_after_holder_leaves());
    }
}
