//! `InterProcessSemaphore`: Curator's `InterProcessSemaphoreV2`, on the same wire protocol.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use zookeeper_client::{EventType, OneshotWatcher};

use super::driver::StandardDriver;
use super::held::HeldNode;
use super::internals::{gave_up, pause_before_new_attempt, CreatedNode, Failure, LockInternals, Wait, WatchedChildren};
use crate::error::{Error, Result};
use crate::framework::{ConnectionState, Framework, Session};
use crate::path;

/// The child that holds the semaphore's internal mutex (Curator's `LOCK_PARENT`).
const LOCKS: &str = "locks";
/// The child that holds the lease nodes (Curator's `LEASE_PARENT`).
const LEASES: &str = "leases";
/// The lease node base name (Curator's `LEASE_BASE_NAME`).
const LEASE_NAME: &str = "lease-";

/// A distributed counting semaphore, compatible with Curator's `InterProcessSemaphoreV2`: Rust
/// and Java/Curator processes using the same path and the same `max_leases` share one pool of
/// leases.
///
/// # Protocol
/// Under the semaphore path `S`:
/// - `S/locks` is a plain mutex (the [`InterProcessMutex`](crate::InterProcessMutex) protocol:
///   `_c_<uuid>-lock-<seq>` nodes) that serializes admission;
/// - `S/leases/_c_<uuid>-lease-<seq>` are the leases, one protected ephemeral-sequential node
///   each.
///
/// To take a lease, a contender holds `S/locks`, creates its lease node, and lists `S/leases`
/// with a child watch until there are at most `max_leases` children (its own node counts); then
/// it releases `S/locks`. If its lease node disappears meanwhile (its session ended, or someone
/// deleted it), it starts again with a new node, so there is never an orphaned lease or a lease
/// over the limit. Parents are container nodes, removed by the server once empty.
///
/// `max_leases` is not stored in ZooKeeper, as in Curator: every process must use the same
/// value. The handle does not change it later (Curator's `SharedCount` variant is not offered).
///
/// Waiters queue on `S/locks` in arrival order; only the first of them waits for a free lease.
///
/// # Leases
/// A lease is a [`SemaphoreLease`] guard: `release().await` deletes its node and reports errors;
/// dropping it deletes the node in the background (the delete is sent at once, before any later
/// request of this framework). A lease belongs to the process, not to a task: any task may
/// release it.
///
/// # Differences from Curator
/// - [`acquire_many`](Self::acquire_many) holds `S/locks` until it has all its leases (Curator
///   takes them one lock hold at a time, so two `acquire(2)` callers on a 3-lease semaphore can
///   each get one and wait for each other). It is still the same protocol on the wire.
/// - [`participant_nodes`](Self::participant_nodes) returns full paths in sequence order;
///   Curator's `getParticipantNodes` returns the bare node names, unsorted.
/// - The timed forms apply one deadline to the whole call.
///
/// ```no_run
/// # async fn example(framework: zk_recipes::Framework) -> zk_recipes::Result<()> {
/// use zk_recipes::InterProcessSemaphore;
///
/// let semaphore = InterProcessSemaphore::new(&framework, "/semaphores/db-connections", 3)?;
/// let lease = semaphore.acquire().await?;
/// // ... at most 3 leases are held across all processes ...
/// lease.release().await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct InterProcessSemaphore {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    framework: Framework,
    /// The path as the user gave it.
    path: String,
    max_leases: usize,
    /// The internal mutex on `S/locks`.
    lock: LockInternals,
    /// The lease directory `S/leases`.
    leases: LockInternals,
    /// Leases acquired through this handle (or a clone) and not yet released.
    held: Arc<AtomicUsize>,
}

impl InterProcessSemaphore {
    /// A semaphore on `path` with `max_leases` leases. Does no I/O. Lease nodes carry no data.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when `max_leases` is 0; [`Error::InvalidPath`] for a path that
    /// is not a valid absolute path, or is `/` or under `/zookeeper`.
    pub fn new(framework: &Framework, path: &str, max_leases: usize) -> Result<Self> {
        Self::with_data(framework, path, max_leases, Vec::new())
    }

