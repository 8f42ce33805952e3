//! The connection manager: [`Framework`] owns the ZooKeeper session, publishes connection
//! states, opens a new session after expiry, and deletes lock nodes reliably in the background.
//!
//! Inside, three kinds of private task run per started framework: the state manager (turns the
//! client's session states into [`ConnectionState`]s and replaces expired sessions), the reaper
//! (guaranteed deletes), and one task per registered listener.

mod builder;
mod create;
mod listener;
mod listings;
mod ops;
mod read;
mod reaper;
mod session;
mod state;
mod state_manager;
mod transaction;
mod write;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{broadcast, watch};
use tokio::task::AbortHandle;

pub(crate) use self::builder::Config;
pub use self::builder::{AclProvider, FixedAclProvider, FrameworkBuilder, OpenAclProvider};
pub use self::create::{CreateBuilder, Created, Parents};
pub use self::listener::{ConnectionStateListener, ConnectionStateStream, ListenerHandle};
pub(crate) use self::listings::Listing;
pub use self::read::{
    Exists, ExistsWatched, GetChildren, GetChildrenWatched, GetChildrenWithStat, GetData, GetDataWatched, NodeEvent,
    OneshotWatch,
};
pub(crate) use self::reaper::ReaperCmd;
use self::reaper::ReaperHandle;
pub(crate) use self::session::Session;
pub use self::state::{ConnectionState, ConnectionStateErrorPolicy, StateSnapshot};
pub use self::transaction::{Fence, OpResult, Transaction};
pub use self::write::{Delete, SetData};
use crate::error::{Error, Result};
use crate::sync::Mutex;

/// A ZooKeeper connection manager (Curator's `CuratorFramework`): a cheap `Clone` handle.
///
/// ```no_run
/// # async fn example() -> zk_recipes::Result<()> {
/// use std::time::Duration;
/// use zk_recipes::Framework;
///
/// let framework = Framework::builder("127.0.0.1:2181")
///     .session_timeout(Duration::from_secs(10))
///     .start()
///     .await?;
/// assert!(framework.state().is_connected());
/// framework.close().await;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Framework {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Framework {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Framework")
            .field("connect_string", &self.inner.config.connect_string)
            .field("namespace", &self.inner.config.namespace)
            .field("snapshot", &self.snapshot())
            .finish()
    }
}

/// What the handle shares with the framework's tasks (which hold it weakly).
pub(crate) struct Inner {
    pub(crate) config: Config,
    session: Mutex<Option<Session>>,
    state_tx: watch::Sender<StateSnapshot>,
    events_tx: Mutex<Option<broadcast::Sender<StateSnapshot>>>,
    reaper: ReaperHandle,
    lifecycle: Mutex<Lifecycle>,
    /// The state manager's heartbeat, for noticing a starved runtime without its help.
    heartbeat: Heartbeat,
}

/// When the state manager last ran, in real time, and how late that may be before the
/// framework's view of the connection counts as out of date.
struct Heartbeat {
    base: std::time::Instant,
    /// Milliseconds since `base` of the last beat.
    last: AtomicU64,
    /// The stall limit in milliseconds; 0 while no session exists.
    limit: AtomicU64,
}

impl Heartbeat {
    fn new() -> Heartbeat {
        Heartbeat { base: std::time::Instant::now(), last: AtomicU64::new(0), limit: AtomicU64::new(0) }
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.base.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    fn beat(&self) {
        self.last.store(self.now_ms(), Ordering::Release);
    }

    fn set_limit(&self, limit: Duration) {
        self.limit.store(u64::try_from(limit.as_millis()).unwrap_or(u64::MAX).max(1), Ordering::Release);
    }

    /// True when the last beat is older than the limit.
    fn is_late(&self) -> bool {
        let limit = self.limit.load(Ordering::Acquire);
        limit != 0 && self.now_ms().saturating_sub(self.last.load(Ordering::Acquire)) > limit
    }
}

enum Lifecycle {
    Built,
    Starting,
    Started { tasks: Vec<AbortHandle>, runtime: tokio::runtime::Handle },
    Closed,
}

impl Framework {
    /// A builder for a framework connecting to `connect_string` (`host:port[,host:port...][/chroot]`).
    pub fn builder(connect_string: &str) -> FrameworkBuilder {
        FrameworkBuilder::new(connect_string)
    }

    /// Builds with defaults and connects: `Framework::builder(s).start().await`.
    ///
    /// # Errors
    /// As [`FrameworkBuilder::build`] and [`Framework::start`].
    ///
    /// # Cancel safety
    /// Cancel-safe: nothing is left running.
    pub async fn connect(connect_string: &str) -> Result<Framework> {
        Self::builder(connect_string).start().await
    }

