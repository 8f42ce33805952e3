//! A session's live mirror of one lock directory: the task that keeps a [`DirView`] current
//! from one persistent recursive watch and one listing per connection, the registry that
//! shares it between every handle and waiter of the session, and the waits on it.
//!
//! - One mirror per (session, directory), kept in the session's shared objects while some
//!   handle holds it; the last handle's drop stops its task (the watcher goes with it).
//! - Per connection: `addWatch` (persistent recursive) and `getChildren2` are sent back to
//!   back; events that arrive before the listing reply are replayed on top of it. The old
//!   connection's watcher is dropped only once the new one exists, so the client sends no
//!   `RemoveWatches` for the directory while the mirror lives (on ZooKeeper 3.6-3.8 one would
//!   remove the recursive watch too).
//! - `Disconnected` makes the view invalid; `SyncConnected` adds the watch again (zookeeper-
//!   client 0.11 never registers persistent watches again by itself) and lists again.
//! - At a terminal session state the task stops without polling the watcher again
//!   (zookeeper-client panics when a watcher is polled after one); waiters then start over on
//!   the next session.
//! - A server that refuses the watch (3.5: `Unimplemented`; the optimized watch manager:
//!   `MarshallingError`) gets no mirror: the handles wait the classic way.
//!
//! Waiters are woken by name: a waiter at the barrier by its own node's created event, a
//! waiter behind a predecessor by that node's deleted event; everyone when the view changes
//! state (invalid, listed again, ended). No waiter is woken by a change that does not concern
//! it.

use std::collections::HashMap;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use tokio::sync::Notify;
use tokio::task::AbortHandle;
use zookeeper_client::{AddWatchMode, EventType, PersistentWatcher, SessionState, Stat, WatchedEvent};

use super::driver::{Driver, Verdict};
use super::mirror_wait::{Admission, Decision, DirEvent, DirView};
use crate::error::{is_zk_connection_error, is_zk_retryable, is_zk_session_lost, ZkError};
use crate::framework::{ConnectionState, Framework, Session};
use crate::path;
use crate::sync::Mutex;

/// The pause before adding the watch again after a connection error.
const RETRY_PAUSE: Duration = Duration::from_millis(50);

/// The name under which waiters for any child's deletion are registered (no child is named
/// so).
const ANY_DELETION: &str = "";

/// The key of a directory's mirror among a session's shared objects.
fn key(dir: &str) -> String {
    format!("lock-mirror:{dir}")
}

/// Where the mirror's task stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Run {
    Running,
    /// The server refused the watch: no mirror on this session.
    Refused,
    /// The session ended (or the client is gone): the task stopped.
    Ended,
}

/// The state the task and the waiters share.
struct State {
    view: DirView,
    run: Run,
    /// Waiters by the child name whose event they wait for.
    by_name: HashMap<String, Vec<(u64, Arc<Notify>)>>,
    /// Waiters that wait for the view to change state.
    anyone: Vec<(u64, Arc<Notify>)>,
    /// Listings sent so far, and the number of the one the view holds.
    sent: u64,
    listed: u64,
    /// A waiter asked for the watch to be added again and the directory listed again.
    resync_wanted: bool,
}

impl State {
    fn wake_name(&mut self, name: &str) {
        for (_, notify) in self.by_name.remove(name).unwrap_or_default() {
            notify.notify_one();
        }
    }

    fn wake_all(&mut self) {
        for (_, notify) in self.anyone.drain(..).chain(self.by_name.drain().flat_map(|(_, w)| w)) {
            notify.notify_one();
        }
    }
}

struct Inner {
    /// The directory's full server path.
    dir: String,
    epoch: u64,
    state: Mutex<State>,
    /// Wakes the task when a waiter wants a resync.
    kick: Notify,
    tickets: AtomicU64,
    /// Handles alive ([`DirMirror`]s).
    handles: AtomicUsize,
    /// While no handle is alive: the mirror itself, kept for [`LINGER`] by the task.
    keep: Mutex<Kept>,
    /// Told by the last handle's drop.
    unused: Notify,
    #[cfg(feature = "testing")]
    hooks: hooks::MirrorHooks,
    /// Whether a watch was added once (for the hook that never adds it again).
    #[cfg(feature = "testing")]
    added_once: std::sync::atomic::AtomicBool,
}

/// What the task keeps of its own mirror.
#[derive(Default)]
struct Kept {
    core: Option<Arc<Core>>,
    /// The task is over: nothing is kept any more (it would never be let go).
    task_over: bool,
}

impl Inner {
    fn update<R>(&self, f: impl FnOnce(&mut State) -> R) -> R {
        f(&mut self.state.lock())
    }
}

/// How long a mirror outlives its last handle: a recipe made afresh for each acquire (a new
/// latch per term, say) finds the session's mirror still running instead of paying one
/// `addWatch` and one listing each time. Meanwhile the session still hears every create and
/// delete in the directory.
const LINGER: Duration = Duration::from_secs(2);

/// One session's mirror of one lock directory (a handle on it); its task stops [`LINGER`]
/// after the last handle is dropped, unless a new handle comes first.
pub(crate) struct DirMirror {
    core: Arc<Core>,
}

