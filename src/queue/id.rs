//! `DistributedIdQueue`: a `DistributedQueue` whose items carry an id (`queue-|<id>|<sequence>`
//! nodes), taken in FIFO order and removable by id.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use super::engine::{Engine, QueueStream};
use super::puts::{Producers, PutEvents};
use crate::deadline;
use crate::error::{Error, Result};
use crate::framework::Framework;
use crate::protocol::queue_names::{id_name, id_of, QueueOrder, SEPARATOR};

/// A queue compatible with Curator's `DistributedIdQueue`: each item is a `DistributedQueue`
/// node (same item framing) named `queue-|<id>|<sequence>`
/// ([`protocol::queue_names`](crate::protocol::queue_names)), so Rust and Java producers and
/// consumers share it. Items are taken in the order they were put, whatever their ids, and
/// [`remove`](Self::remove) deletes every item with an id.
///
/// Normal and lock-safe mode are [`DistributedQueue`](crate::DistributedQueue)'s; a requeued
/// item keeps its id, as Curator's.
///
/// Ids: Curator refuses an empty id, and writes `/` and `|` in an id as `_`, after which
/// `remove` can never find the item by the id it was put with. Here both are refused
/// ([`Error::InvalidArgument`]) before anything is sent. Curator's warning about queues in
/// ZooKeeper applies (see [`DistributedQueue`](crate::DistributedQueue)).
///
/// ```no_run
/// # async fn example(fw: zk_recipes::Framework) -> zk_recipes::Result<()> {
/// use zk_recipes::DistributedIdQueue;
///
/// let queue = DistributedIdQueue::new(&fw, "/jobs/by-id")?;
/// queue.put(b"resize image 7", "job-7").await?;
/// queue.put(b"resize image 8", "job-8").await?;
/// assert_eq!(queue.remove("job-7").await?, 1);
/// assert_eq!(queue.take().await?, [b"resize image 8".to_vec()]);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct DistributedIdQueue {
    engine: Engine,
    producers: Arc<Producers>,
}

/// Refuses an id Curator would refuse or rewrite.
fn check_id(id: &str) -> Result<()> {
    if id.is_empty() {
        return Err(Error::invalid_argument("id", "an id cannot be empty"));
    }
    if id.contains(['/', SEPARATOR]) {
        return Err(Error::invalid_argument("id", "an id cannot contain `/` or `|` (Curator writes them as `_`)"));
    }
    Ok(())
}

impl DistributedIdQueue {
    /// A normal-mode id queue at `path`. Does no I/O.
    ///
    /// # Errors
    /// [`Error::InvalidPath`] for an invalid path, the root, a path under `/zookeeper`, or a
    /// path containing `|` (Curator refuses it too: the separator of the ids).
    pub fn new(framework: &Framework, path: &str) -> Result<Self> {
        Self::build(framework, path, None)
    }

    /// A lock-safe id queue at `path` whose consumers lock items under `lock_path`. Does no
    /// I/O.
    ///
    /// # Errors
    /// As [`new`](Self::new); [`Error::InvalidPath`] for an invalid lock path.
    pub fn lock_safe(framework: &Framework, path: &str, lock_path: &str) -> Result<Self> {
        Self::build(framework, path, Some(lock_path))
    }

    fn build(framework: &Framework, path: &str, lock_path: Option<&str>) -> Result<Self> {
        if path.contains(SEPARATOR) {
            return Err(Error::InvalidPath { path: path.to_owned(), reason: "an id queue's path cannot contain `|`" });
        }
        let engine = Engine::new(framework, path, lock_path, QueueOrder::Id)?;
        Ok(DistributedIdQueue { engine, producers: Producers::new() })
    }

    /// The queue's path.
    pub fn path(&self) -> &str {
        self.engine.path()
    }

    /// This queue with puts that wait while it holds `max_items` nodes or more (Curator's
    /// `QueueBuilder.maxItems`), as [`DistributedQueue::with_max_items`](crate::DistributedQueue::with_max_items).
    /// Shares the put events and the background puts a flush waits for with the handle it
    /// was made from.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for 0.
    pub fn with_max_items(self, max_items: usize) -> Result<Self> {
        Ok(DistributedIdQueue { producers: self.producers.with_max_items(max_items)?, engine: self.engine })
    }

    /// The item limit, if one was set.
    pub fn max_items(&self) -> Option<usize> {
        self.producers.max_items
    }

    /// The outcome of every background put of this handle and its clones, as they complete
    /// (Curator's `getPutListenerContainer()`): only those that complete after this call.
    pub fn put_events(&self) -> PutEvents {
        self.producers.events()
    }

    /// Adds one item with `id` (Curator's `put(item, itemId)`); returns the node's path.
    /// Several items may share an id. Under [`with_max_items`](Self::with_max_items) it first
    /// waits for room.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for an empty id or one containing `/` or `|` (nothing is
    /// sent); otherwise as [`DistributedQueue::put`](crate::DistributedQueue::put).
    ///
    /// # Cancel safety
    /// A cancelled put may still add the item.
    pub async fn put(&self, item: &[u8], id: &str) -> Result<String> {
        check_id(id)?;
        self.producers.put(&self.engine, &id_name(id), &[item]).await
    }

