//! [`SessionWatch`]: one persistent (or persistent recursive) watch kept on the framework's
//! session, polled by its owner.
//!
//! The server drops a session's persistent watches when its connection breaks, and
//! zookeeper-client 0.11 never adds them again on a reconnect (its watch reset sends the
//! one-shot watches only); a new session has none either. So this watch adds itself again:
//! - after every reconnect of the session (it reads the client's own `SyncConnected`, in
//!   order with the node events) and on every new session (it follows the framework's
//!   state), and when the framework's watch table asks for it (a one-shot watch that may have
//!   silenced it went away);
//! - once the framework is connected, retrying a failed add with one pause policy (50 ms
//!   doubling to 1 s, or at once when the connection changes);
//! - dropping the old watcher only once the new one exists, so that the client sends no
//!   `RemoveWatches` for the path meanwhile;
//! - never polling a watcher again after its session ended (zookeeper-client's watcher
//!   panics then).
//!
//! One read-only rule: a watch may be added on a read-only connection (the server keeps it);
//! a client that leaves a read-only server for a read-write one starts a new session there,
//! so that resync says [`ResyncReason::NewSession`]. Owners that must not decide on a
//! read-only connection (the lock mirror) ask [`SessionWatch::read_only`].
//!
//! It is a plain struct, not a task: the owner polls [`next`](SessionWatch::next), so a watch
//! event and the reply of a read the owner sent on the same session reach the owner in the
//! order the server sent them (zookeeper-client queues an event for its watcher before it
//! hands over a reply that came after it). That order is what every owner's exactness rests
//! on: a reply reflects every change whose event was queued before it was handed over.
//!
//! Items, in server order: node events; [`WatchItem::Interrupted`] when events may be missed
//! from here on; [`WatchItem::Adding`] when the add is on its way (a read sent from now on, on
//! [`client`](SessionWatch::client), is answered after the watch is in place: an owner can
//! send its resync reads in the same round trip); then [`WatchItem::Resync`] once the server
//! accepted it (or `Interrupted` again, if it did not).
//!
//! Every watch is entered in the framework's watch table when made (see
//! `framework/watch_table.rs`): this file is the only one in the crate that adds a persistent
//! watch on the client.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::time::Duration;

use futures::FutureExt;
use tokio::sync::watch as latest;
use zookeeper_client::{Client, EventType, PersistentWatcher, SessionState, WatchedEvent};

use super::oneshot::{Depth, Emulated};
use super::probe::{probe, Ablations};
use crate::error::{is_zk_retryable, Error, Result, ZkError};
use crate::framework::metrics::Op;
use crate::framework::BackgroundErrorKind;
use crate::framework::{Framework, Registered, Session, StateSnapshot, WatchMode, WeakFramework};
use crate::retry::{Doubling, RetryPolicy};

/// The pause between failed attempts to add the watch: the one policy of every watch.
pub(super) const PAUSE: Doubling = Doubling { first: Duration::from_millis(50), max: Duration::from_secs(1) };

/// Why events may have been missed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ResyncReason {
    /// The connection was lost and came back on the same session: changes made while it was
    /// down were not reported (ZooKeeper does not replay them to persistent watches).
    Reconnected,
    /// The session ended and a new one began: everything since the last event of the old
    /// session may have been missed, ephemeral nodes of the old session are gone.
    NewSession,
    /// The watch was registered again on the same connection, because another kind of watch
    /// this framework set on the same path may have silenced it (see the crate docs,
    /// "Watches").
    Rearmed,
    /// The consumer of a [`PersistentWatch`](crate::PersistentWatch) fell a whole buffer
    /// behind: the events that came while the buffer was full were dropped (a stream that
    /// nobody reads keeps no growing queue).
    Lagged,
}

/// Which session a watch follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Bound {
    /// The framework's current session, moving to every new one.
    Follow,
    /// One session (an epoch): the watch ends with it (the lock mirror's view belongs to one
    /// session, whose nodes it judges).
    Session,
}

