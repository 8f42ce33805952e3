//! `LeaderSelector`: Curator's leader selector (the callback form), on the same wire protocol.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use futures::future::BoxFuture;
use futures::FutureExt;
use tokio::sync::{watch, Notify};
use tracing::Instrument;

use super::leadership::{Leadership, Term};
use super::{election, read_leader, read_participants, rejoin_pause, wait_until_usable, Participant, Phase, Task};
use crate::error::{Error, Result};
use crate::framework::Framework;
use crate::locks::{Block, HeldNode, LockInternals};
use crate::protocol::driver::StandardDriver;
use crate::sync::Mutex;

/// The leader closure, type-erased.
type LeaderFn = dyn Fn(Leadership) -> BoxFuture<'static, ()> + Send + Sync;

/// A leader election that runs your async closure while this process leads, compatible with
/// Curator's `LeaderSelector`: Rust and Java/Curator candidates can share one election path.
///
/// It is a distributed mutex (Curator's `InterProcessMutex` layout: protected
/// ephemeral-sequential `<path>/_c_<uuid>-lock-<seq>` nodes, the first one holds) whose nodes
/// carry the participant id (UTF-8) as data, as Curator's `LeaderSelector` writes it.
///
/// # Leadership
/// Once [`start`](Self::start)ed, the selector's task queues for the mutex. When it gets it,
/// it calls the closure with a [`Leadership`] (the term's `lost()` and fencing token) and
/// leads until the closure's future completes or leadership is lost, whichever comes first:
///
/// - the closure returns (or panics, which is logged): leadership is given up;
/// - leadership is lost (connection `Suspended`/`Lost` as the framework's
///   [`ConnectionStateErrorPolicy`](crate::ConnectionStateErrorPolicy) counts them, a new
///   session, the node deleted) or [`interrupt`](Self::interrupt) is called: the closure's
///   future is dropped at its next await point (Curator interrupts the leader thread).
///   Run the work in [`leadership.run(..)`](Leadership::run) (or select on `leadership.lost()`)
///   inside the closure to hear of the loss there: the closure is polled first, so it
///   completes in the same wakeup.
///
/// Then the node is deleted (after the closure's future is gone) and the next candidate leads.
/// With [`auto_requeue`](Self::auto_requeue) the selector queues again at once; otherwise call
/// [`requeue`](Self::requeue). While waiting in the queue, a suspended connection changes
/// nothing (the place is kept); a new session queues again with a new node.
///
/// Only one closure runs at a time per selector. The closure runs on the selector's task.
///
/// ```no_run
/// # async fn example(framework: zk_recipes::Framework) -> zk_recipes::Result<()> {
/// use zk_recipes::LeaderSelector;
///
/// let selector = LeaderSelector::new(&framework, "/services/compactor/leader", "host-a", |leadership| async move {
///     // compact; pass leadership.fencing_token() downstream
///     if let Err(lost) = leadership.run(async { /* compact */ }).await {
///         eprintln!("{lost}"); // another candidate may lead soon
///     }
/// })?
/// .auto_requeue(true);
/// selector.start()?;
/// // ...
/// selector.close().await?;
/// # Ok(()) }
/// ```
///
/// The selector is not `Clone`; share it with `Arc`. Dropping it aborts its task (the closure's
/// future is dropped there) and deletes its node in the background.
pub struct LeaderSelector {
    shared: Arc<Shared>,
    task: Task,
}

impl std::fmt::Debug for LeaderSelector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeaderSelector")
            .field("path", &self.path())
            .field("id", &self.id())
            .field("auto_requeue", &self.shared.auto_requeue.load(Ordering::SeqCst))
            .field("is_leader", &self.is_leader())
            .finish_non_exhaustive()
    }
}

struct Shared {
    internals: LockInternals,
    id: String,
    leader_fn: Box<LeaderFn>,
    auto_requeue: AtomicBool,
    state: Mutex<State>,
    /// Wakes the task when `requeue()` queued an election.
    queued: Notify,
    /// The current term while this selector leads.
    leader: watch::Sender<Option<Leadership>>,
}

struct State {
    phase: Phase,
    /// An election is pending or in progress (waiting in the queue or leading).
    queued: bool,
    /// Our node while leading (owned here, so `close()` can delete it).
    node: Option<HeldNode>,
    term: Option<Term>,
    /// Interrupts the current term.
    interrupt: Option<Arc<Notify>>,
}

