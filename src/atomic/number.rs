//! The counter behind [`DistributedAtomicLong`](crate::DistributedAtomicLong) and
//! [`DistributedAtomicInteger`](crate::DistributedAtomicInteger): the engine's versioned tries
//! over a big-endian number format (8 or 4 bytes, as Curator writes them).

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

/// A number format of a counter node. Arithmetic wraps, as Java's does.
pub(crate) trait Number: Copy + Send + Sync + 'static {
    /// What the node must hold, in words (for [`Error::CorruptData`]).
    const EXPECTED: &'static str;
    const ONE: Self;
    fn encode(self) -> Vec<u8>;
    /// The number in `bytes` (no bytes: 0).
    fn decode(bytes: &[u8]) -> std::result::Result<Self, ValueError>;
    fn plus(self, other: Self) -> Self;
    fn minus(self, other: Self) -> Self;
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
