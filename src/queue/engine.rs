//! The one engine under `DistributedQueue` and its id, priority and delay variants: puts of
//! framed items under a variant's name, claims in the variant's order (lock-safe or not),
//! takes, lock-safe consumption with requeue, removal by name, and the stream of takes.
//! Which variant it serves is only its [`QueueOrder`] and the names its callers put under.
//!
//! A consumer works as Curator's does: it lists the queue once with a watch on its children,
//! takes the listed items in the variant's order, and lists again only when the listing is
//! used up and the watch has fired since (or its session ended). The listing and its watch are
//! kept between takes, per queue handle (its clones and streams share them), so a take costs
//! a read and a delete of its item, and the watch is never removed unfired. An engine that
//! refreshes (Curator's priority queue, `refreshOnWatch`) also lists again once it has gone
//! through a set number of the listing's items and the watch has fired since.

use std::collections::VecDeque;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures::future::BoxFuture;
use futures::stream::BoxStream;
use futures::{FutureExt, Stream};
use tokio::time::Instant;
use zookeeper_client::CreateMode;

use super::delete_taken_after;
use crate::error::{is_zk_connection_error, is_zk_session_lost};
use crate::error::{Error, Result, ZkError};
use crate::framework::metrics::Op;
use crate::framework::NodeEvent;
use crate::framework::{Framework, OneshotWatch, Parents, ReaperCmd};
use crate::path;
use crate::protocol::queue_names::{delay_epoch_of, QueueOrder};
use crate::protocol::values::{decode_queue_items, encode_queue_items, QUEUE_ITEM_EXPECTED};
use crate::protocol::QUEUE_ITEM_NAME;

/// A queue of Curator's framed `queue-` items at one path.
#[derive(Debug, Clone)]
pub(super) struct Engine {
    framework: Framework,
    path: String,
    lock_path: Option<String>,
    order: QueueOrder,
    /// Refresh after this many items of a listing (see [`Engine::refreshing_after`]).
    refresh_after: Option<usize>,
    consumer: Arc<Consumer>,
}

/// What a handle's consumers keep between takes.
#[derive(Debug, Default)]
struct Consumer {
    /// The last listing and its watch; a take holds it while it claims an item.
    listing: tokio::sync::Mutex<Listing>,
    /// Set when a claimed item may still be in the queue without being in the listing (its
    /// delete failed or was cancelled): the next listing is then made even if the watch has
    /// not fired.
    stale: AtomicBool,
}

/// The names of the last listing not yet taken or found gone, in the variant's order, and
/// the children watch it set.
#[derive(Default)]
struct Listing {
    names: VecDeque<String>,
    /// `None`: never listed, or the watch fired (list again once `names` gives nothing).
    watch: Option<BoxFuture<'static, Result<NodeEvent>>>,
    /// How many of the listing's names were taken or found gone since it was made.
    done: usize,
}

impl fmt::Debug for Listing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Listing")
            .field("names", &self.names.len())
            .field("watching", &self.watch.is_some())
            .field("done", &self.done)
            .finish()
    }
}

impl Listing {
    /// Drops the watch if it fired; [`Error::Closed`] when it ended with the framework.
    fn check_watch(&mut self) -> Result<()> {
        let Some(watch) = self.watch.as_mut() else { return Ok(()) };
        match watch.now_or_never() {
            None => Ok(()),
            Some(event) => {
                self.watch = None;
                match event {
                    Err(Error::Closed) => Err(Error::Closed),
                    _ => Ok(()),
                }
            }
        }
    }
}

/// Sets [`Consumer::stale`] when dropped armed: a take whose delete did not conclude.
struct StaleOnDrop<'a>(Option<&'a AtomicBool>);

impl StaleOnDrop<'_> {
    fn disarm(mut self) {
        self.0 = None;
    }
}

impl Drop for StaleOnDrop<'_> {
    fn drop(&mut self) {
        if let Some(stale) = self.0 {
            stale.store(true, Ordering::Relaxed);
        }
    }
}

/// What a pass over the kept listing found.
enum Pass<'a> {
    Item(Claim<'a>),
    /// The listing is to be made again before the next claim (a refreshing engine).
    Refresh,
    /// Nothing claimable: the lock of the first item another consumer holds (watched), and in
    /// a delay queue how long until the first item not yet due is due.
    Nothing {
        lock_watch: Option<OneshotWatch>,
        due_in: Option<Duration>,
    },
}

