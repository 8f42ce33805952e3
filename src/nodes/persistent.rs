//! [`PersistentNode`]: one node that a background task keeps in existence (Curator's
//! `PersistentNode`).
//!
//! The task creates the node, then watches it with a one-shot `exists` watch (a node its own
//! create made counts as registered from the create's reply; `set_data` and `close` do not
//! wait for the watch's read). It creates the
//! node again when the watch reports a deletion, when the watch's session ended (a new session
//! lost every ephemeral node of the old one) and after a reconnect (it checks the node). The
//! first create of a sequential or ephemeral node is protected, so a create whose answer was
//! lost never leaves a second node; every later create reuses the exact name of the first (a
//! sequential node keeps its sequence number, as in Curator). A node found at that name is
//! adopted (its data set to ours) when it is of the node's kind: for an ephemeral mode, an
//! ephemeral node of the current session; for the others, any node but an ephemeral node of
//! the current session. An ephemeral node of another session (an old session of ours that the
//! server has not expired yet, or another client) is watched until it goes, then created
//! again; a node of the other kind that would not go by itself (a persistent node at an
//! ephemeral node's name, an ephemeral node of this session at a persistent node's) is
//! deleted at the version read and created again as ours. Commands (`set_data`, `close`) go
//! through the task, so the data a re-create writes is always the latest; data a create
//! could not carry is refused before it is taken.
//!
//! Deletes (close, drop) take only a node that is ours: the node held, through the session it
//! is ours on; once that session has ended, a node at the name is read first and deleted only
//! when it is an ephemeral node of the current session or, for a persistent mode, a node that
//! is not ephemeral, so that another session's node at the name is left.

use std::future::IntoFuture;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{mpsc, oneshot, watch};
use zookeeper_client::{CreateMode, Stat};

use crate::error::{is_zk_retryable, is_zk_session_lost, Error, Result, ZkError};
use crate::framework::metrics::Op;
use crate::framework::{stall, BackgroundErrorKind, NodeEventKind, ReaperCmd};
use crate::framework::{Framework, OneshotWatch, Parents, StateSnapshot, TTL_MAX};
use crate::path;

/// How long the task waits before trying again after a create or read failed for a reason
/// retrying may cure (the framework's retry policy already ran out), growing to the maximum.
const PAUSE_FIRST: Duration = Duration::from_millis(100);
const PAUSE_MAX: Duration = Duration::from_secs(2);

/// The recipe named in the reaper's background errors.
const RECIPE: &str = "persistent_node";

/// Options of a [`PersistentNode`], from [`PersistentNode::builder`].
#[must_use = "a builder does nothing until `start` is called"]
#[derive(Debug)]
pub struct PersistentNodeBuilder {
    framework: Framework,
    path: String,
    mode: CreateMode,
    data: Vec<u8>,
    protected: Option<bool>,
    ttl: Option<Duration>,
    parents: Parents,
    delete_when_dropped: bool,
    found_by_name: bool,
    watch_node: bool,
}

impl PersistentNodeBuilder {
    /// The node's mode (default [`CreateMode::Ephemeral`]): ephemeral, ephemeral sequential,
    /// persistent, persistent sequential (a TTL node with [`ttl`](Self::ttl)) or container.
    pub fn mode(mut self, mode: CreateMode) -> Self {
        self.mode = mode;
        self
    }

    /// The node's data (default none).
    pub fn data(mut self, data: impl Into<Vec<u8>>) -> Self {
        self.data = data.into();
        self
    }

    /// Whether the first create is protected (Curator's `useProtection`: the name gets the
    /// `_c_<uuid>-` prefix, and a create whose answer was lost is found by it). Default: on for
    /// the sequential and ephemeral modes, off for the others. Sequential modes are always
    /// protected (`false` is refused by [`start`](Self::start)): without it a lost answer
    /// could leave two nodes.
    pub fn protected(mut self, protected: bool) -> Self {
        self.protected = Some(protected);
        self
    }

