//! Opening a ZooKeeper session from the configuration, keeping hold of the task that serves
//! it, and ending it.
//!
//! zookeeper-client serves each session from a task it spawns while connecting, and closes the
//! session only when the last clone of its `Client` is dropped. The framework captures that
//! task when it is spawned (zookeeper-client spawns through the `spawns` crate, whose spawner
//! can be chosen for the duration of a call), so it can tell when the task is gone (a panic, or
//! the runtime it ran on shut down) and can end the session itself even while a clone handed
//! out by [`Framework::zk_client`](super::Framework::zk_client) is still alive.

use std::any::Any;
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Weak};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::AbortHandle;
use zookeeper_client::{Client, SessionState};

use super::builder::Config;
use super::errors::Observer;
use super::listings::Listings;
use crate::error::{Error, Result};
use crate::framework::metrics::Op;
use crate::sync::Mutex;

/// One ZooKeeper session of the framework: its client and which session it is (the epoch).
#[derive(Clone, Debug)]
pub(crate) struct Session {
    pub(crate) client: Client,
    pub(crate) epoch: u64,
    /// The server's id for the session, 0 while unknown; shared by every clone.
    id: Arc<AtomicI64>,
    /// Listings shared by concurrent callers (see [`Listings`]).
    pub(crate) listings: Arc<Listings>,
    /// Objects the recipes share within this session, by key, while someone holds them.
    pub(crate) shared: Arc<SessionShared>,
    /// The client's task serving the session.
    task: Arc<SessionTask>,
    /// The connect string the client was made with.
    hosts: Arc<str>,
    /// The framework's metrics (requests by operation).
    observer: Arc<Observer>,
}

impl Session {
    pub(crate) fn new(connected: Connected, epoch: u64, observer: Arc<Observer>) -> Self {
        let Connected { client, task, hosts } = connected;
        let read_only = client.state() == SessionState::ConnectedReadOnly;
        let id = if read_only { 0 } else { client.session_id().0 };
        let (listings, shared) = (Arc::new(Listings::counted(observer.clone())), Arc::default());
        Self { client, epoch, id: Arc::new(AtomicI64::new(id)), listings, shared, task, hosts: hosts.into(), observer }
    }

    /// This session (same epoch, id and shared objects) on the client `connected`, which
    /// attached to it through other servers ([`attach`]).
    pub(crate) fn moved(&self, connected: Connected) -> Self {
        let Connected { client, task, hosts } = connected;
        Self {
            client,
            epoch: self.epoch,
            id: self.id.clone(),
            listings: Arc::new(Listings::counted(self.observer.clone())),
            shared: self.shared.clone(),
            task,
            hosts: hosts.into(),
            observer: self.observer.clone(),
        }
    }

    /// Whether `other` is this session on the same client (not moved since).
    pub(crate) fn same_client(&self, other: &Session) -> bool {
        Arc::ptr_eq(&self.task, &other.task)
    }

    /// Which client serves this session, without keeping that client alive (a watch set
    /// through it compares keys later: see [`Framework::session_moved`](super::Framework::session_moved)).
    pub(crate) fn client_key(&self) -> ClientKey {
        ClientKey { epoch: self.epoch, task: Arc::downgrade(&self.task) }
    }

    /// Whether this session's client is the one `key` names.
    pub(crate) fn is_client(&self, key: &ClientKey) -> bool {
        self.epoch == key.epoch && std::ptr::eq(Arc::as_ptr(&self.task), key.task.as_ptr())
    }

    /// The connect string the session's client was made with.
    pub(crate) fn hosts(&self) -> &str {
        &self.hosts
    }

    /// Counts a request about to be sent on this session.
    pub(crate) fn sent(&self, op: Op) {
        self.observer.request(op);
    }

