//! The pure decoder: a directory's children in, the recipe and each node's part out, by the
//! recipes' own drivers (the sort keys and predicates the lock engine acquires with).

use zookeeper_client::Stat;

use super::driver::{parse_sequence, Driver, ReadDriver, Verdict, WriteDriver};
use super::kazoo::{lock_predecessor, lock_sequence};
use super::layout::{Queue, Recipe, Signature};
use super::names::{
    LATCH_NAME, LEASE_BASE_NAME, LOCK_NAME, QUEUE_ITEM_NAME, READY_NODE, READ_LOCK_NAME, REVOKE_MESSAGE,
    WRITE_LOCK_NAME,
};
use super::queue_names::QueueOrder;
use crate::path;

/// Which recipe's nodes `children` (names) are: the one most of them carry the
/// [`Signature`](super::Signature) of, so a stray child does not change the answer; ties go
/// to the first in [`Recipe::ALL`]. [`Recipe::Empty`] for no children; `None` when there are
/// children and none is a recipe's.
pub fn classify<S: AsRef<str>>(children: &[S]) -> Option<Recipe> {
    if children.is_empty() {
        return Some(Recipe::Empty);
    }
    let count = |recipe: &Recipe| {
        let signature = recipe.layout().signature;
        children.iter().filter(|c| signature.matches(c.as_ref())).count()
    };
    let best = Recipe::ALL.iter().map(count).max().unwrap_or(0);
    if best == 0 {
        return None;
    }
    Recipe::ALL.iter().copied().find(|r| count(r) == best)
}

/// One child of a directory, as read from ZooKeeper: its name and, when they were read, its
/// stat and data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Child {
    /// The child's name (the last path segment).
    pub name: String,
    /// Its stat; `None` when only the name is known.
    pub stat: Option<Stat>,
    /// Its data; `None` when it was not read (or the node's ACL forbids reading it).
    pub data: Option<Vec<u8>>,
}

impl Child {
    /// A child with its stat and data.
    pub fn new(name: impl Into<String>, stat: Option<Stat>, data: Option<Vec<u8>>) -> Child {
        Child { name: name.into(), stat, data }
    }
}

impl From<String> for Child {
    fn from(name: String) -> Child {
        Child::new(name, None, None)
    }
}

impl From<&str> for Child {
    fn from(name: &str) -> Child {
        Child::new(name, None, None)
    }
}

/// What a node is, by its name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Kind {
    /// A mutex node (`lock-`).
    Lock,
    /// A semaphore lease (`lease-`).
    Lease,
    /// A leader latch node (`latch-`).
    Latch,
    /// A read-write lock's reader (`__READ__`).
    Read,
    /// A read-write lock's writer (`__WRIT__`).
    Write,
    /// A queue item (`qn-` or `queue-`).
    Item,
    /// A double barrier's member (named by a UUID).
    Member,
    /// A double barrier's `ready` node.
    Ready,
    /// No recipe's node. Contenders still count it, as Curator's do: a foreign child that
    /// sorts first blocks every contender.
    Foreign,
}

impl Kind {
    /// A stable lowercase identifier (`lock`, `lease`, `latch`, `read`, `write`, `foreign`).
    pub fn id(self) -> &'static str {
        match self {
            Kind::Lock => "lock",
            Kind::Lease => "lease",
            Kind::Latch => "latch",
            Kind::Read => "read",
            Kind::Write => "write",
            Kind::Item => "item",
            Kind::Member => "member",
            Kind::Ready => "ready",
            Kind::Foreign => "foreign",
        }
    }
}

/// A node's part in its queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Role {
    /// Holds the lock (or leads, for a latch).
    Holder,
    /// Queued behind a holder.
    Waiter,
    /// A semaphore lease: it takes one of the semaphore's permits.
    Lease,
    /// A queue item: the first in order is taken next.
    Queued,
    /// A double barrier's member or its `ready` node: members wait for `ready` while they
    /// enter, and for each other while they leave.
    Member,
    /// A child the recipe does not count at all (in a kazoo lock, a child that is no
    /// contender: kazoo's lock ignores it, where Curator's queue places it).
    Ignored,
}

