//! A session's view of a lock directory built from one persistent recursive watch and one
//! listing, and when that view may stand in for a listing in a lock decision. Pure logic: the
//! events, the listing reply and the connection's breaks go in, a decision made with the same
//! [`Driver`] as the listing path comes out. [`DirHost`] holds it with its waiters, as the
//! [`View`] that the crate's mirror driver keeps current; the session's live mirror
//! (`dir_mirror.rs`) asks it.
//!
//! # Why a decision from the view is a listing's decision
//! - The watch is added before the listing is sent, and a server answers one session's
//!   requests in order, so the listing plus the events after it are every change the server
//!   sent. Events that arrive before the listing reply are replayed on top of it (each one sets
//!   one name's presence; a name's last event decides).
//! - A break in the connection loses events: the view is invalid until the watch is added
//!   again and the directory listed again. So is any event that contradicts the view (a create
//!   of a name present, a delete of a name absent, the directory deleted while not empty).
//! - Our create's reply comes after the event of every change ordered before it, and our own
//!   node's created event comes before that reply. So once our node is in the view, the view
//!   holds every change before our node (the barrier): deciding earlier could miss a node just
//!   created ahead of ours. The barrier knows our node by its name, so it rests on that name
//!   being unique to its create (the protected prefix's fresh uuid): a view lagging behind a
//!   reaped and re-created directory could otherwise still show an earlier node of the same
//!   name, from the earlier incarnation (the model test finds exactly that with repeated names).
//!   Only the session's own sequential nodes are to be asked about (a foreign name has no
//!   place in the creation order); one without a sequence suffix that entered by its event
//!   cannot be witnessed and asks for a listing.
//! - A server can withhold events from a connected session: a child the session may not read
//!   (ZooKeeper 3.8.4+, 3.9.2+, and builds carrying that fix) sends no event, and on 3.6-3.8 a
//!   one-shot watch the same session puts on the directory demotes the recursive watch so that
//!   creates stop arriving. The listing shows such a child; the events do not. The witness
//!   catches it: a sequential child's suffix is the number of child creates in this incarnation
//!   of the directory before it, and the listing's stat gives that count at the listing
//!   ((cversion + numChildren) / 2, exact on 3.6+), so when our node entered by its event the
//!   creates counted since the listing, ours included, must be its suffix + 1. Otherwise a
//!   create went unseen, perhaps ahead of ours: the view is invalid and the directory is
//!   listed again. A node that entered through a listing needs no witness.
//! - Deleting a directory resets its create counter: its deletion and creation events start
//!   the count over at 0, and names repeat across incarnations.
//! - Liveness, not safety: the deletion of a listed child the session may not read never
//!   arrives, so a waiter behind it waits until something re-lists (the directory's deletion
//!   while the view still shows a child invalidates it); a user of the view must bound that
//!   wait (for example by the session timeout) and then list or check the predecessor.

use std::collections::HashMap;
use std::sync::Arc;

use tokio::sync::Notify;

use crate::mirror::{EventKind, Op, Reply, Request, View};
use crate::protocol::driver::{parse_sequence, Driver, Verdict};
use crate::watch::probe::Ablations;

/// A watch event about the directory or one of its direct children (deeper events are not
/// passed in; data changes do not change who holds).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum DirEvent {
    ChildCreated(String),
    ChildDeleted(String),
    DirCreated,
    DirDeleted,
}

/// How a child came into the view.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Entry {
    /// In a listing: the listing vouches for everything before it.
    Listed,
    /// By its created event after the listing: the count of creates right after it.
    Counted(u64),
    /// By an event replayed on top of a listing that did not show it: no witness is possible
    /// (a server that reads and writes at the same time would do this; 3.6-3.9 do not).
    Unwitnessed,
}

/// Where the view stands.
#[derive(Debug, Clone, PartialEq, Eq)]
enum State {
    /// Events may have been missed: nothing is decided from the view.
    Invalid,
    /// The watch was added, the listing is out: events are kept until its reply.
    Listing(Vec<DirEvent>),
    /// Listing plus every event since.
    Valid,
}

