//! The task that keeps a view current: it applies the session watch's items, sends the reads
//! the view asks for on the watch's own session (a load's or a resync's at most
//! [`Config::concurrency`] at a time, an event's as soon as the view asks), and applies their
//! replies, each only after every event that arrived before it.
//!
//! One driver for every view ([`View`]): the cache's subtree mirror and a lock directory's
//! view are two states this one loop drives, so the order of events and replies, the resync
//! after a gap, and the pause after a failed read are written once.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures::stream::FuturesUnordered;
use futures::{FutureExt, StreamExt};
use tokio::sync::{watch, Notify};
use tokio::time::Instant;
use zookeeper_client::{Client, Error as ZkError, EventType, MultiReadResult, WatchedEvent};

use super::state::{EventKind, Op, Reads, Reply, Request};
use super::view::View;
use crate::framework::metrics::{Op as Sent, Resyncs};
use crate::framework::stall::{nudge, Nudges};
use crate::framework::{BackgroundErrorKind, Framework, Observer};
use crate::watch::probe::{probe, Ablations};
use crate::watch::{SessionWatch, WatchItem};
use crate::ResyncReason;

/// Turns a node's bytes into what the mirror keeps (`None`: keep the stat only).
pub(crate) type Decode<T> = Arc<dyn Fn(&str, Vec<u8>) -> Option<T> + Send + Sync>;

/// Who holds the view: the driver changes it only through [`Host::update`], which applies
/// the change under the host's lock and then publishes what changed.
pub(crate) trait Host<V>: Send + Sync + 'static {
    fn update(&self, f: &mut dyn FnMut(&mut V));

    /// Told when the view wants something of the driver between two items (a resync asked
    /// for by a waiter): the driver then looks at [`View::take_rearm`].
    fn kick(&self) -> Option<&Notify> {
        None
    }
}

pub(crate) struct Config<T> {
    /// The root's full server path (namespace included).
    pub(crate) root: String,
    pub(crate) reads: Reads,
    pub(crate) decode: Decode<T>,
    /// A load's (or resync's) reads in flight at most.
    pub(crate) concurrency: usize,
    /// Where requests, resyncs and refused reads are reported.
    pub(crate) report: Report,
    /// The server answered a multi-read with `Unimplemented` (ZooKeeper 3.5 has no
    /// `multiRead`): reads go one by one from then on.
    pub(crate) no_multi_read: AtomicBool,
}

/// What a driver reports to its framework's metrics and background errors (without keeping
/// the framework alive).
#[derive(Debug)]
pub(crate) struct Report {
    pub(crate) observer: Arc<Observer>,
    /// The recipe whose copy this is (`cache`, `lock_mirror`), for background errors.
    pub(crate) recipe: &'static str,
    pub(crate) resyncs: Resyncs,
}

impl Report {
    fn request(&self, op: Sent) {
        self.observer.request(op);
    }

    /// The session may not read `full` (its answer was `NoAuth`): it is left out.
    fn denied(&self, full: &str) {
        let kind = BackgroundErrorKind::CacheReadRefused;
        self.observer.error(self.recipe, kind, full, crate::error::Error::ZooKeeper(ZkError::NoAuth));
    }
}

impl<T> Config<T> {
    /// Whether reads of data go together in multi-reads.
    fn batches(&self) -> bool {
        self.reads == Reads::Data && !self.no_multi_read.load(Ordering::Relaxed)
    }

    fn full_path(&self, rel: &str) -> String {
        match (self.root.as_str(), rel) {
            (root, "") => root.to_owned(),
            ("/", rel) => format!("/{rel}"),
            (root, rel) => format!("{root}/{rel}"),
        }
    }

    /// The path relative to the root, if `full` is the root or below it.
    pub(crate) fn relative<'a>(&self, full: &'a str) -> Option<&'a str> {
        if full == self.root {
            return Some("");
        }
        let rest = if self.root == "/" {
            full.strip_prefix('/')
        } else {
            full.strip_prefix(self.root.as_str())?.strip_prefix('/')
        };
        rest.filter(|r| !r.is_empty())
    }
}

/// Reads in flight (one request, or one multi-read of several); they end with their requests
/// and replies.
type InFlight<T> = Pin<Box<dyn Future<Output = Vec<Answered<T>>> + Send>>;

