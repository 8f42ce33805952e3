//! The mirror itself, as pure logic: what it holds, and how watch events, resyncs and read
//! replies change it. No I/O here; the driver sends the reads this asks for and feeds back
//! their replies.
//!
//! # Why the result is exact
//! The watch is (re)added before any read of a resync is sent, so every change after the
//! reads were answered arrives as an event. A read reply tells how one node was when the
//! server answered it; it is applied unless an event about that node (or, for a deletion, an
//! ancestor) was applied after the read was sent: such an event is at least as new as the
//! reply (the driver applies every event the server sent before a reply first), and where the
//! event leaves something to learn it asks for a read of its own. Among replies that find a
//! node, the newer one wins by `(czxid, mzxid)`. A resync ends with a sweep: an entry that no
//! listing, read or event of the resync confirmed is gone from the server.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use zookeeper_client::Stat;

use super::tree::{self, Entry, Item, Tree};

/// Which nodes under the root the mirror holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Scope {
    /// The root alone.
    Node,
    /// The root's direct children (not the root).
    Children,
    /// The root and every descendant.
    Tree,
}

impl Scope {
    fn holds(self, rel: &str) -> bool {
        match self {
            Scope::Node => rel.is_empty(),
            Scope::Children => tree::depth(rel) == 1,
            Scope::Tree => true,
        }
    }
}

/// What the mirror learns of each node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reads {
    /// Stat, read with `exists`/listings.
    Stat,
    /// Stat and data, read with `getData`.
    Data,
}

/// Whether the mirror can vouch for what it holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Status {
    /// Events may have been missed (never resynced, disconnected, a read failed); what it holds
    /// is the last view, possibly stale.
    Incomplete,
    /// The watch is in place and a resync's reads are out.
    Loading,
    /// Every change up to the last event applied is in (data of nodes whose read is in flight
    /// shows its previous state for that round trip).
    Complete,
}

/// What a read is about: which resync generation, which event it followed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Ticket {
    generation: u64,
    sent_at: u64,
    snapshot: bool,
}

/// The kind of read to send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Op {
    /// The node's stat (and data under [`Reads::Data`]).
    Read,
    /// As `Read`, plus the node's children.
    Load,
    /// Only the node's children (its stat is not kept).
    List,
}

/// A read the mirror wants sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Request {
    pub(crate) ticket: Ticket,
    /// Relative to the mirror's root.
    pub(crate) path: String,
    pub(crate) op: Op,
}

impl Request {
    /// A snapshot read of `generation` (for views that count their own generations).
    pub(crate) fn snapshot(generation: u64, path: String, op: Op) -> Self {
        Request { ticket: Ticket { generation, sent_at: 0, snapshot: true }, path, op }
    }

    /// The resync generation the read belongs to.
    pub(crate) fn generation(&self) -> u64 {
        self.ticket.generation
    }

    /// Whether the read belongs to a load or resync (rather than following an event).
    pub(crate) fn is_snapshot(&self) -> bool {
        self.ticket.snapshot
    }
}

/// A read's outcome.
#[derive(Debug)]
pub(crate) enum Reply<T> {
    Found {
        stat: Stat,
        data: Option<Arc<T>>,
        children: Option<Vec<String>>,
    },
    Missing,
    /// The session may not read the node (ACL): it is not mirrored.
    Denied,
    /// The read could not be answered (connection loss, ...): the mirror needs a resync.
    Failed,
}

/// The kind of a watch event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EventKind {
    Created,
    Deleted,
    DataChanged,
}

/// A difference the mirror applied, in the order it applied them.
#[derive(Debug)]
pub(crate) enum Change<T> {
    Created { path: String, new: Item<T> },
    Changed { path: String, old: Item<T>, new: Item<T> },
    Deleted { path: String, old: Item<T> },
}

/// The last events applied to one path, by sequence number.
#[derive(Debug, Clone, Copy, Default)]
struct Touch {
    any: u64,
    deleted: u64,
}

/// A node's reads in flight since `since` (when the first of them was sent): when the latest
/// was sent, how many are out, and whether events came for the node that no read sent after
/// them will show. Reads sent before `since` (before a deletion that made their replies
/// useless) count for nothing here.
#[derive(Debug, Clone, Copy)]
struct Reading {
    since: u64,
    sent_at: u64,
    out: u8,
    again: bool,
}

/// A node's reads in flight at most (before a deletion makes the ones out useless). The
/// second goes out at the event that comes while the first is out, so a node changed again
/// and again is shown one round trip after each change (not the rest of the first read's round
/// trip, then a second); later events share the two.
const READS_PER_NODE: u8 = 2;

