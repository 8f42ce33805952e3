//! The one release core: a node this process holds ([`HeldNode`], which owns the delete) and
//! the non-owning [`NodeWatch`] that guards use for `is_held()` and `lost()`.
//!
//! `release().await` deletes the node and reports the outcome. Dropping a `HeldNode` sends the
//! delete on the session at once (so it is ordered before any request made after the drop)
//! and leaves the reply to the framework's reaper; a release cancelled while its delete is in
//! flight leaves that reply to the reaper too. Neither path blocks, spawns or needs a runtime
//! in `Drop`.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use futures::future::{BoxFuture, FutureExt, Shared};
use zookeeper_client::WatchedEvent;

use super::fast_path::SoleHold;
use super::node_watch::{watch_node, End, MirrorSeat};
use super::revocation::NodeRevocation;
use crate::error::{is_zk_retryable, is_zk_session_lost, Result, ZkError};
use crate::framework::metrics::{HoldToken, LockMetrics};
use crate::framework::node::{Cleanup, CreatedNode, DeleteReply, SendDelete};
use crate::framework::stall::unstalled;
use crate::framework::{ConnectionState, Framework, OneshotWatch};
use crate::sync::Mutex;

/// A watch set while acquiring, kept (never polled) until the release: dropped unfired it
/// would cost a `RemoveWatches` request, kept it fires on our own delete at the latest.
#[allow(dead_code)] // held, never read: that it is dropped only with the node is the point
pub(crate) enum KeptWatch {
    /// One of the client's, waiting for its event.
    Raw(BoxFuture<'static, WatchedEvent>),
    /// A watched read's of the framework.
    Read(OneshotWatch),
}

impl From<BoxFuture<'static, WatchedEvent>> for KeptWatch {
    fn from(watch: BoxFuture<'static, WatchedEvent>) -> Self {
        KeptWatch::Raw(watch)
    }
}

impl From<OneshotWatch> for KeptWatch {
    fn from(watch: OneshotWatch) -> Self {
        KeptWatch::Read(watch)
    }
}

/// A lock or lease node held by this process: dropping it deletes the node.
pub(crate) struct HeldNode {
    cleanup: Cleanup,
    /// Set when the node held its lock alone: its delete is recorded for the handle's fast
    /// path, as it is sent.
    sole: Option<SoleHold>,
    watch: NodeWatch,
    /// Watches set while acquiring and kept so that they fire (at the latest on our own
    /// delete) instead of costing a RemoveWatches request when dropped unfired. Declared
    /// after `cleanup`, so they are dropped after the delete is sent.
    kept_watches: Mutex<Vec<KeptWatch>>,
    /// Counts the hold in its recipe's metrics while the node is held.
    hold: Option<HoldToken>,
}

impl std::fmt::Debug for HeldNode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kept = self.kept_watches.lock().len();
        f.debug_struct("HeldNode").field("cleanup", &self.cleanup).field("kept_watches", &kept).finish()
    }
}

impl HeldNode {
    pub(crate) fn new(node: CreatedNode) -> Self {
        let (cleanup, full_path, czxid) = node.into_parts();
        let watch = NodeWatch {
            framework: cleanup.framework().clone(),
            full_path: full_path.into(),
            epoch: cleanup.epoch(),
            czxid,
            gone: Arc::default(),
            untrusted: Arc::default(),
            deletion: Arc::default(),
            revocation: None,
            seat: None,
        };
        Self { cleanup, sole: None, watch, kept_watches: Mutex::default(), hold: None }
    }

    /// The held stage of `node`, revocable when `revocation` watches it.
    pub(crate) fn with_revocation(node: CreatedNode, revocation: Option<Arc<NodeRevocation>>) -> Self {
        let mut held = Self::new(node);
        held.watch.revocation = revocation;
        held
    }

    /// The node's session mirrors its directory: `lost()` and `is_held()` learn of its
    /// deletion from the mirror, without a watch of their own.
    pub(crate) fn on_mirror(&mut self, seat: MirrorSeat) {
        self.watch.seat = Some(seat);
    }

    /// Counts the hold in its recipe's metrics while the node is held (until it is released
    /// or its session ends).
    pub(crate) fn count_hold(&mut self, metrics: Option<&LockMetrics>) {
        let book = &self.watch.framework.observer().metrics.holds;
        self.hold = metrics.map(|metrics| metrics.hold(book, self.watch.epoch));
    }

    /// Counts a hold that ends lost: its session is over or its node was seen deleted, and
    /// the framework was not closed.
    fn end_hold(hold: Option<HoldToken>, watch: &NodeWatch) {
        if let Some(hold) = hold {
            let lost = watch.client().is_none() || watch.gone.load(Ordering::SeqCst);
            if lost && !watch.framework.is_closed() {
                hold.lost();
            }
        }
    }

