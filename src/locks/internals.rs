//! The one wait engine (Curator's `LockInternals`): create a protected ephemeral-sequential
//! node, sort the children, hold or watch the node ahead, repeat.
//!
//! Round trips: the create and the first `getChildren` are sent back to back (zookeeper-client
//! sends requests in call order, and ZooKeeper answers a session's requests in order), so an
//! uncontended acquire costs one round trip. A mutex waiter whose predecessor was the holder
//! takes the lock when that node is deleted without listing the children again (see
//! [`Driver::first_after_holder_leaves`]); it also watches its own node, in the same round
//! trip, because someone may delete it meanwhile (ZooKeeper notifies a session in zxid order,
//! so that deletion would be heard first).
//!
//! Cancellation: from the moment the create is sent, a [`PendingNode`] guard owns the cleanup.
//! Dropped before the node's name is known, it asks the reaper to delete by protected prefix;
//! after, it deletes the node by path. Only a held lock is handed over, as a [`HeldNode`].

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use zookeeper_client::{Acls, CreateMode, EventType};

use super::driver::{Driver, Verdict};
use super::held::HeldNode;
use crate::error::{is_zk_connection_error, is_zk_session_lost, Error, Result, ZkError};
use crate::framework::{ConnectionState, Framework, ReaperCmd, Session};
use crate::path;

/// How long an acquire may wait for the lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Wait {
    /// Give up (and delete the node) if the lock is not free at once.
    No,
    /// Wait as long as it takes.
    Forever,
}

/// A lock directory and the rule for who holds it.
#[derive(Debug, Clone)]
pub(crate) struct LockInternals {
    framework: Framework,
    /// Full server path of the lock directory.
    dir: String,
    driver: Arc<dyn Driver>,
    data: Vec<u8>,
}

/// Why an attempt (of any recipe) ended without a verdict.
pub(crate) enum Failure {
    /// Our node vanished or its session ended: start a fresh attempt.
    NodeMissing,
    Error(Error),
}

impl From<Error> for Failure {
    fn from(e: Error) -> Self {
        Failure::Error(e)
    }
}

impl LockInternals {
    /// `path` is the user's (validated) lock path.
    pub(crate) fn new(framework: &Framework, path: &str, driver: Arc<dyn Driver>, data: Vec<u8>) -> Result<Self> {
        path::validate_recipe_path(path)?;
        Ok(Self { framework: framework.clone(), dir: framework.fix_path(path), driver, data })
    }

    pub(crate) fn framework(&self) -> &Framework {
        &self.framework
    }

    /// Acquires, starting a fresh attempt (new node) whenever ours goes missing, as long as
    /// the retry policy allows. `None` only with [`Wait::No`] when the lock is taken.
    pub(crate) async fn acquire(&self, wait: Wait) -> Result<Option<HeldNode>> {
        let started = Instant::now();
        let mut attempt = 0u32;
        loop {
            match self.attempt(wait).await {
                Ok(held) => return Ok(held),
                Err(Failure::Error(e)) => return Err(e),
                Err(Failure::NodeMissing) => match self.framework.retry_delay(attempt, started) {
                    Some(delay) => {
                        tracing::debug!(dir = %self.dir, attempt, "lock node missing; trying again with a new node");
                        attempt += 1;
                        pause_before_new_attempt(&self.framework, delay).await;
                    }
                    None => return Err(gave_up(&self.framework)),
                },
            }
        }
    }

    async fn attempt(&self, wait: Wait) -> Result<Option<HeldNode>, Failure> {
        let session = self.framework.inner().session()?;
        let prefix = path::new_protected_prefix();
        let mut pending = PendingNode::new(&self.framework, &self.dir, &prefix, session.epoch);
        let created = self.create(&session, &prefix, &mut pending).await?;
        let our = created.name;
        let mut children = created.children;
        loop {
            let sorted = match children.take() {
                Some(sorted) => sorted,
                None => self.sorted_children(&session).await?,
            };
            match self.driver.verdict(&sorted, &our) {
                Verdict::Missing => return Err(Failure::NodeMissing),
                Verdict::Acquired => return Ok(Some(pending.into_held(created.czxid))),
                Verdict::Watch { .. } if wait == Wait::No => return Ok(None),
                Verdict::Watch { node, index } => {
                    let shortcut = index == 0 && self.driver.first_after_holder_leaves();
                    // Taking the lock without listing again needs proof that our node still
                    // exists (someone may have deleted it): watch it too.
                    let own = shortcut.then_some(our.as_str());
                    let deleted = self.wait_for_change(&session, &node, own).await?;
                    if deleted && shortcut {
                        // We saw the whole queue ahead of us: only the holder. It is gone.
                        return Ok(Some(pending.into_held(created.czxid)));
                    }
                }
            }
        }
    }