    /// A semaphore whose lease nodes carry `data` (informational only, Curator's
    /// `setNodeData`; Curator writes the host's address by default).
    ///
    /// # Errors
    /// As [`new`](Self::new).
    pub fn with_data(framework: &Framework, path: &str, max_leases: usize, data: Vec<u8>) -> Result<Self> {
        path::validate_recipe_path(path)?;
        if max_leases == 0 {
            return Err(Error::invalid_argument("max_leases", "must be at least 1"));
        }
        let lock =
            LockInternals::new(framework, &path::join(path, LOCKS), Arc::new(StandardDriver::MUTEX), Vec::new())?;
        let driver = StandardDriver { lock_name: LEASE_NAME, max_leases };
        let leases = LockInternals::new(framework, &path::join(path, LEASES), Arc::new(driver), data)?;
        Ok(Self {
            shared: Arc::new(Shared {
                framework: framework.clone(),
                path: path.to_owned(),
                max_leases,
                lock,
                leases,
                held: Arc::default(),
            }),
        })
    }

    /// The semaphore path as given.
    pub fn path(&self) -> &str {
        &self.shared.path
    }

    /// The number of leases this handle admits at once.
    pub fn max_leases(&self) -> usize {
        self.shared.max_leases
    }

    /// Waits until a lease is available and takes it.
    ///
    /// # Errors
    /// [`Error::Closed`]/[`Error::NotStarted`]; a ZooKeeper error the retry policy gave up on
    /// (for example a long outage, or `NoNode` when lease nodes kept vanishing); `NoAuth` when
    /// the ACL forbids creating the nodes.
    ///
    /// # Cancel safety
    /// Cancel-safe: a cancelled acquire leaves neither a lease node nor an internal lock node
    /// behind (the framework's reaper deletes them in the background), and it loses its place
    /// in the queue.
    pub async fn acquire(&self) -> Result<SemaphoreLease> {
        let mut leases = self.acquire_many(1).await?;
        Ok(leases.remove(0))
    }

    /// Waits until `n` leases are available and takes them together.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when `n` is 0 or more than [`max_leases`](Self::max_leases);
    /// otherwise as [`acquire`](Self::acquire). A failed call holds no lease.
    ///
    /// # Cancel safety
    /// Cancel-safe, as [`acquire`](Self::acquire): leases taken before the cancellation are
    /// released.
    pub async fn acquire_many(&self, n: usize) -> Result<Vec<SemaphoreLease>> {
        self.check_count(n)?;
        match self.acquire_leases(n, Wait::Forever).await? {
            Some(leases) => Ok(leases),
            None => unreachable!("waiting forever yields leases or an error"),
        }
    }

    /// Takes a lease if one is free right now; never waits for one.
    ///
    /// As with Curator's `acquire(1, 0, unit)`, this also returns `None` when another
    /// contender holds the internal lock at that moment (it is waiting for a lease, or taking
    /// one).
    ///
    /// # Errors
    /// As [`acquire`](Self::acquire).
    ///
    /// # Cancel safety
    /// Cancel-safe, as [`acquire`](Self::acquire).
    pub async fn try_acquire(&self) -> Result<Option<SemaphoreLease>> {
        Ok(self.try_acquire_many(1).await?.map(|mut leases| leases.remove(0)))
    }

    /// Takes `n` leases if they are free right now; never waits. See
    /// [`try_acquire`](Self::try_acquire).
    ///
    /// # Errors
    /// As [`acquire_many`](Self::acquire_many).
    ///
    /// # Cancel safety
    /// Cancel-safe, as [`acquire`](Self::acquire).
    pub async fn try_acquire_many(&self, n: usize) -> Result<Option<Vec<SemaphoreLease>>> {
        self.check_count(n)?;
        self.acquire_leases(n, Wait::No).await
    }

    /// Waits at most `timeout` for a lease; `None` when the time ran out (nothing is held then).
    /// The time covers everything: the internal lock, the wait for a lease, connection waits
    /// and retries.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a zero timeout (use [`try_acquire`](Self::try_acquire));
    /// otherwise as [`acquire`](Self::acquire).
    ///
    /// # Cancel safety
    /// Cancel-safe, as [`acquire`](Self::acquire).
    pub async fn acquire_timeout(&self, timeout: Duration) -> Result<Option<SemaphoreLease>> {
        Ok(self.acquire_many_timeout(1, timeout).await?.map(|mut leases| leases.remove(0)))
    }

    /// Waits at most `timeout` (in total) for `n` leases; `None` when the time ran out (nothing
    /// is held then).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a zero timeout or a bad `n`; otherwise as
    /// [`acquire`](Self::acquire).
    ///
    /// # Cancel safety
    /// Cancel-safe, as [`acquire`](Self::acquire).
    pub async fn acquire_many_timeout(&self, n: usize, timeout: Duration) -> Result<Option<Vec<SemaphoreLease>>> {
        self.check_count(n)?;
        if timeout.is_zero() {
            return Err(Error::invalid_argument("timeout", "must be greater than zero; use try_acquire()"));
        }
        match tokio::time::timeout(timeout, self.acquire_leases(n, Wait::Forever)).await {
            Ok(result) => result,
            Err(_) => Ok(None),
        }
    }

