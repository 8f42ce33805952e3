//! The life of a lock node, as types, from the create to the delete.
//!
//! | stage | type | if it is dropped |
//! | --- | --- | --- |
//! | create sent, name not known yet | [`PendingCreate`] | the reaper deletes our protected prefix's children |
//! | created, not holding | [`CreatedNode`] | its delete is sent at once; the reaper sees it through |
//! | holding | [`HeldNode`](super::held::HeldNode) | the same (or the reaper finishes a release in flight) |
//!
//! One value, [`Cleanup`], knows what is left to delete and carries the only `Drop` of the
//! three stages. It moves from stage to stage, so a transition is a plain move: nothing is
//! disarmed, nothing is forgotten, and a node's path is always the one the server gave.
//!
//! Protected creation (Curator's protected mode) lives here too: the create is sent under a
//! fresh `_c_<uuid>-` prefix, and after a connection error the node is looked for by that
//! prefix before anything is created again.

use std::fmt;
use std::future::Future;

use futures::future::{BoxFuture, FutureExt, Shared};
use zookeeper_client::{Acl, Acls, Client, CreateMode, CreateSequence, Stat};

use super::fast_path::SoleHold;
use crate::error::{is_zk_retryable, is_zk_session_lost, Error, Result, ZkError};
use crate::framework::{Framework, ReaperCmd, Session};
use crate::path;

/// Why an attempt (of any recipe) ended without a verdict.
#[derive(Debug)]
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

impl From<ZkError> for Failure {
    fn from(e: ZkError) -> Self {
        Failure::Error(e.into())
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::NodeMissing => f.write_str("our node went missing"),
            Failure::Error(e) => e.fmt(f),
        }
    }
}

/// The reply to a delete already sent, which several parties may await.
pub(crate) type DeleteReply = Shared<BoxFuture<'static, Result<(), ZkError>>>;

/// What is left to delete of one node, and the one `Drop` that deletes it.
pub(crate) struct Cleanup {
    framework: Framework,
    /// The session (epoch) that created the node: deletes go only to that session.
    epoch: u64,
    target: Target,
    /// Set when the node held its lock alone: its delete is recorded for the fast path.
    sole: Option<SoleHold>,
}

enum Target {
    /// Every child of `dir` whose name starts with `prefix` (the node's name is not known).
    Prefix { dir: String, prefix: String },
    /// The node at this full path.
    Node(String),
    /// The node at `path`, whose delete was sent with this reply.
    Deleting { path: String, reply: DeleteReply },
}

impl fmt::Debug for Cleanup {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let target = match &self.target {
            Target::Prefix { dir, prefix } => format!("{dir}/{prefix}*"),
            Target::Node(path) => path.clone(),
            Target::Deleting { path, .. } => format!("{path} (deleting)"),
        };
        f.debug_struct("Cleanup").field("epoch", &self.epoch).field("target", &target).finish()
    }
}

impl Cleanup {
    pub(crate) fn framework(&self) -> &Framework {
        &self.framework
    }

    pub(crate) fn epoch(&self) -> u64 {
        self.epoch
    }

    /// The node held its lock alone: its delete is to be recorded for the fast path.
    pub(crate) fn held_alone(&mut self, sole: SoleHold) {
        self.sole = Some(sole);
    }

    /// Sends the delete of `path` on `client` now and returns its reply. Until the reply says
    /// the node is gone, dropping `self` hands the reply to the reaper.
    pub(crate) fn send_delete(&mut self, client: &Client, path: &str) -> DeleteReply {
        let send = || client.delete(path, None).boxed().shared();
        let reply = match &self.sole {
            Some(sole) => sole.record_delete(self.epoch, send),
            None => send(),
        };
        self.target = Target::Deleting { path: path.to_owned(), reply: reply.clone() };
        reply
    }
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        let inner = &self.framework;
        match &mut self.target {
            Target::Prefix { dir, prefix } => inner.reap(ReaperCmd::DeleteByPrefix {
                parent: std::mem::take(dir),
                prefix: std::mem::take(prefix),
                epoch: self.epoch,
            }),
            Target::Node(path) => {
                // Sent now, so it is ordered before any later request; the reaper sees it through.
                let path = std::mem::take(path);
                if let Some(client) = inner.client_of(self.epoch) {
                    let reply = self.send_delete(&client, &path);
                    let inner = &self.framework;
                    inner.reap(ReaperCmd::Sent { path, epoch: self.epoch, reply: Box::pin(reply) });
                }
            }
            Target::Deleting { path, reply } => match reply.peek() {
                // Settled: gone, or refused for good (the release reported it).
                Some(Ok(()) | Err(ZkError::NoNode)) => {}
                Some(Err(e)) if !is_zk_retryable(e) || is_zk_session_lost(e) => {}
                // In flight, or failed in a way worth retrying: the reaper sees it through.
                _ => inner.reap(ReaperCmd::Sent {
                    path: std::mem::take(path),
                    epoch: self.epoch,
                    reply: Box::pin(reply.clone()),
                }),
            },
        }
    }
}

