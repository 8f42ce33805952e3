//! `DistributedQueue`: Curator's queue of framed items (`queue-<sequence>` nodes), at most once
//! by default, at least once in lock-safe mode.

use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;
use zookeeper_client::CreateMode;

use super::delete_taken;
use crate::error::{Error, Result, ZkError};
use crate::framework::{Framework, OneshotWatch, Parents, ReaperCmd};
use crate::path;
use crate::protocol::values::{decode_queue_items, encode_queue_items, QUEUE_ITEM_EXPECTED};
use crate::protocol::QUEUE_ITEM_NAME;

/// A queue compatible with Curator's `DistributedQueue` (same nodes, same item framing:
/// [`protocol::values::encode_queue_items`](crate::protocol::values::encode_queue_items)):
/// Rust and Java producers and consumers share it.
///
/// Each [`put`](Self::put) is one persistent sequential node `<path>/queue-<sequence>` holding
/// one item, each [`put_multi`](Self::put_multi) one node holding several; a take returns the
/// items of one node, in name order.
///
/// - **Normal mode** ([`new`](Self::new)): at most once, as Curator's. A consumer reads the
///   node and deletes it at the version it read before returning its items, so two
///   consumers never get the same node, and a consumer that dies after the delete loses it.
/// - **Lock-safe mode** ([`lock_safe`](Self::lock_safe), Curator's `QueueBuilder.lockPath`):
///   at least once. [`consume`](Self::consume) first creates the ephemeral lock node
///   `<lock path>/<item name>`, runs the consumer, and only then deletes the item (or, when
///   the consumer fails, deletes it and puts it back at the end of the queue in one
///   transaction, Curator's `ErrorMode.REQUEUE`). A consumer that dies mid-item loses its lock
///   node with its session, and the item is delivered again. Every consumer of the queue must
///   use the same lock path; a normal-mode consumer ignores the locks.
///
/// Curator's own warning applies: ZooKeeper is no message broker. Keep the queue short (every
/// item is a node in every server's memory) and the items small (a node is at most the
/// server's `jute.maxbuffer`, 1 MiB by default, and so is a listing of the queue's children).
#[derive(Debug, Clone)]
pub struct DistributedQueue {
    framework: Framework,
    path: String,
    item_prefix: String,
    lock_path: Option<String>,
}

/// An item claimed by this consumer: its node's name, bytes and version, and in lock-safe
/// mode its lock node (full path), deleted in the background if the claim is dropped.
struct Claim<'a> {
    framework: &'a Framework,
    item: String,
    data: Vec<u8>,
    version: i32,
    lock: Option<String>,
}

impl Drop for Claim<'_> {
    fn drop(&mut self) {
        if let Some(lock) = self.lock.take() {
            let inner = &self.framework;
            let epoch = inner.epoch();
            if epoch != 0 {
                inner.reap(ReaperCmd::Delete { path: lock, epoch });
            }
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
}

impl Claim<'_> {
    /// Deletes the lock node now (the background delete of `Drop` is the fallback).
    async fn unlock(mut self) {
        if let Some(lock) = self.lock.take() {
            let user_path = self.framework.unfix_path(&lock).to_owned();
            if let Err(e) = self.framework.delete(&user_path).guaranteed().await {
                if !e.is_no_node() {
                    tracing::debug!(lock = %user_path, error = %e, "queue: lock node left to the reaper");
                }
            }
        }
    }
}

impl DistributedQueue {
    /// A normal-mode queue at `path`. Does no I/O.
    ///
    /// # Errors
    /// [`Error::InvalidPath`] for an invalid path, the root or a path under `/zookeeper`.
    pub fn new(framework: &Framework, path: &str) -> Result<Self> {
        path::validate_recipe_path(path)?;
        let item_prefix = path::join(path, QUEUE_ITEM_NAME);
        Ok(DistributedQueue { framework: framework.clone(), path: path.to_owned(), item_prefix, lock_path: None })
    }

    /// A lock-safe queue at `path` whose consumers lock items under `lock_path`. Does no I/O.
    ///
    /// # Errors
    /// [`Error::InvalidPath`] for an invalid queue or lock path.
    pub fn lock_safe(framework: &Framework, path: &str, lock_path: &str) -> Result<Self> {
        path::validate_recipe_path(lock_path)?;
        let mut queue = Self::new(framework, path)?;
        queue.lock_path = Some(lock_path.to_owned());
        Ok(queue)
    }

    /// The queue's path.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// Adds one item (Curator's `put`, a one-item node); returns the node's path.
    ///
    /// # Errors
    /// [`Error::TooLarge`] for an item over the request limit (nothing is sent);
    /// [`Error::OutcomeUnknown`] when the connection broke while the create was in flight (it
    /// is not sent again: that could add the item twice); the server's refusal; a connection
    /// error the retry policy gave up on.
    ///
    /// # Cancel safety
    /// A cancelled put may still add the item.
    pub async fn put(&self, item: &[u8]) -> Result<String> {
        self.put_node(&encode_queue_items(&[item])).await
    }

