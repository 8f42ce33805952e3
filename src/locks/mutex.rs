//! `InterProcessMutex`: Curator's reentrant distributed mutex, on the same wire protocol.

use std::future::Future;
use std::sync::Arc;

use std::time::Duration;

use super::acquire::{self, Hold, LockHold};
use super::critical_section::{run_until_lost, LockLost};
use super::fast_path::FastPathStats;
use super::internals::LockInternals;
use super::reentrant::{Guarded, Holds, Owner, Parts, Reentrant, TicketGuard, Turns};
use super::revocation::Revocable;
use crate::error::Result;
use crate::framework::Framework;
use crate::protocol::driver::StandardDriver;

/// A reentrant distributed mutex, compatible with Curator's `InterProcessMutex`: a Rust process
/// and a Java/Curator process using the same path exclude each other.
///
/// Contenders create protected ephemeral-sequential nodes `<path>/_c_<uuid>-lock-<seq>`; the
/// lowest sequence holds the lock and each waiter watches only the node just ahead of it.
///
/// # Reentrancy and ownership
/// Ownership belongs to the **Tokio task** that acquired the lock (or, outside any task, to
/// the thread, as in `Runtime::block_on`). That owner may acquire again through this handle or
/// a clone of it and gets a nested guard at once, with no ZooKeeper traffic; the node is
/// deleted when the owner's last guard is released. Any other task contends like another
/// process would (Curator's behaviour for another thread). A spawned child task is another
/// task: it waits for the lock its parent holds. Unlike Curator, a hold that is over (its
/// session ended, or its node was deleted) is not re-entered: `acquire` returns
/// [`Error::LockLost`](crate::Error::LockLost) until the owner has ended the guards of the
/// lost hold. Each guard has a number of its own in its hold, so a guard of an old hold never
/// ends or deletes a newer one.
///
/// Branches of one `tokio::join!` or `tokio::select!` run in one task, so they share one hold.
/// Two acquires of the task in flight at once (two branches each acquiring) take turns: the
/// second waits until the first has ended and then gets a nested guard of the hold the first
/// made (or, if the first failed or was cancelled, acquires by itself). So
/// `join!(mutex.acquire(), mutex.acquire())` ends with two guards of one node; it never waits
/// on its own node. A `try_acquire` while the task's own acquire is in flight returns `None`.
///
/// The hold belongs to the task, not to wherever its guards are: a guard moved to another task
/// (sent on a channel, moved into `tokio::spawn`) still keeps the owner's hold, and the owner
/// task acquiring again meanwhile gets a nested guard at once, while the task that received the
/// guard contends as any other task. When a guard must pass the lock to another task that way
/// without its old owner re-entering it, use the non-reentrant
/// [`InterProcessSemaphoreMutex`](crate::InterProcessSemaphoreMutex) instead (its own layout:
/// it does not exclude an `InterProcessMutex` on the same path).
///
/// The handle is a cheap `Clone`; clones share the reentrancy bookkeeping.
///
/// ```no_run
/// # async fn example(framework: zk_recipes::Framework) -> zk_recipes::Result<()> {
/// use zk_recipes::InterProcessMutex;
///
/// let mutex = InterProcessMutex::new(&framework, "/locks/orders")?;
/// let guard = mutex.acquire().await?;
/// // ... critical section; pass guard.fencing_token() to systems that check it ...
/// guard.release().await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct InterProcessMutex {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    internals: LockInternals,
    turns: Turns,
    holds: Arc<Holds>,
}

impl InterProcessMutex {
    /// A mutex on `path`. Does no I/O.
    ///
    /// # Errors
    /// [`Error::InvalidPath`](crate::Error::InvalidPath) for a path that is not absolute, ends in `/`, has empty, `.` or
    /// `..` segments or control characters, or is `/` or under `/zookeeper`;
    /// [`Error::TooLarge`](crate::Error::TooLarge) for a path too long for the servers' request limit.
    pub fn new(framework: &Framework, path: &str) -> Result<Self> {
        Self::with_data(framework, path, Vec::new())
    }