    pub(crate) fn from_config(config: Config) -> Framework {
        let (state_tx, _) =
            watch::channel(StateSnapshot { state: ConnectionState::Suspended, session_id: 0, epoch: 0 });
        let (events_tx, _) = broadcast::channel(config.event_capacity);
        let inner = Inner {
            config,
            session: Mutex::new(None),
            state_tx,
            events_tx: Mutex::new(Some(events_tx)),
            reaper: ReaperHandle::new(),
            lifecycle: Mutex::new(Lifecycle::Built),
            heartbeat: Heartbeat::new(),
        };
        Framework { inner: Arc::new(inner) }
    }

    pub(crate) fn from_inner(inner: Arc<Inner>) -> Framework {
        Framework { inner }
    }

    pub(crate) fn downgrade(&self) -> std::sync::Weak<Inner> {
        Arc::downgrade(&self.inner)
    }

    /// Connects (opens the first session), publishes `Connected`, and starts the background
    /// tasks. Calling it on a started framework does nothing.
    ///
    /// # Errors
    /// [`Error::ConnectionTimeout`] when no server answers within the connection timeout,
    /// [`Error::Closed`] after `close()`, or the client's error (for example `AuthFailed`).
    ///
    /// # Cancel safety
    /// Cancel-safe: a cancelled start leaves the framework unstarted (it may be started again)
    /// and closes the half-made session.
    pub async fn start(&self) -> Result<()> {
        {
            let mut lifecycle = self.inner.lifecycle.lock();
            match *lifecycle {
                Lifecycle::Closed => return Err(Error::Closed),
                Lifecycle::Started { .. } => return Ok(()),
                Lifecycle::Starting => return Err(Error::invalid_argument("start", "another start() is in progress")),
                Lifecycle::Built => *lifecycle = Lifecycle::Starting,
            }
        }
        let reset = ResetOnDrop(&self.inner);
        let client = session::connect(&self.inner.config).await?;
        let session = Session::new(client, 1);
        let mut watcher = session.client.state_watcher();
        let session_timeout = session.client.session_timeout();
        self.inner.install_session(session, state_manager::Timing::of(session_timeout).stall);
        // Curator: a read-only first connection is reported as ReadOnly; Connected waits for the
        // first read-write connection.
        let first = match watcher.state() {
            zookeeper_client::SessionState::ConnectedReadOnly => ConnectionState::ReadOnly,
            _ => ConnectionState::Connected,
        };
        self.inner.publish(first);

        let weak = self.downgrade();
        let state_task = tokio::spawn(state_manager::run(weak.clone(), watcher, first, session_timeout));
        let reaper_task = tokio::spawn(reaper::run(weak, self.inner.reaper.take_receiver()));
        std::mem::forget(reset);
        *self.inner.lifecycle.lock() = Lifecycle::Started {
            tasks: vec![state_task.abort_handle(), reaper_task.abort_handle()],
            runtime: tokio::runtime::Handle::current(),
        };
        Ok(())
    }

    /// Waits for pending background deletes (at most the close timeout), stops the background
    /// tasks and closes the session. Streams end; every later operation fails with
    /// [`Error::Closed`]. Closing twice does nothing.
    ///
    /// # Cancel safety
    /// Cancel-safe: the framework is marked closed at the first poll; a cancelled close skips
    /// waiting for the pending deletes (the session's end removes ephemeral nodes anyway).
    pub async fn close(&self) {
        let tasks = {
            let mut lifecycle = self.inner.lifecycle.lock();
            match std::mem::replace(&mut *lifecycle, Lifecycle::Closed) {
                Lifecycle::Started { tasks, .. } => tasks,
                _ => Vec::new(),
            }
        };
        if !tasks.is_empty() {
            let flushed = tokio::time::timeout(self.inner.config.close_timeout, self.inner.reaper.flush()).await;
            if flushed.is_err() {
                tracing::warn!(pending = self.inner.reaper.pending(), "close: gave up waiting for background deletes");
            }
        }
        for task in &tasks {
            task.abort();
        }
        let session = self.inner.session.lock().take();
        self.inner.events_tx.lock().take();
        // The session ends here: the watch says Lost (streams and listeners have ended), which
        // wakes every waiting acquire (it then fails with `Closed`) and every guard's `lost()`.
        self.inner.state_tx.send_modify(|s| s.state = ConnectionState::Lost);
        if let Some(session) = session {
            let mut watcher = session.client.state_watcher();
            drop(session);
            // The client sends CloseSession once its last handle is gone; wait (briefly) for it.
            let _ = tokio::time::timeout(Duration::from_secs(2), async {
                while !watcher.state().is_terminated() {
                    watcher.changed().await;
                }
            })
            .await;
        }
        tracing::info!("framework closed");
    }

