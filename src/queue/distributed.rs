//! `DistributedQueue`: Curator's queue of framed items (`queue-<sequence>` nodes), at most once
//! by default, at least once in lock-safe mode.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::engine::{Engine, QueueStream};
use super::puts::{Producers, PutEvents};
use crate::deadline;
use crate::error::Result;
use crate::framework::Framework;
use crate::protocol::queue_names::QueueOrder;
use crate::protocol::QUEUE_ITEM_NAME;

/// A queue compatible with Curator's `DistributedQueue` (same nodes, same item framing:
/// [`protocol::values::encode_queue_items`](crate::protocol::values::encode_queue_items)):
/// Rust and Java producers and consumers share it.
///
/// Each [`put`](Self::put) is one persistent sequential node `<path>/queue-<sequence>` holding
/// one item, each [`put_multi`](Self::put_multi) one node holding several; a take returns the
/// items of one node, in name order. As Curator's consumer, a queue handle lists the queue
/// once, takes the listed nodes one after another, and lists again when they are used up and
/// the queue changed since; nodes another consumer took meanwhile are skipped. A node under an
/// item's name that has children of its own (made by hand, or a sharder's shard) cannot be
/// deleted, so it is no item: consumers pass over it and leave it (Curator's consumer fails on
/// its delete, logs it and goes on to the next).
///
/// - **Normal mode** ([`new`](Self::new)): at most once, as Curator's. A consumer reads the
///   node and deletes it at the version it read before returning its items (the delete,
///   at version 0, goes out right behind the read: an item is never written after its
///   create), so two consumers never get the same node, and a consumer that dies after the
///   delete loses it.
/// - **Lock-safe mode** ([`lock_safe`](Self::lock_safe), Curator's `QueueBuilder.lockPath`):
///   at least once. [`consume`](Self::consume) first creates the ephemeral lock node
///   `<lock path>/<item name>`, runs the consumer, and only then deletes the item (or, when
///   the consumer fails, deletes it and puts it back at the end of the queue in one
///   transaction, Curator's `ErrorMode.REQUEUE`). A consumer that dies mid-item loses its lock
///   node with its session, and the item is delivered again. A consumer whose session ends
///   mid-item and who goes on deletes its lock node only if it is still its own (another
///   consumer may hold the item's lock by then). Every consumer of the queue must use the
///   same lock path; a normal-mode consumer ignores the locks.
///
/// Consumers: [`take`](Self::take), [`take_timeout`](Self::take_timeout),
/// [`consume`](Self::consume), or a [`stream`](Self::stream) of takes.
///
/// # Curator's warning, and the limits
///
/// Curator's documentation says it for every queue it offers: do not use ZooKeeper as a queue.
/// ZooKeeper is no message broker: every item is a node held in the memory of every server,
/// and a server with many or large nodes starts slowly. Two limits follow from the server's
/// `jute.maxbuffer` (1 MiB by default), measured on ZooKeeper 3.8 with this crate's defaults:
///
/// - **Item size.** A node's data, so a queue node's items with their framing (10 bytes for one
///   item, 5 more per further item), must fit one request: the largest single item a default
///   server took was **1,048,461 bytes** for a 57-byte node path (the 1,048,575-byte request
///   limit less the path, the ACL, the create's own 24 bytes and the 10 bytes of framing). A
///   larger one is refused with [`Error::TooLarge`](crate::Error::TooLarge) before anything is
///   sent.
/// - **Queue length.** A consumer's listing holds all the queue's children, each costing its
///   name and 4 bytes in the reply (a consumer lists again once it has gone through its last
///   listing, not per take). The server sends a listing of any size, and this crate's client reads
///   it (measured up to 100,000 `queue-<seq>` items: 2 MB of names, listed in 0.2 s, a take in
///   0.8 s on a loaded machine). A Java client refuses a reply over its own `jute.maxbuffer`
///   (1 MiB by default): a Curator 5.4 client listed 52,000 `queue-<seq>` items and at 53,000
///   fell into a loop of `SUSPENDED`/`RECONNECTED` without ever answering. So a queue shared
///   with Curator consumers must stay under about 52,000 items, fewer with the longer id,
///   priority (25 bytes) and delay (29 bytes) names (about 36,000 and 31,000).
///
/// Keep queues short and items small: [`with_max_items`](Self::with_max_items) bounds a
/// queue (Curator's `maxItems`), and a [`QueueSharder`](crate::QueueSharder) spreads one
/// logical queue over several.
#[derive(Debug, Clone)]
pub struct DistributedQueue {
    engine: Engine,
    producers: Arc<Producers>,
}

