//! `DistributedPriorityQueue`: a `DistributedQueue` whose items carry a priority
//! (`queue-<priority code><sequence>` nodes), lowest priority number first.

use std::future::Future;
use std::time::Duration;

use super::engine::{Engine, QueueStream};
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
/// the queue, as Curator's consumer decides it: a consumer lists once, takes the listed items
/// in priority order, and lists again when they are used up. So an item put after a listing
/// is taken after that listing's items even if it sorts first; it takes its place at the next
/// listing. A queue handle keeps its listing between its takes, streams and clones.
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
}

impl DistributedPriorityQueue {
    /// A normal-mode priority queue at `path`. Does no I/O.
    ///
    /// # Errors
    /// [`Error::InvalidPath`](crate::Error::InvalidPath) for an invalid path, the root or a
    /// path under `/zookeeper`.
    pub fn new(framework: &Framework, path: &str) -> Result<Self> {
        Ok(DistributedPriorityQueue { engine: Engine::new(framework, path, None, QueueOrder::Priority)? })
    }

    /// A lock-safe priority queue at `path` whose consumers lock items under `lock_path`.
    /// Does no I/O.
    ///
    /// # Errors
    /// [`Error::InvalidPath`](crate::Error::InvalidPath) for an invalid queue or lock path.
    pub fn lock_safe(framework: &Framework, path: &str, lock_path: &str) -> Result<Self> {
        Ok(DistributedPriorityQueue { engine: Engine::new(framework, path, Some(lock_path), QueueOrder::Priority)? })
    }

    /// The queue's path.
    pub fn path(&self) -> &str {
        self.engine.path()
    }

    /// Adds one item at `priority` (Curator's `put(item, priority)`); returns the node's path.
    ///
    /// # Errors
    /// As [`DistributedQueue::put`](crate::DistributedQueue::put).
    ///
    /// # Cancel safety
    /// A cancelled put may still add the item.
    pub async fn put(&self, item: &[u8], priority: i32) -> Result<String> {
        self.engine.put(&priority_name(priority), &[item]).await
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
        self.engine.put(&priority_name(priority), items).await
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
        self.engine.consume(consumer).await
    }

    /// The queue's nodes as a stream of takes, lowest priority first (see [`QueueStream`]).
    /// Does no I/O until polled.
    pub fn stream(&self) -> QueueStream {
        self.engine.stream()
    }
}