    /// Awaits `done` (a reply to a request of this session, or a wait for an event its server
    /// may hold back), nudging the server while it is late (see [`super::stall`]).
    pub(crate) fn unstalled<'a, F: Future + 'a>(&'a self, done: F) -> impl Future<Output = F::Output> + 'a {
        super::stall::unstalled(&self.client, &self.observer, done)
    }

    /// Whether the client's task serving the session is gone (it ended, panicked, or the
    /// runtime it ran on shut down): the client can do nothing more.
    pub(crate) fn task_ended(&self) -> bool {
        self.task.is_ended()
    }

    /// Completes when the client's task serving the session is gone.
    pub(crate) fn task_end(&self) -> impl Future<Output = ()> + Send + 'static {
        let mut ended = self.task.ended.subscribe();
        async move {
            let _ = ended.wait_for(|ended| *ended).await;
        }
    }

    /// The session id as the server knows it (the `ephemeralOwner` of our nodes), or 0 while
    /// unknown.
    ///
    /// A session that starts on a read-only server is replaced by a new one, with a new id,
    /// at its first read-write connection; zookeeper-client keeps reporting the read-only id.
    /// The framework then forgets the id ([`forget_id`](Self::forget_id)) and learns the real
    /// one from the first node it creates ([`learn_id`](Self::learn_id)).
    pub(crate) fn id(&self) -> i64 {
        self.id.load(Ordering::SeqCst)
    }

    /// Records the owner of an ephemeral node this session created.
    pub(crate) fn learn_id(&self, owner: i64) {
        if owner != 0 {
            self.id.store(owner, Ordering::SeqCst);
        }
    }

    /// The client moved from a read-only session to a read-write one: its id is not known.
    pub(crate) fn forget_id(&self) {
        self.id.store(0, Ordering::SeqCst);
    }

    /// Whether an ephemeral node owned by `owner`, found under a protected prefix this
    /// session's client generated, is ours. A fresh prefix is only ever sent on one client,
    /// and a client has at most one session that can create nodes (its read-only session
    /// cannot), so while the id is unknown any ephemeral owner is that session, and is learned.
    pub(crate) fn owns(&self, owner: i64) -> bool {
        match self.id() {
            0 if owner != 0 => {
                self.learn_id(owner);
                true
            }
            id => id == owner,
        }
    }
}

/// Objects the recipes share within one session (a lock directory's mirror), by key; each
/// is kept only while someone holds it.
#[derive(Default)]
pub(crate) struct SessionShared {
    objects: Mutex<HashMap<String, Weak<dyn Any + Send + Sync>>>,
}

impl std::fmt::Debug for SessionShared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionShared").field("objects", &self.objects.lock().len()).finish()
    }
}

impl SessionShared {
    /// The live object under `key`, if there is one of type `T`.
    pub(crate) fn get<T: Any + Send + Sync>(&self, key: &str) -> Option<Arc<T>> {
        let objects = self.objects.lock();
        objects.get(key).and_then(Weak::upgrade).and_then(|object| object.downcast::<T>().ok())
    }

    /// The live object under `key` for which `usable` holds, or the one `make` makes (kept
    /// under `key` while it lives). An object of another type under `key`, or one that is no
    /// longer usable, is replaced.
    pub(crate) fn get_or_make<T: Any + Send + Sync>(
        &self,
        key: &str,
        usable: impl FnOnce(&T) -> bool,
        make: impl FnOnce() -> Arc<T>,
    ) -> Arc<T> {
        let mut objects = self.objects.lock();
        objects.retain(|_, object| object.strong_count() > 0);
        let found = objects.get(key).and_then(Weak::upgrade).and_then(|object| object.downcast::<T>().ok());
        if let Some(found) = found.filter(|found| usable(found)) {
            return found;
        }
        let made = make();
        let erased: Arc<dyn Any + Send + Sync> = made.clone();
        objects.insert(key.to_owned(), Arc::downgrade(&erased));
        made
    }
}

/// A session (its epoch) and the client serving it, named without keeping that client alive:
/// a weak reference to the client's task, whose allocation it keeps, so no later client can
/// reuse its address.
#[derive(Debug, Clone)]
pub(crate) struct ClientKey {
    epoch: u64,
    task: Weak<SessionTask>,
}

impl ClientKey {
    /// The session's epoch.
    pub(crate) fn epoch(&self) -> u64 {
        self.epoch
    }
}