    /// Adds several items as one node (Curator's `putMulti`): a consumer gets them together.
    ///
    /// # Errors
    /// As [`put`](Self::put); [`Error::InvalidArgument`] for no items.
    ///
    /// # Cancel safety
    /// A cancelled put may still add the items.
    pub async fn put_multi<I: AsRef<[u8]>>(&self, items: &[I]) -> Result<String> {
        if items.is_empty() {
            return Err(Error::invalid_argument("items", "a multi-item put needs at least one item"));
        }
        self.put_node(&encode_queue_items(items)).await
    }

    async fn put_node(&self, data: &[u8]) -> Result<String> {
        let fw = &self.framework;
        let create = || {
            fw.create(&self.item_prefix).mode(CreateMode::PersistentSequential).parents(Parents::MustExist).data(data)
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

    /// Removes the first node and returns its items, waiting for one. In lock-safe mode the
    /// node is locked first, so an item another consumer is working on is never taken.
    ///
    /// # Errors
    /// [`Error::CorruptData`] for a node that is not in the item framing (it is deleted, as
    /// Curator's consumers delete it); [`Error::OutcomeUnknown`] when the delete broke
    /// mid-flight and the node then was gone (this consumer or another took it; its items are
    /// not returned); [`Error::Closed`]; the server's refusal; a connection error the retry
    /// policy gave up on.
    ///
    /// # Cancel safety
    /// A cancelled take may have removed a node, whose items are then lost.
    pub async fn take(&self) -> Result<Vec<Vec<u8>>> {
        self.take_until(None).await.map(Option::unwrap_or_default)
    }

    /// [`take`](Self::take) for at most `timeout`; `None` when the time ran out.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a zero timeout; otherwise as [`take`](Self::take).
    ///
    /// # Cancel safety
    /// As [`take`](Self::take).
    pub async fn take_timeout(&self, timeout: Duration) -> Result<Option<Vec<Vec<u8>>>> {
        if timeout.is_zero() {
            return Err(Error::invalid_argument("timeout", "must be greater than zero"));
        }
        self.take_until(Some(Instant::now() + timeout)).await
    }

    async fn take_until(&self, deadline: Option<Instant>) -> Result<Option<Vec<Vec<u8>>>> {
        loop {
            let Some(mut claim) = self.claim_next(deadline).await? else { return Ok(None) };
            let item = path::join(&self.path, &claim.item);
            // Without a lock, at the version read: a node another consumer took and someone
            // re-created is not taken by mistake.
            let version = if claim.lock.is_some() { None } else { Some(claim.version) };
            let taken = delete_taken(&self.framework, &item, version).await;
            let data = std::mem::take(&mut claim.data);
            claim.unlock().await;
            if taken? {
                return self.decode(&item, &data).map(Some);
            }
        }
    }

    fn decode(&self, item: &str, data: &[u8]) -> Result<Vec<Vec<u8>>> {
        decode_queue_items(data).map_err(|e| Error::CorruptData {
            path: item.to_owned(),
            expected: QUEUE_ITEM_EXPECTED,
            reason: e.found,
        })
    }

    /// Lock-safe consumption (at least once): waits for a node, locks it, runs `consumer` on
    /// its items, then deletes the node when the consumer returns `Ok`, or puts the items back
    /// at the end of the queue (one transaction: delete and create) when it returns `Err`.
    /// Returns what the consumer returned. On a normal-mode queue the node is deleted before
    /// the consumer runs (at most once).
    ///
    /// # Errors
    /// As [`take`](Self::take) (outside the consumer's own result).
    ///
    /// # Cancel safety
    /// Lock-safe mode: a cancelled consume leaves the node in the queue (its lock is deleted
    /// in the background), so it is delivered again. Normal mode: as [`take`](Self::take).
    pub async fn consume<F, Fut, T, E>(&self, consumer: F) -> Result<std::result::Result<T, E>>
    where
        F: FnOnce(Vec<Vec<u8>>) -> Fut,
        Fut: Future<Output = std::result::Result<T, E>>,
    {
        if self.lock_path.is_none() {
            let items = self.take().await?;
            return Ok(consumer(items).await);
        }
        let claim = loop {
            if let Some(claim) = self.claim_next(None).await? {
                break claim;
            }
        };
        let item = path::join(&self.path, &claim.item);
        let items = match self.decode(&item, &claim.data) {
            Ok(items) => items,
            Err(e) => {
                // Curator counts a node it cannot read as processed.
                let deleted = delete_taken(&self.framework, &item, None).await;
                claim.unlock().await;
                deleted?;
                return Err(e);
            }
        };
        let outcome = consumer(items).await;
        let settled = match &outcome {
            Ok(_) => delete_taken(&self.framework, &item, None).await.map(drop),
            Err(_) => self.requeue(&item, &claim.data).await,
        };
        claim.unlock().await;
        settled?;
        Ok(outcome)
    }

    /// Deletes `item` and puts its bytes back at the end of the queue, in one transaction.
    async fn requeue(&self, item: &str, data: &[u8]) -> Result<()> {
        let committed = self
            .framework
            .transaction()
            .delete(item, -1)
            .create(&self.item_prefix, data, CreateMode::PersistentSequential)
            .commit()
            .await;
        match committed {
            Ok(_) => Ok(()),
            // Gone already (someone else's lock-less consumer took it).
            Err(Error::TransactionFailed { index: 0, error: ZkError::NoNode, .. }) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// The first node this consumer can claim, waiting for one until `deadline`. Besides the
    /// queue's children, it watches the lock of the first item another consumer holds, which
    /// goes when that consumer finishes or its session ends (the item may stay).
    async fn claim_next(&self, deadline: Option<Instant>) -> Result<Option<Claim<'_>>> {
        loop {
            let (names, watch) = self.list().await?;
            let mut lock_watch = None;
            for name in names {
                match self.claim(&name).await? {
                    Claimed::Item(claim) => return Ok(Some(claim)),
                    Claimed::Gone => {}
                    Claimed::Locked(lock) if lock_watch.is_none() => {
                        match self.framework.exists(&lock).watch().await? {
                            (Some(_), lock) => lock_watch = Some(lock),
                            // Released meanwhile: look again at once.
                            (None, _) => lock_watch = None,
                        }
                    }
                    Claimed::Locked(_) => {}
                }
            }
            let changed = async {
                match lock_watch {
                    None => watch.changed().await,
                    Some(lock) => tokio::select! {
                        event = watch.changed() => event,
                        event = lock.changed() => event,
                    },
                }
            };
            let event = match deadline {
                None => changed.await,
                Some(deadline) => match tokio::time::timeout_at(deadline, changed).await {
                    Ok(event) => event,
                    Err(_) => return Ok(None),
                },
            };
            if let Err(Error::Closed) = event {
                return Err(Error::Closed);
            }
        }
    }

    /// The item names in Curator's order (plain string order), with a watch on the children;
    /// a missing queue node is made (persistent, as Curator's `start()` makes it).
    async fn list(&self) -> Result<(Vec<String>, OneshotWatch)> {
        let fw = &self.framework;
        loop {
            match fw.get_children(&self.path).watch().await {
                Ok((mut names, _, watch)) => {
                    names.retain(|n| n.starts_with(QUEUE_ITEM_NAME));
                    names.sort();
                    return Ok((names, watch));
                }
                Err(Error::ZooKeeper(ZkError::NoNode)) => ensure_persistent(fw, &self.path).await?,
                Err(e) => return Err(e),
            }
        }
    }

    /// Claims one node: in lock-safe mode by creating its lock node; then reads it.
    async fn claim(&self, name: &str) -> Result<Claimed<'_>> {
        let fw = &self.framework;
        let mut claim = Claim { framework: fw, item: name.to_owned(), data: Vec::new(), version: 0, lock: None };
        if let Some(lock_path) = &self.lock_path {
            let lock = path::join(lock_path, name);
            // Curator's consumers create their lock nodes without parents and read a missing
            // lock path as "another consumer has the item", skipping it for good; its
            // `start()` makes the lock path persistent once. So this consumer keeps the lock
            // path persistent too: a container made here would be reaped by the server as
            // soon as it is empty, under a Curator consumer that found it existing at its
            // start, and that consumer would never take an item again.
            let create = || fw.create(&lock).mode(CreateMode::Ephemeral).parents(Parents::MustExist);
            let created = match create().await {
                Err(Error::ZooKeeper(ZkError::NoNode)) => {
                    ensure_persistent(fw, lock_path).await?;
                    create().await
                }
                other => other,
            };
            match created {
                Ok(_) => claim.lock = Some(fw.fix_path(&lock)),
                Err(Error::ZooKeeper(ZkError::NodeExists)) => return Ok(Claimed::Locked(lock)),
                Err(e) => return Err(e),
            }
        }
        match fw.get_data(&path::join(&self.path, name)).await {
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
}

/// Makes `path` a persistent node (its missing parents containers) unless it exists, as
/// Curator's `DistributedQueue.start()` makes the queue and lock paths.
async fn ensure_persistent(fw: &Framework, path: &str) -> Result<()> {
    match fw.create(path).await {
        Ok(_) | Err(Error::ZooKeeper(ZkError::NodeExists)) | Err(Error::OutcomeUnknown { .. }) => Ok(()),
        Err(e) => Err(e),
    }
}
