//! The connection manager: [`Framework`] owns the ZooKeeper session, publishes connection
//! states, opens a new session after expiry, and deletes lock nodes reliably in the background.
//!
//! Inside, three kinds of private task run per started framework: the state manager (turns the
//! client's session states into [`ConnectionState`]s and replaces expired sessions), the reaper
//! (guaranteed deletes), and one task per registered listener.
//!
//! | file | holds |
//! | --- | --- |
//! | `mod.rs` | the public handle, [`Framework`] |
//! | `builder.rs` | [`FrameworkBuilder`] and the validated configuration |
//! | `inner.rs` | what the handle shares with the tasks: session, state channels, lifecycle |
//! | `heartbeat.rs` | when the state manager last ran and until when it vouches for the session |
//! | `session.rs` | opening a session, the client task serving it, ending it; objects shared per session |
//! | `state.rs` | connection states and the pure transition function |
//! | `state_manager.rs` | the task that runs the transitions and replaces lost sessions |
//! | `reaper.rs` | guaranteed background deletes |
//! | `listener.rs` | listeners and the state stream |
//! | `circuit_breaker.rs` | the circuit-breaking state stream and listener (flapping swallowed) |
//! | `ops.rs`, `listings.rs` | namespaced operations and the retry loop; listings shared by concurrent callers |
//! | `create.rs`, `read.rs`, `write.rs`, `transaction.rs` | the data plane: creates, reads (with one-shot watches), writes, transactions and fences |
//! | `node.rs`, `protected.rs` | a created node's life (its delete on drop through the reaper) and the protected create that finds its node again after a connection loss |
//! | `watch_table.rs` | every watch the session holds, by path: the one guard against mixing watch modes on a path |
//! | `ensemble.rs` | the tracked ensemble membership (`/zookeeper/config`), the hosts the next connection uses, and [`Reconfig`] |
//! | `server_features.rs` | what the session's server supports, learned once per session ([`ServerInfo`]) |
//! | `temp.rs` | [`TempFramework`]: a session opened on use and closed when idle |
//! | `schema_check.rs` | the schema check every data-plane operation makes before sending (feature `schema`) |
//! | `security.rs`, `session_failure.rs`, `wait_strategy.rs`, `registry.rs` | TLS and SASL settings, the session failure policy, the lock wait strategy, per-framework data-plane state |
//! | `errors.rs` | background errors ([`BackgroundError`], [`Framework::errors`], [`Framework::on_error`]) and the observer that background work reports to (metrics, errors) without keeping the framework alive |

mod builder;
mod circuit_breaker;
mod create;
mod ensemble;
mod errors;
mod heartbeat;
mod inner;
mod listener;
mod listings;
pub(crate) mod metrics;
pub(crate) mod node;
mod nodelay;
mod ops;
pub(crate) mod protected;
mod read;
mod reaper;
mod registry;
mod schema_check;
mod security;
mod server_features;
mod session;
pub(crate) mod session_failure;
pub(crate) mod stall;
mod state;
mod state_manager;
mod temp;
mod transaction;
pub(crate) mod wait_strategy;
mod watch_table;
mod write;

use std::sync::{Arc, Weak};
use std::time::Duration;

use tokio::sync::watch;
use zookeeper_client::Client;

pub(crate) use self::builder::Config;
pub use self::builder::{AclProvider, FixedAclProvider, FrameworkBuilder, OpenAclProvider};
pub use self::circuit_breaker::CircuitBreakingStream;
pub(crate) use self::create::TTL_MAX;
pub use self::create::{CreateBuilder, Created, Parents};
pub use self::ensemble::{Ensemble, EnsembleMember, Reconfig, ServerRole};
pub(crate) use self::errors::Observer;
pub use self::errors::{BackgroundError, BackgroundErrorKind, BackgroundErrors, BackgroundEvent};
use self::inner::Inner;
pub use self::listener::{ConnectionStateListener, ConnectionStateStream, ListenerHandle};
pub(crate) use self::listings::Listing;
pub(crate) use self::read::Arming;
pub use self::read::{
    Exists, ExistsWatched, GetChildren, GetChildrenWatched, GetChildrenWithStat, GetData, GetDataWatched, OneshotWatch,
};
pub(crate) use self::reaper::ReaperCmd;
use self::registry::Registry;
pub(crate) use self::schema_check::SchemaOp;
pub use self::server_features::ServerInfo;
pub(crate) use self::session::{ClientKey, Session};
pub use self::state::{ConnectionState, ConnectionStateErrorPolicy, StateSnapshot};
use self::state_manager::Timing;
pub use self::temp::TempFramework;
pub use self::transaction::{Fence, OpResult, Transaction, TransactionOp};
pub(crate) use self::watch_table::Registered;
pub use self::watch_table::{NodeEvent, NodeEventKind, WatchMode};
pub use self::write::{Delete, SetData};
use crate::error::{Error, Result};

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
    /// This handle's namespace (absolute, normalized): the configured one, or another chosen
    /// with [`using_namespace`](Framework::using_namespace) on the same session.
    namespace: Option<Arc<str>>,
}

