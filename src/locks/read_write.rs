//! `InterProcessReadWriteLock`: Curator's distributed read-write lock, on the same wire
//! protocol (with Curator 5.5+'s downgrade node).

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use zookeeper_client::Stat;

use super::acquire::{self, Hold, LockHold};
use super::critical_section::{run_until_lost, LockLost};
use super::held::{HeldNode, NodeWatch};
use super::internals::LockInternals;
use super::reentrant::{Guarded, Holds, Owner, Parts, Reentrant, TicketGuard, Turns};
use super::revocation::{NodeRevocation, Revocable, Signal};
use crate::error::{Error, Result};
use crate::framework::metrics::Op;
use crate::framework::node::{retry_request, Failure};
use crate::framework::Framework;
use crate::path;
use crate::protocol::driver::{ReadDriver, WriteDriver};
use crate::protocol::{read_write_sort_key, READ_LOCK_NAME, WRITE_LOCK_NAME};

/// A distributed read-write lock, compatible with Curator's `InterProcessReadWriteLock`: any
/// number of readers at once, or one writer; Rust and Java/Curator processes using the same path
/// respect each other.
///
/// Take the halves with [`read_lock`](Self::read_lock) and [`write_lock`](Self::write_lock).
/// Each is a lock handle of its own (with `acquire`, `try_acquire`, `acquire_timeout`,
/// `revocable`, `participant_nodes`), usable wherever a lock is ([`Lockable`](crate::Lockable),
/// so in a [`MultiLock`](crate::MultiLock) too).
///
/// # Protocol
/// Both halves put protected ephemeral-sequential nodes into the lock path:
/// `<path>/_c_<uuid>-__READ__<seq>` and `<path>/_c_<uuid>-__WRIT__<seq>`. They form **one**
/// queue, ordered by sequence. A writer holds when its node is first among all children
/// (readers and foreign nodes included) and otherwise watches the node just ahead of it. A
/// reader holds when no writer's node is ahead of it and otherwise watches the first writer.
/// So the queue is fair: a reader that arrives after a waiting writer waits behind it, and
/// writers are never starved.
///
/// # Reentrancy, downgrade and upgrade
/// Each half is reentrant per **Tokio task** (or per thread outside a task), as
/// [`InterProcessMutex`](crate::InterProcessMutex) is: the owner of a hold may acquire the same
/// half again through this lock (or a clone) and gets a nested guard at once, with no ZooKeeper
/// traffic, even while writers wait. Any other task queues like another process would.
///
/// Two acquires of one task in flight at once through this lock (two branches of one
/// `tokio::join!` or `tokio::select!`, either half) take turns: the second waits until the first
/// has ended and then nests, downgrades or is refused as the first one's outcome decides. So
/// `join!(read.acquire(), read.acquire())` ends with two guards of one read node, a write
/// acquire joined with a read acquire is a downgrade, and a read acquire joined with a write
/// acquire refuses the upgrade; none waits on the task's own node. A try while another acquire
/// of the task is in flight returns `None`. As for the mutex, a guard moved to another task
/// keeps its owner's hold, and the owner acquiring that half again gets a nested guard at once
/// (see [`InterProcessMutex`](crate::InterProcessMutex#reentrancy-and-ownership); the
/// non-reentrant lock is [`InterProcessSemaphoreMutex`](crate::InterProcessSemaphoreMutex)).
///
/// - **Downgrade.** The task that holds the write lock may take the read lock (and then release
///   the write lock). This is done as Curator 5.5+ does it: the read node is a plain ephemeral
///   node `<path>/_c_<uuid>-__READ__<seq>` carrying the **write node's** sequence, so it keeps
///   the write node's place in the queue and a writer queued meanwhile stays out until the read
///   lock is released too. Before it is created, the write node is checked to still exist in
///   this session ([`Error::LockLost`] otherwise, with nothing created).
/// - **Upgrade** (the task holds the read lock and asks for the write lock) is refused at once,
///   before anything is sent: `acquire` fails with [`Error::UpgradeRefused`], and
///   `try_acquire` and `acquire_timeout` return `None`. Its write node would queue behind the
///   task's own read node forever (Curator's `acquire` hangs there, its timed form returns
///   false after the timeout, and every reader arriving meanwhile waits too). The check is
///   local to this lock and its clones; a read hold taken through another
///   `InterProcessReadWriteLock` on the same path is another contender.
///
/// # Mixed fleets
/// Curator 5.4 and older create the downgrade's read node as an ordinary sequential node, which
/// sorts behind writers already queued: a writer of any client (Rust, or Java of any version)
/// queued before such a downgrade may take the write lock while the downgraded reader still
/// holds (CURATOR-621). That node cannot be told apart from an ordinary later reader: avoid
/// downgrades on 5.4 JVMs that share a lock with others. Downgrades by this crate and by
/// Curator 5.5+ are safe against every version.
///
/// # Revocation
/// Either half can be acquired revocably ([`ReadLock::revocable`], [`WriteLock::revocable`];
/// see [`Revocable`]), and any node can be asked to go with
/// [`Revoker::attempt_revoke`](crate::Revoker::attempt_revoke).
///
/// ```no_run
/// # async fn example(framework: zk_recipes::Framework) -> zk_recipes::Result<()> {
/// use zk_recipes::InterProcessReadWriteLock;
///
/// let lock = InterProcessReadWriteLock::new(&framework, "/locks/catalog")?;
/// let reading = lock.read_lock().acquire().await?; // shared with other readers
/// reading.release().await?;
///
/// let writing = lock.write_lock().acquire().await?; // alone
/// let reading = lock.read_lock().acquire().await?; // downgrade: granted at once
/// writing.release().await?; // writers queued meanwhile still wait for `reading`
/// reading.release().await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct InterProcessReadWriteLock {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    read: LockInternals,
    write: LockInternals,
    /// The owners' acquires of either half take turns.
    turns: Turns,
    read_holds: Arc<Holds>,
    write_holds: Arc<Holds>,
}