/// What the view says about one of the session's nodes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Decision {
    /// The view cannot vouch for anything (invalid, or its listing is out): wait for the next
    /// listing, or decide by a listing of one's own.
    Unknown,
    /// Our node is not in the view yet: wait for its created event (the barrier).
    Barrier,
    /// The witness failed (a create went unseen), or the suffix cannot be witnessed: the view
    /// is now invalid; list the directory again.
    Resync,
    /// A child's sequence wrapped past `i32::MAX`: names cannot order the queue (the listing
    /// path fails such an acquire too).
    Wrapped,
    /// The driver's verdict on the view's children, as a listing now would give it.
    Verdict(Verdict),
}

/// What a listing's reply made of the view.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Listed {
    /// The view is valid.
    Valid,
    /// The reply is not the one the view waits for (the view was interrupted since): nothing
    /// changed.
    Stale,
    /// Directory events came with the reply: the directory may have been deleted and made
    /// again after the listing, and the count belongs to its old incarnation. The view stays
    /// invalid: list again.
    Again,
    /// The directory's stat gives no create count this view can use (an odd count: not a
    /// server whose child counters it knows): decide the classic way.
    Unusable,
}

/// A semaphore's admission, from the view (see [`DirView::admit`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Admission {
    /// The view is not valid.
    Unknown,
    /// This lease of ours is not in the view yet.
    Barrier(String),
    /// A lease of ours entered by an event the count does not witness: list again.
    Resync,
    Admitted,
    /// More children than leases: wait for a deletion.
    Full,
}

#[derive(Debug)]
struct Order {
    /// The drivers that sort this way ([`Driver::sort_name`]).
    sort_name: &'static str,
    keys: std::collections::BTreeSet<Keyed>,
    /// Children created or deleted since `keys` was brought up to date (in order).
    changed: Vec<String>,
}

/// A child name with where its sort key lies in it, ordered by that key (then the name).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Keyed {
    name: String,
    key: std::ops::Range<usize>,
}

impl Keyed {
    fn new(driver: &dyn Driver, name: String) -> Self {
        let key = driver.sort_key(&name);
        // A sort key is a part of the name (`Driver::sort_key`): its place in the name's bytes.
        let start = (key.as_ptr() as usize).wrapping_sub(name.as_ptr() as usize);
        let key = start..start.saturating_add(key.len());
        debug_assert!(key.end <= name.len(), "a sort key outside its name");
        let key = if key.end <= name.len() { key } else { 0..name.len() };
        Keyed { name, key }
    }

    fn key(&self) -> &str {
        &self.name[self.key.clone()]
    }
}

impl Ord for Keyed {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.key().cmp(other.key()).then_with(|| self.name.cmp(&other.name))
    }
}

impl PartialOrd for Keyed {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

/// One session's view of one lock directory.
#[derive(Debug)]
pub(crate) struct DirView {
    state: State,
    children: HashMap<String, Entry>,
    /// The children in the order of the driver asked last, kept in step with `children` by
    /// the changes since that question (`None`: sorted again at the next).
    order: Option<Order>,
    /// Child creates in the directory's current incarnation, as far as the view knows.
    count: u64,
    /// Safety conditions a test turned off (none in normal use).
    ablations: Ablations,
    /// Entries that came by their event and failed the witness's count (not those that came
    /// during a listing, which are not counted at all) while the count was exact, since the
    /// last look (for tests).
    count_mismatches: usize,
    /// No create replayed on the last listing was missing from it: the count is exact.
    count_exact: bool,
}

impl Default for DirView {
    fn default() -> Self {
        Self::new()
    }
}

impl DirView {
    pub(crate) fn new() -> Self {
        DirView {
            state: State::Invalid,
            children: HashMap::new(),
            order: None,
            count: 0,
            ablations: Ablations::default(),
            count_mismatches: 0,
            count_exact: true,
        }
    }

    /// Whether `name` is among the children (valid view only: the caller checks).
    pub(crate) fn contains(&self, name: &str) -> bool {
        self.children.contains_key(name)
    }

    /// How many children the view holds.
    pub(crate) fn len(&self) -> usize {
        self.children.len()
    }

    /// Whether decisions can be made from the view.
    pub(crate) fn is_valid(&self) -> bool {
        self.state == State::Valid
    }

    /// Whether a listing is out (the view waits for its reply).
    pub(crate) fn is_listing(&self) -> bool {
        matches!(self.state, State::Listing(_))
    }

    /// The connection broke, or the session ended: events may be lost from here on.
    pub(crate) fn interrupt(&mut self) {
        self.state = State::Invalid;
    }