/// An item claimed by this consumer: its node's name, bytes and version, and in lock-safe
/// mode its lock node (full path, and the data its create wrote), deleted in the background
/// if the claim is dropped.
struct Claim<'a> {
    framework: &'a Framework,
    item: String,
    data: Vec<u8>,
    version: i32,
    lock: Option<(String, Vec<u8>)>,
    /// The framework's session epoch before the lock's create was sent. While it is still the
    /// current one, the lock node was created on this session and is there until this claim
    /// deletes it: no other session can create that name meanwhile.
    locked_in: u64,
    /// What the delete sent with the read did (normal mode).
    deleted: Deleted,
}

/// The fate of the delete a normal-mode claim sends right behind its read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Deleted {
    /// None was sent, or it found the node written since its create: delete at the version read.
    No,
    /// The node is deleted: the read's bytes are this consumer's.
    Yes,
    /// Its answer was lost: it may have deleted the node.
    InDoubt,
}

impl Drop for Claim<'_> {
    fn drop(&mut self) {
        // Only if the lock is still this session's: after a new session ours went with the
        // old one, and the node at that name may be another consumer's lock by now.
        drop(CancelledLock { framework: self.framework, lock: self.lock.take() });
    }
}

/// A lock node whose create was sent and not yet answered (full path, and the data that
/// create wrote): dropped armed, it is deleted in the background if it is an ephemeral node
/// of the framework's session holding that data.
struct CancelledLock<'a> {
    framework: &'a Framework,
    lock: Option<(String, Vec<u8>)>,
}

impl Drop for CancelledLock<'_> {
    fn drop(&mut self) {
        if let Some((path, data)) = self.lock.take() {
            let epoch = self.framework.epoch();
            if epoch != 0 {
                self.framework.reap(ReaperCmd::DeleteOwned { path, data, epoch, recipe: "queue" });
            }
        }
    }
}

impl<'a> Claim<'a> {
    /// A claim of `item` holding what a read returned, without a lock.
    fn read(framework: &'a Framework, item: &str, data: Vec<u8>, version: i32, deleted: Deleted) -> Self {
        Claim { framework, item: item.to_owned(), data, version, lock: None, locked_in: 0, deleted }
    }

    /// A claim of `item` before anything is read.
    fn empty(framework: &'a Framework, item: &str) -> Self {
        Claim::read(framework, item, Vec::new(), 0, Deleted::No)
    }

    /// Deletes the claimed item, `item` its path (at `version`, or any); see
    /// [`delete_taken_after`]. A delete in doubt that then finds the item gone is taken as
    /// this one's only under a lock whose session is still the framework's.
    async fn delete_item(&self, item: &str, version: Option<i32>) -> Result<bool> {
        let locked_in = (self.lock.is_some() && self.framework.epoch() == self.locked_in).then_some(self.locked_in);
        delete_taken_after(self.framework, item, version, self.deleted == Deleted::InDoubt, locked_in).await
    }

    /// Deletes the lock node now, with one delete on the session that created it. After a
    /// new session our node went with the old one and the name may hold another consumer's
    /// lock, so then, and when the delete fails, the node is left to the background delete of
    /// `Drop`, which deletes only a node of the current session holding this create's data.
    async fn unlock(mut self) {
        let (Some((lock, _)), Ok(session)) = (self.lock.as_ref(), self.framework.session()) else { return };
        if session.epoch != self.locked_in {
            return;
        }
        session.sent(Op::Delete);
        // A server may hold the reply back (see `framework::stall`).
        match session.unstalled(session.client.delete(lock, None)).await {
            Ok(()) | Err(ZkError::NoNode) => self.lock = None,
            Err(e) => tracing::debug!(lock, error = %e, "queue: lock node left to the reaper"),
        }
    }
}

/// What an attempt to claim one node found.
enum Claimed<'a> {
    /// Ours now.
    Item(Claim<'a>),
    /// Another consumer holds its lock (this lock node's path).
    Locked(String),
    /// Taken already.
    Gone,
    /// Not an item: a node with children of its own under an item's name (made by hand, or
    /// a sharder's shard), which no consumer can take. Left where it is and passed over.
    NotAnItem,
}