/// The mirror the session's registry shares: its state and its task, which stops when this
/// goes.
struct Core {
    inner: Arc<Inner>,
    task: AbortHandle,
}

impl Drop for Core {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl std::fmt::Debug for DirMirror {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let inner = &self.core.inner;
        f.debug_struct("DirMirror").field("dir", &inner.dir).field("epoch", &inner.epoch).finish()
    }
}

impl Drop for DirMirror {
    /// The last handle hands the mirror to its task, which keeps it for [`LINGER`]; nothing
    /// here waits or spawns.
    fn drop(&mut self) {
        let inner = &self.core.inner;
        if inner.handles.fetch_sub(1, Ordering::AcqRel) == 1 {
            let mut kept = inner.keep.lock();
            if !kept.task_over {
                kept.core = Some(self.core.clone());
                inner.unused.notify_one();
            }
        }
    }
}

/// A handle's place for its session's mirror of one directory, shared by the handle's clones
/// and replaced when the session changes.
#[derive(Debug, Default)]
pub(crate) struct MirrorSlot(Mutex<Option<Arc<DirMirror>>>);

impl MirrorSlot {
    /// The session's mirror of `dir` (a full server path), when the session's server is known
    /// to keep it exact (Apache ZooKeeper 3.6+, the watch not refused, not a read-only
    /// connection); `None` means the classic wait.
    pub(crate) fn for_session(&self, framework: &Framework, session: &Session, dir: &str) -> Option<Arc<DirMirror>> {
        let known = framework.server_features_now();
        let exact = known.is_some_and(|f| f.persistent_watches && f.exact_child_count);
        let read_only = session.client.state() == SessionState::ConnectedReadOnly;
        if !exact || read_only || framework.server_refuses_persistent_watches() {
            return None;
        }
        let mut slot = self.0.lock();
        if let Some(mirror) = slot.as_ref().filter(|m| m.epoch() == session.epoch) {
            return (!mirror.is_refused()).then(|| mirror.clone());
        }
        let mirror = DirMirror::for_session(framework, session, dir);
        *slot = Some(mirror.clone());
        Some(mirror)
    }
}

/// What a waiter is to do, from the mirror.
pub(crate) enum Ask {
    /// The lock is ours.
    Acquired,
    /// Our node is gone (deleted, or its session ended): start over.
    Missing,
    /// A sequence wrapped past `i32::MAX`.
    Wrapped,
    /// No mirror on this session: wait the classic way.
    Classic,
    /// Wait for `wake`, then ask again.
    Wait { wake: Wake, on: WaitOn },
}

/// What a waiter waits for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum WaitOn {
    /// Its own node's created event (the barrier).
    Barrier,
    /// The deletion of the node ahead of it.
    Predecessor(String),
    /// The deletion of any child (a semaphore's leases are all taken).
    AnyDeletion,
    /// The view to become valid (a listing is out, or the connection is down).
    Valid,
}

/// A waiter's registration with the mirror; dropping it unregisters.
pub(crate) struct Wake {
    inner: Arc<Inner>,
    /// The child names whose events wake it (none: it waits for the view's state).
    names: Vec<String>,
    ticket: u64,
    notify: Arc<Notify>,
}

impl Wake {
    /// Completes at the next event the waiter registered for. Cancel-safe.
    pub(crate) async fn notified(&self) {
        self.notify.notified().await;
    }
}

impl Drop for Wake {
    fn drop(&mut self) {
        let ticket = self.ticket;
        let mut state = self.inner.state.lock();
        if self.names.is_empty() {
            state.anyone.retain(|(t, _)| *t != ticket);
        }
        for name in &self.names {
            if let Some(list) = state.by_name.get_mut(name) {
                list.retain(|(t, _)| *t != ticket);
                if list.is_empty() {
                    state.by_name.remove(name);
                }
            }
        }
    }
}

/// What the mirror says about a node we created (see [`DirMirror::presence`]).
pub(crate) enum Presence {
    /// In the view: wait for `Wake` (a data change, its deletion, or the view's state).
    Present(Wake),
    /// Deleted.
    Gone,
    /// The view cannot tell yet (broken, being listed, or our create's event not applied):
    /// wait for `Wake`, and ask for a resync if that takes long.
    Unsure(Wake),
    /// The mirror does not run (the server refused its watch, or it ended): watch the node
    /// the classic way.
    Unwatched,
}

/// What a waiter keeps between two questions to the mirror.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Asker {
    /// Listings sent before our create's reply: a later one shows our node if it exists.
    created_after: u64,
    /// Our node was in the view once: its absence now means it was deleted.
    seen: bool,
}

impl DirMirror {
    /// The session's mirror of `dir` (a full server path), started if none is alive.
    pub(crate) fn for_session(framework: &Framework, session: &Session, dir: &str) -> Arc<DirMirror> {
        let core = session.shared.get_or_make(&key(dir), || Self::start(framework, session, dir));
        core.inner.handles.fetch_add(1, Ordering::AcqRel);
        Arc::new(DirMirror { core })
    }