/// A load's reads at most in one multi-read request.
const MAX_BATCH: usize = 64;

struct Answered<T> {
    request: Request,
    reply: Reply<T>,
}

/// Pauses before a resync the source did not ask for (after a failed read).
const FIRST_PAUSE: Duration = Duration::from_millis(100);
const MAX_PAUSE: Duration = Duration::from_secs(5);

/// The reads of one driver. A load's (or resync's) reads wait in `queue` for one of
/// [`Config::concurrency`] places; an event's read goes out at once (the mirror keeps at most
/// two in flight per node, so they are bounded by the nodes held).
struct ReadQueue<T> {
    queue: VecDeque<Request>,
    in_flight: FuturesUnordered<InFlight<T>>,
    /// Of `in_flight`, how many are a load's.
    loading: usize,
}

impl<T: Send + Sync + 'static> ReadQueue<T> {
    /// Sends what waits, as far as the bound allows. With data kept, a load's reads that wait
    /// together go as multi-reads (one request carrying up to a quarter of the bound's
    /// `getData`s, so that several stay in flight): a server spends less per node on one
    /// request of many reads than on many requests.
    fn fill(&mut self, client: Option<&Client>, config: &Arc<Config<T>>) {
        let batch = (config.concurrency / 4).clamp(1, MAX_BATCH);
        while self.loading < config.concurrency && !self.queue.is_empty() {
            let room = (config.concurrency - self.loading).min(batch);
            let mut requests = Vec::new();
            while requests.len() < room {
                let Some(request) = self.queue.pop_front() else { break };
                let batched = config.batches() && matches!(request.op, Op::Read | Op::Load);
                if !batched {
                    if requests.is_empty() {
                        requests.push(request);
                    } else {
                        self.queue.push_front(request);
                    }
                    break;
                }
                requests.push(request);
            }
            self.loading += requests.len();
            self.send(client, config, requests);
        }
    }

    /// Queues a load's reads; sends an event's at once. With data kept, the reads of events
    /// that arrived together go as one multi-read (up to [`MAX_BATCH`] reads each): they would
    /// leave at the same moment anyway, and the server spends less on one request of many
    /// reads than on many requests, which is what a writer at full speed competes with.
    fn route(&mut self, client: Option<&Client>, config: &Arc<Config<T>>, requests: &mut Vec<Request>) {
        let mut together = Vec::new();
        for request in requests.drain(..) {
            if request.is_snapshot() {
                self.queue.push_back(request);
            } else if config.batches() && matches!(request.op, Op::Read | Op::Load) {
                together.push(request);
            } else {
                self.in_flight.push(Box::pin(read(client, config, request).map(|answer| vec![answer])));
            }
        }
        while !together.is_empty() {
            let rest = together.split_off(together.len().min(MAX_BATCH));
            let batch = std::mem::replace(&mut together, rest);
            self.send(client, config, batch);
        }
    }

    /// Sends `requests` at once: one read alone, several as one multi-read.
    fn send(&mut self, client: Option<&Client>, config: &Arc<Config<T>>, mut requests: Vec<Request>) {
        if requests.len() == 1 {
            let request = requests.pop().expect("one request");
            self.in_flight.push(Box::pin(read(client, config, request).map(|answer| vec![answer])));
        } else {
            self.in_flight.push(read_many(client, config, requests));
        }
    }

    /// A new generation: the reads asked for before it, waiting or out, are of no use (the
    /// view drops their replies). Those out are let go too: on a client the session has moved
    /// away from, they would hold a load's places until that client gives the session up.
    fn restart(&mut self) {
        self.queue.clear();
        self.in_flight = FuturesUnordered::new();
        self.loading = 0;
    }

    fn answered(&mut self, answer: &Answered<T>) {
        if answer.request.is_snapshot() {
            self.loading -= 1;
        }
    }
}

/// What the session watch said, for the view.
enum Item {
    Event(EventKind, String),
    Interrupted,
    /// The watch is being added: the view reads again (its reads go behind the add).
    Adding,
    /// The watch is in place (no read needed when `Adding` came first); `after_break`: added
    /// again after its connection broke or on a new session.
    Added {
        read: bool,
        after_break: bool,
    },
    Refused,
}

