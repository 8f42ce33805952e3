//! `MultiLock`: several locks taken as one (Curator's `InterProcessMultiLock`), over any mix of
//! lock handles through the small object-safe [`Lockable`] trait.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use futures::future::FutureExt;

use super::acquire::{self, Acquire, Hold, LockHold, Lockable, Mode};
use super::critical_section::{run_until_lost, LockLost};
use super::mutex::InterProcessMutex;
use crate::error::{Error, Result};
use crate::framework::Framework;

/// Several locks acquired as one, all or nothing (Curator's `InterProcessMultiLock`).
///
/// Locks are acquired one after another in the order given; use one global order everywhere
/// to avoid deadlocks (the recipe does not sort). If any lock fails, times out or is not free
/// (for [`try_acquire`](Self::try_acquire)), the locks already taken are released in reverse
/// order and the call fails as a whole. The guard releases in reverse order and keeps going past
/// failures.
///
/// Differences from Curator: the timed form has **one** deadline for the whole set (Curator
/// gives each lock the full time), and a failing lock stops the acquisition at once (Curator
/// keeps trying the remaining locks first).
///
/// ```no_run
/// # async fn example(framework: zk_recipes::Framework) -> zk_recipes::Result<()> {
/// use std::sync::Arc;
/// use zk_recipes::{InterProcessMutex, InterProcessSemaphoreMutex, Lockable, MultiLock};
///
/// let locks: Vec<Arc<dyn Lockable>> = vec![
///     Arc::new(InterProcessMutex::new(&framework, "/locks/accounts")?),
///     Arc::new(InterProcessSemaphoreMutex::new(&framework, "/locks/ledger")?),
/// ];
/// let multi = MultiLock::new(locks)?;
/// let guard = multi.acquire().await?;
/// // ... both are held ...
/// guard.release().await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct MultiLock {
    locks: Arc<[Arc<dyn Lockable>]>,
}

impl MultiLock {
    /// A multi-lock over `locks`, acquired in this order. Does no I/O.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when `locks` is empty.
    pub fn new(locks: impl IntoIterator<Item = Arc<dyn Lockable>>) -> Result<Self> {
        let locks: Arc<[Arc<dyn Lockable>]> = locks.into_iter().collect();
        if locks.is_empty() {
            return Err(Error::invalid_argument("locks", "a multi-lock needs at least one lock"));
        }
        Ok(Self { locks })
    }

    /// A multi-lock over one [`InterProcessMutex`] per path (Curator's constructor taking
    /// paths), acquired in this order. Does no I/O.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when `paths` is empty or names a path twice (two mutexes on
    /// one path would wait on each other for ever); [`Error::InvalidPath`] for a bad path.
    pub fn of_mutexes<S: AsRef<str>>(framework: &Framework, paths: impl IntoIterator<Item = S>) -> Result<Self> {
        let mut locks: Vec<Arc<dyn Lockable>> = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for path in paths {
            let path = path.as_ref();
            let mutex = InterProcessMutex::new(framework, path)?;
            if !seen.insert(path.to_owned()) {
                return Err(Error::invalid_argument(
                    "paths",
                    format!("{path} is named twice: its two mutexes would wait on each other for ever"),
                ));
            }
            locks.push(Arc::new(mutex));
        }
        Self::new(locks)
    }

    /// The number of locks.
    pub fn len(&self) -> usize {
        self.locks.len()
    }

    /// Always false: a multi-lock has at least one lock.
    pub fn is_empty(&self) -> bool {
        self.locks.is_empty()
    }

    /// Waits until every lock is held.
    ///
    /// # Errors
    /// The first error a lock reported; the locks taken before it were released (in reverse
    /// order) before returning.
    ///
    /// # Cancel safety
    /// Cancel-safe (given cancel-safe [`Lockable`]s): the locks taken so far are released in
    /// reverse order in the background.
    pub async fn acquire(&self) -> Result<MultiLockGuard> {
        acquire::acquire(self).await
    }

    /// Takes every lock if each is free right now; never waits. `None` (holding nothing) as
    /// soon as one is not free.
    ///
    /// # Errors
    /// As [`acquire`](Self::acquire).
    ///
    /// # Cancel safety
    /// Cancel-safe, as [`acquire`](Self::acquire).
    pub async fn try_acquire(&self) -> Result<Option<MultiLockGuard>> {
        acquire::try_acquire(self).await
    }

    /// Waits at most `timeout` in total for all the locks; `None` when the time ran out (the
    /// locks taken meanwhile are released in the background, in reverse order).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a zero timeout; otherwise as [`acquire`](Self::acquire).
    ///
    /// # Cancel safety
    /// Cancel-safe, as [`acquire`](Self::acquire).
    pub async fn acquire_timeout(&self, timeout: Duration) -> Result<Option<MultiLockGuard>> {
        acquire::acquire_timeout(self, timeout).await
    }

    /// True when this process holds every lock of the set (Curator's semantics).
    pub fn is_acquired_in_this_process(&self) -> bool {
        self.locks.iter().all(|lock| lock.is_acquired_in_this_process())
    }
}

impl Acquire for MultiLock {
    type Guard = MultiLockGuard;