/// A node under an item's name that has children: no consumer can delete it, so it is no
/// item (Curator's consumers log the failed delete and go on with the next item).
fn not_an_item(item: &str) -> Claimed<'static> {
    tracing::warn!(item, "queue: a node with children under an item's name is no item: passed over");
    Claimed::NotAnItem
}

/// The clock a delay queue's epochs are compared with: this host's wall clock, in
/// milliseconds since the Unix epoch (Curator's `System.currentTimeMillis()`).
pub(super) fn now_epoch_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

impl Engine {
    /// An engine at `path` (lock-safe under `lock_path`), ordering by `order`. Does no I/O.
    pub(super) fn new(framework: &Framework, path: &str, lock_path: Option<&str>, order: QueueOrder) -> Result<Self> {
        path::validate_recipe_path(path)?;
        if let Some(lock_path) = lock_path {
            path::validate_recipe_path(lock_path)?;
        }
        Ok(Engine {
            framework: framework.clone(),
            path: path.to_owned(),
            lock_path: lock_path.map(str::to_owned),
            order,
            refresh_after: None,
            consumer: Arc::default(),
        })
    }

    /// This engine (its listing shared) refreshing as Curator's consumer with
    /// `refreshOnWatch` and `minItemsBeforeRefresh = items`: before it claims an item, once
    /// `items` of the listing were taken or found gone, it lists again if the children watch
    /// has fired since the listing was made. Its own deletes fire that watch, so on a busy
    /// queue that is a listing per `items` items.
    pub(super) fn refreshing_after(self, items: usize) -> Self {
        Engine { refresh_after: Some(items), ..self }
    }

    pub(super) fn path(&self) -> &str {
        &self.path
    }

    pub(super) fn framework(&self) -> &Framework {
        &self.framework
    }

    /// Puts `items` as one node named `<name><sequence>` (`name` is a variant's item name,
    /// starting with `queue-`); returns its path.
    pub(super) async fn put<I: AsRef<[u8]>>(&self, name: &str, items: &[I]) -> Result<String> {
        if items.is_empty() {
            return Err(Error::invalid_argument("items", "a multi-item put needs at least one item"));
        }
        let data = encode_queue_items(items);
        let prefix = path::join(&self.path, name);
        let fw = &self.framework;
        let create = || {
            fw.create(&prefix).plain().mode(CreateMode::PersistentSequential).parents(Parents::MustExist).data(&data)
        };
        match create().await {
            Ok(created) => return Ok(created.path),
            Err(Error::ZooKeeper(ZkError::NoNode)) => {}
            Err(e) => return Err(e),
        }
        // The queue node (persistent, as Curator's `start()` makes it) is missing.
        ensure_persistent(fw, &self.path).await?;
        Ok(create().await?.path)
    }

    /// Takes the first node this consumer can claim and returns its items, waiting until
    /// `deadline` (`None`: for ever).
    pub(super) async fn take_until(&self, deadline: Option<Instant>) -> Result<Option<Vec<Vec<u8>>>> {
        loop {
            let Some(mut claim) = self.claim_next(deadline).await? else { return Ok(None) };
            let item = path::join(&self.path, &claim.item);
            // Without a lock, at the version read: a node another consumer took and someone
            // re-created is not taken by mistake.
            let version = if claim.lock.is_some() { None } else { Some(claim.version) };
            let stale = StaleOnDrop(Some(&self.consumer.stale));
            let taken = match claim.deleted {
                Deleted::Yes => Ok(true),
                Deleted::InDoubt | Deleted::No => claim.delete_item(&item, version).await,
            };
            if taken.is_ok() {
                stale.disarm();
            } else {
                drop(stale);
            }
            let data = std::mem::take(&mut claim.data);
            claim.unlock().await;
            if taken? {
                return decode(&item, &data).map(Some);
            }
        }
    }