    /// [`put`](Self::put), waiting at most `timeout` for room under
    /// [`with_max_items`](Self::with_max_items) (Curator's `put(item, itemId, maxWait,
    /// unit)`); `None` when the queue was still full (nothing was put).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a zero timeout; otherwise as [`put`](Self::put).
    ///
    /// # Cancel safety
    /// As [`put`](Self::put).
    pub async fn put_timeout(&self, item: &[u8], id: &str, timeout: Duration) -> Result<Option<String>> {
        check_id(id)?;
        let deadline = deadline::of_wait(timeout)?;
        self.producers.put_until(&self.engine, &id_name(id), &[item], deadline).await
    }

    /// Puts `item` with `id` in a task of its own and returns at once (Curator's default
    /// background puts); the outcome is told to [`put_events`](Self::put_events) readers.
    ///
    /// [`flush_puts`](Self::flush_puts) waits for the puts still pending.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for an id [`put`](Self::put) refuses, or a call outside a
    /// Tokio runtime.
    pub fn put_in_background(&self, item: &[u8], id: &str) -> Result<()> {
        check_id(id)?;
        self.producers.put_in_background(&self.engine, id_name(id), &[item])
    }

    /// Waits until no background put of this handle and its clones is pending (Curator's
    /// `flushPuts(waitTime, unit)`): true once each has told its outcome to the
    /// [`put_events`](Self::put_events), false when some were still pending after `timeout`;
    /// as [`DistributedQueue::flush_puts`](crate::DistributedQueue::flush_puts), which also
    /// says what closing the framework does to pending puts.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) for a zero timeout.
    ///
    /// # Cancel safety
    /// Cancel-safe: it only waits; the puts go on.
    pub async fn flush_puts(&self, timeout: Duration) -> Result<bool> {
        Ok(self.producers.flush(deadline::of_wait(timeout)?).await)
    }

    /// Removes every item with `id` that no consumer has locked (Curator's `remove`); returns
    /// how many this call removed. Their items are not returned.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for an id [`put`](Self::put) refuses (no item can have it);
    /// [`Error::OutcomeUnknown`] when a delete broke mid-flight and the item then was gone;
    /// the server's refusal; a connection error the retry policy gave up on.
    ///
    /// # Cancel safety
    /// A cancelled remove may have removed some of the items.
    pub async fn remove(&self, id: &str) -> Result<usize> {
        check_id(id)?;
        self.engine.remove_matching(|name| id_of(name) == Some(id)).await
    }

    /// The ids of the items in the queue, in queue order (an item whose name carries no id,
    /// written by a plain `DistributedQueue` producer, is left out).
    ///
    /// # Errors
    /// The server's refusal; a connection error the retry policy gave up on.
    ///
    /// # Cancel safety
    /// Cancel-safe: a read changes nothing (a missing queue node is made, as by a take).
    pub async fn ids(&self) -> Result<Vec<String>> {
        let names = self.engine.names().await?;
        Ok(names.iter().filter_map(|n| id_of(n)).map(str::to_owned).collect())
    }

    /// Removes the first item and returns its node's items, waiting for one; as
    /// [`DistributedQueue::take`](crate::DistributedQueue::take).
    ///
    /// # Errors
    /// As [`DistributedQueue::take`](crate::DistributedQueue::take).
    ///
    /// # Cancel safety
    /// A cancelled take may have removed a node, whose items are then lost.
    pub async fn take(&self) -> Result<Vec<Vec<u8>>> {
        self.engine.take_until(None).await.map(Option::unwrap_or_default)
    }

    /// [`take`](Self::take) for at most `timeout`; `None` when the time ran out.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a zero timeout; otherwise as [`take`](Self::take).
    ///
    /// # Cancel safety
    /// As [`take`](Self::take).
    pub async fn take_timeout(&self, timeout: Duration) -> Result<Option<Vec<Vec<u8>>>> {
        self.engine.take_until(Some(deadline::of_wait(timeout)?)).await
    }

    /// Lock-safe consumption (at least once), as
    /// [`DistributedQueue::consume`](crate::DistributedQueue::consume); a failed item is put
    /// back with its id.
    ///
    /// # Errors
    /// As [`DistributedQueue::consume`](crate::DistributedQueue::consume).
    ///
    /// # Cancel safety
    /// Lock-safe mode: a cancelled consume leaves the node in the queue (its lock is deleted
    /// in the background), so it is delivered again. Normal mode: as [`take`](Self::take).
    pub async fn consume<F, Fut, T, E>(&self, consumer: F) -> Result<std::result::Result<T, E>>
    where
        F: FnOnce(Vec<Vec<u8>>) -> Fut,
        Fut: Future<Output = std::result::Result<T, E>>,
    {
        self.engine.consume(consumer).await
    }

    /// The queue's nodes as a stream of takes (see [`QueueStream`]). Does no I/O until
    /// polled.
    pub fn stream(&self) -> QueueStream {
        self.engine.stream()
    }
}