impl LeaderSelector {
    /// A selector on `path` for the participant `id` (written as the node's data, read back by
    /// [`participants`](Self::participants) on every side), running `leader` while it leads.
    /// Does no I/O; call [`start`](Self::start) to take part.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for an empty id or one with control characters;
    /// [`Error::InvalidPath`] for a path that is not absolute, ends in `/`, has empty, `.` or
    /// `..` segments or control characters, or is `/` or under `/zookeeper`;
    /// [`Error::TooLarge`] when the path and id do not fit in one request.
    pub fn new<F, Fut>(framework: &Framework, path: &str, id: &str, leader: F) -> Result<Self>
    where
        F: Fn(Leadership) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let internals = election(framework, path, StandardDriver::MUTEX, id)?;
        let state = State { phase: Phase::Latent, queued: false, node: None, term: None, interrupt: None };
        let (leader_tx, _) = watch::channel(None);
        let shared = Shared {
            internals,
            id: id.to_owned(),
            leader_fn: Box::new(move |leadership| leader(leadership).boxed()),
            auto_requeue: AtomicBool::new(false),
            state: Mutex::new(state),
            queued: Notify::new(),
            leader: leader_tx,
        };
        Ok(Self { shared: Arc::new(shared), task: Task::default() })
    }

    /// Whether the selector queues again by itself each time its leadership ends (Curator's
    /// `autoRequeue()`); default false.
    #[must_use]
    pub fn auto_requeue(self, requeue: bool) -> Self {
        self.shared.auto_requeue.store(requeue, Ordering::SeqCst);
        self
    }

    /// The participant id.
    pub fn id(&self) -> &str {
        &self.shared.id
    }

    /// The election path as given.
    pub fn path(&self) -> &str {
        self.shared.internals.path()
    }

    /// Joins the election: spawns the selector's task on the current Tokio runtime and queues
    /// it once. The task waits for the framework to be connected (the framework may start
    /// later). Calling it again does nothing.
    ///
    /// # Errors
    /// [`Error::NotInElection`] after `close()`; [`Error::InvalidArgument`] outside a Tokio
    /// runtime.
    pub fn start(&self) -> Result<()> {
        let mut state = self.shared.state.lock();
        if self.task.start(&mut state.phase, self.path(), || run(self.shared.clone()))? {
            state.queued = true;
        }
        Ok(())
    }

    /// Queues the selector for another leadership unless it is queued or leading already
    /// (Curator's `requeue()`). Returns whether it queued.
    ///
    /// # Errors
    /// [`Error::NotInElection`] before `start()` or after `close()`.
    pub fn requeue(&self) -> Result<bool> {
        let mut state = self.shared.state.lock();
        state.phase.check(self.path())?;
        if state.queued {
            return Ok(false);
        }
        state.queued = true;
        self.shared.queued.notify_one();
        Ok(true)
    }

    /// Ends the current leadership, if this selector leads (Curator's
    /// `interruptLeadership()`): the closure's future is dropped at its next await point and
    /// the node deleted. Returns whether there was a leadership to interrupt. With
    /// [`auto_requeue`](Self::auto_requeue) the selector queues again.
    pub fn interrupt(&self) -> bool {
        let state = self.shared.state.lock();
        match (&state.term, &state.interrupt) {
            (Some(_), Some(interrupt)) => {
                interrupt.notify_one();
                true
            }
            _ => false,
        }
    }

    /// Whether this selector leads now (Curator's `hasLeadership`): a local check, no I/O.
    pub fn is_leader(&self) -> bool {
        self.shared.leader.borrow().as_ref().is_some_and(Leadership::is_leader)
    }

    /// The current term, while this selector leads (`None` otherwise): the handle to
    /// [`run`](Leadership::run) work under, or to fence with.
    #[doc(alias = "current_leadership", alias = "current_term", alias = "hasLeadership")]
    pub fn leadership(&self) -> Option<Leadership> {
        self.shared.leader.borrow().clone().filter(Leadership::is_leader)
    }

    /// Every candidate in queue order, with the ids read from their nodes, Curator's and
    /// foreign children included (Curator's `getParticipants`). Works without `start()`.
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

    /// Leaves the election: ends leadership, stops the selector's task (dropping the
    /// closure's future) and then deletes the node, so that the next candidate leads. Closing
    /// twice, or a selector that was never started, does nothing more.
    ///
    /// Called from inside the closure, it ends the closure there: the node is then deleted in
    /// the background.
    ///
    /// # Errors
    /// The ZooKeeper error that stopped the delete (a retryable one is left to the framework's
    /// reaper, which keeps trying while the session lasts).
    ///
    /// # Cancel safety
    /// Cancel-safe: the selector is closed at the first poll; a cancelled close leaves the
    /// delete to the reaper.
    pub async fn close(&self) -> Result<()> {
        let node = {
            let mut state = self.shared.state.lock();
            if state.phase == Phase::Closed {
                return Ok(());
            }
            state.phase = Phase::Closed;
            state.queued = false;
            state.interrupt = None;
            if let Some(term) = state.term.take() {
                term.end();
            }
            state.node.take()
        };
        self.shared.leader.send_replace(None);
        let span = tracing::debug_span!("zk_recipes.leader.close", path = %self.path(), id = %self.id());
        async {
            // The closure's future is gone before the node is: no overlap with the next leader.
            self.task.stop().await;
            match node {
                Some(node) => node.release().await,
                None => Ok(()),
            }
        }
        .instrument(span)
        .await
    }
}

