//! The mirror against a model server: random histories of writes, reads answered in session
//! order, events and replies arriving in wire order but consumed in any order the driver may
//! consume them (a reply waits until the events before it are applied), disconnections that
//! lose events and fail reads, and re-added watches. After the history ends the mirror must
//! equal the server, and the changes it emitted must replay to what it holds.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::sync::Arc;

use zookeeper_client::Stat;

use super::state::{Change, EventKind, Mirror, Op, Reads, Reply, Request, Scope, Status};
use super::tree::{self, Item};

/// A small xorshift generator: the histories are reproducible from their seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct ServerNode {
    czxid: i64,
    mzxid: i64,
    version: i32,
    data: u32,
}

fn stat_of(node: &ServerNode) -> Stat {
    Stat {
        czxid: node.czxid,
        mzxid: node.mzxid,
        pzxid: node.czxid,
        ctime: 0,
        mtime: 0,
        version: node.version,
        cversion: 0,
        aversion: 0,
        ephemeral_owner: 0,
        data_length: 4,
        num_children: 0,
    }
}

/// One request as the server sees it.
#[derive(Debug, Clone, Copy)]
enum ServerOp {
    GetData,
    Exists,
    List,
}

#[derive(Debug, Clone)]
enum ServerReply {
    Data(Option<(Stat, u32)>),
    Children(Option<(Stat, Vec<String>)>),
    Failed,
}

#[derive(Debug, Clone)]
enum Msg {
    Event(EventKind, String),
    Interrupted,
    Resync,
    Reply { id: usize, part: usize, reply: ServerReply },
}

const NAMES: [&str; 3] = ["a", "b", "c"];

struct Server {
    nodes: BTreeMap<String, ServerNode>,
    zxid: i64,
    connected: bool,
    watching: bool,
    queue: VecDeque<(usize, usize, String, ServerOp)>,
    wire: Vec<Msg>,
    /// The node set after each wire message.
    states: Vec<BTreeSet<String>>,
}

impl Server {
    fn push(&mut self, msg: Msg) {
        self.wire.push(msg);
        self.states.push(self.nodes.keys().cloned().collect());
    }

    fn all_paths() -> Vec<String> {
        let mut paths = vec![String::new()];
        for a in NAMES {
            paths.push(a.to_owned());
            for b in NAMES {
                paths.push(format!("{a}/{b}"));
                for c in NAMES {
                    paths.push(format!("{a}/{b}/{c}"));
                }
            }
        }
        paths
    }

    fn has_children(&self, rel: &str) -> bool {
        let prefix = if rel.is_empty() { String::new() } else { format!("{rel}/") };
        self.nodes.keys().any(|k| k != rel && k.starts_with(&prefix) && (!rel.is_empty() || !k.is_empty()))
    }

    fn child_count(&self, rel: &str) -> i32 {
        self.nodes.keys().filter(|k| !k.is_empty() && *k != rel && tree::parent(k) == Some(rel)).count() as i32
    }

    fn write(&mut self, rng: &mut Rng) {
        let paths = Self::all_paths();
        let path = paths[rng.below(paths.len())].clone();
        self.zxid += 1;
        let zxid = self.zxid;
        let has_children = self.has_children(&path);
        let kind = if let Some(node) = self.nodes.get_mut(&path) {
            if rng.chance(50) || has_children {
                node.mzxid = zxid;
                node.version += 1;
                node.data = rng.next() as u32;
                EventKind::DataChanged
            } else {
                self.nodes.remove(&path);
                EventKind::Deleted
            }
        } else {
            let parent_ok = tree::parent(&path).map_or(true, |p| self.nodes.contains_key(p));
            if !parent_ok {
                return;
            }
            self.nodes
                .insert(path.clone(), ServerNode { czxid: zxid, mzxid: zxid, version: 0, data: rng.next() as u32 });
            EventKind::Created
        };
        if self.watching {
            self.push(Msg::Event(kind, path));
        }
    }