/// Runs until the watch ends (the framework closed, the watch's session ended, the server
/// refused it) or `stop` turns true; the view is told `interrupt` at the end.
///
/// When replies and items are both ready, replies go first, each batch of them only after
/// every item that had arrived by then (the server sent those before the replies); what
/// arrived together is applied under one lock of the host.
pub(crate) async fn run<V, H>(
    framework: Framework,
    host: Arc<H>,
    mut watch: SessionWatch,
    config: Config<V::Data>,
    mut stop: watch::Receiver<bool>,
) where
    V: View,
    H: Host<V>,
{
    let config = Arc::new(config);
    let ablations = probe().ablations(&config.root);
    let mut reads = ReadQueue { queue: VecDeque::new(), in_flight: FuturesUnordered::new(), loading: 0 };
    let mut state = framework.state_watch();
    let mut nudges = Nudges::new(framework.config().session_timeout);
    drop(framework);
    // A server may hold a reply back (see `framework::stall`): while reads are out, the last
    // reply (or nudge, or the moment reads went out) is `progress`. The timer is moved only
    // when it fires, so a busy cache pays a clock read per reply, not a timer per read.
    let mut progress = Instant::now();
    let mut idle = true;
    let nudge_timer = tokio::time::sleep_until(nudges.due_at(progress));
    tokio::pin!(nudge_timer);
    let mut pause = FIRST_PAUSE;
    // The watch said `Interrupted` and has not said `Resync` since: it will.
    let mut watch_gap = false;
    // The nodes whose read was refused, reported once (not again at every resync or event)
    // until a read of one is answered (a failed read tells nothing).
    let mut refused = std::collections::HashSet::new();
    // When to resync without the watch asking: a read failed, or the framework was
    // suspended and is back while the watch saw no gap (it held).
    let mut resync_at: Option<Instant> = None;
    let mut late = LateSuspension::default();
    let mut items: Vec<Item> = Vec::new();
    let mut answers: Vec<Answered<V::Data>> = Vec::new();
    let mut requests: Vec<Request> = Vec::new();
    let no_kick = Notify::new();
    let kick = host.kick().unwrap_or(&no_kick);
    // An `Adding` came, and the `Resync` that confirms it not yet: the view read behind it.
    let mut adding = false;
    // The first load happened: a new generation after it is a resync.
    let mut loaded = false;
    loop {
        let client = watch.client().cloned();
        reads.fill(client.as_ref(), &config);
        let connected = state.borrow().state.is_connected();
        let wake = resync_at.unwrap_or_else(Instant::now);
        if std::mem::replace(&mut idle, reads.in_flight.is_empty()) && !idle {
            progress = Instant::now();
            nudges.reset();
            if nudge_timer.deadline() <= progress {
                nudge_timer.as_mut().reset(nudges.due_at(progress));
            }
        }
        let mut ended = false;
        tokio::select! {
            biased;
            changed = stop.changed() => {
                if changed.is_err() || *stop.borrow() {
                    return;
                }
            }
            Some(first) = reads.in_flight.next(), if !reads.in_flight.is_empty() => {
                progress = Instant::now();
                nudges.reset();
                answers.extend(first);
                while let Some(Some(more)) = reads.in_flight.next().now_or_never() {
                    answers.extend(more);
                }
                // Every event the server sent before these replies is queued on the watch
                // now: they are applied first.
                ended = drain(&mut watch, &config, &mut items, &mut adding);
            }
            item = watch.next() => {
                match item {
                    Some(item) => push(&config, item, &mut items, &mut adding),
                    None => ended = true,
                }
                ended = ended || drain(&mut watch, &config, &mut items, &mut adding);
            }
            changed = state.changed() => {
                if changed.is_err() {
                    return;
                }
                if late.framework_state(state.borrow().state.is_connected()) {
                    host.update(&mut |v| v.interrupt());
                }
            }
            () = kick.notified() => {}
            () = &mut nudge_timer, if !idle => {
                if Instant::now() >= nudges.due_at(progress) {
                    if let Some(client) = &client {
                        nudge(client, &config.report.observer);
                    }
                    nudges.sent();
                    progress = Instant::now();
                }
                nudge_timer.as_mut().reset(nudges.due_at(progress));
            }
            _ = tokio::time::sleep_until(wake), if resync_at.is_some() && connected && reads.in_flight.is_empty() => {
                tracing::debug!(root = %config.root, "mirror: reading again (a read failed, or the framework was suspended)");
                pause = (pause * 2).min(MAX_PAUSE);
                resync_at = None;
                config.report.resyncs.resync();
                reads.restart();
                host.update(&mut |v| {
                    v.resync();
                    requests.extend(v.take_requests());
                });
            }
        }
        if items.iter().any(|item| matches!(item, Item::Event(..))) {
            delay(&ablations, &config.root).await;
        }
        for answer in &answers {
            reads.answered(answer);
            if matches!(answer.reply, Reply::Denied) {
                if refused.insert(answer.request.path.clone()) {
                    config.report.denied(&config.full_path(&answer.request.path));
                }
            } else if !refused.is_empty() && !matches!(answer.reply, Reply::Failed) {
                refused.remove(&answer.request.path);
            }
        }
        let framework_connected = state.borrow().state.is_connected();
        for item in &items {
            note(item, &mut watch_gap, &mut pause);
            late.watch_item(item, framework_connected);
        }
        let mut wants = false;
        let mut rearm = false;
        host.update(&mut |v| {
            for item in items.drain(..) {
                if matches!(item, Item::Adding | Item::Added { read: true, .. }) {
                    if std::mem::replace(&mut loaded, true) {
                        config.report.resyncs.resync();
                    }
                    // A new generation: the reads asked for before it are of no use.
                    reads.restart();
                    requests.clear();
                }
                apply(v, &config, item);
                requests.extend(v.take_requests());
            }
            for answer in answers.drain(..) {
                v.reply(&answer.request, answer.reply);
            }
            requests.extend(v.take_requests());
            if ended {
                v.interrupt();
            }
            rearm = v.take_rearm();
            wants = v.needs_resync() || (v.is_incomplete() && !watch_gap);
        });
        if ended {
            return;
        }
        if rearm && !watch_gap {
            // Added again on the same connection (the view suspects a silenced watch); a gap
            // under way ends with an add anyway.
            watch.rearm();
            watch_gap = true;
        }
        reads.route(watch.client(), &config, &mut requests);
        match (wants && !rearm, resync_at) {
            (true, None) => resync_at = Some(Instant::now() + pause),
            (false, Some(_)) => resync_at = None,
            _ => {}
        }
    }
}