/// An item of a [`SessionWatch`].
#[derive(Debug)]
pub(crate) enum WatchItem {
    /// A node changed (the server's full path).
    Event(WatchedEvent),
    /// The connection broke, or the session ended: events from here to the next `Resync` may
    /// be missing.
    Interrupted,
    /// The add is on its way on [`SessionWatch::client`]'s connection: reads sent there from
    /// now on are answered after it. `Resync` (or `Interrupted`) follows.
    Adding,
    /// The watch is in place (again): every change from here on is reported. `None` for the
    /// first add.
    Resync(Option<ResyncReason>),
    /// The watch cannot be had: the server refused it (`Unimplemented` on a server without
    /// persistent watches), or the path. The watch is over.
    Refused(Error),
}

/// A future that owns what it borrows (an add on the client).
type Adding = Pin<Box<dyn Future<Output = std::result::Result<PersistentWatcher, ZkError>> + Send>>;

/// What woke a live watch.
enum Wake {
    TaskEnd,
    /// The watcher's next item (`None`: its client is gone).
    Event(Option<WatchedEvent>),
    Rearm,
    /// The framework's state changed (`false`: the framework is gone).
    State(bool),
}

enum Phase {
    /// A resync to report.
    Announce(Option<ResyncReason>),
    /// The watch is in place: read its events.
    Live,
    /// The watch must be added (again), after `pause`.
    Need {
        reason: Option<ResyncReason>,
        pause: Duration,
    },
    /// The add was sent.
    Adding {
        reason: Option<ResyncReason>,
        epoch: u64,
        future: Adding,
    },
    Over,
}

/// One persistent watch, kept on the framework's session (see the module docs).
pub(crate) struct SessionWatch {
    weak: WeakFramework,
    full_path: String,
    mode: WatchMode,
    bound: Bound,
    /// The session of the watcher (or, with [`Bound::Session`], of the watch); let go when it
    /// ends.
    session: Option<Session>,
    /// That session's epoch (kept after it is let go).
    epoch: u64,
    watcher: Option<PersistentWatcher>,
    read_only: bool,
    states: latest::Receiver<StateSnapshot>,
    entry: Registered,
    phase: Phase,
    attempt: u32,
    ablations: Ablations,
    added_once: bool,
    /// Whether a refusal to add the watch again is a background error: for an owner with no
    /// way on without it ([`Framework::watch`]'s stream); the recipes fall back on their own.
    reports_refusal: bool,
    /// The watch's session ended: the next add waits for a new one.
    new_session_needed: bool,
    /// Where the server has no persistent watches, one-shot watches to this depth stand in
    /// (`None`: the refusal ends the watch).
    fallback: Option<Depth>,
    /// The stand-in, once the server refused the persistent watch (`oneshot.rs`): every item
    /// comes from it from then on.
    emulated: Option<Box<Emulated>>,
}

impl std::fmt::Debug for SessionWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionWatch")
            .field("path", &self.full_path)
            .field("mode", &self.mode)
            .field("epoch", &self.epoch())
            .finish_non_exhaustive()
    }
}

impl SessionWatch {
    /// A watch on `full_path` (namespace included), entered in the framework's table; nothing
    /// is sent yet: the first [`next`](Self::next) sends the add (and says
    /// [`WatchItem::Adding`]). With [`Bound::Session`], the watch belongs to `session`.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when the framework already watches the path in the other
    /// mode; `Unimplemented` (as [`Error::ZooKeeper`]) when the session's server is known to
    /// refuse persistent watches.
    pub(crate) fn new(
        framework: &Framework,
        session: Option<Session>,
        full_path: &str,
        mode: WatchMode,
        bound: Bound,
    ) -> Result<SessionWatch> {
        if framework.server_refuses_persistent_watches() {
            return Err(ZkError::Unimplemented.into());
        }
        let entry = framework.enter_persistent_watch(full_path, mode)?;
        let states = framework.state_watch();
        let read_only = session.as_ref().is_some_and(|s| s.client.state() == SessionState::ConnectedReadOnly);
        Ok(SessionWatch {
            weak: framework.downgrade(),
            full_path: full_path.to_owned(),
            mode,
            bound,
            epoch: session.as_ref().map_or(0, |s| s.epoch),
            session,
            watcher: None,
            read_only,
            states,
            entry,
            phase: Phase::Need { reason: None, pause: Duration::ZERO },
            attempt: 0,
            ablations: probe().ablations(full_path),
            added_once: false,
            reports_refusal: false,
            new_session_needed: false,
            fallback: None,
            emulated: None,
        })
    }