impl InterProcessReadWriteLock {
    /// A read-write lock on `path`. Does no I/O.
    ///
    /// # Errors
    /// [`Error::InvalidPath`] for a path that is not absolute, ends in `/`, has empty, `.` or
    /// `..` segments or control characters, or is `/` or under `/zookeeper`;
    /// [`Error::TooLarge`] for a path too long for the servers' request limit.
    pub fn new(framework: &Framework, path: &str) -> Result<Self> {
        Self::with_data(framework, path, Vec::new())
    }

    /// A read-write lock whose nodes carry `data` (informational only; Curator's `lockData`,
    /// by default the host's address there). The default is empty; revocable acquires write
    /// none.
    ///
    /// # Errors
    /// As [`new`](Self::new); [`Error::TooLarge`] when the path and data do not fit in one
    /// request ([`FrameworkBuilder::max_request_bytes`](crate::FrameworkBuilder::max_request_bytes)).
    pub fn with_data(framework: &Framework, path: &str, data: Vec<u8>) -> Result<Self> {
        let read = LockInternals::new(framework, path, Arc::new(ReadDriver), data.clone())?
            .with_mirror_wait()
            .counted("read_lock");
        let write =
            LockInternals::new(framework, path, Arc::new(WriteDriver), data)?.with_mirror_wait().counted("write_lock");
        let shared =
            Shared { read, write, turns: Turns::default(), read_holds: Arc::default(), write_holds: Arc::default() };
        Ok(Self { shared: Arc::new(shared) })
    }

    /// The lock path as given.
    pub fn path(&self) -> &str {
        self.shared.write.path()
    }

    /// The read half: shared with other readers, excluded by a writer.
    pub fn read_lock(&self) -> ReadLock {
        ReadLock { shared: self.shared.clone() }
    }

    /// The write half: exclusive.
    pub fn write_lock(&self) -> WriteLock {
        WriteLock { shared: self.shared.clone() }
    }
}

impl Shared {
    fn framework(&self) -> &Framework {
        self.write.framework()
    }

    /// The nodes of one half, in queue order (full paths, namespace stripped). The queue is
    /// listed once and filtered by node name (Curator filters the full path, which differs
    /// only for a lock path that itself contains a marker).
    async fn participants(&self, marker: &str) -> Result<Vec<String>> {
        let all = self.write.participant_nodes().await?;
        Ok(all.into_iter().filter(|p| path::node_name(p).contains(marker)).collect())
    }