    /// The watch was added on the current connection and the listing is sent after it (the
    /// two may be pipelined): events are kept for the listing reply from now on.
    pub(crate) fn watch_added(&mut self) {
        self.state = State::Listing(Vec::new());
    }

    /// The listing's reply: the children and the directory's `cversion` and `numChildren`. A
    /// listing that is not the one the last [`watch_added`](Self::watch_added) announced (the
    /// view was interrupted since) changes nothing.
    pub(crate) fn listed(&mut self, children: Vec<String>, cversion: i32, num_children: i32) -> Listed {
        if !matches!(self.state, State::Listing(_)) {
            return Listed::Stale;
        }
        let State::Listing(buffered) = std::mem::replace(&mut self.state, State::Invalid) else {
            return Listed::Stale;
        };
        let Some(count) = creates(cversion, num_children) else {
            return Listed::Unusable;
        };
        // The events taken before the reply may include some that came right after it (the
        // driver takes every queued event before it looks at the reply). A directory event
        // among them may be the directory's deletion and creation after the listing: the
        // listing's count would then be the old incarnation's, too high for the new one, and
        // a too high count can cancel out a create this session never heard of. So the view
        // stays invalid and the directory is listed again.
        if buffered.iter().any(|event| matches!(event, DirEvent::DirCreated | DirEvent::DirDeleted)) {
            return Listed::Again;
        }
        self.children = children.into_iter().map(|name| (name, Entry::Listed)).collect();
        self.order = None;
        self.count = count;
        self.state = State::Valid;
        // Events from before the reply: the listing already shows their changes (3.6-3.9
        // answer no read while a write is applied), but replaying them is sound either way.
        // The count is the listing's. Child events that came right after the reply may be
        // among them (see above): a create the listing does not show then goes uncounted, so
        // the count can only be low, and a low count fails the witness (a listing again),
        // never passes it.
        self.count_exact = true;
        for event in buffered {
            match event {
                DirEvent::ChildCreated(name) => {
                    if !self.children.contains_key(&name) {
                        self.count_exact = false;
                    }
                    self.children.entry(name).or_insert(Entry::Unwitnessed);
                }
                DirEvent::ChildDeleted(name) => {
                    self.children.remove(&name);
                }
                DirEvent::DirCreated | DirEvent::DirDeleted => {}
            }
        }
        Listed::Valid
    }

    /// The listing found no directory: no children, and the count starts at 0 when it is
    /// created (its created event arrives through the watch).
    pub(crate) fn listed_missing(&mut self) -> Listed {
        self.listed(Vec::new(), 0, 0)
    }

    /// A watch event, in the order the session received it.
    pub(crate) fn event(&mut self, event: DirEvent) {
        match &mut self.state {
            State::Invalid => {}
            State::Listing(buffered) => buffered.push(event),
            State::Valid => self.apply(event),
        }
    }

    fn apply(&mut self, event: DirEvent) {
        let consistent = match event {
            DirEvent::ChildCreated(name) => {
                self.count += 1;
                self.note_change(&name);
                self.children.insert(name, Entry::Counted(self.count)).is_none()
            }
            DirEvent::ChildDeleted(name) => {
                let removed = self.children.remove(&name).is_some();
                self.note_change(&name);
                removed
            }
            DirEvent::DirCreated | DirEvent::DirDeleted => {
                if !self.ablations.no_count_reset {
                    self.count = 0;
                }
                self.children.is_empty()
            }
        };
        if !consistent {
            self.state = State::Invalid;
        }
    }

    /// Keeps the kept order's log of changes, as long as replaying it is cheaper than sorting
    /// the children again: past that the order is dropped (the next decision sorts afresh).
    /// So the log never outgrows the children, however many other sessions come and go while
    /// this session decides nothing (a holder of a long lease, say).
    fn note_change(&mut self, name: &str) {
        if let Some(order) = &mut self.order {
            if order.changed.len() >= self.children.len().max(1) {
                self.order = None;
            } else {
                order.changed.push(name.to_owned());
            }
        }
    }

    /// Entries the view keeps: its children, its kept order and that order's log of changes.
    #[cfg_attr(not(any(test, feature = "testing")), allow(dead_code))]
    pub(crate) fn retained(&self) -> usize {
        self.children.len() + self.order.as_ref().map_or(0, |order| order.keys.len() + order.changed.len())
    }