    /// A mutex whose nodes carry `data` (informational only; Curator writes the host's
    /// address there). The default is empty.
    ///
    /// # Errors
    /// As [`new`](Self::new); [`Error::TooLarge`](crate::Error::TooLarge) when the path and data do not fit in one
    /// request ([`FrameworkBuilder::max_request_bytes`](crate::FrameworkBuilder::max_request_bytes)).
    pub fn with_data(framework: &Framework, path: &str, data: Vec<u8>) -> Result<Self> {
        let internals = LockInternals::new(framework, path, Arc::new(StandardDriver::MUTEX), data)?
            .with_fast_path()
            .counted("mutex");
        Ok(Self { shared: Arc::new(Shared { internals, turns: Turns::default(), holds: Arc::default() }) })
    }

    /// The lock path as given.
    pub fn path(&self) -> &str {
        self.shared.internals.path()
    }

    /// Waits until the lock is held.
    ///
    /// A task that holds the lock gets a nested guard at once. A second acquire of the task
    /// while its first is still in flight (two branches of one `join!` or `select!`) waits for
    /// the first to end, then nests in the hold it made (or queues, if it made none).
    ///
    /// # Errors
    /// [`Error::Closed`](crate::Error::Closed)/[`Error::NotStarted`](crate::Error::NotStarted);
    /// a ZooKeeper error that the retry policy gave up on (for example a long outage);
    /// [`Error::RetriesExhausted`](crate::Error::RetriesExhausted) when its node kept vanishing;
    /// `NoAuth` when the ACL forbids creating the node; [`Error::LockLost`](crate::Error::LockLost)
    /// when the caller already holds this lock through a hold that is over (no nested guard
    /// for a lost lock: end the old guards first).
    ///
    /// # Cancel safety
    /// Cancel-safe: a cancelled acquire never leaves a lock node behind (the cleanup is done in
    /// the background by the framework's reaper), and it loses its place in the queue.
    pub async fn acquire(&self) -> Result<MutexGuard> {
        acquire::acquire(self).await
    }

    /// Takes the lock if no one else holds it or waits for it; never waits (one round trip).
    /// A task that holds the lock gets a nested guard at once; `None` at once while another
    /// acquire of the task is in flight.
    ///
    /// # Errors
    /// As [`acquire`](Self::acquire).
    ///
    /// # Cancel safety
    /// Cancel-safe, as [`acquire`](Self::acquire).
    pub async fn try_acquire(&self) -> Result<Option<MutexGuard>> {
        acquire::try_acquire(self).await
    }

    /// Waits at most `timeout` for the lock; `None` when the time ran out (its node is
    /// deleted). The time covers everything, connection waits and retries included.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) for a zero timeout; otherwise
    /// as [`acquire`](Self::acquire).
    ///
    /// # Cancel safety
    /// Cancel-safe, as [`acquire`](Self::acquire).
    pub async fn acquire_timeout(&self, timeout: Duration) -> Result<Option<MutexGuard>> {
        acquire::acquire_timeout(self, timeout).await
    }

    /// A handle whose acquires are revocable (Curator's `makeRevocable`): their nodes carry no
    /// data and report revocation requests to the handle (while the acquire waits, too) and
    /// to the guard. See [`Revocable`].
    pub fn revocable(&self) -> Revocable<InterProcessMutex> {
        Revocable::new(self.clone())
    }

    /// How often this handle (and its clones) took the lock with the create alone, and why it
    /// did not when it could not (see [`FrameworkBuilder::fast_path`](crate::FrameworkBuilder::fast_path));
    /// all zero on a framework that waits on the mirror (the default), which does not use it.
    pub fn fast_path_stats(&self) -> FastPathStats {
        self.shared.internals.fast_path_stats()
    }