    /// A watch as [`add`](Self::add) makes it, except that on a server without persistent
    /// watches (ZooKeeper 3.5, or `WatchManagerOptimized`) it is emulated with one-shot
    /// watches down to `depth` (see `oneshot.rs`), and so it is if the framework moves to such
    /// a server later. The emulated watch's first item is `Resync(None)` once its watches are
    /// set. For owners that keep the latest state (the caches): an emulated watch may fold
    /// quick changes into one event.
    ///
    /// # Errors
    /// As [`add`](Self::add), except the refusal of persistent watches.
    pub(crate) async fn add_or_emulate(
        framework: &Framework,
        full_path: &str,
        mode: WatchMode,
        depth: Depth,
    ) -> Result<SessionWatch> {
        if !framework.server_refuses_persistent_watches() {
            match SessionWatch::add(framework, full_path, mode).await {
                Ok(mut watch) => {
                    watch.fallback = Some(depth);
                    return Ok(watch);
                }
                Err(Error::ZooKeeper(ZkError::Unimplemented)) if framework.server_refuses_persistent_watches() => {}
                Err(e) => return Err(e),
            }
        }
        let entry = framework.enter_persistent_watch(full_path, mode)?;
        let states = framework.state_watch();
        Ok(SessionWatch {
            weak: framework.downgrade(),
            full_path: full_path.to_owned(),
            mode,
            bound: Bound::Follow,
            epoch: 0,
            session: None,
            watcher: None,
            read_only: false,
            states,
            entry,
            phase: Phase::Over,
            attempt: 0,
            ablations: probe().ablations(full_path),
            added_once: false,
            reports_refusal: false,
            new_session_needed: false,
            fallback: Some(depth),
            emulated: Some(Box::new(Emulated::new(framework, full_path, depth, None))),
        })
    }

    /// Goes on with one-shot watches (the server refused the persistent watch, and the owner
    /// allows it); `false` when it does not.
    fn emulate(&mut self, reason: Option<ResyncReason>) -> bool {
        let (Some(depth), Some(framework)) = (self.fallback, self.weak.upgrade()) else { return false };
        self.watcher = None;
        self.session = None;
        self.phase = Phase::Over;
        self.emulated = Some(Box::new(Emulated::new(&framework, &self.full_path, depth, reason)));
        true
    }

    /// A watch added now on the framework's current session, trying again under the
    /// framework's retry policy (for callers that report a refusal at once: `Framework::watch`,
    /// a cache's `start()`). Its first item is `Resync(None)`.
    ///
    /// # Errors
    /// As [`new`](Self::new); `Unimplemented` when the server refuses the watch; the
    /// framework's errors ([`Error::NotStarted`], [`Error::Closed`], connection errors once
    /// the retry policy gives up).
    pub(crate) async fn add(framework: &Framework, full_path: &str, mode: WatchMode) -> Result<SessionWatch> {
        let mut watch = SessionWatch::new(framework, None, full_path, mode, Bound::Follow)?;
        let (session, watcher) = framework
            .with_retry(|session: Session| async move {
                framework.observer().request(Op::AddWatch);
                let watcher = session.client.watch(full_path, mode.into()).await;
                watcher.map(|w| (session, w))
            })
            .await
            .map_err(|e| framework.note_refusal(e, framework.epoch()))?;
        probe().watch_added(full_path);
        watch.read_only = session.client.state() == SessionState::ConnectedReadOnly;
        watch.epoch = session.epoch;
        watch.session = Some(session);
        watch.watcher = Some(watcher);
        watch.added_once = true;
        watch.phase = Phase::Announce(None);
        watch.states.mark_changed();
        Ok(watch)
    }

    /// Makes a refusal to add the watch again a background error (`WatchNotReAdded`), for an
    /// owner that has no way on without the watch.
    pub(crate) fn report_refusal(&mut self) {
        self.reports_refusal = true;
    }