    fn inner(&self) -> &Arc<Inner> {
        &self.core.inner
    }

    fn start(framework: &Framework, session: &Session, dir: &str) -> Arc<Core> {
        #[cfg(feature = "testing")]
        let hooks = hooks::get(dir);
        #[cfg(feature = "testing")]
        let view = {
            let mut view = DirView::new();
            view.set_hooks(hooks.view());
            view
        };
        #[cfg(not(feature = "testing"))]
        let view = DirView::new();
        let state = State {
            view,
            run: Run::Running,
            by_name: HashMap::new(),
            anyone: Vec::new(),
            sent: 0,
            listed: 0,
            resync_wanted: false,
        };
        let inner = Arc::new(Inner {
            dir: dir.to_owned(),
            epoch: session.epoch,
            state: Mutex::new(state),
            kick: Notify::new(),
            tickets: AtomicU64::new(0),
            handles: AtomicUsize::new(0),
            keep: Mutex::new(Kept::default()),
            unused: Notify::new(),
            #[cfg(feature = "testing")]
            hooks,
            #[cfg(feature = "testing")]
            added_once: std::sync::atomic::AtomicBool::new(false),
        });
        let task = tokio::spawn(run(inner.clone(), framework.clone(), session.clone())).abort_handle();
        Arc::new(Core { inner, task })
    }

    /// The session (epoch) this mirror belongs to.
    pub(crate) fn epoch(&self) -> u64 {
        self.inner().epoch
    }

    /// Whether the server refused the watch (the handle then waits the classic way).
    pub(crate) fn is_refused(&self) -> bool {
        self.inner().update(|s| s.run == Run::Refused)
    }

    /// To be called right after our create's reply: what the waiter keeps between questions.
    pub(crate) fn asker(&self) -> Asker {
        Asker { created_after: self.inner().update(|s| s.sent), seen: false }
    }

    /// What the mirror says about our node `own`, with `driver`'s rule; a waiter that is to
    /// wait is registered for the event it waits for (before the state lock is released, so
    /// no event is missed between the question and the wait).
    pub(crate) fn ask(&self, driver: &dyn Driver, own: &str, asker: &mut Asker) -> Ask {
        let mut state = self.inner().state.lock();
        match state.run {
            Run::Refused => return Ask::Classic,
            Run::Ended => return Ask::Missing,
            Run::Running => {}
        }
        let on = match state.view.decide(driver, own) {
            Decision::Verdict(Verdict::Acquired) => {
                asker.seen = true;
                return Ask::Acquired;
            }
            Decision::Verdict(Verdict::Missing) => return Ask::Missing,
            Decision::Wrapped => return Ask::Wrapped,
            Decision::Verdict(Verdict::Watch { node, .. }) => {
                asker.seen = true;
                WaitOn::Predecessor(node)
            }
            Decision::Barrier if asker.seen || state.listed > asker.created_after => return Ask::Missing,
            Decision::Barrier => WaitOn::Barrier,
            Decision::Unknown => WaitOn::Valid,
            Decision::Resync => {
                tracing::debug!(dir = %self.inner().dir, node = own, "the mirror missed a create: listing again");
                #[cfg(feature = "testing")]
                hooks::witness_failed(&self.inner().dir, state.view.take_count_mismatches());
                self.resync(&mut state);
                WaitOn::Valid
            }
        };
        // Behind a predecessor, our own node's deletion wakes us too (start over at once).
        let names = match &on {
            WaitOn::Barrier => vec![own.to_owned()],
            WaitOn::Predecessor(node) => vec![node.clone(), own.to_owned()],
            WaitOn::Valid | WaitOn::AnyDeletion => Vec::new(),
        };
        Ask::Wait { wake: self.register(&mut state, names), on }
    }

    /// What the mirror says about a semaphore's leases `ours` under at most `max` leases
    /// (see [`DirView::admit`]); `driver` gives the leases' sort key (their sequence, for the
    /// witness). A contender that is to wait is registered for the event it waits for: the
    /// create of a lease not in the view yet, or any deletion when all are taken.
    pub(crate) fn admit(&self, driver: &dyn Driver, ours: &[&str], max: usize, asker: &mut Asker) -> Ask {
        let mut state = self.inner().state.lock();
        match state.run {
            Run::Refused => return Ask::Classic,
            Run::Ended => return Ask::Missing,
            Run::Running => {}
        }
        let (on, names) = match state.view.admit(driver, ours, max) {
            Admission::Admitted => {
                asker.seen = true;
                return Ask::Acquired;
            }
            Admission::Full => {
                asker.seen = true;
                (WaitOn::AnyDeletion, vec![ANY_DELETION.to_owned()])
            }
            Admission::Barrier(_) if Self::gone(&state, asker) => return Ask::Missing,
            Admission::Barrier(lease) => (WaitOn::Barrier, vec![lease]),
            Admission::Unknown => (WaitOn::Valid, Vec::new()),
            Admission::Resync => {
                tracing::debug!(dir = %self.inner().dir, "the mirror missed a lease's create: listing again");
                #[cfg(feature = "testing")]
                hooks::witness_failed(&self.inner().dir, state.view.take_count_mismatches());
                self.resync(&mut state);
                (WaitOn::Valid, Vec::new())
            }
        };
        Ask::Wait { wake: self.register(&mut state, names), on }
    }