    /// The owner's downgrade: the write hold `write` is live in this session; a plain
    /// ephemeral read node carrying the write node's sequence is created and granted at once.
    async fn downgrade(&self, write: &NodeWatch, revocable: Option<&Arc<Signal>>) -> Result<HeldNode> {
        let framework = self.framework();
        let lost = || Error::LockLost { path: write.user_path().to_owned() };
        if write.is_over() {
            return Err(lost());
        }
        let session = framework.session()?;
        if session.epoch != write.epoch() {
            return Err(lost());
        }
        let write_path = write.full_path();
        let ours = |stat: Option<Stat>| stat.is_some_and(|s| session.owns(s.ephemeral_owner));
        let check = || {
            session.sent(Op::Exists);
            session.client.check_stat(write_path)
        };
        // First: the write node still exists and is this session's (a read node carrying a
        // stale sequence would jump the queue).
        match retry_request(framework, check).await {
            Ok(stat) if ours(stat) => {}
            Ok(_) | Err(Failure::NodeMissing) => return Err(lost()),
            Err(Failure::Error(e)) => return Err(e),
        }
        let sequence = read_write_sort_key(path::node_name(write_path));
        let spec = if revocable.is_some() { self.read.revocable_spec() } else { self.read.spec() };
        // Checked again right behind the create (same round trip): the write node must have
        // existed when the read node appeared, or the read node is deleted (dropped) again.
        let (node, checked) = match spec.create_with_sequence(&session, sequence, check).await {
            Ok(created) => created,
            Err(Failure::NodeMissing) => return Err(lost()),
            Err(Failure::Error(e)) => return Err(e),
        };
        let checked = match checked {
            Some(stat) => stat,
            None => match retry_request(framework, check).await {
                Ok(stat) => stat,
                Err(Failure::NodeMissing) => return Err(lost()),
                Err(Failure::Error(e)) => return Err(e),
            },
        };
        if !ours(checked) {
            return Err(lost());
        }
        let revocation = revocable
            .map(|signal| NodeRevocation::start(framework, session.epoch, node.full_path(), None, signal.clone()));
        let mut held = HeldNode::with_revocation(node, revocation);
        held.count_hold(self.read.metrics());
        Ok(held)
    }
}

/// The read half of an [`InterProcessReadWriteLock`] (Curator's `ReadLock`). A cheap `Clone`;
/// clones share the reentrancy bookkeeping.
#[derive(Debug, Clone)]
pub struct ReadLock {
    shared: Arc<Shared>,
}

impl ReadLock {
    /// The lock path as given.
    pub fn path(&self) -> &str {
        self.shared.read.path()
    }

    /// Waits until the read lock is held: no writer holds it or is queued ahead. Granted at
    /// once to the task that holds the write lock (a downgrade), and nested at once for a task
    /// that holds the read lock. A second acquire of the task while one of either half is in
    /// flight (two branches of one `join!` or `select!`) waits for it to end, then nests,
    /// downgrades or queues as that outcome allows.
    ///
    /// # Errors
    /// As [`InterProcessMutex::acquire`](crate::InterProcessMutex::acquire); for a downgrade,
    /// [`Error::LockLost`] when the write node is gone or belongs to an ended session.
    ///
    /// # Cancel safety
    /// Cancel-safe: a cancelled acquire never leaves a lock node behind (the cleanup is done in
    /// the background by the framework's reaper), and it loses its place in the queue.
    pub async fn acquire(&self) -> Result<ReadLockGuard> {
        acquire::acquire(self).await
    }

    /// Takes the read lock if no writer holds it or waits for it; never waits (one round trip).
    /// `None` at once while another acquire of the task, of either half, is in flight.
    ///
    /// # Errors
    /// As [`acquire`](Self::acquire).
    ///
    /// # Cancel safety
    /// Cancel-safe, as [`acquire`](Self::acquire).
    pub async fn try_acquire(&self) -> Result<Option<ReadLockGuard>> {
        acquire::try_acquire(self).await
    }

    /// Waits at most `timeout` for the read lock; `None` when the time ran out (its node is
    /// deleted). The time covers everything, connection waits and retries included.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a zero timeout; otherwise as [`acquire`](Self::acquire).
    ///
    /// # Cancel safety
    /// Cancel-safe, as [`acquire`](Self::acquire).
    pub async fn acquire_timeout(&self, timeout: Duration) -> Result<Option<ReadLockGuard>> {
        acquire::acquire_timeout(self, timeout).await
    }