    /// Lock-safe consumption (normal mode: a take, then `consumer`).
    pub(super) async fn consume<F, Fut, T, E>(&self, consumer: F) -> Result<std::result::Result<T, E>>
    where
        F: FnOnce(Vec<Vec<u8>>) -> Fut,
        Fut: Future<Output = std::result::Result<T, E>>,
    {
        if self.lock_path.is_none() {
            let items = self.take_until(None).await?.unwrap_or_default();
            return Ok(consumer(items).await);
        }
        let claim = loop {
            if let Some(claim) = self.claim_next(None).await? {
                break claim;
            }
        };
        let item = path::join(&self.path, &claim.item);
        // Until the item is deleted or requeued it is in the queue and not in the listing.
        let stale = StaleOnDrop(Some(&self.consumer.stale));
        let items = match decode(&item, &claim.data) {
            Ok(items) => items,
            Err(e) => {
                // Curator counts a node it cannot read as processed.
                let deleted = claim.delete_item(&item, None).await;
                if deleted.is_ok() {
                    stale.disarm();
                }
                claim.unlock().await;
                deleted?;
                return Err(e);
            }
        };
        let outcome = consumer(items).await;
        let settled = match &outcome {
            Ok(_) => claim.delete_item(&item, None).await.map(drop),
            Err(_) => self.requeue(&claim.item, &claim.data).await,
        };
        if settled.is_ok() {
            stale.disarm();
        }
        claim.unlock().await;
        settled?;
        Ok(outcome)
    }

    /// Removes every item whose name `matches`, without reading it; in lock-safe mode an item
    /// another consumer has locked is left to it. Returns how many this call removed.
    pub(super) async fn remove_matching(&self, matches: impl Fn(&str) -> bool) -> Result<usize> {
        let (names, _) = self.list(false).await?;
        let mut removed = 0;
        for name in names.iter().filter(|n| matches(n)) {
            let item = path::join(&self.path, name);
            let claim = match self.lock(name).await? {
                Some(Ok(claim)) => claim,
                Some(Err(_locked)) => continue,
                None => Claim::empty(&self.framework, name),
            };
            // Item nodes are never written after their create, so version 0 is the one any
            // reader saw (Curator removes at that version too); with the lock, any version.
            let version = if claim.lock.is_some() { None } else { Some(0) };
            let deleted = claim.delete_item(&item, version).await;
            claim.unlock().await;
            if deleted? {
                removed += 1;
            }
        }
        Ok(removed)
    }

    /// The item names in the variant's order.
    pub(super) async fn names(&self) -> Result<Vec<String>> {
        Ok(self.list(false).await?.0)
    }

