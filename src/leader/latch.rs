//! `LeaderLatch`: Curator's leader latch, on the same wire protocol.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{broadcast, watch};
use tracing::Instrument;

use super::leadership::{Leadership, LeadershipEvent, LeadershipEvents, Term};
use super::{election, read_leader, read_participants, rejoin_pause, wait_until_usable, Participant, Phase, Task};
use crate::error::{Error, Result};
use crate::framework::metrics::Op;
use crate::framework::node::{retry_request, Failure};
use crate::framework::Framework;
use crate::locks::{Block, HeldNode, LockInternals, NodeWatch};
use crate::path;
use crate::protocol::driver::{Driver, StandardDriver, Verdict};
use crate::sync::Mutex;

/// Curator's `LeaderLatch` ordering: after the last `latch-`, the first node leads and every
/// other watches the one just ahead of it.
const LATCH: StandardDriver = StandardDriver::LATCH;

/// How many leadership events a slow [`LeadershipEvents`] consumer may fall behind.
const EVENT_CAPACITY: usize = 64;

/// Whether [`LeaderLatch::close`] reports the end of leadership as an event (Curator's
/// `LeaderLatch.CloseMode`). Either way, `is_leader()` turns false and the current
/// [`Leadership`]'s `lost()` completes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum CloseMode {
    /// No [`LeadershipEvent::Lost`] for a close (the default, as in Curator).
    #[default]
    Silent,
    /// A closing leader emits [`LeadershipEvent::Lost`] before the event stream ends.
    NotifyLeader,
}

/// A leader election in which each candidate keeps a node in a queue and leads while its node
/// is first, compatible with Curator's `LeaderLatch`: Rust and Java/Curator candidates can
/// share one latch path.
///
/// Candidates create protected ephemeral-sequential nodes `<path>/_c_<uuid>-latch-<seq>`
/// carrying their participant id (UTF-8); nodes are ordered by the text after the last
/// `latch-`, the first one leads and each other candidate watches the node just ahead of it.
///
/// # Life
/// [`start`](Self::start) spawns the latch's task, which joins the queue once the framework is
/// connected and follows it. Leadership then lasts until [`close`](Self::close) (or dropping
/// the latch), which deletes the node and lets the next candidate lead. Connection trouble
/// follows the framework's [`ConnectionStateErrorPolicy`](crate::ConnectionStateErrorPolicy):
///
/// - `Suspended` (under the default `Standard` policy) or `Lost` ends leadership at once.
/// - Back on the same session (`Reconnected`), the latch checks the queue again and leads
///   again if its node is still first (the node, and so the fencing token, are unchanged).
/// - A new session never inherits leadership: the old node went with the old session, and
///   the latch joins the queue again with a new node, at its end.
/// - A deletion of the node by another client is noticed as a lock guard notices it: by a
///   [`Leadership::lost`] that is awaited (it watches the node). The term then ends and the
///   latch joins the queue again. The latch sets no watch of its own on its node (as Curator's),
///   which keeps a handoff to the ZooKeeper requests Curator makes.
///
/// Observe leadership with [`is_leader`](Self::is_leader), [`await_leader`](Self::await_leader),
/// a [`watch`](Self::leadership_watch) or a [stream of events](Self::leadership_events); each
/// term comes as a [`Leadership`] with `lost()` and a fencing token.
///
/// ```no_run
/// # async fn example(framework: zk_recipes::Framework) -> zk_recipes::Result<()> {
/// use std::time::Duration;
/// use zk_recipes::LeaderLatch;
///
/// let latch = LeaderLatch::new(&framework, "/services/scheduler/leader", "host-a")?;
/// latch.start()?;
/// if let Some(leadership) = latch.await_leader(Duration::from_secs(30)).await? {
///     // lead until done, or until leadership is lost (then the work is dropped)
///     let _ = leadership.run(async { /* lead; pass leadership.fencing_token() downstream */ }).await;
/// }
/// latch.close().await?;
/// # Ok(()) }
/// ```
///
/// The latch is not `Clone`; share it with `Arc`. Dropping it stops its task and deletes its
/// node in the background, silently.
#[derive(Debug)]
pub struct LeaderLatch {
    shared: Arc<Shared>,
    task: Task,
}

#[derive(Debug)]
struct Shared {
    internals: LockInternals,
    id: String,
    state: Mutex<State>,
    /// The current term while this latch leads.
    leader: watch::Sender<Option<Leadership>>,
}

#[derive(Debug)]
struct State {
    phase: Phase,
    close_mode: CloseMode,
    /// Our node once it has been first in the queue (owned here, so `close()` can delete it).
    node: Option<HeldNode>,
    term: Option<Term>,
    /// Leadership events; taken (ending the streams) by `close()`.
    events: Option<broadcast::Sender<LeadershipEvent>>,
}

