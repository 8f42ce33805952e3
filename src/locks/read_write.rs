//! `InterProcessReadWriteLock`: Curator's distributed read-write lock, on the same wire
//! protocol (with Curator 5.5+'s downgrade node).

use std::sync::Arc;

use zookeeper_client::Stat;

use super::acquire::{acquire_forms, hold_one_node, Acquire, Mode};
use super::driver::{ReadDriver, WriteDriver};
use super::held::{node_accessors, HeldNode, NodeWatch};
use super::internals::LockInternals;
use super::node::{retry_request, Failure};
use super::reentrant::{ticket_guard, Holds, Owner, Ticket};
use super::revocation::{NodeRevocation, Revocable, RevocableLock, Signal};
use crate::error::{Error, Result};
use crate::framework::Framework;
use crate::path;
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
    read_holds: Holds,
    write_holds: Holds,
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
        let read = LockInternals::new(framework, path, Arc::new(ReadDriver), data.clone())?;
        let write = LockInternals::new(framework, path, Arc::new(WriteDriver), data)?;
        let shared = Shared { read, write, read_holds: Holds::default(), write_holds: Holds::default() };
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

    /// Logs an acquisition, as the mutex does.
    fn acquired(&self, half: &'static str, node: &HeldNode, started: tokio::time::Instant) {
        let watch = node.watch();
        let session = self.framework().snapshot().session_id;
        tracing::debug!(
            node = %watch.user_path(),
            half,
            session = format_args!("{session:#x}"),
            epoch = watch.epoch(),
            waited = ?started.elapsed(),
            "lock acquired"
        );
    }

    /// The owner's downgrade: the write hold `write` is live in this session; a plain
    /// ephemeral read node carrying the write node's sequence is created and granted at once.
    async fn downgrade(&self, write: &NodeWatch, revocable: Option<&Arc<Signal>>) -> Result<HeldNode> {
        let framework = self.framework();
        let lost = || Error::LockLost { path: write.user_path().to_owned() };
        if write.is_over() {
            return Err(lost());
        }
        let session = framework.inner().session()?;
        if session.epoch != write.epoch() {
            return Err(lost());
        }
        let write_path = write.full_path();
        let ours = |stat: Option<Stat>| stat.is_some_and(|s| session.owns(s.ephemeral_owner));
        let check = || session.client.check_stat(write_path);
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
        let revocation =
            revocable.map(|signal| NodeRevocation::start(framework, session.epoch, node.full_path(), signal.clone()));
        Ok(HeldNode::with_revocation(node, revocation))
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

    acquire_forms! {
        ReadLockGuard;
        /// Waits until the read lock is held: no writer holds it or is queued ahead. Granted at
        /// once to the task that holds the write lock (a downgrade).
        ///
        /// # Errors
        /// As [`InterProcessMutex::acquire`](crate::InterProcessMutex::acquire); for a downgrade,
        /// [`Error::LockLost`] when the write node is gone or belongs to an ended session.
        ///
        /// # Cancel safety
        /// Cancel-safe: a cancelled acquire never leaves a lock node behind (the cleanup is done in
        /// the background by the framework's reaper), and it loses its place in the queue.
        acquire;
        /// Takes the read lock if no writer holds it or waits for it; never waits (one round trip).
        ///
        /// # Errors
        /// As [`acquire`](Self::acquire).
        ///
        /// # Cancel safety
        /// Cancel-safe, as [`acquire`](Self::acquire).
        try_acquire;
        /// Waits at most `timeout` for the read lock; `None` when the time ran out (its node is
        /// deleted). The time covers everything, connection waits and retries included.
        ///
        /// # Errors
        /// [`Error::InvalidArgument`] for a zero timeout; otherwise as [`acquire`](Self::acquire).
        ///
        /// # Cancel safety
        /// Cancel-safe, as [`acquire`](Self::acquire).
        acquire_timeout;
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

    async fn acquire_as<M: Mode>(&self, revocable: Option<&Arc<Signal>>) -> Result<M::Out<ReadLockGuard>> {
        let shared = &self.shared;
        let owner = Owner::current();
        if let Some(ticket) = shared.read_holds.reenter(owner)? {
            return Ok(M::held(self.guard(ticket)));
        }
        let span = tracing::debug_span!("zk_recipes.lock.acquire", path = %self.path(), half = "read");
        let started = tokio::time::Instant::now();
        if let Some(write) = shared.write_holds.node_of(owner) {
            let node = tracing::Instrument::instrument(shared.downgrade(&write, revocable), span.clone()).await?;
            span.in_scope(|| shared.acquired("read (downgrade)", &node, started));
            return Ok(M::held(self.guard(shared.read_holds.insert(owner, node))));
        }
        let acquired = tracing::Instrument::instrument(shared.read.acquire_with::<M>(revocable), span.clone()).await?;
        Ok(M::map(acquired, |node| {
            span.in_scope(|| shared.acquired("read", &node, started));
            self.guard(shared.read_holds.insert(owner, node))
        }))
    }

    fn guard(&self, ticket: Ticket) -> ReadLockGuard {
        ReadLockGuard { shared: self.shared.clone(), ticket }
    }
}

impl Acquire for ReadLock {
    type Guard = ReadLockGuard;

    async fn acquire_with<M: Mode>(&self) -> Result<M::Out<ReadLockGuard>> {
        self.acquire_as::<M>(None).await
    }

    fn is_acquired_in_this_process(&self) -> bool {
        ReadLock::is_acquired_in_this_process(self)
    }
}

impl RevocableLock for ReadLock {
    async fn acquire_revocable<M: Mode>(&self, signal: &Arc<Signal>) -> Result<M::Out<ReadLockGuard>> {
        self.acquire_as::<M>(Some(signal)).await
    }
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

    acquire_forms! {
        WriteLockGuard;
        /// Waits until the write lock is held: its node is first in the queue.
        ///
        /// # Errors
        /// [`Error::UpgradeRefused`] at once, with nothing sent, when the task holds the read lock
        /// of this lock; otherwise as
        /// [`InterProcessMutex::acquire`](crate::InterProcessMutex::acquire).
        ///
        /// # Cancel safety
        /// Cancel-safe: a cancelled acquire never leaves a lock node behind (the cleanup is done in
        /// the background by the framework's reaper), and it loses its place in the queue.
        acquire;
        /// Takes the write lock if no one holds either half or waits for it; never waits (one
        /// round trip). `None` at once, with nothing sent, when the task holds the read lock.
        ///
        /// # Errors
        /// As [`acquire`](Self::acquire), except for the upgrade.
        ///
        /// # Cancel safety
        /// Cancel-safe, as [`acquire`](Self::acquire).
        try_acquire;
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
        acquire_timeout;
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

    async fn acquire_as<M: Mode>(&self, revocable: Option<&Arc<Signal>>) -> Result<M::Out<WriteLockGuard>> {
        let shared = &self.shared;
        let owner = Owner::current();
        if let Some(ticket) = shared.write_holds.reenter(owner)? {
            return Ok(M::held(self.guard(ticket)));
        }
        if shared.read_holds.held_by(owner) {
            return match M::busy() {
                Some(refused) => Ok(refused),
                None => Err(Error::UpgradeRefused { path: self.path().to_owned() }),
            };
        }
        let span = tracing::debug_span!("zk_recipes.lock.acquire", path = %self.path(), half = "write");
        let started = tokio::time::Instant::now();
        let acquired = tracing::Instrument::instrument(shared.write.acquire_with::<M>(revocable), span.clone()).await?;
        Ok(M::map(acquired, |node| {
            span.in_scope(|| shared.acquired("write", &node, started));
            self.guard(shared.write_holds.insert(owner, node))
        }))
    }

    fn guard(&self, ticket: Ticket) -> WriteLockGuard {
        WriteLockGuard { shared: self.shared.clone(), ticket }
    }
}

impl Acquire for WriteLock {
    type Guard = WriteLockGuard;

    async fn acquire_with<M: Mode>(&self) -> Result<M::Out<WriteLockGuard>> {
        self.acquire_as::<M>(None).await
    }

    fn is_acquired_in_this_process(&self) -> bool {
        WriteLock::is_acquired_in_this_process(self)
    }
}

impl RevocableLock for WriteLock {
    async fn acquire_revocable<M: Mode>(&self, signal: &Arc<Signal>) -> Result<M::Out<WriteLockGuard>> {
        self.acquire_as::<M>(Some(signal)).await
    }
}

ticket_guard!(
    /// Proof that this process holds the read lock of an [`InterProcessReadWriteLock`].
    /// Releasing it (or dropping it) ends this hold; the node is deleted when the owner's last
    /// nested read guard ends.
    ReadLockGuard,
    read_holds,
    "__READ__"
);

ticket_guard!(
    /// Proof that this process holds the write lock of an [`InterProcessReadWriteLock`].
    /// Releasing it (or dropping it) ends this hold; the node is deleted when the owner's last
    /// nested write guard ends. A read lock taken meanwhile by the same task (a downgrade) stays.
    WriteLockGuard,
    write_holds,
    "__WRIT__"
);
