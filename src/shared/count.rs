//! `SharedCount`: a [`SharedValue`] holding a 4-byte big-endian count (Curator's
//! `SharedCount`).

use std::pin::Pin;
use std::task::{Context, Poll};

use futures::{Stream, StreamExt};

use super::value::{SharedValue, SharedValueChanges};
use super::version::VersionedValue;
use crate::error::{Error, Result};
use crate::framework::{Framework, ListenerHandle};
use crate::protocol::values::{decode_count, encode_count, COUNT_EXPECTED};

/// A count shared by a fleet (Curator's `SharedCount`): one persistent node holding the count
/// as 4 big-endian bytes, kept current locally as [`SharedValue`] keeps its bytes.
///
/// A node that does not hold exactly 4 bytes (written by something else) is reported as
/// [`Error::CorruptData`] by every read of the count, never read as a number.
///
/// ```no_run
/// # async fn example(fw: zk_recipes::Framework) -> zk_recipes::Result<()> {
/// use zk_recipes::SharedCount;
///
/// let workers = SharedCount::new(&fw, "/config/workers", 4)?;
/// workers.start().await?;
/// loop {
///     let seen = workers.versioned_count()?;
///     if workers.try_set(&seen, seen.value() + 1).await? {
///         break;
///     }
/// }
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct SharedCount {
    value: SharedValue,
}

fn decode(path: &str, bytes: &[u8]) -> Result<i32> {
    decode_count(bytes).map_err(|e| Error::CorruptData {
        path: path.to_owned(),
        expected: COUNT_EXPECTED,
        reason: e.found,
    })
}

fn decode_versioned(path: &str, versioned: VersionedValue<Vec<u8>>) -> Result<VersionedValue<i32>> {
    let count = decode(path, versioned.value())?;
    Ok(versioned.map(|_| count))
}

impl SharedCount {
    /// A shared count at `path`, created with `seed` if the node does not exist. Does no I/O.
    ///
    /// # Errors
    /// [`Error::InvalidPath`] for an invalid path, the root or a path under `/zookeeper`.
    pub fn new(framework: &Framework, path: &str, seed: i32) -> Result<SharedCount> {
        Ok(SharedCount { value: SharedValue::new(framework, path, encode_count(seed).to_vec())? })
    }

    /// The node's path.
    pub fn path(&self) -> &str {
        self.value.path()
    }

    /// Creates the node with the seed unless it exists, reads it, and starts following it.
    ///
    /// # Errors
    /// As [`SharedValue::start`]; [`Error::CorruptData`] when the node does not hold 4 bytes
    /// (it is followed anyway, and a valid count written later is read).
    ///
    /// # Cancel safety
    /// As [`SharedValue::start`].
    pub async fn start(&self) -> Result<()> {
        self.value.start().await?;
        self.count().map(drop)
    }

    /// Stops following the node (the same as dropping the count).
    pub fn close(&self) {
        self.value.close();
    }

    /// The current count (the seed before [`start`](Self::start)).
    ///
    /// # Errors
    /// [`Error::CorruptData`] when the node does not hold 4 bytes.
    pub fn count(&self) -> Result<i32> {
        decode(self.path(), &self.value.value())
    }

    /// The current count with the version it was read at, for [`try_set`](Self::try_set).
    ///
    /// # Errors
    /// [`Error::CorruptData`] when the node does not hold 4 bytes.
    pub fn versioned_count(&self) -> Result<VersionedValue<i32>> {
        decode_versioned(self.path(), self.value.versioned_value())
    }

    /// Writes `count` whatever the node holds (Curator's `setCount`).
    ///
    /// # Errors
    /// As [`SharedValue::set`].
    ///
    /// # Cancel safety
    /// A cancelled write may still happen on the server.
    pub async fn set(&self, count: i32) -> Result<()> {
        self.value.set(&encode_count(count)).await
    }

    /// Writes `count` only if the node still holds `previous` at its version (Curator's
    /// `trySetCount`): true when written; false when someone else changed it first (the
    /// local copy is then current again: read [`versioned_count`](Self::versioned_count) and
    /// retry).
    ///
    /// # Errors
    /// As [`SharedValue::try_set`], including [`Error::OutcomeUnknown`] when a connection loss
    /// leaves it unknown whether the write was applied: do not simply retry an increment then,
    /// it could count twice.
    ///
    /// # Cancel safety
    /// A cancelled write may still happen on the server.
    pub async fn try_set(&self, previous: &VersionedValue<i32>, count: i32) -> Result<bool> {
        let previous = previous.clone().map(|c| encode_count(c).to_vec());
        self.value.try_set(&previous, &encode_count(count)).await
    }

    /// Calls `listener` with every new count from now on (a node that does not hold 4 bytes
    /// gives an [`Error::CorruptData`]), as [`SharedValue::add_listener`].
    ///
    /// # Errors
    /// [`Error::NotStarted`] outside a Tokio runtime.
    pub fn add_listener<F>(&self, listener: F) -> Result<ListenerHandle>
    where
        F: Fn(Result<VersionedValue<i32>>) + Send + Sync + 'static,
    {
        let path = self.path().to_owned();
        self.value.add_listener(move |v| listener(decode_versioned(&path, v)))
    }

    /// The local copy's raw bytes, for a semaphore sized by this count.
    pub(crate) fn raw_watch(&self) -> tokio::sync::watch::Receiver<VersionedValue<Vec<u8>>> {
        self.value.watch()
    }

    /// Every new count from now on, as a stream (see [`SharedValue::changes`]).
    pub fn changes(&self) -> SharedCountChanges {
        SharedCountChanges { path: self.path().to_owned(), inner: self.value.changes() }
    }
}

/// The counts of a [`SharedCount`] as they change ([`SharedCount::changes`]).
#[must_use = "streams do nothing unless polled"]
#[derive(Debug)]
pub struct SharedCountChanges {
    path: String,
    inner: SharedValueChanges,
}

impl Stream for SharedCountChanges {
    type Item = Result<VersionedValue<i32>>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        this.inner.poll_next_unpin(cx).map(|v| v.map(|v| decode_versioned(&this.path, v)))
    }
}