    /// Deletes `name` and puts its bytes back at the end of its part of the queue, in one
    /// transaction. The new node keeps the old one's name without its sequence (its id,
    /// priority or epoch); Curator's requeue keeps only the id and puts a priority or delay
    /// item back as a plain `queue-` item.
    async fn requeue(&self, name: &str, data: &[u8]) -> Result<()> {
        let item = path::join(&self.path, name);
        let prefix = path::join(&self.path, requeue_name(name));
        let committed = self
            .framework
            .transaction()
            .delete(&item)
            .create(&prefix, data, CreateMode::PersistentSequential)
            .commit()
            .await;
        match committed {
            Ok(_) => Ok(()),
            // Gone already (someone else's lock-less consumer took it).
            Err(Error::TransactionFailed { index: 0, error: ZkError::NoNode, .. }) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// The first node this consumer can claim, waiting for one until `deadline`. It goes
    /// through the handle's kept listing first and lists again (with a new watch) only when
    /// that gives nothing and the queue changed since; it waits on the children watch, on the
    /// lock of the first item another consumer holds, which goes when that consumer finishes
    /// or its session ends (the item may stay), and in a delay queue until the first item not
    /// yet due is due. Concurrent takes of one handle claim one at a time.
    async fn claim_next(&self, deadline: Option<Instant>) -> Result<Option<Claim<'_>>> {
        let mut listing = match deadline {
            None => self.consumer.listing.lock().await,
            Some(deadline) => match tokio::time::timeout_at(deadline, self.consumer.listing.lock()).await {
                Ok(listing) => listing,
                Err(_) => return Ok(None),
            },
        };
        loop {
            let (lock_watch, due_in) = match self.pass(&mut listing).await? {
                Pass::Item(claim) => return Ok(Some(claim)),
                Pass::Refresh => {
                    self.relist(&mut listing).await?;
                    continue;
                }
                Pass::Nothing { lock_watch, due_in } => (lock_watch, due_in),
            };
            listing.check_watch()?;
            if self.consumer.stale.load(Ordering::Relaxed) || listing.watch.is_none() {
                self.relist(&mut listing).await?;
                continue;
            }
            let due = async {
                match due_in {
                    Some(wait) => tokio::time::sleep(wait).await,
                    None => std::future::pending().await,
                }
            };
            let lock = async {
                match lock_watch {
                    Some(lock) => lock.changed().await.map(drop),
                    None => std::future::pending().await,
                }
            };
            let Some(watch) = listing.watch.as_mut() else { continue };
            // `Some(event)`: the children watch fired.
            let changed = async {
                tokio::select! {
                    event = watch => Some(event),
                    _ = lock => None,
                    () = due => None,
                }
            };
            let fired = match deadline {
                None => changed.await,
                Some(deadline) => match tokio::time::timeout_at(deadline, changed).await {
                    Ok(fired) => fired,
                    Err(_) => return Ok(None),
                },
            };
            if let Some(event) = fired {
                listing.watch = None;
                if let Err(Error::Closed) = event {
                    return Err(Error::Closed);
                }
            }
        }
    }

    /// Lists the queue again with a new children watch, in place of the kept listing.
    async fn relist(&self, listing: &mut Listing) -> Result<()> {
        self.consumer.stale.store(false, Ordering::Relaxed);
        let (names, watch) = self.list(true).await?;
        listing.names = names.into();
        // An unfired watch replaced goes after the new one is set (no removeWatches).
        listing.watch = watch.map(|watch| watch.changed().boxed());
        listing.done = 0;
        Ok(())
    }

    /// Whether a refreshing engine is to list again before its next claim: it went through
    /// its number of the listing's items and the queue changed since the listing was made.
    fn refresh_due(&self, listing: &mut Listing) -> Result<bool> {
        match self.refresh_after {
            Some(items) if listing.done >= items => {
                listing.check_watch()?;
                Ok(listing.watch.is_none())
            }
            _ => Ok(false),
        }
    }

    /// Claims the first item of the listing this consumer can, dropping those found gone;
    /// items another consumer has locked and, in a delay queue, items not yet due stay. A
    /// refreshing engine stops when it is to list again.
    async fn pass(&self, listing: &mut Listing) -> Result<Pass<'_>> {
        let mut lock_watch = None;
        let mut due_in = None;
        let now = now_epoch_ms();
        let mut at = 0;
        while at < listing.names.len() {
            if self.refresh_due(listing)? {
                return Ok(Pass::Refresh);
            }
            let name = &listing.names[at];
            if self.order == QueueOrder::Delay {
                // Sorted by epoch: once one is not due, none after it is.
                let epoch = delay_epoch_of(name);
                if epoch > now {
                    due_in = Some(Duration::from_millis(epoch - now));
                    break;
                }
            }
            let name = name.clone();
            match self.claim(&name).await? {
                Claimed::Item(claim) => {
                    listing.names.remove(at);
                    listing.done += 1;
                    return Ok(Pass::Item(claim));
                }
                Claimed::Gone | Claimed::NotAnItem => {
                    listing.names.remove(at);
                    listing.done += 1;
                }
                Claimed::Locked(lock) => {
                    at += 1;
                    if lock_watch.is_none() {
                        match self.framework.exists(&lock).watch().await? {
                            (Some(_), lock) => lock_watch = Some(lock),
                            // Released meanwhile: claim it on the next pass.
                            (None, _) => due_in = Some(Duration::ZERO),
                        }
                    }
                }
            }
        }
        Ok(Pass::Nothing { lock_watch, due_in })
    }

    /// The item names in the variant's order, with a watch on the children when asked; a
    /// missing queue node is made (persistent, as Curator's `start()` makes it).
    async fn list(&self, watch: bool) -> Result<(Vec<String>, Option<OneshotWatch>)> {
        let fw = &self.framework;
        loop {
            let listed = if watch {
                fw.get_children(&self.path).watch().await.map(|(names, _, w)| (names, Some(w)))
            } else {
                fw.get_children(&self.path).await.map(|names| (names, None))
            };
            match listed {
                Ok((mut names, watch)) => {
                    names.retain(|n| n.starts_with(QUEUE_ITEM_NAME));
                    self.order.sort(&mut names);
                    return Ok((names, watch));
                }
                Err(Error::ZooKeeper(ZkError::NoNode)) => ensure_persistent(fw, &self.path).await?,
                Err(e) => return Err(e),
            }
        }
    }