/// The mirror of one subtree.
#[derive(Debug)]
pub(crate) struct Mirror<T> {
    scope: Scope,
    tree: Tree<T>,
    status: Status,
    /// Events applied so far.
    seq: u64,
    /// Resyncs begun so far; replies of an older generation are dropped.
    generation: u64,
    /// Snapshot reads of this generation not answered yet.
    snapshot_outstanding: usize,
    /// A read of this generation failed: only a new resync can vouch for the mirror again.
    failed: bool,
    /// Paths touched by events since the oldest read in flight was sent.
    touched: HashMap<Box<str>, Touch>,
    /// Reads in flight by `sent_at` (for pruning `touched`).
    in_flight: BTreeMap<u64, usize>,
    /// The latest read in flight of each path (a stat or data read, or a load) of this
    /// generation: events on the path while it is out share it (see `Mirror::read`).
    reading: HashMap<Box<str>, Reading>,
    /// Resyncs completed (the first one is the initial load).
    completed: u64,
    changes: Vec<Change<T>>,
    requests: Vec<Request>,
}

impl<T> Mirror<T> {
    pub(crate) fn new(scope: Scope) -> Self {
        Mirror {
            scope,
            tree: Tree::default(),
            status: Status::Incomplete,
            seq: 0,
            generation: 0,
            snapshot_outstanding: 0,
            failed: false,
            touched: HashMap::new(),
            in_flight: BTreeMap::new(),
            reading: HashMap::new(),
            completed: 0,
            changes: Vec::new(),
            requests: Vec::new(),
        }
    }

    pub(crate) fn status(&self) -> Status {
        self.status
    }

    /// How many resyncs completed (1 after the initial load).
    pub(crate) fn completed(&self) -> u64 {
        self.completed
    }

    /// Whether a resync is wanted without the source asking for one (a read failed).
    pub(crate) fn needs_resync(&self) -> bool {
        self.failed
    }

    pub(crate) fn tree(&self) -> &Tree<T> {
        &self.tree
    }

    /// The differences applied since the last call, in order.
    pub(crate) fn take_changes(&mut self) -> Vec<Change<T>> {
        std::mem::take(&mut self.changes)
    }

    /// The reads to send, in order.
    pub(crate) fn take_requests(&mut self) -> Vec<Request> {
        std::mem::take(&mut self.requests)
    }

    /// Events may be missing from here on (the connection broke).
    pub(crate) fn interrupt(&mut self) {
        self.status = Status::Incomplete;
    }

    /// The watch was (re)added: reads the mirror's scope again. Replies of earlier reads are
    /// dropped from now on.
    pub(crate) fn resync(&mut self) {
        self.generation += 1;
        self.touched.clear();
        self.in_flight.clear();
        self.reading.clear();
        self.snapshot_outstanding = 0;
        self.failed = false;
        self.status = Status::Loading;
        let op = match self.scope {
            Scope::Node => Op::Read,
            Scope::Children => Op::List,
            Scope::Tree => Op::Load,
        };
        self.send(String::new(), op, true);
    }

    fn send(&mut self, path: String, op: Op, snapshot: bool) {
        let ticket = Ticket { generation: self.generation, sent_at: self.seq, snapshot };
        if snapshot {
            self.snapshot_outstanding += 1;
        }
        *self.in_flight.entry(self.seq).or_default() += 1;
        if op != Op::List {
            let seq = self.seq;
            let reading = self.reading.entry(path.as_str().into()).or_insert(Reading {
                since: seq,
                sent_at: seq,
                out: 0,
                again: false,
            });
            *reading = Reading { sent_at: seq, out: reading.out.saturating_add(1), again: false, ..*reading };
        }
        self.requests.push(Request { ticket, path, op });
    }

    /// Applies a watch event on `rel` (relative to the root).
    pub(crate) fn event(&mut self, kind: EventKind, rel: &str) {
        self.seq += 1;
        if !self.in_flight.is_empty() {
            let touch = self.touched.entry(rel.into()).or_default();
            touch.any = self.seq;
            if kind == EventKind::Deleted {
                touch.deleted = self.seq;
            }
        }
        if !self.scope.holds(rel) {
            return;
        }
        match kind {
            EventKind::Deleted => self.remove(rel),
            EventKind::Created | EventKind::DataChanged => {
                let generation = self.generation;
                if let Some(entry) = self.tree.get_mut(rel) {
                    entry.mark = generation;
                }
                self.read(rel);
            }
        }
    }

    /// A created or changed node is to be read. With [`READS_PER_NODE`] reads of it already in
    /// flight (and no deletion of it or an ancestor since the latest was sent, which would
    /// make its reply dropped), no more go out now: the latest is marked, and when the next
    /// reply of the node is applied one more read follows. (A reply may already show this
    /// change: the server sends a change's event before the reply of any read that sees the
    /// change. But the driver may apply an event that arrived just after a reply before that
    /// reply, so it cannot tell.) A node changed many times in a row thus has at most
    /// [`READS_PER_NODE`] reads in flight, and never costs more reads than events.
    fn read(&mut self, rel: &str) {
        match self.reading.get(rel).copied() {
            Some(reading) if !self.deleted_since(rel, reading.sent_at) => {
                if reading.out < READS_PER_NODE {
                    self.send(rel.to_owned(), Op::Read, false);
                } else if let Some(reading) = self.reading.get_mut(rel) {
                    reading.again = true;
                }
            }
            // A deletion since: the replies of the reads out will be dropped, so they count
            // for nothing.
            _ => {
                self.reading.remove(rel);
                self.send(rel.to_owned(), Op::Read, false);
            }
        }
    }

