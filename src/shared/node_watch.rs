//! One persistent watch on one node, read directly by the recipe that owns it (an atomic
//! value's handle, a shared value's copy): a [`SessionWatch`] that its owner polls under its
//! own lock and adds anew after each break, instead of letting it add itself again.
//!
//! Read directly, not through [`Framework::watch`]'s stream, because its owners need one fact
//! a forwarding task would blur: zookeeper-client queues a watch event for its watcher before
//! it hands over the reply that the server sent after it, so what is queued on the watcher
//! when a reply is handed over is exactly what happened before that reply (up to the moment
//! the owner's task runs). The framework's watch table holds the path while the watch lives,
//! so the framework sets no one-shot watch of its own there (its watched reads share the
//! persistent watch).
//!
//! Any break (a disconnection, a new session) stops the watch from vouching for anything: its
//! owner has it added again ([`NodeWatch::readd`], the session watch's own loop) on the
//! connection that follows, and reads then.

use std::task::{Context, Poll};

use crate::error::Result;
use crate::framework::{Framework, WatchMode};
use crate::watch::{SessionWatch, WatchItem};

/// A persistent watch on one node (see the module docs).
#[derive(Debug)]
pub(crate) struct NodeWatch {
    // Boxed: the handles that keep one (an atomic value's) stay small.
    watch: Box<SessionWatch>,
    broken: bool,
}

/// What [`NodeWatch::drain`] read.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Drained {
    /// Events for changes of the node's bytes or existence.
    pub(crate) changes: u32,
    /// The highest zxid they carried (servers from 3.9 send it; older ones send none).
    pub(crate) latest_zxid: Option<i64>,
}

impl NodeWatch {
    /// Adds a persistent watch on `full_path` (namespace included) on the framework's current
    /// session: one `AddWatch`.
    ///
    /// # Errors
    /// `Unimplemented` (as [`Error::ZooKeeper`](crate::Error::ZooKeeper)) from a server
    /// without persistent watches (remembered for the session, so it is asked once);
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) when the framework watches
    /// the path recursively; connection and session errors the retry policy gave up on.
    pub(crate) async fn add(fw: &Framework, full_path: &str) -> Result<NodeWatch> {
        let watch = SessionWatch::add(fw, full_path, WatchMode::Persistent).await?;
        Ok(NodeWatch { watch: Box::new(watch), broken: false })
    }

    /// Adds the broken watch again, once the framework is connected (on the new session after
    /// a new one), with the session watch's one pause policy between failed tries. Its events
    /// from before are dropped: the owner reads after this.
    ///
    /// # Errors
    /// `Unimplemented` when the server refuses persistent watches; [`Error::Closed`](crate::error::Error::Closed)
    /// once the framework is closed.
    pub(crate) async fn readd(&mut self) -> Result<()> {
        loop {
            match self.watch.next().await {
                Some(WatchItem::Resync(_)) => {
                    self.broken = false;
                    return Ok(());
                }
                Some(WatchItem::Refused(error)) => return Err(error),
                Some(WatchItem::Event(_) | WatchItem::Interrupted | WatchItem::Adding) => {}
                None => return Err(crate::error::Error::Closed),
            }
        }
    }

    /// Whether the watch still reports every change: its connection has not broken and the
    /// framework is on the session it was added on.
    pub(crate) fn is_live(&mut self) -> bool {
        self.broken = self.broken || !self.watch.is_live_now();
        !self.broken
    }

    /// Reads every event queued now, without waiting.
    pub(crate) fn drain(&mut self) -> Drained {
        let mut drained = Drained::default();
        if self.is_live() {
            for event in self.watch.queued() {
                note(&event, &mut drained);
            }
        }
        drained
    }

    /// Ready once a change is queued or the watch broke (then [`is_live`](Self::is_live) is
    /// false), with everything else queued read as well, with the highest zxid the changes
    /// carried; `Pending` registers `cx`'s waker.
    pub(crate) fn poll_change(&mut self, cx: &mut Context<'_>) -> Poll<Option<i64>> {
        let mut drained = Drained::default();
        while drained.changes == 0 {
            match self.watch.poll_event(cx) {
                Poll::Ready(Some(event)) => note(&event, &mut drained),
                Poll::Ready(None) => {
                    self.broken = true;
                    return Poll::Ready(drained.latest_zxid);
                }
                Poll::Pending => return Poll::Pending,
            }
        }
        Poll::Ready(drained.latest_zxid.max(self.drain().latest_zxid))
    }
}

fn note(event: &zookeeper_client::WatchedEvent, drained: &mut Drained) {
    // A child came or went: the node's bytes did not change.
    if event.event_type == zookeeper_client::EventType::NodeChildrenChanged {
        return;
    }
    drained.changes += 1;
    if event.zxid >= 0 {
        drained.latest_zxid = drained.latest_zxid.max(Some(event.zxid));
    }
}