/// A test's seam: events applied later than they arrived (see `watch/probe.rs`).
async fn delay(ablations: &Ablations, root: &str) {
    probe().events_released(root).await;
    if let Some(delay) = ablations.event_delay {
        tokio::time::sleep(delay).await;
    }
}

/// The watch's item for the view (children events carry nothing a view keeps). `adding`
/// tracks an `Adding` not confirmed yet.
fn push<T>(config: &Config<T>, item: WatchItem, items: &mut Vec<Item>, adding: &mut bool) {
    let item = match item {
        WatchItem::Event(event) => match event_kind(&event) {
            Some(kind) => Item::Event(kind, event.path),
            None => return,
        },
        WatchItem::Interrupted => Item::Interrupted,
        WatchItem::Adding => {
            *adding = true;
            Item::Adding
        }
        WatchItem::Resync(reason) => {
            tracing::debug!(root = %config.root, ?reason, "mirror: the watch is in place");
            let read = !std::mem::take(adding);
            Item::Added { read, after_break: after_break(reason) }
        }
        WatchItem::Refused(error) => {
            tracing::info!(root = %config.root, %error, "mirror: the watch was refused");
            Item::Refused
        }
    };
    items.push(item);
}

fn event_kind(event: &WatchedEvent) -> Option<EventKind> {
    match event.event_type {
        EventType::NodeCreated => Some(EventKind::Created),
        EventType::NodeDeleted => Some(EventKind::Deleted),
        EventType::NodeDataChanged => Some(EventKind::DataChanged),
        EventType::NodeChildrenChanged | EventType::Session => None,
    }
}