impl Role {
    /// A stable lowercase identifier (`holder`, `waiter`, `lease`).
    pub fn id(self) -> &'static str {
        match self {
            Role::Holder => "holder",
            Role::Waiter => "waiter",
            Role::Lease => "lease",
            Role::Queued => "queued",
            Role::Member => "member",
            Role::Ignored => "ignored",
        }
    }
}

/// One node, decoded: what it is, its part, and what it was read with.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Decoded {
    /// The child's name.
    pub name: String,
    /// What the node is, by its name.
    pub kind: Kind,
    /// Its part in the queue.
    pub role: Role,
    /// For a waiting recipe node: the child it waits on (the node Curator's contender
    /// watches). `None` for a holder, a lease, and a foreign child (it waits on nothing, though
    /// it holds its place in the queue).
    pub waits_on: Option<String>,
    /// The sequence number ZooKeeper appended (its last ten digits), if any.
    pub sequence: Option<i64>,
    /// Whether its data is the revocation request ([`REVOKE_MESSAGE`]); false when the data
    /// was not read.
    pub revocation_requested: bool,
    /// Its stat, as given.
    pub stat: Option<Stat>,
    /// Its data, as given.
    pub data: Option<Vec<u8>>,
}

impl Queue {
    /// What a child is in this queue.
    pub fn kind(self, name: &str) -> Kind {
        match self {
            // Curator's reader recognises writers by `contains("__WRIT__")`; check that first.
            Queue::ReadWrite if name.contains(WRITE_LOCK_NAME) => Kind::Write,
            Queue::ReadWrite if name.contains(READ_LOCK_NAME) => Kind::Read,
            Queue::Mutex if name.contains(LOCK_NAME) => Kind::Lock,
            // kazoo counts a child only by the whole of its rule (`__lock__` and ten digits).
            Queue::KazooLock if lock_sequence(name).is_some() => Kind::Lock,
            Queue::LeaderLatch if name.contains(LATCH_NAME) => Kind::Latch,
            Queue::Leases if name.contains(LEASE_BASE_NAME) => Kind::Lease,
            Queue::Items(prefix) if name.starts_with(prefix) => Kind::Item,
            Queue::Members if name == READY_NODE => Kind::Ready,
            Queue::Members if Signature::UuidOr(&[]).matches(name) => Kind::Member,
            _ => Kind::Foreign,
        }
    }

    /// Sorts `children` into queue order (the recipe's sort key, a stable sort, as Curator's
    /// `getSortedChildren`) and gives each its part by the recipe's own predicate: a mutex or
    /// latch node holds at the front and otherwise waits on the one ahead of it; a writer
    /// likewise over all children; a reader holds when no writer sorts ahead of it and
    /// otherwise waits on the first writer; every node of a semaphore's leases is a lease.
    ///
    /// A Curator 5.5+ downgrade (the write holder taking the read lock) makes a read node
    /// carrying its write node's sequence; the two tie. The listing order of a tie is the
    /// server's, so the writer is put first, and the read node holds beside it, as its owner
    /// was granted it. When both stats are given they must also name the same session.
    pub fn decode<C: Into<Child>>(self, children: impl IntoIterator<Item = C>) -> Vec<Decoded> {
        let mut children: Vec<Child> = children.into_iter().map(Into::into).collect();
        match self {
            Queue::Items(_) | Queue::Members => return self.decode_without_holder(children),
            Queue::KazooLock => return decode_kazoo_lock(children),
            _ => {}
        }
        let driver = self.driver();
        children.sort_by(|a, b| driver.sort_key(&a.name).cmp(driver.sort_key(&b.name)));
        if self == Queue::ReadWrite {
            self.put_writers_first_in_ties(&mut children);
        }
        let names: Vec<String> = children.iter().map(|c| c.name.clone()).collect();
        let mut decoded: Vec<Decoded> = Vec::with_capacity(children.len());
        for Child { name, stat, data } in children {
            let kind = self.kind(&name);
            let verdict = match (self, kind) {
                (Queue::Leases, _) => None,
                (Queue::ReadWrite, Kind::Read) => Some(ReadDriver.verdict(&names, &name)),
                (Queue::ReadWrite, _) => Some(WriteDriver.verdict(&names, &name)),
                _ => Some(driver.verdict(&names, &name)),
            };
            let (role, waits_on) = match verdict {
                None => (Role::Lease, None),
                Some(Verdict::Acquired) => (Role::Holder, None),
                Some(Verdict::Watch { index, .. }) if self.is_downgrade_of(&decoded[index], &name, stat.as_ref()) => {
                    (Role::Holder, None)
                }
                Some(Verdict::Watch { node, .. }) => (Role::Waiter, (kind != Kind::Foreign).then_some(node)),
                // Not reached: the node is in the listing it is judged against.
                Some(Verdict::Missing) => (Role::Waiter, None),
            };
            let revocation_requested = data.as_deref() == Some(REVOKE_MESSAGE);
            let key = driver.sort_key(&name);
            let sequence = if key.len() < name.len() { parse_sequence(key) } else { path::sequence(&name) };
            decoded.push(Decoded { name, kind, role, waits_on, sequence, revocation_requested, stat, data });
        }
        decoded
    }

