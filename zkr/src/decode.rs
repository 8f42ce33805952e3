//! Which recipe a lock directory belongs to, and who holds it, by Curator's rules: pure
//! functions over child names.
//!
//! Every recipe names its nodes `<marker><10-digit sequence>`, usually after Curator's
//! protected prefix `_c_<uuid>-`. Children are ordered by the text after the **last**
//! occurrence of the marker (the whole name when it does not occur), compared as plain
//! strings with a stable sort, exactly as Curator's `standardFixForSorting`; children that are
//! no recipe's nodes ("foreign" ones) are ordered and counted too, because Curator counts them.

use serde::Serialize;
use zk_recipes::path;

/// Mutex nodes (`InterProcessMutex`, `LeaderSelector`, a semaphore's internal `locks/` mutex).
pub const LOCK: &str = "lock-";
/// Semaphore lease nodes, under `<semaphore>/leases`.
pub const LEASE: &str = "lease-";
/// Leader latch nodes (`LeaderLatch`).
pub const LATCH: &str = "latch-";
/// Read-write lock: readers.
pub const READ: &str = "__READ__";
/// Read-write lock: writers.
pub const WRITE: &str = "__WRIT__";
/// A semaphore's (V2 layout) two children.
pub const LEASES_DIR: &str = "leases";
pub const LOCKS_DIR: &str = "locks";

/// What kind of lock directory a path is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Recipe {
    /// `lock-` nodes: one holder, the rest wait in order.
    Mutex,
    /// `leases/` and `locks/` children: Curator's InterProcessSemaphoreV2 layout.
    Semaphore,
    /// `__READ__` and `__WRIT__` nodes in one queue.
    ReadWrite,
    /// `latch-` nodes: the first is the leader.
    LeaderLatch,
    /// `lease-` nodes: a semaphore's `leases/` directory itself.
    Leases,
    /// No children at all: nobody holds or waits (a lock directory between uses, or any
    /// other childless node).
    Empty,
}

impl Recipe {
    /// The recipe and the Curator classes that make this layout.
    pub fn describe(self) -> &'static str {
        match self {
            Recipe::Mutex => "mutex (InterProcessMutex, or a LeaderSelector's)",
            Recipe::Semaphore => "semaphore (InterProcessSemaphoreV2 or InterProcessSemaphoreMutex)",
            Recipe::ReadWrite => "read-write lock (InterProcessReadWriteLock)",
            Recipe::LeaderLatch => "leader latch (LeaderLatch)",
            Recipe::Leases => "a semaphore's leases",
            Recipe::Empty => "no children: nobody holds or waits",
        }
    }

    /// The queue rule of the directory itself (`None` for a semaphore, whose two child
    /// directories have their own, and for an empty directory).
    pub fn queue(self) -> Option<Queue> {
        match self {
            Recipe::Mutex => Some(Queue::Mutex),
            Recipe::ReadWrite => Some(Queue::ReadWrite),
            Recipe::LeaderLatch => Some(Queue::LeaderLatch),
            Recipe::Leases => Some(Queue::Leases),
            Recipe::Semaphore | Recipe::Empty => None,
        }
    }
}

/// Which recipe's nodes `children` are: the one most of them belong to (a stray child does not
/// change the verdict); on a tie, in the order semaphore, read-write, latch, leases, mutex.
/// `None` when there are children and none is a recipe's.
pub fn classify(children: &[String]) -> Option<Recipe> {
    if children.is_empty() {
        return Some(Recipe::Empty);
    }
    let count = |f: &dyn Fn(&str) -> bool| children.iter().filter(|c| f(c)).count();
    let candidates = [
        (Recipe::Semaphore, count(&|c| c == LEASES_DIR || c == LOCKS_DIR)),
        (Recipe::ReadWrite, count(&|c| c.contains(READ) || c.contains(WRITE))),
        (Recipe::LeaderLatch, count(&|c| c.contains(LATCH))),
        (Recipe::Leases, count(&|c| c.contains(LEASE))),
        (Recipe::Mutex, count(&|c| c.contains(LOCK))),
    ];
    let best = candidates.iter().map(|(_, n)| *n).max().unwrap_or(0);
    if best == 0 {
        return None;
    }
    candidates.iter().find(|(_, n)| *n == best).map(|(recipe, _)| *recipe)
}

/// The ordering and admission rule of one directory of nodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Queue {
    /// The first holds, the others wait (Curator's `StandardLockInternalsDriver`, one lease).
    Mutex,
    /// The first is the leader, the others wait.
    LeaderLatch,
    /// Every node is a lease (the semaphore admits by count, not by position).
    Leases,
    /// A writer holds at index 0; a reader holds when no writer sorts before it.
    ReadWrite,
}

/// A node's part in its queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Holds the lock (or leads, for a latch).
    Holder,
    /// Queued behind a holder.
    Waiter,
    /// A semaphore lease: it takes one of the semaphore's permits.
    Lease,
}