    /// True when a lease acquired through this handle (or a clone) is still held by this
    /// process (not yet released or dropped). A local check, no I/O.
    pub fn is_acquired_in_this_process(&self) -> bool {
        self.shared.held.load(Ordering::SeqCst) > 0
    }

    /// The full paths (namespace stripped) of all lease nodes, in sequence order:
    /// `<path>/leases/_c_<uuid>-lease-<seq>`. Empty when the semaphore has never been used (or
    /// its containers were reaped). Curator's `getParticipantNodes` returns the bare names
    /// instead; [`path::node_name`] gives those.
    ///
    /// # Errors
    /// ZooKeeper errors the retry policy gave up on.
    ///
    /// # Cancel safety
    /// Cancel-safe: it only reads.
    pub async fn participant_nodes(&self) -> Result<Vec<String>> {
        self.shared.leases.participant_nodes().await
    }

    fn check_count(&self, n: usize) -> Result<()> {
        if n == 0 || n > self.shared.max_leases {
            return Err(Error::invalid_argument(
                "n",
                format!("must be between 1 and max_leases ({}), got {n}", self.shared.max_leases),
            ));
        }
        Ok(())
    }

    /// Takes `n` leases, starting over (new nodes) whenever one goes missing, as long as the
    /// retry policy allows. `None` only with [`Wait::No`].
    async fn acquire_leases(&self, n: usize, wait: Wait) -> Result<Option<Vec<SemaphoreLease>>> {
        let span = tracing::debug_span!("zk_recipes.semaphore.acquire", path = %self.shared.path, n);
        let run = async {
            let started = Instant::now();
            let mut attempt = 0u32;
            loop {
                match self.attempt(n, wait).await {
                    Ok(Some((nodes, watcher))) => {
                        tracing::debug!(waited = ?started.elapsed(), "leases acquired");
                        let mut watcher = Some(watcher);
                        return Ok(Some(nodes.into_iter().map(|node| self.lease(node, watcher.take())).collect()));
                    }
                    Ok(None) => return Ok(None),
                    Err(Failure::Error(e)) => return Err(e),
                    Err(Failure::NodeMissing) => match self.shared.framework.retry_delay(attempt, started) {
                        Some(delay) => {
                            tracing::debug!(attempt, "lease node missing; trying again with new nodes");
                            attempt += 1;
                            pause_before_new_attempt(&self.shared.framework, delay).await;
                        }
                        None => return Err(gave_up(&self.shared.framework)),
                    },
                }
            }
        };
        tracing::Instrument::instrument(run, span).await
    }

    /// One pass of Curator's `internalAcquire1Lease`, for `n` leases at once.
    ///
    /// Locals drop in reverse order, so on every early return our lease nodes are deleted
    /// before the internal lock: the next holder never counts a lease that is going away.
    async fn attempt(&self, n: usize, wait: Wait) -> Result<Option<(Vec<HeldNode>, OneshotWatcher)>, Failure> {
        let shared = &*self.shared;
        let Some(lock) = shared.lock.acquire(wait).await? else { return Ok(None) };
        let session = shared.framework.inner().session()?;
        if session.epoch != lock.epoch() {
            return Err(Failure::NodeMissing); // the lock went with its session
        }
        let mut nodes: Vec<CreatedNode> = Vec::with_capacity(n);
        let mut listing: Option<WatchedChildren> = None;
        for _ in 0..n {
            let Some((node, listed)) = shared.leases.create_watched(&session).await? else {
                return Err(Failure::NodeMissing);
            };
            nodes.push(node);
            listing = listed;
        }
        loop {
            let (children, watcher) = match listing.take() {
                Some(listed) => listed,
                None => match shared.leases.list_watched(&session).await? {
                    Some(listed) => listed,
                    None => return Err(Failure::NodeMissing),
                },
            };
            if !nodes.iter().all(|node| children.iter().any(|c| c == node.name())) {
                return Err(Failure::NodeMissing);
            }
            if children.len() <= shared.max_leases {
                // Let the next contender in first (the delete goes out now). The unfired watch
                // goes with the first lease: dropped now, it would cost a RemoveWatches request;
                // kept, it fires (at the latest on our own lease's delete, whose notification
                // the server sends before the reply) and then costs nothing.
                drop(lock);
                return Ok(Some((nodes.into_iter().map(CreatedNode::into_held).collect(), watcher)));
            }
            if wait == Wait::No {
                return Ok(None);
            }
            if !self.wait_for_change(&session, watcher).await {
                return Err(Failure::NodeMissing);
            }
        }
    }

