//! [`LeaderObserver`]: who leads an election, for a process that is no candidate.

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use futures::stream::BoxStream;
use futures::{Stream, StreamExt};
use tokio::sync::watch;
use tokio::task::AbortHandle;

use super::{rejoin_pause, wait_until_usable, Participant};
use crate::deadline;
use crate::error::{Error, Result, ZkError};
use crate::framework::Framework;
use crate::path;
use crate::protocol::driver::{Driver, StandardDriver};
use crate::watch::{Depth, SessionWatch, WatchItem};
use crate::WatchMode;

/// Which recipe's election an observer reads: the candidates' node names and so their order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ElectionKind {
    /// A [`LeaderLatch`](crate::LeaderLatch) election (Curator's `LeaderLatch`: `latch-`
    /// nodes).
    Latch,
    /// A [`LeaderSelector`](crate::LeaderSelector) election (Curator's `LeaderSelector`, an
    /// `InterProcessMutex`: `lock-` nodes).
    Selector,
}

impl ElectionKind {
    fn driver(self) -> StandardDriver {
        match self {
            ElectionKind::Latch => StandardDriver::LATCH,
            ElectionKind::Selector => StandardDriver::MUTEX,
        }
    }
}

/// What the observer knows: `None` before its first read.
type Observed = Option<Option<Participant>>;

/// Who leads an election at a path, followed without taking part (etcd's `observe`): the
/// candidate whose node is first in the election's order, the lowest sequence, with the id
/// its node holds, exactly as the candidates themselves (Rust or Curator) decide it.
///
/// The observer follows the election's directory with a persistent watch (one-shot watches on
/// a server without persistent watches), reads the first candidate's id, and lists again
/// whenever the children change, the connection comes back or a new session starts, so after
/// any fault it converges on the current leader. A candidate of the same election on the same
/// framework shares the watch (its lock mirror watches the directory in the same mode). It creates
/// nothing on the server and never takes part. Between a leader's departure and the next
/// listing the observer may still name it: an observer tells who leads as of its last read,
/// not a lease on the answer (a candidate learns its own leadership from its own handle).
///
/// ```no_run
/// # async fn example(fw: zk_recipes::Framework) -> zk_recipes::Result<()> {
/// use futures::StreamExt;
/// use zk_recipes::{ElectionKind, LeaderObserver};
///
/// let observer = LeaderObserver::start(&fw, "/services/scheduler/leader", ElectionKind::Latch)?;
/// let mut leaders = observer.changes();
/// while let Some(leader) = leaders.next().await {
///     match leader {
///         Some(p) => println!("{} leads", p.id),
///         None => println!("no leader"),
///     }
/// }
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct LeaderObserver {
    path: String,
    observed: watch::Receiver<Observed>,
    task: AbortHandle,
}

impl Drop for LeaderObserver {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl LeaderObserver {
    /// Starts following the election of `kind` at `path`, in a task of its own (on the
    /// current Tokio runtime); no I/O before it returns.
    ///
    /// # Errors
    /// [`Error::InvalidPath`]; [`Error::InvalidArgument`] outside a Tokio runtime.
    pub fn start(framework: &Framework, path: &str, kind: ElectionKind) -> Result<Self> {
        framework.full_path(path)?;
        let runtime = crate::runtime::current("start")?;
        let (tx, observed) = watch::channel(None);
        let task = runtime.spawn(follow(framework.clone(), path.to_owned(), kind.driver(), tx)).abort_handle();
        Ok(LeaderObserver { path: path.to_owned(), observed, task })
    }

    /// The election's path.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The leader as of the last read (`None`: no candidate, or not read yet).
    pub fn leader(&self) -> Option<Participant> {
        self.observed.borrow().clone().flatten()
    }

    /// Waits for the first read, then returns the leader it found.
    ///
    /// # Errors
    /// [`Error::Closed`] when the observer's task ended (its framework closed) first.
    ///
    /// # Cancel safety
    /// Cancel-safe: it only waits.
    pub async fn current(&self) -> Result<Option<Participant>> {
        let mut observed = self.observed.clone();
        let read = observed.wait_for(Option::is_some).await.map(|o| o.clone().flatten());
        read.map_err(|_| Error::Closed)
    }

    /// Waits until a candidate with id `id` leads, at most `timeout`; the leader, or `None`
    /// when the time ran out.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a zero timeout (the leader now is
    /// [`current`](Self::current)'s); [`Error::Closed`] when the observer's task ended first.
    ///
    /// # Cancel safety
    /// Cancel-safe: it only waits.
    pub async fn wait_for_leader(&self, id: &str, timeout: Duration) -> Result<Option<Participant>> {
        let deadline = deadline::of_wait(timeout)?;
        let mut observed = self.observed.clone();
        let wait = observed.wait_for(|o| matches!(o, Some(Some(p)) if p.id == id));
        let found = match tokio::time::timeout_at(deadline, wait).await {
            Ok(Ok(o)) => Ok(o.clone().flatten()),
            Ok(Err(_)) => Err(Error::Closed),
            Err(_) => Ok(None),
        };
        found
    }

