//! A session's live mirror of one lock directory, and the waits on it: a [`DirHost`] kept
//! current by the crate's one mirror driver over one session watch (persistent recursive, on
//! the directory, bound to the session), shared by every handle and waiter of the session
//! while one holds it and two seconds after the last one goes (`mirror/shared.rs`).
//!
//! The driver adds the watch and lists the directory in one round trip, after every reconnect
//! too (a disconnection makes the view invalid until then); a waiter that finds the view
//! behind (a failed witness, a contradicting event) has the watch added again and the
//! directory listed again. The mirror ends with its session: its waiters start over on the
//! next one. A server that refuses the watch, a framework that watches the directory in the
//! other mode, a read-only connection, a refused listing (`NoAuth`) or an unusable count leave
//! the directory to the classic wait; a listing that fails otherwise (`Throttled`,
//! `SessionMoved`, a lost connection) is tried again after a pause.
//!
//! Waiters are woken by name: at the barrier by their own node's created event, behind a
//! predecessor by its deleted event; everyone when the view changes state.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};

use tokio::sync::{watch, Notify};

use super::mirror_wait::{Admission, Decision, DirHost, Run, ANY_DELETION};
use crate::framework::metrics::{MirrorMetrics, Resyncs};
use crate::framework::{Framework, Session, WatchMode};
use crate::mirror::driver::{self as mirror_driver, Host};
use crate::mirror::shared::Shared;
use crate::mirror::Reads;
use crate::protocol::driver::{Driver, Verdict};
use crate::sync::Mutex;
use crate::watch::probe::{probe, Inspect};
use crate::watch::{Bound, SessionWatch};

/// The mirror's shared parts: the host the driver updates, and what waiters wait on.
struct Inner {
    /// The directory's full server path.
    dir: String,
    epoch: u64,
    state: Mutex<DirHost>,
    /// Wakes the driver when a waiter wants the watch added again.
    kick: Notify,
    tickets: AtomicU64,
}

impl Host<DirHost> for Inner {
    fn update(&self, f: &mut dyn FnMut(&mut DirHost)) {
        f(&mut self.state.lock());
    }

    fn kick(&self) -> Option<&Notify> {
        Some(&self.kick)
    }
}

impl Inspect for Inner {
    fn retained(&self) -> usize {
        self.state.lock().view.retained()
    }
}

/// One session's mirror of one lock directory (a handle on it, see `mirror/shared.rs`).
pub(crate) struct DirMirror {
    shared: Shared<Inner>,
}

impl std::fmt::Debug for DirMirror {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let inner = self.inner();
        f.debug_struct("DirMirror").field("dir", &inner.dir).field("epoch", &inner.epoch).finish()
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
    /// So many sessions share the directory that mirroring it costs more than it saves: wait
    /// the classic way (and stop mirroring it).
    Crowded,
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
        self.inner.state.lock().unregister(self.ticket, &self.names);
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
    /// The mirror does not run (refused, or ended): watch the node the classic way.
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
    /// The session's mirror of `dir` (a full server path), started if none runs.
    pub(super) fn for_session(framework: &Framework, session: &Session, dir: &str) -> Arc<DirMirror> {
        let key = format!("lock-mirror:{dir}");
        let usable = |inner: &Inner| inner.state.lock().run != Run::Ended;
        let shared = Shared::get_or_start(session, &key, usable, || Self::start(framework, session, dir));
        Arc::new(DirMirror { shared })
    }

    /// The session's running mirror of `dir`, if any (none is started).
    pub(super) fn running(session: &Session, dir: &str) -> Option<DirMirror> {
        let key = format!("lock-mirror:{dir}");
        let shared = Shared::get(session, &key, |inner: &Inner| inner.state.lock().run == Run::Running)?;
        Some(DirMirror { shared })
    }

    fn inner(&self) -> &Arc<Inner> {
        self.shared.host()
    }

    /// A mirror's host, and its driver unless the watch is refused from the start (a server
    /// known to refuse persistent watches, or a framework that watches the directory in the
    /// other mode).
    fn start(
        framework: &Framework,
        session: &Session,
        dir: &str,
    ) -> (Arc<Inner>, Option<impl std::future::Future<Output = ()> + Send + 'static>) {
        let watch =
            SessionWatch::new(framework, Some(session.clone()), dir, WatchMode::PersistentRecursive, Bound::Session);
        if let Err(error) = &watch {
            tracing::info!(dir, %error, "no mirror of the lock directory: waiting the classic way");
        }
        let run = if watch.is_ok() { Run::Running } else { Run::Refused };
        let inner = Arc::new(Inner {
            dir: dir.to_owned(),
            epoch: session.epoch,
            state: Mutex::new(DirHost::new(dir, run, probe().ablations(dir))),
            kick: Notify::new(),
            tickets: AtomicU64::new(0),
        });
        let driver = watch.ok().map(|watch| drive(inner.clone(), framework.clone(), watch));
        (inner, driver)
    }