    /// Creates our node with the create and the first listing pipelined; recovers a node whose
    /// create reply was lost (protected mode), creating missing parents as containers.
    async fn create(&self, session: &Session, prefix: &str, pending: &mut PendingNode) -> Result<Created, Failure> {
        let list = || session.client.list_children(&self.dir);
        let (name, czxid, listed) = self.create_protected(session, prefix, pending, list).await?;
        let children = listed.filter(|c| c.contains(&name)).map(|mut c| {
            self.driver.sort(&mut c);
            c
        });
        Ok(Created { name, czxid, children })
    }

    /// Sends the create of a protected ephemeral-sequential node with `list` (a listing of the
    /// directory) sent right behind it, so both cost one round trip. Missing parents are
    /// created as containers; after a connection error the node is looked for by its prefix
    /// before creating again (Curator's protected mode). Returns the node's name, its czxid,
    /// and the listing when it was sent with the successful create and succeeded.
    async fn create_protected<T, F, Fut>(
        &self,
        session: &Session,
        prefix: &str,
        pending: &mut PendingNode,
        list: F,
    ) -> Result<(String, i64, Option<T>), Failure>
    where
        F: Fn() -> Fut,
        Fut: std::future::Future<Output = Result<T, ZkError>>,
    {
        let base = format!("{}/{}{}", self.dir, prefix, self.driver.lock_name());
        let acl = self.framework.acl_for(&base);
        let options = CreateMode::EphemeralSequential.with_acls(Acls::new(&acl));
        let started = Instant::now();
        let mut attempt = 0u32;
        let mut made_parents = false;
        loop {
            let create = session.client.create(&base, &self.data, &options);
            let (created, listed) = futures::join!(create, list());
            let error = match created {
                Ok((stat, sequence)) => {
                    let name = format!("{prefix}{}{sequence}", self.driver.lock_name());
                    pending.known(path::join(&self.dir, &name));
                    return Ok((name, stat.czxid, listed.ok()));
                }
                Err(ZkError::NoNode) if !made_parents => {
                    made_parents = true;
                    self.framework.ensure_containers(&self.dir, true).await?;
                    continue;
                }
                // The directory went again (an empty container is reaped at any time): start
                // a fresh attempt, as Curator does on NoNode, under the retry policy.
                Err(ZkError::NoNode) => return Err(Failure::NodeMissing),
                Err(e) => e,
            };
            if is_zk_session_lost(&error) {
                return Err(Failure::NodeMissing);
            }
            if !is_zk_connection_error(&error) {
                return Err(Error::from(error).into());
            }
            // The create may have happened: look for our prefix before creating again.
            let Some(delay) = self.framework.retry_delay(attempt, started) else {
                return Err(Error::from(error).into());
            };
            attempt += 1;
            tokio::time::sleep(delay).await;
            if let Some(found) = self.find_protected(session, prefix).await? {
                pending.known(path::join(&self.dir, &found.name));
                return Ok((found.name, found.czxid, None));
            }
        }
    }

    /// Finds a child starting with `prefix` that belongs to this session (Curator's protected
    /// mode, with the CURATOR-498 session check).
    async fn find_protected(&self, session: &Session, prefix: &str) -> Result<Option<Created>, Failure> {
        let children = self.retrying(session, || session.client.list_children(&self.dir)).await?;
        let Some(name) = children.iter().find(|c| c.starts_with(prefix)).cloned() else { return Ok(None) };
        let full = path::join(&self.dir, &name);
        match self.retrying(session, || session.client.check_stat(&full)).await? {
            Some(stat) if stat.ephemeral_owner == session.client.session_id().0 => {
                tracing::debug!(node = %full, "adopted our node after a lost create reply");
                Ok(Some(Created { name, czxid: stat.czxid, children: None }))
            }
            Some(_) => {
                // Another session's node under our prefix: never adopt it; let it be deleted.
                self.framework.inner().reap(ReaperCmd::Delete { path: full, epoch: session.epoch });
                Ok(None)
            }
            None => Ok(None),
        }
    }

    /// The children of the lock directory, sorted (retried through connection loss). A
    /// missing directory has no children.
    async fn sorted_children(&self, session: &Session) -> Result<Vec<String>, Failure> {
        let mut children = self.retrying(session, || session.client.list_children(&self.dir)).await?;
        self.driver.sort(&mut children);
        Ok(children)
    }

