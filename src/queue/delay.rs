//! `DistributedDelayQueue`: a `DistributedQueue` whose items carry the time they are due
//! (`queue-|<epoch ms>|<sequence>` nodes), none taken before it.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::engine::{Engine, QueueStream};
use super::puts::{Producers, PutEvents};
use crate::deadline;
use crate::error::{Error, Result};
use crate::framework::Framework;
use crate::protocol::queue_names::{delay_name, QueueOrder};

/// A queue compatible with Curator's `DistributedDelayQueue`: each item is a
/// `DistributedQueue` node (same item framing) named `queue-|<epoch>|<sequence>`, the epoch
/// being the time it is due in milliseconds since the Unix epoch, in upper-case hex
/// ([`delay_code`](crate::protocol::queue_names::delay_code)), so Rust and Java producers and
/// consumers share it.
///
/// A consumer takes no item before it is due, and the due items earliest first. A waiting
/// take wakes when the first item comes due (or the queue changes). As Curator's consumer, it
/// takes the due items of its last listing before it lists again, so an item put after that
/// listing is seen once none of the listed items is due. "Due" is judged by the
/// **consumer's** wall clock, as Curator judges it: clocks of producers and consumers that
/// disagree move items earlier or later by the difference.
///
/// A due time in the past is accepted and the item is due at once (Curator accepts it too),
/// taken before items due later. A time at or before the Unix epoch, which Curator refuses
/// (`delayUntilEpoch > 0`), or past what its Java `long` holds, is refused with
/// [`Error::InvalidArgument`] before anything is sent.
///
/// Normal and lock-safe mode are [`DistributedQueue`](crate::DistributedQueue)'s. A failed
/// lock-safe item is put back with its due time (past, so due at once); Curator's requeue
/// puts it back as a plain `queue-` item, which it reads as due at once too. Curator's warning
/// about queues in ZooKeeper applies (see [`DistributedQueue`](crate::DistributedQueue)).
///
/// ```no_run
/// # async fn example(fw: zk_recipes::Framework) -> zk_recipes::Result<()> {
/// use std::time::{Duration, SystemTime};
/// use zk_recipes::DistributedDelayQueue;
///
/// let queue = DistributedDelayQueue::new(&fw, "/jobs/delayed")?;
/// queue.put(b"retry upload", SystemTime::now() + Duration::from_secs(30)).await?;
/// let due = queue.take().await?; // in about 30 s
/// assert_eq!(due, [b"retry upload".to_vec()]);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct DistributedDelayQueue {
    engine: Engine,
    producers: Arc<Producers>,
}

/// The item name of `until`, or the reason it has none.
fn code_of(until: SystemTime) -> Result<String> {
    let refuse = |reason: &str| Error::invalid_argument("until", reason.to_owned());
    let ms = until.duration_since(UNIX_EPOCH).map_err(|_| refuse("a due time before the Unix epoch"))?.as_millis();
    if ms == 0 {
        return Err(refuse("a due time at the Unix epoch (Curator requires an epoch above 0)"));
    }
    let ms = i64::try_from(ms).map_err(|_| refuse("a due time past what a Java long holds in milliseconds"))?;
    Ok(delay_name(ms as u64))
}

impl DistributedDelayQueue {
    /// A normal-mode delay queue at `path`. Does no I/O.
    ///
    /// # Errors
    /// [`Error::InvalidPath`] for an invalid path, the root or a path under `/zookeeper`.
    pub fn new(framework: &Framework, path: &str) -> Result<Self> {
        let engine = Engine::new(framework, path, None, QueueOrder::Delay)?;
        Ok(DistributedDelayQueue { engine, producers: Producers::new() })
    }

    /// A lock-safe delay queue at `path` whose consumers lock items under `lock_path`. Does
    /// no I/O.
    ///
    /// # Errors
    /// [`Error::InvalidPath`] for an invalid queue or lock path.
    pub fn lock_safe(framework: &Framework, path: &str, lock_path: &str) -> Result<Self> {
        let engine = Engine::new(framework, path, Some(lock_path), QueueOrder::Delay)?;
        Ok(DistributedDelayQueue { engine, producers: Producers::new() })
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
        Ok(DistributedDelayQueue { producers: self.producers.with_max_items(max_items)?, engine: self.engine })
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

    /// Adds one item due at `until` (Curator's `put(item, delayUntilEpoch)`); returns the
    /// node's path. Under [`with_max_items`](Self::with_max_items) it first waits for room.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a time at or before the Unix epoch or beyond a Java
    /// `long` of milliseconds (nothing is sent); otherwise as
    /// [`DistributedQueue::put`](crate::DistributedQueue::put).
    ///
    /// # Cancel safety
    /// A cancelled put may still add the item.
    pub async fn put(&self, item: &[u8], until: SystemTime) -> Result<String> {
        self.producers.put(&self.engine, &code_of(until)?, &[item]).await
    }

    /// [`put`](Self::put), waiting at most `timeout` for room under
    /// [`with_max_items`](Self::with_max_items) (Curator's `put(item, delayUntilEpoch,
    /// maxWait, unit)`); `None` when the queue was still full (nothing was put).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a zero timeout; otherwise as [`put`](Self::put).
    ///
    /// # Cancel safety
    /// As [`put`](Self::put).
    pub async fn put_timeout(&self, item: &[u8], until: SystemTime, timeout: Duration) -> Result<Option<String>> {
        let (name, deadline) = (code_of(until)?, deadline::of_wait(timeout)?);
        self.producers.put_until(&self.engine, &name, &[item], deadline).await
    }

    /// Puts `items` as one node due at `until` in a task of its own and returns at once
    /// (Curator's default background puts); the outcome is told to
    /// [`put_events`](Self::put_events) readers.
    ///
    /// [`flush_puts`](Self::flush_puts) waits for the puts still pending.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for no items, a due time [`put`](Self::put) refuses, or a
    /// call outside a Tokio runtime.
    pub fn put_in_background<I: AsRef<[u8]>>(&self, items: &[I], until: SystemTime) -> Result<()> {
        self.producers.put_in_background(&self.engine, code_of(until)?, items)
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

    /// Adds several items as one node due at `until` (Curator's `putMulti(items,
    /// delayUntilEpoch)`): a consumer gets them together.
    ///
    /// # Errors
    /// As [`put`](Self::put); [`Error::InvalidArgument`] for no items.
    ///
    /// # Cancel safety
    /// A cancelled put may still add the items.
    pub async fn put_multi<I: AsRef<[u8]>>(&self, items: &[I], until: SystemTime) -> Result<String> {
        self.producers.put(&self.engine, &code_of(until)?, items).await
    }

    /// Removes the earliest due node and returns its items, waiting until one is due; as
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

    /// [`take`](Self::take) for at most `timeout`; `None` when the time ran out (an item not
    /// due by then stays).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a zero timeout; otherwise as [`take`](Self::take).
    ///
    /// # Cancel safety
    /// As [`take`](Self::take).
    pub async fn take_timeout(&self, timeout: Duration) -> Result<Option<Vec<Vec<u8>>>> {
        self.engine.take_until(Some(deadline::of_wait(timeout)?)).await
    }

    /// Lock-safe consumption (at least once) of the earliest due node, as
    /// [`DistributedQueue::consume`](crate::DistributedQueue::consume).
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

    /// The queue's nodes as a stream of takes, each when it is due (see [`QueueStream`]).
    /// Does no I/O until polled.
    pub fn stream(&self) -> QueueStream {
        self.engine.stream()
    }
}
