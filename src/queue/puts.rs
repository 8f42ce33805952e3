//! What a distributed queue's producers share besides the engine (every variant: plain, id,
//! priority, delay): the item limit (Curator's `maxItems`), put events (Curator's
//! `QueuePutListener`), background puts and their flush (Curator's `flushPuts`).

use std::fmt;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures::stream::BoxStream;
use futures::{Stream, StreamExt};
use tokio::sync::{broadcast, watch};
use tokio::time::Instant;

use super::engine::Engine;
use crate::error::{Error, Result, ZkError};
use crate::framework::Framework;

/// How many put events a slow [`PutEvents`] reader may fall behind before it misses some.
const EVENT_CAPACITY: usize = 256;

/// A background put that completed, successfully or not (Curator's
/// `QueuePutListener.putCompleted` and `putMultiCompleted`, which only hear of successes).
#[derive(Debug, Clone)]
pub struct PutEvent {
    items: Arc<Vec<Vec<u8>>>,
    outcome: std::result::Result<String, Arc<Error>>,
}

impl PutEvent {
    /// The items put (one node's).
    pub fn items(&self) -> &[Vec<u8>] {
        &self.items
    }

    /// The node's path when the put succeeded.
    pub fn path(&self) -> Option<&str> {
        self.outcome.as_ref().ok().map(String::as_str)
    }

    /// Why the put failed (the item may have been added all the same when this is
    /// [`Error::OutcomeUnknown`]).
    pub fn error(&self) -> Option<&Error> {
        self.outcome.as_ref().err().map(Arc::as_ref)
    }
}

/// The background puts of a queue handle and its clones as they complete (see
/// [`DistributedQueue::put_events`](crate::DistributedQueue::put_events)). A reader more
/// than 256 events behind misses the oldest (logged), and goes on with the next.
pub struct PutEvents {
    inner: BoxStream<'static, PutEvent>,
}

impl fmt::Debug for PutEvents {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PutEvents").finish_non_exhaustive()
    }
}

impl Stream for PutEvents {
    type Item = PutEvent;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<PutEvent>> {
        self.inner.poll_next_unpin(cx)
    }
}

/// The producer side shared by a queue handle's clones.
#[derive(Debug)]
pub(super) struct Producers {
    pub(super) max_items: Option<usize>,
    events: broadcast::Sender<PutEvent>,
    /// How many background puts have not yet told their outcome.
    pending: Arc<watch::Sender<usize>>,
}

/// One background put counted in [`Producers::pending`] until it is dropped: when the put's
/// task ends, also when its runtime drops it unfinished.
struct PendingPut(Arc<watch::Sender<usize>>);

impl PendingPut {
    fn start(pending: &Arc<watch::Sender<usize>>) -> Self {
        pending.send_modify(|n| *n += 1);
        PendingPut(Arc::clone(pending))
    }
}

impl Drop for PendingPut {
    fn drop(&mut self) {
        self.0.send_modify(|n| *n -= 1);
    }
}

impl Producers {
    pub(super) fn new() -> Arc<Self> {
        Arc::new(Producers {
            max_items: None,
            events: broadcast::channel(EVENT_CAPACITY).0,
            pending: Arc::new(watch::Sender::new(0)),
        })
    }

    /// The same producers (their put events and pending puts shared) under an item limit.
    pub(super) fn with_max_items(&self, max_items: usize) -> Result<Arc<Self>> {
        if max_items == 0 {
            return Err(Error::invalid_argument("max_items", "a queue must hold at least one item"));
        }
        Ok(Arc::new(Producers {
            max_items: Some(max_items),
            events: self.events.clone(),
            pending: Arc::clone(&self.pending),
        }))
    }

    /// Waits for room under the item limit (at once without one), until `deadline`; false
    /// when the queue was still full then.
    async fn room(&self, engine: &Engine, deadline: Option<Instant>) -> Result<bool> {
        match self.max_items {
            None => Ok(true),
            Some(max) => room_below(engine.framework(), engine.path(), max, deadline).await,
        }
    }