    /// The watched path (full).
    pub(crate) fn full_path(&self) -> &str {
        &self.full_path
    }

    /// The epoch of the session the watch is (being) added on; 0 before the first add.
    pub(crate) fn epoch(&self) -> u64 {
        match &self.emulated {
            Some(emulated) => emulated.epoch(),
            None => self.epoch,
        }
    }

    /// The client of the watch's session, for reads that must be ordered with its events.
    pub(crate) fn client(&self) -> Option<&Client> {
        match &self.emulated {
            Some(emulated) => emulated.client(),
            None => self.session.as_ref().map(|s| &s.client),
        }
    }

    /// Whether the watch is in place now and reports every change.
    pub(crate) fn is_live(&self) -> bool {
        if let Some(emulated) = &self.emulated {
            return emulated.is_live();
        }
        matches!(self.phase, Phase::Live | Phase::Announce(_))
            && self.watcher.is_some()
            && self.weak.upgrade().is_some_and(|fw| fw.epoch() == self.epoch())
    }

    /// [`is_live`](Self::is_live), for owners that poll instead of calling
    /// [`next`](Self::next): a request of the watch table to add the watch again (a one-shot
    /// watch may have silenced it) is taken here, and the watch is then not live until it is
    /// added again.
    pub(crate) fn is_live_now(&mut self) -> bool {
        self.take_rearm(None);
        self.is_live()
    }

    /// Takes a request of the watch table to add the watch again, if there is one (`cx`, if
    /// given, is woken by the next one).
    fn take_rearm(&mut self, cx: Option<&mut std::task::Context<'_>>) {
        if self.entry.take_rearm(cx) {
            tracing::debug!(path = %self.full_path, "watch: adding it again (a one-shot watch may have silenced it)");
            self.rearm();
        }
    }

    /// Asks for the watch to be added again on the same connection (yields `Interrupted`,
    /// then `Adding` and `Resync(Some(Rearmed))`), as the watch table does when a one-shot
    /// watch may have silenced it.
    pub(crate) fn rearm(&mut self) {
        if let Some(emulated) = &mut self.emulated {
            emulated.rearm();
            return;
        }
        if matches!(self.phase, Phase::Live | Phase::Announce(_)) {
            self.phase = Phase::Need { reason: Some(ResyncReason::Rearmed), pause: Duration::ZERO };
        }
    }

    /// The watch's next node event if one is queued; `Ready(None)` once the watch is not live
    /// (its connection broke, its session ended: the owner adds a new watch), `Pending` (with
    /// `cx` registered) otherwise. For owners that poll under a lock of their own; the watch
    /// is not added again by this.
    pub(crate) fn poll_event(&mut self, cx: &mut std::task::Context<'_>) -> std::task::Poll<Option<WatchedEvent>> {
        use std::task::Poll;
        self.take_rearm(Some(cx));
        if !self.is_live() || self.emulated.is_some() {
            return Poll::Ready(None);
        }
        let Some(watcher) = self.watcher.as_mut() else { return Poll::Ready(None) };
        let polled = std::pin::pin!(AssertUnwindSafe(watcher.changed()).catch_unwind()).poll(cx);
        let event = match polled {
            Poll::Ready(Ok(event)) => event,
            Poll::Ready(Err(_)) => {
                self.watcher = None;
                return Poll::Ready(None);
            }
            Poll::Pending => return Poll::Pending,
        };
        if event.event_type == EventType::Session {
            self.broken_by(event);
            return Poll::Ready(None);
        }
        Poll::Ready(Some(event))
    }

    /// The node events queued now, without waiting and without adding anything: empty when
    /// the watch is not live.
    pub(crate) fn queued(&mut self) -> Vec<WatchedEvent> {
        let mut events = Vec::new();
        while self.is_live_now() && self.emulated.is_none() {
            let Some(watcher) = self.watcher.as_mut() else { break };
            let Some(Ok(event)) = AssertUnwindSafe(watcher.changed()).catch_unwind().now_or_never() else {
                break;
            };
            if event.event_type == EventType::Session {
                self.broken_by(event);
                break;
            }
            events.push(event);
        }
        events
    }