impl std::fmt::Debug for Framework {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Framework")
            .field("connect_string", &self.inner.config.connect_string)
            .field("namespace", &self.namespace)
            .field("snapshot", &self.snapshot())
            .finish()
    }
}

/// A framework handle that does not keep the framework alive (held by its listener tasks).
pub(crate) struct WeakFramework(Weak<Inner>, Option<Arc<str>>);

impl WeakFramework {
    /// The framework (with the namespace of the handle it was made from), while a strong
    /// handle exists.
    pub(crate) fn upgrade(&self) -> Option<Framework> {
        self.0.upgrade().map(|inner| Framework { inner, namespace: self.1.clone() })
    }
}

impl std::fmt::Debug for WeakFramework {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("WeakFramework")
    }
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
        let namespace = config.namespace.as_deref().map(Arc::from);
        Framework { inner: Arc::new(Inner::new(config)), namespace }
    }

    /// Connects (opens the first session), publishes `Connected`, and starts the background
    /// tasks. Calling it on a started framework does nothing.
    ///
    /// # Errors
    /// [`Error::ConnectionTimeout`] when no server answers within the connection timeout,
    /// [`Error::Closed`] after `close()` (also when `close()` is called while `start()` waits
    /// for the server: the close wins, and the session just opened is closed), or the client's
    /// error (for example `AuthFailed`).
    ///
    /// # Cancel safety
    /// Cancel-safe: a cancelled start leaves the framework unstarted (it may be started again)
    /// and closes the half-made session.
    pub async fn start(&self) -> Result<()> {
        let Some(attempt) = self.inner.begin_start()? else { return Ok(()) };
        // A failed or cancelled connect drops `attempt`, which puts the framework back to built.
        let connected = session::connect(&self.inner.config, &self.inner.connect_string()).await?;
        // Taken first: a connection that breaks while the configuration is read is reported
        // (`Suspended` right after `Connected`), not hidden from the state manager.
        let watcher = connected.client().state_watcher();
        // The ensemble's configuration is read (and watched) before `Connected`.
        let tracked = match self.inner.config.ensemble_tracking {
            true => ensemble::first_read(&self.inner, connected.client()).await,
            false => None,
        };
        let session_timeout = connected.client().session_timeout();
        let timing = Timing::of(session_timeout);
        // Curator: a read-only first connection is reported as ReadOnly; Connected waits for the
        // first read-write connection.
        let first = match watcher.peek_state() {
            zookeeper_client::SessionState::ConnectedReadOnly => ConnectionState::ReadOnly,
            _ => ConnectionState::Connected,
        };
        let weak = Arc::downgrade(&self.inner);
        let observer = self.inner.observer.clone();
        let spawn = |reaper_queue| {
            let state_task = tokio::spawn(state_manager::run(weak.clone(), watcher, first, session_timeout));
            let sessions: Weak<dyn reaper::Sessions> = weak.clone();
            let reaper_task = tokio::spawn(reaper::run(sessions, reaper_queue, observer));
            let mut tasks = vec![state_task.abort_handle(), reaper_task.abort_handle()];
            if self.inner.config.ensemble_tracking {
                tasks.push(tokio::spawn(ensemble::track(weak.clone(), tracked)).abort_handle());
            }
            tasks
        };
        // Opening the session took a round trip: it is vouched for a whole session timeout.
        let vouched = (timing.stall, timing.session);
        // Refused (and the new session dropped, which closes it) when close() came first.
        self.inner.finish_start(attempt, Session::new(connected, 1, self.inner.observer.clone()), vouched, first, spawn)
    }

    /// Waits for pending background deletes (at most the close timeout), stops the background
    /// tasks and ends the session. Streams end; every later operation fails with
    /// [`Error::Closed`]. Closing twice does nothing.
    ///
    /// The session ends on the server (its ephemeral nodes, locks included, are deleted at
    /// once) even while clones of the raw client from [`zk_client`](Self::zk_client) are still
    /// alive: the client closes the session itself once its last clone is gone; when a clone is
    /// still alive half a second later, the client is stopped (every clone of it stops working)
    /// and the session is closed from a second connection.
    ///
    /// # Cancel safety
    /// Cancel-safe: the framework is marked closed at the first poll; a cancelled close skips
    /// waiting for the pending deletes and may leave the session to expire on its own (its
    /// client no longer runs).
    pub async fn close(&self) {
        let tasks = self.inner.begin_close();
        if let Some(tasks) = tasks {
            if !self.inner.flush_deletes(self.inner.config.close_timeout).await {
                tracing::warn!(pending = self.inner.pending_deletes(), "close: gave up waiting for background deletes");
            }
            for task in &tasks {
                task.abort();
            }
        }
        if let Some(session) = self.inner.finish_close() {
            session::end(session, &self.inner.config, &self.inner.connect_string()).await;
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
        self.inner.snapshot()
    }

    /// A `watch` receiver of the current snapshot (for `changed()` / `wait_for()`).
    pub fn state_watch(&self) -> watch::Receiver<StateSnapshot> {
        self.inner.subscribe_state()
    }

    /// Every state transition from now on, as a stream. A consumer that falls behind by more
    /// than the event capacity receives the current snapshot in place of what it missed and
    /// keeps going; the stream ends when the framework closes. Read it with `.next()` from
    /// `futures::StreamExt` (crate `futures`).
    pub fn state_changes(&self) -> ConnectionStateStream {
        ConnectionStateStream::new(self.inner.subscribe_events(), self.state_watch())
    }

    /// Registers a listener; it is called once per transition, in order, on its own task.
    /// A listener that panics is logged and keeps receiving. Dropping the returned handle
    /// unregisters it.
    ///
    /// # Errors
    /// [`Error::Closed`] after `close()`; [`Error::NotStarted`] when called before `start()`
    /// outside a Tokio runtime.
    pub fn add_listener(&self, listener: Arc<dyn ConnectionStateListener>) -> Result<ListenerHandle> {
        let runtime = self.listener_runtime()?;
        let Some(events) = self.inner.subscribe_events() else { return Err(Error::Closed) };
        let weak = self.downgrade();
        let task = runtime.spawn(listener::run(weak, events, self.state_watch(), listener));
        Ok(ListenerHandle::new(task.abort_handle()))
    }

    /// The runtime a listener's task runs on: the caller's, else the framework's.
    fn listener_runtime(&self) -> Result<tokio::runtime::Handle> {
        let runtime = self.inner.runtime()?;
        tokio::runtime::Handle::try_current().ok().or(runtime).ok_or(Error::NotStarted)
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

    /// Every background error from now on (Curator's `UnhandledErrorListener`, as a stream):
    /// what the framework and its recipes could not do on their own and only logged before —
    /// a guaranteed delete the server refuses, a node a cache may not read, a persistent watch
    /// that cannot be added again, a persistent node that cannot be made again. Each is still
    /// logged too. The channel keeps the last
    /// [`event_capacity`](FrameworkBuilder::event_capacity) errors: a reader that falls
    /// further behind gets [`BackgroundEvent::Lagged`] with the number it missed. The stream
    /// ends when the framework closes (after the errors of its last background deletes).
    pub fn errors(&self) -> BackgroundErrors {
        BackgroundErrors::new(self.inner.observer.subscribe())
    }

    /// Calls `f` for every background error from now on (see [`errors`](Self::errors)), in
    /// order, on a task of its own (Curator's `UnhandledErrorListener`). A panic in `f` is
    /// logged and `f` stays registered; dropping the returned handle unregisters it, and the
    /// task ends when the framework closes.
    ///
    /// # Errors
    /// [`Error::NotStarted`] when called outside a Tokio runtime on a framework not started.
    pub fn on_error<F>(&self, f: F) -> Result<ListenerHandle>
    where
        F: Fn(BackgroundEvent) + Send + Sync + 'static,
    {
        let runtime = self.inner.runtime().ok().flatten();
        let Some(runtime) = tokio::runtime::Handle::try_current().ok().or(runtime) else {
            return Err(Error::NotStarted);
        };
        let task = runtime.spawn(errors::run(self.inner.observer.subscribe(), f));
        Ok(ListenerHandle::new(task.abort_handle()))
    }

    /// The framework's metrics and background error channel, for work that must not keep the
    /// framework alive.
    pub(crate) fn observer(&self) -> &Arc<Observer> {
        &self.inner.observer
    }

    /// Waits until the state is connected (`Connected`, `Reconnected` or `ReadOnly`), for at
    /// most `timeout` (Curator's `blockUntilConnected`). Returns whether it is connected.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a zero timeout; [`Error::Closed`] after `close()`, also
    /// a `close()` while it waits.
    ///
    /// # Cancel safety
    /// Cancel-safe: it only observes.
    pub async fn wait_until_connected(&self, timeout: Duration) -> Result<bool> {
        if timeout.is_zero() {
            return Err(Error::invalid_argument("timeout", "must be greater than zero"));
        }
        let mut rx = self.state_watch();
        // A close publishes `Lost` once it has marked the framework closed.
        let connected_or_closed = |s: &StateSnapshot| (s.state.is_connected() && s.epoch > 0) || self.is_closed();
        let waited = tokio::time::timeout(timeout, rx.wait_for(connected_or_closed)).await;
        if self.is_closed() {
            return Err(Error::Closed);
        }
        Ok(matches!(waited, Ok(Ok(_))))
    }

    /// How many background deletes (released or cancelled lock nodes, guaranteed deletes
    /// handed over) are still in progress.
    pub fn pending_deletes(&self) -> usize {
        self.inner.pending_deletes()
    }

    /// The namespace as an absolute path (`/app`), if this handle has one: the configured
    /// one, or the one given to [`using_namespace`](Self::using_namespace).
    pub fn namespace(&self) -> Option<&str> {
        self.namespace.as_deref()
    }

    /// A handle on the same framework and session with another namespace (Curator's
    /// `usingNamespace`): `Some("other")` (or `"/other"`) prefixes every path of the new handle's
    /// operations, and of the recipes built on it, with `/other`; `None` uses server paths as
    /// they are. Nothing is sent and nothing is started: the handle shares this one's session,
    /// connection states, listeners, background deletes and watches, and is as cheap as a
    /// clone. Closing either handle closes the framework.
    ///
    /// As with a configured namespace, the namespace's node is created as a container when
    /// first needed.
    ///
    /// # Errors
    /// [`Error::InvalidPath`] for a namespace that is not a valid path below the root (empty,
    /// `/`, under `/zookeeper`, with empty or relative segments), as
    /// [`FrameworkBuilder::namespace`] checks it.
    pub fn using_namespace(&self, namespace: Option<&str>) -> Result<Framework> {
        let namespace = namespace.map(crate::path::normalize_namespace).transpose()?;
        Ok(Framework { inner: Arc::clone(&self.inner), namespace: namespace.map(Arc::from) })
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
    /// A clone kept does not keep the session: [`close`](Self::close) ends the session all the
    /// same (its ephemeral nodes go at once), but it waits half a second for the clone to be
    /// dropped first; after that, the clone's requests fail, and a watcher it set must not be
    /// awaited any more (zookeeper-client panics in `OneshotWatcher::changed` once the task
    /// serving the session is stopped). Drop clones before `close()`. A clone kept across a
    /// `Lost` speaks for the old session, which the framework has given up: usually the
    /// server expired it, but when the framework gave it up first (its connection could not
    /// be confirmed within the session timeout), a clone that reaches a server again keeps
    /// that session, and its ephemeral nodes (lock nodes among them), alive for as long as
    /// it is kept. Drop it on `Lost`.
    ///
    /// # Errors
    /// [`Error::NotStarted`] or [`Error::Closed`].
    pub fn zk_client(&self) -> Result<Client> {
        self.inner.session().map(|s| s.client)
    }

    /// The ensemble's configuration as last seen (Curator's `EnsembleTracker`): the
    /// framework reads the configuration node `/zookeeper/config` on every session and
    /// watches it, so this follows every reconfiguration. `None` before it was first read,
    /// with [`FrameworkBuilder::ensemble_tracking`] off, and on a standalone server (whose
    /// node lists no member).
    ///
    /// Every new connection of the framework (a new session after `Lost`) goes to the
    /// members listed here (see [`connect_string`](Self::connect_string)).
    pub fn ensemble(&self) -> Option<Ensemble> {
        self.inner.ensemble.current()
    }

    /// A `watch` receiver of [`ensemble`](Self::ensemble): `changed()` completes on every
    /// new configuration seen.
    pub fn ensemble_watch(&self) -> watch::Receiver<Option<Ensemble>> {
        self.inner.ensemble.subscribe()
    }

    /// The connect string the framework's next connection uses: the tracked members' client
    /// addresses (with the configured chroot), or the configured connect string while no
    /// configuration with client addresses is known, with tracking off, or for `tcp+tls://`
    /// hosts (the configuration names plain client ports only).
    pub fn connect_string(&self) -> String {
        self.inner.connect_string()
    }

    /// A reconfiguration of the ensemble (Curator's `reconfig()`): add, remove or replace
    /// members. See [`Reconfig`].
    pub fn reconfig(&self) -> Reconfig {
        Reconfig::new(self.clone())
    }

    /// The session timeout the server granted to the current session.
    ///
    /// # Errors
    /// [`Error::NotStarted`] or [`Error::Closed`].
    pub fn negotiated_session_timeout(&self) -> Result<Duration> {
        self.inner.session().map(|s| s.client.session_timeout())
    }

    /// The current session, or why there is none ([`Error::NotStarted`], [`Error::Closed`]).
    pub(crate) fn session(&self) -> Result<Session> {
        self.inner.session()
    }

    /// The client of session `epoch`, while that is still the current session.
    pub(crate) fn client_of(&self, epoch: u64) -> Option<Client> {
        self.inner.client_of(epoch)
    }

    /// Completes once `session` is served by another client: the framework moved it (same
    /// epoch, same id) to a client attached through the ensemble's current members, and that
    /// client is connected. The old client's requests and watches go unanswered from then on,
    /// until it gives the session up by itself. Pending while `session` is served by its own
    /// client, and once the session is over (its waiters watch for that themselves).
    pub(crate) async fn session_moved(&self, session: &Session) {
        self.client_left(&session.client_key()).await
    }

    /// Switches `session` to the client serving its epoch now, when the framework moved it
    /// to another client: the old one's requests and watches go unanswered from then on.
    pub(crate) fn follow_move(&self, session: &mut Session) {
        if let Ok(now) = self.session() {
            if now.epoch == session.epoch && !now.same_client(session) {
                *session = now;
            }
        }
    }

    /// [`session_moved`](Self::session_moved) for the session and client `key` names.
    pub(crate) async fn client_left(&self, key: &session::ClientKey) {
        let mut states = self.state_watch();
        if states.wait_for(|s| self.inner.left(s, key)).await.is_err() {
            std::future::pending::<()>().await;
        }
    }

    /// Whether session `epoch` is over for its nodes, so that an expired or closed client's
    /// error shows a node went with it (see [`reaper::Sessions::session_gone`]).
    pub(crate) fn session_gone(&self, epoch: u64) -> bool {
        reaper::Sessions::session_gone(&*self.inner, epoch)
    }

    /// Records the id `session` learned from a node it created (see [`Session::id`]).
    pub(crate) fn note_session_id(&self, session: &Session) {
        self.inner.note_session_id(session)
    }

    /// Hands a background delete to the reaper. Never blocks, never needs a runtime.
    pub(crate) fn reap(&self, cmd: ReaperCmd) {
        self.inner.reap(cmd)
    }

    /// The validated configuration.
    pub(crate) fn config(&self) -> &Config {
        &self.inner.config
    }

    /// The current session's epoch (0 before the first session).
    pub(crate) fn epoch(&self) -> u64 {
        self.inner.epoch()
    }

    /// A handle that does not keep the framework alive.
    pub(crate) fn downgrade(&self) -> WeakFramework {
        WeakFramework(Arc::downgrade(&self.inner), self.namespace.clone())
    }

    /// The data plane's per-framework state (server features, live persistent watches).
    pub(crate) fn registry(&self) -> &Arc<Registry> {
        &self.inner.registry
    }

    /// Waits until the published state changes, or for at most one beat of the state manager
    /// (so that a caller that finds the state not yet vouched for, for example on a runtime
    /// that was starved, lets the state manager run instead of spinning).
    pub(crate) async fn state_settles(&self) {
        let mut states = self.state_watch();
        let beat =
            self.inner.session().map_or(Duration::from_millis(50), |s| Timing::of(s.client.session_timeout()).beat);
        let _ = tokio::time::timeout(beat, states.changed()).await;
    }
}

impl crate::retry::Ends for Framework {
    fn has_ended(&self) -> bool {
        self.is_closed()
    }

    fn retrying(&self) {
        self.inner.observer.metrics.retry();
    }
}