/// Moves every item the watch has ready into `items`; true if the watch ended.
fn drain<T>(watch: &mut SessionWatch, config: &Config<T>, items: &mut Vec<Item>, adding: &mut bool) -> bool {
    loop {
        match watch.next().now_or_never() {
            Some(Some(item)) => push(config, item, items, adding),
            Some(None) => return true,
            None => return false,
        }
    }
}

/// Whether the framework's suspension tells the view anything its watch has not.
///
/// zookeeper-client hands a connection's break to every persistent watcher before it
/// publishes the client's state, and the framework's state follows the client's; the driver
/// takes the watch's items before the framework's state. So a break the client reports is
/// known from the watch first (`Interrupted`), and the watch adds itself again on the new
/// connection (the view reads behind that add). The framework still owes its `Suspended` for
/// that break, and can pay it late: its state manager, busy, may read the client's
/// `Disconnected` and `SyncConnected` as one change, and report the flap as `Suspended` then
/// `Reconnected` once it has confirmed the connection, by which time the watch may be added
/// again and the view read. Interrupting the view then would read it all a second time after
/// the `Reconnected`.
///
/// So one suspension is skipped, and only that one: the first state the driver reads after
/// the watch said `Interrupted` while the framework read connected, when that state is not
/// connected and the watch has been added again after the break meanwhile. Every read of the
/// framework's state settles what was owed. Any other suspension interrupts the view, which
/// reads again once the framework is back: the framework's own stall detection (the watch
/// held and says nothing), a session given up, and every break under the one-shot emulation
/// (zookeeper-client tells one-shot watchers of no break, so it says no `Interrupted`).
#[derive(Debug, Default)]
struct LateSuspension {
    /// The watch said `Interrupted` while the framework read connected: a suspension is owed.
    owed: bool,
    /// And the watch was added again after that break.
    readded: bool,
}

impl LateSuspension {
    /// One of the watch's items; `framework_connected`: the framework's state as it reads now.
    fn watch_item(&mut self, item: &Item, framework_connected: bool) {
        match item {
            Item::Interrupted if framework_connected => {
                self.owed = true;
                self.readded = false;
            }
            Item::Added { after_break: true, .. } if self.owed => self.readded = true,
            _ => {}
        }
    }

    /// The framework's state changed (to a connected one or not): whether the view is to be
    /// interrupted.
    fn framework_state(&mut self, connected: bool) -> bool {
        let late = self.owed && self.readded;
        self.owed = false;
        self.readded = false;
        !connected && !late
    }
}

/// Whether a watch added for `reason` was added after a break of its connection or on a new
/// session (not again on the same connection, nor the first time).
fn after_break(reason: Option<ResyncReason>) -> bool {
    matches!(reason, Some(ResyncReason::Reconnected | ResyncReason::NewSession))
}

/// Tracks the watch's gaps: between `Interrupted` and the add, the watch will resync.
fn note(item: &Item, watch_gap: &mut bool, pause: &mut Duration) {
    match item {
        Item::Interrupted => *watch_gap = true,
        Item::Added { .. } => {
            *watch_gap = false;
            *pause = FIRST_PAUSE;
        }
        Item::Adding | Item::Event(..) | Item::Refused => {}
    }
}

/// Applies one item to the view.
fn apply<V: View>(v: &mut V, config: &Config<V::Data>, item: Item) {
    match item {
        Item::Event(kind, path) => {
            if let Some(rel) = config.relative(&path) {
                v.event(kind, rel);
            }
        }
        Item::Interrupted => v.interrupt(),
        Item::Adding | Item::Added { read: true, .. } => v.resync(),
        Item::Added { read: false, .. } => v.watch_confirmed(),
        Item::Refused => v.refused(),
    }
}

