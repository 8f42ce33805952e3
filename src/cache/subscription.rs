//! One subscriber of a cache (a stream, or a listener's task): a bounded queue of events.
//!
//! A subscriber that falls more than its capacity behind is not allowed to grow the process's
//! memory without limit: its queue is dropped, and what it missed is counted. Its next item is
//! then [`CacheEvent::Lagged`], carrying the whole cache as of that moment (taken under the
//! cache's lock, so it is consistent with every event that follows), as
//! `tokio::sync::broadcast` tells a receiver that lagged, and then goes on from there.

use std::collections::VecDeque;
use std::sync::{Arc, Weak};
use std::task::{Context, Poll, Waker};

use super::node::CacheEvent;
use crate::sync::Mutex;

/// What the cache and one subscriber share.
pub(crate) struct Subscriber<T> {
    state: Mutex<Queue<T>>,
    capacity: usize,
}

struct Queue<T> {
    events: VecDeque<CacheEvent<T>>,
    /// The queue overflowed: events since then are only counted.
    lagged: bool,
    missed: u64,
    /// The cache closed: the stream ends once the queue is empty.
    closed: bool,
    /// The receiving end is gone.
    dropped: bool,
    waker: Option<Waker>,
}

impl<T> Subscriber<T> {
    pub(crate) fn new(capacity: usize) -> Arc<Self> {
        let queue =
            Queue { events: VecDeque::new(), lagged: false, missed: 0, closed: false, dropped: false, waker: None };
        Arc::new(Subscriber { state: Mutex::new(queue), capacity })
    }

    /// Queues `events` (called under the cache's lock); false once the receiver is gone.
    pub(crate) fn send(&self, events: &[CacheEvent<T>]) -> bool {
        let mut queue = self.state.lock();
        if queue.dropped {
            return false;
        }
        if queue.lagged {
            queue.missed += events.len() as u64;
        } else if queue.events.len() + events.len() > self.capacity {
            queue.missed = (queue.events.len() + events.len()) as u64;
            queue.events.clear();
            queue.lagged = true;
        } else {
            queue.events.extend(events.iter().cloned());
        }
        if let Some(waker) = queue.waker.take() {
            waker.wake();
        }
        true
    }

    /// Queues the events a new subscriber starts with, whatever the capacity.
    pub(crate) fn prime(&self, events: Vec<CacheEvent<T>>) {
        self.state.lock().events.extend(events);
    }

    /// What the subscriber missed since it lagged (clearing the lag), under the cache's lock;
    /// `None` when it did not lag.
    pub(crate) fn take_lag(&self) -> Option<u64> {
        let mut queue = self.state.lock();
        let lagged = std::mem::take(&mut queue.lagged);
        lagged.then(|| std::mem::take(&mut queue.missed))
    }

    /// The cache closed.
    pub(crate) fn close(&self) {
        let mut queue = self.state.lock();
        queue.closed = true;
        if let Some(waker) = queue.waker.take() {
            waker.wake();
        }
    }
}

/// What a lagging subscriber catches up from: the cache's state, under its lock.
pub(crate) trait CatchUp<T>: Send + Sync {
    /// The event for a subscriber that lagged: the whole cache now (`None` once the cache is
    /// closed, or when the subscriber did not lag after all).
    fn catch_up(&self, subscriber: &Subscriber<T>) -> Option<CacheEvent<T>>;
}

/// The receiving end (see the module docs).
pub(crate) struct Receiver<T> {
    subscriber: Arc<Subscriber<T>>,
    cache: Weak<dyn CatchUp<T>>,
}

impl<T> Receiver<T> {
    pub(crate) fn new(subscriber: Arc<Subscriber<T>>, cache: Weak<dyn CatchUp<T>>) -> Self {
        Receiver { subscriber, cache }
    }

    /// Events queued and not taken yet.
    pub(crate) fn len(&self) -> usize {
        self.subscriber.state.lock().events.len()
    }

    pub(crate) fn poll_recv(&mut self, cx: &mut Context<'_>) -> Poll<Option<CacheEvent<T>>> {
        {
            let mut queue = self.subscriber.state.lock();
            if let Some(event) = queue.events.pop_front() {
                return Poll::Ready(Some(event));
            }
            if !queue.lagged {
                if queue.closed {
                    return Poll::Ready(None);
                }
                queue.waker = Some(cx.waker().clone());
                return Poll::Pending;
            }
        }
        // Lagged: the cache as it is now, under its lock (no event is queued meanwhile).
        let Some(cache) = self.cache.upgrade() else { return Poll::Ready(None) };
        Poll::Ready(cache.catch_up(&self.subscriber))
    }

    pub(crate) async fn recv(&mut self) -> Option<CacheEvent<T>> {
        std::future::poll_fn(|cx| self.poll_recv(cx)).await
    }
}

impl<T> Drop for Receiver<T> {
    fn drop(&mut self) {
        let mut queue = self.subscriber.state.lock();
        queue.dropped = true;
        queue.events.clear();
    }
}
