//! `InterProcessMutex`: Curator's reentrant distributed mutex, on the same wire protocol.

use std::sync::Arc;

use super::acquire::{acquire_forms, hold_one_node, Acquire, Mode};
use super::driver::StandardDriver;
use super::fast_path::FastPathStats;
use super::held::node_accessors;
use super::internals::LockInternals;
use super::reentrant::{ticket_guard, Holds, Owner, Ticket};
use super::revocation::{Revocable, RevocableLock, Signal};
use crate::error::Result;
use crate::framework::Framework;

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
/// [`Error::LockLost`](crate::Error::LockLost) until the owner has ended the guards of the lost hold. Each hold has a
/// generation, so a guard of an old hold never ends or deletes a newer one.
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
    holds: Holds,
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
        let internals = LockInternals::new(framework, path, Arc::new(StandardDriver::MUTEX), data)?.with_fast_path();
        Ok(Self { shared: Arc::new(Shared { internals, holds: Holds::default() }) })
    }

    /// The lock path as given.
    pub fn path(&self) -> &str {
        self.shared.internals.path()
    }

    acquire_forms! {
        MutexGuard;
        /// Waits until the lock is held.
        ///
        /// # Errors
        /// [`Error::Closed`](crate::Error::Closed)/[`Error::NotStarted`](crate::Error::NotStarted); a ZooKeeper error that the retry policy gave up
        /// on (for example a long outage); [`Error::RetriesExhausted`](crate::Error::RetriesExhausted) when its node kept
        /// vanishing; `NoAuth` when the ACL forbids creating the node; [`Error::LockLost`](crate::Error::LockLost) when the
        /// caller already holds this lock through a hold that is over (no nested guard for a lost
        /// lock: end the old guards first).
        ///
        /// # Cancel safety
        /// Cancel-safe: a cancelled acquire never leaves a lock node behind (the cleanup is done in
        /// the background by the framework's reaper), and it loses its place in the queue.
        acquire;
        /// Takes the lock if no one else holds it or waits for it; never waits (one round trip).
        ///
        /// # Errors
        /// As [`acquire`](Self::acquire).
        ///
        /// # Cancel safety
        /// Cancel-safe, as [`acquire`](Self::acquire).
        try_acquire;
        /// Waits at most `timeout` for the lock; `None` when the time ran out (its node is
        /// deleted). The time covers everything, connection waits and retries included.
        ///
        /// # Errors
        /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) for a zero timeout; otherwise as [`acquire`](Self::acquire).
        ///
        /// # Cancel safety
        /// Cancel-safe, as [`acquire`](Self::acquire).
        acquire_timeout;
    }

    /// A handle whose acquires are revocable (Curator's `makeRevocable`): their nodes carry no
    /// data and report revocation requests to the handle (while the acquire waits, too) and
    /// to the guard. See [`Revocable`].
    pub fn revocable(&self) -> Revocable<InterProcessMutex> {
        Revocable::new(self.clone())
    }

    /// How often this handle (and its clones) took the lock with the create alone, and why it
    /// did not when it could not (see [`FrameworkBuilder::fast_path`](crate::FrameworkBuilder::fast_path)).
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

    fn guard(&self, ticket: Ticket) -> MutexGuard {
        MutexGuard { shared: self.shared.clone(), ticket }
    }
}

impl InterProcessMutex {
    async fn acquire_as<M: Mode>(&self, revocable: Option<&Arc<Signal>>) -> Result<M::Out<MutexGuard>> {
        let owner = Owner::current();
        if let Some(ticket) = self.shared.holds.reenter(owner)? {
            return Ok(M::held(self.guard(ticket)));
        }
        let span = tracing::debug_span!("zk_recipes.lock.acquire", path = %self.path());
        let started = tokio::time::Instant::now();
        let acquiring = self.shared.internals.acquire_with::<M>(revocable);
        let acquired = tracing::Instrument::instrument(acquiring, span.clone()).await?;
        Ok(M::map(acquired, |node| {
            let watch = node.watch();
            span.in_scope(|| {
                let session = self.shared.internals.framework().snapshot().session_id;
                tracing::debug!(
                    node = %watch.user_path(),
                    session = format_args!("{session:#x}"),
                    epoch = watch.epoch(),
                    waited = ?started.elapsed(),
                    "lock acquired"
                )
            });
            self.guard(self.shared.holds.insert(owner, node))
        }))
    }
}

impl Acquire for InterProcessMutex {
    type Guard = MutexGuard;

    async fn acquire_with<M: Mode>(&self) -> Result<M::Out<MutexGuard>> {
        self.acquire_as::<M>(None).await
    }

    fn is_acquired_in_this_process(&self) -> bool {
        InterProcessMutex::is_acquired_in_this_process(self)
    }
}

impl RevocableLock for InterProcessMutex {
    async fn acquire_revocable<M: Mode>(&self, signal: &Arc<Signal>) -> Result<M::Out<MutexGuard>> {
        self.acquire_as::<M>(Some(signal)).await
    }
}

ticket_guard!(
    /// Proof that this process holds an [`InterProcessMutex`]. Releasing it (or dropping it)
    /// ends this hold; the node is deleted when the owner's last nested guard ends.
    MutexGuard,
    holds,
    "lock-"
);