    /// In lock-safe mode, creates the lock node of `name`: `Some(Ok(claim))` with the lock,
    /// `Some(Err(lock path))` when another consumer holds it; `None` in normal mode.
    async fn lock(&self, name: &str) -> Result<Option<std::result::Result<Claim<'_>, String>>> {
        let fw = &self.framework;
        let Some(lock_path) = &self.lock_path else { return Ok(None) };
        let lock = path::join(lock_path, name);
        // Curator's consumers create their lock nodes without parents and read a missing lock
        // path as "another consumer has the item", skipping it for good; its `start()` makes
        // the lock path persistent once. So this consumer keeps the lock path persistent too:
        // a container made here would be reaped by the server as soon as it is empty, under a
        // Curator consumer that found it existing at its start, and that consumer would never
        // take an item again.
        // The node's data says which create made it (Curator's consumers never read a lock
        // node's data): the background delete below deletes only this create's node.
        let token = uuid::Uuid::new_v4().simple().to_string().into_bytes();
        let create = || fw.create(&lock).plain().mode(CreateMode::Ephemeral).data(&token).parents(Parents::MustExist);
        // Armed before the create is sent: a take cancelled before the create's reply leaves
        // no lock node behind (one would keep every consumer from the item for the session's
        // life). Other consumers create this name too, and so may a later take of this handle,
        // so the node is deleted only if it is this session's and holds this create's data.
        let mut cancelled = CancelledLock { framework: fw, lock: Some((fw.fix_path(&lock), token.clone())) };
        let epoch = fw.epoch();
        let created = match create().await {
            Err(Error::ZooKeeper(ZkError::NoNode)) => {
                ensure_persistent(fw, lock_path).await?;
                create().await
            }
            other => other,
        };
        let mut claim = Claim::empty(fw, name);
        match created {
            Ok(_) => {
                claim.lock = cancelled.lock.take();
                claim.locked_in = epoch;
                Ok(Some(Ok(claim)))
            }
            Err(Error::ZooKeeper(ZkError::NodeExists)) => {
                cancelled.lock = None; // another consumer's (the create finds our own landed one)
                Ok(Some(Err(lock)))
            }
            // The create may have landed (a reply lost): the guard deletes it if it is ours.
            Err(e) => Err(e),
        }
    }

    /// Normal mode: reads the node and, right behind the read on the same connection, deletes
    /// it at version 0, one round trip for both. A queue item is never written after its
    /// create (no Curator or zk-recipes code path sets an item's data), so its version is 0;
    /// the server applies the session's requests in order, so a delete at version 0 that
    /// succeeds removed exactly the node the read before it returned (a sequential name is
    /// never made again). A node written since its create fails the delete with `BadVersion`
    /// and is then deleted at the version read, as a sequential read-then-delete would; a
    /// node gone meanwhile was taken by another consumer. Requests go out in the order they
    /// are made (zookeeper-client sends a request when its method is called), and a failed
    /// connection fails the delete with the read, so the read's answer is lost only with the
    /// delete's; the server may have applied both, so a node the read sent again finds gone
    /// is [`Error::OutcomeUnknown`] (see [`read`](Self::read)). Only a session allowed to
    /// delete but not to read an item (an ACL without READ for it) loses the item, with the
    /// read's `NoAuth` as the error.
    ///
    /// The pair is sent under the framework's retry, as its own operations: a pair that both
    /// failed because their session was over (an expired session still the framework's until
    /// it has opened the next one) was not applied, and is sent again on the next session as
    /// the retry policy and the session failure policy allow.
    async fn read_and_delete(&self, name: &str) -> Result<Claimed<'_>> {
        let fw = &self.framework;
        let item = path::join(&self.path, name);
        let full = &fw.full_path(&item)?;
        let (read, deleted) = fw
            .with_retry(|session| async move {
                session.sent(Op::GetData);
                let read = session.client.get_data(full);
                session.sent(Op::Delete);
                let delete = session.client.delete(full, Some(0));
                match futures::join!(read, delete) {
                    (Err(e), Err(d)) if is_zk_session_lost(&e) && is_zk_session_lost(&d) => Err(e),
                    replies => Ok(replies),
                }
            })
            .await?;
        let claim = |data, version, deleted| Claim::read(fw, name, data, version, deleted);
        match (read, deleted) {
            (Ok((data, stat)), Ok(())) => Ok(Claimed::Item(claim(data, stat.version, Deleted::Yes))),
            // Another consumer deleted it between the two.
            (Ok(_), Err(ZkError::NoNode)) | (Err(ZkError::NoNode), _) => Ok(Claimed::Gone),
            // A node with children is no item, whatever its delete answered (a node written
            // since its create fails the delete at version 0 with `BadVersion` before its
            // children are looked at).
            (Ok((_, stat)), Err(_)) if stat.num_children > 0 => Ok(not_an_item(&item)),
            (Ok((data, stat)), Err(ZkError::BadVersion)) => Ok(Claimed::Item(claim(data, stat.version, Deleted::No))),
            (Ok(_), Err(ZkError::NotEmpty)) => Ok(not_an_item(&item)),
            (Ok((data, stat)), Err(e)) if is_zk_connection_error(&e) => {
                Ok(Claimed::Item(claim(data, stat.version, Deleted::InDoubt)))
            }
            (Ok(_), Err(e)) => Err(Error::ZooKeeper(e)),
            (Err(e), Ok(())) => {
                tracing::warn!(item, error = %e, "queue: an item this session may delete but not read was deleted unread");
                Err(Error::ZooKeeper(e))
            }
            // Neither answered (a connection error fails both): the read again, under the
            // retry policy, and a delete after it. The delete sent may have removed the node.
            (Err(e), Err(d)) if is_zk_connection_error(&e) => self.read(name, is_zk_connection_error(&d)).await,
            (Err(e), Err(_)) => Err(Error::ZooKeeper(e)),
        }
    }

    /// Normal mode after a connection error: the read under the retry policy, the delete
    /// sent by the take after it. When the delete sent with the lost read is `in_doubt`, the
    /// node found gone may be one this consumer deleted without its bytes:
    /// [`Error::OutcomeUnknown`], as for a lost delete of a node read (a node found there is
    /// claimed with its delete in doubt).
    async fn read(&self, name: &str, in_doubt: bool) -> Result<Claimed<'_>> {
        let fw = &self.framework;
        let item = path::join(&self.path, name);
        let deleted = if in_doubt { Deleted::InDoubt } else { Deleted::No };
        let unknown =
            || Error::OutcomeUnknown { operation: "take", path: item.clone(), error: ZkError::ConnectionLoss };
        match fw.get_data(&item).plain().await {
            Ok((_, stat)) if stat.num_children > 0 => Ok(not_an_item(&item)),
            Ok((data, stat)) => Ok(Claimed::Item(Claim::read(fw, name, data, stat.version, deleted))),
            Err(Error::ZooKeeper(ZkError::NoNode)) if in_doubt => Err(unknown()),
            Err(Error::ZooKeeper(ZkError::NoNode)) => Ok(Claimed::Gone),
            Err(e) if in_doubt && e.is_connection_error() => Err(unknown()),
            Err(e) => Err(e),
        }
    }

    /// Claims one node: in lock-safe mode by creating its lock node, then reading it; in
    /// normal mode by reading and deleting it ([`read_and_delete`](Self::read_and_delete)).
    async fn claim(&self, name: &str) -> Result<Claimed<'_>> {
        let fw = &self.framework;
        let mut claim = match self.lock(name).await? {
            Some(Ok(claim)) => claim,
            Some(Err(lock)) => return Ok(Claimed::Locked(lock)),
            None => return self.read_and_delete(name).await,
        };
        let item = path::join(&self.path, name);
        match fw.get_data(&item).plain().await {
            Ok((_, stat)) if stat.num_children > 0 => {
                claim.unlock().await;
                Ok(not_an_item(&item))
            }
            Ok((data, stat)) => {
                claim.data = data;
                claim.version = stat.version;
                Ok(Claimed::Item(claim))
            }
            Err(Error::ZooKeeper(ZkError::NoNode)) => {
                claim.unlock().await;
                Ok(Claimed::Gone)
            }
            Err(e) => Err(e),
        }
    }

    /// The stream of [`take_until(None)`](Self::take_until)s. A take that failed with
    /// `SessionExpired` is followed by a wait for the framework's next session: until then
    /// every take would fail so (under `SessionFailurePolicy::Fail` at once, otherwise once
    /// the retry policy gave up).
    pub(super) fn stream(&self) -> QueueStream {
        let items = futures::stream::unfold((self.clone(), None), |(engine, expired)| async move {
            if let Some(epoch) = expired {
                engine.session_after(epoch).await;
            }
            // The session the take starts on: a `SessionExpired` is this one's or a later
            // one's, so the wait for a session after it never outlasts the next session.
            let epoch = engine.framework.epoch();
            match engine.take_until(None).await {
                Err(Error::Closed) => None,
                Err(e @ Error::ZooKeeper(ZkError::SessionExpired)) => Some((Err(e), (engine, Some(epoch)))),
                taken => Some((taken.map(Option::unwrap_or_default), (engine, None))),
            }
        });
        QueueStream { inner: Box::pin(items) }
    }

    /// Waits until the framework runs on a session after `epoch`, or is closed.
    async fn session_after(&self, epoch: u64) {
        let fw = &self.framework;
        let mut states = fw.state_watch();
        let _ = states.wait_for(|s| s.epoch != epoch || fw.is_closed()).await;
    }
}

