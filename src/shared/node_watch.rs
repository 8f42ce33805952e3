//! One persistent watch on one node, on the framework's current session, read directly by
//! the recipe that owns it (an atomic value's handle, a shared value's copy).
//!
//! Read directly, not through [`Framework::watch`]'s stream, because its owners need one
//! fact a forwarding task would blur: zookeeper-client queues a watch event for its watcher
//! before it hands over the reply that the server sent after it, so what is queued on the
//! watcher when a reply is handed over is exactly what happened before that reply (up to the
//! moment the owner's task runs). The framework's table of persistent watches holds the path
//! while the watch lives, so the framework refuses its own one-shot watches there (on
//! ZooKeeper 3.6-3.8 a one-shot watch of the same session on the same node turns the
//! persistent one into a one-shot one: ZOOKEEPER-4466).
//!
//! The server drops the watch when the connection breaks and zookeeper-client 0.11 does not
//! add it again, so any session event on the watcher breaks the watch for good; its owner
//! adds a new one on the connection that follows. A broken watch is never polled again
//! (zookeeper-client panics when a watcher is polled after a terminal session state).

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures::FutureExt;
use tokio::sync::Notify;
use zookeeper_client::{AddWatchMode, EventType, PersistentWatcher};

use crate::error::{Result, ZkError};
use crate::framework::watches::Registered;
use crate::framework::Framework;
use crate::WatchMode;

/// A persistent watch on one node (see the module docs).
pub(crate) struct NodeWatch {
    watcher: PersistentWatcher,
    epoch: u64,
    broken: bool,
    _registered: Registered,
}

impl std::fmt::Debug for NodeWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeWatch").field("epoch", &self.epoch).field("broken", &self.broken).finish_non_exhaustive()
    }
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
    /// `Unimplemented` (as [`Error::ZooKeeper`]) from a server without persistent watches
    /// (remembered for the session, so it is asked once); [`Error::InvalidArgument`] when the
    /// framework watches the path recursively; connection and session errors the retry policy
    /// gave up on.
    pub(crate) async fn add(fw: &Framework, full_path: &str) -> Result<NodeWatch> {
        if fw.server_refuses_persistent_watches() {
            return Err(ZkError::Unimplemented.into());
        }
        let registered = fw.register_persistent_watch(full_path, WatchMode::Persistent, Arc::new(Notify::new()))?;
        let (epoch, watcher) = fw
            .with_retry(|session| async move {
                let watcher = session.client.watch(full_path, AddWatchMode::Persistent).await;
                watcher.map(|w| (session.epoch, w))
            })
            .await
            .map_err(|e| fw.note_refusal(e, fw.epoch()))?;
        Ok(NodeWatch { watcher, epoch, broken: false, _registered: registered })
    }

    /// Whether the watch still reports every change: its connection has not broken and the
    /// framework is on the session it was added on.
    pub(crate) fn is_live(&mut self, fw: &Framework) -> bool {
        if self.epoch != fw.epoch() {
            self.broken = true;
        }
        !self.broken
    }

    /// Reads every event queued now, without waiting.
    pub(crate) fn drain(&mut self, fw: &Framework) -> Drained {
        let mut drained = Drained::default();
        while self.is_live(fw) {
            let Some(event) = self.watcher.changed().now_or_never() else { break };
            self.note(event, &mut drained);
        }
        drained
    }

    /// Ready once a change is queued or the watch broke (then [`is_live`](Self::is_live) is
    /// false), with everything else queued read as well; `Pending` registers `cx`'s waker.
    pub(crate) fn poll_change(&mut self, fw: &Framework, cx: &mut Context<'_>) -> Poll<()> {
        let mut drained = Drained::default();
        while self.is_live(fw) && drained.changes == 0 {
            let event = {
                let next = pin!(self.watcher.changed());
                match next.poll(cx) {
                    Poll::Ready(event) => event,
                    Poll::Pending => return Poll::Pending,
                }
            };
            self.note(event, &mut drained);
        }
        self.drain(fw);
        Poll::Ready(())
    }

    fn note(&mut self, event: zookeeper_client::WatchedEvent, drained: &mut Drained) {
        match event.event_type {
            // A child came or went: the node's bytes did not change.
            EventType::NodeChildrenChanged => {}
            EventType::Session => self.broken = true,
            _ => {
                drained.changes += 1;
                if event.zxid >= 0 {
                    drained.latest_zxid = drained.latest_zxid.max(Some(event.zxid));
                }
            }
        }
    }
}
