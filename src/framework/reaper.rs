//! The reaper: guaranteed background deletes (Curator's `FailedDeleteManager` and
//! `FindAndDeleteProtectedNodeInBackground`).
//!
//! Commands arrive on an unbounded channel, so sending never blocks and works outside a
//! runtime (guards' `Drop` uses it). Each delete is retried through connection loss. A lock
//! node's delete is given up when the session that owned the node is gone (the server deleted
//! it then); a guaranteed delete of a node that may be persistent goes on through the next
//! session, for a node there that is not ephemeral, until the framework closes.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use futures::stream::FuturesUnordered;
use futures::StreamExt;
use tokio::sync::{mpsc, Notify};

use super::errors::{BackgroundErrorKind, Observer};
use super::stall::unstalled;
use crate::error::{is_zk_retryable, is_zk_session_lost, ZkError};
use crate::framework::metrics::Op;
use crate::path;
use crate::retry::{Doubling, RetryLoop};
use crate::sync::Mutex;

/// Where the reaper finds the client of a node's session (the framework's shared state).
pub(crate) trait Sessions: Send + Sync {
    /// The client of session `epoch`, while that is the current session.
    fn client_of(&self, epoch: u64) -> Option<zookeeper_client::Client>;

    /// Whether session `epoch` is over for its nodes: it is not the current session any more,
    /// or the client serving it has ended. Only then does an expired or closed client's error
    /// show that a node went with its session: a session the framework moved to another
    /// client (after a reconfiguration, through the ensemble's current members) lives on
    /// there, while the client it left, cut off, gives the session up by itself and answers
    /// every request still queued on it with `SessionExpired`.
    fn session_gone(&self, epoch: u64) -> bool {
        self.client_of(epoch).map_or(true, |client| client.state().is_terminated())
    }

    /// The client of the current session, `Err(true)` once the framework is closed (no
    /// session will come), `Err(false)` between sessions.
    fn current_client(&self) -> Result<zookeeper_client::Client, bool>;
}

/// A reply to a request already sent on the session.
pub(crate) type Reply = Pin<Box<dyn Future<Output = Result<(), ZkError>> + Send>>;