    /// The node held its lock alone: its delete is recorded for the handle's fast path.
    pub(crate) fn held_alone(&mut self, sole: SoleHold) {
        self.sole = Some(sole);
    }

    /// Sends the delete with `send`, through the fast path's record when the node held alone.
    fn record(sole: Option<&SoleHold>, epoch: u64, send: SendDelete<'_>) -> DeleteReply {
        match sole {
            Some(sole) => sole.record_delete(epoch, send),
            None => send(),
        }
    }

    /// Keeps `watch` until the node is released.
    pub(crate) fn keep_watch(&mut self, watch: impl Into<KeptWatch>) {
        self.kept_watches.lock().push(watch.into());
    }

    /// The non-owning view of this node, for `is_held()` and `lost()`.
    pub(crate) fn watch(&self) -> &NodeWatch {
        &self.watch
    }

    /// Deletes the node now, retrying every retryable error (connection loss, throttling, a
    /// moved session) under the retry policy while the node's session is current. A node
    /// whose session is gone counts as released: the server deleted it.
    ///
    /// # Errors
    /// The error that stopped the delete, logged with the path. A retryable one is left to the
    /// reaper, which keeps trying while the session lasts; a permanent one (`NoAuth`) leaves
    /// the node until its session ends.
    pub(crate) async fn release(mut self) -> Result<()> {
        let watch = self.watch.clone();
        Self::end_hold(self.hold.take(), &watch);
        let HeldNode { cleanup, sole, .. } = &mut self;
        let delete = || {
            let (sole, epoch) = (sole.as_ref(), watch.epoch);
            let send =
                |client| cleanup.send_delete_via(&client, &watch.full_path, |send| Self::record(sole, epoch, send));
            let client = watch.client();
            let reply = client.clone().map(send);
            let observer = watch.framework.observer();
            let framework = &watch.framework;
            async move {
                match reply.zip(client) {
                    None => Ok(()), // the session is over: the node went with it
                    Some((reply, client)) => match unstalled(&client, observer, reply).await {
                        Err(ZkError::NoNode) => Ok(()),
                        Err(e) if is_zk_session_lost(&e) && framework.session_gone(epoch) => Ok(()),
                        other => other,
                    },
                }
            }
        };
        // A session-lost error while the session lives on came from a client the session has
        // moved away from (see `Framework::session_gone`): the next try goes through the
        // client serving it now.
        let retryable = |e: &ZkError| is_zk_retryable(e) || is_zk_session_lost(e);
        let released = watch.framework.retry_loop().run(delete, retryable).await;
        watch.gone.store(true, Ordering::SeqCst);
        released.map_err(|error| {
            tracing::warn!(node = %watch.full_path, %error, "lock node release failed");
            error.into()
        })
    }
}

impl Drop for HeldNode {
    /// Sends the delete now (ordered before any later request), through the fast path's
    /// record; the cleanup's own `Drop` then leaves the reply to the reaper.
    fn drop(&mut self) {
        Self::end_hold(self.hold.take(), &self.watch);
        let (sole, epoch) = (self.sole.as_ref(), self.cleanup.epoch());
        self.cleanup.delete_now_via(|send| Self::record(sole, epoch, send));
    }
}

/// What a guard knows about its node without owning it: whether the lock can still be
/// trusted, and a way to wait until it cannot. Cheap to clone.
#[derive(Debug, Clone)]
pub(crate) struct NodeWatch {
    framework: Framework,
    /// Full server path of the node (namespace included).
    full_path: Arc<str>,
    /// The session (epoch) that created it.
    epoch: u64,
    /// The node's creation zxid: the fencing token.
    czxid: i64,
    /// Set once this process knows the node is gone (released, or seen deleted).
    gone: Arc<AtomicBool>,
    /// Set once the node can no longer be watched (the server refuses to let us read it): its
    /// guards stop trusting it, though it may still be there (and is still deleted on release).
    untrusted: Arc<AtomicBool>,
    /// The node's deletion watch, shared by every `lost()` of every clone.
    deletion: Arc<DeletionWatch>,
    /// The node's revocation requests, when it was acquired revocably.
    revocation: Option<Arc<NodeRevocation>>,
    /// The node's place on its session's mirror of its directory, when it waited there.
    seat: Option<MirrorSeat>,
}

/// The one deletion watch of a node that is not revocable, set by the first `lost()` and
/// shared by every later one: it is kept (not dropped) when its callers go away, so any number
/// of callers, at once or one after another, cost one watch for the node's life.
#[derive(Default)]
struct DeletionWatch(Mutex<Option<Shared<BoxFuture<'static, End>>>>);

impl std::fmt::Debug for DeletionWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let set = self.0.lock().is_some();
        f.debug_struct("DeletionWatch").field("set", &set).finish()
    }
}