    /// Whether `n` leases more would fit under `max` now, by the view (a guess: see
    /// [`DirView::has_room`]). False unless the mirror runs and its view is valid.
    pub(crate) fn has_room(&self, n: usize, max: usize) -> bool {
        let state = self.inner().state.lock();
        state.run == Run::Running && state.view.has_room(n, max)
    }

    /// The guess of [`has_room`](Self::has_room) was wrong once the leases were created.
    pub(crate) fn guess_missed(&self) {
        tracing::debug!(dir = %self.inner().dir, "every lease was taken after all: queueing again");
        #[cfg(feature = "testing")]
        hooks::guess_missed(&self.inner().dir);
    }

    /// Test hook: leases are admitted on the guess alone.
    pub(crate) fn skips_lease_check(&self) -> bool {
        #[cfg(feature = "testing")]
        return self.inner().hooks.no_lease_check;
        #[cfg(not(feature = "testing"))]
        false
    }

    /// Registers a waiter for the events of `names` (none: for the view's next change of
    /// state; every waiter is woken by that too).
    fn register(&self, state: &mut State, names: Vec<String>) -> Wake {
        let ticket = self.inner().tickets.fetch_add(1, Ordering::Relaxed);
        let notify = Arc::new(Notify::new());
        if names.is_empty() {
            state.anyone.push((ticket, notify.clone()));
        }
        for name in &names {
            state.by_name.entry(name.clone()).or_default().push((ticket, notify.clone()));
        }
        Wake { inner: self.inner().clone(), names, ticket, notify }
    }

    /// What the mirror says about our node `own`, which exists or existed (created before the
    /// `asker` was made, or held): the holder's question. A holder that is to wait is
    /// registered for its node's events (a data change, the deletion) before the state lock
    /// is released.
    pub(crate) fn presence(&self, own: &str, asker: &mut Asker) -> Presence {
        let mut state = self.inner().state.lock();
        match state.run {
            Run::Refused | Run::Ended => return Presence::Unwatched,
            Run::Running => {}
        }
        if !state.view.is_valid() {
            return Presence::Unsure(self.register(&mut state, Vec::new()));
        }
        if state.view.contains(own) {
            asker.seen = true;
            return Presence::Present(self.register(&mut state, vec![own.to_owned()]));
        }
        if Self::gone(&state, asker) {
            return Presence::Gone;
        }
        // Listed before our create and its event not applied (yet): wait for it.
        Presence::Unsure(self.register(&mut state, vec![own.to_owned()]))
    }

    /// Whether the mirror knows our node `own` is gone, without waiting or registering.
    pub(crate) fn knows_gone(&self, own: &str, asker: &Asker) -> bool {
        let state = self.inner().state.lock();
        state.run == Run::Running && state.view.is_valid() && !state.view.contains(own) && Self::gone(&state, asker)
    }

    /// A valid view without our node proves it gone once the node was in the view, or once
    /// the view comes from a listing sent after our create's reply.
    fn gone(state: &State, asker: &Asker) -> bool {
        asker.seen || state.listed > asker.created_after
    }

    /// Asks the task to add the watch again and list again (a waiter found the view behind).
    pub(crate) fn request_resync(&self) {
        tracing::trace!(dir = %self.inner().dir, "a waiter asks the mirror to list again");
        let mut state = self.inner().state.lock();
        self.resync(&mut state);
    }

    fn resync(&self, state: &mut State) {
        state.view.interrupt();
        state.resync_wanted = true;
        state.wake_all();
        self.inner().kick.notify_one();
    }
}

/// What ends a connection's stretch of the task.
enum Next {
    /// Add the watch again and list again (a reconnect, or a resync asked for).
    Again,
    /// Stop: the session ended, the client is gone, or the server refused the watch.
    Stop,
}

/// The next item of `watcher`, or `None` once the client dropped its end (zookeeper-client
/// panics then; the panic is caught here and ends the mirror).
async fn next_event(inner: &Inner, watcher: &mut PersistentWatcher) -> Option<WatchedEvent> {
    #[cfg(feature = "testing")]
    if inner.hooks.poll_after_terminal {
        return Some(watcher.changed().await);
    }
    #[cfg(not(feature = "testing"))]
    let _ = inner;
    AssertUnwindSafe(watcher.changed()).catch_unwind().await.ok()
}