/// Work for the reaper. Paths are full server paths (namespace included).
pub(crate) enum ReaperCmd {
    /// A delete already sent on the session of `epoch`: see it through.
    Sent { path: String, epoch: u64, reply: Reply, recipe: &'static str },
    /// Delete `path`, a node of the session of `epoch`.
    Delete { path: String, epoch: u64, recipe: &'static str },
    /// Delete `path` at `version` (a versioned guaranteed delete): a node written since is
    /// left alone.
    DeleteAt { path: String, version: i32, epoch: u64, recipe: &'static str },
    /// Delete every child of `parent` whose name starts with `prefix` (an acquire that was
    /// cancelled before it learned its node's name).
    DeleteByPrefix { parent: String, prefix: String, epoch: u64, recipe: &'static str },
    /// Delete `path` if it is an ephemeral node of the session of `epoch` holding `data`, and
    /// only then: a create of a name other creates also make (a queue item's lock node) that
    /// was cancelled before its reply, so that the node there may be ours, another session's,
    /// or one a later create of this session made (each create writes data of its own).
    DeleteOwned { path: String, data: Vec<u8>, epoch: u64, recipe: &'static str },
}

impl std::fmt::Debug for ReaperCmd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Sent { path, epoch, .. } => f.debug_struct("Sent").field("path", path).field("epoch", epoch).finish(),
            Self::Delete { path, epoch, .. } => {
                f.debug_struct("Delete").field("path", path).field("epoch", epoch).finish()
            }
            Self::DeleteAt { path, version, epoch, .. } => {
                f.debug_struct("DeleteAt").field("path", path).field("version", version).field("epoch", epoch).finish()
            }
            Self::DeleteOwned { path, epoch, .. } => {
                f.debug_struct("DeleteOwned").field("path", path).field("epoch", epoch).finish()
            }
            Self::DeleteByPrefix { parent, prefix, epoch, .. } => f
                .debug_struct("DeleteByPrefix")
                .field("parent", parent)
                .field("prefix", prefix)
                .field("epoch", epoch)
                .finish(),
        }
    }
}

/// The sending side, owned by the framework.
pub(crate) struct ReaperHandle {
    tx: mpsc::UnboundedSender<ReaperCmd>,
    rx: Mutex<Option<mpsc::UnboundedReceiver<ReaperCmd>>>,
    pending: Arc<AtomicUsize>,
    idle: Arc<Notify>,
}

impl ReaperHandle {
    pub(crate) fn new() -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        Self { tx, rx: Mutex::new(Some(rx)), pending: Arc::default(), idle: Arc::default() }
    }

    pub(crate) fn send(&self, cmd: ReaperCmd) {
        self.pending.fetch_add(1, Ordering::SeqCst);
        if let Err(unsent) = self.tx.send(cmd) {
            self.pending.fetch_sub(1, Ordering::SeqCst);
            tracing::trace!(cmd = ?unsent.0, "reaper is gone; the session's end removes the node");
        }
    }

    pub(crate) fn pending(&self) -> usize {
        self.pending.load(Ordering::SeqCst)
    }

    /// Waits until no delete is pending.
    pub(crate) async fn flush(&self) {
        loop {
            let notified = self.idle.notified();
            if self.pending() == 0 {
                return;
            }
            notified.await;
        }
    }

    pub(crate) fn take_receiver(&self) -> Receiver {
        let rx = self.rx.lock().take();
        Receiver { rx, pending: self.pending.clone(), idle: self.idle.clone() }
    }
}

pub(crate) struct Receiver {
    rx: Option<mpsc::UnboundedReceiver<ReaperCmd>>,
    pending: Arc<AtomicUsize>,
    idle: Arc<Notify>,
}

impl Receiver {
    fn done(&self) {
        if self.pending.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.idle.notify_waiters();
        }
    }
}

pub(crate) async fn run(weak: Weak<dyn Sessions>, mut receiver: Receiver, observer: Arc<Observer>) {
    let Some(mut rx) = receiver.rx.take() else { return };
    let mut jobs = FuturesUnordered::new();
    loop {
        tokio::select! {
            cmd = rx.recv() => match cmd {
                Some(cmd) => jobs.push(reap(weak.clone(), cmd, &observer)),
                None => return,
            },
            Some(()) = jobs.next(), if !jobs.is_empty() => receiver.done(),
        }
    }
}

/// How the reaper spaces its tries: 50 ms doubling up to 1.6 s, forever. It never gives up on
/// a node whose session is current: a node left behind blocks every other contender.
const REAPER_BACKOFF: Doubling = Doubling { first: Duration::from_millis(50), max: Duration::from_millis(1600) };

