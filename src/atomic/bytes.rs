//! `DistributedAtomicValue`: raw bytes in one node, changed atomically.

use std::sync::Arc;

use super::engine::Engine;
use super::result::{AtomicValue, PromotedToLock};
use crate::error::Result;
use crate::framework::Framework;
use crate::retry::RetryPolicy;

/// Bytes shared by a fleet, changed atomically (Curator's `DistributedAtomicValue`): the
/// engine under [`DistributedAtomicLong`](crate::DistributedAtomicLong), without a number
/// format. A missing node reads as `None`.
#[derive(Debug)]
pub struct DistributedAtomicValue {
    engine: Engine,
}

impl DistributedAtomicValue {
    /// A value at `path`, its optimistic tries under `retry`. Does no I/O.
    ///
    /// # Errors
    /// [`Error::InvalidPath`](crate::Error::InvalidPath) for an invalid path, the root or a
    /// path under `/zookeeper`; [`Error::InvalidArgument`](crate::Error::InvalidArgument) for
    /// a policy that [`RetryPolicy::validate`] refuses (a zero sleep).
    pub fn new(framework: &Framework, path: &str, retry: impl RetryPolicy) -> Result<Self> {
        Ok(DistributedAtomicValue { engine: Engine::new(framework, path, Arc::new(retry), None)? })
    }

    /// A value whose operations fall back to `promoted` when the optimistic tries are used up.
    ///
    /// # Errors
    /// [`Error::InvalidPath`](crate::Error::InvalidPath) for an invalid value or lock path;
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) for a retry policy (either
    /// one) that [`RetryPolicy::validate`] refuses.
    pub fn with_promotion(
        framework: &Framework,
        path: &str,
        retry: impl RetryPolicy,
        promoted: PromotedToLock,
    ) -> Result<Self> {
        Ok(DistributedAtomicValue { engine: Engine::new(framework, path, Arc::new(retry), Some(promoted))? })
    }

    /// The node's path.
    pub fn path(&self) -> &str {
        self.engine.path()
    }

    /// The current bytes (`None` when the node does not exist); one read, always succeeded.
    ///
    /// # Errors
    /// The server's refusal; a connection error the retry policy gave up on.
    ///
    /// # Cancel safety
    /// Cancel-safe: a read changes nothing.
    pub async fn get(&self) -> Result<AtomicValue<Option<Vec<u8>>>> {
        let value = self.engine.read().await?;
        Ok(AtomicValue::new(true, value.clone(), value, Default::default()))
    }

    /// Writes `value` through versioned tries (Curator's `trySet`).
    ///
    /// # Errors
    /// [`Error::OutcomeUnknown`](crate::Error::OutcomeUnknown) when a connection loss leaves it
    /// unknown whether the write was applied; [`Error::TooLarge`](crate::Error::TooLarge); the
    /// server's refusal; a connection error the retry policy gave up on.
    ///
    /// # Cancel safety
    /// A cancelled operation may have been applied on the server.
    pub async fn try_set(&self, value: &[u8]) -> Result<AtomicValue<Option<Vec<u8>>>> {
        let mut make = |_: &Option<Vec<u8>>| Ok(value.to_vec());
        self.engine.modify(&mut make, "try_set").await
    }

    /// Writes `new` only if the node holds exactly `expected` (byte for byte): one read, one
    /// versioned write; a missing node fails.
    ///
    /// # Errors
    /// As [`try_set`](Self::try_set).
    ///
    /// # Cancel safety
    /// A cancelled operation may have been applied on the server.
    pub async fn compare_and_set(&self, expected: &[u8], new: &[u8]) -> Result<AtomicValue<Option<Vec<u8>>>> {
        self.engine.compare_and_set(expected, new).await
    }

    /// Writes `value` unconditionally, creating the node if needed.
    ///
    /// # Errors
    /// [`Error::TooLarge`](crate::Error::TooLarge); the server's refusal; a connection error
    /// the retry policy gave up on.
    ///
    /// # Cancel safety
    /// A cancelled write may still happen on the server.
    pub async fn force_set(&self, value: &[u8]) -> Result<()> {
        self.engine.force_set(value).await
    }

    /// Creates the node holding `value`; false when it exists already.
    ///
    /// # Errors
    /// [`Error::OutcomeUnknown`](crate::Error::OutcomeUnknown) when a connection loss leaves it
    /// unknown whether the node is ours; the server's refusal.
    ///
    /// # Cancel safety
    /// A cancelled create may still happen on the server.
    pub async fn initialize(&self, value: &[u8]) -> Result<bool> {
        self.engine.initialize(value).await
    }
}