    /// True when any task of this process holds the lock through this handle or a clone.
    pub fn is_acquired_in_this_process(&self) -> bool {
        self.shared.holds.any()
    }

    /// True when the current task (or thread, outside a task) holds the lock.
    pub fn is_owned_by_current_task(&self) -> bool {
        self.shared.holds.held_by(Owner::current())
    }

    /// The full paths (namespace stripped) of every node under the lock path, in lock order:
    /// the first is the holder, the rest wait. Foreign children are included, as Curator does.
    ///
    /// # Errors
    /// ZooKeeper errors the retry policy gave up on.
    ///
    /// # Cancel safety
    /// Cancel-safe: it only reads.
    pub async fn participant_nodes(&self) -> Result<Vec<String>> {
        self.shared.internals.participant_nodes().await
    }
}

impl Reentrant for InterProcessMutex {
    const HALF: Option<&'static str> = None;

    fn parts(&self) -> Parts<'_> {
        let Shared { internals, turns, holds } = &*self.shared;
        Parts { turns, holds, internals }
    }

    fn guard(inner: TicketGuard) -> MutexGuard {
        MutexGuard { inner }
    }
}

impl Guarded for InterProcessMutex {
    type Guard = MutexGuard;
}

/// Proof that this process holds an [`InterProcessMutex`]. Releasing it (or dropping it)
/// ends this hold; the node is deleted when the owner's last nested guard ends.
///
/// Not `Clone`; dropping it never blocks: the delete is sent at once and its reply left to the
/// framework's reaper.
#[must_use = "dropping the guard releases the lock"]
#[clippy::has_significant_drop]
#[derive(Debug)]
pub struct MutexGuard {
    inner: TicketGuard,
}

impl MutexGuard {
    /// The lock node's path (namespace stripped), e.g. `/locks/a/_c_<uuid>-lock-0000000003`.
    pub fn lock_path(&self) -> &str {
        self.inner.lock_path()
    }

    /// The lock node's creation zxid: strictly increasing across successive nodes of this lock,
    /// across sessions too. Pass it to systems that reject stale writers.
    pub fn fencing_token(&self) -> i64 {
        self.inner.fencing_token()
    }

    /// Whether the lock can still be trusted: same session, not `Suspended`/`Lost` as the
    /// framework's error policy counts them, and the node not known to be deleted. A cheap
    /// local check, no I/O.
    pub fn is_held(&self) -> bool {
        self.inner.is_held()
    }

    /// Completes when the lock can no longer be trusted: the connection is `Suspended` or
    /// `Lost` (per the error policy), a new session replaced ours, or our node was deleted
    /// (from then on [`is_held`](Self::is_held) is false too).
    ///
    /// # Cancel safety
    /// Cancel-safe: it only observes.
    pub async fn lost(&self) {
        self.inner.lost().await
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

    /// Completes with `true` at each revocation request to the lock node (another process
    /// wrote `__REVOKE__` into it), once per request and guard, requests made while the acquire
    /// waited included; with `false` when no request can come (the node is gone or its session
    /// ended, or the hold was not acquired revocably: then at once). See [`Revocable`].
    ///
    /// # Cancel safety
    /// Cancel-safe: a request is counted as reported only when this returns `true`.
    pub async fn revocation_requested(&self) -> bool {
        self.inner.revocation_requested().await
    }

    /// Ends this hold. When it was the owner's last, the node is deleted now and the outcome
    /// reported; a failure that outlasts the retry policy is returned (a retryable one is left
    /// to the framework's reaper, which keeps trying while the session lasts). A node already
    /// gone (its session ended) counts as released.
    ///
    /// # Errors
    /// The ZooKeeper error that stopped the delete.
    ///
    /// # Cancel safety
    /// Cancel-safe: a cancelled release finishes in the background.
    pub async fn release(self) -> Result<()> {
        self.inner.release().await
    }
}

impl Hold for MutexGuard {
    fn into_lock_hold(self) -> Box<dyn LockHold> {
        Box::new(self.inner)
    }
}
