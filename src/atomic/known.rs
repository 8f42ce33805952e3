//! What an atomic value knows of its node between operations, so that a change can go
//! straight to its versioned write: the bytes and version of the handle's own last reply (a
//! read, or a write that succeeded), kept only while a persistent watch on the node, on the
//! same connection, has reported nothing since.
//!
//! Why that is exact. The server sends one session's watch events and replies in the order it
//! applied the changes and served the requests, and zookeeper-client queues an event for its
//! watcher before it hands over the reply that came after it. So when a reply is handed over,
//! every event already queued is for a change the reply reflects (a read sees every change
//! applied before it; a versioned write that succeeded found the version, hence the bytes, it
//! expected, and its own event comes before its reply): those are dropped. An event queued
//! later is a change after the reply: the knowledge goes, and the next try reads. A broken
//! connection (any session event on the watcher) or a new session takes the knowledge and the
//! watch with it (the server keeps no persistent watch across a reconnect for this client); the
//! next operation adds the watch again before it reads.
//!
//! "Already queued" is read when the reply's task runs, a moment after the hand-over; an event
//! queued in that moment is taken for one the reply reflects (servers from 3.9 send each
//! event's zxid, and a change after the reply's `mzxid` is then recognised).
//!
//! What it does not change: every write still carries the version, so knowledge that went
//! stale in flight fails its write with `BadVersion` and the try reads, as a try without
//! knowledge does. The one change a version cannot show, the node deleted and made again up to
//! the same version, is shown by the watch's `NodeDeleted`, within the time a message takes to
//! reach the client: the window Curator's read-then-write has. That needs the watch to stay
//! persistent: on ZooKeeper 3.6-3.8 a one-shot `exists`/`getData` watch that the same session
//! sets on the same node makes it a one-shot watch (ZOOKEEPER-4466), and a `RemoveWatches` for
//! the node removes it (ZOOKEEPER-4472). The framework sets no one-shot watch of its own on a
//! path it watches persistently ([`NodeWatch`]; its watched reads share the persistent watch); a `SharedValue` on the same path uses a
//! persistent watch too; code that shares the session's raw client must set none there.
//!
//! A server that refuses the watch (ZooKeeper 3.5, or a watch manager that cannot keep
//! persistent watches) is asked once per session; every try then reads first, as Curator's.
//!
//! Between operations a small task of the handle's reads the watch's events as they come
//! (under the same lock, so each event is read once, by it or by the operation): a handle
//! left idle while other sessions change the node keeps no queue of their events, only the
//! fact that its knowledge is gone and the highest zxid those events carried.

use std::future::poll_fn;
use std::sync::{Arc, Weak};
use std::task::Poll;

use zookeeper_client::Stat;

use crate::error::Error;
use crate::framework::Framework;
use crate::shared::node_watch::NodeWatch;
use crate::sync::Mutex;

/// The node's bytes and version as one of the handle's replies found them.
#[derive(Debug, Clone)]
pub(crate) struct Known {
    pub(crate) data: Vec<u8>,
    pub(crate) version: i32,
    mzxid: i64,
}

#[derive(Debug, Default)]
struct State {
    watch: Option<NodeWatch>,
    known: Option<Known>,
    /// The session on which the watch could not be had (refused by the server, or the path
    /// watched recursively by this framework).
    refused: Option<u64>,
    /// Operations that asked for the watch; the first does not get it.
    asked: u32,
    /// The highest zxid of the events the reading task took off the watch.
    read_zxid: Option<i64>,
    /// The task that reads the current watch's events between operations.
    reader: Option<tokio::task::AbortHandle>,
    /// Wakes that task: an operation's own read of the queue (without waiting) takes the
    /// queue's one waker slot, so the task is woken to take it back.
    reader_waker: Option<std::task::Waker>,
    /// Counts the watches added; a reading task reads only the watch it was started for.
    generation: u64,
}

impl Drop for State {
    fn drop(&mut self) {
        if let Some(reader) = self.reader.take() {
            reader.abort();
        }
    }
}

/// See the module docs.
#[derive(Debug, Default)]
pub(crate) struct Knowledge {
    state: Arc<Mutex<State>>,
}