    /// Whether an event on `rel` (any kind) was applied after `sent_at`.
    fn touched_since(&self, rel: &str, sent_at: u64) -> bool {
        self.touched.get(rel).is_some_and(|t| t.any > sent_at)
    }

    /// Whether `rel` or an ancestor was deleted after `sent_at`.
    fn deleted_since(&self, rel: &str, sent_at: u64) -> bool {
        let mut at = Some(rel);
        while let Some(path) = at {
            if self.touched.get(path).is_some_and(|t| t.deleted > sent_at) {
                return true;
            }
            at = tree::parent(path);
        }
        false
    }

    /// Applies the reply to `request`.
    pub(crate) fn reply(&mut self, request: &Request, reply: Reply<T>) {
        let ticket = request.ticket;
        if ticket.generation != self.generation {
            return;
        }
        let rel = request.path.as_str();
        // Events came for the node that no read out shows: read it once more, after this
        // reply is applied. (Replies come in the order their reads were sent; the latest's
        // ends the node's reads in flight.)
        let again = request.op != Op::List
            && match self.reading.get_mut(rel) {
                Some(reading) if reading.sent_at == ticket.sent_at => self.reading.remove(rel).is_some_and(|r| r.again),
                Some(reading) if (reading.since..reading.sent_at).contains(&ticket.sent_at) => {
                    reading.out = reading.out.saturating_sub(1).max(1);
                    std::mem::take(&mut reading.again)
                }
                _ => false,
            };
        match reply {
            Reply::Found { stat, data, children } => {
                if !self.deleted_since(rel, ticket.sent_at) {
                    if request.op != Op::List && self.scope.holds(rel) {
                        self.found(rel, Item { stat, data });
                    }
                    for name in children.unwrap_or_default() {
                        let child = tree::join(rel, &name);
                        if self.deleted_since(&child, ticket.sent_at) {
                            continue;
                        }
                        if !self.scope.holds(&child) {
                            continue;
                        }
                        match self.scope {
                            Scope::Tree => self.send(child, Op::Load, true),
                            Scope::Node | Scope::Children => self.send(child, Op::Read, true),
                        }
                    }
                }
            }
            Reply::Missing | Reply::Denied => {
                if matches!(reply, Reply::Denied) {
                    tracing::warn!(path = rel, "mirror: the session may not read this node; it is left out");
                }
                if !self.touched_since(rel, ticket.sent_at) {
                    self.remove(rel);
                }
            }
            Reply::Failed => {
                self.failed = true;
                self.status = Status::Incomplete;
            }
        }
        self.settle(ticket.sent_at);
        if again && self.scope.holds(rel) {
            self.send(request.path.clone(), Op::Read, false);
        }
        if ticket.snapshot {
            self.snapshot_outstanding -= 1;
            if self.snapshot_outstanding == 0 && self.status == Status::Loading {
                self.complete();
            }
        }
    }

    /// A reply of this generation arrived: it is no longer in flight.
    fn settle(&mut self, sent_at: u64) {
        if let Some(count) = self.in_flight.get_mut(&sent_at) {
            *count -= 1;
            if *count == 0 {
                self.in_flight.remove(&sent_at);
            }
        }
        match self.in_flight.keys().next() {
            None => self.touched.clear(),
            Some(&oldest) if self.touched.len() > 4096 => self.touched.retain(|_, t| t.any > oldest),
            Some(_) => {}
        }
    }

    /// The resync's reads are all answered: whatever it did not confirm is gone.
    fn complete(&mut self) {
        for (path, entry) in self.tree.sweep(self.generation) {
            self.changes.push(Change::Deleted { path, old: entry.item });
        }
        self.status = Status::Complete;
        self.completed += 1;
    }

    fn found(&mut self, rel: &str, new: Item<T>) {
        let generation = self.generation;
        let Some(entry) = self.tree.get_mut(rel) else {
            self.insert(rel, new);
            return;
        };
        entry.mark = generation;
        let old = &entry.item.stat;
        let (old_key, new_key) = ((old.czxid, old.mzxid), (new.stat.czxid, new.stat.mzxid));
        if new_key < old_key {
            return;
        }
        if new_key == old_key {
            // Only the child counters can differ: keep the data, refresh the stat.
            entry.item.stat = new.stat;
            if entry.item.data.is_none() {
                entry.item.data = new.data;
            }
            return;
        }
        let old = std::mem::replace(&mut entry.item, new.clone());
        self.changes.push(Change::Changed { path: rel.to_owned(), old, new });
    }

    fn insert(&mut self, rel: &str, item: Item<T>) {
        self.tree.insert(rel, Entry { item: item.clone(), mark: self.generation });
        self.changes.push(Change::Created { path: rel.to_owned(), new: item });
    }

    fn remove(&mut self, rel: &str) {
        for (path, entry) in self.tree.remove_all_at(rel) {
            self.changes.push(Change::Deleted { path, old: entry.item });
        }
    }
}
