//! A persistent watch emulated with one-shot watches, for a server that has no `addWatch`
//! (ZooKeeper 3.5, or a 3.6+ server configured with `WatchManagerOptimized`): the way
//! Curator's `CuratorCacheBridge` falls back to a `TreeCache` there.
//!
//! Every node of the watched subtree, down to the depth asked for, holds a data watch (an
//! `exists` with a watch: data changes and deletion) and, above that depth, a children watch
//! (a `getChildren` with a watch: children created and deleted). A fired watch is set again by
//! the read that follows it, and what that read shows is reported as the events a persistent
//! watch would have sent:
//! - a child found in a listing that the last listing did not hold: `NodeCreated` (once its
//!   own watches are set), then the same for each of its children;
//! - a data watch fired for a change: `NodeDataChanged` once the watch is set again (and only
//!   if the node's `mzxid` moved);
//! - a data watch fired for a deletion, or a child gone from a listing: `NodeDeleted`.
//!
//! Each event is reported after the read that set the node's watch again, so a read that its
//! owner sends after the event sees at least what that read saw, and every later change fires
//! a watch: the owner's copy converges. What the emulation cannot give is every intermediate
//! state (two quick writes may be one `NodeDataChanged`), which is why the public
//! `Framework::watch` refuses to emulate and the caches, which keep the latest state, may.
//!
//! Breaks: zookeeper-client sets one-shot watches again after a reconnect (with the last zxid
//! seen, so a change made while disconnected fires at once), so a reconnect needs nothing. A
//! read that fails (its watch then is not set) makes the emulation read everything again
//! once connected (a walk, reporting what differs). A new session has none of the watches:
//! the emulation says `Interrupted`, sets them all again on the new session, and says
//! `Resync(NewSession)` once done (its owner then reads everything itself). A session that
//! moves to another client (after a reconfiguration) keeps its watches on the client it left,
//! which hears nothing more: the emulation does the same as for a new session through the new
//! client, ending with `Resync(Reconnected)`. The first walk ends with `Resync(None)`.
//!
//! Cost: two reads per node to set the watches (plus the owner's own load), then one read
//! per change; every node costs two watches on the server.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;

use futures::stream::FuturesUnordered;
use futures::{FutureExt, StreamExt};
use tokio::sync::watch as latest;
use tokio::time::Instant;
use zookeeper_client::{Client, EventType, OneshotWatcher, Stat, WatchedEvent};

use super::session::{ResyncReason, WatchItem, PAUSE};
use crate::error::{is_zk_session_lost, ZkError};
use crate::framework::metrics::Op;
use crate::framework::{Framework, Session, StateSnapshot, WeakFramework};
use crate::retry::RetryPolicy;

type Boxed<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// Reads in flight at most (the rest wait their turn).
const MAX_READS: usize = 128;

/// How deep below its root an emulated watch reaches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Depth {
    /// The root alone (a persistent watch).
    Node,
    /// The root and its children (what a children cache needs of a recursive watch).
    Children,
    /// The whole subtree (a persistent recursive watch).
    Tree,
}

impl Depth {
    fn levels(self) -> usize {
        match self {
            Depth::Node => 0,
            Depth::Children => 1,
            Depth::Tree => usize::MAX,
        }
    }
}

/// What is known of a node that exists.
#[derive(Debug)]
struct Known {
    czxid: i64,
    mzxid: i64,
    /// Its children as last listed (empty below the depth).
    children: BTreeSet<String>,
}

/// The watches set (or being set) on a path, by kind.
#[derive(Debug, Default, Clone, Copy)]
struct Armed {
    data: u32,
    children: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Data,
    Children,
}

/// A watch that fired (`None`: its client is gone).
struct Fired {
    round: u64,
    path: String,
    kind: Kind,
    event: Option<WatchedEvent>,
}

/// A read's answer.
struct Answer {
    round: u64,
    path: String,
    /// Part of a walk: the node's children are read too, known or not.
    walk: bool,
    /// The read set a watch (it was counted as armed when sent).
    watched: bool,
    reply: Reply,
}

