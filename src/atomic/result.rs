//! What an atomic operation reports ([`AtomicValue`], [`AtomicStats`]) and the lock it may be
//! promoted to ([`PromotedToLock`]).

use std::sync::Arc;
use std::time::Duration;

use crate::retry::{RetryNTimes, RetryPolicy};

/// The outcome of an atomic operation (Curator's `AtomicValue`). An operation that lost every
/// race is not an error: check [`succeeded`](Self::succeeded).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AtomicValue<T> {
    succeeded: bool,
    pre_value: T,
    post_value: T,
    stats: AtomicStats,
}

impl<T> AtomicValue<T> {
    pub(crate) fn new(succeeded: bool, pre_value: T, post_value: T, stats: AtomicStats) -> Self {
        AtomicValue { succeeded, pre_value, post_value, stats }
    }

    pub(crate) fn try_map<U, E>(self, mut f: impl FnMut(T) -> Result<U, E>) -> Result<AtomicValue<U>, E> {
        Ok(AtomicValue {
            succeeded: self.succeeded,
            pre_value: f(self.pre_value)?,
            post_value: f(self.post_value)?,
            stats: self.stats,
        })
    }

    /// True when the operation was applied.
    pub fn succeeded(&self) -> bool {
        self.succeeded
    }

    /// The value before the operation (of its last attempt when it did not succeed).
    pub fn pre_value(&self) -> &T {
        &self.pre_value
    }

    /// The value after the operation; when it did not succeed, the value its last attempt
    /// tried to write (or, for a compare-and-set, the value found).
    pub fn post_value(&self) -> &T {
        &self.post_value
    }

    /// How many attempts it took, and how long.
    pub fn stats(&self) -> &AtomicStats {
        &self.stats
    }
}

/// The attempts of one atomic operation (Curator's `AtomicStats`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct AtomicStats {
    /// Tries in the optimistic phase (a versioned write each, after a read unless the handle
    /// knew the node).
    pub optimistic_tries: u32,
    /// Tries while holding the promoted lock.
    pub promoted_lock_tries: u32,
    /// Time spent in the optimistic phase.
    pub optimistic_time: Duration,
    /// Time spent acquiring, holding and releasing the promoted lock.
    pub promoted_time: Duration,
}

/// The lock an atomic operation falls back to once its optimistic tries are used up
/// (Curator's `PromotedToLock`): an [`InterProcessMutex`](crate::InterProcessMutex) at
/// `lock_path`, then tries under its own retry policy while holding it.
///
/// The lock only lowers contention among those that take it; correctness comes from the
/// versioned writes, so a process that never takes the lock is still safe.
#[derive(Debug, Clone)]
pub struct PromotedToLock {
    pub(crate) lock_path: String,
    pub(crate) max_lock_time: Option<Duration>,
    pub(crate) retry_policy: Arc<dyn RetryPolicy>,
}

impl PromotedToLock {
    /// The mutex at `lock_path` (Curator's layout: `<lock_path>/_c_<uuid>-lock-<seq>`), waited
    /// for without a limit, with exactly one try under it (Curator's defaults).
    pub fn new(lock_path: &str) -> Self {
        PromotedToLock {
            lock_path: lock_path.to_owned(),
            max_lock_time: None,
            retry_policy: Arc::new(RetryNTimes::new(0, Duration::from_millis(1))),
        }
    }

    /// Waits at most `limit` for the lock; the operation fails (not an error) when it runs out.
    /// `Duration::ZERO` takes the lock only if it is free at once (Curator's `acquire(0, ..)`).
    pub fn max_lock_time(mut self, limit: Duration) -> Self {
        self.max_lock_time = Some(limit);
        self
    }

    /// The retry policy of the tries made while holding the lock.
    pub fn retry_policy(mut self, policy: impl RetryPolicy) -> Self {
        self.retry_policy = Arc::new(policy);
        self
    }

    /// The lock path.
    pub fn lock_path(&self) -> &str {
        &self.lock_path
    }
}
