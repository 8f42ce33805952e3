//! The life of a lock node, as types, from the create to the delete.
//!
//! | stage | type | if it is dropped |
//! | --- | --- | --- |
//! | create sent, name not known yet | [`PendingCreate`] | the reaper deletes our protected prefix's children |
//! | created, not holding | [`CreatedNode`] | its delete is sent at once; the reaper sees it through |
//! | holding | `HeldNode` (`held.rs`) | the same (or the reaper finishes a release in flight) |
//!
//! One value, [`Cleanup`], knows what is left to delete and carries the one `Drop` of the
//! first two stages (the held stage sends its delete first, through the fast path's record).
//! It moves from stage to stage, so a transition is a plain move: nothing is disarmed, nothing
//! is forgotten, and a node's path is always the one the server gave.
//!
//! How the nodes are created (protected mode, and finding a node after a lost create reply)
//! is `protected.rs`.

use std::fmt;
use std::future::Future;

use futures::future::{BoxFuture, FutureExt, Shared};
use zookeeper_client::{Client, CreateSequence};

use super::{Framework, ReaperCmd};
use crate::error::{is_zk_retryable, is_zk_session_lost, Error, ZkError};
use crate::framework::metrics::Op;
use crate::path;
use crate::protocol::driver::parse_sequence;

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

/// Sends one delete and returns its reply.
pub(crate) type SendDelete<'a> = &'a dyn Fn() -> DeleteReply;

/// What is left to delete of one node, and the one `Drop` that deletes it.
pub(crate) struct Cleanup {
    framework: Framework,
    /// The session (epoch) that created the node: deletes go only to that session.
    epoch: u64,
    target: Target,
    /// The recipe whose node it is, for a background error.
    recipe: &'static str,
}

enum Target {
    /// Every child of `dir` whose name starts with `prefix` (the node's name is not known).
    Prefix { dir: String, prefix: String },
    /// The node at this full path.
    Node(String),
    /// The node at `path`, whose delete was sent with this reply.
    Deleting { path: String, reply: DeleteReply },
    /// Nothing: the node is the caller's to keep (a protected create of the data plane).
    Kept,
}

impl fmt::Debug for Cleanup {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let target = match &self.target {
            Target::Prefix { dir, prefix } => format!("{dir}/{prefix}*"),
            Target::Node(path) => path.clone(),
            Target::Deleting { path, .. } => format!("{path} (deleting)"),
            Target::Kept => "(kept)".to_owned(),
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