    /// A TTL (persistent and persistent-sequential modes; the server needs extended types).
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.ttl = Some(ttl);
        self
    }

    /// How missing parents are made (default: containers, as Curator's `useParentCreation`).
    pub fn parents(mut self, parents: Parents) -> Self {
        self.parents = parents;
        self
    }

    /// Whether dropping the handle without `close` deletes the node (default true). A
    /// [`PersistentTtlNode`](super::PersistentTtlNode) leaves its node to the server's TTL.
    pub(crate) fn delete_when_dropped(mut self, delete: bool) -> Self {
        self.delete_when_dropped = delete;
        self
    }

    /// Whether the task watches a node its own create made (default true): with the watch, a
    /// delete by another client is repaired at once; without it the node is made again only
    /// after a new session (curator-x-discovery's default, `watchInstances(false)`), and a
    /// registration costs its create alone. A node found existing is always checked with a
    /// watched read.
    #[cfg(feature = "discovery")]
    pub(crate) fn watch_node(mut self, watch: bool) -> Self {
        self.watch_node = watch;
        self
    }

    /// An unprotected sequential first create (the name exactly `<name><sequence>`, as
    /// curator-x-discovery's `DYNAMIC_SEQUENTIAL` instances are) whose answer was lost finds
    /// its node by name instead: after a `sync`, an ephemeral child `<name>` + 10 digits of the
    /// current session is ours. Only for ephemeral sequential nodes whose name no other node of
    /// the session starts with (an instance id).
    #[cfg(feature = "discovery")]
    pub(crate) fn found_by_name(mut self) -> Self {
        self.found_by_name = true;
        self
    }

    /// Whether an unprotected ephemeral sequential node is found by its name after a lost answer
    /// (see [`found_by_name`](Self::found_by_name)).
    fn by_sequence_name(&self) -> bool {
        self.found_by_name && self.mode == CreateMode::EphemeralSequential
    }

    /// The refusals of [`start`](Self::start) that need no server; whether the node's name is
    /// protected. For a caller that must know the start will not be refused before it undoes
    /// something (discovery removes an earlier registration at the same path).
    pub(crate) fn check(&self) -> Result<bool> {
        path::validate_recipe_path(&self.path)?;
        if self.framework.is_closed() {
            return Err(Error::Closed);
        }
        let sequential = is_sequential(self.mode);
        let protected = self.protected.unwrap_or(sequential || is_ephemeral(self.mode));
        if sequential && !protected && !self.by_sequence_name() {
            return Err(Error::invalid_argument(
                "protected",
                "a sequential persistent node is always protected (a lost answer could leave two nodes)",
            ));
        }
        if let Some(ttl) = self.ttl {
            if !matches!(self.mode, CreateMode::Persistent | CreateMode::PersistentSequential) {
                return Err(Error::invalid_argument(
                    "ttl",
                    format!("a TTL needs a persistent mode, not {:?}", self.mode),
                ));
            }
            if ttl < Duration::from_millis(1) {
                return Err(Error::invalid_argument("ttl", "must be at least one millisecond"));
            }
            if ttl > TTL_MAX {
                return Err(Error::invalid_argument("ttl", format!("must be at most {TTL_MAX:?}")));
            }
        }
        // Data over the request size is refused now rather than by the task's first create
        // (the node's creates send the data uncompressed).
        check_data(&self.framework, &self.path, name_extra(protected, sequential), &self.data)?;
        Ok(protected)
    }

    /// Starts the task that creates and keeps the node (Curator's `start()`); it returns at
    /// once. [`PersistentNode::wait_for_initial_create`] waits for the node.
    ///
    /// # Errors
    /// [`Error::InvalidPath`] (also for the root and `/zookeeper`), [`Error::InvalidArgument`]
    /// for a TTL on another mode, a zero TTL or one over ZooKeeper's 2^40 - 1 ms, or a
    /// sequential mode without protection, or a call outside a Tokio runtime (the task needs
    /// one); [`Error::TooLarge`] for data (or a path) over the request size; [`Error::Closed`].
    /// Nothing is created then.
    pub fn start(self) -> Result<PersistentNode> {
        let protected = self.check()?;
        let runtime = crate::runtime::current("start")?;
        let found_by_name = self.by_sequence_name() && !protected;
        let (status_tx, status_rx) = watch::channel(Status::default());
        let status_tx = Arc::new(status_tx);
        let (commands_tx, commands_rx) = mpsc::unbounded_channel();
        let failure = Arc::new(Mutex::new(None));
        let gate = Arc::new(Mutex::new(Gate::default()));
        let engine = Engine {
            framework: self.framework.clone(),
            base: self.path.clone(),
            mode: self.mode,
            protected,
            ttl: self.ttl,
            parents: self.parents,
            data: self.data,
            actual: None,
            lost_create: false,
            created_on: 0,
            held_on: 0,
            status: status_tx.clone(),
            commands: commands_rx,
            failure: failure.clone(),
            gate: gate.clone(),
            delete_when_dropped: self.delete_when_dropped,
            found_by_name,
            watch_node: self.watch_node,
        };
        runtime.spawn(engine.run());
        Ok(PersistentNode {
            runtime,
            framework: self.framework,
            mode: self.mode,
            name_extra: name_extra(protected, is_sequential(self.mode)),
            base: self.path,
            status: status_rx,
            status_tx,
            commands: commands_tx,
            failure,
            gate,
        })
    }
}

/// What the task last knew about the node.
#[derive(Debug, Clone, Default)]
struct Status {
    /// The node's actual path (namespace stripped), once created.
    path: Option<String>,
    /// True while the node exists and is ours.
    registered: bool,
    /// True once the task has stopped (closed, or a refusal it cannot cure).
    stopped: bool,
}

enum Command {
    SetData(Vec<u8>, oneshot::Sender<Result<()>>),
    Close(oneshot::Sender<Result<()>>),
    /// The handle closed and deleted the node the task held ([`Gate::held`]) itself (sent once
    /// that delete has answered, so the node's watch has had its event): stop.
    Stopped,
    /// The handle let go of the node (a registration that another node at the same path
    /// replaces): stop, deleting nothing. Sent by discovery registrations only.
    #[cfg_attr(not(feature = "discovery"), allow(dead_code))]
    Detach,
}

/// What the handle's [`close`](PersistentNode::close) and the task agree on under one lock,
/// so that a close can delete the node from the caller's task (one round trip, no hand-over
/// to the task and back) without the task making the node again behind it.
#[derive(Debug, Default)]
struct Gate {
    /// Set by `close`: the task publishes no registration and holds no node from then on.
    closing: bool,
    /// The node the task has made or adopted and watches, ours while it is set, and the
    /// session (epoch) it is ours on: the task clears it as soon as it learns the node is
    /// gone, no longer ours, or about to be made again.
    held: Option<(String, u64)>,
}

/// A node kept in existence by a background task (Curator's `PersistentNode`, which also
/// stands for the deprecated `PersistentEphemeralNode`): created at start, created again when
/// anyone deletes it and after the session's end, with its data kept as last set.
///
/// ```no_run
/// # async fn example(fw: zk_recipes::Framework) -> zk_recipes::Result<()> {
/// use std::time::Duration;
/// use zk_recipes::{CreateMode, PersistentNode};
///
/// let node = PersistentNode::builder(&fw, "/services/api/instance-")
///     .mode(CreateMode::EphemeralSequential)
///     .data(b"10.0.0.7:8080".to_vec())
///     .start()?;
/// if node.wait_for_initial_create(Duration::from_secs(10)).await? {
///     println!("registered as {}", node.actual_path().unwrap());
/// }
/// node.close().await?;
/// # Ok(()) }
/// ```
///
/// Dropping the handle without [`close`](Self::close) also stops the task and deletes the
/// node (guaranteed), in the background.
///
/// The task watches the node with a one-shot `exists` watch: do not watch the node's own path
/// with a persistent (non-recursive) watch of the same framework (see the crate's Watches
/// section on ZooKeeper 3.6 to 3.8).
#[derive(Debug)]
pub struct PersistentNode {
    /// The runtime the node's task runs on, which [`registered`](Self::registered)'s follower
    /// joins (it may be called from any thread).
    runtime: tokio::runtime::Handle,
    framework: Framework,
    mode: CreateMode,
    /// What a create adds to the path's length (the protected prefix, the sequence number).
    name_extra: usize,
    base: String,
    status: watch::Receiver<Status>,
    status_tx: Arc<watch::Sender<Status>>,
    commands: mpsc::UnboundedSender<Command>,
    failure: Arc<Mutex<Option<Error>>>,
    gate: Arc<Mutex<Gate>>,
}

