//! How a shared value's copy follows its node on a server with persistent watches: one
//! [`NodeWatch`] on the node, a read after every change it reports, and no read for the
//! value's own writes.
//!
//! A one-shot watch fires for the copy's own write too, and must be armed again with a read
//! of bytes the copy already holds. A persistent watch needs no arming, and a write's own
//! event can be told apart exactly. While a write is in flight the copy's task reads nothing
//! from the watch; when the write's reply is handed over:
//! - a versioned write that succeeded found the node at the version it expected, so the only
//!   change between the copy's state and the write is the write itself, whose event comes
//!   before its reply; the events queued then are therefore its own and, besides, changes
//!   the copy already holds (events its task has not read yet) or changes after the write.
//!   Exactly one queued event is its own, and the copy is current with the write's bytes;
//!   more than one, and the task reads (a read too many at worst). An unconditional write
//!   makes the same count (changes before it are overwritten by it).
//! - a versioned write that lost is followed by the caller's own read, which reflects every
//!   event queued before it was sent: those are read and dropped first.
//! - a write that failed, was cancelled, or overlapped another write of the same value leaves
//!   a read to the task.
//!
//! The task reads again after every change it reads from the watch (events that arrive during
//! a read bring one more read), and adds the watch again, then reads, on every new connection.
//! A server that refuses persistent watches gets the one-shot follower
//! ([`mirror`](super::mirror)) instead.

use std::future::poll_fn;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use tokio::sync::watch;

use super::mirror;
use super::node_watch::NodeWatch;
use super::version::VersionedValue;
use crate::error::{Error, ZkError};
use crate::framework::{Framework, StateSnapshot};
use crate::sync::Mutex;

#[derive(Debug, Default)]
struct State {
    watch: Option<NodeWatch>,
    /// Writes of the value in flight.
    writes: u32,
    /// Events were read that no reply accounted for: the task must read.
    read_needed: bool,
    /// The task's, while it waits.
    waker: Option<Waker>,
}

/// The state a shared value and its task share.
#[derive(Debug, Default)]
pub(crate) struct Follower {
    state: Mutex<State>,
}

/// What the task does next.
enum Step {
    Read,
    Rewatch,
}

impl State {
    fn wake(&mut self) {
        if let Some(waker) = self.waker.take() {
            waker.wake();
        }
    }
}

impl Follower {
    /// A follower with its first watch, added by `start` before its first read.
    pub(crate) fn with_watch(watch: NodeWatch) -> Arc<Follower> {
        Arc::new(Follower { state: Mutex::new(State { watch: Some(watch), ..State::default() }) })
    }

    /// A write of the value is about to be sent; `None` when the follower has no live watch
    /// (then the task reads after its next watch anyway).
    pub(crate) fn begin_write(self: &Arc<Self>) -> Option<Write> {
        let mut state = self.state.lock();
        if !state.watch.as_mut().is_some_and(|w| w.is_live()) {
            return None;
        }
        state.writes += 1;
        Some(Write { follower: self.clone(), settled: false })
    }

    /// Drops the watch (the value closed).
    pub(crate) fn stop(&self) {
        let watch = {
            let mut state = self.state.lock();
            state.wake();
            state.watch.take()
        };
        drop(watch);
    }

    fn poll_step(&self, cx: &mut Context<'_>) -> Poll<Step> {
        let mut state = self.state.lock();
        let state = &mut *state;
        let Some(watch) = state.watch.as_mut() else { return Poll::Ready(Step::Rewatch) };
        if !watch.is_live() {
            return Poll::Ready(Step::Rewatch);
        }
        if std::mem::take(&mut state.read_needed) {
            return Poll::Ready(Step::Read);
        }
        if state.writes > 0 {
            state.waker = Some(cx.waker().clone());
            return Poll::Pending;
        }
        match watch.poll_change(cx) {
            Poll::Ready(_) if !watch.is_live() => Poll::Ready(Step::Rewatch),
            Poll::Ready(_) => Poll::Ready(Step::Read),
            Poll::Pending => {
                state.waker = Some(cx.waker().clone());
                Poll::Pending
            }
        }
    }
}

/// A write of the value in flight (see the module docs); dropped unsettled, it leaves a read
/// to the task.
#[must_use]
pub(crate) struct Write {
    follower: Arc<Follower>,
    settled: bool,
}

