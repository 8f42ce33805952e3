//! What a framework's handles share with its background tasks (which hold it weakly): the
//! configuration, the current session, the state channels, the reaper's queue, the lifecycle
//! (built, starting, started, closed) and the state manager's heartbeat.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{broadcast, watch};
use tokio::task::AbortHandle;
use zookeeper_client::Client;

use super::builder::Config;
use super::ensemble::{self, Tracked};
use super::errors::Observer;
use super::heartbeat::{Freshness, Heartbeat};
use super::reaper::{ReaperCmd, ReaperHandle, Receiver, Sessions};
use super::registry::Registry;
use super::session::{ClientKey, Session};
use super::state::{ConnectionState, StateSnapshot};
use crate::error::{Error, Result};
use crate::framework::metrics::{FrameworkMetrics, Labels};
use crate::sync::Mutex;

pub(crate) struct Inner {
    pub(crate) config: Config,
    session: Mutex<Option<Session>>,
    state_tx: watch::Sender<StateSnapshot>,
    events_tx: Mutex<Option<broadcast::Sender<StateSnapshot>>>,
    reaper: ReaperHandle,
    lifecycle: Mutex<Lifecycle>,
    /// The state manager's heartbeat, for noticing a starved runtime without its help.
    heartbeat: Heartbeat,
    /// The data plane's state: what the server supports, the live persistent watches.
    pub(crate) registry: Arc<Registry>,
    /// The ensemble's membership as last seen.
    pub(crate) ensemble: Tracked,
    /// Metrics and background errors, shared with the background work.
    pub(crate) observer: Arc<Observer>,
}

enum Lifecycle {
    Built,
    Starting,
    Started { tasks: Vec<AbortHandle>, runtime: tokio::runtime::Handle },
    Closed,
}

/// A `start()` under way: the lifecycle says `Starting` until [`Inner::finish_start`] or
/// until it is dropped (a failed or cancelled start), which puts it back to `Built`.
#[must_use]
pub(crate) struct StartAttempt<'a> {
    inner: &'a Inner,
    armed: bool,
}

impl StartAttempt<'_> {
    /// The start went through (or lost to `close()`): nothing to put back.
    fn disarm(mut self) {
        self.armed = false;
    }
}

impl Drop for StartAttempt<'_> {
    fn drop(&mut self) {
        if self.armed {
            let mut lifecycle = self.inner.lifecycle.lock();
            if matches!(*lifecycle, Lifecycle::Starting) {
                *lifecycle = Lifecycle::Built;
            }
        }
    }
}

impl crate::retry::Ends for Inner {
    fn has_ended(&self) -> bool {
        self.is_closed()
    }

    fn retrying(&self) {
        self.observer.metrics.retry();
    }
}

impl Sessions for Inner {
    fn client_of(&self, epoch: u64) -> Option<Client> {
        Inner::client_of(self, epoch)
    }

    fn current_client(&self) -> Result<Client, bool> {
        // While `close()` waits for the pending deletes its session is still here.
        match self.session.lock().as_ref() {
            Some(session) => Ok(session.client.clone()),
            None => Err(self.is_closed()),
        }
    }
}

impl Inner {
    pub(crate) fn new(config: Config) -> Inner {
        let (state_tx, _) =
            watch::channel(StateSnapshot { state: ConnectionState::Suspended, session_id: 0, epoch: 0 });
        let (events_tx, _) = broadcast::channel(config.event_capacity);
        let metrics = FrameworkMetrics::new(Labels::new(config.metrics_name.as_deref(), config.metrics_path_labels));
        let observer = Arc::new(Observer::new(metrics, config.event_capacity));
        Inner {
            observer,
            config,
            session: Mutex::new(None),
            state_tx,
            events_tx: Mutex::new(Some(events_tx)),
            reaper: ReaperHandle::new(),
            lifecycle: Mutex::new(Lifecycle::Built),
            heartbeat: Heartbeat::new(),
            registry: Arc::default(),
            ensemble: Tracked::default(),
        }
    }

    /// The connect string the next connection uses (see [`ensemble::connect_string`]).
    pub(crate) fn connect_string(&self) -> String {
        let tracked = self.ensemble.current();
        ensemble::connect_string(
            &self.config.connect_string,
            self.config.ensemble_tracking,
            self.ensemble.followed(),
            tracked.as_ref(),
        )
    }

    pub(crate) fn is_closed(&self) -> bool {
        matches!(*self.lifecycle.lock(), Lifecycle::Closed)
    }

