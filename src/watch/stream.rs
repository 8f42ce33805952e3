//! [`Framework::watch`]: a persistent watch as a `Stream` that survives reconnects and new
//! sessions, one task over one [`SessionWatch`].
//!
//! The task forwards the watch's events through a bounded channel and keeps reading the
//! client's queue while the consumer lags: the events that find the buffer full are dropped,
//! and the stream yields [`WatchEvent::Resync`] (`Lagged`) as soon as there is room, so no
//! queue grows with a consumer that stopped reading. After a reconnect or a new
//! session (or when the framework's watch table asks for it) the watch is added again and the
//! stream yields [`WatchEvent::Resync`] before any event of the new registration. Dropping the
//! stream ends the task (it notices the closed channel), whose watcher's drop queues the
//! `removeWatches` on the client: nothing in `Drop` blocks or spawns.

use std::pin::Pin;
use std::task::{Context, Poll};

use futures::Stream;
use tokio::sync::mpsc;
use zookeeper_client::WatchedEvent;

pub use super::session::ResyncReason;
use super::session::{SessionWatch, WatchItem};
use crate::error::{Error, Result, ZkError};
use crate::framework::{Framework, NodeEvent, WatchMode, WeakFramework};

/// How many items a watch's stream buffers for its consumer; past that the events are dropped
/// and a `Resync` (`Lagged`) follows.
const BUFFER: usize = 64;

/// An item of a [`PersistentWatch`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum WatchEvent {
    /// A node changed.
    Node(NodeEvent),
    /// Events may have been missed before this point: re-read what you keep. Every event
    /// after it comes from the watch registered again, so reading after receiving it misses
    /// nothing.
    Resync {
        /// Why.
        reason: ResyncReason,
    },
}

/// A persistent watch: a `Stream` of [`WatchEvent`]s, from [`Framework::watch`].
///
/// Items are `Ok` while the watch lives. An `Err` item is the last one: the watch could not be
/// registered again (the server refused it, for example after a move to a 3.5 server:
/// [`Error::Unsupported`](crate::Error::Unsupported)). The
/// stream ends (`None`) when the framework closes. Dropping it removes the watch from the
/// server (in the background).
#[must_use = "a watch reports nothing unless its stream is polled"]
pub struct PersistentWatch {
    path: String,
    mode: WatchMode,
    events: mpsc::Receiver<Result<WatchEvent>>,
}

impl std::fmt::Debug for PersistentWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PersistentWatch").field("path", &self.path).field("mode", &self.mode).finish()
    }
}

impl PersistentWatch {
    /// The watched path, as given (without the namespace).
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The watch's mode.
    pub fn mode(&self) -> WatchMode {
        self.mode
    }
}

impl Stream for PersistentWatch {
    type Item = Result<WatchEvent>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.events.poll_recv(cx)
    }
}

impl Framework {
    /// Sets a persistent watch on `path` (Curator's `watchers().add().withMode(..)`), and
    /// returns its events as a stream. The watch survives reconnects and new sessions: it is
    /// registered again after each, and the stream yields [`WatchEvent::Resync`] first,
    /// because ZooKeeper does not report what changed while the connection was down. The
    /// node need not exist.
    ///
    /// ```no_run
    /// # async fn example(framework: zk_recipes::Framework) -> zk_recipes::Result<()> {
    /// use futures::StreamExt;
    /// use zk_recipes::{WatchEvent, WatchMode};
    ///
    /// let mut watch = framework.watch("/config", WatchMode::PersistentRecursive).await?;
    /// while let Some(event) = watch.next().await {
    ///     match event? {
    ///         WatchEvent::Node(event) => println!("{:?} {}", event.kind, event.path),
    ///         WatchEvent::Resync { .. } => println!("events may have been missed: re-read"),
    ///         _ => {}
    ///     }
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// The session keeps one watch mode per path, whoever set it: two watches of this
    /// framework on the same path must have the same mode, and that includes the framework's
    /// own persistent watches (a [`CuratorCache`](crate::CuratorCache) watches its path
    /// recursively, or persistently for a single node; a lock's mirror watches its directory
    /// recursively).
    ///
    /// # Errors
    /// [`Error::InvalidPath`](crate::Error::InvalidPath) before anything is sent;
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) when the framework already
    /// watches `path` in the other mode; [`Error::Unsupported`](crate::Error::Unsupported)
    /// (feature `"persistent watches"`) from a server without persistent watches (ZooKeeper
    /// 3.5, or a 3.6+ server configured with `WatchManagerOptimized`, which answers
    /// `MarshallingError`): a stream of every change cannot be made of one-shot watches,
    /// which miss the changes between a firing and the read that sets them again (the caches,
    /// which keep the latest state, fall back to them; see the crate's server versions page);
    /// the framework's errors
    /// ([`Error::NotStarted`](crate::Error::NotStarted), [`Error::Closed`](crate::Error::Closed),
    /// connection errors once the retry policy gives up).
    ///
    /// # Cancel safety
    /// Cancel-safe: a cancelled call leaves no watch behind (the client drops a registration
    /// whose answer comes after the cancellation, which removes it from the server).
    pub async fn watch(&self, path: &str, mode: WatchMode) -> Result<PersistentWatch> {
        let full_path = self.full_path(path)?;
        let mut watch = SessionWatch::add(self, &full_path, mode).await.map_err(unsupported)?;
        watch.report_refusal();
        let (tx, events) = mpsc::channel(BUFFER);
        tokio::spawn(forward(self.downgrade(), watch, tx));
        Ok(PersistentWatch { path: path.to_owned(), mode, events })
    }
}

