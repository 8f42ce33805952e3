//! Every metric the crate reports, through the [`metrics`] facade (the table of names and
//! labels is in the observability guide, `src/docs/observability.md`).
//!
//! Handles are registered once, when the framework or the recipe handle is made, and kept:
//! an instrumentation point is one call on a kept handle. Without a recorder installed (or
//! with one installed only after the framework was built) the handles are the facade's no-op
//! handles, and each call is a branch on an empty handle: no allocation, no lock, no lookup.
//!
//! Labels stay few: `framework` (the name given to
//! [`FrameworkBuilder::metrics_name`](crate::FrameworkBuilder::metrics_name), `default`
//! otherwise), `recipe` (a fixed word per recipe kind), a fixed word for the operation, state
//! or event kind; and `path` only where the framework opted in with
//! [`FrameworkBuilder::metrics_path_labels`](crate::FrameworkBuilder::metrics_path_labels).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use metrics::{Counter, Gauge, Histogram, Label, SharedString};
use tokio::time::Instant;

use super::ConnectionState;
use crate::sync::Mutex;

/// The label settings of one framework.
#[derive(Debug, Clone)]
pub(crate) struct Labels {
    framework: SharedString,
    paths: bool,
}

impl Labels {
    pub(crate) fn new(name: Option<&str>, paths: bool) -> Self {
        let framework = match name {
            Some(name) => SharedString::from(Arc::<str>::from(name)),
            None => SharedString::const_str("default"),
        };
        Self { framework, paths }
    }

    /// The labels of a recipe handle: the framework, the recipe kind, and the path when opted in.
    fn recipe(&self, recipe: &'static str, path: &str) -> Vec<Label> {
        let mut labels = vec![self.framework(), Label::from_static_parts("recipe", recipe)];
        if self.paths {
            labels.push(Label::new("path", path.to_owned()));
        }
        labels
    }

    fn framework(&self) -> Label {
        Label::new("framework", self.framework.clone())
    }

    fn with(&self, mut labels: Vec<Label>, key: &'static str, value: &'static str) -> Vec<Label> {
        labels.push(Label::from_static_parts(key, value));
        labels
    }
}

/// What a request is, for `zk_recipes_requests_total{op}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Op {
    Create,
    Delete,
    GetData,
    SetData,
    Exists,
    GetChildren,
    Sync,
    Multi,
    MultiRead,
    AddWatch,
    GetAcl,
    SetAcl,
    GetConfig,
    Reconfig,
    GetEphemerals,
    RemoveWatches,
}

impl Op {
    const ALL: [Op; 16] = [
        Op::Create,
        Op::Delete,
        Op::GetData,
        Op::SetData,
        Op::Exists,
        Op::GetChildren,
        Op::Sync,
        Op::Multi,
        Op::MultiRead,
        Op::AddWatch,
        Op::GetAcl,
        Op::SetAcl,
        Op::GetConfig,
        Op::Reconfig,
        Op::GetEphemerals,
        Op::RemoveWatches,
    ];

    fn name(self) -> &'static str {
        match self {
            Op::Create => "create",
            Op::Delete => "delete",
            Op::GetData => "get_data",
            Op::SetData => "set_data",
            Op::Exists => "exists",
            Op::GetChildren => "get_children",
            Op::Sync => "sync",
            Op::Multi => "multi",
            Op::MultiRead => "multi_read",
            Op::AddWatch => "add_watch",
            Op::GetAcl => "get_acl",
            Op::SetAcl => "set_acl",
            Op::GetConfig => "get_config",
            Op::Reconfig => "reconfig",
            Op::GetEphemerals => "get_ephemerals",
            Op::RemoveWatches => "remove_watches",
        }
    }
}

const STATES: [ConnectionState; 5] = [
    ConnectionState::Connected,
    ConnectionState::Suspended,
    ConnectionState::Reconnected,
    ConnectionState::Lost,
    ConnectionState::ReadOnly,
];

fn state_name(state: ConnectionState) -> &'static str {
    match state {
        ConnectionState::Connected => "connected",
        ConnectionState::Suspended => "suspended",
        ConnectionState::Reconnected => "reconnected",
        ConnectionState::Lost => "lost",
        ConnectionState::ReadOnly => "read_only",
    }
}

/// A framework's own metrics.
pub(crate) struct FrameworkMetrics {
    pub(crate) labels: Labels,
    states: Vec<Counter>,
    expirations: Counter,
    sessions: Counter,
    reconnects: Counter,
    requests: Vec<Counter>,
    retries: Counter,
    /// The holds of every lock handle on this framework, by session.
    pub(crate) holds: Arc<HoldBook>,
}

