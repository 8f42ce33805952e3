//! [`DistributedAtomicNumber`] and its two kinds, [`DistributedAtomicLong`] and
//! [`DistributedAtomicInteger`]: the engine's versioned tries over a big-endian number format
//! (8 or 4 bytes, as Curator writes them), written once for both.

use std::marker::PhantomData;
use std::sync::Arc;

use super::engine::{Bytes, Engine};
use super::result::{AtomicValue, PromotedToLock};
use crate::error::{Error, Result};
use crate::framework::Framework;
use crate::protocol::values::{
    decode_atomic_int, decode_atomic_long, encode_count, encode_long, ValueError, COUNT_EXPECTED, LONG_EXPECTED,
};
use crate::retry::RetryPolicy;

/// The numbers a [`DistributedAtomicNumber`] counts in: `i64` (Java's `long`) and `i32`
/// (Java's `int`). Arithmetic wraps, as Java's does. Implemented for those two only.
pub trait AtomicNumber: Number + std::fmt::Debug {}

impl AtomicNumber for i64 {}
impl AtomicNumber for i32 {}

/// A number format of a counter node: the crate's side of [`AtomicNumber`], public in name
/// only (it cannot be named outside the crate, so no other type can implement either).
#[allow(unreachable_pub)]
pub trait Number: Copy + Send + Sync + 'static {
    /// What the node must hold, in words (for [`Error::CorruptData`]).
    const EXPECTED: &'static str;
    const ONE: Self;
    fn encode(self) -> Vec<u8>;
    /// The number in `bytes` (no bytes: 0).
    fn decode(bytes: &[u8]) -> std::result::Result<Self, ValueError>;
    fn plus(self, other: Self) -> Self;
    fn minus(self, other: Self) -> Self;
    /// `n` as this type, `None` when it does not fit.
    fn from_u32(n: u32) -> Option<Self>;
}

impl Number for i64 {
    const EXPECTED: &'static str = LONG_EXPECTED;
    const ONE: Self = 1;
    fn encode(self) -> Vec<u8> {
        encode_long(self).to_vec()
    }
    fn decode(bytes: &[u8]) -> std::result::Result<Self, ValueError> {
        decode_atomic_long(bytes)
    }
    fn plus(self, other: Self) -> Self {
        self.wrapping_add(other)
    }
    fn minus(self, other: Self) -> Self {
        self.wrapping_sub(other)
    }
    fn from_u32(n: u32) -> Option<Self> {
        Some(i64::from(n))
    }
}

impl Number for i32 {
    const EXPECTED: &'static str = COUNT_EXPECTED;
    const ONE: Self = 1;
    fn encode(self) -> Vec<u8> {
        encode_count(self).to_vec()
    }
    fn decode(bytes: &[u8]) -> std::result::Result<Self, ValueError> {
        decode_atomic_int(bytes)
    }
    fn plus(self, other: Self) -> Self {
        self.wrapping_add(other)
    }
    fn minus(self, other: Self) -> Self {
        self.wrapping_sub(other)
    }
    fn from_u32(n: u32) -> Option<Self> {
        i32::try_from(n).ok()
    }
}

/// One counter node holding an `N`.
#[derive(Debug)]
pub(crate) struct Counter<N> {
    engine: Engine,
    number: PhantomData<fn() -> N>,
}

impl<N: Number> Counter<N> {
    pub(crate) fn new(
        framework: &Framework,
        path: &str,
        retry: Arc<dyn RetryPolicy>,
        promoted: Option<PromotedToLock>,
    ) -> Result<Self> {
        Ok(Counter { engine: Engine::new(framework, path, retry, promoted)?, number: PhantomData })
    }

    pub(crate) fn path(&self) -> &str {
        self.engine.path()
    }

    fn decode(&self, bytes: &Bytes) -> Result<N> {
        N::decode(bytes.as_deref().unwrap_or_default()).map_err(|e| Error::CorruptData {
            path: self.path().to_owned(),
            expected: N::EXPECTED,
            reason: e.found,
        })
    }

    fn done(&self, value: AtomicValue<Bytes>) -> Result<AtomicValue<N>> {
        value.try_map(|bytes| self.decode(&bytes))
    }