    fn serve_one(&mut self) {
        let Some((id, part, path, op)) = self.queue.pop_front() else { return };
        let reply = if !self.connected {
            ServerReply::Failed
        } else {
            match op {
                ServerOp::GetData => {
                    let children = self.child_count(&path);
                    ServerReply::Data(
                        self.nodes.get(&path).map(|n| (Stat { num_children: children, ..stat_of(n) }, n.data)),
                    )
                }
                ServerOp::Exists => ServerReply::Data(self.nodes.get(&path).map(|n| (stat_of(n), 0))),
                ServerOp::List => ServerReply::Children(self.nodes.get(&path).map(|n| {
                    let prefix = if path.is_empty() { String::new() } else { format!("{path}/") };
                    let names = self
                        .nodes
                        .keys()
                        .filter(|k| !k.is_empty() && *k != &path && tree::parent(k) == Some(path.as_str()))
                        .map(|k| k[prefix.len()..].to_owned())
                        .collect();
                    (stat_of(n), names)
                })),
            }
        };
        self.push(Msg::Reply { id, part, reply });
    }

    fn disconnect(&mut self) {
        self.connected = false;
        self.watching = false;
        self.push(Msg::Interrupted);
        while !self.queue.is_empty() {
            self.serve_one();
        }
    }

    fn reconnect(&mut self) {
        self.connected = true;
        self.watching = true;
        self.push(Msg::Resync);
    }
}

/// A read the client sent: the mirror's request and the server replies gathered so far.
struct Pending {
    request: Request,
    parts: Vec<Option<(usize, ServerReply)>>,
}

struct Client {
    mirror: Mirror<u32>,
    reads: Reads,
    /// Next wire position not yet consumed from the event side.
    events: VecDeque<(usize, Msg)>,
    pending: HashMap<usize, Pending>,
    next_id: usize,
    /// The changes emitted, replayed.
    view: BTreeMap<String, Item<u32>>,
    applied_position: usize,
}

impl Client {
    fn send(&mut self, server: &mut Server) {
        for request in self.mirror.take_requests() {
            let ops: Vec<ServerOp> = match (request.op, self.reads) {
                (Op::Read, Reads::Data) => vec![ServerOp::GetData],
                (Op::Read, _) => vec![ServerOp::Exists],
                (Op::Load, Reads::Data) => vec![ServerOp::GetData, ServerOp::List],
                (Op::Load | Op::List, _) => vec![ServerOp::List],
            };
            let id = self.next_id;
            self.next_id += 1;
            for (part, op) in ops.iter().enumerate() {
                server.queue.push_back((id, part, request.path.clone(), *op));
            }
            self.pending.insert(id, Pending { request, parts: vec![None; ops.len()] });
            if !server.connected {
                while !server.queue.is_empty() {
                    server.serve_one();
                }
            }
        }
    }

    fn record(&mut self) {
        for change in self.mirror.take_changes() {
            match change {
                Change::Created { path, new } => {
                    assert!(self.view.insert(path.clone(), new).is_none(), "Created for present {path:?}");
                }
                Change::Changed { path, old, new } => {
                    let held = self.view.get(&path).unwrap_or_else(|| panic!("Changed for absent {path:?}"));
                    // The child counters of a held stat are refreshed without a change.
                    let key = |s: &Stat| (s.czxid, s.mzxid, s.version);
                    assert_eq!(key(&held.stat), key(&old.stat), "Changed's old is what was held at {path:?}");
                    assert!(
                        (new.stat.czxid, new.stat.mzxid) > (old.stat.czxid, old.stat.mzxid),
                        "a change goes forward at {path:?}"
                    );
                    self.view.insert(path, new);
                }
                Change::Deleted { path, old } => {
                    let held = self.view.remove(&path).unwrap_or_else(|| panic!("Deleted for absent {path:?}"));
                    assert_eq!((held.stat.czxid, held.stat.mzxid), (old.stat.czxid, old.stat.mzxid));
                }
            }
        }
    }

