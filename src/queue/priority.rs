//! `DistributedPriorityQueue`: a `DistributedQueue` whose items carry a priority
//! (`queue-<priority code><sequence>` nodes), lowest priority number first.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use super::engine::{Engine, QueueStream};
use super::puts::{Producers, PutEvents};
use crate::deadline;
use crate::error::Result;
use crate::framework::Framework;
use crate::protocol::queue_names::{priority_name, QueueOrder};

/// A queue compatible with Curator's `DistributedPriorityQueue`: each item is a
/// `DistributedQueue` node (same item framing) named `queue-<P><sequence>`, `P` being
/// [`priority_code`](crate::protocol::queue_names::priority_code), so Rust and Java producers
/// and consumers share it.
///
/// Consumers take the item with the **lowest** priority number first (negative before
/// positive, as Curator's string order of the codes gives), items of one priority in the
/// order they were put. The priority is an `i32`, as Curator's Java `int`: every value has a
/// code, so no priority is out of range. The order is decided on the consumer's listing of
/// the queue: a consumer lists once and takes the listed items in priority order. A queue
/// handle keeps its listing between its takes, streams and clones. When it lists again is set
/// per handle:
///
/// - By default ([`new`](Self::new), [`lock_safe`](Self::lock_safe)) when the listing is
///   used up, as Curator's `buildPriorityQueue(Integer.MAX_VALUE)`: a take costs a read and a
///   delete, and an item put after a listing is taken after that listing's items even if it
///   sorts first.
/// - With [`with_min_items_before_refresh(n)`](Self::with_min_items_before_refresh), as
///   Curator's `buildPriorityQueue(n)`: once `n` items of the listing were taken (or found
///   taken by another consumer), the consumer lists again before its next take if the queue
///   changed since the listing. An item put after a listing is then taken after at most `n`
///   more of the listed items. The consumer's own deletes change the queue too, so on a queue
///   that holds a backlog that is one listing per `n` takes (per take for 1; with 0 the
///   consumer lists before every take, and on a queue that changes faster than a listing's
///   round trip it may list again and again before it takes one, as Curator's would): choose
///   `n` as the number of items an urgent one may wait behind.
///
/// Normal and lock-safe mode are [`DistributedQueue`](crate::DistributedQueue)'s. A failed
/// lock-safe item is put back **with its priority** here; Curator's requeue puts it back as a
/// plain `queue-` item, whose name sorts among the negative priorities. Curator's warning
/// about queues in ZooKeeper applies (see [`DistributedQueue`](crate::DistributedQueue)).
///
/// ```no_run
/// # async fn example(fw: zk_recipes::Framework) -> zk_recipes::Result<()> {
/// use zk_recipes::DistributedPriorityQueue;
///
/// let queue = DistributedPriorityQueue::new(&fw, "/jobs/by-priority")?;
/// queue.put(b"later", 10).await?;
/// queue.put(b"urgent", -5).await?;
/// assert_eq!(queue.take().await?, [b"urgent".to_vec()]);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct DistributedPriorityQueue {
    engine: Engine,
    producers: Arc<Producers>,
}

impl DistributedPriorityQueue {
    /// A normal-mode priority queue at `path`. Does no I/O.
    ///
    /// # Errors
    /// [`Error::InvalidPath`](crate::Error::InvalidPath) for an invalid path, the root or a
    /// path under `/zookeeper`.
    pub fn new(framework: &Framework, path: &str) -> Result<Self> {
        let engine = Engine::new(framework, path, None, QueueOrder::Priority)?;
        Ok(DistributedPriorityQueue { engine, producers: Producers::new() })
    }

    /// A lock-safe priority queue at `path` whose consumers lock items under `lock_path`.
    /// Does no I/O.
    ///
    /// # Errors
    /// [`Error::InvalidPath`](crate::Error::InvalidPath) for an invalid queue or lock path.
    pub fn lock_safe(framework: &Framework, path: &str, lock_path: &str) -> Result<Self> {
        let engine = Engine::new(framework, path, Some(lock_path), QueueOrder::Priority)?;
        Ok(DistributedPriorityQueue { engine, producers: Producers::new() })
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
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) for 0.
    pub fn with_max_items(self, max_items: usize) -> Result<Self> {
        Ok(DistributedPriorityQueue { producers: self.producers.with_max_items(max_items)?, engine: self.engine })
    }