    /// The next item; `None` once the watch is over (the framework closed or was dropped, the
    /// bound session ended, or after `Refused`).
    ///
    /// # Cancel safety
    /// Cancel-safe: every wait is on a queue or a stored future; a cancelled call loses
    /// nothing.
    pub(crate) async fn next(&mut self) -> Option<WatchItem> {
        loop {
            if let Some(emulated) = &mut self.emulated {
                return emulated.next().await;
            }
            match &mut self.phase {
                Phase::Over => return None,
                Phase::Announce(reason) => {
                    let reason = *reason;
                    self.phase = Phase::Live;
                    return Some(WatchItem::Resync(reason));
                }
                Phase::Live => {
                    if let Some(item) = self.live().await {
                        return Some(item);
                    }
                }
                Phase::Need { reason, pause } => {
                    let (reason, pause) = (*reason, *pause);
                    if !pause.is_zero() {
                        tokio::select! {
                            () = tokio::time::sleep(pause) => {}
                            changed = self.states.changed() => if changed.is_err() {
                                self.phase = Phase::Over;
                                continue;
                            },
                        }
                        if let Phase::Need { pause, .. } = &mut self.phase {
                            *pause = Duration::ZERO;
                        }
                    }
                    if let Some(item) = self.send_add(reason).await {
                        return Some(item);
                    }
                }
                Phase::Adding { future, .. } => {
                    let result = future.await;
                    let Phase::Adding { reason, epoch, .. } = std::mem::replace(&mut self.phase, Phase::Over) else {
                        unreachable!("the phase was Adding")
                    };
                    return Some(self.added(result, reason, epoch));
                }
            }
        }
    }

    /// Reads the watcher's next event; `None` when the loop is to go on in another phase.
    async fn live(&mut self) -> Option<WatchItem> {
        let poll_after_terminal = self.ablations.poll_after_terminal;
        let wake = {
            let watcher = self.watcher.as_mut();
            let event = async move {
                match watcher {
                    Some(watcher) if poll_after_terminal => Some(watcher.changed().await),
                    // zookeeper-client panics when a watcher is polled after its session's
                    // channel is gone: that ends the watch too.
                    Some(watcher) => AssertUnwindSafe(watcher.changed()).catch_unwind().await.ok(),
                    None => std::future::pending().await,
                }
            };
            let task_end = match (&self.session, self.bound) {
                (Some(session), Bound::Session) if !poll_after_terminal => session.task_end().left_future(),
                _ => std::future::pending().right_future(),
            };
            let entry = &self.entry;
            let states = &mut self.states;
            tokio::select! {
                biased;
                () = task_end => Wake::TaskEnd,
                event = event => Wake::Event(event),
                () = entry.rearm_wanted() => Wake::Rearm,
                changed = states.changed() => Wake::State(changed.is_ok()),
            }
        };
        match wake {
            Wake::TaskEnd => {
                self.end();
                Some(WatchItem::Interrupted)
            }
            Wake::Event(None) => {
                // The client is gone.
                self.watcher = None;
                self.session_ended();
                Some(WatchItem::Interrupted)
            }
            Wake::Event(Some(event)) if event.event_type == EventType::Session => self.break_on(event),
            Wake::Event(Some(event)) => Some(WatchItem::Event(event)),
            Wake::Rearm => {
                tracing::debug!(path = %self.full_path, "watch: adding it again (a one-shot watch may have silenced it)");
                self.rearm();
                Some(WatchItem::Interrupted)
            }
            Wake::State(false) => {
                self.phase = Phase::Over;
                None
            }
            Wake::State(true) => {
                let snapshot = *self.states.borrow_and_update();
                let Some(framework) = self.weak.upgrade() else {
                    self.end();
                    return None;
                };
                if framework.is_closed() {
                    self.end();
                    return Some(WatchItem::Interrupted);
                }
                let epoch = self.epoch();
                let moved = snapshot.epoch == epoch
                    && snapshot.state.is_connected()
                    && self.session.as_ref().is_some_and(|own| {
                        framework.session().is_ok_and(|current| current.epoch == epoch && !current.same_client(own))
                    });
                if moved {
                    // The session moved to another client (its servers left the ensemble):
                    // the old client's watcher is never polled again; the watch is added on
                    // the new one.
                    self.watcher = None;
                    self.phase = Phase::Need { reason: Some(ResyncReason::Reconnected), pause: Duration::ZERO };
                    return Some(WatchItem::Interrupted);
                }
                match self.bound {
                    Bound::Session if snapshot.session_over(epoch) && !poll_after_terminal => {
                        self.end();
                        Some(WatchItem::Interrupted)
                    }
                    Bound::Follow if snapshot.epoch != epoch && snapshot.epoch != 0 => {
                        // The old session's watcher is never polled again.
                        self.watcher = None;
                        self.session_ended();
                        Some(WatchItem::Interrupted)
                    }
                    _ => None,
                }
            }
        }
    }

