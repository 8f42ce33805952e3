//! Listeners and the event stream of a cache, both fed by one subscriber channel each.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures::{FutureExt, Stream};

use super::node::CacheEvent;
use super::subscription::Receiver;

/// Receives a cache's events (Curator's `CuratorCacheListener`).
///
/// Each listener runs on its own task and gets the events in order; there is no ordering
/// between listeners. A listener that panics is logged and stays registered. A listener that
/// falls further behind than the cache's event capacity gets [`CacheEvent::Lagged`] with the
/// whole cache, and goes on from there. Curator's
/// builder forms map to matching on the event: `forCreates` is `CacheEvent::Created`,
/// `forChanges` `CacheEvent::Changed`, `forDeletes` `CacheEvent::Deleted`, `forInitialized`
/// `CacheEvent::Initialized`; `afterInitialized()` is skipping events until `Initialized`.
#[async_trait::async_trait]
pub trait CuratorCacheListener<T = Vec<u8>>: Send + Sync + 'static {
    /// Called once per event.
    ///
    /// # Cancel safety
    /// The call is cancelled (its future dropped at an await point) when its
    /// [`ListenerHandle`](crate::ListenerHandle) is dropped or the cache is closed; the events
    /// after it are not delivered then. An implementation must leave nothing half done across
    /// an await that matters (or finish that work in a task of its own).
    async fn event(&self, event: CacheEvent<T>);
}

pub(crate) struct FnListener<F>(pub(crate) F);

#[async_trait::async_trait]
impl<T, F, Fut> CuratorCacheListener<T> for FnListener<F>
where
    T: Send + Sync + 'static,
    F: Fn(CacheEvent<T>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    async fn event(&self, event: CacheEvent<T>) {
        (self.0)(event).await
    }
}

pub(crate) async fn run<T: Send + Sync + 'static>(mut events: Receiver<T>, listener: Arc<dyn CuratorCacheListener<T>>) {
    while let Some(event) = events.recv().await {
        let call = AssertUnwindSafe(listener.event(event)).catch_unwind();
        tokio::select! {
            biased;
            // The cache closed: the call in progress is cancelled, and no other follows.
            () = events.closed() => return,
            called = call => {
                if called.is_err() {
                    tracing::error!("cache listener panicked; it stays registered");
                }
            }
        }
    }
}

/// A cache's events as a [`Stream`]; see [`CuratorCache::events`](crate::CuratorCache::events).
///
/// It holds at most the cache's event capacity of events not yet taken; a stream that falls
/// further behind gets [`CacheEvent::Lagged`] (with the whole cache) and goes on from there.
///
/// `StreamExt::next` on it is cancel-safe: no event is lost by dropping a `next()` future.
pub struct CacheEventStream<T = Vec<u8>> {
    events: Receiver<T>,
}

impl<T> CacheEventStream<T> {
    pub(crate) fn new(events: Receiver<T>) -> Self {
        CacheEventStream { events }
    }
}

impl<T> std::fmt::Debug for CacheEventStream<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CacheEventStream").field("queued", &self.events.len()).finish()
    }
}

impl<T> Stream for CacheEventStream<T> {
    type Item = CacheEvent<T>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<CacheEvent<T>>> {
        self.events.poll_recv(cx)
    }
}