/// A queue's items as a [`Stream`]: each element is one node's items, taken as
/// `take()` takes them (at most once: the node is deleted before it is yielded; lock-safe
/// queues lock it first, so an item another consumer is working on is never taken). Errors
/// are yielded and the stream goes on; it ends when the framework is closed.
///
/// A take rides through a new session as the framework's own operations do, under its retry
/// policy and session failure policy. When it fails with `SessionExpired` all the same (under
/// [`SessionFailurePolicy::Fail`](crate::SessionFailurePolicy::Fail), or when the retry policy
/// gave up before the framework had its next session), that error is yielded and the stream
/// waits for the framework's next session before its next take, rather than yield the same
/// error for every item it had listed.
///
/// Returned by `stream()` of [`DistributedQueue`](crate::DistributedQueue) and its id,
/// priority and delay variants. For at-least-once delivery, use their `consume`.
///
/// # Cancel safety
/// Dropping the stream, or a `next()` on it, while a take is in flight may have removed a
/// node whose items are then lost, as a cancelled `take()`.
#[must_use = "a stream does nothing unless polled"]
pub struct QueueStream {
    inner: BoxStream<'static, Result<Vec<Vec<u8>>>>,
}

impl fmt::Debug for QueueStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("QueueStream").finish_non_exhaustive()
    }
}