impl PersistentNode {
    /// Options for a node at `path` (namespace applied; for sequential modes the name prefix).
    pub fn builder(framework: &Framework, path: &str) -> PersistentNodeBuilder {
        PersistentNodeBuilder {
            framework: framework.clone(),
            path: path.to_owned(),
            mode: CreateMode::Ephemeral,
            data: Vec::new(),
            protected: None,
            ttl: None,
            parents: Parents::default(),
            delete_when_dropped: true,
            found_by_name: false,
            watch_node: true,
        }
    }

    /// The path given to the builder.
    pub fn base_path(&self) -> &str {
        &self.base
    }

    /// The node's actual path (with the protected prefix and the sequence number), once it has
    /// been created (Curator's `getActualPath`).
    pub fn actual_path(&self) -> Option<String> {
        self.status.borrow().path.clone()
    }

    /// True while the node exists and is this handle's (as last seen by the task).
    pub fn is_registered(&self) -> bool {
        self.status.borrow().registered
    }

    /// Follows [`is_registered`](Self::is_registered): the receiver holds true while the node
    /// exists and is ours, false while it is being created again (after a delete, during a
    /// new session, while another session's node is waited out) and after close.
    pub fn registered(&self) -> watch::Receiver<bool> {
        let mut status = self.status.clone();
        let (tx, rx) = watch::channel(status.borrow().registered);
        self.runtime.spawn(async move {
            loop {
                tokio::select! {
                    changed = status.changed() => {
                        if changed.is_err() {
                            tx.send_replace(false);
                            return;
                        }
                        let now = status.borrow_and_update().registered;
                        tx.send_if_modified(|v| std::mem::replace(v, now) != now);
                    }
                    () = tx.closed() => return,
                }
            }
        });
        rx
    }

    /// Waits until the node has been created the first time (Curator's `waitForInitialCreate`):
    /// true when it was, false when `timeout` passed first. [`actual_path`](Self::actual_path)
    /// tells without waiting.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a zero timeout; the refusal that stopped the task
    /// (`NoAuth`, `NoNode` with [`Parents::MustExist`], [`Error::Unsupported`] for a TTL on a
    /// server without extended types), or [`Error::Closed`] when the node was closed first.
    ///
    /// # Cancel safety
    /// Cancel-safe: it only waits.
    pub async fn wait_for_initial_create(&self, timeout: Duration) -> Result<bool> {
        let deadline = crate::deadline::of_wait(timeout)?;
        let mut status = self.status.clone();
        let waited = tokio::time::timeout_at(deadline, status.wait_for(|s| s.path.is_some() || s.stopped)).await;
        match waited {
            Err(_) => Ok(false),
            Ok(Err(_)) => Err(self.stop_reason()),
            Ok(Ok(s)) if s.path.is_some() => Ok(true),
            Ok(Ok(_)) => Err(self.stop_reason()),
        }
    }

    /// Sets the node's data (unversioned), now and for every later re-create (Curator's
    /// `setData`). Before the node exists the data is only kept for the create.
    ///
    /// # Errors
    /// [`Error::TooLarge`] for data over what a create of the node can carry (the data is not
    /// taken: the node and its re-creates keep the data of before); a write error (the data
    /// is still kept for the next re-create); [`Error::Closed`] after close.
    ///
    /// # Cancel safety
    /// Cancel-safe in the sense that the data is taken: a cancelled call may still write it.
    pub async fn set_data(&self, data: impl Into<Vec<u8>>) -> Result<()> {
        let data = data.into();
        self.check_data(&data)?;
        let (tx, rx) = oneshot::channel();
        self.commands.send(Command::SetData(data, tx)).map_err(|_| self.stop_reason())?;
        rx.await.map_err(|_| self.stop_reason())?
    }

    /// Refuses data that a create of the node could not carry: the task creates the node again
    /// (after a delete, in a new session) with the data last set, and a create's request
    /// has less room for it than a write's.
    pub(crate) fn check_data(&self, data: &[u8]) -> Result<()> {
        check_data(&self.framework, &self.base, self.name_extra, data)
    }

    /// The node's mode.
    #[cfg_attr(not(feature = "discovery"), allow(dead_code))]
    pub(crate) fn mode(&self) -> CreateMode {
        self.mode
    }

    /// True once the task has stopped (closed, or a refusal it cannot cure).
    #[cfg_attr(not(feature = "discovery"), allow(dead_code))]
    pub(crate) fn is_stopped(&self) -> bool {
        self.status.borrow().stopped
    }

    /// Stops the task and leaves the node as it is, for another node of the same path that
    /// takes it over (or replaces it).
    #[cfg_attr(not(feature = "discovery"), allow(dead_code))]
    pub(crate) fn detach(&self) {
        {
            let mut gate = lock(&self.gate);
            gate.closing = true;
            gate.held = None;
        }
        self.status_tx.send_modify(|s| {
            s.registered = false;
            s.stopped = true;
        });
        let _ = self.commands.send(Command::Detach);
    }

    /// Stops the task and deletes the node (guaranteed: after a failure the framework's reaper
    /// keeps deleting it, an ephemeral node while its session lasts, any other for as long as
    /// the framework is open). Only a node that is this node's is deleted: after the session
    /// it was made on ended, a node another session made at the name is left. A create in
    /// doubt (its answer lost) has its node deleted too, once found. Later calls are `Ok`.
    ///
    /// # Errors
    /// The delete's error when it failed (the reaper still deletes the node).
    ///
    /// # Cancel safety
    /// Cancel-safe: once called, the task closes and deletes the node whether or not the call
    /// is awaited to the end.
    pub async fn close(&self) -> Result<()> {
        let held = {
            let mut gate = lock(&self.gate);
            gate.closing = true;
            gate.held.take()
        };
        if let Some((path, epoch)) = held {
            // The task holds a node it watches: delete it from here, then let the task stop
            // (also when this call is cancelled). The server sends the watch's event before
            // the delete's answer, so the task drops a watch that has fired (an unfired one
            // would cost a RemoveWatches). An ephemeral node held on a session that has ended
            // went with it, so no data is needed to recognise it.
            self.status_tx.send_modify(|s| {
                s.registered = false;
                s.stopped = true;
            });
            let _stopped = StopOnDrop(&self.commands);
            return delete_ours(&self.framework, self.mode, &path, Some(epoch), &[]).await;
        }
        let (tx, rx) = oneshot::channel();
        if self.commands.send(Command::Close(tx)).is_err() {
            return Ok(());
        }
        rx.await.unwrap_or(Ok(()))
    }

