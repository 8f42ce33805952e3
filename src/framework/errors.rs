//! Errors of background work (Curator's `UnhandledErrorListener`): what the framework and its
//! recipes could not do on their own, published on one bounded channel per framework besides
//! the log line each one writes.

use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use futures::Stream;
use tokio::sync::broadcast;
use tokio::sync::broadcast::error::RecvError;

use crate::error::Error;
use crate::framework::metrics::{FrameworkMetrics, Op};
use crate::sync::Mutex;

/// What background work failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum BackgroundErrorKind {
    /// A guaranteed delete (a released or dropped lock node, a cancelled acquire's node, a
    /// `delete().guaranteed()`) the server refused for a reason retrying cannot cure (`NoAuth`,
    /// for example): the node stays, an ephemeral node until its session ends.
    GuaranteedDelete,
    /// A cache (or a session's mirror of a lock directory) may not read a node: the node is
    /// left out of it.
    CacheReadRefused,
    /// A persistent watch the server refused to add again: its stream ends with the error.
    WatchNotReAdded,
    /// A persistent node (or TTL node) that could not be made again: it stays missing, and its
    /// handle keeps the error.
    NodeNotRecreated,
}

/// An error of background work, from [`Framework::errors`](crate::Framework::errors) or an
/// [`on_error`](crate::Framework::on_error) listener.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct BackgroundError {
    /// The recipe or part of the framework whose work failed. A guaranteed delete names the
    /// recipe whose node it is: `mutex`, `read_lock`, `write_lock`, `semaphore`, `leader`,
    /// `lock` (an internal lock: a semaphore's, a semaphore mutex's), `kazoo_lock`, `queue`,
    /// `double_barrier`, `set_partitioner`, or `framework` (a delete of the framework's own, a
    /// protected create's); the others: `cache`, `lock_mirror`, `watch`, `persistent_node`,
    /// `persistent_ttl_node`.
    pub recipe: &'static str,
    /// The node's full server path (namespace included).
    pub path: String,
    /// What failed.
    pub kind: BackgroundErrorKind,
    /// The error.
    pub error: Arc<Error>,
}

impl std::fmt::Display for BackgroundError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {:?} at {}: {}", self.recipe, self.kind, self.path, self.error)
    }
}

/// What a framework shares with the work it starts, so that background tasks can report
/// without keeping the framework alive: its metrics and its error channel.
pub(crate) struct Observer {
    pub(crate) metrics: FrameworkMetrics,
    /// Taken by `close()`: the streams end.
    errors: Mutex<Option<broadcast::Sender<BackgroundError>>>,
    /// When the last request was sent, in milliseconds since `since`.
    last_request: AtomicU64,
    since: Instant,
}

impl std::fmt::Debug for Observer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Observer").field("metrics", &self.metrics).finish_non_exhaustive()
    }
}

impl Observer {
    pub(crate) fn new(metrics: FrameworkMetrics, capacity: usize) -> Self {
        let (errors, _) = broadcast::channel(capacity);
        Self { metrics, errors: Mutex::new(Some(errors)), last_request: AtomicU64::new(0), since: Instant::now() }
    }

    /// Publishes a background error (nobody listening is fine) and counts it.
    /// Once the framework is closed (its channel ended) nothing is published or counted: an
    /// operation the close cut short is no background error.
    pub(crate) fn error(&self, recipe: &'static str, kind: BackgroundErrorKind, path: &str, error: impl Into<Error>) {
        let error = BackgroundError { recipe, path: path.to_owned(), kind, error: Arc::new(error.into()) };
        if let Some(errors) = self.errors.lock().as_ref() {
            self.metrics.background_error(recipe);
            let _ = errors.send(error);
        }
    }

    /// [`error`](Self::error) for an error the caller keeps too.
    pub(crate) fn error_ref(&self, recipe: &'static str, kind: BackgroundErrorKind, path: &str, error: &Error) {
        self.error(recipe, kind, path, duplicate(error));
    }

