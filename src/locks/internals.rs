//! The one wait engine (Curator's `LockInternals`): create a protected ephemeral-sequential
//! node, sort the children, hold or watch the node ahead, repeat.
//!
//! Round trips: the create and the first `getChildren` are sent back to back (zookeeper-client
//! sends requests in call order, and ZooKeeper answers a session's requests in order), so an
//! uncontended acquire costs one round trip. Listings go through the session's shared
//! listings: when many tasks of one session list this directory at once, late ones share a
//! listing sent after all of them asked (see the framework's `listings.rs`). A mutex waiter whose predecessor was the holder
//! takes the lock when that node is deleted without listing the children again (see
//! [`Driver::first_after_holder_leaves`]); it also watches its own node, in the same round
//! trip, because someone may delete it meanwhile (ZooKeeper notifies a session in zxid order,
//! so that deletion would be heard first).
//!
//! The shortcut is not taken when the connection changed state while the waiter waited: after
//! a reconnect, missed events are replayed in the server's order, so the predecessor's
//! deletion can arrive before our own node's. The waiter lists the children again instead.
//!
//! A mutex waiter with two or more nodes ahead watches, in one round trip, its own node, the
//! node ahead and the node ahead of that one, and lists the children again as soon as that
//! last one goes, keeping the first two watches: the listing, sent while the node ahead holds
//! the lock, usually shows only that node ahead, and then its deletion alone hands us the
//! lock, with no listing after the handoff (see `LockInternals::wait_two_ahead`). The
//! shortcut's conditions are the same: our node's watch quiet, and no change of the
//! connection's state since the watches were sent.
//!
//! No listing outlives the decision it served: a waiter keeps only the names it watches.
//!
//! Cancellation is the node lifecycle's business: a dropped acquire drops its
//! [`CreatedNode`] (or pending create), which deletes it.

use std::future::Future;
use std::sync::Arc;

use futures::future::{BoxFuture, FutureExt};
use zookeeper_client::{EventType, OneshotWatcher, WatchedEvent};

use super::acquire::Mode;
use super::dir_mirror::{Ask, Asker, DirMirror, WaitOn};
use super::fast_path::{self, FastPath, FastPathStats, FastTry};
use super::held::HeldNode;
use super::mirror_slot::MirrorSlot;
use super::node_watch::MirrorSeat;
use super::revocation::{NodeRevocation, Signal};
use super::start_over::fresh_attempts;
use crate::error::{Error, Result, ZkError};
use crate::framework::metrics::LockMetrics;
use crate::framework::metrics::Op;
use crate::framework::node::{retry_request, CreatedNode, Failure};
use crate::framework::protected::{nothing_behind, NodeDir, NodeSpec};
use crate::framework::wait_strategy::WaitStrategy;
use crate::framework::{Framework, Listing, Session};
use crate::path;
use crate::protocol::driver::{Driver, Verdict};

/// The watch on our own node while we wait, kept armed when it proves the lock is ours.
type OwnWatch = BoxFuture<'static, WatchedEvent>;

/// The watches of a wait on the node ahead: that node's, and our own node's when the
/// shortcut may be taken, with the connection's state as it was before they were sent.
struct Armed {
    /// The session (and client) they were set through.
    session: Session,
    /// The node ahead (a name).
    ahead: String,
    ahead_change: BoxFuture<'static, WatchedEvent>,
    own_change: Option<OwnWatch>,
    connection: Option<zookeeper_client::StateWatcher>,
}

/// A lock directory and the rule for who holds it.
#[derive(Debug, Clone)]
pub(crate) struct LockInternals {
    nodes: NodeDir,
    driver: Arc<dyn Driver>,
    /// The uncontended fast path, for mutexes that use it.
    fast: Option<Arc<FastPath>>,
    /// The session's mirror of the directory, for mutexes that wait on it (shared by the
    /// handle's clones; replaced when the session changes).
    mirror: Option<Arc<MirrorSlot>>,
    /// The recipe's metrics, for a lock a user acquires (not a semaphore's internal lock).
    metrics: Option<LockMetrics>,
}

/// How a wait on the mirror ended.
enum MirrorWait {
    /// The lock is ours; the asker has seen our node in the view.
    Acquired(Asker),
    /// A try found the lock held.
    Busy,
    /// No mirror on this session after all: wait the classic way.
    Classic,
}