enum Reply {
    Stat(Result<(Option<Stat>, Option<OneshotWatcher>), ZkError>),
    Children(Result<(Vec<String>, Option<OneshotWatcher>), ZkError>),
}

enum Phase {
    /// Waiting for a session to set the watches on (the first, or the next after `dead`).
    Need {
        reason: Option<ResyncReason>,
    },
    /// Setting every watch; nothing is reported until it is done, then `Resync(reason)`.
    Loading {
        reason: Option<ResyncReason>,
    },
    Live,
    Over,
}

/// The emulated watch (see the module docs).
pub(crate) struct Emulated {
    weak: WeakFramework,
    root: String,
    depth: Depth,
    states: latest::Receiver<StateSnapshot>,
    session: Option<Session>,
    epoch: u64,
    /// The epoch of the session that ended; the next walk waits for another.
    dead: Option<u64>,
    /// Which walk the watches and reads out belong to: a new one begins with every new
    /// session, and when the session moves to another client.
    round: u64,
    nodes: BTreeMap<String, Known>,
    armed: HashMap<String, Armed>,
    watchers: FuturesUnordered<Boxed<Fired>>,
    reads: FuturesUnordered<Boxed<Answer>>,
    /// Reads to send once fewer than [`MAX_READS`] are in flight.
    waiting: VecDeque<(Kind, String, bool)>,
    out: VecDeque<WatchItem>,
    phase: Phase,
    /// A read failed: walk again at this instant, once connected.
    repair: Option<Instant>,
    attempt: u32,
}

impl std::fmt::Debug for Emulated {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Emulated")
            .field("root", &self.root)
            .field("depth", &self.depth)
            .field("epoch", &self.epoch)
            .field("nodes", &self.nodes.len())
            .finish_non_exhaustive()
    }
}

impl Emulated {
    /// An emulated watch on `root` (a full path); the first [`next`](Self::next) sets the
    /// watches on the framework's current session and says `Resync(reason)` once they are set.
    pub(crate) fn new(framework: &Framework, root: &str, depth: Depth, reason: Option<ResyncReason>) -> Emulated {
        tracing::debug!(path = root, ?depth, "watch: emulated with one-shot watches (no persistent watches here)");
        Emulated {
            weak: framework.downgrade(),
            root: root.to_owned(),
            depth,
            states: framework.state_watch(),
            session: None,
            epoch: 0,
            dead: None,
            round: 0,
            nodes: BTreeMap::new(),
            armed: HashMap::new(),
            watchers: FuturesUnordered::new(),
            reads: FuturesUnordered::new(),
            waiting: VecDeque::new(),
            out: VecDeque::new(),
            phase: Phase::Need { reason },
            repair: None,
            attempt: 0,
        }
    }

    /// The client of the session the watches are on.
    pub(crate) fn client(&self) -> Option<&Client> {
        self.session.as_ref().map(|s| &s.client)
    }

    /// The epoch of that session (0 before the first).
    pub(crate) fn epoch(&self) -> u64 {
        self.epoch
    }

    /// Counts a request in the framework's metrics.
    fn count(&self, op: Op) {
        if let Some(framework) = self.weak.upgrade() {
            framework.observer().request(op);
        }
    }

    /// Whether the watches are all set and report every change (not while their session has
    /// moved away from the client they were set through).
    pub(crate) fn is_live(&self) -> bool {
        matches!(self.phase, Phase::Live)
            && self.repair.is_none()
            && self.weak.upgrade().is_some_and(|fw| fw.epoch() == self.epoch && self.moved_to(&fw).is_none())
    }

    /// Reads everything again (reporting what differs), as after a failed read.
    pub(crate) fn rearm(&mut self) {
        if matches!(self.phase, Phase::Live) && self.repair.is_none() {
            self.repair = Some(Instant::now());
        }
    }