impl NodeWatch {
    /// The node's full server path (namespace included).
    pub(crate) fn full_path(&self) -> &str {
        &self.full_path
    }

    /// The node's path as the user sees it (namespace stripped).
    pub(crate) fn user_path(&self) -> &str {
        self.framework.unfix_path(&self.full_path)
    }

    pub(crate) fn epoch(&self) -> u64 {
        self.epoch
    }

    pub(crate) fn fencing_token(&self) -> i64 {
        self.czxid
    }

    /// The client of the node's session, while that session is current.
    fn client(&self) -> Option<zookeeper_client::Client> {
        self.framework.client_of(self.epoch)
    }

    /// Whether the lock can still be trusted: the node is not known to be gone and can still
    /// be watched, its session is current, and the connection state is not an error state
    /// under the error policy.
    pub(crate) fn is_held(&self) -> bool {
        let snapshot = self.framework.snapshot();
        !self.known_gone()
            && !self.untrusted.load(Ordering::SeqCst)
            && snapshot.epoch == self.epoch
            && !snapshot.state.is_error_state(self.framework.error_policy())
            && !self.framework.is_closed()
    }

    /// Whether the hold is over for good: the node is known to be gone, or the session that
    /// created it is (`Lost`, replaced by a new session, or the framework closed).
    pub(crate) fn is_over(&self) -> bool {
        let snapshot = self.framework.snapshot();
        self.known_gone()
            || snapshot.epoch != self.epoch
            || snapshot.state == ConnectionState::Lost
            || self.framework.is_closed()
    }

    /// Whether this process knows the node is gone: released, seen deleted, or missing from
    /// its session's mirror (recorded then).
    fn known_gone(&self) -> bool {
        if self.gone.load(Ordering::SeqCst) {
            return true;
        }
        let missing = self.seat.as_ref().is_some_and(|seat| seat.knows_gone(&self.full_path));
        if missing {
            self.gone.store(true, Ordering::SeqCst);
        }
        missing
    }

    /// Completes when the lock can no longer be trusted: an error state under the policy, a
    /// new session, or the node deleted (after which `is_held()` says so too). Completes at its
    /// first poll when [`is_held`](Self::is_held) is already false (which also covers a
    /// framework whose task was starved), without waiting on any request.
    pub(crate) async fn lost(&self) {
        if !self.is_held() {
            return;
        }
        let policy = self.framework.error_policy();
        let epoch = self.epoch;
        let mut state = self.framework.state_watch();
        let state_says_lost = async move {
            let _ = state.wait_for(|s| s.epoch != epoch || s.state.is_error_state(policy)).await;
        };
        tokio::select! {
            () = state_says_lost => {}
            () = self.node_gone() => {}
        }
    }

    /// Waits for a revocation request to the node not yet counted in `seen` and counts it
    /// (true), or false once no request can come: the node is gone, its session ended, or it
    /// was not acquired revocably (then at once).
    pub(crate) async fn revocation_requested(&self, seen: &AtomicU64) -> bool {
        match &self.revocation {
            Some(revocation) => revocation.next_request(seen).await,
            None => false,
        }
    }

    /// Completes when the node is deleted (and records it), or when nothing more can be
    /// learned about it (the server refuses to let us read it); pending once its session is
    /// over (the state watch decides then).
    ///
    /// A revocable node already has a data watch that reads every change (revocation requests
    /// are data changes): that watch's end is awaited instead of a second watch that would
    /// read each change again and drop it. Any other node gets one deletion watch, shared by
    /// every caller: on its session's mirror when it waited there (no request), a data watch
    /// otherwise.
    async fn node_gone(&self) {
        let end = match &self.revocation {
            Some(revocation) => revocation.ended().await,
            None => self.deletion_watch().await,
        };
        match end {
            End::Deleted => self.gone.store(true, Ordering::SeqCst),
            End::Unwatchable => self.untrusted.store(true, Ordering::SeqCst),
            End::SessionOver => std::future::pending().await,
        }
    }

    /// The node's deletion watch, set on the first call. Data changes only set it again (not
    /// revocable: data is informational here, a revoke message included).
    fn deletion_watch(&self) -> Shared<BoxFuture<'static, End>> {
        let mut slot = self.deletion.0.lock();
        let watch = slot.get_or_insert_with(|| {
            let (framework, epoch, full_path) = (self.framework.clone(), self.epoch, self.full_path.clone());
            let seat = self.seat.clone();
            async move { watch_node(&framework, epoch, &full_path, seat, false, |_, _| {}).await }.boxed().shared()
        });
        watch.clone()
    }
}