impl LockInternals {
    /// The engine for the lock directory `path` (a user path).
    ///
    /// # Errors
    /// As [`NodeDir::new`].
    pub(crate) fn new(framework: &Framework, path: &str, driver: Arc<dyn Driver>, data: Vec<u8>) -> Result<Self> {
        let nodes = NodeDir::new(framework, path, driver.lock_name(), data)?;
        Ok(Self { nodes, driver, fast: None, mirror: None, metrics: None })
    }

    /// Takes an uncontended lock with the create alone when it can prove that is safe (see
    /// `fast_path.rs`), unless the framework turned that off; or, when the framework's
    /// [`WaitStrategy`] is the mirror, waits on the session's mirror of the directory (see
    /// `dir_mirror.rs`), which needs no fast path (the fast path's watch on the directory
    /// would silence the mirror's create events on ZooKeeper 3.6-3.8). For mutex drivers only.
    pub(crate) fn with_fast_path(mut self) -> Self {
        if self.framework().config().wait_strategy == WaitStrategy::Mirror {
            return self.with_mirror_wait();
        }
        if fast_path::enabled(self.framework()) {
            self.fast = Some(Arc::default());
        }
        self
    }

    /// Waits on the session's mirror of the directory when the framework's [`WaitStrategy`]
    /// is the mirror. Any driver can: a decision from the mirror is the driver's verdict on
    /// the mirror's children, as it would be on a listing (the read-write halves decide by
    /// their own rule over the one directory both use; an election, as its mutex).
    pub(crate) fn with_mirror_wait(mut self) -> Self {
        if self.framework().config().wait_strategy == WaitStrategy::Mirror {
            self.mirror = Some(Arc::default());
        }
        self
    }

    /// The session's mirror of the directory, started if none runs, when this handle waits on
    /// one (see [`MirrorSlot::for_session`]).
    fn mirror_for(&self, session: &Session) -> Option<Arc<DirMirror>> {
        self.mirror.as_ref()?.for_session(self.framework(), session, self.dir())
    }

    /// The mirror an attempt starts with (see [`MirrorSlot::for_attempt`]).
    fn attempt_mirror(&self, session: &Session) -> Option<Arc<DirMirror>> {
        self.mirror.as_ref()?.for_attempt(self.framework(), session, self.dir())
    }

    /// How the fast path has fared (all zero when it is off).
    pub(crate) fn fast_path_stats(&self) -> FastPathStats {
        self.fast.as_ref().map(|fast| fast.stats()).unwrap_or_default()
    }

    pub(crate) fn framework(&self) -> &Framework {
        self.nodes.framework()
    }

    /// Counts this lock's waits and holds under the `recipe` label.
    pub(crate) fn counted(mut self, recipe: &'static str) -> Self {
        let labels = &self.framework().observer().metrics.labels;
        self.metrics = Some(LockMetrics::new(labels, recipe, self.nodes.path()));
        self.nodes = self.nodes.owned_by(recipe);
        self
    }

    /// The lock's metrics, when it is counted.
    pub(crate) fn metrics(&self) -> Option<&LockMetrics> {
        self.metrics.as_ref()
    }

    /// The lock path as the user gave it.
    pub(crate) fn path(&self) -> &str {
        self.nodes.path()
    }

    /// Full server path of the lock directory.
    pub(crate) fn dir(&self) -> &str {
        self.nodes.dir()
    }