    /// Watches `node` (getData watch) and waits for it to change or go away. Returns whether it
    /// was deleted. Wakes early when the session is lost.
    ///
    /// With `own` (our node's name), our node is watched as well, in the same round trip, and
    /// `true` also means that our node still existed when `node` was deleted: ZooKeeper
    /// notifies a session in zxid order, so had ours been deleted first, we would have heard.
    async fn wait_for_change(&self, session: &Session, node: &str, own: Option<&str>) -> Result<bool, Failure> {
        let full = path::join(&self.dir, node);
        // Sent now, ahead of the predecessor's watch; both are answered in one round trip.
        let own_reply = own.map(|name| session.client.get_and_watch_data(&path::join(&self.dir, name)));
        let own_reply = async move {
            match own_reply {
                Some(reply) => Some(reply.await),
                None => None,
            }
        };
        let (own_reply, watcher) = futures::join!(own_reply, self.retrying_watch(session, &full));
        let own_watcher = match own_reply {
            Some(Ok((_, _, watcher))) => Some(watcher),
            Some(Err(ZkError::NoNode)) => return Err(Failure::NodeMissing),
            Some(Err(_)) | None => None, // unwatched: `true` is never returned for it below
        };
        let own_known = own.is_none() || own_watcher.is_some();
        let watcher = match watcher? {
            None => return Ok(false), // already gone: look again
            Some(watcher) => watcher,
        };
        let own_changed = async move {
            match own_watcher {
                Some(watcher) => {
                    watcher.changed().await;
                }
                None => std::future::pending().await,
            }
        };
        let mut own_changed = std::pin::pin!(own_changed);
        let epoch = session.epoch;
        let mut state = self.framework.state_watch();
        let session_ended = state.wait_for(|s| s.epoch != epoch || s.state == ConnectionState::Lost);
        let event = tokio::select! {
            biased;
            () = &mut own_changed => return Ok(false), // our node changed or went: look again
            event = watcher.changed() => event.event_type,
            _ = session_ended => return Err(Failure::NodeMissing),
        };
        match event {
            EventType::Session => Err(Failure::NodeMissing),
            EventType::NodeDeleted => Ok(own_known && futures::poll!(own_changed).is_pending()),
            _ => Ok(false),
        }
    }

    async fn retrying_watch(
        &self,
        session: &Session,
        full: &str,
    ) -> Result<Option<zookeeper_client::OneshotWatcher>, Failure> {
        let result = self.retrying(session, || async {
            match session.client.get_and_watch_data(full).await {
                Ok((_, _, watcher)) => Ok(Some(watcher)),
                Err(ZkError::NoNode) => Ok(None),
                Err(e) => Err(e),
            }
        });
        result.await
    }

    /// Runs a read on this attempt's session, retrying connection loss under the policy. A
    /// lost session ends the attempt (our node went with it).
    async fn retrying<T, F, Fut>(&self, _session: &Session, mut op: F) -> Result<T, Failure>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Result<T, ZkError>>,
    {
        let started = Instant::now();
        let mut attempt = 0u32;
        loop {
            match op().await {
                Ok(value) => return Ok(value),
                Err(ZkError::NoNode) => return Err(Failure::NodeMissing),
                Err(e) if is_zk_session_lost(&e) => return Err(Failure::NodeMissing),
                Err(e) if is_zk_connection_error(&e) => match self.framework.retry_delay(attempt, started) {
                    Some(delay) => {
                        attempt += 1;
                        tokio::time::sleep(delay.min(Duration::from_secs(1))).await;
                    }
                    None => return Err(Error::from(e).into()),
                },
                Err(e) => return Err(Error::from(e).into()),
            }
        }
    }

    /// Full paths of all children, in lock order (index 0 holds the lock), namespace stripped.
    pub(crate) async fn participant_nodes(&self) -> Result<Vec<String>> {
        let mut children = match self
            .framework
            .with_retry(|s| {
                let dir = &self.dir;
                async move { s.client.list_children(dir).await }
            })
            .await
        {
            Err(Error::ZooKeeper(ZkError::NoNode)) => Vec::new(),
            other => other?,
        };
        self.driver.sort(&mut children);
        Ok(children.iter().map(|c| self.framework.unfix_path(&path::join(&self.dir, c)).to_owned()).collect())
    }
}

/// The error for an acquire that cannot start a fresh attempt: the framework closed under it,
/// or the retry policy gave up after its node kept going missing.
pub(crate) fn gave_up(framework: &Framework) -> Error {
    if framework.is_closed() {
        Error::Closed
    } else {
        ZkError::NoNode.into()
    }
}

struct Created {
    name: String,
    czxid: i64,
    /// Sorted children from the pipelined listing, when it already showed our node.
    children: Option<Vec<String>>,
}

/// Owns the cleanup of a node being created or waiting, until it becomes a [`HeldNode`].
struct PendingNode {
    framework: Framework,
    dir: String,
    prefix: String,
    epoch: u64,
    /// Full path once the create's reply told us the name.
    node: Option<String>,
    armed: bool,
}

impl PendingNode {
    fn new(framework: &Framework, dir: &str, prefix: &str, epoch: u64) -> Self {
        Self {
            framework: framework.clone(),
            dir: dir.to_owned(),
            prefix: prefix.to_owned(),
            epoch,
            node: None,
            armed: true,
        }
    }