    /// The next item; `None` once the framework is closed or gone.
    ///
    /// # Cancel safety
    /// Cancel-safe: every wait is on a queue held here.
    pub(crate) async fn next(&mut self) -> Option<WatchItem> {
        loop {
            if let Some(item) = self.out.pop_front() {
                return Some(item);
            }
            match self.phase {
                Phase::Over => return None,
                Phase::Need { reason } => {
                    self.begin(reason).await;
                    continue;
                }
                Phase::Loading { reason } if self.quiet() && self.repair.is_none() => {
                    tracing::debug!(path = %self.root, nodes = self.nodes.len(), "watch: one-shot watches set");
                    self.phase = Phase::Live;
                    self.attempt = 0;
                    return Some(WatchItem::Resync(reason));
                }
                Phase::Loading { .. } | Phase::Live => {}
            }
            let repair_at = self.repair;
            let connected = self.states.borrow().state.is_connected();
            let quiet = self.quiet();
            // Fired watches first: zookeeper-client hands a watch its event before it hands
            // over the reply of a read the server answered after that event.
            tokio::select! {
                biased;
                Some(fired) = self.watchers.next(), if !self.watchers.is_empty() => self.fired(fired),
                Some(answer) = self.reads.next(), if !self.reads.is_empty() => self.answered(answer),
                changed = self.states.changed() => {
                    if changed.is_err() {
                        self.end();
                    } else {
                        self.state_changed();
                    }
                }
                () = tokio::time::sleep_until(repair_at.unwrap_or_else(Instant::now)),
                    if repair_at.is_some() && connected && quiet => {
                    tracing::debug!(path = %self.root, "watch: reading every node again (a read failed)");
                    self.repair = None;
                    self.walk();
                }
            }
            // A reply freed a place.
            self.pump();
        }
    }

    /// Waits for the session to set the watches on, then starts the walk.
    async fn begin(&mut self, reason: Option<ResyncReason>) {
        let Some(framework) = self.weak.upgrade() else {
            self.end();
            return;
        };
        if framework.is_closed() {
            self.end();
            return;
        }
        match framework.session() {
            Ok(session) if Some(session.epoch) != self.dead && !session.task_ended() => {
                self.epoch = session.epoch;
                self.round += 1;
                self.session = Some(session);
                self.dead = None;
                self.phase = Phase::Loading { reason };
                self.walk();
            }
            _ => {
                drop(framework);
                if self.states.changed().await.is_err() {
                    self.end();
                }
            }
        }
    }

    fn end(&mut self) {
        self.phase = Phase::Over;
        self.session = None;
        self.watchers = FuturesUnordered::new();
        self.reads = FuturesUnordered::new();
        self.waiting.clear();
    }

    fn state_changed(&mut self) {
        let snapshot = *self.states.borrow_and_update();
        let Some(framework) = self.weak.upgrade() else {
            self.end();
            return;
        };
        if framework.is_closed() {
            self.end();
        } else if snapshot.epoch != self.epoch && snapshot.epoch != 0 && self.session.is_some() {
            self.session_over();
        } else if snapshot.epoch == self.epoch && snapshot.state.is_connected() {
            if let Some(now) = self.moved_to(&framework) {
                self.moved(now);
            }
        }
    }

    /// The session serving the watches' epoch now, when it is no longer the client they
    /// were set through.
    fn moved_to(&self, framework: &Framework) -> Option<Session> {
        let own = self.session.as_ref()?;
        framework.session().ok().filter(|now| now.epoch == self.epoch && !now.same_client(own))
    }

    /// The client of the watches said their session is over (a watcher ended, a read failed
    /// with `SessionExpired`): so it is, unless the session moved to another client, which
    /// the client it left does not know (it gives the session up by itself).
    fn session_lost(&mut self) {
        let Some(framework) = self.weak.upgrade() else {
            self.end();
            return;
        };
        if let Some(now) = self.moved_to(&framework) {
            self.moved(now);
        } else if framework.session_gone(self.epoch) {
            self.session_over();
        } else {
            // The framework has not switched yet: read again once it has.
            self.failed(&ZkError::ConnectionLoss);
        }
    }

