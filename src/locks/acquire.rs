//! The one acquire front-end.
//!
//! A recipe implements [`Acquire`] once (how to take it, in a [`Mode`]) and its guard
//! implements [`Hold`]; from those come the three acquire forms every recipe offers
//! ([`acquire`], [`try_acquire`], [`acquire_timeout`], which each recipe's written-out
//! methods of those names call) and the public [`Lockable`] that
//! [`MultiLock`](crate::MultiLock) composes.
//!
//! The mode decides the result type: waiting yields a guard, trying yields an optional guard,
//! so no form has a case it cannot reach.

use std::fmt::Debug;
use std::future::Future;
use std::time::Duration;

use async_trait::async_trait;

use crate::error::{Error, Result};
use crate::framework::metrics::LockMetrics;

/// How an acquire treats a lock that is not free: wait for it ([`Block`]) or give up at once
/// ([`Try`]). The result type follows: a guard, or an optional guard.
pub trait Mode: Copy + Send + Sync + 'static {
    /// What an acquire in this mode returns for a guard `G`.
    type Out<G: Send>: Send;

    /// The result for a lock that is not free now, or `None` to wait for it.
    fn busy<G: Send>() -> Option<Self::Out<G>>;

    /// The result for a guard.
    fn held<G: Send>(guard: G) -> Self::Out<G>;

    /// The guard inside a result, or the result to return as is (a lock that was busy).
    fn into_held<G: Send, H: Send>(out: Self::Out<G>) -> Result<G, Self::Out<H>>;

    /// Takes a lock of a [`MultiLock`](crate::MultiLock) in this mode.
    fn lock_part(lock: &dyn Lockable) -> impl Future<Output = Result<Self::Out<Box<dyn LockHold>>>> + Send;

    /// Turns the guard inside a result into another.
    fn map<G: Send, H: Send>(out: Self::Out<G>, f: impl FnOnce(G) -> H) -> Self::Out<H> {
        match Self::into_held::<G, H>(out) {
            Ok(guard) => Self::held(f(guard)),
            Err(busy) => busy,
        }
    }
}

/// Waits until the lock is free.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Block;

impl Mode for Block {
    type Out<G: Send> = G;

    fn busy<G: Send>() -> Option<G> {
        None
    }

    fn held<G: Send>(guard: G) -> G {
        guard
    }

    fn into_held<G: Send, H: Send>(out: G) -> Result<G, H> {
        Ok(out)
    }

    fn lock_part(lock: &dyn Lockable) -> impl Future<Output = Result<Box<dyn LockHold>>> + Send {
        lock.lock()
    }
}

/// Gives up at once when the lock is not free.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Try;

impl Mode for Try {
    type Out<G: Send> = Option<G>;

    fn busy<G: Send>() -> Option<Option<G>> {
        Some(None)
    }

    fn held<G: Send>(guard: G) -> Option<G> {
        Some(guard)
    }

    fn into_held<G: Send, H: Send>(out: Option<G>) -> Result<G, Option<H>> {
        out.ok_or(None)
    }

    fn lock_part(lock: &dyn Lockable) -> impl Future<Output = Result<Option<Box<dyn LockHold>>>> + Send {
        lock.try_lock()
    }
}

/// A lock handle of this crate: how to take it in either mode.
pub trait Acquire: Send + Sync + Debug {
    /// The guard an acquire returns.
    type Guard: Hold;

    /// Takes the lock in mode `M`.
    fn acquire_with<M: Mode>(&self) -> impl Future<Output = Result<M::Out<Self::Guard>>> + Send;

    /// True when this process holds the lock through this handle (or a clone).
    fn is_acquired_in_this_process(&self) -> bool;

    /// The handle's metrics (waits, waiters, timeouts); `None` for one that has none of its
    /// own (a multi-lock: its locks count).
    fn lock_metrics(&self) -> Option<&LockMetrics> {
        None
    }
}

/// A guard of this crate, as a [`MultiLock`](crate::MultiLock) keeps it.
pub trait Hold: Send + Sync + Debug + 'static {
    /// The guard, type-erased: the [`LockHold`] behind it (its private core, for a public
    /// guard that wraps one).
    fn into_lock_hold(self) -> Box<dyn LockHold>;
}

/// Waits until `lock` is held.
pub(crate) async fn acquire<L: Acquire>(lock: &L) -> Result<L::Guard> {
    let waiting = lock.lock_metrics().map(LockMetrics::waiting);
    let guard = lock.acquire_with::<Block>().await?;
    if let Some(waiting) = waiting {
        waiting.acquired();
    }
    Ok(guard)
}