    /// The watch's session ended (its watcher is gone): a bound watch ends, a following one
    /// waits for the next session.
    fn session_ended(&mut self) {
        match self.bound {
            Bound::Session => self.end(),
            Bound::Follow => {
                // Its client is let go: the framework closes a session it gave up by dropping
                // its last clone.
                self.session = None;
                self.new_session_needed = true;
                self.phase = Phase::Need { reason: Some(ResyncReason::NewSession), pause: Duration::ZERO };
            }
        }
    }

    /// A session event read by an owner that polls the watcher itself: any of them breaks the
    /// watch (the owner adds a new one; the old watcher stays until this is dropped, so no
    /// `RemoveWatches` goes out meanwhile).
    fn broken_by(&mut self, event: WatchedEvent) {
        self.break_on(event);
        if matches!(self.phase, Phase::Live | Phase::Announce(_)) {
            self.phase = Phase::Need { reason: Some(ResyncReason::Reconnected), pause: Duration::ZERO };
        }
    }

    /// A session event on the watcher.
    fn break_on(&mut self, event: WatchedEvent) -> Option<WatchItem> {
        match event.session_state {
            SessionState::Disconnected => Some(WatchItem::Interrupted),
            // A new connection: the server holds no watch for us. A session that was
            // read-only gets a new session (with the same client) at its first read-write
            // server.
            connected @ (SessionState::SyncConnected | SessionState::ConnectedReadOnly) => {
                let left_read_only = self.read_only && connected == SessionState::SyncConnected;
                self.read_only = connected == SessionState::ConnectedReadOnly;
                let reason = if left_read_only { ResyncReason::NewSession } else { ResyncReason::Reconnected };
                self.phase = Phase::Need { reason: Some(reason), pause: Duration::ZERO };
                None
            }
            state if state.is_terminated() && !self.ablations.poll_after_terminal => {
                // Never poll this watcher again.
                self.watcher = None;
                self.session_ended();
                Some(WatchItem::Interrupted)
            }
            _ => None,
        }
    }

    /// Ends the watch: nothing more is polled, and the session's client is let go (a session
    /// the framework gave up must not be kept open by a clone held here).
    fn end(&mut self) {
        self.phase = Phase::Over;
        self.watcher = None;
        self.session = None;
    }