    fn stop_reason(&self) -> Error {
        match &*self.failure.lock().unwrap_or_else(|e| e.into_inner()) {
            Some(e) => copy_error(e),
            None => Error::Closed,
        }
    }
}

/// Tells the task [`Command::Stopped`] when dropped.
struct StopOnDrop<'a>(&'a mpsc::UnboundedSender<Command>);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        let _ = self.0.send(Command::Stopped);
    }
}

fn lock(gate: &Mutex<Gate>) -> std::sync::MutexGuard<'_, Gate> {
    gate.lock().unwrap_or_else(|e| e.into_inner())
}

/// Deletes the node at `path` when it is this node's to delete, and only then: once our
/// session has ended, a node at the name may be another session's.
///
/// With `held_on`, the node the task held as ours on that session (epoch) is deleted through
/// that session while it lasts. Otherwise, or once that session is over (an ephemeral node
/// went with it), the node there is read and deleted, at the version read and through the
/// session it was read on, when it is an ephemeral node of that session or, for a node of a
/// persistent mode, a node that is not ephemeral. When the retry policy gives up, the reaper
/// goes on by the same rule (`data` is what an ephemeral node of ours holds, for the case where
/// even the read failed). A node already gone, or a closed framework, is fine.
async fn delete_ours(fw: &Framework, mode: CreateMode, path: &str, held_on: Option<u64>, data: &[u8]) -> Result<()> {
    let result = async {
        let full = fw.full_path(path)?;
        if let Some(epoch) = held_on {
            match delete_on(fw, &full, None, epoch).await {
                Some(deleted) => return deleted,
                None if is_ephemeral(mode) => return Ok(()),
                None => {}
            }
        }
        let mut retry = fw.retry_loop();
        loop {
            let before = fw.epoch();
            // A sync first: the server of a later session may be behind the one a persistent
            // node was made through, and show no node yet (both go in one round trip).
            let (synced, read) = tokio::join!(fw.sync(path), fw.exists(path));
            let read = match synced {
                Err(e) if !e.is_no_node() => Err(e),
                _ => read,
            };
            let stat = match read {
                Ok(None) => return Ok(()),
                Ok(Some(stat)) => stat,
                Err(e) => {
                    if e.is_retryable() {
                        hand_to_reaper(fw, mode, full, data);
                    }
                    return Err(e);
                }
            };
            let now = fw.snapshot();
            if !now.session_over(before) {
                let ours = match stat.ephemeral_owner {
                    0 => !is_ephemeral(mode),
                    owner => owner == now.session_id,
                };
                if !ours {
                    return Ok(());
                }
                match delete_on(fw, &full, Some(stat.version), now.epoch).await {
                    // Written since the read: read again.
                    Some(Err(e)) if e.is_bad_version() => {}
                    Some(deleted) => return deleted,
                    // The session ended first: read again, through the next one.
                    None => {}
                }
            }
            // The read went across sessions, or the node changed: read again, under the
            // retry policy.
            if !retry.backoff().await {
                hand_to_reaper(fw, mode, full, data);
                return Err(Error::ZooKeeper(ZkError::ConnectionLoss));
            }
        }
    };
    match result.await {
        Err(Error::Closed) => Ok(()),
        other => other,
    }
}

/// Deletes `full` (at `version`, when given) through the session of `epoch` only, under the
/// retry policy: `None` once that session is over before the delete is known to be done, the
/// delete's result otherwise (a node already gone counts as deleted). When the policy gives
/// up, the reaper goes on with the delete on that session (and, after it, with a node there
/// that is not ephemeral).
async fn delete_on(fw: &Framework, full: &str, version: Option<i32>, epoch: u64) -> Option<Result<()>> {
    let mut retry = fw.retry_loop();
    loop {
        let client = fw.client_of(epoch)?;
        fw.observer().request(Op::Delete);
        let error = match stall::unstalled(&client, fw.observer(), client.delete(full, version)).await {
            Ok(()) | Err(ZkError::NoNode) => return Some(Ok(())),
            Err(e) => e,
        };
        if is_zk_session_lost(&error) && fw.session_gone(epoch) {
            return None;
        }
        // A session-lost error while the session lives on came from a client it moved away
        // from: the next try goes through the one serving it now.
        if !is_zk_retryable(&error) && !is_zk_session_lost(&error) {
            return Some(Err(error.into()));
        }
        if retry.allows_zk(&error) && retry.backoff().await {
            continue;
        }
        let (path, recipe) = (full.to_owned(), RECIPE);
        fw.reap(match version {
            Some(version) => ReaperCmd::DeleteAt { path, version, epoch, recipe },
            None => ReaperCmd::Delete { path, epoch, recipe },
        });
        return Some(Err(fw.closed_or(error.into())));
    }
}

/// Hands the delete of `full` to the reaper when a read of it failed: for an ephemeral mode,
/// only an ephemeral node of the current session holding `data`; for the others, the node
/// there while the current session lasts, and after it one that is not ephemeral.
fn hand_to_reaper(fw: &Framework, mode: CreateMode, full: String, data: &[u8]) {
    let (epoch, recipe) = (fw.epoch(), RECIPE);
    if epoch == 0 {
        return;
    }
    fw.reap(if is_ephemeral(mode) {
        ReaperCmd::DeleteOwned { path: full, data: data.to_vec(), epoch, recipe }
    } else {
        ReaperCmd::Delete { path: full, epoch, recipe }
    });
}

/// Refuses `data` that a create of the node at `base` (its name `extra` bytes longer: a
/// protected prefix, a sequence number) could not carry.
fn check_data(framework: &Framework, base: &str, extra: usize, data: &[u8]) -> Result<()> {
    let full = framework.full_path(base)?;
    let acl = framework.acl_for(&full)?;
    framework.check_create_with(&full, extra, data, &acl)
}

/// What a create adds to the name given: the protected prefix, the sequence number.
fn name_extra(protected: bool, sequential: bool) -> usize {
    let prefix = if protected { path::PROTECTED_PREFIX_LEN } else { 0 };
    prefix + if sequential { 10 } else { 0 }
}