/// Sends a load's or events' reads (data kept, each a `Read` or a `Load`) as one multi-read on the current
/// session; then lists, at once, the children of each loaded node whose stat has some. The
/// server answers a multi-read's reads together, at one point between writes, so each reply
/// is as a single read's would be at that point.
fn read_many<T: Send + Sync + 'static>(
    client: Option<&Client>,
    config: &Arc<Config<T>>,
    requests: Vec<Request>,
) -> InFlight<T> {
    let failed = |requests: Vec<Request>| -> Vec<Answered<T>> {
        requests.into_iter().map(|request| Answered { request, reply: Reply::Failed }).collect()
    };
    let Some(client) = client.cloned() else {
        return Box::pin(std::future::ready(failed(requests)));
    };
    let config = Arc::clone(config);
    Box::pin(async move {
        let fulls: Vec<String> = requests.iter().map(|r| config.full_path(&r.path)).collect();
        config.report.request(Sent::MultiRead);
        let results = {
            let mut reader = client.new_multi_reader();
            match fulls.iter().try_for_each(|full| reader.add_get_data(full)) {
                Ok(()) => reader.commit().await,
                Err(e) => Err(e),
            }
        };
        let results = match results {
            Ok(results) if results.len() == requests.len() => results,
            Err(ZkError::Unimplemented) => {
                // No multiRead (ZooKeeper 3.5): these reads one by one (each sent now), and
                // every later one too.
                tracing::debug!(root = %config.root, "mirror: the server has no multiRead; reading one by one");
                config.no_multi_read.store(true, Ordering::Relaxed);
                let reads: Vec<_> = requests.into_iter().map(|request| read(Some(&client), &config, request)).collect();
                return futures::future::join_all(reads).await;
            }
            Ok(_) => return failed(requests),
            Err(e) => {
                tracing::debug!(error = %e, "mirror: a multi-read failed");
                return failed(requests);
            }
        };
        let mut answers = Vec::with_capacity(requests.len());
        let mut listings = Vec::new();
        for ((request, full), result) in requests.into_iter().zip(&fulls).zip(results) {
            let reply = match result {
                MultiReadResult::Data { data, stat } => {
                    let load = request.op == Op::Load;
                    if load && stat.num_children > 0 {
                        config.report.request(Sent::GetChildren);
                        listings.push((answers.len(), client.get_children(full)));
                    }
                    Reply::Found {
                        stat,
                        data: (config.decode)(full, data).map(Arc::new),
                        children: load.then(Vec::new),
                    }
                }
                MultiReadResult::Error { err } => failure(err),
                _ => Reply::Failed,
            };
            answers.push(Answered { request, reply });
        }
        for (index, listing) in listings {
            let answer: &mut Answered<T> = &mut answers[index];
            match listing.await {
                Ok((names, _)) => {
                    if let Reply::Found { children, .. } = &mut answer.reply {
                        *children = Some(names);
                    }
                }
                // Deleted since the read: its event is on the way.
                Err(ZkError::NoNode) => {}
                Err(e) => answer.reply = failure(e),
            }
        }
        answers
    })
}

/// Sends one read on the current session at once (the client writes a request when it is
/// called) and maps its outcome when polled.
fn read<T: Send + Sync + 'static>(
    client: Option<&Client>,
    config: &Arc<Config<T>>,
    request: Request,
) -> Pin<Box<dyn Future<Output = Answered<T>> + Send>> {
    let Some(client) = client else {
        return Box::pin(std::future::ready(Answered { request, reply: Reply::Failed }));
    };
    let full = config.full_path(&request.path);
    let config = Arc::clone(config);
    match (request.op, config.reads) {
        (Op::Read, Reads::Data) => {
            config.report.request(Sent::GetData);
            let data = client.get_data(&full);
            Box::pin(async move {
                let reply = match data.await {
                    Ok((data, stat)) => {
                        Reply::Found { stat, data: (config.decode)(&full, data).map(Arc::new), children: None }
                    }
                    Err(e) => failure(e),
                };
                Answered { request, reply }
            })
        }
        (Op::Read, Reads::Stat) => {
            config.report.request(Sent::Exists);
            let stat = client.check_stat(&full);
            Box::pin(async move {
                let reply = match stat.await {
                    Ok(Some(stat)) => Reply::Found { stat, data: None, children: None },
                    Ok(None) => Reply::Missing,
                    Err(e) => failure(e),
                };
                Answered { request, reply }
            })
        }
        // The data first; the children only if the node had any when read (children created
        // after that read come as events: the watch was in place before it).
        (Op::Load, Reads::Data) => {
            config.report.request(Sent::GetData);
            let data = client.get_data(&full);
            let client = client.clone();
            Box::pin(async move {
                let reply = match data.await {
                    Ok((data, stat)) => {
                        let data = (config.decode)(&full, data).map(Arc::new);
                        if stat.num_children == 0 {
                            Reply::Found { stat, data, children: Some(Vec::new()) }
                        } else {
                            config.report.request(Sent::GetChildren);
                            match client.get_children(&full).await {
                                Ok((children, _)) => Reply::Found { stat, data, children: Some(children) },
                                // Deleted since the read: its event is on the way.
                                Err(ZkError::NoNode) => Reply::Found { stat, data, children: Some(Vec::new()) },
                                Err(e) => failure(e),
                            }
                        }
                    }
                    Err(e) => failure(e),
                };
                Answered { request, reply }
            })
        }
        (Op::Load | Op::List, _) => {
            config.report.request(Sent::GetChildren);
            let listing = client.get_children(&full);
            Box::pin(async move {
                let reply = match listing.await {
                    Ok((children, stat)) => Reply::Found { stat, data: None, children: Some(children) },
                    Err(e) => failure(e),
                };
                Answered { request, reply }
            })
        }
    }
}