/// zookeeper-client's task serving one session, as captured when the client spawned it.
#[derive(Debug, Default)]
struct SessionTask {
    abort: Mutex<Option<AbortHandle>>,
    /// True once the task's future is gone (finished, aborted, panicked, or dropped with its
    /// runtime).
    ended: watch::Sender<bool>,
}

impl SessionTask {
    fn is_ended(&self) -> bool {
        *self.ended.borrow()
    }

    /// Stops the task: the connection closes, the client can send nothing more (the session
    /// itself stays open on the server until it is closed or expires).
    fn abort(&self) {
        if let Some(abort) = self.abort.lock().take() {
            abort.abort();
        }
    }
}

/// Marks its task ended when dropped (with the task's future, whichever way it ends).
struct EndedOnDrop(Arc<SessionTask>);

impl Drop for EndedOnDrop {
    fn drop(&mut self) {
        self.0.ended.send_replace(true);
    }
}

/// The spawner in force while the client connects: the task it spawns (the session's) runs on
/// the caller's runtime, as it would have, with its handle kept.
struct Capture {
    task: Arc<SessionTask>,
    runtime: tokio::runtime::Handle,
}

impl spawns_core::Spawn for Capture {
    fn spawn(&self, task: spawns_core::Task) {
        let ended = EndedOnDrop(self.task.clone());
        let future = Box::into_pin(task.future);
        let handle = self.runtime.spawn(async move {
            let _ended = ended;
            future.await
        });
        *self.task.abort.lock() = Some(handle.abort_handle());
    }
}

/// Polls `future` with [`Capture`] as the spawner of everything it spawns.
struct Capturing<F> {
    capture: Capture,
    future: Pin<Box<F>>,
}

impl<F: Future> Future for Capturing<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.get_mut();
        let _scope = spawns_core::enter(&this.capture);
        this.future.as_mut().poll(cx)
    }
}

/// A client just connected, with the task serving its session.
pub(crate) struct Connected {
    client: Client,
    task: Arc<SessionTask>,
    hosts: String,
}

impl Connected {
    pub(crate) fn client(&self) -> &Client {
        &self.client
    }
}

/// Opens a new session on `hosts` (a connect string), bounded by the configured connection
/// timeout. Authentication is sent
/// with it (and re-sent by the client on every reconnect of this session).
///
/// # Panics
/// Outside a Tokio runtime (zookeeper-client needs one to serve the session).
pub(crate) async fn connect(config: &Config, hosts: &str) -> Result<Connected> {
    let connector = connector(config);
    let task = Arc::new(SessionTask::default());
    let capture = Capture { task: task.clone(), runtime: tokio::runtime::Handle::current() };
    let client = open(config, hosts, connector, capture).await?;
    tracing::debug!(session = format_args!("{:#x}", client.session_id().0), timeout = ?client.session_timeout(), "session opened");
    Ok(Connected { client, task, hosts: hosts.to_owned() })
}

/// Attaches a second client to the live session of `session`'s client through `hosts` (the
/// ensemble's current members, when none of the servers the client knows is one any more),
/// bounded by the configured connection timeout. The server moves the session to the new
/// connection; the old client can no longer use it.
///
/// # Errors
/// `SessionExpired` (as [`Error::ZooKeeper`]) when the ensemble no longer holds the session;
/// [`Error::ConnectionTimeout`] when no member answers.
pub(crate) async fn attach(config: &Config, hosts: &str, session: &Session) -> Result<Connected> {
    let connector = connector(config).with_session(session.client.session().clone());
    let task = Arc::new(SessionTask::default());
    let capture = Capture { task: task.clone(), runtime: tokio::runtime::Handle::current() };
    let client = open(config, hosts, connector, capture).await?;
    tracing::info!(session = format_args!("{:#x}", client.session_id().0), %hosts, "session moved to the ensemble's current members");
    Ok(Connected { client, task, hosts: hosts.to_owned() })
}

fn connector(config: &Config) -> zookeeper_client::Connector {
    let mut connector =
        Client::connector().with_session_timeout(config.session_timeout).with_readonly(config.can_be_read_only);
    for auth in &config.auth {
        connector = connector.with_auth(&auth.scheme, &auth.data);
    }
    match &config.client_hook {
        Some(hook) => hook.apply(connector),
        None => connector,
    }
}