    /// Marks the framework starting. `Ok(None)` when it is started already.
    ///
    /// # Errors
    /// [`Error::Closed`] after `close()`; [`Error::InvalidArgument`] while another `start()`
    /// is under way.
    pub(crate) fn begin_start(&self) -> Result<Option<StartAttempt<'_>>> {
        let mut lifecycle = self.lifecycle.lock();
        match *lifecycle {
            Lifecycle::Closed => Err(Error::Closed),
            Lifecycle::Started { .. } => Ok(None),
            Lifecycle::Starting => Err(Error::invalid_argument("start", "another start() is in progress")),
            Lifecycle::Built => {
                *lifecycle = Lifecycle::Starting;
                Ok(Some(StartAttempt { inner: self, armed: true }))
            }
        }
    }

    /// Completes a start: installs the first session, publishes `first`, and starts the
    /// background tasks (`spawn` is given the reaper's queue and returns their handles), all
    /// under the lifecycle's lock, so that a `close()` either came before (and wins: the
    /// session is dropped, nothing is spawned) or comes after and stops what was started.
    ///
    /// # Errors
    /// [`Error::Closed`] when `close()` was called while the session was being opened.
    pub(crate) fn finish_start(
        &self,
        attempt: StartAttempt<'_>,
        session: Session,
        timing: (Duration, Duration),
        first: ConnectionState,
        spawn: impl FnOnce(Receiver) -> Vec<AbortHandle>,
    ) -> Result<()> {
        let mut lifecycle = self.lifecycle.lock();
        attempt.disarm();
        if !matches!(*lifecycle, Lifecycle::Starting) {
            return Err(Error::Closed);
        }
        let (stall, vouched_for) = timing;
        self.heartbeat.start(stall, vouched_for);
        *self.session.lock() = Some(session);
        self.observer.metrics.session_opened();
        self.publish(first, vouched_for);
        let tasks = spawn(self.reaper.take_receiver());
        *lifecycle = Lifecycle::Started { tasks, runtime: tokio::runtime::Handle::current() };
        Ok(())
    }

    /// Marks the framework closed; the background tasks to stop, when it was started.
    pub(crate) fn begin_close(&self) -> Option<Vec<AbortHandle>> {
        let mut lifecycle = self.lifecycle.lock();
        match std::mem::replace(&mut *lifecycle, Lifecycle::Closed) {
            Lifecycle::Started { tasks, .. } => Some(tasks),
            _ => None,
        }
    }

    /// Takes the session away after `close()`, ends the streams and listeners, and publishes
    /// `Lost`, which wakes every waiting acquire (it then fails with `Closed`) and every guard's
    /// `lost()`.
    pub(crate) fn finish_close(&self) -> Option<Session> {
        let session = self.session.lock().take();
        self.events_tx.lock().take();
        self.observer.close();
        self.state_tx.send_modify(|s| s.state = ConnectionState::Lost);
        session
    }

    /// The runtime the framework was started on, while it is started; `Err(Closed)` once it
    /// is closed.
    pub(crate) fn runtime(&self) -> Result<Option<tokio::runtime::Handle>> {
        match &*self.lifecycle.lock() {
            Lifecycle::Closed => Err(Error::Closed),
            Lifecycle::Started { runtime, .. } => Ok(Some(runtime.clone())),
            _ => Ok(None),
        }
    }

    /// The current session, or why there is none.
    pub(crate) fn session(&self) -> Result<Session> {
        if let Some(session) = self.session.lock().as_ref() {
            return Ok(session.clone());
        }
        if self.is_closed() {
            Err(Error::Closed)
        } else {
            Err(Error::NotStarted)
        }
    }

    /// The current session's epoch (0 when there is none).
    pub(crate) fn epoch(&self) -> u64 {
        self.session.lock().as_ref().map_or(0, |s| s.epoch)
    }

    /// Whether, as of `snapshot`, the session `key` names is served by another, connected
    /// client: the framework moved it away from the client `key` names.
    pub(crate) fn left(&self, snapshot: &StateSnapshot, key: &ClientKey) -> bool {
        let epoch = key.epoch();
        snapshot.epoch == epoch
            && snapshot.state.is_connected()
            && self.session().is_ok_and(|now| now.epoch == epoch && !now.is_client(key))
    }

    /// The client of session `epoch`, if that is still the current session.
    pub(crate) fn client_of(&self, epoch: u64) -> Option<Client> {
        let session = self.session.lock();
        session.as_ref().filter(|s| s.epoch == epoch).map(|s| s.client.clone())
    }

    /// Makes `session` the current one; the heartbeat may be at most `stall` late from now on,
    /// and the session is vouched for during `vouched_for`. False (and the session is dropped,
    /// which closes it) when the framework was closed meanwhile: a session opened while
    /// `close()` ran must not outlive it.
    pub(crate) fn install_session(&self, session: Session, stall: Duration, vouched_for: Duration) -> bool {
        let lifecycle = self.lifecycle.lock();
        if matches!(*lifecycle, Lifecycle::Closed) {
            return false;
        }
        self.heartbeat.start(stall, vouched_for);
        *self.session.lock() = Some(session);
        self.observer.metrics.session_opened();
        true
    }

    /// Makes `moved` (the current session on another client) the current session; false when
    /// the current session is another one, or the framework was closed meanwhile.
    pub(crate) fn replace_client(&self, moved: Session) -> bool {
        let lifecycle = self.lifecycle.lock();
        if matches!(*lifecycle, Lifecycle::Closed) {
            return false;
        }
        let mut session = self.session.lock();
        match session.as_mut() {
            Some(current) if current.epoch == moved.epoch => {
                *current = moved;
                true
            }
            _ => false,
        }
    }

    /// The state manager ran now and vouches for the session during `vouched_for`.
    pub(crate) fn beat(&self, vouched_for: Duration) {
        self.heartbeat.beat(vouched_for);
    }

    /// The published snapshot as the framework can vouch for it now: a connected state reads
    /// `Suspended` while the state manager is late, and any state reads `Lost` once the last
    /// contact it vouched for is a session timeout old, or once the client's task serving the
    /// session is gone.
    pub(crate) fn snapshot(&self) -> StateSnapshot {
        let mut snapshot = *self.state_tx.borrow();
        if snapshot.epoch == 0 || snapshot.state == ConnectionState::Lost {
            return snapshot;
        }
        let task_ended = self.session.lock().as_ref().is_some_and(|s| s.epoch == snapshot.epoch && s.task_ended());
        match self.heartbeat.freshness() {
            _ if task_ended => snapshot.state = ConnectionState::Lost,
            Freshness::Expired => snapshot.state = ConnectionState::Lost,
            Freshness::Late if snapshot.state.is_connected() => snapshot.state = ConnectionState::Suspended,
            _ => {}
        }
        snapshot
    }

    /// A `watch` receiver of the published snapshot.
    pub(crate) fn subscribe_state(&self) -> watch::Receiver<StateSnapshot> {
        self.state_tx.subscribe()
    }

    /// A receiver of every transition from now on; `None` once closed.
    pub(crate) fn subscribe_events(&self) -> Option<broadcast::Receiver<StateSnapshot>> {
        self.events_tx.lock().as_ref().map(broadcast::Sender::subscribe)
    }

    /// Publishes `state` for the current session to the watch, the stream and the listeners;
    /// the session is vouched for during `vouched_for` from now. A connected state is vouched
    /// for before it is published, any other after, so that no reader sees a connected state
    /// with an old deadline or an error state with a fresh one out of order.
    pub(crate) fn publish(&self, state: ConnectionState, vouched_for: Duration) {
        let (session_id, epoch) = self.session.lock().as_ref().map_or((0, 0), |s| (s.id(), s.epoch));
        let snapshot = StateSnapshot { state, session_id, epoch };
        if state.is_connected() {
            self.heartbeat.beat(vouched_for);
        }
        tracing::info!(state = ?state, session = format_args!("{session_id:#x}"), epoch, "connection state changed");
        let previous = *self.state_tx.borrow();
        self.observer.metrics.state_changed(state, epoch, (previous.state, previous.epoch));
        self.state_tx.send_replace(snapshot);
        if !state.is_connected() {
            self.heartbeat.beat(vouched_for);
        }
        if let Some(tx) = self.events_tx.lock().as_ref() {
            let _ = tx.send(snapshot);
        }
    }

    /// Publishes the id of `session` once it is learned (after a read-only start the client's
    /// own id is stale; see [`Session::id`]): the current snapshot's `session_id` is updated
    /// in place when `session` is still the current one. It is not a state transition, so
    /// streams and listeners are not told.
    pub(crate) fn note_session_id(&self, session: &Session) {
        let id = session.id();
        if id == 0 {
            return;
        }
        self.state_tx.send_if_modified(|snapshot| {
            let stale = snapshot.epoch == session.epoch && snapshot.session_id != id;
            if stale {
                snapshot.session_id = id;
            }
            stale
        });
    }

    /// Hands a background delete to the reaper. Never blocks, never needs a runtime.
    pub(crate) fn reap(&self, cmd: ReaperCmd) {
        self.reaper.send(cmd);
    }

    /// How many background deletes are in progress.
    pub(crate) fn pending_deletes(&self) -> usize {
        self.reaper.pending()
    }

    /// Waits (at most `timeout`) until no background delete is pending; false on timeout.
    pub(crate) async fn flush_deletes(&self, timeout: Duration) -> bool {
        tokio::time::timeout(timeout, self.reaper.flush()).await.is_ok()
    }
}