/// A copy of the task's stopping error for each caller that asks.
pub(super) fn copy_error(e: &Error) -> Error {
    match e {
        Error::ZooKeeper(z) => Error::ZooKeeper(z.clone()),
        Error::Unsupported { feature, reason } => Error::Unsupported { feature, reason },
        Error::InvalidPath { path, reason } => Error::InvalidPath { path: path.clone(), reason },
        Error::Closed => Error::Closed,
        other => Error::invalid_argument("node", other.to_string()),
    }
}

fn is_sequential(mode: CreateMode) -> bool {
    matches!(mode, CreateMode::PersistentSequential | CreateMode::EphemeralSequential)
}

fn is_ephemeral(mode: CreateMode) -> bool {
    matches!(mode, CreateMode::Ephemeral | CreateMode::EphemeralSequential)
}

/// The mode of a re-create at the first node's exact name.
fn without_sequence(mode: CreateMode) -> CreateMode {
    match mode {
        CreateMode::EphemeralSequential => CreateMode::Ephemeral,
        CreateMode::PersistentSequential => CreateMode::Persistent,
        other => other,
    }
}

/// What a node found at the name is to this node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Found {
    /// Ours to keep (adopted).
    Ours,
    /// To be deleted and made again as ours.
    Replace,
    /// Another session's ephemeral node: waited for until it goes.
    Another,
}

/// What the task does next.
enum Next {
    /// Create (or check) the node again.
    Ensure,
    /// Watch the node again (its data changed): nothing to create.
    Rewatch,
    /// Stop: closed, or a refusal retrying cannot cure.
    Stop,
}

struct Engine {
    framework: Framework,
    base: String,
    mode: CreateMode,
    protected: bool,
    ttl: Option<Duration>,
    parents: Parents,
    data: Vec<u8>,
    /// The node's name once known: made, found, or the name of an unprotected create that may
    /// have made it.
    actual: Option<String>,
    /// An unprotected sequential create's answer was lost and its node (if it made one) has
    /// not been found yet: no new create goes out until a search by name has succeeded.
    lost_create: bool,
    status: Arc<watch::Sender<Status>>,
    commands: mpsc::UnboundedReceiver<Command>,
    failure: Arc<Mutex<Option<Error>>>,
    gate: Arc<Mutex<Gate>>,
    delete_when_dropped: bool,
    found_by_name: bool,
    watch_node: bool,
    /// The framework's session (epoch) when the last create was sent: a node it made is at
    /// least that session's (a create goes on across a new session, never back).
    created_on: u64,
    /// The session (epoch) the node last held ([`hold`](Self::hold)) is ours on.
    held_on: u64,
}

impl Engine {
    async fn run(mut self) {
        let mut pause = PAUSE_FIRST;
        let mut rewatch: Option<String> = None;
        loop {
            if self.closing() {
                // The handle is closing (it may be deleting the node itself): nothing is made
                // again; its command ends the task.
                loop {
                    let command = self.commands.recv().await;
                    let last = !matches!(command, Some(Command::SetData(..)));
                    self.handle_before_node(command, None).await;
                    if last {
                        return;
                    }
                }
            }
            let (path, fresh) = match rewatch.take() {
                Some(path) => (path, false),
                None => match self.ensure().await {
                    Ok(Some(found)) => found,
                    Ok(None) => return,
                    // The framework closed: no refusal to report (the node went, or goes, with
                    // the session).
                    Err(Error::Closed) => {
                        *self.failure.lock().unwrap_or_else(|e| e.into_inner()) = Some(Error::Closed);
                        self.stop();
                        return;
                    }
                    Err(e) if is_fatal(&e, self.parents) => {
                        tracing::warn!(path = %self.base, error = %e, "persistent node: stopped by a refusal");
                        let (kind, full) = (BackgroundErrorKind::NodeNotRecreated, self.framework.fix_path(&self.base));
                        self.framework.observer().error_ref("persistent_node", kind, &full, &e);
                        *self.failure.lock().unwrap_or_else(|e| e.into_inner()) = Some(e);
                        self.stop();
                        return;
                    }
                    Err(e) => {
                        tracing::debug!(path = %self.base, error = %e, "persistent node: create failed; trying again");
                        if let Next::Stop = self.pause(pause).await {
                            return;
                        }
                        pause = (pause * 2).min(PAUSE_MAX);
                        continue;
                    }
                },
            };
            pause = PAUSE_FIRST;
            match self.watch(&path, fresh).await {
                Next::Stop => return,
                Next::Rewatch => rewatch = Some(path),
                Next::Ensure => {}
            }
        }
    }