    pub(crate) async fn get(&self) -> Result<AtomicValue<N>> {
        let value = self.decode(&self.engine.read().await?)?;
        Ok(AtomicValue::new(true, value, value, Default::default()))
    }

    async fn modify(&self, operation: &'static str, f: impl Fn(N) -> N + Send + Sync) -> Result<AtomicValue<N>> {
        let mut make = |pre: &Bytes| Ok(f(self.decode(pre)?).encode());
        let value = self.engine.modify(&mut make, operation).await?;
        self.done(value)
    }

    pub(crate) async fn add(&self, operation: &'static str, delta: N) -> Result<AtomicValue<N>> {
        self.modify(operation, move |v| v.plus(delta)).await
    }

    pub(crate) async fn subtract(&self, operation: &'static str, delta: N) -> Result<AtomicValue<N>> {
        self.modify(operation, move |v| v.minus(delta)).await
    }

    pub(crate) async fn try_set(&self, value: N) -> Result<AtomicValue<N>> {
        self.modify("try_set", move |_| value).await
    }

    pub(crate) async fn compare_and_set(&self, expected: N, new: N) -> Result<AtomicValue<N>> {
        let value = self.engine.compare_and_set(&expected.encode(), &new.encode()).await?;
        self.done(value)
    }

    pub(crate) async fn force_set(&self, value: N) -> Result<()> {
        self.engine.force_set(&value.encode()).await
    }

    pub(crate) async fn initialize(&self, value: N) -> Result<bool> {
        self.engine.initialize(&value.encode()).await
    }
}

/// A counter shared by a fleet, of a Java `long` ([`DistributedAtomicLong`]) or `int`
/// ([`DistributedAtomicInteger`]): Curator's `DistributedAtomicLong` and
/// `DistributedAtomicInteger`, the same node holding the same 8 or 4 big-endian bytes. Every change is a read and a write at the version read (or a create
/// when the node is missing), repeated under the retry policy and then, if configured, under
/// a [`PromotedToLock`]. Arithmetic wraps, as Java's does.
///
/// A handle keeps the bytes and version its own last reply found, with a persistent watch
/// on the node (one `AddWatch` per session, from the handle's second operation on): while
/// the watch reports no change, a change skips the read and is one versioned write.
/// Another session's write, the node deleted, or a broken connection drops what it knows,
/// and the next try reads first, as Curator's always does. While a handle watches, the
/// framework sets no one-shot watch of its own on the node (its watched reads share the
/// persistent watch; on ZooKeeper 3.6-3.8 a one-shot watch would silence it); code that shares
/// the session's raw client must not set any.
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
/// use zk_recipes::DistributedAtomicLong;
///
/// let hits = DistributedAtomicLong::new(&fw, "/stats/hits", RetryNTimes::new(10, Duration::from_millis(10)))?;
/// let result = hits.increment().await?;
/// if result.succeeded() {
///     println!("{} -> {}", result.pre_value(), result.post_value());
/// }
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct DistributedAtomicNumber<N: AtomicNumber> {
    counter: Counter<N>,
}

/// A 64-bit counter (Curator's `DistributedAtomicLong`: 8 big-endian bytes). See
/// [`DistributedAtomicNumber`] for what it does.
pub type DistributedAtomicLong = DistributedAtomicNumber<i64>;

/// A 32-bit counter (Curator's `DistributedAtomicInteger`: 4 big-endian bytes). See
/// [`DistributedAtomicNumber`] for what it does.
pub type DistributedAtomicInteger = DistributedAtomicNumber<i32>;