    /// Queue items and barrier members, no holder: `queue-` items in the order of the variant
    /// their names tell ([`QueueOrder::detect`]; [`QueueOrder::decode`] when the variant is
    /// known), the others in plain name order; an item's data is its payload (decode a
    /// `queue-` item with [`values::decode_queue_items`](super::values::decode_queue_items)).
    fn decode_without_holder(self, children: Vec<Child>) -> Vec<Decoded> {
        let order = match self {
            Queue::Items(QUEUE_ITEM_NAME) => {
                QueueOrder::detect(&children.iter().map(|c| &c.name[..]).collect::<Vec<_>>())
            }
            _ => QueueOrder::Fifo,
        };
        self.decode_in(order, children)
    }

    fn decode_in(self, order: QueueOrder, mut children: Vec<Child>) -> Vec<Decoded> {
        children.sort_by(|a, b| order.compare(&a.name, &b.name));
        let role = if self == Queue::Members { Role::Member } else { Role::Queued };
        children
            .into_iter()
            .map(|child| {
                let kind = self.kind(&child.name);
                Decoded::waiting_on_nothing(child, kind, role)
            })
            .collect()
    }

    /// Whether the read node `name` is the downgrade of `watched`, the writer it would wait
    /// on: a holding writer with the same sequence (and the same session, when known).
    fn is_downgrade_of(self, watched: &Decoded, name: &str, stat: Option<&Stat>) -> bool {
        let same_session = match (watched.stat.as_ref(), stat) {
            (Some(w), Some(r)) => w.ephemeral_owner == r.ephemeral_owner,
            _ => true,
        };
        self == Queue::ReadWrite
            && self.kind(name) == Kind::Read
            && watched.kind == Kind::Write
            && watched.role == Role::Holder
            && self.sort_key(&watched.name) == self.sort_key(name)
            && same_session
    }

    /// Within each run of equal sort keys, writers before readers (stably).
    fn put_writers_first_in_ties(self, children: &mut [Child]) {
        let mut start = 0;
        while start < children.len() {
            let key = self.sort_key(&children[start].name).to_owned();
            let len = children[start..].iter().take_while(|c| self.sort_key(&c.name) == key).count();
            children[start..start + len].sort_by_key(|c| self.kind(&c.name) != Kind::Write);
            start += len;
        }
    }
}

/// A kazoo lock's children by kazoo's rule (the crate's `NonBlockingLease` and
/// `SetPartitioner` acquire by it): only `...__lock__<ten digits>` children contend, sorted by
/// their sequence text, the first holding and each other waiting on the contender with the
/// greatest sequence below its own; every other child is [`Role::Ignored`], after them.
fn decode_kazoo_lock(children: Vec<Child>) -> Vec<Decoded> {
    let (mut contenders, others): (Vec<Child>, Vec<Child>) =
        children.into_iter().partition(|c| lock_sequence(&c.name).is_some());
    contenders.sort_by(|a, b| lock_sequence(&a.name).cmp(&lock_sequence(&b.name)));
    let names: Vec<String> = contenders.iter().map(|c| c.name.clone()).collect();
    let contender = |Child { name, stat, data }: Child| {
        let waits_on = lock_predecessor(&names, &name).map(str::to_owned);
        Decoded {
            kind: Kind::Lock,
            role: if waits_on.is_none() { Role::Holder } else { Role::Waiter },
            waits_on,
            sequence: lock_sequence(&name).and_then(|s| s.parse().ok()),
            revocation_requested: data.as_deref() == Some(REVOKE_MESSAGE),
            name,
            stat,
            data,
        }
    };
    let other = |child| Decoded::waiting_on_nothing(child, Kind::Foreign, Role::Ignored);
    contenders.into_iter().map(contender).chain(others.into_iter().map(other)).collect()
}