    /// Creates the node (or finds its name taken): its path and whether this create made it,
    /// `None` when closed meanwhile.
    async fn ensure(&mut self) -> Result<Option<(String, bool)>> {
        let fw = self.framework.clone();
        if self.lost_create {
            if let Some(found) = self.search_lost().await? {
                return Ok(Some((found, true)));
            }
        }
        let (path, mode, protected) = match &self.actual {
            None => (self.base.clone(), self.mode, self.protected),
            Some(actual) => (actual.clone(), without_sequence(self.mode), false),
        };
        // An unprotected sequential create (discovery's dynamic-sequential registration) is
        // never dropped in flight: its node's name is known only from its reply, so a dropped
        // one would leave a node nobody deletes (a second registration, or one after close).
        let sequential = !protected && self.actual.is_none() && is_sequential(mode);
        self.created_on = fw.state_watch().borrow().epoch;
        let created = 'send: loop {
            let data = self.data.clone();
            let mut create = fw.create(&path).plain().mode(mode).data(&data).parents(self.parents);
            if protected {
                create = create.protected();
            }
            if let Some(ttl) = self.ttl {
                create = create.ttl(ttl);
            }
            let mut create = std::pin::pin!(create.into_future());
            let mut written_since = false;
            loop {
                tokio::select! {
                    created = &mut create => {
                        if let (true, Ok(made)) = (written_since, &created) {
                            // Made with the data of before: the data of now goes after it.
                            if let Err(e) = fw.set_data(&made.path, &self.data).plain().await {
                                tracing::debug!(path = %made.path, error = %e, "persistent node: new data not written");
                            }
                        }
                        break 'send created;
                    }
                    command = self.commands.recv() => match command {
                        // New data while the create is in flight: the create is dropped (a
                        // protected one has its node deleted by the framework; an unprotected
                        // one is found at its name) and sent again with the new data; a
                        // sequential one goes on, and the data is written after it.
                        Some(Command::SetData(data, reply)) => {
                            self.data = data;
                            let _ = reply.send(Ok(()));
                            if sequential {
                                written_since = true;
                                continue;
                            }
                            continue 'send;
                        }
                        // Closed: an unprotected create is at a known name (a sequential one
                        // once answered), deleted here.
                        other => {
                            // A sequential create's answer may take the retry policy's while
                            // (an outage): the close is answered now, and its node deleted once
                            // its name is known, as a guaranteed delete finishes on its own.
                            let other = match other {
                                Some(Command::Close(reply)) if sequential => {
                                    let _ = reply.send(Ok(()));
                                    Some(Command::Stopped)
                                }
                                other => other,
                            };
                            let made = match (protected, sequential) {
                                (true, _) => None,
                                (false, true) => match create.await {
                                    Ok(made) => Some(made.path),
                                    Err(Error::OutcomeUnknown { .. }) if self.found_by_name => {
                                        self.lost_create = true;
                                        None
                                    }
                                    Err(_) => None,
                                },
                                (false, false) => Some(path.clone()),
                            };
                            self.handle_before_node(other, made).await;
                            return Ok(None);
                        }
                    },
                }
            }
        };
        match created {
            Ok(created) => {
                self.actual = Some(created.path.clone());
                Ok(Some((created.path, !created.existed)))
            }
            Err(Error::OutcomeUnknown { error, .. }) if self.found_by_name && self.actual.is_none() => {
                self.lost_create = true;
                match self.search_lost().await? {
                    Some(found) => Ok(Some((found, true))),
                    // Not made: the next round creates it.
                    None => Err(Error::ZooKeeper(error)),
                }
            }
            Err(e) if e.is_node_exists() => {
                // The name is taken (a re-create, or a plain name): the watch decides whether
                // the node is ours; adopting it sets our data.
                if self.actual.is_none() {
                    self.actual = Some(path.clone());
                }
                Ok(Some((path, false)))
            }
            Err(e) => {
                if !protected && !is_sequential(mode) && self.actual.is_none() {
                    // The create may have made the node (its answer lost): its name is known,
                    // and a close deletes the node there when it is ours.
                    self.actual = Some(path);
                }
                Err(e)
            }
        }
    }

    /// Searches for the node of a lost unprotected sequential create by its name: `None` when
    /// the create did not make it. The create stays in doubt until a search succeeds.
    async fn search_lost(&mut self) -> Result<Option<String>> {
        let found = self.find_by_name(&self.base).await?;
        self.lost_create = false;
        if let Some(found) = &found {
            self.actual = Some(found.clone());
        }
        Ok(found)
    }

    /// [`search_lost`](Self::search_lost) again and again (through an outage) until it
    /// succeeds, for a close: the node found is the close's to delete. `None` when the create
    /// made none, or when the search cannot succeed (the framework closed, a refusal).
    async fn settle_lost_create(&mut self) -> Option<String> {
        let mut pause = PAUSE_FIRST;
        while self.lost_create {
            match self.search_lost().await {
                Ok(found) => return found,
                Err(e) if e.is_retryable() => {
                    tracing::debug!(path = %self.base, error = %e, "persistent node: searching for a lost create's node");
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(PAUSE_MAX);
                }
                Err(e) => {
                    tracing::debug!(path = %self.base, error = %e, "persistent node: a lost create's node not searched for");
                    return None;
                }
            }
        }
        None
    }

    /// The node a lost sequential create made, found by its name (`base` + 10 digits, an
    /// ephemeral node of the current session); extra ones (none are expected) are deleted.
    async fn find_by_name(&self, base: &str) -> Result<Option<String>> {
        let fw = &self.framework;
        let (dir, prefix) = base.rsplit_once('/').unwrap_or(("", base));
        let dir = if dir.is_empty() { "/" } else { dir };
        fw.sync(dir).await?;
        let mut names = match fw.get_children(dir).await {
            Ok(names) => names,
            Err(e) if e.is_no_node() => return Ok(None),
            Err(e) => return Err(e),
        };
        names.retain(|n| {
            n.strip_prefix(prefix).is_some_and(|seq| seq.len() == 10 && seq.bytes().all(|b| b.is_ascii_digit()))
        });
        names.sort();
        let session = fw.snapshot().session_id;
        let mut found = None;
        for name in names {
            let path = path::join(dir, &name);
            match fw.exists(&path).await? {
                Some(stat) if stat.ephemeral_owner == session && session != 0 => {
                    if found.is_none() {
                        found = Some(path);
                    } else {
                        self.delete_ours(&path, None).await?;
                    }
                }
                _ => {}
            }
        }
        Ok(found)
    }

    /// A command that came while no node was known to be ours: a close ends the task
    /// (deleting the node at `path`, or at the name known, when it is ours), data is kept for
    /// the create.
    async fn handle_before_node(&mut self, command: Option<Command>, path: Option<String>) {
        let (delete, reply) = match command {
            Some(Command::SetData(data, reply)) => {
                // The create in flight was dropped with the old data; the next round uses these.
                self.data = data;
                let _ = reply.send(Ok(()));
                return;
            }
            Some(Command::Close(reply)) => (true, Some(reply)),
            // The handle deleted the node it held, but this task was between rounds: a create
            // of its own may have made the node again since, so it goes too (one more delete,
            // only on this rare path).
            Some(Command::Stopped) => (true, None),
            Some(Command::Detach) => (false, None),
            None => (self.delete_when_dropped, None),
        };
        let reply = match reply {
            // A lost create's node is searched for through an outage: the close is answered
            // now, and the node deleted once found, as a guaranteed delete finishes on its own.
            Some(reply) if delete && self.lost_create => {
                let _ = reply.send(Ok(()));
                None
            }
            reply => reply,
        };
        let mut result = Ok(());
        if delete {
            let path = match path.or_else(|| self.actual.clone()) {
                Some(path) => Some(path),
                None => self.settle_lost_create().await,
            };
            if let Some(path) = path {
                result = self.delete_ours(&path, None).await;
            }
        }
        self.stop();
        if let Some(reply) = reply {
            let _ = reply.send(result);
        }
    }

    /// Watches the node at `path` until it must be created again (or the task stops).
    async fn watch(&mut self, path: &str, fresh: bool) -> Next {
        let fw = self.framework.clone();
        let mut states = fw.state_watch();
        let epoch = states.borrow_and_update().epoch;
        // The session a node this create made is of: the one the create was sent on or a
        // later one. Compared with the session of now, a node made on a session that ended
        // before its reply came is checked (and made) again, and not deleted through the
        // session of now.
        let made_on = if self.created_on == 0 { epoch } else { self.created_on.min(epoch) };
        if fresh && !self.watch_node {
            // Ours, and not watched: kept until a new session (the create then finds its node
            // when it was made on the session of now).
            self.hold(path, made_on);
            return self.keep(path, true, None, states, made_on).await;
        }
        let exists = fw.exists(path).watch().into_future();
        tokio::pin!(exists);
        let found = if fresh {
            // This create made the node: it is ours and registered from its reply on, and
            // commands need not wait for the watch's read (a close's delete goes out right
            // behind it, one round trip instead of two).
            self.hold(path, made_on);
            loop {
                tokio::select! {
                    biased;
                    found = &mut exists => break found,
                    command = self.commands.recv() => match command {
                        Some(Command::SetData(data, reply)) => {
                            self.data = data;
                            let _ = reply.send(fw.set_data(path, &self.data).plain().await.map(|_| ()));
                        }
                        close => {
                            // The read in flight is awaited too: its watch fires on the delete
                            // instead of being dropped unfired (which sends a RemoveWatches).
                            let delete = match close {
                                Some(Command::Stopped | Command::Detach) => false,
                                Some(_) => true,
                                None => self.delete_when_dropped,
                            };
                            let (mode, held_on, data) = (self.mode, Some(self.held_on), &self.data);
                            let delete = async {
                                if delete {
                                    delete_ours(&fw, mode, path, held_on, data).await
                                } else {
                                    Ok(())
                                }
                            };
                            let (_, deleted) = tokio::join!(&mut exists, delete);
                            self.stop();
                            if let Some(Command::Close(reply)) = close {
                                let _ = reply.send(deleted);
                            }
                            return Next::Stop;
                        }
                    },
                }
            }
        } else {
            exists.await
        };
        let (stat, watch) = match found {
            Ok(found) => found,
            Err(e) => {
                tracing::debug!(path, error = %e, "persistent node: exists failed");
                return self.pause(PAUSE_FIRST).await;
            }
        };
        let Some(stat) = stat else {
            self.set_unregistered();
            if self.closing() {
                // Deleted by the closing handle before the read came.
                return self.end_without_node().await;
            }
            return Next::Ensure;
        };
        let now = fw.snapshot();
        let mut found = self.judge(&stat, now.session_id);
        if found == Found::Replace {
            // Deleted at the version read (a node written or made again since is read again)
            // and through the session it was read on, then made as ours.
            self.set_unregistered();
            tracing::debug!(path, "persistent node: replacing a node of another kind at the name");
            match delete_on(&fw, &fw.fix_path(path), Some(stat.version), now.epoch).await {
                // Its children keep it: it stays another's, watched until it goes.
                Some(Err(e)) if e.is_not_empty() => found = Found::Another,
                Some(Err(e)) if !e.is_bad_version() => {
                    tracing::debug!(path, error = %e, "persistent node: replacing the node failed");
                    return self.pause(PAUSE_FIRST).await;
                }
                _ => return Next::Ensure,
            }
        }
        let ours = found == Found::Ours;
        if ours {
            // A node found existing (adopted, or after a reconnect) gets our data.
            let written = if !fresh && !self.status.borrow().registered {
                fw.set_data(path, &self.data).plain().await.map(|_| ())
            } else {
                Ok(())
            };
            if let Err(e) = written {
                tracing::debug!(path, error = %e, "persistent node: writing the data failed");
            }
            self.hold(path, now.epoch);
        } else {
            tracing::debug!(path, "persistent node: another session's node has the name; waiting for it to go");
            self.set_unregistered();
        }
        self.keep(path, ours, Some(watch), states, epoch).await
    }

    /// Serves commands while the node at `path` stands, until `watch` (when given) reports
    /// its delete or its session's end, or a new session begins.
    async fn keep(
        &mut self,
        path: &str,
        ours: bool,
        watch: Option<OneshotWatch>,
        mut states: watch::Receiver<StateSnapshot>,
        epoch: u64,
    ) -> Next {
        let fw = self.framework.clone();
        let now = *states.borrow_and_update();
        if now.state.is_connected() && now.epoch != epoch {
            // Made on a session the framework has left already: check (and create) again.
            self.set_unregistered();
            return Next::Ensure;
        }
        let mut changed = watch.map(|watch| Box::pin(watch.changed()));
        loop {
            tokio::select! {
                event = async { changed.as_mut().expect("guarded by the precondition").await }, if changed.is_some() => {
                    return match event {
                        Ok(event) if event.kind == NodeEventKind::Deleted => {
                            self.set_unregistered();
                            if self.closing() {
                                // The handle's own delete, most likely: the node is gone and
                                // this task made none since.
                                return self.end_without_node().await;
                            }
                            Next::Ensure
                        }
                        // Data changed (by anyone): watch again, nothing to create.
                        Ok(_) => Next::Rewatch,
                        // The session moved to another client and lives on there, with the
                        // node: watch again through it.
                        Err(Error::ZooKeeper(ZkError::ConnectionLoss)) => Next::Rewatch,
                        Err(e) => {
                            // The session ended: its ephemeral nodes with it.
                            tracing::debug!(path, error = %e, "persistent node: the watch's session ended");
                            self.set_unregistered();
                            self.wait_connected().await
                        }
                    };
                }
                command = self.commands.recv() => match command {
                    Some(Command::SetData(data, reply)) => {
                        self.data = data;
                        let result = if ours { fw.set_data(path, &self.data).plain().await.map(|_| ()) } else { Ok(()) };
                        let _ = reply.send(result);
                    }
                    Some(Command::Close(reply)) => {
                        let result = if ours { self.delete_ours(path, Some(self.held_on)).await } else { Ok(()) };
                        self.stop();
                        let _ = reply.send(result);
                        return Next::Stop;
                    }
                    // The handle deleted the node itself, or let go of it.
                    Some(Command::Stopped | Command::Detach) => {
                        self.stop();
                        return Next::Stop;
                    }
                    None => {
                        if ours && self.delete_when_dropped {
                            let _ = self.delete_ours(path, Some(self.held_on)).await;
                        }
                        self.stop();
                        return Next::Stop;
                    }
                },
                changed = states.changed() => {
                    if changed.is_err() {
                        self.stop();
                        return Next::Stop;
                    }
                    let now = *states.borrow_and_update();
                    if !now.state.is_connected() && now.epoch != epoch {
                        self.set_unregistered();
                    }
                    if now.state.is_connected() && now.epoch != epoch {
                        // A new session: check (and create) at once rather than wait for the
                        // old session's watch to report its end.
                        self.set_unregistered();
                        return Next::Ensure;
                    }
                }
            }
        }
    }

    /// Ends the task once the handle's closing command comes, with no node to delete.
    async fn end_without_node(&mut self) -> Next {
        loop {
            match self.commands.recv().await {
                Some(Command::SetData(data, reply)) => {
                    self.data = data;
                    let _ = reply.send(Ok(()));
                }
                Some(Command::Close(reply)) => {
                    self.stop();
                    let _ = reply.send(Ok(()));
                    return Next::Stop;
                }
                Some(Command::Stopped | Command::Detach) | None => {
                    self.stop();
                    return Next::Stop;
                }
            }
        }
    }

    /// What a node found at the path is to this node, `session` being the session (id) it was
    /// read through.
    fn judge(&self, stat: &Stat, session: i64) -> Found {
        let of_session = stat.ephemeral_owner != 0 && stat.ephemeral_owner == session;
        match (is_ephemeral(self.mode), stat.ephemeral_owner) {
            // No session owns it (a persistent, container or TTL node, such as one an earlier
            // registration of another kind left): it never goes by itself.
            (true, 0) => Found::Replace,
            (true, _) if of_session => Found::Ours,
            // Another session's: it goes with that session (or its owner's delete).
            (true, _) => Found::Another,
            // An ephemeral node of this session would go with it: the node is made persistent.
            (false, _) if of_session => Found::Replace,
            // As Curator's PersistentNode, any other node at the name is adopted.
            (false, _) => Found::Ours,
        }
    }

    /// True once the handle's `close` began.
    fn closing(&self) -> bool {
        lock(&self.gate).closing
    }

    /// Publishes the node at `path` as registered and held (ours on session `epoch`,
    /// watched), unless the handle is closing (its close command then comes to the task, which
    /// deletes the node).
    fn hold(&mut self, path: &str, epoch: u64) {
        self.held_on = epoch;
        let mut gate = lock(&self.gate);
        if gate.closing {
            return;
        }
        gate.held = Some((path.to_owned(), epoch));
        self.status.send_modify(|s| {
            s.path = Some(path.to_owned());
            s.registered = true;
        });
    }

    /// Publishes "not registered" and lets go of the held node ([`hold`](Self::hold)
    /// publishes a registration).
    fn set_unregistered(&self) {
        lock(&self.gate).held = None;
        self.status.send_if_modified(|s| std::mem::replace(&mut s.registered, false));
    }

    fn stop(&self) {
        lock(&self.gate).held = None;
        self.status.send_modify(|s| {
            s.registered = false;
            s.stopped = true;
        });
    }

    /// Deletes the node at `path` when it is ours ([`delete_ours`]).
    async fn delete_ours(&self, path: &str, held_on: Option<u64>) -> Result<()> {
        delete_ours(&self.framework, self.mode, path, held_on, &self.data).await
    }

    /// Waits `pause` (or until connected again), serving commands meanwhile.
    async fn pause(&mut self, pause: Duration) -> Next {
        let sleep = tokio::time::sleep(pause);
        tokio::pin!(sleep);
        loop {
            tokio::select! {
                () = &mut sleep => return if self.framework.is_closed() { self.stop(); Next::Stop } else { Next::Ensure },
                command = self.commands.recv() => {
                    let close = !matches!(command, Some(Command::SetData(..)));
                    self.handle_before_node(command, None).await;
                    if close {
                        return Next::Stop;
                    }
                }
            }
        }
    }

    /// Waits until the framework is connected again, serving commands meanwhile.
    async fn wait_connected(&mut self) -> Next {
        let mut states = self.framework.state_watch();
        loop {
            if states.borrow_and_update().state.is_connected() {
                return Next::Ensure;
            }
            tokio::select! {
                changed = states.changed() => if changed.is_err() { self.stop(); return Next::Stop; },
                command = self.commands.recv() => {
                    let close = !matches!(command, Some(Command::SetData(..)));
                    self.handle_before_node(command, None).await;
                    if close {
                        return Next::Stop;
                    }
                }
            }
        }
    }
}