    fn apply_msg(&mut self, position: usize, msg: Msg) {
        self.applied_position = self.applied_position.max(position);
        match msg {
            Msg::Event(kind, path) => self.mirror.event(kind, &path),
            Msg::Interrupted => self.mirror.interrupt(),
            Msg::Resync => self.mirror.resync(),
            Msg::Reply { .. } => unreachable!("replies are not events"),
        }
        self.record();
    }

    /// Takes what arrived up to `arrived` off the wire into the event queue and the pending reads.
    fn receive(&mut self, server: &Server, from: &mut usize, arrived: usize) {
        while *from < arrived {
            let position = *from;
            match server.wire[position].clone() {
                Msg::Reply { id, part, reply } => {
                    if let Some(pending) = self.pending.get_mut(&id) {
                        pending.parts[part] = Some((position, reply));
                    }
                }
                other => self.events.push_back((position, other)),
            }
            *from += 1;
        }
    }

    fn ready(&self) -> Vec<usize> {
        let mut ready: Vec<usize> =
            self.pending.iter().filter(|(_, p)| p.parts.iter().all(Option::is_some)).map(|(id, _)| *id).collect();
        ready.sort_unstable();
        ready
    }

    fn apply_reply(&mut self, id: usize) {
        let Some(pending) = self.pending.remove(&id) else { return };
        // What the driver does: every event that arrived first is applied before the reply.
        while let Some((position, msg)) = self.events.pop_front() {
            self.apply_msg(position, msg);
        }
        let parts: Vec<(usize, ServerReply)> = pending.parts.into_iter().flatten().collect();
        for (position, _) in &parts {
            self.applied_position = self.applied_position.max(*position);
        }
        let replies: Vec<ServerReply> = parts.into_iter().map(|(_, r)| r).collect();
        let reply = combine(pending.request.op, self.reads, &replies);
        self.mirror.reply(&pending.request, reply);
        self.record();
    }
}

fn combine(op: Op, reads: Reads, parts: &[ServerReply]) -> Reply<u32> {
    if parts.iter().any(|p| matches!(p, ServerReply::Failed)) {
        return Reply::Failed;
    }
    match (op, reads, parts) {
        (Op::Read, _, [ServerReply::Data(found)]) => match found {
            Some((stat, data)) => {
                Reply::Found { stat: *stat, data: (reads == Reads::Data).then(|| Arc::new(*data)), children: None }
            }
            None => Reply::Missing,
        },
        // As the driver: the listing counts only when the read found children (a node read
        // with none is not listed; its later children come as events).
        (Op::Load, Reads::Data, [ServerReply::Data(found), ServerReply::Children(children)]) => match found {
            Some((stat, data)) => Reply::Found {
                stat: *stat,
                data: Some(Arc::new(*data)),
                children: Some(match stat.num_children {
                    0 => Vec::new(),
                    _ => children.as_ref().map(|(_, names)| names.clone()).unwrap_or_default(),
                }),
            },
            None => Reply::Missing,
        },
        (_, _, [ServerReply::Children(listed)]) => match listed {
            Some((stat, names)) => Reply::Found { stat: *stat, data: None, children: Some(names.clone()) },
            None => Reply::Missing,
        },
        other => panic!("unexpected reply shape {other:?}"),
    }
}

fn in_scope(scope: Scope, rel: &str) -> bool {
    match scope {
        Scope::Node => rel.is_empty(),
        Scope::Children => tree::depth(rel) == 1,
        Scope::Tree => true,
    }
}