    async fn acquire_with<M: Mode>(&self) -> Result<M::Out<MultiLockGuard>> {
        let span = tracing::debug_span!("zk_recipes.multi_lock.acquire", locks = self.locks.len());
        let run = async {
            // Dropped unfinished (a deadline, a cancellation), it releases in reverse order.
            let mut taken = Holds(Vec::with_capacity(self.locks.len()));
            for (index, lock) in self.locks.iter().enumerate() {
                match M::lock_part(lock.as_ref()).await.map(M::into_held::<Box<dyn LockHold>, MultiLockGuard>) {
                    Ok(Ok(hold)) => taken.0.push(hold),
                    Ok(Err(busy)) => {
                        taken.roll_back().await;
                        return Ok(busy);
                    }
                    Err(e) => {
                        tracing::debug!(index, error = %e, "multi-lock: a lock failed; releasing what it took");
                        taken.roll_back().await;
                        return Err(e);
                    }
                }
            }
            Ok(M::held(MultiLockGuard { holds: taken }))
        };
        tracing::Instrument::instrument(run, span).await
    }

    fn is_acquired_in_this_process(&self) -> bool {
        MultiLock::is_acquired_in_this_process(self)
    }
}

/// Held locks in acquisition order. Dropping releases them in reverse order.
#[derive(Debug)]
struct Holds(Vec<Box<dyn LockHold>>);

impl Holds {
    /// Releases every hold in reverse order, continuing past failures; the first error.
    async fn release_all(&mut self) -> Result<()> {
        let mut first: Option<Error> = None;
        while let Some(hold) = self.0.pop() {
            if let Err(e) = hold.release().await {
                match first {
                    None => first = Some(e),
                    Some(_) => tracing::warn!(error = %e, "multi-lock release: another lock failed to release too"),
                }
            }
        }
        first.map_or(Ok(()), Err)
    }

    /// Releases after a failed acquire; release errors are logged, not returned.
    async fn roll_back(&mut self) {
        if let Err(e) = self.release_all().await {
            tracing::warn!(error = %e, "multi-lock rollback: a release failed (it continues in the background)");
        }
    }
}

impl Drop for Holds {
    fn drop(&mut self) {
        while let Some(hold) = self.0.pop() {
            drop(hold);
        }
    }
}

/// Proof that this process holds every lock of a [`MultiLock`]. Releasing or dropping it
/// releases them all in reverse order.
#[must_use = "dropping the guard releases the locks"]
#[clippy::has_significant_drop]
#[derive(Debug)]
pub struct MultiLockGuard {
    holds: Holds,
}

impl MultiLockGuard {
    /// The number of locks held.
    pub fn len(&self) -> usize {
        self.holds.0.len()
    }

    /// Always false: a guard holds at least one lock.
    pub fn is_empty(&self) -> bool {
        self.holds.0.is_empty()
    }

    /// Whether every lock can still be trusted (a local check).
    pub fn is_held(&self) -> bool {
        self.holds.0.iter().all(|hold| hold.is_held())
    }

    /// Completes as soon as any of the locks can no longer be trusted (see each lock's
    /// `lost()`). Use it in `tokio::select!` next to the work the locks guard.
    ///
    /// # Cancel safety
    /// Cancel-safe: it only observes.
    pub async fn lost(&self) {
        let parts = self.holds.0.iter().map(|hold| hold.lost().boxed());
        futures::future::select_all(parts).await;
    }

    /// Runs `work`, the critical section, until it finishes or any of the locks is lost (as
    /// [`lost`](Self::lost) tells), whichever comes first: the `tokio::select!` on `lost()`
    /// written once. `lost()` is checked first, so `work` never starts on a hold already lost.
    ///
    /// # Errors
    /// [`LockLost`] when any of the locks was lost first; `work` was then dropped where it stood (at
    /// its current `.await`), so write it to be stopped there.
    ///
    /// # Cancel safety
    /// Cancel-safe: dropping the returned future drops `work` with it, and the hold stays as it
    /// was (still held unless lost), ready for another section or its release.
    #[doc(alias = "run_while_held", alias = "critical_section", alias = "with_lock")]
    pub async fn run<F: Future>(&self, work: F) -> std::result::Result<F::Output, LockLost> {
        run_until_lost(self.lost(), work, || None).await
    }

    /// The fencing tokens of every lock held, in acquisition order (a nested multi-lock
    /// contributes all of its own).
    pub fn fencing_tokens(&self) -> Vec<i64> {
        self.holds.0.iter().flat_map(|hold| hold.fencing_tokens()).collect()
    }

    /// Releases every lock in reverse order of acquisition. A failure does not stop the
    /// others from being released.
    ///
    /// # Errors
    /// The first error a release reported (later ones are logged).
    ///
    /// # Cancel safety
    /// Cancel-safe: the locks not yet released are released in the background, in reverse
    /// order.
    pub async fn release(mut self) -> Result<()> {
        self.holds.release_all().await
    }
}

impl Hold for MultiLockGuard {
    fn into_lock_hold(self) -> Box<dyn LockHold> {
        Box::new(self)
    }
}

#[async_trait]
impl LockHold for MultiLockGuard {
    async fn release(self: Box<Self>) -> Result<()> {
        MultiLockGuard::release(*self).await
    }

    fn is_held(&self) -> bool {
        MultiLockGuard::is_held(self)
    }

    async fn lost(&self) {
        MultiLockGuard::lost(self).await
    }

    fn fencing_tokens(&self) -> Vec<i64> {
        MultiLockGuard::fencing_tokens(self)
    }
}