fn failure<T>(e: ZkError) -> Reply<T> {
    match e {
        ZkError::NoNode => Reply::Missing,
        ZkError::NoAuth => Reply::Denied,
        e => {
            tracing::debug!(error = %e, "mirror: a read failed");
            Reply::Failed
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{after_break, Item, LateSuspension};
    use crate::ResyncReason;

    const READDED: Item = Item::Added { read: false, after_break: true };

    /// The watch's items of a break it saw while the framework read `connected`.
    fn flap(late: &mut LateSuspension, connected: bool) {
        for item in [Item::Interrupted, Item::Adding, READDED] {
            late.watch_item(&item, connected);
        }
    }

    #[test]
    fn the_suspension_owed_for_a_break_the_watch_already_handled_is_skipped_once() {
        let mut late = LateSuspension::default();
        flap(&mut late, true);
        assert!(!late.framework_state(false), "the break the watch already handled");
        assert!(!late.framework_state(true));
        // The next suspension is news again: a stall, say.
        assert!(late.framework_state(false));
    }

    #[test]
    fn a_suspension_reported_before_the_watch_is_back_interrupts_the_view() {
        let mut late = LateSuspension::default();
        late.watch_item(&Item::Interrupted, true);
        assert!(late.framework_state(false));
        late.watch_item(&Item::Adding, false);
        late.watch_item(&READDED, false);
        assert!(!late.framework_state(true));
        assert!(late.framework_state(false), "a later stall");
    }

    #[test]
    fn an_add_after_the_framework_read_connected_again_owes_nothing() {
        // A new session: the watch waits for it, and its add comes back after the framework
        // published it (the break was paid for with `Lost`).
        let mut late = LateSuspension::default();
        late.watch_item(&Item::Interrupted, true);
        assert!(late.framework_state(false));
        assert!(!late.framework_state(true));
        late.watch_item(&Item::Adding, true);
        late.watch_item(&READDED, true);
        assert!(late.framework_state(false), "a stall later on the new session");
    }

    #[test]
    fn without_an_interrupted_no_suspension_is_skipped() {
        // The framework's own stall detection, and every break under the one-shot emulation
        // (which hears of none): the watch says nothing, or adds again without `Interrupted`.
        let mut late = LateSuspension::default();
        assert!(late.framework_state(false));
        assert!(!late.framework_state(true));
        late.watch_item(&READDED, true);
        assert!(late.framework_state(false));
        late.watch_item(&Item::Added { read: true, after_break: false }, true);
        assert!(late.framework_state(false));
    }

    #[test]
    fn an_add_on_the_same_connection_is_no_break() {
        let mut late = LateSuspension::default();
        late.watch_item(&Item::Interrupted, true);
        late.watch_item(&Item::Added { read: false, after_break: false }, true);
        assert!(late.framework_state(false));
        assert!(!after_break(None));
        assert!(!after_break(Some(ResyncReason::Rearmed)));
        assert!(after_break(Some(ResyncReason::Reconnected)));
        assert!(after_break(Some(ResyncReason::NewSession)));
    }
}