impl DistributedQueue {
    /// A normal-mode queue at `path`. Does no I/O.
    ///
    /// # Errors
    /// [`Error::InvalidPath`](crate::Error::InvalidPath) for an invalid path, the root or a path under `/zookeeper`.
    pub fn new(framework: &Framework, path: &str) -> Result<Self> {
        Ok(DistributedQueue {
            engine: Engine::new(framework, path, None, QueueOrder::Fifo)?,
            producers: Producers::new(),
        })
    }

    /// A lock-safe queue at `path` whose consumers lock items under `lock_path`. Does no I/O.
    ///
    /// # Errors
    /// [`Error::InvalidPath`](crate::Error::InvalidPath) for an invalid queue or lock path.
    pub fn lock_safe(framework: &Framework, path: &str, lock_path: &str) -> Result<Self> {
        Ok(DistributedQueue {
            engine: Engine::new(framework, path, Some(lock_path), QueueOrder::Fifo)?,
            producers: Producers::new(),
        })
    }

    /// This queue with puts that wait while the queue's node has `max_items` children or more
    /// (Curator's `QueueBuilder.maxItems`; the count is the server's, of every producer's
    /// items, and a put that finds room goes ahead, so concurrent producers can overshoot by
    /// their number). Shares the put events and the background puts a
    /// [`flush_puts`](Self::flush_puts) waits for with the handle it was made from.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) for 0.
    pub fn with_max_items(self, max_items: usize) -> Result<Self> {
        Ok(DistributedQueue { producers: self.producers.with_max_items(max_items)?, engine: self.engine })
    }

    /// The item limit, if one was set.
    pub fn max_items(&self) -> Option<usize> {
        self.producers.max_items
    }

    /// The queue's path.
    pub fn path(&self) -> &str {
        self.engine.path()
    }

    /// Adds one item (Curator's `put`, a one-item node); returns the node's path. Under
    /// [`with_max_items`](Self::with_max_items) it first waits for room.
    ///
    /// # Errors
    /// [`Error::TooLarge`](crate::Error::TooLarge) for an item over the request limit (nothing is sent);
    /// [`Error::OutcomeUnknown`](crate::Error::OutcomeUnknown) when the connection broke while the create was in flight (it
    /// is not sent again: that could add the item twice); the server's refusal; a connection
    /// error the retry policy gave up on.
    ///
    /// # Cancel safety
    /// A cancelled put may still add the item.
    pub async fn put(&self, item: &[u8]) -> Result<String> {
        self.producers.put(&self.engine, QUEUE_ITEM_NAME, &[item]).await
    }

    /// [`put`](Self::put), waiting at most `timeout` for room under
    /// [`with_max_items`](Self::with_max_items) (Curator's `put(item, maxWait, unit)`); `None`
    /// when the queue was still full (nothing was put).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) for a zero timeout; otherwise as [`put`](Self::put).
    ///
    /// # Cancel safety
    /// As [`put`](Self::put).
    pub async fn put_timeout(&self, item: &[u8], timeout: Duration) -> Result<Option<String>> {
        let deadline = deadline::of_wait(timeout)?;
        self.producers.put_until(&self.engine, QUEUE_ITEM_NAME, &[item], deadline).await
    }

    /// Puts `items` as one node in a task of its own and returns at once (Curator's default
    /// background puts): the outcome is told to [`put_events`](Self::put_events) readers.
    /// The put waits for room under [`with_max_items`](Self::with_max_items).
    ///
    /// [`flush_puts`](Self::flush_puts) waits for the puts still pending.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) for no items, or outside a Tokio runtime.
    pub fn put_in_background<I: AsRef<[u8]>>(&self, items: &[I]) -> Result<()> {
        self.producers.put_in_background(&self.engine, QUEUE_ITEM_NAME.to_owned(), items)
    }