async fn run(inner: Arc<Inner>, framework: Framework, session: Session) {
    #[cfg(feature = "testing")]
    let _running = hooks::Running::new(&inner.dir);
    let mut watcher: Option<PersistentWatcher> = None;
    let connections = async { while let Next::Again = connection(&inner, &framework, &session, &mut watcher).await {} };
    // Once the framework has given the session up (lost, or replaced by a new one), this task
    // must not keep a clone of its client: the framework ends a session it gave up by letting
    // go of its last clone, which closes it at once (its ephemeral nodes with it); a clone
    // kept here would leave that to a second connection, and to the session's expiry when
    // the ensemble cannot be reached meanwhile.
    let mut states = framework.state_watch();
    let epoch = inner.epoch;
    let given_up = states.wait_for(|s| s.epoch != epoch || s.state == ConnectionState::Lost);
    tokio::select! {
        () = connections => {}
        () = linger(&inner) => {}
        _ = given_up, if !poll_after_terminal(&inner) => {}
    }
    // Never poll the watcher again: drop it (the session is over, or the server holds no
    // watch of ours).
    drop(watcher);
    inner.update(|s| {
        if s.run == Run::Running {
            s.run = Run::Ended;
        }
        s.view.interrupt();
        s.wake_all();
    });
    // Last: letting the kept mirror go may stop this very task.
    let kept = {
        let mut kept = inner.keep.lock();
        kept.task_over = true;
        kept.core.take()
    };
    drop(kept);
}

/// Whether the test hook that keeps polling after the session's end is on.
fn poll_after_terminal(inner: &Inner) -> bool {
    #[cfg(feature = "testing")]
    return inner.hooks.poll_after_terminal;
    #[cfg(not(feature = "testing"))]
    {
        let _ = inner;
        false
    }
}

/// Keeps the mirror [`LINGER`] after its last handle went, then lets it go (which stops this
/// task, unless a handle came back meanwhile and holds it).
async fn linger(inner: &Inner) {
    loop {
        inner.unused.notified().await;
        tokio::time::sleep(LINGER).await;
        // With a handle back, it holds the mirror; without, this lets it go.
        let kept = inner.keep.lock().core.take();
        drop(kept);
    }
}

/// One stretch of the task on one connection: add the watch, list, follow the events.
async fn connection(
    inner: &Inner,
    framework: &Framework,
    session: &Session,
    watcher: &mut Option<PersistentWatcher>,
) -> Next {
    let client = &session.client;
    let dir = inner.dir.as_str();
    #[cfg(feature = "testing")]
    let hooks = inner.hooks;
    #[cfg(not(feature = "testing"))]
    let hooks = hooks_off::Hooks::default();
    // Wait for a connection. The client's state says, not the old watcher's session events:
    // the event that announced this connection may have been taken already (it is what ended
    // the last stretch), and the state may still have read `Disconnected` a moment after it;
    // waiting for another such event then waited for the next fault. The old watcher stays
    // (unpolled) until the new one exists.
    if !is_connected(client.state()) {
        let mut states = client.state_watcher();
        while !is_connected(states.peek_state()) {
            let state = tokio::select! {
                state = states.changed() => state,
                () = session.task_end() => return Next::Stop,
            };
            if state.is_terminated() {
                return Next::Stop;
            }
        }
    }
    // Counted before it is sent: a listing counted after a waiter's create reply is surely
    // sent after it.
    let number = inner.update(|s| {
        s.sent += 1;
        s.resync_wanted = false;
        s.sent
    });
    tracing::trace!(dir, number, "the mirror adds its watch and lists");
    #[cfg(feature = "testing")]
    if hooks.no_readd_after_reconnect && inner.added_once.load(Ordering::SeqCst) {
        {
            // The crate's own behaviour: no watch on the server after a reconnect.
            drop(watcher.take());
            let listing = client.get_children(dir);
            inner.update(|s| s.view.watch_added());
            let listed = listing.await;
            if finish_listing(inner, number, listed).is_err() {
                return Next::Again;
            }
            // No watch on the server: no events; only a resync asked for ends this.
            loop {
                inner.kick.notified().await;
                if inner.update(|s| s.resync_wanted) {
                    return Next::Again;
                }
            }
        }
    }
    type Listing<'a> =
        std::pin::Pin<Box<dyn std::future::Future<Output = Result<(Vec<String>, Stat), ZkError>> + Send + 'a>>;
    let (added, listing): (_, Listing<'_>) = if hooks.list_before_watch {
        // The listing's reply first, then (once the test lets it) the watch.
        let listed = client.get_children(dir).await;
        #[cfg(feature = "testing")]
        hooks::before_watch(dir).await;
        (client.watch(dir, AddWatchMode::PersistentRecursive), Box::pin(std::future::ready(listed)))
    } else {
        let added = client.watch(dir, AddWatchMode::PersistentRecursive);
        (added, Box::pin(client.get_children(dir)))
    };
    let new = match added.await {
        Ok(new) => new,
        Err(e) if is_zk_session_lost(&e) => return Next::Stop,
        Err(e) if is_zk_retryable(&e) => {
            // The connection broke (its events say when it is back) or the server is busy:
            // try again after a pause.
            drop(listing);
            tokio::time::sleep(RETRY_PAUSE).await;
            return Next::Again;
        }
        Err(e) => {
            #[cfg(feature = "testing")]
            if inner.hooks.ignore_refusal {
                inner.update(|s| s.view.watch_added());
                if finish_listing(inner, number, listing.await).is_err() {
                    return Next::Again;
                }
                // No watch on the server: no events; only a resync asked for ends this.
                loop {
                    inner.kick.notified().await;
                    if inner.update(|s| s.resync_wanted) {
                        return Next::Again;
                    }
                }
            }
            tracing::info!(dir, error = %e, "the server refused the lock directory's watch: waiting the classic way");
            framework.note_persistent_watches_refused(inner.epoch);
            inner.update(|s| {
                s.run = Run::Refused;
                s.wake_all();
            });
            return Next::Stop;
        }
    };
    #[cfg(feature = "testing")]
    {
        inner.added_once.store(true, Ordering::SeqCst);
        hooks::watch_added(dir);
    }
    // The new watcher exists: the old one may go without a `RemoveWatches`.
    drop(watcher.replace(new));
    let current = watcher.as_mut().expect("just set");
    if hooks.keep_view_on_disconnect && inner.update(|s| s.view.is_valid()) {
        return follow(inner, session, current).await;
    }
    inner.update(|s| s.view.watch_added());
    let mut listing = std::pin::pin!(listing);
    // Events until the listing's reply are kept for it; those already queued when it is
    // seen answered are replayed on top of it too.
    let listed = loop {
        tokio::select! {
            biased;
            event = next_event(inner, current) => match apply(inner, event) {
                Applied::Event => {}
                Applied::Next(next) => return next,
            },
            reply = &mut listing => {
                while let Some(event) = next_event(inner, current).now_or_never() {
                    if let Applied::Next(next) = apply(inner, event) {
                        return next;
                    }
                }
                break reply;
            }
        }
    };
    let listed = finish_listing(inner, number, listed);
    tracing::trace!(dir, number, ok = listed.is_ok(), "the mirror's listing is in");
    if let Err(e) = listed {
        if !is_zk_connection_error(&e) {
            tracing::info!(dir, error = %e, "the lock directory cannot be listed: waiting the classic way");
            inner.update(|s| {
                s.run = Run::Refused;
                s.wake_all();
            });
            return Next::Stop;
        }
        // The connection broke: its events say when it is back.
    }
    follow(inner, session, current).await
}