    /// The leader after every change the observer sees: first the leader of its first read,
    /// then each new one (`None` while no candidate is there). Changes closer together than
    /// the consumer reads may be merged: the stream always ends up at the current leader, and
    /// never repeats one. Ends when the observer's framework closes.
    pub fn changes(&self) -> LeaderChanges {
        let observed = self.observed.clone();
        let stream = futures::stream::unfold((observed, true), |(mut observed, first)| async move {
            let next = if first {
                observed.wait_for(Option::is_some).await.ok().map(|o| o.clone().flatten())
            } else {
                observed.changed().await.ok().map(|()| observed.borrow_and_update().clone().flatten())
            };
            next.map(|leader| (leader, (observed, false)))
        });
        LeaderChanges { inner: stream.boxed() }
    }
}

/// The stream of [`LeaderObserver::changes`].
pub struct LeaderChanges {
    inner: BoxStream<'static, Option<Participant>>,
}

impl std::fmt::Debug for LeaderChanges {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeaderChanges").finish_non_exhaustive()
    }
}

impl Stream for LeaderChanges {
    type Item = Option<Participant>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.inner.poll_next_unpin(cx)
    }
}

/// The observer's task: a persistent watch on the election's directory (one-shot watches
/// standing in on a server without them), and a read of the leader at every resync and after
/// every change, published when the leader changed.
///
/// The watch is a [`SessionWatch`] in the mode the session's own lock mirror of a directory
/// uses, so a candidate waiting on the same framework (whose mirror watches the directory)
/// shares it rather than being refused; the reads set no watch of their own.
async fn follow(framework: Framework, path: String, driver: StandardDriver, tx: watch::Sender<Observed>) {
    let mut pause = rejoin_pause();
    loop {
        if !wait_until_usable(&framework).await {
            return;
        }
        let Ok(full) = framework.full_path(&path) else { return };
        let mut watch = match SessionWatch::add_or_emulate(
            &framework,
            &full,
            WatchMode::PersistentRecursive,
            Depth::Children,
        )
        .await
        {
            Ok(watch) => watch,
            Err(Error::Closed) => return,
            Err(e) => {
                tracing::debug!(path = %path, error = %e, "leader observer: watching again after a pause");
                pause.backoff().await;
                continue;
            }
        };
        loop {
            match watch.next().await {
                None => {
                    if framework.is_closed() {
                        return;
                    }
                    break;
                }
                Some(WatchItem::Refused(e)) => {
                    tracing::debug!(path = %path, error = %e, "leader observer: the watch was refused");
                    pause.backoff().await;
                    break;
                }
                Some(WatchItem::Interrupted | WatchItem::Adding) => continue,
                Some(WatchItem::Resync(_) | WatchItem::Event(_)) => {
                    // Changes that came meanwhile are covered by the read that follows.
                    drop(watch.queued());
                    loop {
                        match read(&framework, &path, &driver).await {
                            Ok(leader) => {
                                pause = rejoin_pause();
                                publish(&tx, leader);
                                break;
                            }
                            Err(Error::Closed) => return,
                            Err(e) => {
                                tracing::debug!(path = %path, error = %e, "leader observer: reading again after a pause");
                                pause.backoff().await;
                                // The next read covers what came meanwhile (the watch's queue
                                // does not grow while reads fail); a watch that broke is
                                // added again first, and its resync reads.
                                drop(watch.queued());
                                if !watch.is_live_now() {
                                    break;
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// Publishes `leader` when it is not the one published (by node).
fn publish(tx: &watch::Sender<Observed>, leader: Option<Participant>) {
    tx.send_if_modified(|o| {
        let node = |o: &Observed| o.as_ref().map(|l| l.as_ref().map(|p| p.node.clone()));
        let changed = node(o) != Some(leader.as_ref().map(|p| p.node.clone()));
        if changed {
            *o = Some(leader);
        }
        changed
    });
}

/// Lists the election and reads the first candidate's id (no watch: the directory's
/// persistent watch reports the changes).
async fn read(framework: &Framework, dir: &str, driver: &StandardDriver) -> Result<Option<Participant>> {
    let mut children = match framework.get_children(dir).await {
        Ok(children) => children,
        Err(Error::ZooKeeper(ZkError::NoNode)) => return Ok(None),
        Err(e) => return Err(e),
    };
    driver.sort(&mut children);
    for child in children {
        let node = path::join(dir, &child);
        match framework.get_data(&node).await {
            Ok((data, _)) => {
                let id = String::from_utf8_lossy(&data).into_owned();
                return Ok(Some(Participant { id, is_leader: true, node }));
            }
            Err(Error::ZooKeeper(ZkError::NoNode)) => continue,
            Err(e) => return Err(e),
        }
    }
    Ok(None)
}