    /// Sends the add on the session it is to be on, once connected; `None` while the loop is
    /// to go on (it waited for a state change, or the session ended).
    async fn send_add(&mut self, mut reason: Option<ResyncReason>) -> Option<WatchItem> {
        let Some(framework) = self.weak.upgrade() else {
            self.end();
            return None;
        };
        if framework.is_closed() {
            self.end();
            return None;
        }
        if framework.server_refuses_persistent_watches() && !self.ablations.ignore_refusal {
            if self.reports_refusal && self.added_once {
                // A watch that was in place cannot be had again, and its owner has no way on.
                let kind = BackgroundErrorKind::WatchNotReAdded;
                framework.observer().error("watch", kind, &self.full_path, ZkError::Unimplemented);
            }
            drop(framework);
            if self.emulate(reason) {
                return None;
            }
            self.end();
            return Some(WatchItem::Refused(ZkError::Unimplemented.into()));
        }
        let snapshot = *self.states.borrow_and_update();
        let session = match self.bound {
            Bound::Session => {
                let Some(session) = self.session.clone() else {
                    self.end();
                    return None;
                };
                // The session on the client it is served by now (it may have moved).
                let session = match framework.session() {
                    Ok(current) if current.epoch == session.epoch => current,
                    _ => session,
                };
                if snapshot.session_over(session.epoch) || session.task_ended() {
                    self.end();
                    return Some(WatchItem::Interrupted);
                }
                session
            }
            Bound::Follow => match framework.session() {
                Ok(session) => session,
                Err(Error::Closed) => {
                    self.end();
                    return None;
                }
                Err(_) => {
                    drop(framework);
                    return self.wait_for_state().await;
                }
            },
        };
        drop(framework);
        if self.new_session_needed && session.epoch == self.epoch {
            // The framework has not opened the next session yet.
            return self.wait_for_state().await;
        }
        let state = session.client.state();
        if !matches!(state, SessionState::SyncConnected | SessionState::ConnectedReadOnly) {
            return self.wait_for_connection(&session).await;
        }
        self.new_session_needed = false;
        self.read_only = state == SessionState::ConnectedReadOnly;
        let new_session = session.epoch != self.epoch;
        if new_session {
            // The old session's watcher is never polled again.
            self.watcher = None;
            // Whatever broke the watch first (a connection that came back, then went again),
            // its owner is on another session now: ephemeral nodes of the old one are gone.
            if self.added_once {
                reason = Some(ResyncReason::NewSession);
            }
        }
        let epoch = session.epoch;
        self.epoch = epoch;
        if self.ablations.no_readd_after_reconnect && self.added_once {
            // A test's seam: a resync with no watch on the server, as zookeeper-client
            // leaves a reconnected session.
            self.watcher = None;
            self.session = Some(session);
            self.phase = Phase::Announce(reason);
            return Some(WatchItem::Adding);
        }
        let client = session.client.clone();
        self.session = Some(session);
        let (path, mode) = (self.full_path.clone(), self.mode);
        if new_session && self.added_once && !self.read_only {
            // ZooKeeper keeps one session's reads in order across its reconnects (a server
            // behind what the session has seen refuses it), not across sessions: a new one
            // may be served by a follower behind the state the owner read on the last. A sync
            // sent ahead of the add (the client sends a request when it is called) holds the
            // add and every read behind it until that server has caught up with the leader,
            // so the owner's view never goes back in time. Its reply is of no use.
            if let Some(framework) = self.weak.upgrade() {
                framework.observer().request(Op::Sync);
            }
            drop(client.sync(&path));
        }
        if let Some(framework) = self.weak.upgrade() {
            framework.observer().request(Op::AddWatch);
        }
        let mut future: Adding = Box::pin(async move { client.watch(&path, mode.into()).await });
        // The first poll writes the request (the client sends it when called), so that
        // reads the owner sends after `Adding` go out behind it.
        if let Some(result) = (&mut future).now_or_never() {
            return Some(self.added(result, reason, epoch));
        }
        self.phase = Phase::Adding { reason, epoch, future };
        Some(WatchItem::Adding)
    }

    /// Waits until the framework's state changes (no session yet).
    async fn wait_for_state(&mut self) -> Option<WatchItem> {
        if self.states.changed().await.is_err() {
            self.phase = Phase::Over;
        }
        None
    }

    /// Waits until `session`'s client is connected (or the framework's state changes).
    async fn wait_for_connection(&mut self, session: &Session) -> Option<WatchItem> {
        // The watcher first, then its state: a connection made in between is not waited for.
        let mut client_states = session.client.state_watcher();
        let state = client_states.peek_state();
        if matches!(state, SessionState::SyncConnected | SessionState::ConnectedReadOnly) {
            return None;
        }
        let ended = state.is_terminated() || session.task_ended();
        if !ended {
            let task_end = session.task_end();
            tokio::select! {
                state = client_states.changed() => if !state.is_terminated() { return None },
                changed = self.states.changed() => {
                    if changed.is_err() {
                        self.phase = Phase::Over;
                    }
                    return None;
                }
                () = task_end => {}
            }
        }
        // The session is over.
        if self.bound == Bound::Session {
            self.end();
            return Some(WatchItem::Interrupted);
        }
        self.watcher = None;
        self.session_ended();
        self.wait_for_state().await
    }