    /// Sends the delete of `path` on `client` now, by `via` (which calls the sender it is
    /// given, once: a holder that records its delete for the fast path sends it under the
    /// record's lock), and returns its reply. Until the reply says the node is gone, dropping
    /// `self` hands the reply to the reaper.
    pub(crate) fn send_delete_via(
        &mut self,
        client: &Client,
        path: &str,
        via: impl FnOnce(SendDelete<'_>) -> DeleteReply,
    ) -> DeleteReply {
        self.framework.observer().request(Op::Delete);
        let reply = via(&|| client.delete(path, None).boxed().shared());
        self.target = Target::Deleting { path: path.to_owned(), reply: reply.clone() };
        reply
    }

    /// Sends the delete of a node known by its path now, through `via`, while its session is
    /// current (it is ordered before any later request); dropping `self` then leaves the
    /// reply to the reaper. Nothing is sent at the other stages.
    pub(crate) fn delete_now_via(&mut self, via: impl FnOnce(SendDelete<'_>) -> DeleteReply) {
        let Target::Node(path) = &self.target else { return };
        // Without a client the session is over: the node went with it.
        if let Some(client) = self.framework.client_of(self.epoch) {
            let path = path.clone();
            drop(self.send_delete_via(&client, &path, via)); // kept in the target
        }
    }
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        self.delete_now_via(|send| send());
        let inner = &self.framework;
        match &mut self.target {
            Target::Prefix { dir, prefix } => inner.reap(ReaperCmd::DeleteByPrefix {
                parent: std::mem::take(dir),
                prefix: std::mem::take(prefix),
                epoch: self.epoch,
                recipe: self.recipe,
            }),
            Target::Node(_) | Target::Kept => {}
            Target::Deleting { path, reply } => match reply.peek() {
                // Settled: gone (with its session too, unless that lives on with another
                // client: see `Framework::session_gone`), or refused for good (the release
                // reported it).
                Some(Ok(()) | Err(ZkError::NoNode)) => {}
                Some(Err(e)) if is_zk_session_lost(e) && inner.session_gone(self.epoch) => {}
                Some(Err(e)) if !is_zk_retryable(e) && !is_zk_session_lost(e) => {}
                // In flight, or failed in a way worth retrying: the reaper sees it through.
                _ => inner.reap(ReaperCmd::Sent {
                    path: std::mem::take(path),
                    epoch: self.epoch,
                    reply: Box::pin(reply.clone()),
                    recipe: self.recipe,
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
    /// A create of a node named `<prefix><marker>…` in `dir` by `recipe`, sent on session
    /// `epoch`.
    pub(crate) fn new(
        framework: &Framework,
        epoch: u64,
        dir: &str,
        prefix: String,
        marker: &'static str,
        recipe: &'static str,
    ) -> Self {
        let target = Target::Prefix { dir: dir.to_owned(), prefix: prefix.clone() };
        let cleanup = Cleanup { framework: framework.clone(), epoch, target, recipe };
        Self { cleanup, dir: dir.to_owned(), prefix, marker }
    }

    pub(crate) fn framework(&self) -> &Framework {
        self.cleanup.framework()
    }

    /// The recipe whose node it is.
    pub(crate) fn cleanup_recipe(&self) -> &'static str {
        self.cleanup.recipe
    }

    /// The directory's full path.
    pub(crate) fn dir(&self) -> &str {
        &self.dir
    }

    /// The protected prefix, `_c_<uuid>-`.
    pub(crate) fn prefix(&self) -> &str {
        &self.prefix
    }

    /// A protected create of any mode under `<dir>/<prefix>`, whose name the caller works out:
    /// until [`disarm`](Self::disarm), dropping it deletes every child of `dir` with the prefix
    /// (Curator deletes a protected node in the background when its create fails).
    pub(crate) fn protected(framework: &Framework, epoch: u64, dir: &str, prefix: String) -> Self {
        Self::new(framework, epoch, dir, prefix, "", "framework")
    }

    /// The caller takes over (the node was made and is kept, or the server refused the
    /// create): nothing is deleted.
    pub(crate) fn disarm(mut self) {
        self.cleanup.target = Target::Kept;
    }

    /// The session (epoch) the create was sent on.
    pub(crate) fn epoch(&self) -> u64 {
        self.cleanup.epoch()
    }

    /// [`named`](Self::named) for an ephemeral node made by a framework create, which goes on
    /// across a new session (its retries follow the framework's session): the node is tied to
    /// the framework's current session when that session owns it (`owner`, the create's
    /// `ephemeralOwner`), so that its delete goes through the session that holds it.
    pub(crate) fn named_for_owner(self, name: String, czxid: i64, owner: i64) -> CreatedNode {
        let framework = self.framework().clone();
        match framework.session() {
            Ok(session) if owner != 0 && session.id() == owner && session.epoch != self.epoch() => {
                let PendingCreate { mut cleanup, dir, prefix, marker } = self;
                let recipe = cleanup.recipe;
                cleanup.target = Target::Kept;
                PendingCreate::new(&framework, session.epoch, &dir, prefix, marker, recipe).named(name, czxid)
            }
            _ => self.named(name, czxid),
        }
    }

    /// The create was answered with `sequence`: from now on the node is deleted by path.
    pub(crate) fn created(self, sequence: CreateSequence, czxid: i64) -> CreatedNode {
        self.with_sequence(&sequence.to_string(), czxid)
    }

    /// The node is `<prefix><marker><sequence>`: from now on it is deleted by path.
    pub(crate) fn with_sequence(self, sequence: &str, czxid: i64) -> CreatedNode {
        let name = format!("{}{}{sequence}", self.prefix, self.marker);
        self.named(name, czxid)
    }

    /// The node is known by name: from now on it is deleted by path.
    pub(crate) fn named(self, name: String, czxid: i64) -> CreatedNode {
        let sequence = self.sequence_of(&name);
        let PendingCreate { mut cleanup, dir, .. } = self;
        let full_path = path::join(&dir, &name);
        cleanup.target = Target::Node(full_path.clone());
        CreatedNode { cleanup, name, full_path, czxid, sequence }
    }

    /// The sequence of `name`, a node of this create (`<prefix><marker><sequence>`).
    pub(crate) fn sequence_of(&self, name: &str) -> Option<i64> {
        let rest = name.strip_prefix(self.prefix.as_str())?.strip_prefix(self.marker)?;
        parse_sequence(rest)
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

    /// The session (epoch) the node was made on.
    pub(crate) fn epoch(&self) -> u64 {
        self.cleanup.epoch()
    }

    /// Takes the node apart for the held stage: its cleanup, full path and creation zxid.
    pub(crate) fn into_parts(self) -> (Cleanup, String, i64) {
        (self.cleanup, self.full_path, self.czxid)
    }
}

/// Runs a request of an attempt, retrying retryable errors under the retry policy. `NoNode`
/// and a lost session end the attempt: our node (or its directory) is gone. A reply the
/// server holds back is let go by a nudge (see `stall`).
pub(crate) async fn retry_request<T, F, Fut>(framework: &Framework, mut op: F) -> Result<T, Failure>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, ZkError>>,
{
    let nudged = || super::stall::framework_unstalled(framework, op());
    match framework.retry_loop().run(nudged, |e| is_zk_retryable(e) && !is_zk_session_lost(e)).await {
        Ok(value) => Ok(value),
        Err(ZkError::NoNode) => Err(Failure::NodeMissing),
        Err(e) if is_zk_session_lost(&e) => Err(Failure::NodeMissing),
        Err(e) => Err(e.into()),
    }
}