/// Sees one delete through. Returns when the node is gone, its session is gone, the framework
/// is gone, or the server refuses for a reason retrying cannot fix (logged with the path).
async fn reap(weak: Weak<dyn Sessions>, cmd: ReaperCmd, observer: &Observer) {
    let (target, epoch, mut sent, recipe) = match cmd {
        ReaperCmd::Sent { path, epoch, reply, recipe } => (Target::Node(path), epoch, Some(reply), recipe),
        ReaperCmd::Delete { path, epoch, recipe } => (Target::Node(path), epoch, None, recipe),
        ReaperCmd::DeleteByPrefix { parent, prefix, epoch, recipe } => {
            (Target::Prefix { parent, prefix }, epoch, None, recipe)
        }
        ReaperCmd::DeleteOwned { path, data, epoch, recipe } => (Target::Owned(path, data), epoch, None, recipe),
        ReaperCmd::DeleteAt { path, version, epoch, recipe } => (Target::NodeAt(path, version), epoch, None, recipe),
    };
    // A node that may be persistent (a guaranteed delete of any node, a protected create's
    // cleanup) is still deleted after its session ended, through the session current then, as
    // Curator's guaranteed deletes go on for as long as the framework is open; an ephemeral
    // node there then is not the one asked for (that went with its session).
    let outlives_session =
        matches!(target, Target::Node(_) | Target::NodeAt(..) | Target::Prefix { .. }) && sent.is_none();
    let (target, weak) = (&target, &weak);
    let attempt = || {
        let reply = sent.take();
        let client = weak.upgrade().and_then(|inner| inner.client_of(epoch));
        let later = match (&client, weak.upgrade()) {
            (None, Some(inner)) if outlives_session => Some(inner.current_client()),
            _ => None,
        };
        async move {
            let result = match (reply, client) {
                // The release waits on this reply: a server may hold it back (see `stall`).
                (Some(reply), Some(client)) => unstalled(&client, observer, reply).await,
                (Some(reply), None) => reply.await,
                (None, Some(client)) => unstalled(&client, observer, target.delete(&client, observer)).await,
                (None, None) => match later {
                    // The session is over: only a node that is not ephemeral is left to delete.
                    Some(Ok(client)) => unstalled(&client, observer, target.delete_persistent(&client, observer)).await,
                    // Between sessions: tried again once the next one is in place.
                    Some(Err(false)) => Err(ZkError::ConnectionLoss),
                    // The session is over (and with it an ephemeral node), or the framework.
                    Some(Err(true)) | None => return Ok(()),
                },
            };
            match result {
                Err(ZkError::NoNode) => Ok(()),
                Err(e) if is_zk_session_lost(&e) && weak.upgrade().map_or(true, |inner| inner.session_gone(epoch)) => {
                    // Tried again on the session current then, or done (see above).
                    if outlives_session && weak.upgrade().is_some_and(|inner| inner.current_client().is_ok()) {
                        Err(ZkError::ConnectionLoss)
                    } else {
                        Ok(())
                    }
                }
                other => other,
            }
        }
    };
    // A session-lost error while the session lives on (see `Sessions::session_gone`) came
    // from a client the session left: the next try goes through the one serving it now.
    let retryable = |e: &ZkError| is_zk_retryable(e) || is_zk_session_lost(e);
    match RetryLoop::new(&REAPER_BACKOFF).run(attempt, retryable).await {
        Ok(()) => tracing::trace!(?target, epoch, "background delete done"),
        Err(error) => {
            tracing::warn!(?target, %error, "background delete refused; the node stays (an ephemeral one until its session ends)");
            observer.error(recipe, BackgroundErrorKind::GuaranteedDelete, &target.path(), error);
        }
    }
}

#[derive(Debug)]
enum Target {
    Node(String),
    Prefix {
        parent: String,
        prefix: String,
    },
    /// The node, if it is an ephemeral node of the client's session holding this data.
    Owned(String, Vec<u8>),
    /// The node, at this version.
    NodeAt(String, i32),
}

impl Target {
    /// The node's path, or the prefix's (`parent/prefix`).
    fn path(&self) -> String {
        match self {
            Target::Node(path) | Target::Owned(path, _) | Target::NodeAt(path, _) => path.clone(),
            Target::Prefix { parent, prefix } => path::join(parent, prefix),
        }
    }

