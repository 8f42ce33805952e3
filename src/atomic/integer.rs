//! `DistributedAtomicInteger`: a 32-bit counter in one node (4 big-endian bytes).

use std::sync::Arc;

use super::number::{Counter, Number};
use super::result::{AtomicValue, PromotedToLock};
use crate::error::Result;
use crate::framework::Framework;
use crate::retry::RetryPolicy;

/// A 32-bit counter shared by a fleet (Curator's `DistributedAtomicInteger`; same node, same 4
/// big-endian bytes). Every change is a read and a write at the version read (or a create
/// when the node is missing), repeated under the retry policy and then, if configured, under
/// a [`PromotedToLock`]. Arithmetic wraps, as Java's does.
///
/// A handle keeps the bytes and version its own last reply found, with a persistent watch
/// on the node (one `AddWatch` per session, from the handle's second operation on): while
/// the watch reports no change, a change skips the read and is one versioned write.
/// Another session's write, the node deleted, or a broken connection drops what it knows,
/// and the next try reads first, as Curator's always does. While a handle watches, the
/// framework refuses its own one-shot watches on the node (on ZooKeeper 3.6-3.8 they would
/// silence the persistent one); code that shares the session's raw client must not set any.
///
/// A change whose write broke mid-flight is settled by reading the node back when that
/// proves it was not applied, and otherwise reported as
/// [`Error::OutcomeUnknown`](crate::Error::OutcomeUnknown): it is never sent again on a guess, so an increment is never
/// applied twice.
///
/// ```no_run
/// # async fn example(fw: zk_recipes::Framework) -> zk_recipes::Result<()> {
/// use std::time::Duration;
/// use zk_recipes::retry::RetryNTimes;
/// use zk_recipes::DistributedAtomicInteger;
///
/// let hits = DistributedAtomicInteger::new(&fw, "/stats/hits", RetryNTimes::new(10, Duration::from_millis(10)))?;
/// let result = hits.increment().await?;
/// if result.succeeded() {
///     println!("{} -> {}", result.pre_value(), result.post_value());
/// }
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct DistributedAtomicInteger {
    counter: Counter<i32>,
}

impl DistributedAtomicInteger {
    /// A counter at `path`, its optimistic tries under `retry`. Does no I/O.
    ///
    /// # Errors
    /// [`Error::InvalidPath`](crate::Error::InvalidPath) for an invalid path, the root or a path under `/zookeeper`.
    pub fn new(framework: &Framework, path: &str, retry: impl RetryPolicy) -> Result<Self> {
        Ok(DistributedAtomicInteger { counter: Counter::new(framework, path, Arc::new(retry), None)? })
    }

    /// A counter whose operations fall back to `promoted` when the optimistic tries are used
    /// up (Curator's constructor with a `PromotedToLock`).
    ///
    /// # Errors
    /// [`Error::InvalidPath`](crate::Error::InvalidPath) for an invalid counter or lock path.
    pub fn with_promotion(
        framework: &Framework,
        path: &str,
        retry: impl RetryPolicy,
        promoted: PromotedToLock,
    ) -> Result<Self> {
        Ok(DistributedAtomicInteger { counter: Counter::new(framework, path, Arc::new(retry), Some(promoted))? })
    }

    /// The counter's path.
    pub fn path(&self) -> &str {
        self.counter.path()
    }

    /// The current value (0 when the node does not exist); one read, always succeeded.
    ///
    /// # Errors
    /// [`Error::CorruptData`](crate::Error::CorruptData) when the node does not hold 4 bytes (or none); the server's
    /// refusal; a connection error the retry policy gave up on.
    ///
    /// # Cancel safety
    /// Cancel-safe: a read changes nothing.
    pub async fn get(&self) -> Result<AtomicValue<i32>> {
        self.counter.get().await
    }

    /// Adds 1.
    ///
    /// # Errors
    /// [`Error::OutcomeUnknown`](crate::Error::OutcomeUnknown) when a connection loss leaves it unknown whether the write
    /// was applied (do not retry blindly: it may count twice); [`Error::CorruptData`](crate::Error::CorruptData) when the
    /// node does not hold an integer; the server's refusal; a connection error the retry policy
    /// gave up on.
    ///
    /// # Cancel safety
    /// A cancelled operation may have been applied on the server (once at most).
    pub async fn increment(&self) -> Result<AtomicValue<i32>> {
        self.counter.add("increment", Number::ONE).await
    }

    /// Subtracts 1.
    ///
    /// # Errors
    /// As [`increment`](Self::increment).
    ///
    /// # Cancel safety
    /// A cancelled operation may have been applied on the server (once at most).
    pub async fn decrement(&self) -> Result<AtomicValue<i32>> {
        self.counter.subtract("decrement", Number::ONE).await
    }

    /// Adds `delta`.
    ///
    /// # Errors
    /// As [`increment`](Self::increment).
    ///
    /// # Cancel safety
    /// A cancelled operation may have been applied on the server (once at most).
    pub async fn add(&self, delta: i32) -> Result<AtomicValue<i32>> {
        self.counter.add("add", delta).await
    }

    /// Subtracts `delta`.
    ///
    /// # Errors
    /// As [`increment`](Self::increment).
    ///
    /// # Cancel safety
    /// A cancelled operation may have been applied on the server (once at most).
    pub async fn subtract(&self, delta: i32) -> Result<AtomicValue<i32>> {
        self.counter.subtract("subtract", delta).await
    }

    /// Sets `value` whatever the node holds, through the same versioned tries (Curator's
    /// `trySet`).
    ///
    /// # Errors
    /// As [`increment`](Self::increment).
    ///
    /// # Cancel safety
    /// A cancelled operation may have been applied on the server.
    pub async fn try_set(&self, value: i32) -> Result<AtomicValue<i32>> {
        self.counter.try_set(value).await
    }

    /// Sets `new` only if the node holds exactly the 4 bytes of `expected`: one read and one
    /// versioned write, no retry, no lock; a missing node fails (Curator's `compareAndSet`).
    ///
    /// # Errors
    /// As [`increment`](Self::increment).
    ///
    /// # Cancel safety
    /// A cancelled operation may have been applied on the server.
    pub async fn compare_and_set(&self, expected: i32, new: i32) -> Result<AtomicValue<i32>> {
        self.counter.compare_and_set(expected, new).await
    }

    /// Writes `value` unconditionally, creating the node if needed (Curator's `forceSet`).
    ///
    /// # Errors
    /// The server's refusal; a connection error the retry policy gave up on.
    ///
    /// # Cancel safety
    /// A cancelled write may still happen on the server.
    pub async fn force_set(&self, value: i32) -> Result<()> {
        self.counter.force_set(value).await
    }

    /// Creates the node holding `value`; false when it exists already (never overwrites).
    ///
    /// # Errors
    /// [`Error::OutcomeUnknown`](crate::Error::OutcomeUnknown) when a connection loss leaves it unknown whether the node is
    /// ours; the server's refusal.
    ///
    /// # Cancel safety
    /// A cancelled create may still happen on the server.
    pub async fn initialize(&self, value: i32) -> Result<bool> {
        self.counter.initialize(value).await
    }
}