    /// A handle whose acquires of the read lock are revocable; see [`Revocable`].
    pub fn revocable(&self) -> Revocable<ReadLock> {
        Revocable::new(self.clone())
    }

    /// True when any task of this process holds the read lock through this lock or a clone.
    pub fn is_acquired_in_this_process(&self) -> bool {
        self.shared.read_holds.any()
    }

    /// True when the current task (or thread, outside a task) holds the read lock.
    pub fn is_owned_by_current_task(&self) -> bool {
        self.shared.read_holds.held_by(Owner::current())
    }

    /// The full paths (namespace stripped) of the read nodes under the lock path (every child
    /// whose name contains `__READ__`), in queue order, waiting readers included.
    ///
    /// # Errors
    /// ZooKeeper errors the retry policy gave up on.
    ///
    /// # Cancel safety
    /// Cancel-safe: it only reads.
    pub async fn participant_nodes(&self) -> Result<Vec<String>> {
        self.shared.participants(READ_LOCK_NAME).await
    }
}

impl Reentrant for ReadLock {
    const HALF: Option<&'static str> = Some("read");

    fn parts(&self) -> Parts<'_> {
        Parts { turns: &self.shared.turns, holds: &self.shared.read_holds, internals: &self.shared.read }
    }

    fn guard(inner: TicketGuard) -> ReadLockGuard {
        ReadLockGuard { inner }
    }

    /// The owner of the write lock gets the read lock at once.
    async fn downgrade(&self, owner: Owner, revocable: Option<&Arc<Signal>>) -> Result<Option<HeldNode>> {
        match self.shared.write_holds.node_of(owner) {
            Some(write) => self.shared.downgrade(&write, revocable).await.map(Some),
            None => Ok(None),
        }
    }
}

impl Guarded for ReadLock {
    type Guard = ReadLockGuard;
}

/// The write half of an [`InterProcessReadWriteLock`] (Curator's `WriteLock`). A cheap
/// `Clone`; clones share the reentrancy bookkeeping.
#[derive(Debug, Clone)]
pub struct WriteLock {
    shared: Arc<Shared>,
}

impl WriteLock {
    /// The lock path as given.
    pub fn path(&self) -> &str {
        self.shared.write.path()
    }

    /// Waits until the write lock is held: its node is first in the queue. Nested at once for
    /// a task that holds the write lock. A second acquire of the task while one of either half
    /// is in flight (two branches of one `join!` or `select!`) waits for it to end, then nests,
    /// is refused (the first took the read lock) or queues.
    ///
    /// # Errors
    /// [`Error::UpgradeRefused`] at once, with nothing sent, when the task holds the read lock
    /// of this lock; otherwise as
    /// [`InterProcessMutex::acquire`](crate::InterProcessMutex::acquire).
    ///
    /// # Cancel safety
    /// Cancel-safe: a cancelled acquire never leaves a lock node behind (the cleanup is done in
    /// the background by the framework's reaper), and it loses its place in the queue.
    pub async fn acquire(&self) -> Result<WriteLockGuard> {
        acquire::acquire(self).await
    }

    /// Takes the write lock if no one holds either half or waits for it; never waits (one
    /// round trip). `None` at once, with nothing sent, when the task holds the read lock, and
    /// while another acquire of the task, of either half, is in flight.
    ///
    /// # Errors
    /// As [`acquire`](Self::acquire), except for the upgrade.
    ///
    /// # Cancel safety
    /// Cancel-safe, as [`acquire`](Self::acquire).
    pub async fn try_acquire(&self) -> Result<Option<WriteLockGuard>> {
        acquire::try_acquire(self).await
    }

    /// Waits at most `timeout` for the write lock; `None` when the time ran out (its node is
    /// deleted), and `None` at once, with nothing sent, when the task holds the read lock (an
    /// upgrade, which could only time out; Curator's timed form returns false after waiting).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a zero timeout; otherwise as [`acquire`](Self::acquire),
    /// except for the upgrade.
    ///
    /// # Cancel safety
    /// Cancel-safe, as [`acquire`](Self::acquire).
    pub async fn acquire_timeout(&self, timeout: Duration) -> Result<Option<WriteLockGuard>> {
        acquire::acquire_timeout(self, timeout).await
    }

    /// A handle whose acquires of the write lock are revocable; see [`Revocable`].
    pub fn revocable(&self) -> Revocable<WriteLock> {
        Revocable::new(self.clone())
    }