async fn open(
    config: &Config,
    hosts: &str,
    connector: zookeeper_client::Connector,
    capture: Capture,
) -> Result<Client> {
    let connecting = Capturing { capture, future: Box::pin(config.security.connect(connector, hosts)) };
    let started = tokio::time::Instant::now();
    let client = match tokio::time::timeout(config.connection_timeout, connecting).await {
        Err(_) => return Err(Error::ConnectionTimeout(config.connection_timeout)),
        // The client's own limit (its session timeout) can come first: say how long it was.
        Ok(Err(zookeeper_client::Error::Timeout | zookeeper_client::Error::NoHosts)) => {
            let waited = Duration::from_millis(started.elapsed().as_millis() as u64);
            return Err(Error::ConnectionTimeout(waited.min(config.connection_timeout)));
        }
        Ok(Err(e)) => return Err(e.into()),
        Ok(Ok(client)) => client,
    };
    if client.state() == SessionState::AuthFailed {
        return Err(zookeeper_client::Error::AuthFailed.into());
    }
    super::nodelay::after_connect(hosts);
    Ok(client)
}

/// How long [`end`] waits for the client to close the session by itself (it does once its last
/// clone is dropped: the framework's own clones go as its tasks see the session end) before it
/// closes the session from a second connection.
const CLOSE_GRACE: Duration = Duration::from_millis(500);

/// Ends `session` on the server (reached through `hosts`), whatever clones of its client are
/// still alive elsewhere.
///
/// Dropping the framework's handle lets the client close the session (CloseSession, once its
/// last clone is gone). When that has not happened within [`CLOSE_GRACE`] (a clone handed out
/// by `zk_client()` is still alive, or the client's task is gone), the client's task is
/// stopped, so that no clone can use or revive the connection (their requests fail, and their
/// watchers never fire), and a second client attached to the same session closes it: its
/// ephemeral nodes are deleted at once. Bounded by the connection timeout; if the ensemble
/// cannot be reached, the session expires on its own.
pub(crate) async fn end(session: Session, config: &Config, hosts: &str) {
    let mut watcher = session.client.state_watcher();
    let info = session.client.session().clone();
    let id = session.client.session_id();
    let task = session.task.clone();
    drop(session);
    let by_itself = tokio::time::timeout(CLOSE_GRACE, async {
        while !watcher.state().is_terminated() {
            watcher.changed().await;
        }
    });
    if by_itself.await.is_ok() {
        tracing::debug!(session = format_args!("{:#x}", id.0), "session closed");
        return;
    }
    tracing::info!(
        session = format_args!("{:#x}", id.0),
        "the session's client is still in use (a raw client clone?); closing the session from a second connection"
    );
    task.abort();
    let closing = async {
        // The aborted task's future is dropped once the runtime gets to it; its connection
        // closes with it, so the session is free for the attaching client.
        let _ = task.ended.subscribe().wait_for(|ended| *ended).await;
        let attach = SessionTask::default();
        let capture = Capture { task: Arc::new(attach), runtime: tokio::runtime::Handle::current() };
        let connector = connector(config).with_session(info);
        let client = open(config, hosts, connector, capture).await?;
        let mut watcher = client.state_watcher();
        // Dropping the only clone sends CloseSession; the state turns terminal on its answer.
        drop(client);
        while !watcher.state().is_terminated() {
            watcher.changed().await;
        }
        Ok::<(), Error>(())
    };
    match tokio::time::timeout(config.connection_timeout.max(Duration::from_secs(1)), closing).await {
        Ok(Ok(())) => tracing::debug!(session = format_args!("{:#x}", id.0), "session closed"),
        Ok(Err(Error::ZooKeeper(zookeeper_client::Error::SessionExpired))) => {}
        Ok(Err(error)) => {
            tracing::warn!(session = format_args!("{:#x}", id.0), %error, "could not close the session; it expires on its own")
        }
        Err(_) => tracing::warn!(
            session = format_args!("{:#x}", id.0),
            "closing the session timed out; it expires on its own"
        ),
    }
}