impl Write {
    /// The write succeeded: the copy is current with it unless more than its own event is
    /// queued or another write of the value was in flight.
    pub(crate) fn written(mut self) {
        let mut state = self.follower.state.lock();
        let alone = state.writes == 1;
        let own_only = state.watch.as_mut().is_some_and(|w| {
            let drained = w.drain();
            drained.changes == 1 && w.is_live()
        });
        if !(alone && own_only) {
            state.read_needed = true;
        }
        self.settled = true;
    }

    /// The write lost: the events queued now are for changes the caller's read, sent next,
    /// reflects. Call [`read`](Self::read) once that read has stored what it found.
    pub(crate) fn lost(&self) {
        if let Some(watch) = self.follower.state.lock().watch.as_mut() {
            watch.drain();
        }
    }

    /// The caller's read after a lost write has stored what it found.
    pub(crate) fn read(mut self) {
        self.settled = true;
    }
}

impl Drop for Write {
    fn drop(&mut self) {
        let mut state = self.follower.state.lock();
        state.writes -= 1;
        if !self.settled {
            state.read_needed = true;
        }
        if state.writes == 0 || state.read_needed {
            state.wake();
        }
    }
}

/// The task that keeps the copy in `tx` current (see the module docs). It ends when the
/// framework closes or its handle aborts it.
pub(crate) async fn run(
    fw: Framework,
    path: String,
    full_path: String,
    tx: watch::Sender<VersionedValue<Vec<u8>>>,
    follower: Arc<Follower>,
) {
    let mut states = fw.state_watch();
    states.borrow_and_update();
    loop {
        let step = tokio::select! {
            step = poll_fn(|cx| follower.poll_step(cx)) => step,
            changed = states.changed() => {
                if changed.is_err() || fw.is_closed() {
                    return;
                }
                continue;
            }
        };
        if let Step::Rewatch = step {
            match rewatch(&fw, &full_path, &follower, &mut states).await {
                Rewatched::Yes => {}
                Rewatched::Closed => return,
                Rewatched::Refused => {
                    tracing::debug!(path = %path, "shared value: no persistent watch on this session; following with one-shot watches");
                    return mirror::run(fw, path, tx).await;
                }
            }
        }
        match fw.get_data(&path).plain().await {
            Ok((data, stat)) => {
                mirror::offer(&tx, data, &stat);
            }
            // Deleted: the copy keeps its last value, and the watch reports the node's return.
            Err(Error::ZooKeeper(ZkError::NoNode)) => {}
            Err(Error::Closed) => return,
            // A broken connection also breaks the watch: the next step adds it again and reads.
            Err(e) if e.is_connection_error() || e.is_session_lost() => {
                follower.state.lock().read_needed = true;
            }
            // A refusal (the node's ACL): read again at the next change.
            Err(e) => tracing::debug!(path = %path, error = %e, "shared value: read failed"),
        }
    }
}

enum Rewatched {
    Yes,
    Refused,
    Closed,
}

/// Has the watch added again (the session watch waits for a connection and paces its tries),
/// or adds a first one. Meanwhile the follower holds no watch: writes then leave the read to
/// the task, which reads right after.
async fn rewatch(
    fw: &Framework,
    full_path: &str,
    follower: &Follower,
    states: &mut watch::Receiver<StateSnapshot>,
) -> Rewatched {
    let taken = follower.state.lock().watch.take();
    let mut watch = match taken {
        Some(watch) => watch,
        None => loop {
            if fw.is_closed() {
                return Rewatched::Closed;
            }
            match NodeWatch::add(fw, full_path).await {
                Ok(watch) => break watch,
                Err(Error::Closed) => return Rewatched::Closed,
                Err(e) if e.is_connection_error() || e.is_session_lost() || matches!(e, Error::NotStarted) => {
                    if states.changed().await.is_err() {
                        return Rewatched::Closed;
                    }
                }
                Err(_) => return Rewatched::Refused,
            }
        },
    };
    let result = if watch.is_live() { Ok(()) } else { watch.readd().await };
    match result {
        Ok(()) => {
            follower.state.lock().watch = Some(watch);
            Rewatched::Yes
        }
        Err(Error::Closed) => Rewatched::Closed,
        Err(_) => Rewatched::Refused,
    }
}
