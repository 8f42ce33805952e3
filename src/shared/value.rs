//! `SharedValue`: one node's bytes, shared by a fleet, with compare-and-set and change
//! notification (Curator's `SharedValue`).

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures::stream::BoxStream;
use futures::{Stream, StreamExt};
use tokio::sync::watch;
use tokio::task::AbortHandle;

use super::follow::{self, Follower};
use super::mirror;
use super::node_watch::NodeWatch;
use super::version::VersionedValue;
use super::versioned::{set_versioned, Cas};
use crate::error::{Error, Result, ZkError};
use crate::framework::{Framework, ListenerHandle};
use crate::path;
use crate::sync::Mutex;

/// Bytes in one persistent node, shared by every process that opens it, kept current locally
/// (Curator's `SharedValue`; same node, same bytes, so Rust and Java processes share it).
///
/// [`start`](Self::start) creates the node with the seed if it does not exist (an existing
/// value always wins) and reads it; from then on a background task keeps the local copy
/// current with a persistent watch on the node (one-shot watches on a server without
/// persistent watches), reads again after every change another writer makes, after every
/// reconnection and every new session (a change made meanwhile is not missed), and follows the
/// node if it is deleted and made again. The value's own writes cost no read: the copy takes
/// their bytes, and the watch shows whether anything else changed. Copies are ordered by the
/// node's `mzxid`, so a version that wrapped after `i32::MAX` writes does not freeze the copy.
///
/// ```no_run
/// # async fn example(fw: zk_recipes::Framework) -> zk_recipes::Result<()> {
/// use zk_recipes::SharedValue;
///
/// let config = SharedValue::new(&fw, "/config/mode", b"normal".to_vec())?;
/// config.start().await?;
/// let seen = config.versioned_value();
/// if !config.try_set(&seen, b"maintenance").await? {
///     // someone else changed it first; `config.value()` is the newer value
/// }
/// config.close();
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct SharedValue {
    framework: Framework,
    path: String,
    seed: Vec<u8>,
    tx: watch::Sender<VersionedValue<Vec<u8>>>,
    task: Mutex<Option<AbortHandle>>,
    /// Set by `start` on a server with persistent watches.
    follower: Mutex<Option<Arc<Follower>>>,
}

impl SharedValue {
    /// A shared value at `path`, `seed` being the value the node is created with if it does
    /// not exist. Does no I/O.
    ///
    /// # Errors
    /// [`Error::InvalidPath`] for an invalid path, the root or a path under `/zookeeper`.
    pub fn new(framework: &Framework, path: &str, seed: Vec<u8>) -> Result<SharedValue> {
        path::validate_recipe_path(path)?;
        let (tx, _) = watch::channel(VersionedValue::new(-1, -1, seed.clone()));
        Ok(SharedValue {
            framework: framework.clone(),
            path: path.to_owned(),
            seed,
            tx,
            task: Mutex::new(None),
            follower: Mutex::new(None),
        })
    }

    /// The node's path.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// Creates the node with the seed unless it exists (missing parents as containers), reads
    /// it, and starts following it. Starting a started value does nothing.
    ///
    /// # Errors
    /// [`Error::Closed`]/[`Error::NotStarted`]; [`Error::TooLarge`] for a seed over the request
    /// limit; [`Error::InvalidArgument`] when this framework watches the path with a persistent
    /// recursive watch (a session keeps one mode per path); the server's refusal (`NoAuth`,
    /// ...); a connection error the retry policy gave up on.
    ///
    /// # Cancel safety
    /// Cancel-safe: a cancelled start may have created the node (with the seed, as a later
    /// start would) but follows nothing; start again.
    pub async fn start(&self) -> Result<()> {
        if self.task.lock().is_some() {
            return Ok(());
        }
        match self.framework.create(&self.path).plain().data(&self.seed).await {
            Ok(_) | Err(Error::ZooKeeper(ZkError::NodeExists)) => {}
            // Sent again after a connection loss: the node is there, ours or not.
            Err(Error::OutcomeUnknown { .. }) => {}
            Err(e) => return Err(e),
        }
        let full_path = self.framework.full_path(&self.path)?;
        // A persistent watch before the first read, so no change after the read goes
        // unreported; a server without persistent watches gets one-shot watches.
        let watch = match NodeWatch::add(&self.framework, &full_path).await {
            Ok(watch) => Some(watch),
            Err(Error::ZooKeeper(ZkError::Unimplemented)) => None,
            Err(e) => return Err(e),
        };
        self.refresh().await?;
        let mut task = self.task.lock();
        if task.is_none() {
            let (fw, path, tx) = (self.framework.clone(), self.path.clone(), self.tx.clone());
            *task = Some(match watch {
                Some(watch) => {
                    let follower = Follower::with_watch(watch);
                    *self.follower.lock() = Some(follower.clone());
                    tokio::spawn(follow::run(fw, path, full_path, tx, follower)).abort_handle()
                }
                None => mirror::spawn(fw, path, tx),
            });
        }
        Ok(())
    }

    /// Stops following the node (the same as dropping the value). The local copy keeps its
    /// last value; listeners and streams end.
    pub fn close(&self) {
        if let Some(task) = self.task.lock().take() {
            task.abort();
        }
        if let Some(follower) = self.follower.lock().take() {
            follower.stop();
        }
    }

    /// The start of a write, for the follower to tell its own event from others'.
    fn begin_write(&self) -> Option<follow::Write> {
        let follower = self.follower.lock().clone()?;
        follower.begin_write()
    }

    /// The current value (the seed before [`start`](Self::start)).
    pub fn value(&self) -> Vec<u8> {
        self.tx.borrow().value.clone()
    }