    /// What the view says about `our` node (a child name of this session's), with `driver`'s
    /// order and rule. A failed witness makes the view invalid.
    pub(crate) fn decide(&mut self, driver: &dyn Driver, our: &str) -> Decision {
        if self.state != State::Valid {
            return Decision::Unknown;
        }
        if self.ablations.no_barrier && !self.children.contains_key(our) {
            // Decide as if our node were in the view, without putting it there.
            let mut sorted: Vec<String> = self.children.keys().cloned().chain([our.to_owned()]).collect();
            driver.sort(&mut sorted);
            return Decision::Verdict(driver.verdict(&sorted, our));
        }
        if let Some(decision) = self.witness(driver, our) {
            return decision;
        }
        // A verdict reads only the children sorted up to ours (see `Driver::verdict`), so
        // only those are sorted: the waiter at the head of a queue of thousands sorts a
        // handful of names on a handoff, not the queue. A wrapped suffix (a leading `-`)
        // sorts before every sequence, so it is among them whenever it is anywhere.
        let sorted = self.sorted_up_to(driver, our);
        if driver.wrapped(&sorted).is_some() {
            // The order cannot be decided by names: the listing path fails such an acquire.
            return Decision::Wrapped;
        }
        Decision::Verdict(driver.verdict(&sorted, our))
    }

    /// Whether leases `ours` (each a child whose create's reply has come) are admitted under
    /// at most `max` children: the semaphore's rule, counted up to our last lease. Each of ours
    /// must pass the barrier and the witness first; every create before them is then in the
    /// view, and a deletion not heard only makes the count higher, never lower.
    ///
    /// The count is of the children created before our last lease (or that lease itself) and
    /// still present: a lease created after ours does not count against ours. Curator counts
    /// every child at its listing after its create; both rules keep the holders within `max`
    /// together. Take the holder whose lease was created last: every other holder's lease was
    /// created before it, and exists now, so existed at that holder's check, where it was
    /// counted by either rule (a sequence orders the creates of one incarnation of the
    /// directory, and a directory is only deleted empty); that check admitted at most `max`.
    /// The difference matters to a contender that released the internal lock before its
    /// check (its create and the lock's delete sent back to back): the next contender's lease
    /// may already be in the view then, and must not push ours out. A child whose sequence
    /// cannot be read (or wrapped past `i32::MAX`) counts, and so does every child when one of
    /// ours has no sequence.
    pub(crate) fn admit(&mut self, driver: &dyn Driver, ours: &[&str], max: usize) -> Admission {
        if self.state != State::Valid {
            return Admission::Unknown;
        }
        for our in ours {
            match self.witness(driver, our) {
                None => {}
                Some(Decision::Barrier) => return Admission::Barrier((*our).to_owned()),
                Some(_) => return Admission::Resync,
            }
        }
        // Every child counted is at most as many: no name needs reading (the common case, and
        // the only one with a handful of leases).
        if self.children.len() <= max {
            return Admission::Admitted;
        }
        let sequence = |name: &str| parse_sequence(driver.sort_key(name)).filter(|&n| n >= 0);
        let our_sequences: Option<Vec<i64>> = ours.iter().map(|our| sequence(our)).collect();
        let counted = match our_sequences.and_then(|sequences| sequences.into_iter().max()) {
            Some(last) => self.children.keys().filter(|child| sequence(child).map_or(true, |seq| seq <= last)).count(),
            None => self.children.len(),
        };
        if counted <= max {
            Admission::Admitted
        } else {
            Admission::Full
        }
    }

    /// Whether `n` leases more would fit under `max` children now: a valid view with at most
    /// `max - n` children. A guess, not an admission (a create the view has not applied yet is
    /// not counted): the leases still pass [`admit`](Self::admit) once created.
    pub(crate) fn has_room(&self, n: usize, max: usize) -> bool {
        self.state == State::Valid && self.children.len().saturating_add(n) <= max
    }