impl std::fmt::Debug for FrameworkMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FrameworkMetrics").field("labels", &self.labels).finish_non_exhaustive()
    }
}

impl FrameworkMetrics {
    pub(crate) fn new(labels: Labels) -> Self {
        describe();
        let fw = || vec![labels.framework()];
        let states = STATES
            .iter()
            .map(|s| {
                metrics::counter!(
                    "zk_recipes_connection_state_changes_total",
                    labels.with(fw(), "state", state_name(*s))
                )
            })
            .collect();
        let requests = Op::ALL
            .iter()
            .map(|op| metrics::counter!("zk_recipes_requests_total", labels.with(fw(), "op", op.name())))
            .collect();
        Self {
            states,
            expirations: metrics::counter!("zk_recipes_session_expirations_total", fw()),
            sessions: metrics::counter!("zk_recipes_sessions_opened_total", fw()),
            reconnects: metrics::counter!("zk_recipes_reconnects_total", fw()),
            requests,
            retries: metrics::counter!("zk_recipes_retries_total", fw()),
            holds: Arc::default(),
            labels,
        }
    }

    /// A published connection state of session `epoch`, after `previous` (the published
    /// snapshot's state and epoch before it). `Reconnected` on a new session is no reconnect
    /// (its session was counted opened); a session that ended, `Lost` or replaced by a new
    /// one, ends its holds as lost.
    pub(crate) fn state_changed(&self, state: ConnectionState, epoch: u64, previous: (ConnectionState, u64)) {
        if let Some(i) = STATES.iter().position(|s| *s == state) {
            self.states[i].increment(1);
        }
        let (previous_state, previous_epoch) = previous;
        match state {
            ConnectionState::Lost => self.expirations.increment(1),
            ConnectionState::Reconnected if epoch == previous_epoch => self.reconnects.increment(1),
            _ => {}
        }
        if state == ConnectionState::Lost {
            self.holds.session_ended(epoch);
        }
        if epoch != previous_epoch && previous_state != ConnectionState::Lost {
            self.holds.session_ended(previous_epoch);
        }
    }

    /// A session opened (the first, or one after `Lost`).
    pub(crate) fn session_opened(&self) {
        self.sessions.increment(1);
    }

    /// A request sent.
    pub(crate) fn request(&self, op: Op) {
        if let Some(i) = Op::ALL.iter().position(|o| *o == op) {
            self.requests[i].increment(1);
        }
    }

    /// A failed request that is tried again.
    pub(crate) fn retry(&self) {
        self.retries.increment(1);
    }

    /// A background error of `recipe` (rare: registered when it happens).
    pub(crate) fn background_error(&self, recipe: &'static str) {
        let labels = self.labels.with(vec![self.labels.framework()], "recipe", recipe);
        metrics::counter!("zk_recipes_background_errors_total", labels).increment(1);
    }
}

/// A lock handle's metrics (mutex, read-write lock, semaphores, leader election). Public
/// (though unreachable from outside the crate) because the lock front-end's trait names it.
#[derive(Clone)]
pub struct LockMetrics {
    wait: Histogram,
    holds: Gauge,
    waiters: Gauge,
    lost: Counter,
    timeouts: Counter,
}

impl std::fmt::Debug for LockMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LockMetrics")
    }
}

impl LockMetrics {
    pub(crate) fn new(labels: &Labels, recipe: &'static str, path: &str) -> Self {
        let l = || labels.recipe(recipe, path);
        Self {
            wait: metrics::histogram!("zk_recipes_lock_acquire_wait_seconds", l()),
            holds: metrics::gauge!("zk_recipes_lock_holds", l()),
            waiters: metrics::gauge!("zk_recipes_lock_waiters", l()),
            lost: metrics::counter!("zk_recipes_lock_lost_total", l()),
            timeouts: metrics::counter!("zk_recipes_lock_acquire_timeouts_total", l()),
        }
    }

    /// A blocking acquire starts: a waiter until the returned token is done or dropped.
    pub(crate) fn waiting(&self) -> Waiting<'_> {
        self.waiters.increment(1.0);
        Waiting { metrics: self, since: Instant::now() }
    }

    /// A timed acquire ran out of time.
    pub(crate) fn timed_out(&self) {
        self.timeouts.increment(1);
    }

    /// A node of session `epoch` held from now until the token is dropped, or the session
    /// ends (recorded in `book`), whichever comes first.
    pub(crate) fn hold(&self, book: &Arc<HoldBook>, epoch: u64) -> HoldToken {
        self.holds.increment(1.0);
        let entry = Arc::new(HoldEntry { metrics: self.clone(), epoch, ended: AtomicBool::new(false) });
        let id = book.enter(entry.clone());
        HoldToken { entry, book: Arc::downgrade(book), id }
    }
}