/// What a node is, by its name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Lock,
    Lease,
    Latch,
    Read,
    Write,
    /// Not a recipe's node: contenders still count it (Curator does), so a foreign child that
    /// sorts first blocks every contender.
    Foreign,
}

/// One child with its role.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decoded {
    pub name: String,
    pub role: Role,
    pub kind: Kind,
}

impl Queue {
    fn marker(self) -> &'static str {
        match self {
            Queue::Mutex => LOCK,
            Queue::LeaderLatch => LATCH,
            Queue::Leases => LEASE,
            Queue::ReadWrite => WRITE,
        }
    }

    /// Curator's sort key: after the last marker; for read-write locks, after the last
    /// `__READ__` and then after the last `__WRIT__`, so both kinds share one queue.
    pub fn sort_key(self, name: &str) -> &str {
        match self {
            Queue::ReadWrite => path::sort_key(path::sort_key(name, READ), WRITE),
            _ => path::sort_key(name, self.marker()),
        }
    }

    /// What a child is in this queue.
    pub fn kind(self, name: &str) -> Kind {
        match self {
            // Curator's reader recognises writers by `contains("__WRIT__")`; check that first.
            Queue::ReadWrite if name.contains(WRITE) => Kind::Write,
            Queue::ReadWrite if name.contains(READ) => Kind::Read,
            Queue::Mutex if name.contains(LOCK) => Kind::Lock,
            Queue::LeaderLatch if name.contains(LATCH) => Kind::Latch,
            Queue::Leases if name.contains(LEASE) => Kind::Lease,
            _ => Kind::Foreign,
        }
    }

    /// Sorts `names` into queue order and gives each its role.
    pub fn decode(self, mut names: Vec<String>) -> Vec<Decoded> {
        names.sort_by(|a, b| self.sort_key(a).cmp(self.sort_key(b)));
        if self == Queue::ReadWrite {
            put_writers_before_their_downgrade_readers(&mut names);
        }
        let mut first_writer: Option<usize> = None;
        let mut decoded = Vec::with_capacity(names.len());
        for (index, name) in names.into_iter().enumerate() {
            let kind = self.kind(&name);
            let role = match (self, kind) {
                (Queue::Leases, _) => Role::Lease,
                (Queue::ReadWrite, Kind::Read) => {
                    // A writer with the reader's own sequence is the writer it downgraded from
                    // (Curator 5.5+ names that read node after the write node's sequence).
                    let blocked = first_writer.is_some_and(|w: usize| {
                        let writer: &Decoded = &decoded[w];
                        self.sort_key(&writer.name) != self.sort_key(&name) || writer.role != Role::Holder
                    });
                    if blocked {
                        Role::Waiter
                    } else {
                        Role::Holder
                    }
                }
                _ if index == 0 => Role::Holder,
                _ => Role::Waiter,
            };
            if kind == Kind::Write && first_writer.is_none() {
                first_writer = Some(index);
            }
            decoded.push(Decoded { name, role, kind });
        }
        decoded
    }
}