    /// The barrier and the witness for our node: `None` once it is in the view and its entry
    /// is witnessed (it counts as listed from then on); otherwise the decision to return (an
    /// unwitnessed entry makes the view invalid).
    fn witness(&mut self, driver: &dyn Driver, our: &str) -> Option<Decision> {
        let witnessed = match self.children.get(our) {
            None => return Some(Decision::Barrier),
            Some(Entry::Listed) => true,
            Some(Entry::Unwitnessed) => false,
            Some(&Entry::Counted(count)) => {
                let suffix = parse_sequence(driver.sort_key(our)).filter(|&n| n >= 0);
                suffix.is_some_and(|n| u64::try_from(n).is_ok_and(|n| n + 1 == count))
            }
        };
        if !witnessed && self.count_exact && matches!(self.children.get(our), Some(Entry::Counted(_))) {
            self.count_mismatches += 1;
        }
        let witnessed = witnessed || self.ablations.no_witness;
        if !witnessed {
            self.state = State::Invalid;
            return Some(Decision::Resync);
        }
        // Witnessed once, always: the count right after our node does not change.
        self.children.insert(our.to_owned(), Entry::Listed);
        None
    }

    /// The children whose sort key is at most `our`'s, in `driver`'s order (by key, which is
    /// all `Driver::sort` orders by; ties, which one incarnation's sequence numbers never
    /// make, by name): from the order
    /// kept since the last question when `driver` sorts as that one's did (the changes since
    /// then applied: a handoff costs a deletion and a lookup, whatever the queue's length),
    /// otherwise from all children, sorted once.
    fn sorted_up_to(&mut self, driver: &dyn Driver, our: &str) -> Vec<String> {
        let name = driver.sort_name();
        let order = match self.order.take() {
            Some(mut order) if order.sort_name == name && order.changed.len() <= self.children.len() => {
                for child in std::mem::take(&mut order.changed) {
                    let keyed = Keyed::new(driver, child);
                    if self.children.contains_key(&keyed.name) {
                        order.keys.insert(keyed);
                    } else {
                        order.keys.remove(&keyed);
                    }
                }
                order
            }
            _ => Order {
                sort_name: name,
                keys: self.children.keys().map(|child| Keyed::new(driver, child.clone())).collect(),
                changed: Vec::new(),
            },
        };
        let our_key = driver.sort_key(our);
        let up_to =
            order.keys.iter().take_while(|keyed| keyed.key() <= our_key).map(|keyed| keyed.name.clone()).collect();
        self.order = Some(order);
        up_to
    }

    /// Entries that failed the witness's count since the last call.
    pub(crate) fn take_count_mismatches(&mut self) -> usize {
        std::mem::take(&mut self.count_mismatches)
    }

    /// Turns safety conditions off (a test's seam).
    pub(crate) fn set_ablations(&mut self, ablations: Ablations) {
        self.ablations = ablations;
    }

    #[cfg(test)]
    fn with_hooks(mut self, no_barrier: bool, no_witness: bool) -> Self {
        self.ablations = Ablations { no_barrier, no_witness, ..Ablations::default() };
        self
    }
}

/// The child creates a directory's stat says it has had: ZooKeeper 3.6+ keeps a count `c` of
/// them and reports `cversion = 2c - numChildren` as a Java `int`, which wraps once `c`
/// reaches 2^30. Decoded modulo 2^32 the count is exact while `c < 2^31` (past that, sequence
/// suffixes wrap too and the drivers refuse the names). An odd sum is no count of that form.
pub(crate) fn creates(cversion: i32, num_children: i32) -> Option<u64> {
    let twice = (i64::from(cversion) + i64::from(num_children)).rem_euclid(1 << 32);
    (twice % 2 == 0).then_some((twice / 2) as u64)
}

/// The name under which waiters for any child's deletion are registered (no child is named
/// so).
pub(crate) const ANY_DELETION: &str = "";

/// Sessions sharing a directory (estimated from its children per node of ours) past which a
/// session stops mirroring it: measured on one server, the mirror was ahead of watching the
/// node ahead up to 8 sessions per lock, at parity at 16 and behind from 32 on.
pub(crate) const CROWDED: usize = 12;

/// Nodes in a directory (as a listing of the classic wait shows them) at or below which a
/// session that stopped mirroring it mirrors it again.
pub(crate) const CALM: usize = 6;

/// Where the mirror stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Run {
    Running,
    /// No mirror on this session for this directory: waiters wait the classic way.
    Refused,
    /// The session ended (or the framework closed): the mirror stopped.
    Ended,
}

