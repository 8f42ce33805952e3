//! `InterProcessSemaphoreMutex`: Curator's non-reentrant mutex, a one-lease semaphore.

use std::future::Future;
use std::time::Duration;

use super::acquire::{self, Acquire, Hold, LockHold, Mode};
use super::critical_section::{run_until_lost, LockLost};
use super::semaphore::{InterProcessSemaphore, SemaphoreLease};
use crate::error::Result;
use crate::framework::Framework;

/// A non-reentrant distributed mutex, compatible with Curator's `InterProcessSemaphoreMutex`:
/// an [`InterProcessSemaphore`] with one lease.
///
/// It uses the semaphore layout (`<path>/locks` and `<path>/leases`), **not** the
/// [`InterProcessMutex`](crate::InterProcessMutex) layout: the two do not exclude each other
/// on the same path, exactly as in Curator.
///
/// Not reentrant: a second acquire, even from the task that holds the lock, waits until the
/// lock is released. The guard belongs to the process, not to a task, so any task may release
/// it (Curator allows release from any thread), and a task that passed its guard to another
/// task waits for that task's release like anyone else: this is the lock to use where a
/// guard changes tasks and its first owner must not re-enter.
///
/// Within one task, too: of two branches of one `tokio::join!` each acquiring, the second waits
/// for the first one's guard. Where each branch releases its guard, they take the lock in turn;
/// `join!(mutex.acquire(), mutex.acquire())` itself waits forever (the first guard is released
/// only after the `join!`), exactly as two `lock()`s of one `tokio::sync::Mutex` in a `join!`
/// do. Bound the second with [`acquire_timeout`](Self::acquire_timeout) (it returns `None`,
/// leaving no node behind), or use [`InterProcessMutex`](crate::InterProcessMutex), whose
/// second acquire nests.
///
/// ```no_run
/// # async fn example(framework: zk_recipes::Framework) -> zk_recipes::Result<()> {
/// use zk_recipes::InterProcessSemaphoreMutex;
///
/// let mutex = InterProcessSemaphoreMutex::new(&framework, "/locks/report")?;
/// let guard = mutex.acquire().await?;
/// let worker = tokio::spawn(async move {
///     // ... work ...
///     guard.release().await // another task may release it
/// });
/// worker.await.expect("worker panicked")?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct InterProcessSemaphoreMutex {
    semaphore: InterProcessSemaphore,
}

impl InterProcessSemaphoreMutex {
    /// A mutex on `path`. Does no I/O.
    ///
    /// # Errors
    /// [`Error::InvalidPath`](crate::Error::InvalidPath) for a path that is not a valid
    /// absolute path, or is `/` or under `/zookeeper`.
    pub fn new(framework: &Framework, path: &str) -> Result<Self> {
        Ok(Self { semaphore: InterProcessSemaphore::new(framework, path, 1)? })
    }

    /// The lock path as given.
    pub fn path(&self) -> &str {
        self.semaphore.path()
    }

    /// Waits until the lock is held. Not reentrant: while this process holds the lock, this
    /// waits for that guard's release, whichever task asks (see the type's docs for `join!`).
    ///
    /// # Errors
    /// As [`InterProcessSemaphore::acquire`].
    ///
    /// # Cancel safety
    /// Cancel-safe: a cancelled acquire leaves no node behind (the framework's reaper deletes
    /// it in the background), and it loses its place in the queue.
    pub async fn acquire(&self) -> Result<SemaphoreMutexGuard> {
        acquire::acquire(self).await
    }

    /// Takes the lock if it is free right now; never waits. See
    /// [`InterProcessSemaphore::try_acquire`] for when it returns `None`.
    ///
    /// # Errors
    /// As [`acquire`](Self::acquire).
    ///
    /// # Cancel safety
    /// Cancel-safe, as [`acquire`](Self::acquire).
    pub async fn try_acquire(&self) -> Result<Option<SemaphoreMutexGuard>> {
        acquire::try_acquire(self).await
    }