    /// The session moved to another client (its servers left the ensemble; see
    /// `Framework::session_moved`): the watches set through the old client are never heard
    /// from again, and its reads end only when it gives up. Every watch is set again through
    /// the new client, as for a new session, and the walk ends with `Resync(Reconnected)` (the
    /// session is the same).
    fn moved(&mut self, now: Session) {
        tracing::debug!(path = %self.root, epoch = self.epoch, "watch: the session of the one-shot watches moved to another client");
        self.forget();
        self.round += 1;
        self.session = Some(now);
        self.phase = Phase::Loading { reason: Some(ResyncReason::Reconnected) };
        self.walk();
    }

    /// The session of the watches ended: none of them is left.
    fn session_over(&mut self) {
        if self.session.is_none() {
            return;
        }
        tracing::debug!(path = %self.root, epoch = self.epoch, "watch: the session of the one-shot watches ended");
        self.forget();
        self.dead = Some(self.epoch);
        self.session = None;
        self.phase = Phase::Need { reason: Some(ResyncReason::NewSession) };
    }

    /// The watches and reads out are of no use any more (their client no longer serves the
    /// session): says `Interrupted` if anything was reported, and forgets them and what they
    /// showed.
    fn forget(&mut self) {
        if matches!(self.phase, Phase::Live | Phase::Loading { .. }) {
            self.out.push_back(WatchItem::Interrupted);
        }
        self.nodes.clear();
        self.armed.clear();
        self.watchers = FuturesUnordered::new();
        self.reads = FuturesUnordered::new();
        self.waiting.clear();
        self.repair = None;
    }

    /// A read failed (its watch is not set): walk again after a pause.
    fn failed(&mut self, error: &ZkError) {
        if is_zk_session_lost(error) {
            self.session_lost();
            return;
        }
        tracing::debug!(path = %self.root, %error, "watch: a read of the one-shot emulation failed");
        if self.repair.is_none() {
            let pause = PAUSE.next_delay(self.attempt, std::time::Duration::ZERO).unwrap_or_default();
            self.attempt = self.attempt.saturating_add(1);
            self.repair = Some(Instant::now() + pause);
        }
    }

    /// No read in flight or waiting.
    fn quiet(&self) -> bool {
        self.reads.is_empty() && self.waiting.is_empty()
    }

    /// How deep `path` is below the root (0 for the root).
    fn level(&self, path: &str) -> usize {
        if path == self.root {
            return 0;
        }
        let rel = if self.root == "/" { &path[1..] } else { &path[self.root.len() + 1..] };
        rel.split('/').count()
    }

    fn child(&self, parent: &str, name: &str) -> String {
        if parent == "/" {
            format!("/{name}")
        } else {
            format!("{parent}/{name}")
        }
    }

    fn emit(&mut self, kind: EventType, path: &str) {
        if matches!(self.phase, Phase::Live) {
            self.out.push_back(WatchItem::Event(WatchedEvent::new(kind, path)));
        }
    }

    /// Reads the root, and from it every node (a walk).
    fn walk(&mut self) {
        let root = self.root.clone();
        self.read_stat(&root, true);
    }

    /// Reads `path` with an `exists` (see [`send_stat`](Self::send_stat)), once a place is free.
    fn read_stat(&mut self, path: &str, walk: bool) {
        self.waiting.push_back((Kind::Data, path.to_owned(), walk));
        self.pump();
    }

    /// Lists `path` (see [`send_children`](Self::send_children)), once a place is free.
    fn read_children(&mut self, path: &str, walk: bool) {
        self.waiting.push_back((Kind::Children, path.to_owned(), walk));
        self.pump();
    }