    /// Waits until no background put of this handle and its clones is pending (Curator's
    /// `flushPuts(waitTime, unit)`): true once each has told its outcome to the
    /// [`put_events`](Self::put_events), false when some were still pending after `timeout`.
    /// A put that failed is done too (Curator's flush goes on waiting for one: it counts only
    /// successes), so the events tell which failed. Puts made while it waits are waited for.
    ///
    /// A queue handle has no `close()` (Curator's `close()` flushes for its `finalFlushTime`,
    /// 5 s by default): the background puts still pending when the framework is closed fail
    /// with [`Error::Closed`](crate::Error::Closed), told as their events, and their items are
    /// not put (an item whose create was already sent may be). Flush before closing it.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) for a zero timeout.
    ///
    /// # Cancel safety
    /// Cancel-safe: it only waits; the puts go on.
    pub async fn flush_puts(&self, timeout: Duration) -> Result<bool> {
        Ok(self.producers.flush(deadline::of_wait(timeout)?).await)
    }

    /// [`flush_puts`](Self::flush_puts) until `deadline`.
    pub(super) async fn flush_puts_until(&self, deadline: Instant) -> bool {
        self.producers.flush(deadline).await
    }

    /// The outcome of every background put of this handle and its clones, as they complete
    /// (Curator's `getPutListenerContainer()`): only those that complete after this call.
    pub fn put_events(&self) -> PutEvents {
        self.producers.events()
    }

    /// Adds several items as one node (Curator's `putMulti`): a consumer gets them together.
    ///
    /// # Errors
    /// As [`put`](Self::put); [`Error::InvalidArgument`](crate::Error::InvalidArgument) for no items.
    ///
    /// # Cancel safety
    /// A cancelled put may still add the items.
    pub async fn put_multi<I: AsRef<[u8]>>(&self, items: &[I]) -> Result<String> {
        self.producers.put(&self.engine, QUEUE_ITEM_NAME, items).await
    }

    /// Removes the first node and returns its items, waiting for one. In lock-safe mode the
    /// node is locked first, so an item another consumer is working on is never taken.
    ///
    /// # Errors
    /// [`Error::CorruptData`](crate::Error::CorruptData) for a node that is not in the item framing (it is deleted, as
    /// Curator's consumers delete it); [`Error::OutcomeUnknown`](crate::Error::OutcomeUnknown) when the delete broke
    /// mid-flight and the node then was gone (this consumer or another took it; its items are
    /// not returned), in normal mode also when the read sent with the delete broke with it;
    /// [`Error::Closed`](crate::Error::Closed); the server's refusal; a connection error the retry policy gave up on.
    /// In lock-safe mode no other consumer can take a node while this one's lock on it stands,
    /// so there a node found gone after a broken delete is this delete's and its items are
    /// returned, unless the session changed since the lock was made.
    ///
    /// # Cancel safety
    /// A cancelled take may have removed a node, whose items are then lost.
    pub async fn take(&self) -> Result<Vec<Vec<u8>>> {
        self.engine.take_until(None).await.map(Option::unwrap_or_default)
    }

    /// [`take`](Self::take) for at most `timeout`; `None` when the time ran out.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) for a zero timeout; otherwise as [`take`](Self::take).
    ///
    /// # Cancel safety
    /// As [`take`](Self::take).
    pub async fn take_timeout(&self, timeout: Duration) -> Result<Option<Vec<Vec<u8>>>> {
        self.engine.take_until(Some(deadline::of_wait(timeout)?)).await
    }

    /// Lock-safe consumption (at least once): waits for a node, locks it, runs `consumer` on
    /// its items, then deletes the node when the consumer returns `Ok`, or puts the items back
    /// at the end of the queue (one transaction: delete and create) when it returns `Err`.
    /// Returns what the consumer returned. On a normal-mode queue the node is deleted before
    /// the consumer runs (at most once).
    ///
    /// # Errors
    /// As [`take`](Self::take) (outside the consumer's own result). In lock-safe mode the
    /// consumer's result is returned once the node is deleted, also when the delete broke
    /// mid-flight and then found the node gone while this consumer's lock stood; only when the
    /// session changed while the consumer ran is that [`Error::OutcomeUnknown`](crate::Error::OutcomeUnknown).
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

    /// The queue's nodes as a stream of takes (see [`QueueStream`]): each element is one
    /// node's items, in queue order, taken as [`take`](Self::take) takes them. Does no I/O
    /// until polled.
    pub fn stream(&self) -> QueueStream {
        self.engine.stream()
    }
}
