//! Listener callbacks and the state-change stream, both fed by one broadcast channel.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures::{FutureExt, Stream};
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::{broadcast, watch};
use tokio::task::AbortHandle;

use super::state::StateSnapshot;
use super::{Framework, WeakFramework};

/// Receives connection-state transitions (Curator's `ConnectionStateListener`).
///
/// Each listener runs on its own task and gets the transitions in order; there is no ordering
/// between different listeners. A listener that falls behind receives the current snapshot in
/// place of what it missed. A panic is logged and the listener stays registered.
///
/// Implement it with the `async_trait` attribute, re-exported as [`crate::async_trait`]:
///
/// ```
/// use zk_recipes::{ConnectionStateListener, Framework, StateSnapshot};
///
/// struct Log;
///
/// #[zk_recipes::async_trait]
/// impl ConnectionStateListener for Log {
///     async fn state_changed(&self, _framework: &Framework, snapshot: StateSnapshot) {
///         println!("{:?}", snapshot.state);
///     }
/// }
/// ```
#[async_trait::async_trait]
pub trait ConnectionStateListener: Send + Sync + 'static {
    /// Called once per transition.
    ///
    /// # Cancel safety
    /// The call is cancelled (its future dropped at an await point) when its
    /// [`ListenerHandle`](crate::ListenerHandle) is dropped or the framework is closed; later
    /// transitions are not delivered then. An implementation must leave nothing half done
    /// across an await that matters (or finish that work in a task of its own).
    async fn state_changed(&self, framework: &Framework, snapshot: StateSnapshot);
}

pub(crate) struct FnListener<F>(pub(crate) F);

#[async_trait::async_trait]
impl<F, Fut> ConnectionStateListener for FnListener<F>
where
    F: Fn(StateSnapshot) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    async fn state_changed(&self, _framework: &Framework, snapshot: StateSnapshot) {
        (self.0)(snapshot).await
    }
}

/// Keeps a listener registered; dropping it unregisters the listener.
#[derive(Debug)]
#[must_use = "dropping the handle unregisters the listener at once"]
pub struct ListenerHandle {
    task: Option<AbortHandle>,
}

impl ListenerHandle {
    pub(crate) fn new(task: AbortHandle) -> Self {
        Self { task: Some(task) }
    }

    /// Unregisters the listener (the same as dropping the handle).
    pub fn remove(self) {}

    /// Keeps the listener registered for the framework's lifetime.
    pub fn detach(mut self) {
        self.task = None;
    }
}

impl Drop for ListenerHandle {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

pub(crate) async fn run(
    weak: WeakFramework,
    mut events: broadcast::Receiver<StateSnapshot>,
    current: watch::Receiver<StateSnapshot>,
    listener: Arc<dyn ConnectionStateListener>,
) {
    loop {
        let Some(snapshot) = next_event(&mut events, &current).await else { return };
        let Some(framework) = weak.upgrade() else { return };
        let call = AssertUnwindSafe(listener.state_changed(&framework, snapshot));
        if call.catch_unwind().await.is_err() {
            tracing::error!(state = ?snapshot.state, "connection state listener panicked; it stays registered");
        }
    }
}

/// The next transition, or the current snapshot after falling behind; `None` once closed.
async fn next_event(
    events: &mut broadcast::Receiver<StateSnapshot>,
    current: &watch::Receiver<StateSnapshot>,
) -> Option<StateSnapshot> {
    match events.recv().await {
        Ok(snapshot) => Some(snapshot),
        Err(RecvError::Lagged(missed)) => {
            tracing::warn!(missed, "state consumer fell behind; resyncing to the current state");
            Some(*current.borrow())
        }
        Err(RecvError::Closed) => None,
    }
}

/// Every connection-state transition, as a [`Stream`]; see
/// [`Framework::state_changes`](crate::Framework::state_changes).
///
/// `StreamExt::next` on it is cancel-safe: no transition is lost by dropping a `next()` future.
pub struct ConnectionStateStream {
    inner: Pin<Box<dyn Stream<Item = StateSnapshot> + Send>>,
}

impl std::fmt::Debug for ConnectionStateStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConnectionStateStream").finish_non_exhaustive()
    }
}

impl ConnectionStateStream {
    pub(crate) fn new(
        events: Option<broadcast::Receiver<StateSnapshot>>,
        current: watch::Receiver<StateSnapshot>,
    ) -> Self {
        let inner = futures::stream::unfold((events, current), |(events, current)| async move {
            let mut events = events?;
            let snapshot = next_event(&mut events, &current).await?;
            Some((snapshot, (Some(events), current)))
        });
        Self { inner: Box::pin(inner) }
    }
}

impl Stream for ConnectionStateStream {
    type Item = StateSnapshot;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<StateSnapshot>> {
        self.inner.as_mut().poll_next(cx)
    }
}