impl Stream for QueueStream {
    type Item = Result<Vec<Vec<u8>>>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.inner.as_mut().poll_next(cx)
    }
}

/// The items of the node at `item`, or [`Error::CorruptData`].
fn decode(item: &str, data: &[u8]) -> Result<Vec<Vec<u8>>> {
    decode_queue_items(data).map_err(|e| Error::CorruptData {
        path: item.to_owned(),
        expected: QUEUE_ITEM_EXPECTED,
        reason: e.found,
    })
}

/// The name a requeued item is created under: its old name without the sequence ZooKeeper
/// appended (`queue-` for a name that does not end in one).
fn requeue_name(name: &str) -> &str {
    match path::sequence(name) {
        Some(_) if name.len() >= QUEUE_ITEM_NAME.len() + 10 => &name[..name.len() - 10],
        _ => QUEUE_ITEM_NAME,
    }
}

/// Makes `path` a persistent node (its missing parents containers) unless it exists, as
/// Curator's `DistributedQueue.start()` makes the queue and lock paths.
async fn ensure_persistent(fw: &Framework, path: &str) -> Result<()> {
    match fw.create(path).plain().await {
        Ok(_) | Err(Error::ZooKeeper(ZkError::NodeExists)) | Err(Error::OutcomeUnknown { .. }) => Ok(()),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requeued_items_keep_their_variant_name() {
        assert_eq!(requeue_name("queue-0000000003"), "queue-");
        assert_eq!(requeue_name("queue-|job|0000000003"), "queue-|job|");
        assert_eq!(requeue_name("queue-1000000050000000003"), "queue-100000005");
        assert_eq!(requeue_name("queue-|18BCFE5687B|0000000007"), "queue-|18BCFE5687B|");
        assert_eq!(requeue_name("queue-foreign"), "queue-");
    }
}