    /// Sends the reads that wait, up to [`MAX_READS`] in flight (a large tree's walk would
    /// otherwise send two requests per node at once).
    fn pump(&mut self) {
        while self.reads.len() < MAX_READS {
            let Some((kind, path, walk)) = self.waiting.pop_front() else { break };
            match kind {
                Kind::Data => self.send_stat(&path, walk),
                Kind::Children => self.send_children(&path, walk),
            }
        }
    }

    /// Sends an `exists` on `path`, with a watch unless one is set (or being set) there.
    fn send_stat(&mut self, path: &str, walk: bool) {
        let Some(client) = self.client().cloned() else { return };
        self.count(Op::Exists);
        let armed = self.armed.entry(path.to_owned()).or_default();
        let watched = armed.data == 0;
        if watched {
            armed.data += 1;
        }
        let (round, owned) = (self.round, path.to_owned());
        let future: Boxed<Answer> = Box::pin(async move {
            let reply = if watched {
                client.check_and_watch_stat(&owned).await.map(|(stat, watcher)| (stat, Some(watcher)))
            } else {
                client.check_stat(&owned).await.map(|stat| (stat, None))
            };
            Answer { round, path: owned, walk, watched, reply: Reply::Stat(reply) }
        });
        self.send(future);
    }

    /// Sends a `getChildren` on `path`, with a watch unless one is set (or being set) there.
    fn send_children(&mut self, path: &str, walk: bool) {
        let Some(client) = self.client().cloned() else { return };
        self.count(Op::GetChildren);
        let armed = self.armed.entry(path.to_owned()).or_default();
        let watched = armed.children == 0;
        if watched {
            armed.children += 1;
        }
        let (round, owned) = (self.round, path.to_owned());
        let future: Boxed<Answer> = Box::pin(async move {
            let reply = if watched {
                client.get_and_watch_children(&owned).await.map(|(names, _, watcher)| (names, Some(watcher)))
            } else {
                client.get_children(&owned).await.map(|(names, _)| (names, None))
            };
            Answer { round, path: owned, walk, watched, reply: Reply::Children(reply) }
        });
        self.send(future);
    }

    /// Polls `future` once, which writes its request (zookeeper-client sends when called), so
    /// requests leave in the order they were made.
    fn send(&mut self, mut future: Boxed<Answer>) {
        match (&mut future).now_or_never() {
            Some(answer) => self.reads.push(Box::pin(std::future::ready(answer))),
            None => self.reads.push(future),
        }
    }

    fn keep(&mut self, path: &str, kind: Kind, watcher: OneshotWatcher) {
        let (round, path) = (self.round, path.to_owned());
        self.watchers.push(Box::pin(async move {
            // zookeeper-client may panic on a watcher whose session is gone: that ends it too.
            let event = AssertUnwindSafe(watcher.changed()).catch_unwind().await.ok();
            Fired { round, path, kind, event }
        }));
    }

    fn disarm(&mut self, path: &str, kind: Kind) {
        if let Some(armed) = self.armed.get_mut(path) {
            match kind {
                Kind::Data => armed.data = armed.data.saturating_sub(1),
                Kind::Children => armed.children = armed.children.saturating_sub(1),
            }
            if armed.data == 0 && armed.children == 0 {
                self.armed.remove(path);
            }
        }
    }

    fn fired(&mut self, fired: Fired) {
        if fired.round != self.round || self.session.is_none() {
            return;
        }
        self.disarm(&fired.path, fired.kind);
        let Some(event) = fired.event else {
            self.session_lost();
            return;
        };
        let path = fired.path;
        match (event.event_type, fired.kind) {
            (EventType::Session, _) => {
                if event.session_state.is_terminated() {
                    self.session_lost();
                } else {
                    // Not seen from zookeeper-client 0.11; a watch gone all the same.
                    self.failed(&ZkError::ConnectionLoss);
                }
            }
            (EventType::NodeDataChanged | EventType::NodeCreated, Kind::Data) => self.read_stat(&path, false),
            (EventType::NodeDeleted, Kind::Data) => {
                self.deleted(&path);
                if path == self.root {
                    // Watch for the root's return.
                    self.read_stat(&path, false);
                }
            }
            (EventType::NodeChildrenChanged, Kind::Children) if self.nodes.contains_key(&path) => {
                self.read_children(&path, false);
            }
            // A children watch fires on its node's deletion too: the data watch reports it.
            _ => {}
        }
    }