/// A protected create that was sent: until the node's name is known, only its prefix is.
#[derive(Debug)]
pub(crate) struct PendingCreate {
    cleanup: Cleanup,
    dir: String,
    prefix: String,
    marker: &'static str,
}

impl PendingCreate {
    fn new(framework: &Framework, epoch: u64, dir: &str, prefix: String, marker: &'static str) -> Self {
        let target = Target::Prefix { dir: dir.to_owned(), prefix: prefix.clone() };
        let cleanup = Cleanup { framework: framework.clone(), epoch, target, sole: None };
        Self { cleanup, dir: dir.to_owned(), prefix, marker }
    }

    /// The create was answered with `sequence`: from now on the node is deleted by path.
    pub(crate) fn created(self, sequence: CreateSequence, czxid: i64) -> CreatedNode {
        let name = format!("{}{}{sequence}", self.prefix, self.marker);
        self.named(name, czxid)
    }

    /// The node is known by name: from now on it is deleted by path.
    fn named(self, name: String, czxid: i64) -> CreatedNode {
        let PendingCreate { mut cleanup, dir, prefix, marker } = self;
        let full_path = path::join(&dir, &name);
        cleanup.target = Target::Node(full_path.clone());
        let sequence = name[prefix.len() + marker.len()..].parse().ok();
        CreatedNode { cleanup, name, full_path, czxid, sequence }
    }

    /// Looks for the node after a create whose reply was lost. A `sync` goes first, so that a
    /// create this session sent through another member has landed (or been refused) before
    /// the listing. Adopts the first child with our prefix that our session owns; deletes any
    /// others with the prefix (a create that was sent twice).
    async fn recover(&self, session: &Session) -> Result<Option<(String, i64)>, Failure> {
        let dir = self.dir.as_str();
        let listing = || async {
            let (synced, children) = futures::join!(session.client.sync(dir), session.client.list_children(dir));
            synced?;
            children
        };
        let framework = self.cleanup.framework();
        let mut ours: Vec<String> = retry_request(framework, listing).await?;
        ours.retain(|c| c.starts_with(&self.prefix));
        ours.sort_by_key(|name| path::sequence(name));
        let mut adopted = None;
        for name in ours {
            let full = path::join(dir, &name);
            if adopted.is_none() {
                let stat = retry_request(framework, || session.client.check_stat(&full)).await?;
                if let Some(stat) = stat.filter(|s| session.owns(s.ephemeral_owner)) {
                    framework.note_session_id(session);
                    tracing::debug!(node = %full, "adopted our node after a lost create reply");
                    adopted = Some((name, stat.czxid));
                    continue;
                }
            }
            // Another create under our prefix (or a stale session's): never a second node of ours.
            framework.reap(ReaperCmd::Delete { path: full, epoch: session.epoch });
        }
        Ok(adopted)
    }
}

/// A node this process created and owns, not (or not yet) holding anything.
#[derive(Debug)]
pub(crate) struct CreatedNode {
    cleanup: Cleanup,
    /// The last path segment.
    name: String,
    full_path: String,
    czxid: i64,
    /// The sequential suffix, as a number.
    sequence: Option<i64>,
}

impl CreatedNode {
    /// The node's name (last path segment).
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// The node's full server path.
    pub(crate) fn full_path(&self) -> &str {
        &self.full_path
    }

    /// The sequential suffix ZooKeeper gave the node.
    pub(crate) fn sequence(&self) -> Option<i64> {
        self.sequence
    }

    /// Takes the node apart for the held stage: its cleanup, full path and creation zxid.
    pub(crate) fn into_parts(self) -> (Cleanup, String, i64) {
        (self.cleanup, self.full_path, self.czxid)
    }
}

/// Where and what to create: a directory's full path, the name marker after the protected
/// prefix (`lock-`, `lease-`), and the node's data.
#[derive(Debug, Clone, Copy)]
pub(crate) struct NodeSpec<'a> {
    pub(crate) framework: &'a Framework,
    pub(crate) dir: &'a str,
    pub(crate) marker: &'static str,
    pub(crate) data: &'a [u8],
}

/// A fresh protected name to create a node under: `<dir>/_c_<uuid>-<marker>`, and its ACL.
pub(crate) struct ProtectedName {
    prefix: String,
    base: String,
    acl: Vec<Acl>,
}