/// A lock directory's view and its waiters, under one lock: the [`View`] the mirror driver
/// drives (its events, listings and breaks go in; waiters are woken by the names they wait
/// for).
pub(crate) struct DirHost {
    pub(crate) dir: String,
    pub(crate) view: DirView,
    pub(crate) run: Run,
    /// Waiters by the child name whose event they wait for.
    pub(crate) by_name: HashMap<String, Vec<(u64, Arc<Notify>)>>,
    /// Waiters that wait for the view to change state.
    pub(crate) anyone: Vec<(u64, Arc<Notify>)>,
    /// Listings sent so far, and the number of the one the view holds.
    pub(crate) sent: u64,
    pub(crate) listed: u64,
    /// The last listing failed: list again after a pause.
    pub(crate) failed: bool,
    /// The watch is to be added again (and the directory listed again).
    pub(crate) rearm: bool,
    /// The listing to send.
    pub(crate) requests: Vec<Request>,
    pub(crate) ablations: Ablations,
    /// This session's nodes that waiters or holders asked about (removed at their deletion):
    /// what the view's children are measured against to tell how many sessions share the
    /// directory (see [`DirHost::crowded`]).
    own: std::collections::HashSet<String>,
}

impl DirHost {
    /// The host of a view of `dir` (full path), running or refused from the start.
    pub(crate) fn new(dir: &str, run: Run, ablations: Ablations) -> Self {
        let mut view = DirView::new();
        view.set_ablations(ablations);
        DirHost {
            dir: dir.to_owned(),
            view,
            run,
            by_name: HashMap::new(),
            anyone: Vec::new(),
            sent: 0,
            listed: 0,
            failed: false,
            rearm: false,
            requests: Vec::new(),
            ablations,
            own: std::collections::HashSet::new(),
        }
    }

    /// Notes a node of this session's that a waiter or holder asks about.
    pub(crate) fn note_own(&mut self, name: &str) {
        if !self.own.contains(name) {
            self.own.insert(name.to_owned());
        }
    }

    /// Whether so many sessions share the directory that mirroring it costs the server more
    /// than it saves: the view's children per node of this session's in it above
    /// [`CROWDED`]. Every create and delete in a mirrored directory is sent to every session
    /// that mirrors it, so a handoff costs two notifications per mirroring session; a waiter
    /// that waits on the node ahead of it costs one to three notifications and a listing or
    /// two, whatever the number of sessions. The children a session holds itself (its own waiters)
    /// are its benefit: one session with eight waiters in a queue of 32 shares the directory
    /// with about three others, not 31.
    pub(crate) fn crowded(&self) -> bool {
        if !self.view.is_valid() {
            return false;
        }
        let ours = self.own.iter().filter(|name| self.view.contains(name)).count().max(1);
        self.view.len() > CROWDED * ours
    }

    pub(crate) fn wake_name(&mut self, name: &str) {
        for (_, notify) in self.by_name.remove(name).unwrap_or_default() {
            notify.notify_one();
        }
    }

    /// Registers waiter `ticket` for the events of `names` (none: for the view's next change
    /// of state; every waiter is woken by that too).
    pub(crate) fn register(&mut self, ticket: u64, names: &[String], notify: &Arc<Notify>) {
        if names.is_empty() {
            self.anyone.push((ticket, notify.clone()));
        }
        for name in names {
            self.by_name.entry(name.clone()).or_default().push((ticket, notify.clone()));
        }
    }

    /// Unregisters waiter `ticket` (registered for `names`).
    pub(crate) fn unregister(&mut self, ticket: u64, names: &[String]) {
        if names.is_empty() {
            self.anyone.retain(|(t, _)| *t != ticket);
        }
        for name in names {
            if let Some(list) = self.by_name.get_mut(name) {
                list.retain(|(t, _)| *t != ticket);
                if list.is_empty() {
                    self.by_name.remove(name);
                }
            }
        }
    }

    pub(crate) fn wake_all(&mut self) {
        for (_, notify) in self.anyone.drain(..).chain(self.by_name.drain().flat_map(|(_, w)| w)) {
            notify.notify_one();
        }
    }

    /// No mirror for this directory on this session from now on.
    pub(crate) fn stop(&mut self, run: Run) {
        if self.run == Run::Running {
            self.run = run;
        }
        self.view.interrupt();
        self.wake_all();
    }

    /// The view went invalid while its watch seems fine: add the watch again (a one-shot
    /// watch of the session may have silenced it) and list again.
    pub(crate) fn relist(&mut self) {
        self.view.interrupt();
        self.rearm = true;
        self.wake_all();
    }