    /// Puts `items` as one node named `name` once there is room, in the foreground.
    pub(super) async fn put<I: AsRef<[u8]>>(&self, engine: &Engine, name: &str, items: &[I]) -> Result<String> {
        self.room(engine, None).await?;
        engine.put(name, items).await
    }

    /// As [`put`](Self::put), waiting for room until `deadline` only: `None` when the queue
    /// was still full (nothing was put).
    pub(super) async fn put_until<I: AsRef<[u8]>>(
        &self,
        engine: &Engine,
        name: &str,
        items: &[I],
        deadline: Instant,
    ) -> Result<Option<String>> {
        if !self.room(engine, Some(deadline)).await? {
            return Ok(None);
        }
        engine.put(name, items).await.map(Some)
    }

    /// Puts `items` as one node named `name` in a task of its own (after waiting for room)
    /// and returns at once; the outcome goes to the put events.
    pub(super) fn put_in_background<I: AsRef<[u8]>>(
        self: &Arc<Self>,
        engine: &Engine,
        name: String,
        items: &[I],
    ) -> Result<()> {
        if items.is_empty() {
            return Err(Error::invalid_argument("items", "a multi-item put needs at least one item"));
        }
        let runtime = crate::runtime::current("put_in_background")?;
        let items: Vec<Vec<u8>> = items.iter().map(|i| i.as_ref().to_vec()).collect();
        let (producers, engine) = (Arc::clone(self), engine.clone());
        // Counted before this returns, so that a flush called next waits for it.
        let pending = PendingPut::start(&self.pending);
        runtime.spawn(async move {
            let outcome = producers.put(&engine, &name, &items).await;
            producers.publish(items, outcome);
            drop(pending);
        });
        Ok(())
    }

    /// Waits until no background put is pending (each has told its outcome), until
    /// `deadline`; false when some still were then.
    pub(super) async fn flush(&self, deadline: Instant) -> bool {
        let mut pending = self.pending.subscribe();
        let flushed = tokio::time::timeout_at(deadline, pending.wait_for(|n| *n == 0)).await;
        // The sender lives in `self`: the wait ends only with the count at 0 or the time.
        matches!(flushed, Ok(Ok(_)))
    }

    pub(super) fn publish(&self, items: Vec<Vec<u8>>, outcome: Result<String>) {
        let outcome = outcome.map_err(Arc::new);
        // No reader is no error.
        let _ = self.events.send(PutEvent { items: Arc::new(items), outcome });
    }

    pub(super) fn events(&self) -> PutEvents {
        let receiver = self.events.subscribe();
        let stream = futures::stream::unfold(receiver, |mut receiver| async move {
            loop {
                match receiver.recv().await {
                    Ok(event) => return Some((event, receiver)),
                    Err(broadcast::error::RecvError::Lagged(missed)) => {
                        tracing::warn!(missed, "queue put events: a slow reader missed some");
                    }
                    Err(broadcast::error::RecvError::Closed) => return None,
                }
            }
        });
        PutEvents { inner: stream.boxed() }
    }
}

/// Waits until the queue at `path` has fewer than `max` children, until `deadline`; false
/// when it is still full then. A missing queue node counts as empty.
async fn room_below(fw: &Framework, path: &str, max: usize, deadline: Option<Instant>) -> Result<bool> {
    loop {
        let (count, watch) = match fw.get_children(path).watch().await {
            Ok((children, _, watch)) => (children.len(), watch),
            Err(Error::ZooKeeper(ZkError::NoNode)) => return Ok(true),
            Err(e) => return Err(e),
        };
        if count < max {
            return Ok(true);
        }
        let event = match deadline {
            None => watch.changed().await,
            Some(deadline) => match tokio::time::timeout_at(deadline, watch.changed()).await {
                Ok(event) => event,
                Err(_) => return Ok(false),
            },
        };
        if let Err(Error::Closed) = event {
            return Err(Error::Closed);
        }
    }
}