/// Runs one random history; panics (with the seed in the message) on a wrong result.
fn run_history(seed: u64, scope: Scope, reads: Reads, gaps: bool) {
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let mut server = Server {
        nodes: BTreeMap::new(),
        zxid: 0,
        connected: true,
        watching: true,
        queue: VecDeque::new(),
        wire: Vec::new(),
        states: Vec::new(),
    };
    // A starting tree (some of it present before the watch).
    server.watching = false;
    for _ in 0..rng.below(30) {
        server.write(&mut rng);
    }
    server.watching = true;
    let mut client = Client {
        mirror: Mirror::new(scope),
        reads,
        events: VecDeque::new(),
        pending: HashMap::new(),
        next_id: 0,
        view: BTreeMap::new(),
        applied_position: 0,
    };
    server.push(Msg::Resync);
    let mut received = 0;
    let mut arrived = 0;
    let steps = 200 + rng.below(400);
    for step in 0..steps {
        let writing = step < steps - 50;
        match rng.below(100) {
            0..=24 if writing => server.write(&mut rng),
            25..=44 => server.serve_one(),
            45..=59 => arrived = (arrived + 1 + rng.below(3)).min(server.wire.len()),
            60..=74 => {
                client.receive(&server, &mut received, arrived);
                if let Some((position, msg)) = client.events.pop_front() {
                    client.apply_msg(position, msg);
                }
            }
            75..=94 => {
                client.receive(&server, &mut received, arrived);
                let ready = client.ready();
                if !ready.is_empty() {
                    let id = ready[rng.below(ready.len())];
                    client.apply_reply(id);
                }
            }
            95..=96 if gaps && writing && server.connected => server.disconnect(),
            97..=98 if gaps && !server.connected => server.reconnect(),
            _ => {}
        }
        client.send(&mut server);
    }
    if !server.connected {
        server.reconnect();
    }
    // Quiesce: serve, deliver and consume everything; resync once more if a read failed
    // without a resync after it (the driver does that after a pause).
    for _ in 0..10_000 {
        client.send(&mut server);
        server.serve_one();
        arrived = server.wire.len();
        client.receive(&server, &mut received, arrived);
        if let Some((position, msg)) = client.events.pop_front() {
            client.apply_msg(position, msg);
            continue;
        }
        if let Some(&id) = client.ready().first() {
            client.apply_reply(id);
            continue;
        }
        if server.queue.is_empty() && client.pending.is_empty() && received == server.wire.len() {
            if client.mirror.needs_resync() || client.mirror.status() != Status::Complete {
                client.mirror.resync();
                continue;
            }
            break;
        }
    }
    assert_eq!(client.mirror.status(), Status::Complete, "seed {seed}: the mirror completes");
    let truth: BTreeMap<&String, (i64, i64, i32, Option<u32>)> = server
        .nodes
        .iter()
        .filter(|(p, _)| in_scope(scope, p))
        .map(|(p, n)| (p, (n.czxid, n.mzxid, n.version, (reads == Reads::Data).then_some(n.data))))
        .collect();
    let held_tree: BTreeMap<String, (i64, i64, i32, Option<u32>)> = client
        .mirror
        .tree()
        .entries()
        .into_iter()
        .map(|(p, e)| (p, (e.item.stat.czxid, e.item.stat.mzxid, e.item.stat.version, e.item.data.as_deref().copied())))
        .collect();
    let held: BTreeMap<&String, _> = held_tree.iter().collect();
    let truth: BTreeMap<&String, _> = truth.iter().map(|(p, v)| (*p, v)).collect();
    assert_eq!(held, truth, "seed {seed}: {scope:?} {reads:?} mirror after the history");
    let replayed: BTreeSet<&String> = client.view.keys().collect();
    let held: BTreeSet<&String> = held_tree.keys().collect();
    assert_eq!(replayed, held, "seed {seed}: the emitted changes replay to what the mirror holds");
    assert_eq!(client.mirror.tree().len(), held_tree.len());
}

#[test]
fn histories_without_gaps_end_exact() {
    for seed in 0..300 {
        for scope in [Scope::Tree, Scope::Children, Scope::Node] {
            for reads in [Reads::Data, Reads::Stat] {
                run_history(seed, scope, reads, false);
            }
        }
    }
}

#[test]
fn histories_with_gaps_converge_after_resync() {
    for seed in 1000..1400 {
        for scope in [Scope::Tree, Scope::Children, Scope::Node] {
            for reads in [Reads::Data, Reads::Stat] {
                run_history(seed, scope, reads, true);
            }
        }
    }
}