    fn child_event(&mut self, event: DirEvent) {
        let valid = self.view.is_valid();
        let name = match &event {
            DirEvent::ChildCreated(name) | DirEvent::ChildDeleted(name) => Some(name.clone()),
            DirEvent::DirCreated | DirEvent::DirDeleted => None,
        };
        let deleted = matches!(event, DirEvent::ChildDeleted(_));
        if let (true, Some(name)) = (deleted, &name) {
            self.own.remove(name);
        }
        self.view.event(event);
        match name {
            Some(name) if self.view.is_valid() == valid => {
                if deleted {
                    self.wake_name(ANY_DELETION);
                }
                self.wake_name(&name);
            }
            _ if valid && !self.view.is_valid() => {
                tracing::warn!(dir = %self.dir, "a watch event contradicts the lock directory's mirror: listing again");
                self.relist();
            }
            _ => self.wake_all(),
        }
    }
}

impl View for DirHost {
    type Data = ();

    fn event(&mut self, kind: EventKind, rel: &str) {
        let event = match (kind, rel) {
            (EventKind::Created, "") => DirEvent::DirCreated,
            (EventKind::Deleted, "") => DirEvent::DirDeleted,
            (_, "") => return,
            (_, rel) if rel.contains('/') => return,
            // A holder reads its node again (a revocation request is a data change).
            (EventKind::DataChanged, name) => return self.wake_name(name),
            (EventKind::Created, name) => DirEvent::ChildCreated(name.to_owned()),
            (EventKind::Deleted, name) => DirEvent::ChildDeleted(name.to_owned()),
        };
        self.child_event(event);
    }

    fn interrupt(&mut self) {
        if self.ablations.keep_view_on_disconnect && self.view.is_valid() {
            return;
        }
        self.view.interrupt();
        self.wake_all();
    }

    fn resync(&mut self) {
        self.rearm = false;
        self.failed = false;
        if self.run != Run::Running || (self.ablations.keep_view_on_disconnect && self.view.is_valid()) {
            return;
        }
        // Counted before it is sent: a listing counted after a waiter's create reply is
        // surely sent after it.
        self.sent += 1;
        self.view.watch_added();
        self.requests = vec![Request::snapshot(self.sent, String::new(), Op::List)];
        tracing::trace!(dir = %self.dir, number = self.sent, "the mirror lists the directory");
    }

    fn refused(&mut self) {
        tracing::info!(dir = %self.dir, "no watch on the lock directory: waiting the classic way");
        self.stop(Run::Refused);
    }

    fn reply(&mut self, request: &Request, reply: Reply<()>) {
        if request.generation() != self.sent || self.run != Run::Running {
            return;
        }
        let listed = match reply {
            Reply::Found { stat, children, .. } => {
                self.view.listed(children.unwrap_or_default(), stat.cversion, stat.num_children)
            }
            Reply::Missing => self.view.listed_missing(),
            Reply::Denied => {
                tracing::info!(dir = %self.dir, "the lock directory cannot be listed: waiting the classic way");
                return self.stop(Run::Refused);
            }
            Reply::Failed => {
                // A lost connection (its events say when it is back), or a server that
                // refused for now (`Throttled`, `SessionMoved`): list again after a pause.
                self.view.interrupt();
                self.failed = true;
                return self.wake_all();
            }
        };
        tracing::trace!(dir = %self.dir, number = self.sent, ?listed, "the mirror's listing is in");
        match listed {
            Listed::Valid => {
                self.listed = self.sent;
                // A deletion missed while disconnected leaves its name in `own` for good: once
                // the names there far outnumber the directory's children, those gone go. (Not
                // on every listing: a create answered after the listing is not in it yet.)
                if self.own.len() > 2 * self.view.len() + CROWDED {
                    let view = &self.view;
                    self.own.retain(|name| view.contains(name));
                }
            }
            Listed::Stale => {}
            Listed::Again => self.failed = true,
            Listed::Unusable => {
                tracing::warn!(dir = %self.dir, "the lock directory's create count is unusable: waiting the classic way");
                return self.stop(Run::Refused);
            }
        }
        self.wake_all();
    }

    fn take_requests(&mut self) -> Vec<Request> {
        std::mem::take(&mut self.requests)
    }

    fn needs_resync(&self) -> bool {
        self.failed
    }

    fn take_rearm(&mut self) -> bool {
        std::mem::take(&mut self.rearm)
    }

    fn is_incomplete(&self) -> bool {
        self.run == Run::Running && !self.view.is_valid() && !self.view.is_listing()
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod lease_model;