/// Takes `lock` if it is free now.
pub(crate) async fn try_acquire<L: Acquire>(lock: &L) -> Result<Option<L::Guard>> {
    lock.acquire_with::<Try>().await
}

/// Waits at most `timeout` for `lock`. A refused upgrade (a read holder asking for the write
/// lock) is `None` at once, as Curator's timed acquire returns false there.
pub(crate) async fn acquire_timeout<L: Acquire>(lock: &L, timeout: Duration) -> Result<Option<L::Guard>> {
    match within(timeout, acquire(lock)).await {
        Err(Error::UpgradeRefused { .. }) => Ok(None),
        Ok(None) => {
            if let Some(metrics) = lock.lock_metrics() {
                metrics.timed_out();
            }
            Ok(None)
        }
        other => other,
    }
}

/// Runs a cancel-safe acquire for at most `timeout` (all of it: connection waits and retries
/// included); `None` when the time ran out.
///
/// # Errors
/// [`Error::InvalidArgument`] for a zero timeout (the non-waiting form is `try_acquire`).
pub(crate) async fn within<T>(timeout: Duration, acquire: impl Future<Output = Result<T>>) -> Result<Option<T>> {
    if timeout.is_zero() {
        return Err(Error::invalid_argument("timeout", "must be greater than zero; use try_acquire()"));
    }
    // tokio saturates a deadline past the end of time, so `Duration::MAX` waits forever.
    match tokio::time::timeout(timeout, acquire).await {
        Ok(result) => result.map(Some),
        Err(_) => Ok(None),
    }
}

/// A lock a [`MultiLock`](crate::MultiLock) can take (Curator's `InterProcessLock`).
///
/// Implemented by every lock of this crate: [`InterProcessMutex`](crate::InterProcessMutex),
/// [`InterProcessSemaphoreMutex`](crate::InterProcessSemaphoreMutex),
/// [`InterProcessSemaphore`](crate::InterProcessSemaphore) (one lease) and
/// [`MultiLock`](crate::MultiLock) itself. Implement it for your own lock types to mix them in.
///
/// Contract: both methods must be cancel-safe (a dropped future holds nothing afterwards), since
/// a `MultiLock` applies its deadline by dropping them.
#[async_trait]
pub trait Lockable: Send + Sync + Debug {
    /// Waits until the lock is held.
    ///
    /// # Errors
    /// Whatever the lock reports; the `MultiLock` rolls back and returns it.
    ///
    /// # Cancel safety
    /// Must be cancel-safe.
    async fn lock(&self) -> Result<Box<dyn LockHold>>;

    /// Takes the lock if it is free right now; never waits.
    ///
    /// # Errors
    /// As [`lock`](Self::lock).
    ///
    /// # Cancel safety
    /// Must be cancel-safe.
    async fn try_lock(&self) -> Result<Option<Box<dyn LockHold>>>;

    /// True when this process holds the lock through this handle.
    fn is_acquired_in_this_process(&self) -> bool;
}

/// A held lock, type-erased: what [`Lockable::lock`] returns. Dropping it releases the lock
/// in the background, as the concrete guard's `Drop` does.
#[async_trait]
#[must_use = "dropping the hold releases the lock"]
pub trait LockHold: Send + Sync + Debug {
    /// Releases the lock and reports the outcome.
    ///
    /// # Errors
    /// Whatever the release reports.
    ///
    /// # Cancel safety
    /// Must be cancel-safe: a cancelled release finishes in the background.
    async fn release(self: Box<Self>) -> Result<()>;

    /// Whether the lock can still be trusted (a local check).
    fn is_held(&self) -> bool;

    /// Completes when the lock can no longer be trusted.
    ///
    /// # Cancel safety
    /// Must be cancel-safe: it only observes.
    async fn lost(&self);

    /// The fencing tokens of the nodes held (one per lock; a multi-lock's in acquisition order).
    fn fencing_tokens(&self) -> Vec<i64>;
}

#[async_trait]
impl<L: Acquire> Lockable for L {
    async fn lock(&self) -> Result<Box<dyn LockHold>> {
        Ok(acquire(self).await?.into_lock_hold())
    }

    async fn try_lock(&self) -> Result<Option<Box<dyn LockHold>>> {
        Ok(try_acquire(self).await?.map(Hold::into_lock_hold))
    }

    fn is_acquired_in_this_process(&self) -> bool {
        Acquire::is_acquired_in_this_process(self)
    }
}