    /// True once `close()` has been called.
    pub fn is_closed(&self) -> bool {
        self.inner.is_closed()
    }

    /// The current connection state. Before the first connection it is `Suspended` (with
    /// epoch 0); after `close()` it is `Lost` (the session is gone).
    ///
    /// A connected state is reported as `Suspended` while the framework's background task has
    /// not run for more than 3/10 of the session timeout (a starved or paused runtime, for
    /// example a task blocking a `current_thread` runtime's only thread): the framework cannot
    /// vouch for the connection then. The task, once it runs again, confirms the connection
    /// with a round trip before it reports `Reconnected`.
    pub fn state(&self) -> ConnectionState {
        self.snapshot().state
    }

    /// The current state with its session id and epoch (see [`state`](Self::state) for when a
    /// connected state reads `Suspended` here before the watch and the stream say so).
    pub fn snapshot(&self) -> StateSnapshot {
        let mut snapshot = *self.inner.state_tx.borrow();
        if snapshot.state.is_connected() && self.inner.heartbeat.is_late() {
            snapshot.state = ConnectionState::Suspended;
        }
        snapshot
    }

    /// A `watch` receiver of the current snapshot (for `changed()` / `wait_for()`).
    pub fn state_watch(&self) -> watch::Receiver<StateSnapshot> {
        self.inner.state_tx.subscribe()
    }

    /// Every state transition from now on, as a stream. A consumer that falls behind by more
    /// than the event capacity receives the current snapshot in place of what it missed and
    /// keeps going; the stream ends when the framework closes. Read it with `.next()` from
    /// `futures::StreamExt` (crate `futures`).
    pub fn state_changes(&self) -> ConnectionStateStream {
        let events = self.inner.events_tx.lock().as_ref().map(|tx| tx.subscribe());
        ConnectionStateStream::new(events, self.state_watch())
    }

    /// Registers a listener; it is called once per transition, in order, on its own task.
    /// A listener that panics is logged and keeps receiving. Dropping the returned handle
    /// unregisters it.
    ///
    /// # Errors
    /// [`Error::Closed`] after `close()`; [`Error::NotStarted`] when called before `start()`
    /// outside a Tokio runtime.
    pub fn add_listener(&self, listener: Arc<dyn ConnectionStateListener>) -> Result<ListenerHandle> {
        let runtime = {
            let lifecycle = self.inner.lifecycle.lock();
            match &*lifecycle {
                Lifecycle::Closed => return Err(Error::Closed),
                Lifecycle::Started { runtime, .. } => Some(runtime.clone()),
                _ => None,
            }
        };
        let runtime = match tokio::runtime::Handle::try_current().ok().or(runtime) {
            Some(runtime) => runtime,
            None => return Err(Error::NotStarted),
        };
        let events = match self.inner.events_tx.lock().as_ref() {
            Some(tx) => tx.subscribe(),
            None => return Err(Error::Closed),
        };
        let task = runtime.spawn(listener::run(self.downgrade(), events, self.state_watch(), listener));
        Ok(ListenerHandle::new(task.abort_handle()))
    }

    /// Registers a closure as a listener; see [`add_listener`](Self::add_listener).
    ///
    /// # Errors
    /// As [`add_listener`](Self::add_listener).
    pub fn on_state_change<F, Fut>(&self, f: F) -> Result<ListenerHandle>
    where
        F: Fn(StateSnapshot) -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = ()> + Send + 'static,
    {
        self.add_listener(Arc::new(listener::FnListener(f)))
    }

    /// Waits until the state is connected (`Connected`, `Reconnected` or `ReadOnly`), for at
    /// most `timeout` (Curator's `blockUntilConnected`). Returns whether it is connected.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a zero timeout; [`Error::Closed`] after `close()`.
    ///
    /// # Cancel safety
    /// Cancel-safe: it only observes.
    pub async fn wait_until_connected(&self, timeout: Duration) -> Result<bool> {
        if timeout.is_zero() {
            return Err(Error::invalid_argument("timeout", "must be greater than zero"));
        }
        if self.is_closed() {
            return Err(Error::Closed);
        }
        let mut rx = self.state_watch();
        let waited = tokio::time::timeout(timeout, rx.wait_for(|s| s.state.is_connected() && s.epoch > 0)).await;
        Ok(matches!(waited, Ok(Ok(_))))
    }

    /// How many background deletes (released or cancelled lock nodes) are still in progress.
    pub fn pending_deletes(&self) -> usize {
        self.inner.reaper.pending()
    }

    /// The namespace as an absolute path (`/app`), if one was configured.
    pub fn namespace(&self) -> Option<&str> {
        self.inner.config.namespace.as_deref()
    }

    /// The configured error policy.
    pub fn error_policy(&self) -> ConnectionStateErrorPolicy {
        self.inner.config.error_policy
    }