/// Follows the events of a valid (or broken) view until a resync or the end.
async fn follow(inner: &Inner, session: &Session, current: &mut PersistentWatcher) -> Next {
    loop {
        tokio::select! {
            biased;
            () = session.task_end(), if !poll_after_terminal(inner) => return Next::Stop,
            event = next_event(inner, current) => {
                #[cfg(feature = "testing")]
                if let Some(delay) = inner.hooks.event_delay {
                    tokio::time::sleep(delay).await;
                }
                #[cfg(feature = "testing")]
                hooks::events_released(&inner.dir).await;
                if let Applied::Next(next) = apply(inner, event) {
                    return next;
                }
            }
            () = inner.kick.notified() => {
                if inner.update(|s| s.resync_wanted) {
                    return Next::Again;
                }
            }
        }
    }
}

fn is_connected(state: SessionState) -> bool {
    matches!(state, SessionState::SyncConnected | SessionState::ConnectedReadOnly)
}

/// What applying one item of the watcher did.
enum Applied {
    Event,
    Next(Next),
}

fn apply(inner: &Inner, event: Option<WatchedEvent>) -> Applied {
    let Some(event) = event else { return Applied::Next(Next::Stop) };
    #[cfg(feature = "testing")]
    let hooks = inner.hooks;
    #[cfg(not(feature = "testing"))]
    let hooks = hooks_off::Hooks::default();
    let dir_event = match event.event_type {
        EventType::Session => match event.session_state {
            state if state.is_terminated() && !hooks.poll_after_terminal => return Applied::Next(Next::Stop),
            SessionState::Disconnected => {
                if !hooks.keep_view_on_disconnect {
                    inner.update(|s| {
                        s.view.interrupt();
                        s.wake_all();
                    });
                }
                return Applied::Event;
            }
            SessionState::SyncConnected | SessionState::ConnectedReadOnly => return Applied::Next(Next::Again),
            _ => return Applied::Event,
        },
        EventType::NodeCreated if event.path == inner.dir => DirEvent::DirCreated,
        EventType::NodeDeleted if event.path == inner.dir => DirEvent::DirDeleted,
        EventType::NodeCreated | EventType::NodeDeleted => {
            let Some(name) = child_name(&inner.dir, &event.path) else { return Applied::Event };
            if event.event_type == EventType::NodeCreated {
                DirEvent::ChildCreated(name.to_owned())
            } else {
                DirEvent::ChildDeleted(name.to_owned())
            }
        }
        EventType::NodeDataChanged => {
            // A holder re-reads its node (a revocation request is a data change).
            if let Some(name) = child_name(&inner.dir, &event.path) {
                inner.update(|s| s.wake_name(name));
            }
            return Applied::Event;
        }
        EventType::NodeChildrenChanged => return Applied::Event,
    };
    inner.update(|s| {
        let valid = s.view.is_valid();
        let name = match &dir_event {
            DirEvent::ChildCreated(name) | DirEvent::ChildDeleted(name) => Some(name.clone()),
            DirEvent::DirCreated | DirEvent::DirDeleted => None,
        };
        let deleted = matches!(dir_event, DirEvent::ChildDeleted(_));
        s.view.event(dir_event);
        match name {
            Some(name) if s.view.is_valid() == valid => {
                if deleted {
                    s.wake_name(ANY_DELETION);
                }
                s.wake_name(&name);
                Applied::Event
            }
            _ if valid && !s.view.is_valid() => {
                // The event contradicts the view: list again.
                tracing::warn!(dir = %inner.dir, "a watch event contradicts the lock directory's mirror: listing again");
                s.wake_all();
                Applied::Next(Next::Again)
            }
            _ => {
                s.wake_all();
                Applied::Event
            }
        }
    })
}