    /// Waits for the lease list to change. False when the session ended meanwhile.
    async fn wait_for_change(&self, session: &Session, watcher: zookeeper_client::OneshotWatcher) -> bool {
        let epoch = session.epoch;
        let mut state = self.shared.framework.state_watch();
        let session_ended = state.wait_for(|s| s.epoch != epoch || s.state == ConnectionState::Lost);
        tokio::select! {
            event = watcher.changed() => event.event_type != EventType::Session,
            _ = session_ended => false,
        }
    }

    fn lease(&self, node: HeldNode, list_watch: Option<OneshotWatcher>) -> SemaphoreLease {
        self.shared.held.fetch_add(1, Ordering::SeqCst);
        let count = HoldCount(self.shared.held.clone());
        SemaphoreLease { lease_path: node.user_path().to_owned(), node, count, _list_watch: list_watch }
    }
}

/// Decrements the handle's count of held leases when the lease ends.
#[derive(Debug)]
struct HoldCount(Arc<AtomicUsize>);

impl Drop for HoldCount {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// One lease of an [`InterProcessSemaphore`]: proof that this process holds it.
///
/// `release().await` deletes the lease node and reports the outcome; dropping the lease
/// deletes it in the background. Any task may release it.
#[must_use = "dropping the lease releases it"]
#[clippy::has_significant_drop]
#[derive(Debug)]
pub struct SemaphoreLease {
    node: HeldNode,
    lease_path: String,
    count: HoldCount,
    /// The acquire's watch on the lease list, kept so that it fires instead of being removed
    /// with an extra request; dropped after the lease's own delete (declared last: dropped
    /// last).
    _list_watch: Option<OneshotWatcher>,
}

impl SemaphoreLease {
    /// The lease node's path (namespace stripped), e.g.
    /// `/semaphores/a/leases/_c_<uuid>-lease-0000000003`.
    pub fn lease_path(&self) -> &str {
        &self.lease_path
    }

    /// The lease node's creation zxid: unique per lease and increasing over time. Pass it to
    /// systems that reject stale holders.
    pub fn fencing_token(&self) -> i64 {
        self.node.fencing_token()
    }

    /// Whether the lease can still be trusted (same session, and not `Suspended`/`Lost` as the
    /// framework's error policy counts them). A cheap local check, no I/O.
    pub fn is_held(&self) -> bool {
        self.node.is_held()
    }

    /// Completes when the lease can no longer be trusted: the connection is `Suspended` or
    /// `Lost` (per the error policy), a new session replaced ours, or the lease node was
    /// deleted. Use it in `tokio::select!` next to the work the lease guards.
    ///
    /// # Cancel safety
    /// Cancel-safe: it only observes; each call sets a fresh data watch on the lease node.
    pub async fn lost(&self) {
        self.node.lost().await
    }

    /// Releases the lease: deletes its node now and reports the outcome. A node already gone
    /// (its session ended) counts as released. A connection failure that outlasts the retry
    /// policy hands the delete to the framework's reaper and returns the error.
    ///
    /// # Errors
    /// The ZooKeeper error that stopped the delete.
    ///
    /// # Cancel safety
    /// Cancel-safe: if cancelled, the delete is finished in the background.
    pub async fn release(self) -> Result<()> {
        let SemaphoreLease { node, count, lease_path, _list_watch } = self;
        drop(count);
        let span = tracing::debug_span!("zk_recipes.semaphore.release", lease = %lease_path);
        let released = tracing::Instrument::instrument(node.release(), span).await;
        drop(_list_watch);
        released
    }

    /// Releases several leases at once: all deletes are sent together, then awaited. Every
    /// lease is released even when some deletes fail; the first error is returned.
    ///
    /// # Errors
    /// The first ZooKeeper error that stopped a delete (that delete continues in the
    /// background).
    ///
    /// # Cancel safety
    /// Cancel-safe: if cancelled, the remaining deletes are finished in the background.
    pub async fn release_all(leases: impl IntoIterator<Item = SemaphoreLease>) -> Result<()> {
        let results = futures::future::join_all(leases.into_iter().map(SemaphoreLease::release)).await;
        results.into_iter().collect()
    }
}