impl Decoded {
    /// A node that waits on no other (a queue item, a barrier member, a child a lock ignores):
    /// its sequence from its name, no revocation read.
    fn waiting_on_nothing(Child { name, stat, data }: Child, kind: Kind, role: Role) -> Decoded {
        Decoded {
            kind,
            role,
            waits_on: None,
            sequence: path::sequence(&name),
            revocation_requested: false,
            name,
            stat,
            data,
        }
    }
}

impl QueueOrder {
    /// A `DistributedQueue` directory's children decoded as this variant's (as
    /// [`Queue::decode`] decodes [`Queue::Items`]`(`[`QUEUE_ITEM_NAME`]`)`, whose variant it
    /// tells from the names): in the order this variant's consumer takes them, each
    /// [`Role::Queued`].
    pub fn decode<C: Into<Child>>(self, children: impl IntoIterator<Item = C>) -> Vec<Decoded> {
        Queue::Items(QUEUE_ITEM_NAME).decode_in(self, children.into_iter().map(Into::into).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn roles(decoded: &[Decoded]) -> Vec<(&str, Role)> {
        decoded.iter().map(|d| (d.name.as_str(), d.role)).collect()
    }

    fn stat(owner: i64) -> Stat {
        Stat {
            czxid: 1,
            mzxid: 1,
            ctime: 0,
            mtime: 0,
            version: 0,
            cversion: 0,
            aversion: 0,
            ephemeral_owner: owner,
            data_length: 0,
            num_children: 0,
            pzxid: 1,
        }
    }

    const U1: &str = "_c_3f1c2b9e-8d6a-4e1f-9b0a-1c2d3e4f5a6b-";
    const U2: &str = "_c_9b0a1c2d-3e4f-4a6b-8d6a-3f1c2b9e4e1f-";

    #[test]
    fn classifies_each_layout() {
        let none: [&str; 0] = [];
        assert_eq!(classify(&none), Some(Recipe::Empty));
        assert_eq!(classify(&["_c_a-lock-0000000001"]), Some(Recipe::Mutex));
        assert_eq!(classify(&["leases", "locks"]), Some(Recipe::Semaphore));
        assert_eq!(classify(&["leases"]), Some(Recipe::Semaphore));
        assert_eq!(classify(&["_c_a-__READ__0000000001", "_c_b-__WRIT__0000000002"]), Some(Recipe::ReadWrite));
        assert_eq!(classify(&["_c_a-latch-0000000001"]), Some(Recipe::LeaderLatch));
        assert_eq!(classify(&["_c_a-lease-0000000001"]), Some(Recipe::Leases));
        assert_eq!(classify(&["config", "users"]), None);
        assert_eq!(classify(&["qn-0000000001", "qn-0000000002"]), Some(Recipe::SimpleQueue));
        assert_eq!(classify(&["queue-0000000001", "queue-|id|0000000002"]), Some(Recipe::DistributedQueue));
        // A sharder's shards also begin with `queue-`; a UUID after it tells them from items.
        let shards = ["queue-3f1c2b9e-8d6a-4e1f-9b0a-1c2d3e4f5a6b", "queue-0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d"];
        assert_eq!(classify(&shards), Some(Recipe::QueueSharder));
        assert_eq!(classify(&["3f1c2b9e-8d6a-4e1f-9b0a-1c2d3e4f5a6b", "ready"]), Some(Recipe::DoubleBarrier));
        assert_eq!(classify(&["ready"]), Some(Recipe::DoubleBarrier));
        let kazoo = ["0f1e2d3c4b5a69788796a5b4c3d2e1f0__lock__0000000002", "lease_holder"];
        assert_eq!(classify(&kazoo), Some(Recipe::KazooLock));
        let decoded = Queue::KazooLock.decode(["b__lock__0000000003", "a__lock__0000000002", "lease_holder"]);
        assert_eq!(decoded[0].role, Role::Holder);
        assert_eq!(decoded[1].waits_on.as_deref(), Some("a__lock__0000000002"));
        for recipe in Recipe::ALL {
            assert_eq!(recipe.layout().recipe, *recipe);
        }
    }

    /// kazoo counts only `__lock__` and ten digits (its regex `__lock__(-?\d{10})$`), sorted
    /// by that text; a child sorting first by Curator's key, or with nine or eleven digits,
    /// holds nothing.
    #[test]
    fn a_kazoo_lock_is_decoded_by_kazoos_rule() {
        let decoded = Queue::KazooLock.decode([
            "b__lock__0000000003",
            "0",
            "a__lock__0000000002",
            "c__lock__000000001",
            "d__lock__00000000001",
            "lease_holder",
        ]);
        let roles: Vec<(&str, Role, Option<&str>)> =
            decoded.iter().map(|d| (d.name.as_str(), d.role, d.waits_on.as_deref())).collect();
        assert_eq!(
            roles[..2],
            [
                ("a__lock__0000000002", Role::Holder, None),
                ("b__lock__0000000003", Role::Waiter, Some("a__lock__0000000002")),
            ]
        );
        assert_eq!(decoded[1].sequence, Some(3));
        assert!(decoded[2..].iter().all(|d| d.role == Role::Ignored && d.kind == Kind::Foreign), "{decoded:?}");
        assert_eq!(decoded.len(), 6);
    }

    #[test]
    fn a_stray_child_does_not_change_the_verdict() {
        assert_eq!(classify(&["_c_a-lock-0000000001", "_c_b-lock-0000000002", "latch-notes"]), Some(Recipe::Mutex));
        assert_eq!(classify(&["leases", "locks", "junk"]), Some(Recipe::Semaphore));
    }

    #[test]
    fn a_mutex_orders_by_the_text_after_the_last_marker() {
        let decoded = Queue::Mutex.decode([
            format!("{U2}lock-0000000003"),
            "lock-0000000002".to_owned(), // unprotected: sorts by its sequence like the others
            format!("{U1}lock-0000000001"),
        ]);
        assert_eq!(
            roles(&decoded),
            [
                (format!("{U1}lock-0000000001").as_str(), Role::Holder),
                ("lock-0000000002", Role::Waiter),
                (format!("{U2}lock-0000000003").as_str(), Role::Waiter),
            ]
        );
        // each waiter waits on the one ahead of it
        assert_eq!(decoded[0].waits_on, None);
        assert_eq!(decoded[1].waits_on.as_deref(), Some(decoded[0].name.as_str()));
        assert_eq!(decoded[2].waits_on.as_deref(), Some("lock-0000000002"));
        assert_eq!(decoded.iter().map(|d| d.sequence).collect::<Vec<_>>(), [Some(1), Some(2), Some(3)]);
        // only the last `lock-` counts
        assert_eq!(Queue::Mutex.sort_key("lock-lock-0000000007"), "0000000007");
    }

    #[test]
    fn foreign_children_count_and_may_hold_the_queue() {
        let decoded = Queue::Mutex.decode(["_c_a-lock-0000000001", "0", "zzz"]);
        assert_eq!(decoded[0].name, "0");
        assert_eq!((decoded[0].role, decoded[0].kind), (Role::Holder, Kind::Foreign));
        assert_eq!((decoded[1].role, decoded[1].kind), (Role::Waiter, Kind::Lock));
        assert_eq!(decoded[1].waits_on.as_deref(), Some("0"), "the lock node waits on the foreign child");
        assert_eq!(
            (decoded[2].role, decoded[2].kind, decoded[2].waits_on.as_deref()),
            (Role::Waiter, Kind::Foreign, None)
        );
    }

    #[test]
    fn keys_compare_as_strings_not_numbers() {
        // an overflowed sequence sorts before the positive ones, as in Curator
        let decoded = Queue::Mutex.decode(["_c_a-lock-0000000001", "_c_b-lock--2147483648"]);
        assert_eq!(decoded[0].name, "_c_b-lock--2147483648");
    }

    #[test]
    fn the_first_latch_node_leads() {
        let decoded = Queue::LeaderLatch.decode(["_c_b-latch-0000000002", "_c_a-latch-0000000001"]);
        assert_eq!(roles(&decoded), [("_c_a-latch-0000000001", Role::Holder), ("_c_b-latch-0000000002", Role::Waiter)]);
    }

    #[test]
    fn every_lease_node_is_a_lease() {
        let decoded = Queue::Leases.decode(["_c_b-lease-0000000002", "_c_a-lease-0000000001", "x"]);
        assert!(decoded.iter().all(|d| d.role == Role::Lease && d.waits_on.is_none()));
        assert_eq!(decoded[0].name, "_c_a-lease-0000000001");
        assert_eq!(decoded[2].kind, Kind::Foreign);
    }

    #[test]
    fn readers_share_until_a_writer_queues() {
        let decoded = Queue::ReadWrite.decode([
            "_c_r3-__READ__0000000004",
            "_c_w1-__WRIT__0000000003",
            "_c_r2-__READ__0000000002",
            "_c_r1-__READ__0000000001",
            "_c_w2-__WRIT__0000000005",
        ]);
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
        // a writer waits on its immediate predecessor; a reader on the FIRST writer
        let waits: Vec<Option<&str>> = decoded.iter().map(|d| d.waits_on.as_deref()).collect();
        assert_eq!(
            waits,
            [
                None,
                None,
                Some("_c_r2-__READ__0000000002"),
                Some("_c_w1-__WRIT__0000000003"),
                Some("_c_r3-__READ__0000000004")
            ]
        );
    }

    #[test]
    fn a_writer_holds_at_the_front() {
        let decoded = Queue::ReadWrite.decode(["_c_r-__READ__0000000002", "_c_w-__WRIT__0000000001"]);
        assert_eq!(
            roles(&decoded),
            [("_c_w-__WRIT__0000000001", Role::Holder), ("_c_r-__READ__0000000002", Role::Waiter)]
        );
    }

    #[test]
    fn a_foreign_child_blocks_writers_only() {
        let decoded = Queue::ReadWrite.decode(["_c_r-__READ__0000000002", "0", "_c_w-__WRIT__0000000003"]);
        assert_eq!(
            roles(&decoded),
            [("0", Role::Holder), ("_c_r-__READ__0000000002", Role::Holder), ("_c_w-__WRIT__0000000003", Role::Waiter)]
        );
    }

    #[test]
    fn a_downgrade_reader_holds_with_its_writer() {
        // Curator 5.5+: the write holder's read node carries the write node's sequence.
        for listing in [
            ["_c_d-__READ__0000000001", "_c_w-__WRIT__0000000001", "_c_q-__WRIT__0000000002"],
            ["_c_w-__WRIT__0000000001", "_c_d-__READ__0000000001", "_c_q-__WRIT__0000000002"],
        ] {
            let decoded = Queue::ReadWrite.decode(listing);
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
        let decoded = Queue::ReadWrite.decode(["_c_q-__WRIT__0000000002", "_c_d-__READ__0000000001"]);
        assert_eq!(
            roles(&decoded),
            [("_c_d-__READ__0000000001", Role::Holder), ("_c_q-__WRIT__0000000002", Role::Waiter)]
        );
    }

    #[test]
    fn a_tie_across_sessions_is_no_downgrade() {
        let read = |owner| Child::new("_c_d-__READ__0000000001", Some(stat(owner)), None);
        let write = Child::new("_c_w-__WRIT__0000000001", Some(stat(7)), None);
        let decoded = Queue::ReadWrite.decode([read(7), write.clone()]);
        assert_eq!(decoded[1].role, Role::Holder, "same session: a downgrade");
        let decoded = Queue::ReadWrite.decode([read(8), write]);
        assert_eq!(decoded[1].role, Role::Waiter, "another session's read node waits for the writer");
        assert_eq!(decoded[1].waits_on.as_deref(), Some("_c_w-__WRIT__0000000001"));
    }

    #[test]
    fn stat_and_data_travel_with_their_node_and_a_revocation_request_shows() {
        let decoded = Queue::Mutex.decode([
            Child::new("_c_b-lock-0000000002", Some(stat(2)), Some(REVOKE_MESSAGE.to_vec())),
            Child::new("_c_a-lock-0000000001", Some(stat(1)), Some(b"10.0.0.1".to_vec())),
        ]);
        assert_eq!(decoded[0].stat.map(|s| s.ephemeral_owner), Some(1));
        assert_eq!(decoded[0].data.as_deref(), Some(&b"10.0.0.1"[..]));
        assert!(!decoded[0].revocation_requested);
        assert_eq!(decoded[1].stat.map(|s| s.ephemeral_owner), Some(2));
        assert!(decoded[1].revocation_requested);
    }

    #[test]
    fn ids_are_stable() {
        let ids: Vec<&str> = Recipe::ALL.iter().map(|r| r.id()).collect();
        assert_eq!(
            ids,
            [
                "semaphore",
                "read-write",
                "leader-latch",
                "leases",
                "simple-queue",
                "queue-sharder",
                "distributed-queue",
                "double-barrier",
                "kazoo-lock",
                "mutex",
                "empty"
            ]
        );
        assert_eq!(Role::Holder.id(), "holder");
        assert_eq!(Kind::Foreign.id(), "foreign");
    }

    #[test]
    fn queue_items_and_barrier_members_are_in_name_order() {
        let items = Queue::Items("qn-").decode(["qn-0000000002", "notes", "qn-0000000001"]);
        let names: Vec<(&str, Kind, Role)> = items.iter().map(|d| (d.name.as_str(), d.kind, d.role)).collect();
        assert_eq!(
            names,
            [
                ("notes", Kind::Foreign, Role::Queued),
                ("qn-0000000001", Kind::Item, Role::Queued),
                ("qn-0000000002", Kind::Item, Role::Queued)
            ]
        );
        assert_eq!(items[1].sequence, Some(1));
        let members = Queue::Members.decode([
            "ready",
            "9b0a1c2d-3e4f-4a6b-8d6a-3f1c2b9e4e1f",
            "3f1c2b9e-8d6a-4e1f-9b0a-1c2d3e4f5a6b",
        ]);
        let kinds: Vec<Kind> = members.iter().map(|d| d.kind).collect();
        assert_eq!(kinds, [Kind::Member, Kind::Member, Kind::Ready]);
        assert!(members.iter().all(|d| d.role == Role::Member && d.waits_on.is_none()));
        assert_eq!(Queue::Items("queue-").sort_key("queue-|x|0000000001"), "queue-|x|0000000001");
    }

    #[test]
    fn distributed_queue_items_are_in_their_variants_order() {
        let names = |decoded: Vec<Decoded>| decoded.into_iter().map(|d| d.name).collect::<Vec<_>>();
        let id = ["queue-|b|0000000003", "queue-|zz|0000000001", "queue-|a|0000000002"];
        assert_eq!(
            names(Queue::Items("queue-").decode(id)),
            ["queue-|zz|0000000001", "queue-|a|0000000002", "queue-|b|0000000003"]
        );
        let delay = ["queue-|00000003|0000000001", "queue-|00000002|0000000002"];
        let decoded = Queue::Items("queue-").decode(delay);
        assert_eq!((decoded[0].sequence, decoded[0].role), (Some(2), Role::Queued));
        assert_eq!(names(decoded), [delay[1], delay[0]]);
        // Told the variant: ids that look like epochs are still ids.
        let ids = ["queue-|0000000B|0000000001", "queue-|0000000A|0000000002"];
        assert_eq!(names(Queue::Items("queue-").decode(ids)), [ids[1], ids[0]]);
        assert_eq!(names(QueueOrder::Id.decode(ids)), ids);
        assert_eq!(names(Queue::Items("qn-").decode(["qn-|b|1", "qn-|a|2"])), ["qn-|a|2", "qn-|b|1"]);
    }
}