/// Applies the listing's reply (number `number`); the error when it failed.
fn finish_listing(inner: &Inner, number: u64, reply: Result<(Vec<String>, Stat), ZkError>) -> Result<(), ZkError> {
    inner.update(|s| {
        let result = match reply {
            Ok((children, stat)) => {
                s.view.listed(children, stat.cversion, stat.num_children);
                Ok(())
            }
            Err(ZkError::NoNode) => {
                s.view.listed_missing();
                Ok(())
            }
            Err(e) => {
                s.view.interrupt();
                Err(e)
            }
        };
        if s.view.is_valid() {
            s.listed = number;
        }
        s.wake_all();
        result
    })
}

/// The name of `path` if it is a direct child of `dir`.
fn child_name<'a>(dir: &str, path: &'a str) -> Option<&'a str> {
    (path::parent(path)? == dir).then(|| path::node_name(path)).filter(|name| !name.is_empty())
}

#[cfg(not(feature = "testing"))]
mod hooks_off {
    #[derive(Default, Clone, Copy)]
    pub(super) struct Hooks {
        pub(super) keep_view_on_disconnect: bool,
        pub(super) list_before_watch: bool,
        pub(super) poll_after_terminal: bool,
    }
}

/// Conditions of the mirror-based wait that a test can turn off for one lock directory, to
/// show what each guards against, and whether a directory's mirror task is running.
#[cfg(feature = "testing")]
pub(crate) mod hooks {
    use std::collections::HashMap;
    use std::sync::OnceLock;
    use std::time::Duration;

    use crate::sync::Mutex;

    /// What to turn off (all `false`: the library as shipped).
    #[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
    pub struct MirrorHooks {
        /// Decide before our own node is in the view (no barrier).
        pub no_barrier: bool,
        /// Take a node that entered by its event without checking the create count.
        pub no_witness: bool,
        /// Keep counting creates across the directory's deletion and creation (the count
        /// the witness checks then never matches a new incarnation's suffixes).
        pub no_count_reset: bool,
        /// Keep the view through a disconnection, and only add the watch again after it (no
        /// invalidation, no listing).
        pub keep_view_on_disconnect: bool,
        /// After the first watch, list again without ever adding the watch again (as
        /// zookeeper-client leaves it after a reconnect: the server holds no watch).
        pub no_readd_after_reconnect: bool,
        /// List before adding the watch: the listing's reply first, then the watch, once
        /// [`allow_mirror_watch`] lets it (see [`mirror_listings_held`]).
        pub list_before_watch: bool,
        /// Apply each event of a valid view this much later.
        pub event_delay: Option<Duration>,
        /// Take a watch the server refused as added: list, and decide from the listing as
        /// if events would follow (none do).
        pub ignore_refusal: bool,
        /// Admit a semaphore's leases on the guess made when the internal lock was granted
        /// (the leases' mirror had room), without waiting for them in the view and counting
        /// again after their creates.
        pub no_lease_check: bool,
        /// Keep polling the watcher after the session ended: no stop at a terminal state, at
        /// the end of the client's task or when the framework gives the session up, and no
        /// guard around the poll (zookeeper-client's watcher panics once its session's
        /// channel is gone).
        pub poll_after_terminal: bool,
    }

    impl MirrorHooks {
        pub(crate) fn view(&self) -> super::super::mirror_wait::Hooks {
            super::super::mirror_wait::Hooks {
                no_barrier: self.no_barrier,
                no_witness: self.no_witness,
                no_count_reset: self.no_count_reset,
            }
        }
    }

    #[derive(Default)]
    struct Table {
        hooks: HashMap<String, MirrorHooks>,
        running: HashMap<String, usize>,
        /// Listings made with `list_before_watch`, and watches let through after them.
        held: HashMap<String, usize>,
        allowed: HashMap<String, usize>,
        /// Watches added.
        added: HashMap<String, usize>,
        /// Decisions the witness refused because the create count did not match.
        witness_failures: HashMap<String, usize>,
        /// Semaphore admissions whose guess of room was wrong once the leases were created.
        guesses_missed: HashMap<String, usize>,
        /// Directories whose mirrors apply no event for now.
        holding: std::collections::HashSet<String>,
    }