    /// The delete after the node's session ended, through a later session: a node that is
    /// not ephemeral (at the version asked for, if one was), read first; an ephemeral node
    /// there now is another session's, or a later create's.
    async fn delete_persistent(&self, client: &zookeeper_client::Client, observer: &Observer) -> Result<(), ZkError> {
        let persistent_at = |path: String, version: Option<i32>| async move {
            observer.request(Op::Sync);
            observer.request(Op::Exists);
            // sync first: the new session's server may be behind the one the node was
            // created through, and show no node yet.
            let (synced, stat) = futures::join!(client.sync(&path), client.check_stat(&path));
            match synced {
                Ok(()) | Err(ZkError::NoNode) => {}
                Err(e) => return Err(e),
            }
            match stat? {
                Some(stat) if stat.ephemeral_owner == 0 && version.map_or(true, |v| v == stat.version) => {
                    tracing::debug!(path, "a guaranteed delete goes on after its session ended");
                    observer.request(Op::Delete);
                    match client.delete(&path, Some(stat.version)).await {
                        // Written or replaced since the read: not the node the delete was for.
                        Err(ZkError::BadVersion) => Ok(()),
                        other => other,
                    }
                }
                _ => Ok(()),
            }
        };
        match self {
            Target::Node(path) => persistent_at(path.clone(), None).await,
            Target::NodeAt(path, version) => persistent_at(path.clone(), Some(*version)).await,
            Target::Prefix { parent, prefix } => {
                observer.request(Op::Sync);
                observer.request(Op::GetChildren);
                let (synced, listed) = futures::join!(client.sync(parent), client.list_children(parent));
                match synced {
                    Ok(()) | Err(ZkError::NoNode) => {}
                    Err(e) => return Err(e),
                }
                let children = match listed {
                    Err(ZkError::NoNode) => return Ok(()),
                    listed => listed?,
                };
                for child in children.iter().filter(|c| c.starts_with(prefix.as_str())) {
                    match persistent_at(path::join(parent, child), None).await {
                        Ok(()) | Err(ZkError::NoNode) => {}
                        Err(e) => return Err(e),
                    }
                }
                Ok(())
            }
            Target::Owned(..) => Ok(()),
        }
    }

    async fn delete(&self, client: &zookeeper_client::Client, observer: &Observer) -> Result<(), ZkError> {
        match self {
            Target::Node(path) => {
                observer.request(Op::Delete);
                client.delete(path, None).await
            }
            Target::NodeAt(path, version) => {
                observer.request(Op::Delete);
                match client.delete(path, Some(*version)).await {
                    // Written since: not the node the delete was asked for.
                    Err(ZkError::BadVersion) => {
                        tracing::debug!(path, version, "a versioned delete found the node written since: left");
                        Ok(())
                    }
                    other => other,
                }
            }
            Target::Owned(path, data) => {
                observer.request(Op::Sync);
                observer.request(Op::GetData);
                // sync first so that a server behind the one that took the create still shows it
                let synced = client.sync(path);
                let read = client.get_data(path);
                let (synced, read) = futures::join!(synced, read);
                match synced {
                    Ok(()) | Err(ZkError::NoNode) => {}
                    Err(e) => return Err(e),
                }
                let ours = |found: &[u8], stat: &zookeeper_client::Stat| {
                    found == data.as_slice()
                        && stat.ephemeral_owner != 0
                        && stat.ephemeral_owner == client.session_id().0
                };
                match read {
                    Err(ZkError::NoNode) => Ok(()),
                    Err(e) => Err(e),
                    Ok((found, stat)) if ours(&found, &stat) => {
                        tracing::debug!(path, "deleting the node of a create cancelled before its reply");
                        observer.request(Op::Delete);
                        client.delete(path, Some(stat.version)).await
                    }
                    // Another create's node.
                    Ok(_) => Ok(()),
                }
            }
            Target::Prefix { parent, prefix } => {
                observer.request(Op::Sync);
                observer.request(Op::GetChildren);
                // sync first so that a server behind the one that took the create still shows it
                let synced = client.sync(parent);
                let listed = client.list_children(parent);
                let (synced, children) = futures::join!(synced, listed);
                synced?;
                for child in children?.iter().filter(|c| c.starts_with(prefix.as_str())) {
                    tracing::debug!(parent, child, "deleting the node of a create whose outcome was not known");
                    observer.request(Op::Delete);
                    match client.delete(&path::join(parent, child), None).await {
                        Ok(()) | Err(ZkError::NoNode) => {}
                        Err(e) => return Err(e),
                    }
                }
                Ok(())
            }
        }
    }
}