    /// True when any task of this process holds the write lock through this lock or a clone.
    pub fn is_acquired_in_this_process(&self) -> bool {
        self.shared.write_holds.any()
    }

    /// True when the current task (or thread, outside a task) holds the write lock.
    pub fn is_owned_by_current_task(&self) -> bool {
        self.shared.write_holds.held_by(Owner::current())
    }

    /// The full paths (namespace stripped) of the write nodes under the lock path (every
    /// child whose name contains `__WRIT__`), in queue order, waiting writers included. The
    /// first is not necessarily the holder: readers may be ahead of it.
    ///
    /// # Errors
    /// ZooKeeper errors the retry policy gave up on.
    ///
    /// # Cancel safety
    /// Cancel-safe: it only reads.
    pub async fn participant_nodes(&self) -> Result<Vec<String>> {
        self.shared.participants(WRITE_LOCK_NAME).await
    }
}

impl Reentrant for WriteLock {
    const HALF: Option<&'static str> = Some("write");

    fn parts(&self) -> Parts<'_> {
        Parts { turns: &self.shared.turns, holds: &self.shared.write_holds, internals: &self.shared.write }
    }

    fn guard(inner: TicketGuard) -> WriteLockGuard {
        WriteLockGuard { inner }
    }

    /// The owner of the read lock is refused: its write node would queue behind its own read
    /// node forever.
    fn refuses(&self, owner: Owner) -> bool {
        self.shared.read_holds.held_by(owner)
    }
}

impl Guarded for WriteLock {
    type Guard = WriteLockGuard;
}

/// Proof that this process holds the read lock of an [`InterProcessReadWriteLock`].
/// Releasing it (or dropping it) ends this hold; the node is deleted when the owner's last
/// nested read guard ends.
///
/// Not `Clone`; dropping it never blocks: the delete is sent at once and its reply left to the
/// framework's reaper.
#[must_use = "dropping the guard releases the lock"]
#[clippy::has_significant_drop]
#[derive(Debug)]
pub struct ReadLockGuard {
    inner: TicketGuard,
}

impl ReadLockGuard {
    /// The read node's path (namespace stripped), e.g. `/locks/a/_c_<uuid>-__READ__0000000003`.
    pub fn lock_path(&self) -> &str {
        self.inner.lock_path()
    }

    /// The read node's creation zxid. Unlike the write lock's, it is no fence: a read node a
    /// writer made by downgrading is created after a writer queued behind it, so the next
    /// writer's token is lower than this one (fence writers with the write guard's token).
    pub fn fencing_token(&self) -> i64 {
        self.inner.fencing_token()
    }

    /// Whether the read lock can still be trusted: same session, not `Suspended`/`Lost` as
    /// the framework's error policy counts them, and the node not known to be deleted. A cheap
    /// local check, no I/O.
    pub fn is_held(&self) -> bool {
        self.inner.is_held()
    }

    /// Completes when the read lock can no longer be trusted: the connection is `Suspended`
    /// or `Lost` (per the error policy), a new session replaced ours, or our node was deleted
    /// (from then on [`is_held`](Self::is_held) is false too).
    ///
    /// # Cancel safety
    /// Cancel-safe: it only observes.
    pub async fn lost(&self) {
        self.inner.lost().await
    }

    /// Runs `work`, the critical section, until it finishes or the read lock is lost (as
    /// [`lost`](Self::lost) tells), whichever comes first: the `tokio::select!` on `lost()`
    /// written once. `lost()` is checked first, so `work` never starts on a hold already lost.
    ///
    /// # Errors
    /// [`LockLost`] when the read lock was lost first; `work` was then dropped where it stood (at
    /// its current `.await`), so write it to be stopped there.
    ///
    /// # Cancel safety
    /// Cancel-safe: dropping the returned future drops `work` with it, and the hold stays as it
    /// was (still held unless lost), ready for another section or its release.
    #[doc(alias = "run_while_held", alias = "critical_section", alias = "with_lock")]
    pub async fn run<F: Future>(&self, work: F) -> std::result::Result<F::Output, LockLost> {
        run_until_lost(self.lost(), work, || Some(self.lock_path().to_owned())).await
    }