    fn table() -> &'static Mutex<Table> {
        static TABLE: OnceLock<Mutex<Table>> = OnceLock::new();
        TABLE.get_or_init(|| Mutex::new(Table::default()))
    }

    fn released() -> &'static tokio::sync::Notify {
        static RELEASED: OnceLock<tokio::sync::Notify> = OnceLock::new();
        RELEASED.get_or_init(tokio::sync::Notify::new)
    }

    /// While `hold` is true, the running mirrors of `dir` (full server path) take the events
    /// of their valid views and apply none of them; once it is false again they apply them,
    /// in order. A view that lags behind the server for exactly as long as a test wants.
    pub fn hold_mirror_events(dir: &str, hold: bool) {
        let mut table = table().lock();
        if hold {
            table.holding.insert(dir.to_owned());
        } else {
            table.holding.remove(dir);
            released().notify_waiters();
        }
        ANY_HELD.store(!table.holding.is_empty(), std::sync::atomic::Ordering::SeqCst);
    }

    /// Some directory's events are held: only then does a mirror look at the table for each
    /// event (the benches run with this feature too).
    static ANY_HELD: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

    pub(crate) async fn events_released(dir: &str) {
        if !ANY_HELD.load(std::sync::atomic::Ordering::SeqCst) {
            return;
        }
        loop {
            // Created before the check: `notify_waiters` reaches it from here on.
            let notified = released().notified();
            if !table().lock().holding.contains(dir) {
                return;
            }
            notified.await;
        }
    }

    fn allowed() -> &'static tokio::sync::Notify {
        static ALLOWED: OnceLock<tokio::sync::Notify> = OnceLock::new();
        ALLOWED.get_or_init(tokio::sync::Notify::new)
    }

    /// With `list_before_watch`: how many listings of `dir` (full server path) a mirror has
    /// made and then held its watch back after.
    pub fn mirror_listings_held(dir: &str) -> usize {
        table().lock().held.get(dir).copied().unwrap_or(0)
    }

    /// With `list_before_watch`: lets one held watch of `dir` be added.
    pub fn allow_mirror_watch(dir: &str) {
        *table().lock().allowed.entry(dir.to_owned()).or_default() += 1;
        allowed().notify_waiters();
    }

    /// How many watches mirrors of `dir` have added.
    pub fn mirror_watches_added(dir: &str) -> usize {
        table().lock().added.get(dir).copied().unwrap_or(0)
    }

    pub(crate) async fn before_watch(dir: &str) {
        let mine = {
            let mut table = table().lock();
            let held = table.held.entry(dir.to_owned()).or_default();
            *held += 1;
            *held
        };
        loop {
            // Created before the check: `notify_waiters` reaches it from here on.
            let notified = allowed().notified();
            if table().lock().allowed.get(dir).copied().unwrap_or(0) >= mine {
                return;
            }
            notified.await;
        }
    }

    /// How many times a decision on a mirror of `dir` (full server path) found that the
    /// creates counted since the listing did not match our node's sequence (the witness
    /// failing) while the count was exact. Not counted: a node whose create came while the
    /// directory was being listed (not witnessed by design), and a count known to be low
    /// (a create right after a listing's reply taken among the events before it).
    pub fn mirror_witness_failures(dir: &str) -> usize {
        table().lock().witness_failures.get(dir).copied().unwrap_or(0)
    }

    /// How many times a semaphore contender on a mirror of the lease directory `dir` (full
    /// server path) released the internal lock with its lease create, on a guess of room,
    /// and then found every lease taken (it deleted its lease and queued again).
    pub fn mirror_lease_guesses_missed(dir: &str) -> usize {
        table().lock().guesses_missed.get(dir).copied().unwrap_or(0)
    }

    pub(crate) fn guess_missed(dir: &str) {
        *table().lock().guesses_missed.entry(dir.to_owned()).or_default() += 1;
    }

    pub(crate) fn witness_failed(dir: &str, mismatches: usize) {
        *table().lock().witness_failures.entry(dir.to_owned()).or_default() += mismatches;
    }

    pub(crate) fn watch_added(dir: &str) {
        *table().lock().added.entry(dir.to_owned()).or_default() += 1;
    }

    /// Sets the hooks of the lock directory `dir` (its full server path, namespace included)
    /// for mirrors started from now on.
    pub fn set_mirror_hooks(dir: &str, hooks: MirrorHooks) {
        table().lock().hooks.insert(dir.to_owned(), hooks);
    }

    /// How many mirror tasks of the lock directory `dir` (full server path) are running.
    pub fn mirror_tasks_running(dir: &str) -> usize {
        table().lock().running.get(dir).copied().unwrap_or(0)
    }

    pub(crate) fn get(dir: &str) -> MirrorHooks {
        table().lock().hooks.get(dir).copied().unwrap_or_default()
    }

    /// Counts a running task while it lives.
    pub(crate) struct Running(String);

    impl Running {
        pub(crate) fn new(dir: &str) -> Self {
            *table().lock().running.entry(dir.to_owned()).or_default() += 1;
            Running(dir.to_owned())
        }
    }

    impl Drop for Running {
        fn drop(&mut self) {
            if let Some(n) = table().lock().running.get_mut(&self.0) {
                *n = n.saturating_sub(1);
            }
        }
    }
}