    /// The current session's raw ZooKeeper client, the escape hatch for what the framework's
    /// operations do not cover (persistent watches, `whoami`, reconfiguration, ...).
    ///
    /// What it loses against the framework's own operations: no namespace (paths are server
    /// paths: see [`full_path`](Self::full_path)), no retries (a connection loss is the
    /// caller's), no ACL provider (pass ACLs yourself), no request size check, no connection
    /// states, and no next session: the client belongs to the current session and fails with
    /// `SessionExpired` once that is `Lost`. Fetch it again rather than keep it.
    ///
    /// # Errors
    /// [`Error::NotStarted`] or [`Error::Closed`].
    pub fn zk_client(&self) -> Result<zookeeper_client::Client> {
        self.inner.session().map(|s| s.client)
    }

    /// The session timeout the server granted to the current session.
    ///
    /// # Errors
    /// [`Error::NotStarted`] or [`Error::Closed`].
    pub fn negotiated_session_timeout(&self) -> Result<Duration> {
        self.inner.session().map(|s| s.client.session_timeout())
    }

    pub(crate) fn inner(&self) -> &Arc<Inner> {
        &self.inner
    }
}

/// Puts a framework whose `start()` was cancelled or failed back to `Built`.
struct ResetOnDrop<'a>(&'a Inner);

impl Drop for ResetOnDrop<'_> {
    fn drop(&mut self) {
        let mut lifecycle = self.0.lifecycle.lock();
        if matches!(*lifecycle, Lifecycle::Starting) {
            *lifecycle = Lifecycle::Built;
        }
        self.0.session.lock().take();
    }
}

impl crate::retry::Ends for Inner {
    fn has_ended(&self) -> bool {
        self.is_closed()
    }
}

impl Inner {
    pub(crate) fn is_closed(&self) -> bool {
        matches!(*self.lifecycle.lock(), Lifecycle::Closed)
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

    /// The client of session `epoch`, if that is still the current session.
    pub(crate) fn client_of(&self, epoch: u64) -> Option<zookeeper_client::Client> {
        let session = self.session.lock();
        session.as_ref().filter(|s| s.epoch == epoch).map(|s| s.client.clone())
    }

    /// Makes `session` the current one; the heartbeat may be at most `stall` late from now on.
    /// False (and the session is dropped, which closes it) when the framework was closed
    /// meanwhile: a session opened while `close()` ran must not outlive it.
    pub(crate) fn install_session(&self, session: Session, stall: Duration) -> bool {
        let lifecycle = self.lifecycle.lock();
        if matches!(*lifecycle, Lifecycle::Closed) {
            return false;
        }
        self.heartbeat.beat();
        self.heartbeat.set_limit(stall);
        *self.session.lock() = Some(session);
        true
    }

    /// The state manager is running: its view of the connection is current.
    pub(crate) fn beat(&self) {
        self.heartbeat.beat();
    }

    /// Publishes `state` for the current session to the watch, the stream and the listeners.
    pub(crate) fn publish(&self, state: ConnectionState) {
        let (session_id, epoch) = self.session.lock().as_ref().map_or((0, 0), |s| (s.id(), s.epoch));
        let snapshot = StateSnapshot { state, session_id, epoch };
        self.heartbeat.beat();
        tracing::info!(state = ?state, session = format_args!("{session_id:#x}"), epoch, "connection state changed");
        self.state_tx.send_replace(snapshot);
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
}

#[cfg(all(test, feature = "testing"))]
mod tests {
    use super::*;

    /// The state manager opens a new session after `Lost`; if `close()` began meanwhile, that
    /// session must not become the framework's (it would outlive `close()`, and its client
    /// would be handed out by `zk_client()`). It is refused, and dropping it closes it.
    #[tokio::test]
    async fn a_session_opened_while_closing_is_refused_and_closed() {
        let test = async {
            let server = crate::testing::shared_server().await.expect("shared server");
            let framework =
                Framework::builder(&server.connect_string()).session_timeout(Duration::from_secs(10)).start().await;
            let framework = framework.expect("framework starts");
            let epoch = framework.snapshot().epoch;
            framework.close().await;

            let client = session::connect(&framework.inner.config).await.expect("a new session");
            let mut watcher = client.state_watcher();
            assert!(
                !framework.inner.install_session(Session::new(client, epoch + 1), Duration::from_secs(1)),
                "installed after close()"
            );
            assert!(matches!(framework.zk_client(), Err(Error::Closed)));
            assert_eq!(framework.inner.epoch(), 0, "no session after close()");
            while !watcher.state().is_terminated() {
                watcher.changed().await;
            }
        };
        tokio::time::timeout(Duration::from_secs(60), test).await.expect("test finished in time");
    }
}