    /// A request sent.
    pub(crate) fn request(&self, op: Op) {
        self.metrics.request(op);
        self.last_request.store(self.millis(), Ordering::Relaxed);
    }

    /// How long since the last request was sent (since the framework started, if none was).
    pub(crate) fn quiet_for(&self) -> Duration {
        Duration::from_millis(self.millis().saturating_sub(self.last_request.load(Ordering::Relaxed)))
    }

    fn millis(&self) -> u64 {
        u64::try_from(self.since.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// A receiver of every error from now on; one that is closed at once after `close()`.
    pub(crate) fn subscribe(&self) -> broadcast::Receiver<BackgroundError> {
        match self.errors.lock().as_ref() {
            Some(errors) => errors.subscribe(),
            None => broadcast::channel(1).1,
        }
    }

    /// The framework closed: the streams and listeners end (after the errors sent before).
    pub(crate) fn close(&self) {
        self.errors.lock().take();
    }
}

/// A copy of `error` (the crate's error is not `Clone`): the same variant for the errors
/// background work stops on, its message otherwise.
fn duplicate(error: &Error) -> Error {
    match error {
        Error::ZooKeeper(e) => Error::ZooKeeper(e.clone()),
        Error::TooLarge { name, size, limit } => Error::TooLarge { name, size: *size, limit: *limit },
        Error::InvalidPath { path, reason } => Error::InvalidPath { path: path.clone(), reason },
        Error::Closed => Error::Closed,
        other => Error::InvalidArgument { name: "background", reason: other.to_string() },
    }
}

/// What [`BackgroundErrors`] yields: an error, or how many a slow reader missed.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum BackgroundEvent {
    /// A background error.
    Error(BackgroundError),
    /// The reader fell behind the channel's capacity (the framework's
    /// [`event_capacity`](crate::FrameworkBuilder::event_capacity)) and missed this many
    /// errors; it goes on with the oldest one still kept.
    Lagged(u64),
}

/// Every background error from now on, as a [`Stream`]; see
/// [`Framework::errors`](crate::Framework::errors). It ends when the framework closes.
///
/// `StreamExt::next` on it is cancel-safe: no error is lost by dropping a `next()` future.
pub struct BackgroundErrors {
    inner: Pin<Box<dyn Stream<Item = BackgroundEvent> + Send>>,
}

impl std::fmt::Debug for BackgroundErrors {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BackgroundErrors").finish_non_exhaustive()
    }
}

impl BackgroundErrors {
    pub(crate) fn new(rx: broadcast::Receiver<BackgroundError>) -> Self {
        let inner = futures::stream::unfold(rx, |mut rx| async move {
            let event = next(&mut rx).await?;
            Some((event, rx))
        });
        Self { inner: Box::pin(inner) }
    }
}

impl Stream for BackgroundErrors {
    type Item = BackgroundEvent;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<BackgroundEvent>> {
        self.inner.as_mut().poll_next(cx)
    }
}

async fn next(rx: &mut broadcast::Receiver<BackgroundError>) -> Option<BackgroundEvent> {
    match rx.recv().await {
        Ok(error) => Some(BackgroundEvent::Error(error)),
        Err(RecvError::Lagged(missed)) => Some(BackgroundEvent::Lagged(missed)),
        Err(RecvError::Closed) => None,
    }
}

/// An `on_error` listener's task: calls `f` for every event, in order, until the handle is
/// dropped or the framework is gone; a panic is logged and the listener stays registered.
pub(crate) async fn run<F>(mut rx: broadcast::Receiver<BackgroundError>, f: F)
where
    F: Fn(BackgroundEvent) + Send + Sync + 'static,
{
    while let Some(event) = next(&mut rx).await {
        if std::panic::catch_unwind(AssertUnwindSafe(|| f(event))).is_err() {
            tracing::error!("background error listener panicked; it stays registered");
        }
    }
}