    /// The item limit, if one was set.
    pub fn max_items(&self) -> Option<usize> {
        self.producers.max_items
    }

    /// This queue with consumers that list it again, once `items` items of their listing
    /// were taken, whenever it changed since that listing (Curator's
    /// `buildPriorityQueue(minItemsBeforeRefresh)`; see the type's documentation): an item put
    /// with a lower priority number than those listed is taken after at most `items` more of
    /// them. Shares the listing, the put events and the background puts a flush waits for
    /// with the handle it was made from. Does no I/O.
    pub fn with_min_items_before_refresh(self, items: usize) -> Self {
        DistributedPriorityQueue { engine: self.engine.refreshing_after(items), producers: self.producers }
    }

    /// Adds one item at `priority` (Curator's `put(item, priority)`); returns the node's path.
    /// Under [`with_max_items`](Self::with_max_items) it first waits for room.
    ///
    /// # Errors
    /// As [`DistributedQueue::put`](crate::DistributedQueue::put).
    ///
    /// # Cancel safety
    /// A cancelled put may still add the item.
    pub async fn put(&self, item: &[u8], priority: i32) -> Result<String> {
        self.producers.put(&self.engine, &priority_name(priority), &[item]).await
    }

    /// [`put`](Self::put), waiting at most `timeout` for room under
    /// [`with_max_items`](Self::with_max_items) (Curator's `put(item, priority, maxWait,
    /// unit)`); `None` when the queue was still full (nothing was put).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) for a zero timeout; otherwise
    /// as [`put`](Self::put).
    ///
    /// # Cancel safety
    /// As [`put`](Self::put).
    pub async fn put_timeout(&self, item: &[u8], priority: i32, timeout: Duration) -> Result<Option<String>> {
        let deadline = deadline::of_wait(timeout)?;
        self.producers.put_until(&self.engine, &priority_name(priority), &[item], deadline).await
    }

    /// Puts `items` as one node at `priority` in a task of its own and returns at once
    /// (Curator's default background puts); the outcome is told to
    /// [`put_events`](Self::put_events) readers.
    ///
    /// [`flush_puts`](Self::flush_puts) waits for the puts still pending.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) for no items, or outside a
    /// Tokio runtime.
    pub fn put_in_background<I: AsRef<[u8]>>(&self, items: &[I], priority: i32) -> Result<()> {
        self.producers.put_in_background(&self.engine, priority_name(priority), items)
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

    /// The outcome of every background put of this handle and its clones, as they complete
    /// (Curator's `getPutListenerContainer()`): only those that complete after this call.
    pub fn put_events(&self) -> PutEvents {
        self.producers.events()
    }

    /// Adds several items as one node at `priority` (Curator's `putMulti(items, priority)`):
    /// a consumer gets them together.
    ///
    /// # Errors
    /// As [`put`](Self::put); [`Error::InvalidArgument`](crate::Error::InvalidArgument) for
    /// no items.
    ///
    /// # Cancel safety
    /// A cancelled put may still add the items.
    pub async fn put_multi<I: AsRef<[u8]>>(&self, items: &[I], priority: i32) -> Result<String> {
        self.producers.put(&self.engine, &priority_name(priority), items).await
    }

    /// Removes the node with the lowest priority and returns its items, waiting for one; as
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
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) for a zero timeout; otherwise
    /// as [`take`](Self::take).
    ///
    /// # Cancel safety
    /// As [`take`](Self::take).
    pub async fn take_timeout(&self, timeout: Duration) -> Result<Option<Vec<Vec<u8>>>> {
        self.engine.take_until(Some(deadline::of_wait(timeout)?)).await
    }

    /// Lock-safe consumption (at least once), as
    /// [`DistributedQueue::consume`](crate::DistributedQueue::consume); a failed item is put
    /// back at its priority.
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

    /// The queue's nodes as a stream of takes, lowest priority first (see [`QueueStream`]).
    /// Does no I/O until polled.
    pub fn stream(&self) -> QueueStream {
        self.engine.stream()
    }
}