/// The watch's task: forwards until the consumer leaves or the watch ends. While the buffer
/// is full, items are dropped and the resync owed for them (the strongest reason among the
/// dropped resyncs, `Lagged` otherwise) goes out first once there is room.
async fn forward(weak: WeakFramework, mut watch: SessionWatch, tx: mpsc::Sender<Result<WatchEvent>>) {
    let mut owed: Option<ResyncReason> = None;
    loop {
        let item = tokio::select! {
            biased;
            () = tx.closed() => return,
            permit = tx.reserve(), if owed.is_some() => {
                let Ok(permit) = permit else { return };
                if let Some(reason) = owed.take() {
                    permit.send(Ok(WatchEvent::Resync { reason }));
                }
                continue;
            }
            item = watch.next() => item,
        };
        let item = match item {
            None => return,
            Some(WatchItem::Event(event)) => {
                let Some(event) = node_event(&weak, &event) else { return };
                Ok(WatchEvent::Node(event))
            }
            Some(WatchItem::Resync(Some(reason))) => Ok(WatchEvent::Resync { reason }),
            Some(WatchItem::Resync(None) | WatchItem::Interrupted | WatchItem::Adding) => continue,
            Some(WatchItem::Refused(error)) => {
                tracing::warn!(path = %watch.full_path(), %error, "persistent watch could not be registered again");
                Err(unsupported(error))
            }
        };
        if item.is_err() {
            // The last item: worth the wait.
            let _ = tx.send(item).await;
            return;
        }
        if let Some(earlier) = owed {
            owed = Some(stronger(earlier, resync_reason(&item)));
            continue;
        }
        match tx.try_send(item) {
            Ok(()) => {}
            Err(mpsc::error::TrySendError::Full(item)) => {
                owed = Some(stronger(ResyncReason::Lagged, resync_reason(&item)))
            }
            Err(mpsc::error::TrySendError::Closed(_)) => return,
        }
    }
}

/// The reason of a resync item.
fn resync_reason(item: &Result<WatchEvent>) -> Option<ResyncReason> {
    match item {
        Ok(WatchEvent::Resync { reason }) => Some(*reason),
        _ => None,
    }
}

/// The reason that tells the consumer more of `owed` and a dropped item's: a new session over
/// a reconnect over a rearm over a lag.
fn stronger(owed: ResyncReason, dropped: Option<ResyncReason>) -> ResyncReason {
    let rank = |r: ResyncReason| match r {
        ResyncReason::NewSession => 3,
        ResyncReason::Reconnected => 2,
        ResyncReason::Rearmed => 1,
        _ => 0,
    };
    match dropped {
        Some(dropped) if rank(dropped) > rank(owed) => dropped,
        _ => owed,
    }
}

/// A refused persistent watch as the user sees it: the feature and the server it needs.
fn unsupported(error: Error) -> Error {
    match error {
        Error::ZooKeeper(ZkError::Unimplemented) => Error::Unsupported {
            feature: "persistent watches",
            reason: "addWatch needs ZooKeeper 3.6 or later with the default watch manager (3.5 has none, and \
                     WatchManagerOptimized refuses them); the caches fall back to one-shot watches, a watch stream \
                     cannot",
        },
        other => other,
    }
}

/// The event as the user sees it; `None` when the framework is gone.
fn node_event(weak: &WeakFramework, event: &WatchedEvent) -> Option<NodeEvent> {
    let framework = weak.upgrade()?;
    Some(NodeEvent::of(&framework, event.event_type, event))
}