/// Refusals that creating again cannot cure.
fn is_fatal(e: &Error, parents: Parents) -> bool {
    match e {
        Error::ZooKeeper(ZkError::NoNode) => parents == Parents::MustExist,
        Error::ZooKeeper(z) => {
            matches!(
                z,
                ZkError::NoAuth | ZkError::NoChildrenForEphemerals | ZkError::Unimplemented | ZkError::InvalidAcl
            )
        }
        Error::Closed
        | Error::InvalidPath { .. }
        | Error::InvalidArgument { .. }
        | Error::Unsupported { .. }
        | Error::TooLarge { .. } => true,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sequential_node_comes_back_under_its_name_without_a_new_sequence() {
        assert_eq!(without_sequence(CreateMode::EphemeralSequential), CreateMode::Ephemeral);
        assert_eq!(without_sequence(CreateMode::PersistentSequential), CreateMode::Persistent);
        assert_eq!(without_sequence(CreateMode::Ephemeral), CreateMode::Ephemeral);
    }

    #[test]
    fn refusals_that_stop_the_task() {
        assert!(is_fatal(&Error::ZooKeeper(ZkError::NoAuth), Parents::Containers));
        assert!(is_fatal(&Error::ZooKeeper(ZkError::NoNode), Parents::MustExist));
        assert!(!is_fatal(&Error::ZooKeeper(ZkError::NoNode), Parents::Containers));
        assert!(!is_fatal(&Error::ZooKeeper(ZkError::ConnectionLoss), Parents::Containers));
        assert!(!is_fatal(&Error::ZooKeeper(ZkError::SessionExpired), Parents::Containers));
    }
}
