//! One subscriber of a cache (a stream, or a listener's task): a bounded queue of events.
//!
//! A subscriber that falls more than its capacity behind is not allowed to grow the process's
//! memory without limit: its queue is dropped, and what it missed is counted. Its next item is
//! then [`CacheEvent::Lagged`], carrying the whole cache as of that moment (taken under the
//! cache's lock, so it is consistent with every event that follows), as
//! `tokio::sync::broadcast` tells a receiver that lagged, and then goes on from there (with
//! the cache's one `Initialized` first, when the events dropped held it).

use std::collections::VecDeque;
use std::sync::{Arc, Weak};
use std::task::{Context, Poll, Waker};

use super::node::CacheEvent;
use crate::sync::Mutex;

/// What the cache and one subscriber share.
pub(crate) struct Subscriber<T> {
    state: Mutex<Queue<T>>,
    capacity: usize,
    /// Told when the cache closes (a listener's call in progress is cancelled).
    closing: tokio::sync::Notify,
}

struct Queue<T> {
    events: VecDeque<CacheEvent<T>>,
    /// The queue overflowed: events since then are only counted.
    lagged: bool,
    missed: u64,
    /// The cache closed: the stream ends once the queue is empty.
    closed: bool,
    /// Nothing more is sent (the cache's task ended): the stream ends once the queue is
    /// empty, and a listener's call in progress runs to its end.
    finished: bool,
    /// The receiving end is gone.
    dropped: bool,
    /// An `Initialized` was among the events dropped when the queue overflowed: it follows
    /// the catch-up (it is sent once per cache, and a consumer may wait for it).
    owed_initialized: bool,
    waker: Option<Waker>,
}

impl<T> Subscriber<T> {
    pub(crate) fn new(capacity: usize) -> Arc<Self> {
        let queue = Queue {
            events: VecDeque::new(),
            lagged: false,
            missed: 0,
            closed: false,
            finished: false,
            dropped: false,
            owed_initialized: false,
            waker: None,
        };
        Arc::new(Subscriber { state: Mutex::new(queue), capacity, closing: tokio::sync::Notify::new() })
    }

    /// Queues `events` (called under the cache's lock); false once the receiver is gone.
    pub(crate) fn send(&self, events: &[CacheEvent<T>]) -> bool {
        let mut queue = self.state.lock();
        if queue.dropped {
            return false;
        }
        let initialized = |event: &CacheEvent<T>| matches!(event, CacheEvent::Initialized);
        if queue.lagged {
            queue.missed += events.len() as u64;
            queue.owed_initialized |= events.iter().any(initialized);
        } else if queue.events.len() + events.len() > self.capacity {
            queue.missed = (queue.events.len() + events.len()) as u64;
            let dropped_initialized = queue.events.iter().chain(events).any(initialized);
            queue.owed_initialized |= dropped_initialized;
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
        if lagged && std::mem::take(&mut queue.owed_initialized) {
            // Right after the catch-up: nothing was queued while the subscriber lagged, and
            // what comes next is queued after it (this runs under the cache's lock).
            queue.events.push_back(CacheEvent::Initialized);
        }
        lagged.then(|| std::mem::take(&mut queue.missed))
    }

    /// Nothing more will be sent (the cache's background task ended): the stream ends, and a
    /// listener is called no more, once what is queued has been taken.
    pub(crate) fn finish(&self) {
        let mut queue = self.state.lock();
        queue.finished = true;
        if let Some(waker) = queue.waker.take() {
            waker.wake();
        }
    }

    /// The cache closed: what is queued is dropped (the cache forgets what it held, and a
    /// listener is called no more).
    pub(crate) fn close(&self) {
        let mut queue = self.state.lock();
        queue.closed = true;
        queue.events.clear();
        queue.lagged = false;
        queue.owed_initialized = false;
        if let Some(waker) = queue.waker.take() {
            waker.wake();
        }
        drop(queue);
        self.closing.notify_waiters();
    }

    /// Completes once the cache is closed.
    async fn closed(&self) {
        loop {
            let notified = self.closing.notified();
            if self.state.lock().closed {
                return;
            }
            notified.await;
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
                if queue.closed || queue.finished {
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

    /// Completes once the cache is closed.
    pub(crate) async fn closed(&self) {
        self.subscriber.closed().await;
    }
}

impl<T> Drop for Receiver<T> {
    fn drop(&mut self) {
        let mut queue = self.subscriber.state.lock();
        queue.dropped = true;
        queue.events.clear();
    }
}