/// Curator 5.5+ downgrades a write lock by creating a read node that carries the write node's
/// sequence, so the two tie; the stable sort leaves them in listing order. The writer is the
/// one that holds (the read was granted because its thread holds the write lock), so it is put
/// first within each tie.
fn put_writers_before_their_downgrade_readers(names: &mut [String]) {
    let queue = Queue::ReadWrite;
    let mut start = 0;
    while start < names.len() {
        let key = queue.sort_key(&names[start]).to_owned();
        let end = start + names[start..].iter().take_while(|n| queue.sort_key(n) == key).count();
        names[start..end].sort_by_key(|n| queue.kind(n) != Kind::Write);
        start = end;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    fn roles(decoded: &[Decoded]) -> Vec<(&str, Role)> {
        decoded.iter().map(|d| (d.name.as_str(), d.role)).collect()
    }

    const U1: &str = "_c_3f1c2b9e-8d6a-4e1f-9b0a-1c2d3e4f5a6b-";
    const U2: &str = "_c_9b0a1c2d-3e4f-4a6b-8d6a-3f1c2b9e4e1f-";

    #[test]
    fn classifies_each_layout() {
        assert_eq!(classify(&[]), Some(Recipe::Empty));
        assert_eq!(classify(&names(&["_c_a-lock-0000000001"])), Some(Recipe::Mutex));
        assert_eq!(classify(&names(&["leases", "locks"])), Some(Recipe::Semaphore));
        assert_eq!(classify(&names(&["leases"])), Some(Recipe::Semaphore));
        assert_eq!(classify(&names(&["_c_a-__READ__0000000001", "_c_b-__WRIT__0000000002"])), Some(Recipe::ReadWrite));
        assert_eq!(classify(&names(&["_c_a-latch-0000000001"])), Some(Recipe::LeaderLatch));
        assert_eq!(classify(&names(&["_c_a-lease-0000000001"])), Some(Recipe::Leases));
        assert_eq!(classify(&names(&["config", "users"])), None);
    }

    #[test]
    fn a_stray_child_does_not_change_the_verdict() {
        let children = names(&["_c_a-lock-0000000001", "_c_b-lock-0000000002", "latch-notes"]);
        assert_eq!(classify(&children), Some(Recipe::Mutex));
        // a semaphore directory with someone's extra child
        assert_eq!(classify(&names(&["leases", "locks", "junk"])), Some(Recipe::Semaphore));
    }

    #[test]
    fn mutex_orders_by_the_text_after_the_last_marker() {
        let decoded = Queue::Mutex.decode(names(&[
            &format!("{U2}lock-0000000003"),
            "lock-0000000002", // unprotected: sorts by its sequence like the others
            &format!("{U1}lock-0000000001"),
        ]));
        assert_eq!(
            roles(&decoded),
            [
                (format!("{U1}lock-0000000001").as_str(), Role::Holder),
                ("lock-0000000002", Role::Waiter),
                (format!("{U2}lock-0000000003").as_str(), Role::Waiter),
            ]
        );
        // only the last `lock-` counts
        assert_eq!(Queue::Mutex.sort_key("lock-lock-0000000007"), "0000000007");
    }

    #[test]
    fn foreign_children_count_and_may_hold_the_queue() {
        let decoded = Queue::Mutex.decode(names(&["_c_a-lock-0000000001", "0"]));
        assert_eq!(decoded[0].name, "0");
        assert_eq!((decoded[0].role, decoded[0].kind), (Role::Holder, Kind::Foreign));
        assert_eq!((decoded[1].role, decoded[1].kind), (Role::Waiter, Kind::Lock));
    }

    #[test]
    fn keys_compare_as_strings_not_numbers() {
        // an overflowed sequence sorts before the positive ones, as in Curator
        let decoded = Queue::Mutex.decode(names(&["_c_a-lock-0000000001", "_c_b-lock--2147483648"]));
        assert_eq!(decoded[0].name, "_c_b-lock--2147483648");
    }

    #[test]
    fn latch_leader_is_first() {
        let decoded = Queue::LeaderLatch.decode(names(&["_c_b-latch-0000000002", "_c_a-latch-0000000001"]));
        assert_eq!(roles(&decoded), [("_c_a-latch-0000000001", Role::Holder), ("_c_b-latch-0000000002", Role::Waiter)]);
    }

    #[test]
    fn every_lease_node_is_a_lease() {
        let decoded = Queue::Leases.decode(names(&["_c_b-lease-0000000002", "_c_a-lease-0000000001", "x"]));
        assert!(decoded.iter().all(|d| d.role == Role::Lease));
        assert_eq!(decoded[2].kind, Kind::Foreign);
    }

    #[test]
    fn readers_share_until_a_writer_queues() {
        let decoded = Queue::ReadWrite.decode(names(&[
            "_c_r3-__READ__0000000004",
            "_c_w1-__WRIT__0000000003",
            "_c_r2-__READ__0000000002",
            "_c_r1-__READ__0000000001",
            "_c_w2-__WRIT__0000000005",
        ]));
        assert_eq!(
            roles(&decoded),
            [
                ("_c_r1-__READ__0000000001", Role::Holder),
                ("_c_r2-__READ__0000000002", Role::Holder),
                ("_c_w1-__WRIT__0000000003", Role::Waiter),
                ("_c_r3-__READ__0000000004", Role::Waiter),
                ("_c_w2-__WRIT__0000000005", Role::Waiter),
            ]
        );
    }

    #[test]
    fn a_writer_holds_at_the_front() {
        let decoded = Queue::ReadWrite.decode(names(&["_c_r-__READ__0000000002", "_c_w-__WRIT__0000000001"]));
        assert_eq!(
            roles(&decoded),
            [("_c_w-__WRIT__0000000001", Role::Holder), ("_c_r-__READ__0000000002", Role::Waiter)]
        );
    }

    #[test]
    fn a_downgrade_reader_holds_with_its_writer() {
        // Curator 5.5+: the write holder's read node carries the write node's sequence.
        for listing in [
            ["_c_d-__READ__0000000001", "_c_w-__WRIT__0000000001", "_c_q-__WRIT__0000000002"],
            ["_c_w-__WRIT__0000000001", "_c_d-__READ__0000000001", "_c_q-__WRIT__0000000002"],
        ] {
            let decoded = Queue::ReadWrite.decode(names(&listing));
            assert_eq!(
                roles(&decoded),
                [
                    ("_c_w-__WRIT__0000000001", Role::Holder),
                    ("_c_d-__READ__0000000001", Role::Holder),
                    ("_c_q-__WRIT__0000000002", Role::Waiter),
                ],
                "{listing:?}"
            );
        }
        // once the writer released, the downgraded reader still holds and the queued writer waits
        let decoded = Queue::ReadWrite.decode(names(&["_c_q-__WRIT__0000000002", "_c_d-__READ__0000000001"]));
        assert_eq!(
            roles(&decoded),
            [("_c_d-__READ__0000000001", Role::Holder), ("_c_q-__WRIT__0000000002", Role::Waiter)]
        );
    }
}