/// Reads the events of the watch that `state` holds as they come, dropping the knowledge at
/// each change, until the watch breaks (the next operation adds another, and a reader for it).
async fn read_events(state: Weak<Mutex<State>>, generation: u64) {
    poll_fn(|cx| {
        let Some(state) = state.upgrade() else { return Poll::Ready(()) };
        let mut state = state.lock();
        // A task for a watch since replaced (its abort can come after a poll has begun).
        if state.generation != generation {
            return Poll::Ready(());
        }
        loop {
            let Some(watch) = state.watch.as_mut() else { return Poll::Ready(()) };
            match watch.poll_change(cx) {
                Poll::Pending => {
                    state.reader_waker = Some(cx.waker().clone());
                    return Poll::Pending;
                }
                Poll::Ready(latest) => {
                    let live = watch.is_live();
                    state.known = None;
                    state.read_zxid = state.read_zxid.max(latest);
                    if !live {
                        return Poll::Ready(());
                    }
                }
            }
        }
    })
    .await;
}

impl State {
    /// Reads every event queued on the watch. Any change, a broken watch or none at all drops
    /// the knowledge. Returns the highest zxid the changes carried (with those the reading
    /// task took).
    fn drain(&mut self) -> Option<i64> {
        let Some(watch) = self.watch.as_mut() else {
            self.known = None;
            return None;
        };
        let drained = watch.drain();
        if drained.changes > 0 || !watch.is_live() {
            self.known = None;
        }
        if let Some(reader) = self.reader_waker.take() {
            reader.wake();
        }
        drained.latest_zxid.max(self.read_zxid)
    }

    fn is_live(&mut self) -> bool {
        self.watch.as_mut().is_some_and(|w| w.is_live())
    }
}

impl Knowledge {
    /// Records what a reply just handed over found (`data` at `stat`); the events queued
    /// before it are for changes it reflects. Nothing is kept without a live watch.
    pub(crate) fn learned(&self, data: &[u8], stat: &Stat) {
        let mut state = self.state.lock();
        let latest = state.drain();
        if !state.is_live() {
            return;
        }
        // An event queued between the reply and this call, for a change after what the reply
        // found (only a server that sends event zxids can tell).
        if latest.is_some_and(|zxid| zxid > stat.mzxid) {
            return;
        }
        // Two operations of one handle may hand over their replies out of order.
        if state.known.as_ref().is_some_and(|k| k.mzxid > stat.mzxid) {
            return;
        }
        state.known = Some(Known { data: data.to_vec(), version: stat.version, mzxid: stat.mzxid });
    }

    /// Drops the knowledge (a write that failed, or whose outcome is unknown).
    pub(crate) fn forget(&self) {
        self.state.lock().known = None;
    }

    /// What the last reply found, if the watch on `full_path` has reported nothing since.
    ///
    /// Adds the watch first if the current session has no live one (one `AddWatch` by the
    /// handle's second operation, and again by the first after every reconnection or new
    /// session; there is nothing to know then). A handle's first operation adds none, so a
    /// handle made for one change costs what Curator's does (a watch would add an `AddWatch`
    /// and, when the handle drops, a `RemoveWatches`). Failing to add it only means the try
    /// reads first.
    pub(crate) async fn current(&self, fw: &Framework, full_path: &str) -> Option<Known> {
        let epoch = fw.epoch();
        {
            let mut state = self.state.lock();
            state.asked = state.asked.saturating_add(1);
            if state.asked < 2 {
                return None;
            }
            state.drain();
            if state.is_live() {
                return state.known.clone();
            }
            if state.refused == Some(epoch) {
                return None;
            }
        }
        match NodeWatch::add(fw, full_path).await {
            Ok(watch) => {
                let mut state = self.state.lock();
                // The old watcher goes only now: with the new one in place, the client sends
                // no RemoveWatches for the path.
                let old = state.watch.replace(watch);
                state.known = None;
                state.read_zxid = None;
                state.generation += 1;
                let reader = tokio::spawn(read_events(Arc::downgrade(&self.state), state.generation));
                if let Some(old_reader) = state.reader.replace(reader.abort_handle()) {
                    old_reader.abort();
                }
                drop(state);
                drop(old);
            }
            Err(e) if e.is_connection_error() || e.is_session_lost() || matches!(e, Error::Closed) => {}
            Err(e) => {
                tracing::debug!(path = %full_path, error = %e, "atomic value: no persistent watch on this session; every try reads first");
                self.state.lock().refused = Some(epoch);
            }
        }
        None
    }
}