impl LeaderLatch {
    /// A latch on `path` for the participant `id` (written as the node's data, read back by
    /// [`participants`](Self::participants) on every side). Does no I/O; call
    /// [`start`](Self::start) to take part.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for an empty id or one with control characters;
    /// [`Error::InvalidPath`] for a path that is not absolute, ends in `/`, has empty, `.` or
    /// `..` segments or control characters, or is `/` or under `/zookeeper`;
    /// [`Error::TooLarge`] when the path and id do not fit in one request.
    pub fn new(framework: &Framework, path: &str, id: &str) -> Result<Self> {
        let internals = election(framework, path, LATCH, id)?;
        let (events, _) = broadcast::channel(EVENT_CAPACITY);
        let state = State {
            phase: Phase::Latent,
            close_mode: CloseMode::default(),
            node: None,
            term: None,
            events: Some(events),
        };
        let (leader, _) = watch::channel(None);
        let shared = Shared { internals, id: id.to_owned(), state: Mutex::new(state), leader };
        Ok(Self { shared: Arc::new(shared), task: Task::default() })
    }

    /// Sets how [`close`](Self::close) reports the end of leadership (default
    /// [`CloseMode::Silent`]).
    #[must_use]
    pub fn close_mode(self, mode: CloseMode) -> Self {
        self.shared.state.lock().close_mode = mode;
        self
    }

    /// The participant id.
    pub fn id(&self) -> &str {
        &self.shared.id
    }

    /// The latch path as given.
    pub fn path(&self) -> &str {
        self.shared.internals.path()
    }

    /// Joins the election: spawns the latch's task on the current Tokio runtime. It waits for
    /// the framework to be connected (the framework may start later), then creates the node.
    /// Calling it again does nothing.
    ///
    /// # Errors
    /// [`Error::NotInElection`] after `close()`; [`Error::InvalidArgument`] outside a Tokio
    /// runtime.
    pub fn start(&self) -> Result<()> {
        let mut state = self.shared.state.lock();
        self.task.start(&mut state.phase, self.path(), || run(self.shared.clone())).map(drop)
    }

    /// Whether this latch leads now (Curator's `hasLeadership`): a local check, no I/O; false
    /// as soon as the connection is suspended or lost as the error policy counts it.
    pub fn is_leader(&self) -> bool {
        self.shared.leader.borrow().as_ref().is_some_and(Leadership::is_leader)
    }

    /// The current term, while this latch leads (`None` otherwise): the handle to
    /// [`run`](Leadership::run) work under, or to fence with.
    #[doc(alias = "current_leadership", alias = "current_term", alias = "hasLeadership")]
    pub fn leadership(&self) -> Option<Leadership> {
        self.shared.leader.borrow().clone().filter(Leadership::is_leader)
    }

    /// A `watch` of the current term: `Some` from the moment this latch leads, `None` once it
    /// stopped (the value may still be `Some` for a moment after a connection problem: check
    /// [`Leadership::is_leader`]).
    pub fn leadership_watch(&self) -> watch::Receiver<Option<Leadership>> {
        self.shared.leader.subscribe()
    }

    /// Every leadership change from now on, in order (Curator's `LeaderLatchListener`). The
    /// stream ends when the latch is closed (with [`CloseMode::NotifyLeader`] a closing leader
    /// emits [`LeadershipEvent::Lost`] first) or dropped, or its framework is closed (after a
    /// `Lost` if it was leading).
    pub fn leadership_events(&self) -> LeadershipEvents {
        let events = self.shared.state.lock().events.as_ref().map(broadcast::Sender::subscribe);
        LeadershipEvents::new(events, self.shared.leader.subscribe())
    }

    /// Waits until this latch leads (Curator's `await()`); returns the term at once when it
    /// leads already.
    ///
    /// # Errors
    /// [`Error::NotInElection`] before `start()` or once closed (also when closed while
    /// waiting); [`Error::Closed`] when the framework is closed.
    ///
    /// # Cancel safety
    /// Cancel-safe: it only observes.
    pub async fn await_leadership(&self) -> Result<Leadership> {
        let framework = self.shared.internals.framework();
        let mut leader = self.shared.leader.subscribe();
        let mut states = framework.state_watch();
        loop {
            let phase = self.shared.state.lock().phase;
            phase.check(self.path())?;
            if framework.is_closed() {
                return Err(Error::Closed);
            }
            let current = leader.borrow_and_update().clone();
            if let Some(leadership) = current.filter(Leadership::is_leader) {
                return Ok(leadership);
            }
            tokio::select! {
                _ = leader.changed() => {}
                _ = states.changed() => {}
            }
        }
    }