impl<N: AtomicNumber> DistributedAtomicNumber<N> {
    /// A counter at `path`, its optimistic tries under `retry`. Does no I/O.
    ///
    /// # Errors
    /// [`Error::InvalidPath`](crate::Error::InvalidPath) for an invalid path, the root or a path under `/zookeeper`;
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) for a policy that
    /// [`RetryPolicy::validate`] refuses (a zero sleep).
    pub fn new(framework: &Framework, path: &str, retry: impl RetryPolicy) -> Result<Self> {
        Ok(DistributedAtomicNumber { counter: Counter::new(framework, path, Arc::new(retry), None)? })
    }

    /// A counter whose operations fall back to `promoted` when the optimistic tries are used
    /// up (Curator's constructor with a `PromotedToLock`).
    ///
    /// # Errors
    /// [`Error::InvalidPath`](crate::Error::InvalidPath) for an invalid counter or lock path;
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) for a retry policy (either
    /// one) that [`RetryPolicy::validate`] refuses.
    pub fn with_promotion(
        framework: &Framework,
        path: &str,
        retry: impl RetryPolicy,
        promoted: PromotedToLock,
    ) -> Result<Self> {
        Ok(DistributedAtomicNumber { counter: Counter::new(framework, path, Arc::new(retry), Some(promoted))? })
    }

    /// The counter's path.
    pub fn path(&self) -> &str {
        self.counter.path()
    }

    /// The current value (0 when the node does not exist); one read, always succeeded.
    ///
    /// # Errors
    /// [`Error::CorruptData`](crate::Error::CorruptData) when the node does not hold 8 bytes for a long, 4 for an integer (or none); the server's
    /// refusal; a connection error the retry policy gave up on.
    ///
    /// # Cancel safety
    /// Cancel-safe: a read changes nothing.
    pub async fn get(&self) -> Result<AtomicValue<N>> {
        self.counter.get().await
    }

    /// Adds 1.
    ///
    /// # Errors
    /// [`Error::OutcomeUnknown`](crate::Error::OutcomeUnknown) when a connection loss leaves it unknown whether the write
    /// was applied (do not retry blindly: it may count twice); [`Error::CorruptData`](crate::Error::CorruptData) when the
    /// node does not hold a number of `N`'s size; the server's refusal; a connection error the retry policy
    /// gave up on.
    ///
    /// # Cancel safety
    /// A cancelled operation may have been applied on the server (once at most).
    pub async fn increment(&self) -> Result<AtomicValue<N>> {
        self.counter.add("increment", N::ONE).await
    }

    /// Subtracts 1.
    ///
    /// # Errors
    /// As [`increment`](Self::increment).
    ///
    /// # Cancel safety
    /// A cancelled operation may have been applied on the server (once at most).
    pub async fn decrement(&self) -> Result<AtomicValue<N>> {
        self.counter.subtract("decrement", N::ONE).await
    }

    /// Adds `delta`.
    ///
    /// # Errors
    /// As [`increment`](Self::increment).
    ///
    /// # Cancel safety
    /// A cancelled operation may have been applied on the server (once at most).
    pub async fn add(&self, delta: N) -> Result<AtomicValue<N>> {
        self.counter.add("add", delta).await
    }

    /// Subtracts `delta`.
    ///
    /// # Errors
    /// As [`increment`](Self::increment).
    ///
    /// # Cancel safety
    /// A cancelled operation may have been applied on the server (once at most).
    pub async fn subtract(&self, delta: N) -> Result<AtomicValue<N>> {
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
    pub async fn try_set(&self, value: N) -> Result<AtomicValue<N>> {
        self.counter.try_set(value).await
    }

    /// Sets `new` only if the node holds exactly the bytes of `expected`: one read and one
    /// versioned write, no retry, no lock; a missing node fails (Curator's `compareAndSet`).
    ///
    /// # Errors
    /// As [`increment`](Self::increment).
    ///
    /// # Cancel safety
    /// A cancelled operation may have been applied on the server.
    pub async fn compare_and_set(&self, expected: N, new: N) -> Result<AtomicValue<N>> {
        self.counter.compare_and_set(expected, new).await
    }

    /// Writes `value` unconditionally, creating the node if needed (Curator's `forceSet`).
    ///
    /// # Errors
    /// The server's refusal; a connection error the retry policy gave up on.
    ///
    /// # Cancel safety
    /// A cancelled write may still happen on the server.
    pub async fn force_set(&self, value: N) -> Result<()> {
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
    pub async fn initialize(&self, value: N) -> Result<bool> {
        self.counter.initialize(value).await
    }
}