impl NodeSpec<'_> {
    /// A fresh protected name (a new uuid) in this directory, with the provider's ACL.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for an empty ACL.
    pub(crate) fn protected_name(&self) -> Result<ProtectedName> {
        let prefix = path::new_protected_prefix();
        let base = format!("{}/{}{}", self.dir, prefix, self.marker);
        let acl = self.framework.acl_for(&base)?;
        Ok(ProtectedName { prefix, base, acl })
    }

    fn pending(&self, session: &Session, name: &ProtectedName) -> PendingCreate {
        PendingCreate::new(self.framework, session.epoch, self.dir, name.prefix.clone(), self.marker)
    }

    /// Sends one create of `name` now, with no listing and no retry, and returns its cleanup
    /// (armed from this moment) and its reply.
    pub(crate) fn send_create<'a>(
        &self,
        session: &'a Session,
        name: &'a ProtectedName,
    ) -> (PendingCreate, impl Future<Output = Result<(Stat, CreateSequence), ZkError>> + Send + 'a) {
        let options = CreateMode::EphemeralSequential.with_acls(Acls::new(&name.acl));
        let reply = session.client.create(&name.base, self.data, &options);
        (self.pending(session, name), reply)
    }

    /// Creates a protected ephemeral-sequential node on `session`, with `list` (a listing of
    /// the directory) sent right behind the create so that both cost one round trip. Missing
    /// parents are created as containers. After a connection error the node is recovered by
    /// its prefix before the create is sent again.
    ///
    /// Returns the node and the listing when it succeeded on the first send. Cancel-safe: from
    /// the moment the create is sent, a dropped call leaves no node behind.
    pub(crate) async fn create<T, F, Fut>(
        &self,
        session: &Session,
        list: F,
    ) -> Result<(CreatedNode, Option<T>), Failure>
    where
        F: Fn() -> Fut,
        Fut: Future<Output = Result<T, ZkError>>,
    {
        self.create_as(session, None, list).await
    }

    /// Creates a protected plain ephemeral node named `<prefix><marker><sequence>`, carrying a
    /// sequence chosen by the caller instead of one the server appends: the read-write lock's
    /// downgrade node, which takes its write node's sequence so that it sorts at the write
    /// node's place in the queue (Curator 5.5+). `after` is sent right behind the create, as
    /// `list` is for [`create`](Self::create); everything else is as there.
    pub(crate) async fn create_with_sequence<T, F, Fut>(
        &self,
        session: &Session,
        sequence: &str,
        after: F,
    ) -> Result<(CreatedNode, Option<T>), Failure>
    where
        F: Fn() -> Fut,
        Fut: Future<Output = Result<T, ZkError>>,
    {
        self.create_as(session, Some(sequence), after).await
    }

    /// The create behind both forms: ephemeral-sequential without `sequence`, plain ephemeral
    /// with it.
    async fn create_as<T, F, Fut>(
        &self,
        session: &Session,
        sequence: Option<&str>,
        list: F,
    ) -> Result<(CreatedNode, Option<T>), Failure>
    where
        F: Fn() -> Fut,
        Fut: Future<Output = Result<T, ZkError>>,
    {
        let name = self.protected_name()?;
        let (base, acl, mode) = match sequence {
            // The whole name is ours: the provider is asked for it, as Curator asks for the
            // path it creates.
            Some(sequence) => {
                let base = format!("{}{sequence}", name.base);
                let acl = self.framework.acl_for(&base)?;
                (base, acl, CreateMode::Ephemeral)
            }
            None => (name.base.clone(), name.acl.clone(), CreateMode::EphemeralSequential),
        };
        let options = mode.with_acls(Acls::new(&acl));
        let pending = self.pending(session, &name);
        let mut retry = self.framework.retry_loop();
        let mut made_parents = false;
        loop {
            let (created, listed) = futures::join!(session.client.create(&base, self.data, &options), list());
            let error = match created {
                Ok((stat, assigned)) => {
                    session.learn_id(stat.ephemeral_owner);
                    self.framework.note_session_id(session);
                    let node = match sequence {
                        Some(sequence) => {
                            let name = format!("{}{}{sequence}", pending.prefix, self.marker);
                            pending.named(name, stat.czxid)
                        }
                        None => pending.created(assigned, stat.czxid),
                    };
                    return Ok((node, listed.ok()));
                }
                Err(ZkError::NoNode) if !made_parents => {
                    made_parents = true;
                    self.framework.ensure_containers(self.dir, true).await?;
                    continue;
                }
                // The directory went again (an empty container is reaped at any time): start a
                // fresh attempt, as Curator does on NoNode, under the retry policy.
                Err(ZkError::NoNode) => return Err(Failure::NodeMissing),
                Err(e) if is_zk_session_lost(&e) => return Err(Failure::NodeMissing),
                Err(e) if is_zk_retryable(&e) => e,
                Err(e) => return Err(e.into()),
            };
            // The create may have happened: look for our prefix before creating again.
            if !retry.backoff().await {
                return Err(error.into());
            }
            if let Some((name, czxid)) = pending.recover(session).await? {
                return Ok((pending.named(name, czxid), None));
            }
        }
    }
}

/// Runs a request of an attempt, retrying retryable errors under the retry policy. `NoNode`
/// and a lost session end the attempt: our node (or its directory) is gone.
pub(crate) async fn retry_request<T, F, Fut>(framework: &Framework, op: F) -> Result<T, Failure>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, ZkError>>,
{
    match framework.retry_loop().run(op, |e| is_zk_retryable(e) && !is_zk_session_lost(e)).await {
        Ok(value) => Ok(value),
        Err(ZkError::NoNode) => Err(Failure::NodeMissing),
        Err(e) if is_zk_session_lost(&e) => Err(Failure::NodeMissing),
        Err(e) => Err(e.into()),
    }
}