    /// Waits at most `timeout` until this latch leads (Curator's `await(timeout, unit)`);
    /// `None` when the time ran out.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a zero timeout (use [`is_leader`](Self::is_leader));
    /// otherwise as [`await_leadership`](Self::await_leadership).
    ///
    /// # Cancel safety
    /// Cancel-safe: it only observes.
    pub async fn await_leader(&self, timeout: Duration) -> Result<Option<Leadership>> {
        if timeout.is_zero() {
            return Err(Error::invalid_argument("timeout", "must be greater than zero; use is_leader()"));
        }
        match tokio::time::timeout(timeout, self.await_leadership()).await {
            Ok(leadership) => leadership.map(Some),
            Err(_) => Ok(None),
        }
    }

    /// Every candidate in queue order, with the ids read from their nodes, Curator's and
    /// foreign children included (Curator's `getParticipants`). Works without `start()`; a
    /// latch path that does not exist has none.
    ///
    /// # Errors
    /// ZooKeeper errors the retry policy gave up on.
    ///
    /// # Cancel safety
    /// Cancel-safe: it only reads.
    pub async fn participants(&self) -> Result<Vec<Participant>> {
        read_participants(&self.shared.internals).await
    }

    /// The candidate whose node is first in the queue (Curator's `getLeader`); `None` when
    /// there is none.
    ///
    /// # Errors
    /// ZooKeeper errors the retry policy gave up on.
    ///
    /// # Cancel safety
    /// Cancel-safe: it only reads.
    pub async fn leader(&self) -> Result<Option<Participant>> {
        read_leader(&self.shared.internals).await
    }

    /// Leaves the election with the latch's [`CloseMode`]; see [`close_with`](Self::close_with).
    ///
    /// # Errors
    /// As [`close_with`](Self::close_with).
    ///
    /// # Cancel safety
    /// As [`close_with`](Self::close_with).
    pub async fn close(&self) -> Result<()> {
        let mode = self.shared.state.lock().close_mode;
        self.close_with(mode).await
    }

    /// Leaves the election: ends leadership (reported as `mode` says), stops the latch's task
    /// and deletes its node, so that the next candidate leads. Closing twice, or a latch that
    /// was never started, does nothing more.
    ///
    /// # Errors
    /// The ZooKeeper error that stopped the delete (a retryable one is left to the framework's
    /// reaper, which keeps trying while the session lasts).
    ///
    /// # Cancel safety
    /// Cancel-safe: the latch is closed at the first poll; a cancelled close leaves the delete
    /// to the reaper.
    pub async fn close_with(&self, mode: CloseMode) -> Result<()> {
        let node = {
            let mut state = self.shared.state.lock();
            if state.phase == Phase::Closed {
                return Ok(());
            }
            state.phase = Phase::Closed;
            if let Some(term) = state.term.take() {
                term.end();
                if mode == CloseMode::NotifyLeader {
                    self.shared.emit(&state, LeadershipEvent::Lost);
                }
            }
            state.events = None;
            state.node.take()
        };
        self.shared.leader.send_replace(None);
        let span = tracing::debug_span!("zk_recipes.leader.close", path = %self.path(), id = %self.id());
        async {
            // The delete goes first, before anything the task might still send.
            let released = match node {
                Some(node) => node.release().await,
                None => Ok(()),
            };
            self.task.stop().await;
            released
        }
        .instrument(span)
        .await
    }
}

impl Drop for LeaderLatch {
    fn drop(&mut self) {
        // The task is aborted by `Task`'s drop; it owns a clone of `shared`, so the node goes
        // (its delete is sent) when the task's future is dropped, after anything it was doing.
        let mut state = self.shared.state.lock();
        state.phase = Phase::Closed;
        state.events = None;
    }
}

impl Shared {
    fn framework(&self) -> &Framework {
        self.internals.framework()
    }

    fn emit(&self, state: &State, event: LeadershipEvent) {
        if let Some(events) = &state.events {
            let _ = events.send(event);
        }
    }

    fn started(&self) -> bool {
        self.state.lock().phase == Phase::Started
    }

    /// Keeps `node` so that `close()` can delete it; false (and the node is deleted) when the
    /// latch was closed meanwhile.
    fn keep(&self, node: HeldNode) -> bool {
        let mut state = self.state.lock();
        if state.phase != Phase::Started {
            drop(state);
            drop(node);
            return false;
        }
        state.node = Some(node);
        true
    }

    /// Deletes the kept node (in the background; its session may be gone already).
    fn forget_node(&self) {
        let node = self.state.lock().node.take();
        drop(node);
    }