    /// Completes with `true` at each revocation request to the read node (another process
    /// wrote `__REVOKE__` into it), once per request and guard, requests made while the acquire
    /// waited included; with `false` when no request can come (the node is gone or its session
    /// ended, or the hold was not acquired revocably: then at once). See [`Revocable`].
    ///
    /// # Cancel safety
    /// Cancel-safe: a request is counted as reported only when this returns `true`.
    pub async fn revocation_requested(&self) -> bool {
        self.inner.revocation_requested().await
    }

    /// Ends this hold. When it was the owner's last read guard, the node is deleted now and
    /// the outcome reported; a failure that outlasts the retry policy is returned (a retryable
    /// one is left to the framework's reaper, which keeps trying while the session lasts). A
    /// node already gone (its session ended) counts as released.
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

impl Hold for ReadLockGuard {
    fn into_lock_hold(self) -> Box<dyn LockHold> {
        Box::new(self.inner)
    }
}

/// Proof that this process holds the write lock of an [`InterProcessReadWriteLock`].
/// Releasing it (or dropping it) ends this hold; the node is deleted when the owner's last
/// nested write guard ends. A read lock taken meanwhile by the same task (a downgrade) stays.
///
/// Not `Clone`; dropping it never blocks: the delete is sent at once and its reply left to the
/// framework's reaper.
#[must_use = "dropping the guard releases the lock"]
#[clippy::has_significant_drop]
#[derive(Debug)]
pub struct WriteLockGuard {
    inner: TicketGuard,
}

impl WriteLockGuard {
    /// The write node's path (namespace stripped), e.g. `/locks/a/_c_<uuid>-__WRIT__0000000003`.
    pub fn lock_path(&self) -> &str {
        self.inner.lock_path()
    }

    /// The write node's creation zxid: strictly increasing across successive nodes of this
    /// lock, across sessions too. Pass it to systems that reject stale writers.
    pub fn fencing_token(&self) -> i64 {
        self.inner.fencing_token()
    }

    /// Whether the write lock can still be trusted: same session, not `Suspended`/`Lost` as
    /// the framework's error policy counts them, and the node not known to be deleted. A cheap
    /// local check, no I/O.
    pub fn is_held(&self) -> bool {
        self.inner.is_held()
    }

    /// Completes when the write lock can no longer be trusted: the connection is `Suspended`
    /// or `Lost` (per the error policy), a new session replaced ours, or our node was deleted
    /// (from then on [`is_held`](Self::is_held) is false too).
    ///
    /// # Cancel safety
    /// Cancel-safe: it only observes.
    pub async fn lost(&self) {
        self.inner.lost().await
    }

    /// Runs `work`, the critical section, until it finishes or the write lock is lost (as
    /// [`lost`](Self::lost) tells), whichever comes first: the `tokio::select!` on `lost()`
    /// written once. `lost()` is checked first, so `work` never starts on a hold already lost.
    ///
    /// # Errors
    /// [`LockLost`] when the write lock was lost first; `work` was then dropped where it stood (at
    /// its current `.await`), so write it to be stopped there.
    ///
    /// # Cancel safety
    /// Cancel-safe: dropping the returned future drops `work` with it, and the hold stays as it
    /// was (still held unless lost), ready for another section or its release.
    #[doc(alias = "run_while_held", alias = "critical_section", alias = "with_lock")]
    pub async fn run<F: Future>(&self, work: F) -> std::result::Result<F::Output, LockLost> {
        run_until_lost(self.lost(), work, || Some(self.lock_path().to_owned())).await
    }

    /// Completes with `true` at each revocation request to the write node (another process
    /// wrote `__REVOKE__` into it), once per request and guard, requests made while the acquire
    /// waited included; with `false` when no request can come (the node is gone or its session
    /// ended, or the hold was not acquired revocably: then at once). See [`Revocable`].
    ///
    /// # Cancel safety
    /// Cancel-safe: a request is counted as reported only when this returns `true`.
    pub async fn revocation_requested(&self) -> bool {
        self.inner.revocation_requested().await
    }

    /// Ends this hold. When it was the owner's last write guard, the node is deleted now and
    /// the outcome reported; a failure that outlasts the retry policy is returned (a retryable
    /// one is left to the framework's reaper, which keeps trying while the session lasts). A
    /// node already gone (its session ended) counts as released.
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

impl Hold for WriteLockGuard {
    fn into_lock_hold(self) -> Box<dyn LockHold> {
        Box::new(self.inner)
    }
}
