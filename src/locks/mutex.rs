//! `InterProcessMutex`: Curator's reentrant distributed mutex, on the same wire protocol.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::driver::StandardDriver;
use super::held::HeldNode;
use super::internals::{LockInternals, Wait};
use super::owner::Owner;
use crate::error::{Error, Result};
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
/// task: it waits for the lock its parent holds. Unlike Curator, a hold whose session has
/// ended is not re-entered: `acquire` returns [`Error::LockLost`] until the owner has ended
/// the guards of the lost hold.
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
    /// The path as the user gave it.
    path: String,
    holds: Mutex<HashMap<Owner, Hold>>,
}

#[derive(Debug)]
struct Hold {
    node: HeldNode,
    count: usize,
}

impl InterProcessMutex {
    /// A mutex on `path`. Does no I/O.
    ///
    /// # Errors
    /// [`Error::InvalidPath`] for a path that is not absolute, ends in `/`, has empty, `.` or
    /// `..` segments or control characters, or is `/` or under `/zookeeper`.
    pub fn new(framework: &Framework, path: &str) -> Result<Self> {
        Self::with_data(framework, path, Vec::new())
    }

    /// A mutex whose nodes carry `data` (informational only; Curator writes the host's
    /// address there). The default is empty.
    ///
    /// # Errors
    /// As [`new`](Self::new).
    pub fn with_data(framework: &Framework, path: &str, data: Vec<u8>) -> Result<Self> {
        let internals = LockInternals::new(framework, path, Arc::new(StandardDriver::MUTEX), data)?;
        Ok(Self { shared: Arc::new(Shared { internals, path: path.to_owned(), holds: Mutex::default() }) })
    }

    /// The lock path as given.
    pub fn path(&self) -> &str {
        &self.shared.path
    }

    /// Waits until the lock is held.
    ///
    /// # Errors
    /// [`Error::Closed`]/[`Error::NotStarted`]; a ZooKeeper error that the retry policy gave up
    /// on (for example a long outage); `NoAuth` when the ACL forbids creating the node;
    /// [`Error::LockLost`] when the caller already holds this lock through a session that has
    /// ended since (no nested guard for a lost lock: end the old guards first).
    ///
    /// # Cancel safety
    /// Cancel-safe: a cancelled acquire never leaves a lock node behind (the cleanup is done in
    /// the background by the framework's reaper), and it loses its place in the queue.
    pub async fn acquire(&self) -> Result<MutexGuard> {
        match self.acquire_with(Wait::Forever).await? {
            Some(guard) => Ok(guard),
            None => unreachable!("waiting forever yields a guard or an error"),
        }
    }

    /// Takes the lock if no one else holds it or waits for it; never waits (one round trip).
    ///
    /// # Errors
    /// As [`acquire`](Self::acquire).
    ///
    /// # Cancel safety
    /// Cancel-safe, as [`acquire`](Self::acquire).
    pub async fn try_acquire(&self) -> Result<Option<MutexGuard>> {
        self.acquire_with(Wait::No).await
    }

    /// Waits at most `timeout` for the lock; `None` when the time ran out (its node is
    /// deleted). The time covers everything, connection waits and retries included.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a zero timeout; otherwise as [`acquire`](Self::acquire).
    ///
    /// # Cancel safety
    /// Cancel-safe, as [`acquire`](Self::acquire).
    pub async fn acquire_timeout(&self, timeout: Duration) -> Result<Option<MutexGuard>> {
        if timeout.is_zero() {
            return Err(Error::invalid_argument("timeout", "must be greater than zero; use try_acquire()"));
        }
        match tokio::time::timeout(timeout, self.acquire_with(Wait::Forever)).await {
            Ok(result) => result,
            Err(_) => Ok(None),
        }
    }

    async fn acquire_with(&self, wait: Wait) -> Result<Option<MutexGuard>> {
        let owner = Owner::current();
        if let Some(guard) = self.reenter(owner)? {
            return Ok(Some(guard));
        }
        let span = tracing::debug_span!("zk_recipes.lock.acquire", path = %self.shared.path);
        let started = tokio::time::Instant::now();
        let Some(node) = tracing::Instrument::instrument(self.shared.internals.acquire(wait), span.clone()).await?
        else {
            return Ok(None);
        };
        span.in_scope(|| {
            let session = self.shared.internals.framework().snapshot().session_id;
            tracing::debug!(
                node = %node.user_path(),
                session = format_args!("{session:#x}"),
                epoch = node.epoch(),
                waited = ?started.elapsed(),
                "lock acquired"
            )
        });
        let info = GuardInfo::of(&node);
        let mut holds = self.shared.holds.lock().unwrap_or_else(|e| e.into_inner());
        holds.insert(owner, Hold { node, count: 1 });
        Ok(Some(MutexGuard { shared: self.shared.clone(), owner, info, done: false }))
    }