    /// Waits at most `timeout` for the lock; `None` when the time ran out (nothing is held).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) for a zero timeout; otherwise
    /// as [`acquire`](Self::acquire).
    ///
    /// # Cancel safety
    /// Cancel-safe, as [`acquire`](Self::acquire).
    pub async fn acquire_timeout(&self, timeout: Duration) -> Result<Option<SemaphoreMutexGuard>> {
        acquire::acquire_timeout(self, timeout).await
    }

    /// True while a guard acquired through this handle (or a clone) is alive.
    pub fn is_acquired_in_this_process(&self) -> bool {
        self.semaphore.is_acquired_in_this_process()
    }

    /// The full paths of the lease nodes (at most one holds; see
    /// [`InterProcessSemaphore::participant_nodes`]).
    ///
    /// # Errors
    /// ZooKeeper errors the retry policy gave up on.
    ///
    /// # Cancel safety
    /// Cancel-safe: it only reads.
    pub async fn participant_nodes(&self) -> Result<Vec<String>> {
        self.semaphore.participant_nodes().await
    }
}

impl Acquire for InterProcessSemaphoreMutex {
    type Guard = SemaphoreMutexGuard;

    async fn acquire_with<M: Mode>(&self) -> Result<M::Out<SemaphoreMutexGuard>> {
        Ok(M::map(self.semaphore.acquire_with::<M>().await?, |lease| SemaphoreMutexGuard { lease }))
    }

    fn is_acquired_in_this_process(&self) -> bool {
        InterProcessSemaphoreMutex::is_acquired_in_this_process(self)
    }

    fn lock_metrics(&self) -> Option<&crate::framework::metrics::LockMetrics> {
        self.semaphore.lock_metrics()
    }
}

/// Proof that this process holds an [`InterProcessSemaphoreMutex`]. Releasing or dropping it
/// frees the lock; any task may do so.
#[must_use = "dropping the guard releases the lock"]
#[clippy::has_significant_drop]
#[derive(Debug)]
pub struct SemaphoreMutexGuard {
    lease: SemaphoreLease,
}

impl SemaphoreMutexGuard {
    /// The lease node's path (namespace stripped), `<path>/leases/_c_<uuid>-lease-<seq>`.
    pub fn lock_path(&self) -> &str {
        self.lease.lease_path()
    }

    /// The lease node's creation zxid: strictly increasing across successive holders.
    pub fn fencing_token(&self) -> i64 {
        self.lease.fencing_token()
    }

    /// Whether the lock can still be trusted; see [`SemaphoreLease::is_held`].
    pub fn is_held(&self) -> bool {
        self.lease.is_held()
    }

    /// Completes when the lock can no longer be trusted; see [`SemaphoreLease::lost`].
    ///
    /// # Cancel safety
    /// Cancel-safe: it only observes.
    pub async fn lost(&self) {
        self.lease.lost().await
    }

    /// Runs `work`, the critical section, until it finishes or the lock is lost (as
    /// [`lost`](Self::lost) tells), whichever comes first: the `tokio::select!` on `lost()`
    /// written once. `lost()` is checked first, so `work` never starts on a hold already lost.
    ///
    /// # Errors
    /// [`LockLost`] when the lock was lost first; `work` was then dropped where it stood (at
    /// its current `.await`), so write it to be stopped there.
    ///
    /// # Cancel safety
    /// Cancel-safe: dropping the returned future drops `work` with it, and the hold stays as it
    /// was (still held unless lost), ready for another section or its release.
    #[doc(alias = "run_while_held", alias = "critical_section", alias = "with_lock")]
    pub async fn run<F: Future>(&self, work: F) -> std::result::Result<F::Output, LockLost> {
        run_until_lost(self.lost(), work, || Some(self.lock_path().to_owned())).await
    }

    /// Releases the lock: deletes the lease node now and reports the outcome.
    ///
    /// # Errors
    /// As [`SemaphoreLease::release`].
    ///
    /// # Cancel safety
    /// Cancel-safe: if cancelled, the delete is finished in the background.
    pub async fn release(self) -> Result<()> {
        self.lease.release().await
    }

    /// The lease this guard wraps.
    pub fn into_lease(self) -> SemaphoreLease {
        self.lease
    }
}

impl Hold for SemaphoreMutexGuard {
    fn into_lock_hold(self) -> Box<dyn LockHold> {
        Box::new(self.lease)
    }
}