/// The holds in `zk_recipes_lock_holds` of one framework, so that its session's end counts
/// them lost when it happens (as the guards' `lost()` would report it), not when their guards
/// are dropped.
#[derive(Default)]
pub(crate) struct HoldBook {
    entries: Mutex<Entries>,
}

#[derive(Default)]
struct Entries {
    next_id: u64,
    holds: HashMap<u64, Arc<HoldEntry>>,
    /// The latest session known to have ended: a hold of it or an earlier one that comes in
    /// late (acquired as the session ended) ends at once.
    ended_through: u64,
}

impl std::fmt::Debug for HoldBook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HoldBook").field("holds", &self.entries.lock().holds.len()).finish()
    }
}

impl HoldBook {
    fn enter(&self, entry: Arc<HoldEntry>) -> u64 {
        let mut entries = self.entries.lock();
        if entry.epoch <= entries.ended_through {
            drop(entries);
            entry.end(true);
            return 0;
        }
        entries.next_id += 1;
        let id = entries.next_id;
        entries.holds.insert(id, entry);
        id
    }

    fn leave(&self, id: u64) {
        self.entries.lock().holds.remove(&id);
    }

    /// Session `epoch` ended: its holds end, lost.
    fn session_ended(&self, epoch: u64) {
        let ended: Vec<_> = {
            let mut entries = self.entries.lock();
            entries.ended_through = entries.ended_through.max(epoch);
            entries.holds.values().filter(|e| e.epoch == epoch).cloned().collect()
        };
        for entry in ended {
            entry.end(true);
        }
    }
}

/// One hold in the book; ended once, by its session's end or its token.
struct HoldEntry {
    metrics: LockMetrics,
    epoch: u64,
    ended: AtomicBool,
}

impl HoldEntry {
    fn end(&self, lost: bool) {
        if !self.ended.swap(true, Ordering::SeqCst) {
            if lost {
                self.metrics.lost.increment(1);
            }
            self.metrics.holds.decrement(1.0);
        }
    }
}

/// A blocking acquire in progress (counted in `zk_recipes_lock_waiters`).
pub(crate) struct Waiting<'a> {
    metrics: &'a LockMetrics,
    since: Instant,
}

impl Waiting<'_> {
    /// The acquire took the lock: its wait goes into the histogram.
    pub(crate) fn acquired(self) {
        self.metrics.wait.record(self.since.elapsed().as_secs_f64());
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.metrics.waiters.decrement(1.0);
    }
}

/// A held node (counted in `zk_recipes_lock_holds`); [`lost`](HoldToken::lost) when it ended
/// by its session's end rather than a release.
pub(crate) struct HoldToken {
    entry: Arc<HoldEntry>,
    book: std::sync::Weak<HoldBook>,
    id: u64,
}

impl std::fmt::Debug for HoldToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("HoldToken")
    }
}

impl HoldToken {
    /// The hold ended because its session (or its node) was lost.
    pub(crate) fn lost(&self) {
        self.entry.end(true);
    }
}

impl Drop for HoldToken {
    fn drop(&mut self) {
        self.entry.end(false);
        if let Some(book) = self.book.upgrade() {
            book.leave(self.id);
        }
    }
}

/// What a cache event is, for `zk_recipes_cache_events_total{kind}`.
#[derive(Debug, Clone, Copy)]
pub(crate) enum CacheEventKind {
    Created,
    Changed,
    Deleted,
}

/// A cache's metrics.
#[derive(Clone)]
pub(crate) struct CacheMetrics {
    nodes: Gauge,
    events: [Counter; 3],
    resyncs: Counter,
    lagged: Counter,
}

impl std::fmt::Debug for CacheMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CacheMetrics")
    }
}

impl CacheMetrics {
    pub(crate) fn new(labels: &Labels, path: &str) -> Self {
        let l = || labels.recipe("cache", path);
        let event = |kind| metrics::counter!("zk_recipes_cache_events_total", labels.with(l(), "kind", kind));
        Self {
            nodes: metrics::gauge!("zk_recipes_cache_nodes", l()),
            events: [event("created"), event("changed"), event("deleted")],
            resyncs: metrics::counter!("zk_recipes_cache_resyncs_total", l()),
            lagged: metrics::counter!("zk_recipes_cache_lagged_events_total", l()),
        }
    }