    /// What this directory's nodes are created as.
    pub(crate) fn spec(&self) -> NodeSpec<'_> {
        self.nodes.spec()
    }

    /// What a revocable node is created as: no data, as Curator writes it (the data watch
    /// then only ever sees a revoker's write).
    pub(crate) fn revocable_spec(&self) -> NodeSpec<'_> {
        NodeSpec { data: &[], ..self.spec() }
    }

    /// Acquires in mode `M`, starting a fresh attempt (new node) whenever ours goes missing.
    /// For the engine's own users (an election's participant; a semaphore's internal lock, not
    /// counted): a counted lock's wait goes into its metrics here.
    pub(crate) async fn acquire<M: Mode>(&self) -> Result<M::Out<HeldNode>> {
        let waiting = self.metrics.as_ref().map(LockMetrics::waiting);
        let out = self.acquire_with::<M>(None).await?;
        if let Some(waiting) = waiting {
            waiting.acquired();
        }
        Ok(out)
    }

    /// [`acquire`](Self::acquire), revocably when `revocable` is given: each node is created
    /// with no data and watched for revocation requests (which reach `revocable` while the
    /// acquire waits, and the guards once it holds).
    pub(crate) async fn acquire_with<M: Mode>(&self, revocable: Option<&Arc<Signal>>) -> Result<M::Out<HeldNode>> {
        fresh_attempts(self.framework(), self.path(), || self.attempt::<M>(revocable)).await
    }

    async fn attempt<M: Mode>(&self, revocable: Option<&Arc<Signal>>) -> Result<M::Out<HeldNode>, Failure> {
        let framework = self.framework();
        let session = framework.session()?;
        let list = || self.listing(&session);
        let spec = if revocable.is_some() { self.revocable_spec() } else { self.spec() };
        // Started once the attempt is known to wait or hold (a busy try deletes its node at
        // once); its first read checks the data too, so an earlier request is not missed.
        let epoch = session.epoch;
        let mirror = self.attempt_mirror(&session);
        let mut revocation: Option<Arc<NodeRevocation>> = None;
        let revocation_seat = mirror.clone();
        let mut watch_revocation = move |node: &CreatedNode| {
            if let (Some(signal), None) = (revocable, &revocation) {
                // Started after our create's reply: a seat made now is on the safe side.
                let seat = revocation_seat.as_ref().map(MirrorSeat::after_create);
                revocation = Some(NodeRevocation::start(framework, epoch, node.full_path(), seat, signal.clone()));
            }
            revocation.clone()
        };
        if let Some(mirror) = mirror {
            // The mirror decides: the create goes alone.
            let created = spec.create(&session, None, nothing_behind);
            let (node, _) = session.unstalled(created).await?;
            let try_only = M::busy::<HeldNode>().is_some();
            if !try_only {
                watch_revocation(&node);
            }
            match self.wait_on_mirror(&mirror, &session, &node, try_only).await? {
                MirrorWait::Acquired(asker) => {
                    let revocation = watch_revocation(&node);
                    let mut held = self.hold(&session, node, false, revocation);
                    held.on_mirror(MirrorSeat { mirror, asker });
                    return Ok(M::held(held));
                }
                // Our node is dropped, which deletes it.
                MirrorWait::Busy => return Ok(M::busy().expect("only a try is busy")),
                MirrorWait::Classic => {
                    return self.wait_classic::<M>(&session, node, None, &mut watch_revocation).await
                }
            }
        }
        if self.mirror.is_some() {
            // No mirror runs: the create goes with a listing (one round trip), and a lock
            // that is free costs no mirror at all (a lock of many, used once: per entity, per
            // order). Only an attempt that must wait starts the mirror, and waits on it: its
            // first listing is sent after our create's reply, so it vouches for our node.
            let created = spec.create(&session, None, list);
            let (node, listed) = session.unstalled(created).await?;
            let free = listed.as_ref().is_some_and(|children| {
                self.driver.wrapped(children).is_none()
                    && self.driver.verdict(children, node.name()) == Verdict::Acquired
            });
            let try_only = M::busy::<HeldNode>().is_some();
            if !free && !try_only {
                if let Some(mirror) = self.mirror_for(&session) {
                    watch_revocation(&node);
                    match self.wait_on_mirror(&mirror, &session, &node, false).await? {
                        MirrorWait::Acquired(asker) => {
                            let revocation = watch_revocation(&node);
                            let mut held = self.hold(&session, node, false, revocation);
                            held.on_mirror(MirrorSeat { mirror, asker });
                            return Ok(M::held(held));
                        }
                        MirrorWait::Busy => return Ok(M::busy().expect("only a try is busy")),
                        MirrorWait::Classic => {}
                    }
                    return self.wait_classic::<M>(&session, node, None, &mut watch_revocation).await;
                }
            }
            return self.wait_classic::<M>(&session, node, listed, &mut watch_revocation).await;
        }
        let fast = match &self.fast {
            Some(fast) => session.unstalled(fast.attempt(&spec, &session)).await?,
            None => FastTry::NotTried,
        };
        let (node, listed) = match fast {
            FastTry::Held(node) => {
                let revocation = watch_revocation(&node);
                return Ok(M::held(self.hold(&session, node, true, revocation)));
            }
            FastTry::Queued(node) => (node, None),
            FastTry::NotTried => session.unstalled(spec.create(&session, None, list)).await?,
        };
        self.wait_classic::<M>(&session, node, listed, &mut watch_revocation).await
    }

    /// Waits on the session's mirror until it says our node holds the lock (or, for a try,
    /// that another does). A waiter stuck at the barrier for a quarter of the session timeout,
    /// or behind one predecessor for a whole one, makes sure the mirror is not behind: the
    /// barrier asks for a resync, the predecessor is checked with one unwatched `exists` (a
    /// child the session may not read sends no deletion event).
    async fn wait_on_mirror(
        &self,
        mirror: &DirMirror,
        session: &Session,
        node: &CreatedNode,
        try_only: bool,
    ) -> Result<MirrorWait, Failure> {
        let framework = self.framework();
        let timeout = session.client.session_timeout();
        let epoch = session.epoch;
        let mut state = framework.state_watch();
        let mut asker = mirror.asker();
        loop {
            let (wake, on) = match mirror.ask(&*self.driver, node.name(), &mut asker) {
                Ask::Acquired => return Ok(MirrorWait::Acquired(asker)),
                Ask::Missing => return Err(Failure::NodeMissing),
                Ask::Wrapped => return Err(Error::SequenceWrapped { path: self.path().to_owned() }.into()),
                Ask::Classic => return Ok(MirrorWait::Classic),
                Ask::Crowded => {
                    if let Some(slot) = &self.mirror {
                        slot.crowded();
                    }
                    return Ok(if try_only { MirrorWait::Busy } else { MirrorWait::Classic });
                }
                Ask::Wait { wake, on } => (wake, on),
            };
            if try_only && matches!(on, WaitOn::Predecessor(_)) {
                return Ok(MirrorWait::Busy);
            }
            let bound = match on {
                WaitOn::Barrier => timeout / 4,
                WaitOn::Predecessor(_) | WaitOn::AnyDeletion => timeout,
                WaitOn::Valid => timeout * 2,
            };
            let session_ended = state.wait_for(|s| s.session_over(epoch));
            // The change may be held back by a server (see `framework::stall`).
            let stuck = session
                .unstalled(async {
                    tokio::select! {
                        () = wake.notified() => Ok(false),
                        _ = session_ended => Err(Failure::NodeMissing),
                        () = tokio::time::sleep(bound) => Ok(true),
                    }
                })
                .await?;
            drop(wake);
            match on {
                WaitOn::Barrier | WaitOn::Valid if stuck => mirror.request_resync(),
                WaitOn::Predecessor(ahead) if stuck => {
                    let ahead_path = path::join(self.dir(), &ahead);
                    let stat = retry_request(framework, || {
                        session.sent(Op::Exists);
                        session.client.check_stat(&ahead_path)
                    })
                    .await?;
                    if stat.is_none() {
                        tracing::debug!(node = %ahead, "the mirror missed a deletion: listing again");
                        mirror.request_resync();
                    }
                }
                _ => {}
            }
        }
    }

    /// The classic wait: list, watch the node ahead, repeat (`listed`: the listing sent with
    /// the create, if any).
    async fn wait_classic<M: Mode>(
        &self,
        session: &Session,
        node: CreatedNode,
        listed: Option<Arc<Vec<String>>>,
        watch_revocation: &mut (dyn FnMut(&CreatedNode) -> Option<Arc<NodeRevocation>> + Send),
    ) -> Result<M::Out<HeldNode>, Failure> {
        let framework = self.framework();
        let mut current = session.clone();
        let mut listed = listed.filter(|children| children.iter().any(|c| c == node.name()));
        // The watches on the node ahead and on ours, set before the listing below and kept
        // for it (see `wait_two_ahead`).
        let mut kept: Option<Armed> = None;
        loop {
            framework.follow_move(&mut current);
            let session = &current;
            // Watches set through a client the session has left prove nothing.
            kept = kept.filter(|armed| armed.session.same_client(session));
            let sorted = match listed.take() {
                Some(children) => children,
                None => retry_request(framework, || self.listing(session)).await?,
            };
            if let Some(slot) = &self.mirror {
                // A crowded directory that calmed down is mirrored again by the next attempt.
                slot.listed(sorted.len());
            }
            if self.driver.wrapped(&sorted).is_some() {
                return Err(Error::SequenceWrapped { path: self.path().to_owned() }.into());
            }
            let verdict = self.driver.verdict(&sorted, node.name());
            let alone = sorted.len() == 1;
            // The node ahead of the node ahead, for a mutex waiter two or more places back.
            let before = match &verdict {
                Verdict::Watch { index, .. } if *index > 0 && self.driver.first_after_holder_leaves() => {
                    Some(sorted[*index - 1].clone())
                }
                _ => None,
            };
            // The listing served this decision only: a waiter keeps the names it watches,
            // not the whole queue (thousands of names per waiter on a long queue).
            drop(sorted);
            let (ahead, index) = match verdict {
                Verdict::Missing => return Err(Failure::NodeMissing),
                Verdict::Acquired => {
                    let revocation = watch_revocation(&node);
                    let mut held = self.hold(session, node, alone, revocation);
                    if let Some(own_watch) = kept.and_then(|armed| armed.own_change) {
                        // Kept until the release, whose deletion fires it: dropped unfired, it
                        // would cost a RemoveWatches request.
                        held.keep_watch(own_watch);
                    }
                    return Ok(M::held(held));
                }
                Verdict::Watch { node, index } => (node, index),
            };
            if let Some(busy) = M::busy() {
                return Ok(busy); // our node is dropped, which deletes it
            }
            watch_revocation(&node);
            // The watches on `ahead` and on our node, when the last wait set them already.
            let armed = kept.take().filter(|armed| armed.ahead == ahead);
            if let Some(before) = before {
                kept = self.wait_two_ahead(session, armed, &ahead, &before, node.name()).await?;
                continue;
            }
            // Taking the lock without listing again needs proof that our node still exists.
            let shortcut = index == 0 && self.driver.first_after_holder_leaves();
            let own = shortcut.then_some(node.name());
            let armed = match armed {
                Some(armed) => Some(armed),
                None => self.arm(session, &ahead, own).await?,
            };
            let Some(armed) = armed else { continue }; // already gone: look again
            if let Some(own_watch) = self.wait_armed(armed).await? {
                // We saw the whole queue ahead of us: only the holder. It is gone.
                let revocation = watch_revocation(&node);
                let mut held = self.hold(session, node, false, revocation);
                held.keep_watch(own_watch);
                return Ok(M::held(held));
            }
        }
    }

    /// The wait of a mutex waiter with two or more nodes ahead: it watches the node ahead
    /// and its own node (as the shortcut needs) and also the node ahead of that one,
    /// `before`, all in one round trip, and returns once `before` is gone, keeping the first
    /// two watches for the listing that follows. That listing usually shows `ahead` holding
    /// the lock with nothing else ahead of us, and the watch on `ahead`, set before it, then
    /// hands us the lock when `ahead` is deleted: the listing went out while `ahead` held,
    /// not after it let go, so a handoff costs the holder's delete and its event, without a
    /// listing after them. Curator's waiter lists after the event; a crowd of waiters each
    /// waiting on the node ahead pays that round trip on every handoff. The cost: two
    /// requests (the watches on `before` and on our node) and two events (`before`'s deletion,
    /// and our own node's at the release) more per acquisition. A `before` we may not read
    /// (a `NoAuth` from its ACL) leaves the wait as Curator's: on `ahead`, then a listing.
    ///
    /// `armed`: the watches on `ahead` and our node, set by the last wait. `None` returned:
    /// something other than `before` changed, so nothing is kept.
    async fn wait_two_ahead(
        &self,
        session: &Session,
        armed: Option<Armed>,
        ahead: &str,
        before: &str,
        own: &str,
    ) -> Result<Option<Armed>, Failure> {
        let before_watch = self.watch_child(session, before);
        let (armed, before_watch) = match armed {
            Some(armed) => (Some(armed), before_watch.await?),
            None => {
                let (armed, before_watch) = futures::join!(self.arm(session, ahead, Some(own)), before_watch);
                (armed?, before_watch?)
            }
        };
        let Some(mut armed) = armed else { return Ok(None) }; // `ahead` is gone: look again
        let before_watch = match before_watch {
            Ok(watch) => watch,
            Err(ZkError::NoAuth) => {
                // Its ACL keeps it from us (Curator's wait never reads it): wait as Curator's
                // waiter does, until `ahead` changes, then list again.
                self.wait_armed(Armed { own_change: None, ..armed }).await?;
                return Ok(None);
            }
            Err(_) => return Ok(Some(armed)), // `before` is gone too
        };
        let epoch = session.epoch;
        let mut state = self.framework().state_watch();
        let session_ended = state.wait_for(|s| s.session_over(epoch));
        let Armed { ahead_change, own_change, .. } = &mut armed;
        let own_changed = async {
            match own_change.as_mut() {
                Some(watch) => drop(watch.await),
                None => std::future::pending().await,
            }
        };
        // The deletion may be held back by a server (see `framework::stall`).
        let before_gone = session.unstalled(async {
            tokio::select! {
                biased;
                () = own_changed => Ok(false), // our node changed or went: look again
                // Before `ahead`'s: when both went, the listing shows it, and our node's
                // watch is kept with the lock rather than dropped.
                _ = crate::watch::fired(before_watch) => Ok(true),
                _ = ahead_change => Ok(false), // `ahead` changed or went: look again
                _ = session_ended => Err(Failure::NodeMissing),
                // Our watches are the old client's: look again through the new one.
                () = self.framework().session_moved(session) => Ok(false),
            }
        });
        Ok(before_gone.await?.then_some(armed))
    }

    /// Lists the children, sorted. Concurrent listings of this directory on one session are
    /// shared (see the framework's `Listings`), except when the fast path needs a watch on the
    /// directory: then the listing is our own, with an `exists` watch sent right behind it
    /// (same round trip).
    fn listing<'a>(&'a self, session: &'a Session) -> impl Future<Output = Listing> + 'a {
        // The fast path's watch is a one-shot watch on the directory: never beside a
        // persistent one of this framework there (it would silence it on ZooKeeper 3.6-3.8).
        let watchable = || self.framework().may_watch_once(self.dir());
        let Some(fast) = self.fast.as_deref().filter(|fast| fast.needs_watch(session) && watchable()) else {
            let driver = self.driver.clone();
            let sort = move |children: &mut Vec<String>| driver.sort(children);
            return session.listings.list(&session.client, self.dir(), self.driver.lock_name(), sort).left_future();
        };
        session.sent(Op::GetChildren);
        let children = session.client.list_children(self.dir());
        let arm = fast.arm_watch(self.framework(), session, self.dir());
        async move {
            arm.await;
            let mut children = children.await?;
            self.driver.sort(&mut children);
            Ok(Arc::new(children))
        }
        .right_future()
    }

    /// The node holds the lock; `alone` when its listing showed only itself (or the fast path
    /// proved that), which lets the handle's next acquire try the fast path; revocable when
    /// `revocation` watches it.
    fn hold(
        &self,
        session: &Session,
        node: CreatedNode,
        alone: bool,
        revocation: Option<Arc<NodeRevocation>>,
    ) -> HeldNode {
        let sole = self.fast.as_ref().filter(|_| alone).and_then(|fast| fast.sole_hold(session, &node));
        let mut held = HeldNode::with_revocation(node, revocation);
        if let Some(sole) = sole {
            held.held_alone(sole);
        }
        held.count_hold(self.metrics.as_ref());
        held
    }

    /// Watches `ahead` (getData watch) until it changes or goes away, and with `own` (our
    /// node's name) our node as well, in the same round trip. `None`: `ahead` is gone already.
    async fn arm(&self, session: &Session, ahead: &str, own: Option<&str>) -> Result<Option<Armed>, Failure> {
        // Taken before anything is sent: any change of the connection's state after it (a
        // disconnect, then a reconnect) makes the wake-up unfit for the shortcut.
        let connection = own.map(|_| session.client.state_watcher());
        // Sent now, ahead of the predecessor's watch; both are answered in one round trip.
        let own_reply = own.map(|name| {
            session.sent(Op::GetData);
            session.client.get_and_watch_data(&path::join(self.dir(), name))
        });
        let ahead_watch = self.watch_child(session, ahead);
        let own_reply = async move {
            match own_reply {
                Some(reply) => Some(reply.await),
                None => None,
            }
        };
        // Our node's reply comes before the predecessor's, whose wait (`retry_request`) nudges
        // a server that holds them back.
        let (own_reply, ahead_watch) = futures::join!(own_reply, ahead_watch);
        let own_change: Option<OwnWatch> = match own_reply {
            Some(Ok((_, _, watcher))) => Some(crate::watch::fired(watcher).boxed()),
            Some(Err(ZkError::NoNode)) => return Err(Failure::NodeMissing),
            Some(Err(_)) | None => None, // not watched: nothing is proven below
        };
        let ahead_watch = match ahead_watch? {
            Ok(watch) => watch,
            Err(ZkError::NoNode) => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        Ok(Some(Armed {
            session: session.clone(),
            ahead: ahead.to_owned(),
            ahead_change: crate::watch::fired(ahead_watch).boxed(),
            own_change,
            connection,
        }))
    }

    /// A data watch on the child `name`, set through `session` under the retry policy. The two
    /// refusals a waiter decides on stay with the caller: `Err(NoNode)` when the child is
    /// gone, `Err(NoAuth)` when its ACL keeps it from us.
    async fn watch_child(&self, session: &Session, name: &str) -> Result<Result<OneshotWatcher, ZkError>, Failure> {
        let path = path::join(self.dir(), name);
        retry_request(self.framework(), || async {
            session.sent(Op::GetData);
            match session.client.get_and_watch_data(&path).await {
                Ok((_, _, watcher)) => Ok(Ok(watcher)),
                Err(e @ (ZkError::NoNode | ZkError::NoAuth)) => Ok(Err(e)),
                Err(e) => Err(e),
            }
        })
        .await
    }

    /// Waits until the armed node ahead changes or goes away; wakes early when the session
    /// ends.
    ///
    /// With our node watched, `Some` means the node ahead was deleted while our node still
    /// existed (had ours been deleted first, we would have heard first), and carries our
    /// node's watch, still armed.
    async fn wait_armed(&self, armed: Armed) -> Result<Option<OwnWatch>, Failure> {
        let Armed { session, ahead, ahead_change, mut own_change, mut connection } = armed;
        let epoch = session.epoch;
        let mut state = self.framework().state_watch();
        let own_changed = async {
            match own_change.as_mut() {
                Some(watch) => drop(watch.await),
                None => std::future::pending().await,
            }
        };
        let session_ended = state.wait_for(|s| s.session_over(epoch));
        // The deletion may be held back by a server (see `framework::stall`).
        let event = session.unstalled(async {
            tokio::select! {
                biased;
                () = own_changed => Ok(None), // our node changed or went: look again
                event = ahead_change => Ok(Some(event.event_type)),
                _ = session_ended => Err(Failure::NodeMissing),
                // Our watches are the old client's: look again through the new one.
                () = self.framework().session_moved(&session) => Ok(None),
            }
        });
        let Some(event) = event.await? else { return Ok(None) };
        match event {
            EventType::Session => Err(Failure::NodeMissing),
            // After a reconnect, the client's watches are set again and the server reports
            // what they missed in its own order, not in zxid order: our node's deletion may
            // be reported after the predecessor's. Only a wake-up on the connection the
            // watches were set on proves anything: otherwise, list again.
            EventType::NodeDeleted if connection.as_mut().is_some_and(|c| c.changed().now_or_never().is_some()) => {
                tracing::debug!(node = %ahead, "predecessor deleted across a reconnect: listing again");
                Ok(None)
            }
            // Proven only if our node's watch is still quiet now that `ahead` is gone.
            EventType::NodeDeleted => {
                Ok(own_change.and_then(|mut watch| watch.as_mut().now_or_never().is_none().then_some(watch)))
            }
            _ => Ok(None),
        }
    }

    /// Full paths of all children, in lock order (index 0 holds the lock), namespace stripped.
    pub(crate) async fn participant_nodes(&self) -> Result<Vec<String>> {
        self.nodes.participant_nodes(|children| self.driver.sort(children)).await
    }
}