    fn known(&mut self, full_path: String) {
        self.node = Some(full_path);
    }

    fn into_held(mut self, czxid: i64) -> HeldNode {
        self.armed = false;
        let full_path = self.node.take().unwrap_or_default();
        HeldNode::new(self.framework.clone(), full_path, self.epoch, czxid)
    }
}

impl Drop for PendingNode {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        match self.node.take() {
            Some(node) => self.framework.inner().delete_in_background(node, self.epoch),
            None => self.framework.inner().reap(ReaperCmd::DeleteByPrefix {
                parent: std::mem::take(&mut self.dir),
                prefix: std::mem::take(&mut self.prefix),
                epoch: self.epoch,
            }),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Hooks for recipes that create nodes outside the lock queue: the semaphore's lease nodes
// (Curator's InterProcessSemaphoreV2 creates them while holding its internal mutex and counts
// them with a watched getChildren).

/// A child listing with a child watch set by the same request.
pub(crate) type WatchedChildren = (Vec<String>, zookeeper_client::OneshotWatcher);

/// A node this process created in a lock directory and has not handed over yet. Dropping it
/// deletes the node in the background (by protected prefix while its name was never learned).
pub(crate) struct CreatedNode {
    pending: PendingNode,
    name: String,
    czxid: i64,
}

impl std::fmt::Debug for CreatedNode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CreatedNode").field("name", &self.name).field("epoch", &self.pending.epoch).finish()
    }
}

impl CreatedNode {
    /// The node's name (last path segment).
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// Hands the node over as held; from now on its [`HeldNode`] owns the delete.
    pub(crate) fn into_held(self) -> HeldNode {
        self.pending.into_held(self.czxid)
    }
}

impl LockInternals {
    /// Creates one protected ephemeral-sequential node in this directory on `session` (missing
    /// parents as containers, protected-mode recovery after a lost reply), with a **watched**
    /// listing of the directory sent right behind the create, so both cost one round trip.
    ///
    /// Returns the node and, when the pipelined listing succeeded and shows the node, that
    /// listing with its watch. `Ok(None)` when the session ended or the directory vanished
    /// twice in a row (the caller starts over).
    /// Cancel-safe: a dropped call leaves no node behind.
    pub(crate) async fn create_watched(
        &self,
        session: &Session,
    ) -> Result<Option<(CreatedNode, Option<WatchedChildren>)>> {
        let prefix = path::new_protected_prefix();
        let mut pending = PendingNode::new(&self.framework, &self.dir, &prefix, session.epoch);
        let list = || session.client.list_and_watch_children(&self.dir);
        match self.create_protected(session, &prefix, &mut pending, list).await {
            Ok((name, czxid, listed)) => {
                let listing = listed.filter(|(c, _)| c.contains(&name));
                Ok(Some((CreatedNode { pending, name, czxid }, listing)))
            }
            // The session ended or the directory vanished twice in a row: start over.
            Err(Failure::NodeMissing) => Ok(None),
            Err(Failure::Error(e)) => Err(e),
        }
    }

    /// Lists this directory's children with a child watch, retrying connection loss under the
    /// retry policy. `Ok(None)` when the session ended or the directory is gone (so are the
    /// caller's nodes in it).
    pub(crate) async fn list_watched(&self, session: &Session) -> Result<Option<WatchedChildren>> {
        match self.retrying(session, || session.client.list_and_watch_children(&self.dir)).await {
            Ok(listing) => Ok(Some(listing)),
            Err(Failure::NodeMissing) => Ok(None),
            Err(Failure::Error(e)) => Err(e),
        }
    }
}

/// Waits before a fresh attempt after a node went missing: the retry delay when the framework
/// is not connected or its session's client has ended (the state manager is about to replace
/// it), otherwise only a yield.
///
/// It never returns without giving other tasks a turn. Requests on an ended client fail at
/// once, without ever being pending, and the framework's state may still read "connected" for a
/// moment (zookeeper-client 0.11.2 can even report `SyncConnected` until its own expiry). A
/// retry loop that did not pause then burnt its whole retry policy in microseconds (a spurious
/// `NoNode`) or, under `RetryForever`, never yielded and starved the state manager that would
/// replace the session (a livelock). Regression test:
/// `tests/semaphore.rs::waiters_survive_a_session_that_ends_while_connected`.
pub(crate) async fn pause_before_new_attempt(framework: &Framework, delay: Duration) {
    let client_ended = framework.inner().session().map_or(true, |s| s.client.state().is_terminated());
    if client_ended || !framework.state().is_connected() {
        tokio::time::sleep(delay).await;
    } else {
        tokio::task::yield_now().await;
    }
}