    /// The session (epoch) this mirror belongs to.
    /// The directory mirrored (a full server path).
    pub(super) fn dir(&self) -> &str {
        &self.inner().dir
    }

    /// Stops the mirror as soon as no handle of the session uses it, without lingering.
    pub(super) fn let_go_without_linger(&self) {
        self.shared.let_go_without_linger();
    }

    pub(crate) fn epoch(&self) -> u64 {
        self.inner().epoch
    }

    pub(super) fn run(&self) -> Run {
        self.inner().state.lock().run
    }

    /// To be called right after our create's reply: what the waiter keeps between questions.
    pub(crate) fn asker(&self) -> Asker {
        Asker { created_after: self.inner().state.lock().sent, seen: false }
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
        state.note_own(own);
        let on = match state.view.decide(driver, own) {
            Decision::Verdict(Verdict::Acquired) => {
                asker.seen = true;
                return Ask::Acquired;
            }
            Decision::Verdict(Verdict::Missing) => return Ask::Missing,
            Decision::Wrapped => return Ask::Wrapped,
            Decision::Verdict(Verdict::Watch { .. }) if state.crowded() => {
                asker.seen = true;
                return Ask::Crowded;
            }
            Decision::Verdict(Verdict::Watch { node, .. }) => {
                asker.seen = true;
                WaitOn::Predecessor(node)
            }
            Decision::Barrier if Self::gone(&state, asker) => return Ask::Missing,
            Decision::Barrier => WaitOn::Barrier,
            Decision::Unknown => WaitOn::Valid,
            Decision::Resync => {
                tracing::debug!(dir = %self.inner().dir, node = own, "the mirror missed a create: listing again");
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
        probe().lease_guess_missed(&self.inner().dir);
    }

    /// A test's seam: leases are admitted on the guess alone.
    pub(crate) fn skips_lease_check(&self) -> bool {
        self.inner().state.lock().ablations.no_lease_check
    }

    /// Registers a waiter for the events of `names` (none: for the view's next change of
    /// state; every waiter is woken by that too).
    fn register(&self, state: &mut DirHost, names: Vec<String>) -> Wake {
        let ticket = self.inner().tickets.fetch_add(1, Ordering::Relaxed);
        let notify = Arc::new(Notify::new());
        state.register(ticket, &names, &notify);
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
    fn gone(state: &DirHost, asker: &Asker) -> bool {
        asker.seen || state.listed > asker.created_after
    }

    /// Asks the driver to add the watch again and list again (a waiter found the view behind).
    pub(crate) fn request_resync(&self) {
        tracing::trace!(dir = %self.inner().dir, "a waiter asks the mirror to list again");
        let mut state = self.inner().state.lock();
        self.resync(&mut state);
    }

    fn resync(&self, state: &mut DirHost) {
        let mismatches = state.view.take_count_mismatches();
        if mismatches > 0 {
            probe().witness_failed(&state.dir, mismatches);
        }
        state.relist();
        self.inner().kick.notify_one();
    }
}

/// The mirror's driver, until its session ends (or the mirror is let go: then this is
/// dropped).
async fn drive(inner: Arc<Inner>, framework: Framework, watch: SessionWatch) {
    let weak: Weak<dyn Inspect> = Arc::downgrade(&inner) as Weak<dyn Inspect>;
    let _running = probe().mirror_started(&inner.dir, weak);
    let metrics = MirrorMetrics::new(&framework.observer().metrics.labels, framework.unfix_path(&inner.dir));
    let _alive = metrics.alive();
    let report = mirror_driver::Report {
        observer: framework.observer().clone(),
        recipe: "lock_mirror",
        resyncs: Resyncs::Mirror(metrics),
    };
    let config = mirror_driver::Config {
        root: inner.dir.clone(),
        reads: Reads::Stat,
        decode: Arc::new(|_: &str, _: Vec<u8>| None),
        concurrency: 1,
        report,
        no_multi_read: std::sync::atomic::AtomicBool::new(false),
    };
    // Never stopped from outside: the driver ends with the watch, or is dropped.
    let (_stop, stopped) = watch::channel(false);
    mirror_driver::run::<DirHost, _>(framework, inner.clone(), watch, config, stopped).await;
    inner.state.lock().stop(Run::Ended);
}