/// R1 on a scripted history: an event that arrives before the listing's reply, and is not in
/// the listing, is applied on top of it.
#[test]
fn an_event_before_the_listing_reply_is_replayed_on_top() {
    let node = |czxid| stat_of(&ServerNode { czxid, mzxid: czxid, version: 0, data: 0 });
    let mut mirror: Mirror<u32> = Mirror::new(Scope::Children);
    mirror.resync();
    let list = mirror.take_requests().pop().expect("the listing");
    // The server lists {x} and then y is created; y's event is applied before the reply.
    mirror.event(EventKind::Created, "y");
    mirror.reply(&list, Reply::Found { stat: node(1), data: None, children: Some(vec!["x".into()]) });
    for request in mirror.take_requests() {
        let stat = if request.path == "x" { node(2) } else { node(3) };
        mirror.reply(&request, Reply::Found { stat, data: None, children: None });
    }
    assert_eq!(mirror.status(), Status::Complete);
    let names: Vec<String> = mirror.tree().entries().into_iter().map(|(p, _)| p).collect();
    assert_eq!(names, ["x", "y"]);
    // And an event deleting a listed name before the reply keeps it out.
    let mut mirror: Mirror<u32> = Mirror::new(Scope::Children);
    mirror.resync();
    let list = mirror.take_requests().pop().expect("the listing");
    mirror.event(EventKind::Deleted, "x");
    mirror.reply(&list, Reply::Found { stat: node(1), data: None, children: Some(vec!["x".into()]) });
    assert!(mirror.take_requests().is_empty(), "a name deleted after the listing was sent is not read");
    assert_eq!(mirror.status(), Status::Complete);
    assert!(mirror.tree().entries().is_empty(), "a name deleted after the listing was sent stays out");
}

/// After a gap, a resync emits the differences against what was held: a deleted node, a
/// changed one, a new one; an unchanged one emits nothing.
#[test]
fn a_resync_emits_the_differences() {
    let node = |czxid, mzxid, version| stat_of(&ServerNode { czxid, mzxid, version, data: 0 });
    let mut mirror: Mirror<u32> = Mirror::new(Scope::Children);
    mirror.resync();
    let list = mirror.take_requests().pop().expect("the listing");
    mirror.reply(&list, Reply::Found { stat: node(1, 1, 0), data: None, children: Some(vec!["a".into(), "b".into()]) });
    for request in mirror.take_requests() {
        let stat = if request.path == "a" { node(2, 2, 0) } else { node(3, 3, 0) };
        mirror.reply(&request, Reply::Found { stat, data: None, children: None });
    }
    assert_eq!(mirror.status(), Status::Complete);
    assert_eq!(mirror.take_changes().len(), 2);
    mirror.interrupt();
    assert_eq!(mirror.status(), Status::Incomplete);
    // Meanwhile on the server: a changed, b deleted, c created.
    mirror.resync();
    let list = mirror.take_requests().pop().expect("the listing");
    mirror.reply(&list, Reply::Found { stat: node(1, 1, 0), data: None, children: Some(vec!["a".into(), "c".into()]) });
    for request in mirror.take_requests() {
        let stat = if request.path == "a" { node(2, 5, 1) } else { node(6, 6, 0) };
        mirror.reply(&request, Reply::Found { stat, data: None, children: None });
    }
    assert_eq!(mirror.status(), Status::Complete);
    let changes: Vec<String> = mirror
        .take_changes()
        .into_iter()
        .map(|c| match c {
            Change::Created { path, .. } => format!("+{path}"),
            Change::Changed { path, .. } => format!("~{path}"),
            Change::Deleted { path, .. } => format!("-{path}"),
        })
        .collect();
    assert_eq!(changes, ["~a", "+c", "-b"]);
}