    /// The current value with the version it was read at, for [`try_set`](Self::try_set).
    pub fn versioned_value(&self) -> VersionedValue<Vec<u8>> {
        self.tx.borrow().clone()
    }

    /// Refuses a write before [`start`](Self::start) or after [`close`](Self::close), as
    /// Curator's `checkState(STARTED)` does: the node may not exist yet, and the local copy
    /// would not follow it.
    fn check_started(&self) -> Result<()> {
        if self.task.lock().is_none() {
            return Err(Error::NotStarted);
        }
        Ok(())
    }

    /// Writes `value` whatever the node holds (Curator's `setValue`).
    ///
    /// # Errors
    /// [`Error::NotStarted`] before [`start`](Self::start) or after [`close`](Self::close);
    /// [`Error::TooLarge`]; `NoNode` when the node was deleted; the server's refusal; a
    /// connection error the retry policy gave up on.
    ///
    /// # Cancel safety
    /// A cancelled write may still happen on the server.
    pub async fn set(&self, value: &[u8]) -> Result<()> {
        self.check_started()?;
        let write = self.begin_write();
        let stat = self.framework.set_data(&self.path, value).plain().await?;
        if let Some(write) = write {
            write.written();
        }
        mirror::offer(&self.tx, value.to_vec(), &stat);
        Ok(())
    }

    /// Writes `value` only if the node still holds `previous` at its version (Curator's
    /// `trySetValue`): true when written; false when the local copy or the node moved on
    /// (the local copy is then read again, so [`versioned_value`](Self::versioned_value) gives
    /// the newer value to retry with). No I/O when `previous` is not the local copy.
    ///
    /// # Errors
    /// [`Error::NotStarted`] before [`start`](Self::start) or after [`close`](Self::close);
    /// [`Error::InvalidArgument`] when `previous` has version -1 (read before the node was, or
    /// a version that wrapped to -1: ZooKeeper would read it as "any version");
    /// [`Error::OutcomeUnknown`] when the connection broke while the write was in flight and
    /// reading back cannot tell whether it was applied (another writer may have written the
    /// same bytes); `NoNode` when the node was deleted; [`Error::TooLarge`]; the server's
    /// refusal; a connection error the retry policy gave up on.
    ///
    /// # Cancel safety
    /// A cancelled write may still happen on the server.
    pub async fn try_set(&self, previous: &VersionedValue<Vec<u8>>, value: &[u8]) -> Result<bool> {
        self.check_started()?;
        {
            let current = self.tx.borrow();
            if current.zxid != previous.zxid || current.value != previous.value {
                return Ok(false);
            }
        }
        let write = self.begin_write();
        match set_versioned(&self.framework, &self.path, value, previous.version, "try_set").await? {
            Cas::Written(stat) => {
                if let Some(write) = write {
                    write.written();
                }
                mirror::offer(&self.tx, value.to_vec(), &stat);
                Ok(true)
            }
            Cas::Conflict => {
                if let Some(write) = &write {
                    write.lost();
                }
                self.refresh().await?;
                if let Some(write) = write {
                    write.read();
                }
                Ok(false)
            }
        }
    }

    /// Calls `listener` with every new value from now on, in order, on a task of its own
    /// (Curator's `SharedValueListener`). A listener that falls behind gets the latest value,
    /// never a stale one. Dropping the handle removes it; it also ends when the `SharedValue`
    /// is dropped.
    ///
    /// # Errors
    /// [`Error::NotStarted`] outside a Tokio runtime.
    pub fn add_listener<F>(&self, listener: F) -> Result<ListenerHandle>
    where
        F: Fn(VersionedValue<Vec<u8>>) + Send + Sync + 'static,
    {
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| Error::NotStarted)?;
        let mut changes = self.changes();
        let task = runtime.spawn(async move {
            while let Some(value) = changes.next().await {
                listener(value);
            }
        });
        Ok(ListenerHandle::new(task.abort_handle()))
    }

    /// Every new value from now on, as a stream (the latest when the reader falls behind). It
    /// ends when the `SharedValue` is dropped.
    pub fn changes(&self) -> SharedValueChanges {
        SharedValueChanges::new(self.tx.subscribe())
    }

    /// A `watch` receiver of the current value (for `changed()` / `wait_for()`).
    pub fn watch(&self) -> watch::Receiver<VersionedValue<Vec<u8>>> {
        self.tx.subscribe()
    }

    /// Reads the node and stores what it holds.
    pub(crate) async fn refresh(&self) -> Result<()> {
        let (data, stat) = self.framework.get_data(&self.path).plain().await?;
        mirror::offer(&self.tx, data, &stat);
        Ok(())
    }
}

impl Drop for SharedValue {
    fn drop(&mut self) {
        self.close();
    }
}

/// The values of a [`SharedValue`] as they change ([`SharedValue::changes`]).
#[must_use = "streams do nothing unless polled"]
pub struct SharedValueChanges {
    inner: BoxStream<'static, VersionedValue<Vec<u8>>>,
}

impl std::fmt::Debug for SharedValueChanges {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedValueChanges").finish_non_exhaustive()
    }
}

impl SharedValueChanges {
    fn new(mut rx: watch::Receiver<VersionedValue<Vec<u8>>>) -> Self {
        rx.borrow_and_update();
        let inner = futures::stream::unfold(rx, |mut rx| async move {
            rx.changed().await.ok()?;
            let value = rx.borrow_and_update().clone();
            Some((value, rx))
        });
        SharedValueChanges { inner: inner.boxed() }
    }
}

impl Stream for SharedValueChanges {
    type Item = VersionedValue<Vec<u8>>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.inner.as_mut().poll_next(cx)
    }
}