    /// A nested guard when `owner` holds the lock already. A hold whose session has ended is
    /// refused: the lock went with the session (someone else may hold it now), so nesting a
    /// guard in it would make a second holder.
    fn reenter(&self, owner: Owner) -> Result<Option<MutexGuard>> {
        let mut holds = self.shared.holds.lock().unwrap_or_else(|e| e.into_inner());
        let Some(hold) = holds.get_mut(&owner) else { return Ok(None) };
        if hold.node.session_ended() {
            return Err(Error::LockLost { path: hold.node.user_path().to_owned() });
        }
        hold.count += 1;
        let info = GuardInfo::of(&hold.node);
        Ok(Some(MutexGuard { shared: self.shared.clone(), owner, info, done: false }))
    }

    /// True when any task of this process holds the lock through this handle or a clone.
    pub fn is_acquired_in_this_process(&self) -> bool {
        !self.shared.holds.lock().unwrap_or_else(|e| e.into_inner()).is_empty()
    }

    /// True when the current task (or thread, outside a task) holds the lock.
    pub fn is_owned_by_current_task(&self) -> bool {
        self.shared.holds.lock().unwrap_or_else(|e| e.into_inner()).contains_key(&Owner::current())
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

/// What a guard shows about its node.
#[derive(Debug, Clone)]
struct GuardInfo {
    lock_path: String,
    fencing_token: i64,
}

impl GuardInfo {
    fn of(node: &HeldNode) -> Self {
        Self { lock_path: node.user_path().to_owned(), fencing_token: node.fencing_token() }
    }
}

/// Proof that this process holds an [`InterProcessMutex`]. Releasing it (or dropping it) ends
/// this hold; the node is deleted when the owner's last nested guard ends.
#[must_use = "dropping the guard releases the lock"]
#[clippy::has_significant_drop]
#[derive(Debug)]
pub struct MutexGuard {
    shared: Arc<Shared>,
    owner: Owner,
    info: GuardInfo,
    done: bool,
}

impl MutexGuard {
    /// The lock node's path (namespace stripped), e.g. `/locks/a/_c_<uuid>-lock-0000000003`.
    pub fn lock_path(&self) -> &str {
        &self.info.lock_path
    }

    /// The lock node's creation zxid: strictly increasing across successive holders of this
    /// lock, across sessions too. Pass it to systems that reject stale writers.
    pub fn fencing_token(&self) -> i64 {
        self.info.fencing_token
    }

    /// Whether the lock can still be trusted (same session, and not `Suspended`/`Lost` as the
    /// framework's error policy counts them). A cheap local check, no I/O.
    pub fn is_held(&self) -> bool {
        let holds = self.shared.holds.lock().unwrap_or_else(|e| e.into_inner());
        holds.get(&self.owner).is_some_and(|h| h.node.is_held())
    }

    /// Completes when the lock can no longer be trusted: the connection is `Suspended` or
    /// `Lost` (per the error policy), a new session replaced ours, or our node was deleted.
    /// Use it in `tokio::select!` next to the critical section.
    ///
    /// # Cancel safety
    /// Cancel-safe: it only observes; each call sets a fresh data watch on the lock node.
    pub async fn lost(&self) {
        let watcher = {
            let holds = self.shared.holds.lock().unwrap_or_else(|e| e.into_inner());
            match holds.get(&self.owner) {
                Some(hold) => LostProbe::of(&hold.node),
                None => return,
            }
        };
        watcher.lost().await
    }

    /// Ends this hold. When it was the owner's last, the node is deleted now and the outcome
    /// reported; a connection failure that outlasts the retry policy hands the delete to the
    /// framework's reaper and returns the error.
    ///
    /// # Errors
    /// The ZooKeeper error that stopped the delete.
    ///
    /// # Cancel safety
    /// Cancel-safe: if cancelled, the guard is dropped, and dropping deletes in the background.
    pub async fn release(mut self) -> Result<()> {
        self.done = true;
        match self.end_hold() {
            Some(node) => {
                let span = tracing::debug_span!("zk_recipes.lock.release", node = %self.info.lock_path);
                tracing::Instrument::instrument(node.release(), span).await
            }
            None => Ok(()),
        }
    }

    /// Decrements the owner's count; returns the node when this was the last hold.
    fn end_hold(&self) -> Option<HeldNode> {
        let mut holds = self.shared.holds.lock().unwrap_or_else(|e| e.into_inner());
        let hold = holds.get_mut(&self.owner)?;
        hold.count -= 1;
        if hold.count == 0 {
            holds.remove(&self.owner).map(|h| h.node)
        } else {
            None
        }
    }
}

impl Drop for MutexGuard {
    fn drop(&mut self) {
        if !self.done {
            // Dropping the node sends its delete on the session right away.
            drop(self.end_hold());
        }
    }
}

/// What `lost()` needs, taken out of the holds map so no lock is held across the await.
struct LostProbe {
    node: HeldNode,
}

impl LostProbe {
    fn of(node: &HeldNode) -> Self {
        Self { node: node.observer() }
    }

    async fn lost(self) {
        self.node.lost().await
    }
}