    /// The cache held `before` nodes and holds `now` (caches sharing the series each add
    /// their own).
    pub(crate) fn resize(&self, before: usize, now: usize) {
        if now >= before {
            self.nodes.increment((now - before) as f64);
        } else {
            self.nodes.decrement((before - now) as f64);
        }
    }

    /// The cache applied a change.
    pub(crate) fn event(&self, kind: CacheEventKind) {
        self.events[kind as usize].increment(1);
    }

    /// A consumer fell behind by `missed` events.
    pub(crate) fn lagged(&self, missed: u64) {
        self.lagged.increment(missed);
    }

    /// The cache read its tree again.
    pub(crate) fn resync(&self) {
        self.resyncs.increment(1);
    }
}

/// A session's mirror of a lock directory.
#[derive(Clone)]
pub(crate) struct MirrorMetrics {
    alive: Gauge,
    relistings: Counter,
}

impl std::fmt::Debug for MirrorMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("MirrorMetrics")
    }
}

impl MirrorMetrics {
    pub(crate) fn new(labels: &Labels, path: &str) -> Self {
        let l = || labels.recipe("lock_mirror", path);
        Self {
            alive: metrics::gauge!("zk_recipes_mirrors_alive", l()),
            relistings: metrics::counter!("zk_recipes_mirror_relistings_total", l()),
        }
    }

    /// A mirror runs until the token is dropped.
    pub(crate) fn alive(&self) -> AliveToken {
        self.alive.increment(1.0);
        AliveToken(self.alive.clone())
    }

    /// The mirror listed its directory again.
    pub(crate) fn relisting(&self) {
        self.relistings.increment(1);
    }
}

/// A running mirror (counted in `zk_recipes_mirrors_alive`).
pub(crate) struct AliveToken(Gauge);

impl Drop for AliveToken {
    fn drop(&mut self) {
        self.0.decrement(1.0);
    }
}

/// What a driver of a tree's copy counts: a cache's resyncs, or a lock mirror's relistings.
#[derive(Debug, Clone)]
pub(crate) enum Resyncs {
    Cache(CacheMetrics),
    Mirror(MirrorMetrics),
}

impl Resyncs {
    /// The copy reads its tree again.
    pub(crate) fn resync(&self) {
        match self {
            Resyncs::Cache(m) => m.resync(),
            Resyncs::Mirror(m) => m.relisting(),
        }
    }
}

/// The metrics' descriptions (units and help text), given to the recorder installed now.
fn describe() {
    use metrics::{describe_counter, describe_gauge, describe_histogram, Unit};
    describe_counter!("zk_recipes_connection_state_changes_total", "Connection states published, by state");
    describe_counter!("zk_recipes_session_expirations_total", "Sessions lost (the Lost state)");
    describe_counter!("zk_recipes_sessions_opened_total", "Sessions opened, the first included");
    describe_counter!("zk_recipes_reconnects_total", "Reconnections to the same session (the Reconnected state)");
    describe_counter!("zk_recipes_requests_total", "Requests sent, by operation");
    describe_counter!("zk_recipes_retries_total", "Failed requests tried again under the retry policy");
    describe_counter!("zk_recipes_background_errors_total", "Background errors reported, by recipe");
    describe_histogram!(
        "zk_recipes_lock_acquire_wait_seconds",
        Unit::Seconds,
        "Time a blocking acquire took until the lock was held"
    );
    describe_gauge!("zk_recipes_lock_holds", "Lock and lease nodes held by this process");
    describe_gauge!("zk_recipes_lock_waiters", "Blocking acquires waiting");
    describe_counter!("zk_recipes_lock_lost_total", "Holds that ended with their session rather than a release");
    describe_counter!("zk_recipes_lock_acquire_timeouts_total", "Timed acquires that ran out of time");
    describe_gauge!("zk_recipes_cache_nodes", "Nodes a cache holds");
    describe_counter!("zk_recipes_cache_events_total", "Changes a cache applied, by kind");
    describe_counter!("zk_recipes_cache_resyncs_total", "Times a cache read its tree again");
    describe_counter!("zk_recipes_cache_lagged_events_total", "Events cache consumers missed by falling behind");
    describe_gauge!("zk_recipes_mirrors_alive", "Sessions' mirrors of lock directories running");
    describe_counter!("zk_recipes_mirror_relistings_total", "Times a lock directory's mirror listed it again");
}