    /// `path` is gone (and with it anything known below it).
    fn deleted(&mut self, path: &str) {
        if self.nodes.remove(path).is_none() {
            return;
        }
        let below = format!("{}/", path.trim_end_matches('/'));
        let gone: Vec<String> = self
            .nodes
            .range(below.clone()..)
            .take_while(|(p, _)| p.starts_with(&below))
            .map(|(p, _)| p.clone())
            .collect();
        for p in gone {
            self.nodes.remove(&p);
        }
        self.emit(EventType::NodeDeleted, path);
    }

    fn answered(&mut self, answer: Answer) {
        if answer.round != self.round || self.session.is_none() {
            return;
        }
        let Answer { path, walk, watched, reply, .. } = answer;
        match reply {
            Reply::Stat(Err(e)) => {
                if watched {
                    self.disarm(&path, Kind::Data);
                }
                self.failed(&e);
            }
            Reply::Stat(Ok((stat, watcher))) => {
                if let Some(watcher) = watcher {
                    if stat.is_some() || path == self.root {
                        self.keep(&path, Kind::Data, watcher);
                    } else {
                        // An `exists` watch on a node that is gone: its parent's listing
                        // reports a new one.
                        drop(watcher);
                        self.disarm(&path, Kind::Data);
                    }
                }
                match stat {
                    None => self.deleted(&path),
                    Some(stat) => self.found(&path, &stat, walk),
                }
            }
            Reply::Children(Err(e)) => {
                if watched {
                    self.disarm(&path, Kind::Children);
                }
                match e {
                    // Gone since: its data watch reports it.
                    ZkError::NoNode => {}
                    // Not ours to list (its ACL grants us no READ): its children stay out, as
                    // they do on a persistent watch's load; the owner's own read of the node is
                    // refused too and reports it. Walking again would be refused for ever.
                    ZkError::NoAuth => {}
                    e => self.failed(&e),
                }
            }
            Reply::Children(Ok((names, watcher))) => {
                if let Some(watcher) = watcher {
                    self.keep(&path, Kind::Children, watcher);
                }
                self.listed(&path, names, walk);
            }
        }
    }

    /// An `exists` found `path`.
    fn found(&mut self, path: &str, stat: &Stat, walk: bool) {
        let created = match self.nodes.get_mut(path) {
            Some(known) if known.czxid == stat.czxid => {
                if known.mzxid != stat.mzxid {
                    known.mzxid = stat.mzxid;
                    self.emit(EventType::NodeDataChanged, path);
                }
                false
            }
            Some(_) => {
                // Deleted and created again in between.
                self.deleted(path);
                true
            }
            None => true,
        };
        if created {
            self.nodes
                .insert(path.to_owned(), Known { czxid: stat.czxid, mzxid: stat.mzxid, children: BTreeSet::new() });
            self.emit(EventType::NodeCreated, path);
        }
        if (created || walk) && self.level(path) < self.depth.levels() {
            self.read_children(path, walk);
        }
    }

    /// A listing of `path`: children new to it are read (all of them in a walk), children
    /// gone from it are deleted.
    fn listed(&mut self, path: &str, names: Vec<String>, walk: bool) {
        let Some(known) = self.nodes.get_mut(path) else { return };
        let names: BTreeSet<String> = names.into_iter().collect();
        let old = std::mem::replace(&mut known.children, names.clone());
        for gone in old.difference(&names) {
            let child = self.child(path, gone);
            self.deleted(&child);
        }
        for name in &names {
            let child = self.child(path, name);
            if walk || !old.contains(name) || !self.nodes.contains_key(&child) {
                self.read_stat(&child, walk);
            }
        }
    }
}