/// A node changed again and again: the change that comes while its read is out sends a second
/// read at once; later changes share the two, and the next reply of the node sends the one
/// read they are owed. Never more reads than events, never more than two out.
#[test]
fn a_node_changed_again_and_again_has_at_most_two_reads_out() {
    let node = |mzxid, version| stat_of(&ServerNode { czxid: 1, mzxid, version, data: 0 });
    let mut mirror: Mirror<u32> = Mirror::new(Scope::Node);
    mirror.resync();
    let load = mirror.take_requests().pop().expect("the load");
    mirror.reply(&load, Reply::Found { stat: node(1, 0), data: Some(Arc::new(0)), children: None });
    assert_eq!(mirror.status(), Status::Complete);
    let found = |version: i32| Reply::Found {
        stat: node(1 + version as i64, version),
        data: Some(Arc::new(0)),
        children: None,
    };

    mirror.event(EventKind::DataChanged, "");
    let first = mirror.take_requests();
    assert_eq!(first.len(), 1, "the first change's read");
    mirror.event(EventKind::DataChanged, "");
    let second = mirror.take_requests();
    assert_eq!(second.len(), 1, "the change while one read is out sends a second at once");
    mirror.event(EventKind::DataChanged, "");
    mirror.event(EventKind::DataChanged, "");
    assert!(mirror.take_requests().is_empty(), "with two out, later changes share them");

    // The first reply (version 1) owes the two changes since the second read was sent one read.
    mirror.reply(&first[0], found(1));
    let third = mirror.take_requests();
    assert_eq!(third.len(), 1, "the read owed to the changes that found two out");
    mirror.event(EventKind::DataChanged, "");
    assert!(mirror.take_requests().is_empty(), "two out again");
    mirror.reply(&second[0], found(2));
    let fourth = mirror.take_requests();
    assert_eq!(fourth.len(), 1, "the read owed to the fifth change");
    mirror.reply(&third[0], found(4));
    assert!(mirror.take_requests().is_empty(), "nothing owed");
    mirror.reply(&fourth[0], found(5));
    assert!(mirror.take_requests().is_empty());
    let versions: Vec<i32> = mirror
        .take_changes()
        .into_iter()
        .filter_map(|c| match c {
            Change::Changed { new, .. } => Some(new.stat.version),
            _ => None,
        })
        .collect();
    assert_eq!(versions, [1, 2, 4, 5], "each reply that shows a later version, in order");

    // A deletion while reads are out: their replies are dropped, so a create after it reads at
    // once (and the dropped replies change nothing).
    mirror.event(EventKind::DataChanged, "");
    mirror.event(EventKind::DataChanged, "");
    let out = mirror.take_requests();
    assert_eq!(out.len(), 2);
    mirror.event(EventKind::Deleted, "");
    mirror.event(EventKind::Created, "");
    let after = mirror.take_requests();
    assert_eq!(after.len(), 1, "a create after a deletion reads at once");
    // A change while the create's read is out sends a second read: the two dropped replies
    // before it count for nothing (they used to be taken off the new reads' count, which let
    // more and more reads out after each deletion).
    mirror.event(EventKind::DataChanged, "");
    let second_after = mirror.take_requests();
    assert_eq!(second_after.len(), 1, "the change while the create's read is out");
    for request in &out {
        mirror.reply(request, found(9));
    }
    assert!(mirror.take_requests().is_empty());
    mirror.event(EventKind::DataChanged, "");
    assert!(mirror.take_requests().is_empty(), "two reads of the created node out: the change shares them");
    let recreated = stat_of(&ServerNode { czxid: 20, mzxid: 20, version: 0, data: 0 });
    mirror.reply(&after[0], Reply::Found { stat: recreated, data: Some(Arc::new(0)), children: None });
    assert_eq!(mirror.take_requests().len(), 1, "the read owed to the last change");
    let tail: Vec<&str> = mirror
        .take_changes()
        .iter()
        .map(|c| match c {
            Change::Created { .. } => "created",
            Change::Changed { .. } => "changed",
            Change::Deleted { .. } => "deleted",
        })
        .collect();
    assert_eq!(tail, ["deleted", "created"]);
}