    /// Starts a term on our node and returns what completes when it can no longer be trusted;
    /// `None` when the latch was closed.
    fn begin_term(&self, watch: &NodeWatch) -> Option<impl std::future::Future<Output = ()>> {
        let mut state = self.state.lock();
        if state.phase != Phase::Started {
            return None;
        }
        let (term, leadership) = Term::begin(watch);
        let untrusted = term.untrusted(self.framework(), watch);
        state.term = Some(term);
        self.leader.send_replace(Some(leadership.clone()));
        self.emit(&state, LeadershipEvent::Gained(leadership));
        tracing::info!(node = %watch.user_path(), fencing_token = watch.fencing_token(), "leadership gained");
        Some(untrusted)
    }

    /// Ends the current term, if any, and reports it.
    fn end_term(&self) {
        let mut state = self.state.lock();
        let Some(term) = state.term.take() else { return };
        term.end();
        self.leader.send_replace(None);
        self.emit(&state, LeadershipEvent::Lost);
        tracing::info!("leadership lost");
    }

    /// Leads on `node` (first in the queue) for as long as it can: through suspensions on the
    /// same session, until the node or its session is gone or the latch closes.
    async fn lead(&self, node: HeldNode) {
        let watch = node.watch().clone();
        if !self.keep(node) {
            return;
        }
        let mut recheck = false;
        while self.back_on_session(&watch).await {
            if recheck {
                match self.still_first(&watch).await {
                    Ok(true) => {}
                    Ok(false) => {
                        tracing::info!("no longer first after reconnecting; joining the queue again");
                        break;
                    }
                    Err(Failure::NodeMissing) => break,
                    Err(Failure::Error(error)) => {
                        tracing::warn!(%error, "could not check the queue after reconnecting; joining it again");
                        break;
                    }
                }
            }
            if !watch.is_held() {
                // Suspended again meanwhile, or the framework's task is late (a starved
                // runtime; it publishes what it finds once it runs): wait for it, never spin,
                // or a `current_thread` runtime would never run it.
                self.framework().state_settles().await;
                continue;
            }
            let Some(untrusted) = self.begin_term(&watch) else {
                return; // closed: close() deletes the node
            };
            recheck = true;
            // No watch of our own on the node: a leader that resigns at once would pay a
            // request and a watch event per term. Deletions are seen by the term's `lost()`.
            untrusted.await;
            self.end_term();
        }
        self.forget_node();
    }

    /// Waits until the node's session is connected (true), or is over for the node (false:
    /// lost, replaced, the node deleted, the framework closed).
    async fn back_on_session(&self, watch: &NodeWatch) -> bool {
        let framework = self.framework();
        let epoch = watch.epoch();
        let mut states = framework.state_watch();
        let _ = states.wait_for(|s| s.session_over(epoch) || s.state.is_connected() || framework.is_closed()).await;
        !watch.is_over()
    }

    /// Whether our node is still first in the queue (checked after a reconnection on the same
    /// session, as Curator does).
    async fn still_first(&self, watch: &NodeWatch) -> Result<bool, Failure> {
        let framework = self.framework();
        let session = framework.session()?;
        if session.epoch != watch.epoch() {
            return Err(Failure::NodeMissing);
        }
        let dir = self.internals.dir();
        let mut children = retry_request(framework, || {
            session.sent(Op::GetChildren);
            session.client.list_children(dir)
        })
        .await?;
        // A wrapped suffix sorts out of creation order: the listing cannot say who is first
        // (as for every acquire: see `Error::SequenceWrapped`).
        if LATCH.wrapped(&children).is_some() {
            return Err(Error::SequenceWrapped { path: self.internals.path().to_owned() }.into());
        }
        LATCH.sort(&mut children);
        match LATCH.verdict(&children, path::node_name(watch.user_path())) {
            Verdict::Acquired => Ok(true),
            Verdict::Watch { .. } => Ok(false),
            Verdict::Missing => Err(Failure::NodeMissing),
        }
    }
}

/// The latch's task: join the queue, lead while first, join again whenever the node is gone.
async fn run(shared: Arc<Shared>) {
    let span = tracing::debug_span!("zk_recipes.leader.latch", path = %shared.internals.path(), id = %shared.id);
    async {
        let framework = shared.framework().clone();
        let mut pause = rejoin_pause();
        while shared.started() {
            if !wait_until_usable(&framework).await {
                break;
            }
            match shared.internals.acquire::<Block>().await {
                Ok(node) => {
                    pause = rejoin_pause();
                    shared.lead(node).await;
                }
                Err(Error::Closed) => break,
                Err(error) => {
                    tracing::warn!(%error, "could not join the election; trying again");
                    pause.backoff().await;
                }
            }
        }
        // The framework closed (or the latch did): no leadership from here on.
        shared.end_term();
        shared.leader.send_replace(None);
        shared.state.lock().events = None;
    }
    .instrument(span)
    .await
}