    /// The add's outcome.
    fn added(
        &mut self,
        result: std::result::Result<PersistentWatcher, ZkError>,
        reason: Option<ResyncReason>,
        epoch: u64,
    ) -> WatchItem {
        match result {
            Ok(watcher) => {
                probe().watch_added(&self.full_path);
                tracing::debug!(path = %self.full_path, ?reason, epoch, "watch added");
                // The old watcher goes only now: with the new one in place on the same client,
                // its drop sends no RemoveWatches.
                drop(self.watcher.replace(watcher));
                self.added_once = true;
                self.attempt = 0;
                self.phase = Phase::Live;
                WatchItem::Resync(reason)
            }
            Err(e) if self.weak.upgrade().map_or(true, |framework| framework.is_closed()) => {
                // The framework closed under the add (its client ended, whatever it answered):
                // the watch is over, which is no refusal.
                tracing::debug!(path = %self.full_path, error = %e, "the framework closed while the watch was added");
                self.end();
                WatchItem::Interrupted
            }
            Err(e) if refuses_persistent_watches(&e) && self.ablations.ignore_refusal => {
                // A test's seam: the refusal taken as an add (no watch on the server).
                self.phase = Phase::Live;
                WatchItem::Resync(reason)
            }
            Err(e) if refuses_persistent_watches(&e) => {
                if let Some(framework) = self.weak.upgrade() {
                    framework.note_persistent_watches_refused(epoch);
                    if self.reports_refusal && self.added_once {
                        let kind = BackgroundErrorKind::WatchNotReAdded;
                        framework.observer().error("watch", kind, &self.full_path, e.clone());
                    }
                }
                tracing::info!(path = %self.full_path, error = %e, "the server refused the persistent watch");
                if self.emulate(reason) {
                    return WatchItem::Interrupted;
                }
                self.end();
                WatchItem::Refused(ZkError::Unimplemented.into())
            }
            Err(e) if is_zk_retryable(&e) || crate::error::is_zk_session_lost(&e) => {
                // The connection broke (its events say when it is back), the session ended,
                // or the server is busy: try again after a pause.
                tracing::debug!(path = %self.full_path, error = %e, "adding the watch failed; trying again");
                let pause = PAUSE.next_delay(self.attempt, Duration::ZERO).unwrap_or_default();
                self.attempt = self.attempt.saturating_add(1);
                if self.bound == Bound::Session && crate::error::is_zk_session_lost(&e) {
                    self.end();
                } else {
                    self.phase = Phase::Need { reason, pause };
                }
                WatchItem::Interrupted
            }
            Err(e) => {
                tracing::warn!(path = %self.full_path, error = %e, "the server refused the watch");
                if let Some(framework) = self.weak.upgrade().filter(|_| self.added_once) {
                    let kind = BackgroundErrorKind::WatchNotReAdded;
                    framework.observer().error("watch", kind, &self.full_path, e.clone());
                }
                self.end();
                WatchItem::Refused(e.into())
            }
        }
    }
}

/// Whether an `addWatch` error means the server has no persistent watches (3.5 answers
/// `Unimplemented`; a server with `WatchManagerOptimized`, `MarshallingError`).
pub(crate) fn refuses_persistent_watches(error: &ZkError) -> bool {
    matches!(error, ZkError::Unimplemented | ZkError::MarshallingError)
}

impl Framework {
    /// Records a refused `addWatch` for the session it was sent on; every refusal of the
    /// feature is reported as `Unimplemented`.
    pub(crate) fn note_refusal(&self, error: Error, epoch: u64) -> Error {
        match error {
            Error::ZooKeeper(e) if refuses_persistent_watches(&e) => {
                self.note_persistent_watches_refused(epoch);
                ZkError::Unimplemented.into()
            }
            other => other,
        }
    }
}