impl Drop for LeaderSelector {
    fn drop(&mut self) {
        // The task is aborted by `Task`'s drop. It owns a clone of `shared`, so the node is
        // dropped (its delete sent) when the task's future is, after the closure's future.
        self.shared.state.lock().phase = Phase::Closed;
    }
}

impl Shared {
    fn framework(&self) -> &Framework {
        self.internals.framework()
    }

    /// Waits until an election is queued; false when the selector closed.
    async fn queued(&self) -> bool {
        loop {
            let notified = self.queued.notified();
            {
                let state = self.state.lock();
                if state.phase != Phase::Started {
                    return false;
                }
                if state.queued {
                    return true;
                }
            }
            notified.await;
        }
    }

    /// The election is over (leadership ended, or joining failed): queued again when
    /// auto-requeue is on.
    fn election_over(&self, state: &mut State) {
        state.queued = self.auto_requeue.load(Ordering::SeqCst) && state.phase == Phase::Started;
    }

    /// One election: queue, lead once. False when the framework closed (the task ends).
    async fn elect(&self) -> bool {
        let mut pause = rejoin_pause();
        loop {
            if !wait_until_usable(self.framework()).await {
                return false;
            }
            match self.internals.acquire::<Block>().await {
                Ok(node) => {
                    self.lead(node).await;
                    return true;
                }
                Err(Error::Closed) => return false,
                Err(error) if self.auto_requeue.load(Ordering::SeqCst) => {
                    tracing::warn!(%error, "could not join the election; trying again");
                    pause.backoff().await;
                }
                Err(error) => {
                    tracing::warn!(%error, "could not join the election; requeue() to try again");
                    self.election_over(&mut self.state.lock());
                    return true;
                }
            }
        }
    }

    /// Runs the closure on `node` (the mutex held) until it returns or leadership ends, then
    /// deletes the node.
    async fn lead(&self, node: HeldNode) {
        let watch = node.watch().clone();
        let (leadership, interrupt) = {
            let mut state = self.state.lock();
            if state.phase != Phase::Started {
                drop(state);
                drop(node); // closed meanwhile: deleted in the background
                return;
            }
            let (term, leadership) = Term::begin(&watch);
            let interrupt = Arc::new(Notify::new());
            state.node = Some(node);
            state.term = Some(term);
            state.interrupt = Some(interrupt.clone());
            self.leader.send_replace(Some(leadership.clone()));
            (leadership, interrupt)
        };
        // The node's own loss signal (not `leadership.lost()`, which also ends with the term):
        // kept until after the delete, which fires its watch, so that no RemoveWatches is sent.
        let mut node_lost = std::pin::pin!(watch.lost());
        let why = if leadership.is_leader() {
            tracing::info!(node = %watch.user_path(), fencing_token = watch.fencing_token(), "leadership gained");
            let work = AssertUnwindSafe((self.leader_fn)(leadership.clone())).catch_unwind();
            tokio::select! {
                biased;
                outcome = work => match outcome {
                    Ok(()) => "the leader closure returned",
                    Err(_) => {
                        tracing::error!("the leader closure panicked; leadership ends");
                        "the leader closure panicked"
                    }
                },
                () = &mut node_lost => "leadership lost",
                () = interrupt.notified() => "interrupted",
            }
        } else {
            "leadership lost before the leader closure started"
        };
        // The closure's future is dropped by now.
        let node = {
            let mut state = self.state.lock();
            if let Some(term) = state.term.take() {
                term.end();
            }
            state.interrupt = None;
            self.election_over(&mut state);
            state.node.take()
        };
        self.leader.send_replace(None);
        tracing::info!(why, "leadership ended");
        if let Some(node) = node {
            if let Err(error) = node.release().await {
                tracing::warn!(%error, "deleting the leader node failed; the framework's reaper keeps trying");
            }
        }
        // `node_lost` goes only now, at the end of the scope: after the delete.
    }
}

/// The selector's task: one election per queueing, until closed.
async fn run(shared: Arc<Shared>) {
    let span = tracing::debug_span!("zk_recipes.leader.selector", path = %shared.internals.path(), id = %shared.id);
    async {
        while shared.queued().await {
            if !shared.elect().await {
                break; // the framework closed
            }
        }
        let mut state = shared.state.lock();
        state.term = None;
        state.queued = false;
    }
    .instrument(span)
    .await
}
