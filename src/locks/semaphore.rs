//! `InterProcessSemaphore`: Curator's `InterProcessSemaphoreV2`, on the same wire protocol.

use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use zookeeper_client::OneshotWatcher;

use super::acquire::{self, Acquire, Block, Hold, LockHold, Mode, Try};
use super::critical_section::{run_until_lost, LockLost};
use super::dir_mirror::{Ask, Asker, DirMirror, WaitOn};
use super::held::HeldNode;
use super::internals::LockInternals;
use super::mirror_slot::MirrorSlot;
use super::node_watch::MirrorSeat;
use super::start_over::fresh_attempts;
use crate::error::{Error, Result, ZkError};
use crate::framework::metrics::LockMetrics;
use crate::framework::metrics::Op;
use crate::framework::node::{retry_request, CreatedNode, Failure};
use crate::framework::protected::{nothing_behind, NodeDir};
use crate::framework::wait_strategy::WaitStrategy;
use crate::framework::{Arming, ClientKey, Framework, OneshotWatch, Session};
use crate::path;
use crate::protocol::driver::StandardDriver;
use crate::shared::{SharedCount, VersionedValue};
use crate::sync::Mutex;

// The child that holds the semaphore's internal mutex, the child that holds the lease nodes,
// and the lease node base name.
use crate::protocol::{LEASE_BASE_NAME as LEASE_NAME, LEASE_PARENT as LEASES, LOCK_PARENT as LOCKS};
/// The most leases one call takes: each is a node and a round trip, so anything larger is a
/// mistake better reported than attempted.
pub(crate) const MAX_LEASES_AT_ONCE: usize = 1 << 16;

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
/// With [`WaitStrategy::Mirror`] (the default) the lease count comes from the session's mirror
/// of `S/leases` instead of listings: a contender is admitted when its leases are in the
/// mirror and at most `max_leases` leases were created before or with its last one and are
/// still there. Curator's contenders on the same path count every lease after their create;
/// both rules keep the holders within `max_leases` together. With
/// [`pipelined_admission`](Self::pipelined_admission), a contender granted `S/locks` while the
/// mirror shows room sends the lock's delete right behind its last lease's create (the server
/// applies a session's requests in order, so the next holder of `S/locks` finds the lease),
/// and if every lease turned out to be taken it deletes its leases and queues on `S/locks`
/// again.
///
/// `max_leases` is not stored in ZooKeeper, as in Curator: every process must use the same
/// value, or read it from the same [`SharedCount`](crate::SharedCount) ([`with_count`](Self::with_count),
/// Curator's `InterProcessSemaphoreV2(client, path, SharedCountReader)`).
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
/// - [`acquire_many`](Self::acquire_many) creates all its leases under one hold of `S/locks`
///   (Curator takes them one lock hold at a time, so two `acquire(2)` callers on a 3-lease
///   semaphore can each get one and wait for each other). It is still the same protocol on the
///   wire.
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

/// Where the number of leases comes from.
#[derive(Debug)]
enum Limit {
    Fixed(usize),
    /// A [`SharedCount`](crate::SharedCount)'s local copy: read at every admission check, and
    /// a change wakes the waiting contender.
    Count(tokio::sync::watch::Receiver<VersionedValue<Vec<u8>>>),
}

/// A count below 1 (or bytes that are not a count) admits nobody.
fn leases_of(count: &VersionedValue<Vec<u8>>) -> usize {
    crate::protocol::values::decode_count(count.value()).ok().and_then(|c| usize::try_from(c).ok()).unwrap_or(0)
}

impl Limit {
    /// The limit in force now.
    fn current(&self) -> usize {
        match self {
            Limit::Fixed(n) => *n,
            Limit::Count(rx) => leases_of(&rx.borrow()),
        }
    }

    /// A reader for one acquire: a change is noticed only after the value last read.
    fn reader(&self) -> LimitReader {
        match self {
            Limit::Fixed(n) => LimitReader::Fixed(*n),
            Limit::Count(rx) => LimitReader::Count(rx.clone()),
        }
    }
}

/// One acquire's view of the limit.
enum LimitReader {
    Fixed(usize),
    Count(tokio::sync::watch::Receiver<VersionedValue<Vec<u8>>>),
}

impl LimitReader {
    /// The limit now, marking it read.
    fn current(&mut self) -> usize {
        match self {
            LimitReader::Fixed(n) => *n,
            LimitReader::Count(rx) => leases_of(&rx.borrow_and_update()),
        }
    }

    /// Completes when the limit changed after it was last read; never for a fixed limit (or
    /// a count whose `SharedCount` is gone).
    async fn changed(&mut self) {
        if let LimitReader::Count(rx) = self {
            if rx.changed().await.is_ok() {
                return;
            }
        }
        std::future::pending::<()>().await;
    }
}

#[derive(Debug)]
struct Shared {
    max_leases: Limit,
    /// The internal mutex on `S/locks`.
    lock: LockInternals,
    /// The semaphore's waits and leases, in its metrics.
    metrics: LockMetrics,
    /// The lease directory `S/leases`: counted, never ordered.
    leases: NodeDir,
    /// The session's mirror of `S/leases`, when the framework's [`WaitStrategy`] is the
    /// mirror: the count comes from it instead of a listing with a child watch.
    leases_mirror: Option<MirrorSlot>,
    /// Leases acquired through this handle (or a clone) and not yet released.
    held: Arc<AtomicUsize>,
    /// [`InterProcessSemaphore::pipelined_admission`]: the internal lock may go with the last
    /// lease's create.
    pipelined: AtomicBool,
    /// The path as the user gave it.
    path: String,
}

/// How a wait on the lease directory's mirror ended.
enum MirrorAdmit {
    /// Our leases are admitted; the asker has seen them in the view.
    Admitted(Asker),
    /// A try found every lease taken.
    Busy,
    /// No mirror on this session after all: admit the classic way.
    Classic,
    /// Every lease was taken after all, and the internal lock went with our last create: our
    /// leases are to be deleted, and the contender queues again.
    Missed,
}

/// The leases of one successful acquire: at least one.
struct Granted {
    first: SemaphoreLease,
    rest: Vec<SemaphoreLease>,
}

impl Granted {
    fn into_vec(self) -> Vec<SemaphoreLease> {
        std::iter::once(self.first).chain(self.rest).collect()
    }
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
    /// As [`new`](Self::new); [`Error::TooLarge`] when the path and data do not fit in one
    /// request ([`FrameworkBuilder::max_request_bytes`](crate::FrameworkBuilder::max_request_bytes)).
    pub fn with_data(framework: &Framework, path: &str, max_leases: usize, data: Vec<u8>) -> Result<Self> {
        path::validate_recipe_path(path)?;
        if max_leases == 0 {
            return Err(Error::invalid_argument("max_leases", "must be at least 1"));
        }
        Self::build(framework, path, Limit::Fixed(max_leases), data)
    }

    fn build(framework: &Framework, path: &str, limit: Limit, data: Vec<u8>) -> Result<Self> {
        let mutex = Arc::new(StandardDriver::MUTEX);
        // The internal lock is a plain mutex: uncontended, its fast path saves a request.
        let lock = LockInternals::new(framework, &path::join(path, LOCKS), mutex, Vec::new())?.with_fast_path();
        let leases = NodeDir::new(framework, &path::join(path, LEASES), LEASE_NAME, data)?.owned_by("semaphore");
        let leases_mirror = (framework.config().wait_strategy == WaitStrategy::Mirror).then(MirrorSlot::default);
        let metrics = LockMetrics::new(&framework.observer().metrics.labels, "semaphore", path);
        let shared = Shared {
            max_leases: limit,
            metrics,
            lock,
            leases,
            leases_mirror,
            held: Arc::default(),
            pipelined: AtomicBool::new(false),
            path: path.to_owned(),
        };
        Ok(Self { shared: Arc::new(shared) })
    }

    /// A semaphore whose number of leases is `count`'s value, read at every admission
    /// (Curator's `InterProcessSemaphoreV2(client, path, SharedCountReader)`): raising it wakes
    /// the waiting contender; lowering it revokes no lease, it only admits nobody new until
    /// the holders are below it. A count below 1 admits nobody. The count is read from
    /// `count`'s local copy, which the caller starts and keeps alive; each process compares
    /// with its own copy, so while a change spreads two processes may briefly use different
    /// limits (as in Curator).
    ///
    /// # Errors
    /// As [`new`](Self::new).
    pub fn with_count(framework: &Framework, path: &str, count: &SharedCount) -> Result<Self> {
        path::validate_recipe_path(path)?;
        Self::build(framework, path, Limit::Count(count.raw_watch()), Vec::new())
    }

    /// With `on`, a contender that waits on its session's mirror ([`WaitStrategy::Mirror`], the
    /// default) and finds a free lease in it when it is granted the internal lock sends the
    /// lock's delete right behind its lease's create: one round trip for both, and the next
    /// contender starts while this one's lease is counted (3 round trips per contended lease
    /// cycle instead of 3.5, the same 4 requests). Off by default: a contender keeps the
    /// internal lock until its lease is admitted, as Curator's do. Applies to this handle and
    /// its clones; on the per-waiter watch, or on a session whose mirror cannot run, it
    /// changes nothing.
    ///
    /// The count is kept just the same: a lease is admitted only once the mirror shows it and
    /// at most `max_leases` leases created before or with it, and a contender that finds every
    /// lease taken after all deletes its lease and queues again. What changes is the order in
    /// which leases are admitted, against the order of their
    /// [`fencing_token`](SemaphoreLease::fencing_token)s (their creates' order). Off, a
    /// contender holds the internal lock from before its create until its admission, so leases
    /// are admitted in token order. On, a contender whose create's reply comes late (a slow
    /// connection, a paused process) can be admitted after the next contender, which has the
    /// higher token; both leases are then held at once (the earlier one counts from its
    /// create), so this needs two free leases and never happens with a fixed `max_leases` of
    /// one. Turn it on where the tokens of a larger semaphore's leases are not compared with
    /// each other.
    ///
    /// ```no_run
    /// # async fn example(framework: zk_recipes::Framework) -> zk_recipes::Result<()> {
    /// use zk_recipes::InterProcessSemaphore;
    ///
    /// // Faster contended admissions; leases held at once may arrive out of token order.
    /// let semaphore = InterProcessSemaphore::new(&framework, "/semaphores/workers", 3)?.pipelined_admission(true);
    /// # drop(semaphore); Ok(()) }
    /// ```
    pub fn pipelined_admission(self, on: bool) -> Self {
        self.shared.pipelined.store(on, Ordering::SeqCst);
        self
    }

    /// The semaphore path as given.
    pub fn path(&self) -> &str {
        &self.shared.path
    }

    /// The number of leases this handle admits at once (for [`with_count`](Self::with_count),
    /// the count now).
    pub fn max_leases(&self) -> usize {
        self.shared.max_leases.current()
    }

    /// Waits until a lease is available and takes it.
    ///
    /// # Errors
    /// [`Error::Closed`]/[`Error::NotStarted`]; a ZooKeeper error the retry policy gave up on
    /// (for example a long outage); [`Error::RetriesExhausted`] when lease nodes kept
    /// vanishing; `NoAuth` when the ACL forbids creating the nodes.
    ///
    /// # Cancel safety
    /// Cancel-safe: a cancelled acquire leaves neither a lease node nor an internal lock node
    /// behind (the framework's reaper deletes them in the background), and it loses its place
    /// in the queue.
    pub async fn acquire(&self) -> Result<SemaphoreLease> {
        acquire::acquire(self).await
    }

    /// Waits until `n` leases are available and takes them together.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when `n` is 0, more than [`max_leases`](Self::max_leases)
    /// or more than 65,536; otherwise as [`acquire`](Self::acquire). A failed call holds no
    /// lease. A semaphore sized by a `SharedCount` ([`with_count`](Self::with_count)) refuses
    /// only 0 and more than 65,536: the count may grow, so `n` above it waits for it to, and
    /// holds the semaphore's internal lock while it waits (as Curator's does), keeping every
    /// other contender out until then.
    ///
    /// # Cancel safety
    /// Cancel-safe, as [`acquire`](Self::acquire): leases taken before the cancellation are
    /// released.
    pub async fn acquire_many(&self, n: usize) -> Result<Vec<SemaphoreLease>> {
        self.check_count(n)?;
        let waiting = self.shared.metrics.waiting();
        let granted = self.acquire_leases::<Block>(n).await?;
        waiting.acquired();
        Ok(granted.into_vec())
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
        acquire::try_acquire(self).await
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
        Ok(self.acquire_leases::<Try>(n).await?.map(Granted::into_vec))
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
        acquire::acquire_timeout(self, timeout).await
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
        let waiting = self.shared.metrics.waiting();
        match acquire::within(timeout, self.acquire_leases::<Block>(n)).await? {
            Some(granted) => {
                waiting.acquired();
                Ok(Some(granted.into_vec()))
            }
            None => {
                self.shared.metrics.timed_out();
                Ok(None)
            }
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
        let in_sequence_order =
            |leases: &mut Vec<String>| leases.sort_by_key(|name| path::sort_key(name, LEASE_NAME).to_owned());
        self.shared.leases.participant_nodes(in_sequence_order).await
    }

    fn check_count(&self, n: usize) -> Result<()> {
        let most = match &self.shared.max_leases {
            Limit::Fixed(n) => (*n).min(MAX_LEASES_AT_ONCE),
            // The count may grow: only the per-call bound applies.
            Limit::Count(_) => MAX_LEASES_AT_ONCE,
        };
        if n == 0 || n > most {
            return Err(Error::invalid_argument(
                "n",
                format!("must be between 1 and {most} (max_leases, at most {MAX_LEASES_AT_ONCE}), got {n}"),
            ));
        }
        Ok(())
    }

    /// Takes `n` (at least one) leases in mode `M`, starting over with new nodes whenever one
    /// goes missing.
    async fn acquire_leases<M: Mode>(&self, n: usize) -> Result<M::Out<Granted>> {
        let span = tracing::debug_span!("zk_recipes.semaphore.acquire", path = %self.shared.path, n);
        let started = tokio::time::Instant::now();
        let run = fresh_attempts(self.framework(), &self.shared.path, || self.attempt::<M>(n));
        let granted = tracing::Instrument::instrument(run, span.clone()).await?;
        span.in_scope(|| tracing::debug!(waited = ?started.elapsed(), "leases acquired"));
        Ok(granted)
    }

    /// One pass of Curator's `internalAcquire1Lease`, for `n` leases at once.
    ///
    /// Locals drop in reverse order, so on every early return our lease nodes are deleted
    /// before the internal lock: the next holder never counts a lease that is going away.
    async fn attempt<M: Mode>(&self, n: usize) -> Result<M::Out<Granted>, Failure> {
        let shared = &*self.shared;
        loop {
            let lock = match M::into_held::<HeldNode, Granted>(shared.lock.acquire::<M>().await?) {
                Ok(lock) => lock,
                Err(busy) => return Ok(busy),
            };
            let session = self.framework().session()?;
            if session.epoch != lock.watch().epoch() {
                return Err(Failure::NodeMissing); // the lock went with its session
            }
            let limit = shared.max_leases.reader();
            let mirror = shared
                .leases_mirror
                .as_ref()
                .and_then(|slot| slot.for_session(self.framework(), &session, shared.leases.dir()));
            let Some(mirror) = mirror else {
                return self.attempt_classic::<M>(&session, lock, n, limit).await;
            };
            match self.take_on_mirror::<M>(&session, &mirror, lock, n, limit).await? {
                Some(taken) => return Ok(taken),
                None => continue, // queue again
            }
        }
    }

    /// Takes `n` leases with the internal `lock` held, counting them on the session's mirror of
    /// the lease directory. `None`: the internal lock went with our last create on a guess of
    /// room, and every lease was taken after all; our leases are deleted, queue again.
    ///
    /// With [`pipelined_admission`](InterProcessSemaphore::pipelined_admission), when the view
    /// has room for ours as the lock is granted, the lock's delete goes right behind our last
    /// lease's create (one round trip for both, and the next contender starts
    /// while ours are checked): the server applies one session's requests in order, so every
    /// later holder of the lock finds our leases. The guess is not the admission: our leases
    /// are admitted by the count on the view after their creates ([`DirView::admit`], which
    /// does not count the leases created after ours), and a contender that finds every lease
    /// taken then deletes its leases and queues again rather than wait without the lock (the
    /// lock is what keeps the waiting leases to one contender's: without it, leases waiting
    /// beside each other could fill the semaphore with nobody holding).
    ///
    /// [`DirView::admit`]: super::mirror_wait::DirView::admit
    async fn take_on_mirror<M: Mode>(
        &self,
        session: &Session,
        mirror: &Arc<DirMirror>,
        lock: HeldNode,
        n: usize,
        mut limit: LimitReader,
    ) -> Result<Option<M::Out<Granted>>, Failure> {
        let shared = &*self.shared;
        let early = shared.pipelined.load(Ordering::SeqCst) && mirror.has_room(n, limit.current());
        let lock = Mutex::new(Some(lock));
        // The mirror counts: the creates go alone, the last one with the lock's delete behind
        // it when `early`. `behind` is called right after the create is sent (the delete is
        // sent at once when the node is dropped), and again for any resend of it, which finds
        // the lock already gone.
        let mut created = Vec::with_capacity(n);
        for i in 0..n {
            let release = early && i + 1 == n;
            let behind = || {
                if release {
                    drop(lock.lock().take());
                }
                nothing_behind()
            };
            created.push(shared.leases.spec().create(session, None, behind).await?.0);
        }
        let lock = lock.lock().take();
        let asker = match self.admit_on_mirror::<M>(mirror, session, &created, &mut limit, lock.is_none()).await? {
            MirrorAdmit::Admitted(asker) => asker,
            // Our leases are dropped (deleted) before the lock.
            MirrorAdmit::Busy => return Ok(Some(M::busy().expect("only a try is busy"))),
            MirrorAdmit::Missed => {
                mirror.guess_missed();
                return Ok(None);
            }
            MirrorAdmit::Classic => {
                let Some(lock) = lock else {
                    return Ok(None); // the next pass finds the mirror refused
                };
                let mut created = created.into_iter();
                let first = created.next().expect("at least one lease");
                return self.admit_classic::<M>(session, lock, first, created.collect(), None, limit).await.map(Some);
            }
        };
        drop(lock); // the next contender goes in first
        let mut leases = created.into_iter().map(|node| {
            let mut held = HeldNode::new(node);
            held.on_mirror(MirrorSeat { mirror: mirror.clone(), asker });
            self.lease(held)
        });
        let first = leases.next().expect("at least one lease");
        Ok(Some(M::held(Granted { first, rest: leases.collect() })))
    }

    /// Takes `n` leases with the internal `lock` held, by listings with a child watch.
    async fn attempt_classic<M: Mode>(
        &self,
        session: &Session,
        lock: HeldNode,
        n: usize,
        limit: LimitReader,
    ) -> Result<M::Out<Granted>, Failure> {
        let shared = &*self.shared;
        let arming = self.framework().arm_full(shared.leases.dir()).await?;
        let watched = matches!(arming, Arming::Client(_));
        let list = || self.list_leases(session, watched);
        let (first, mut listing) = shared.leases.spec().create(session, None, list).await?;
        let mut rest: Vec<CreatedNode> = Vec::new();
        for _ in 1..n {
            let (node, listed) = shared.leases.spec().create(session, None, list).await?;
            rest.push(node);
            listing = listed;
        }
        let listing =
            listing.map(|(children, watcher)| (children, OneshotWatch::of(self.framework(), arming, watcher, true)));
        self.admit_classic::<M>(session, lock, first, rest, listing, limit).await
    }

    /// Lists the lease directory, with a one-shot children watch when `watched` (the
    /// framework's watch table let it: see [`Framework::arm_full`]).
    fn list_leases<'a>(
        &'a self,
        session: &'a Session,
        watched: bool,
    ) -> impl Future<Output = std::result::Result<LeaseListing, ZkError>> + 'a {
        session.sent(Op::GetChildren);
        let dir = self.shared.leases.dir();
        if watched {
            session
                .client
                .list_and_watch_children(dir)
                .map(|r| r.map(|(children, w)| (children, Some((w, session.client_key())))))
                .left_future()
        } else {
            session.client.list_children(dir).map(|r| r.map(|children| (children, None))).right_future()
        }
    }

    /// Waits on the session's mirror of the lease directory until our leases `created` are
    /// admitted (or, for a try, until it is known they are not; or, `without_lock` — the
    /// internal lock went with our create — until every lease is found taken). A contender
    /// stuck at the barrier for a quarter of the session timeout, or with every lease taken
    /// for a whole one (a lease the session may not read sends no deletion event), asks for a
    /// resync.
    async fn admit_on_mirror<M: Mode>(
        &self,
        mirror: &DirMirror,
        session: &Session,
        created: &[CreatedNode],
        limit: &mut LimitReader,
        without_lock: bool,
    ) -> Result<MirrorAdmit, Failure> {
        // Only the sort key (the sequence, for the witness and the count) is read.
        let driver = StandardDriver { lock_name: LEASE_NAME, max_leases: 1 };
        let names: Vec<&str> = created.iter().map(CreatedNode::name).collect();
        let timeout = session.client.session_timeout();
        let epoch = session.epoch;
        let mut state = self.framework().state_watch();
        let mut asker = mirror.asker();
        let unchecked = without_lock && mirror.skips_lease_check();
        loop {
            let max = if unchecked { usize::MAX } else { limit.current() };
            let (wake, on) = match mirror.admit(&driver, &names, max, &mut asker) {
                Ask::Acquired => return Ok(MirrorAdmit::Admitted(asker)),
                Ask::Missing | Ask::Wrapped => return Err(Failure::NodeMissing),
                Ask::Classic | Ask::Crowded => return Ok(MirrorAdmit::Classic),
                Ask::Wait { wake, on } => (wake, on),
            };
            if on == WaitOn::AnyDeletion {
                if M::busy::<Granted>().is_some() {
                    return Ok(MirrorAdmit::Busy);
                }
                if without_lock {
                    return Ok(MirrorAdmit::Missed);
                }
            }
            let bound = if on == WaitOn::Barrier { timeout / 4 } else { timeout };
            let session_ended = state.wait_for(|s| s.session_over(epoch));
            // The change may be held back by a server (see `framework::stall`).
            let timed_out = session
                .unstalled(async {
                    tokio::select! {
                        () = wake.notified() => Ok(false),
                        () = limit.changed() => Ok(false),
                        _ = session_ended => Err(Failure::NodeMissing),
                        () = tokio::time::sleep(bound) => Ok(true),
                    }
                })
                .await?;
            if timed_out {
                mirror.request_resync();
            }
        }
    }

    /// The classic admission: list the leases with a child watch until ours are at most
    /// `max_leases` (`listing`: the listing sent with the last create, if any).
    async fn admit_classic<M: Mode>(
        &self,
        session: &Session,
        lock: HeldNode,
        first: CreatedNode,
        rest: Vec<CreatedNode>,
        mut listing: Option<(Vec<String>, Option<OneshotWatch>)>,
        mut limit: LimitReader,
    ) -> Result<M::Out<Granted>, Failure> {
        let mut current = session.clone();
        loop {
            self.framework().follow_move(&mut current);
            let session = &current;
            let (children, watch) = match listing.take() {
                Some(listed) => listed,
                None => {
                    let arming = self.framework().arm_full(self.shared.leases.dir()).await?;
                    let watched = matches!(arming, Arming::Client(_));
                    let (children, watcher) =
                        retry_request(self.framework(), || self.list_leases(session, watched)).await?;
                    (children, OneshotWatch::of(self.framework(), arming, watcher, true))
                }
            };
            let all_listed = std::iter::once(&first).chain(&rest).all(|node| children.iter().any(|c| c == node.name()));
            let admitted = children.len() <= limit.current();
            drop(children); // no listing outlives its decision
            if !all_listed {
                return Err(Failure::NodeMissing);
            }
            if admitted {
                // Let the next contender in first (the delete goes out now). An unfired
                // one-shot watch goes with the first lease: dropped now, it would cost a
                // RemoveWatches request; kept, it fires (at the latest on our own lease's
                // delete, whose notification the server sends before the reply) and then costs
                // nothing. A share of the framework's persistent watch of the directory is
                // dropped: that costs no request, and kept unpolled it would queue every
                // event of the directory for as long as the lease is held.
                drop(lock);
                let mut first = HeldNode::new(first);
                if let Some(watch) = watch.filter(|watch| !watch.is_shared()) {
                    first.keep_watch(watch);
                }
                let rest = rest.into_iter().map(|node| self.lease(HeldNode::new(node))).collect();
                return Ok(M::held(Granted { first: self.lease(first), rest }));
            }
            if let Some(busy) = M::busy() {
                return Ok(busy);
            }
            if !self.wait_for_change(session, watch, &mut limit).await {
                return Err(Failure::NodeMissing);
            }
        }
    }

    fn framework(&self) -> &Framework {
        self.shared.lock.framework()
    }

    /// Waits for the lease list (or the count in force) to change. False when the session
    /// ended meanwhile.
    async fn wait_for_change(&self, session: &Session, watch: Option<OneshotWatch>, limit: &mut LimitReader) -> bool {
        // A listing that set no watch (it does not happen: the watch goes with it) lists again.
        let Some(watch) = watch else { return true };
        let epoch = session.epoch;
        let mut state = self.framework().state_watch();
        let session_ended = state.wait_for(|s| s.session_over(epoch));
        // The change may be held back by a server (see `framework::stall`).
        session
            .unstalled(async {
                tokio::select! {
                    // A change; or the watch's end: its session's (no more to wait for), or
                    // the session's move to another client (look again through it).
                    changed = watch.changed() => match changed {
                        Ok(_) => true,
                        Err(e) => !(e.is_session_lost() || matches!(e, Error::Closed)),
                    },
                    () = limit.changed() => true,
                    _ = session_ended => false,
                    // The watch is the old client's: look again through the new one.
                    () = self.framework().session_moved(session) => true,
                }
            })
            .await
    }

    fn lease(&self, mut node: HeldNode) -> SemaphoreLease {
        node.count_hold(Some(&self.shared.metrics));
        self.shared.held.fetch_add(1, Ordering::SeqCst);
        SemaphoreLease { node, count: HoldCount(self.shared.held.clone()) }
    }
}

/// The lease directory's children, with the client's children watch (and the client it was
/// set through) when the listing set one.
type LeaseListing = (Vec<String>, Option<(OneshotWatcher, ClientKey)>);

impl Acquire for InterProcessSemaphore {
    type Guard = SemaphoreLease;

    async fn acquire_with<M: Mode>(&self) -> Result<M::Out<SemaphoreLease>> {
        Ok(M::map(self.acquire_leases::<M>(1).await?, |granted| granted.first))
    }

    fn is_acquired_in_this_process(&self) -> bool {
        InterProcessSemaphore::is_acquired_in_this_process(self)
    }

    fn lock_metrics(&self) -> Option<&LockMetrics> {
        Some(&self.shared.metrics)
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
    count: HoldCount,
}

impl SemaphoreLease {
    /// The lease node's path (namespace stripped), e.g.
    /// `/semaphores/a/leases/_c_<uuid>-lease-0000000003`.
    pub fn lease_path(&self) -> &str {
        self.node.watch().user_path()
    }

    /// The lease node's creation zxid: unique per lease and increasing over time: higher than
    /// the token of every lease acquired before this one's acquire began, and than every lease
    /// admitted before it (unless the semaphore runs with
    /// [`pipelined_admission(true)`](InterProcessSemaphore::pipelined_admission) and more than
    /// one lease: leases held at the same time may then be admitted out of token order). Pass
    /// it to systems that reject stale holders.
    pub fn fencing_token(&self) -> i64 {
        self.node.watch().fencing_token()
    }

    /// Whether the lease can still be trusted: same session, not `Suspended`/`Lost` as the
    /// framework's error policy counts them, and the node not known to be deleted. A cheap
    /// local check, no I/O.
    pub fn is_held(&self) -> bool {
        self.node.watch().is_held()
    }

    /// Completes when the lease can no longer be trusted: the connection is `Suspended` or
    /// `Lost` (per the error policy), a new session replaced ours, or the lease node was
    /// deleted (from then on [`is_held`](Self::is_held) is false too). Use it in
    /// `tokio::select!` next to the work the lease guards.
    ///
    /// # Cancel safety
    /// Cancel-safe: it only observes.
    pub async fn lost(&self) {
        self.node.watch().lost().await
    }

    /// Runs `work`, the critical section, until it finishes or the lease is lost (as
    /// [`lost`](Self::lost) tells), whichever comes first: the `tokio::select!` on `lost()`
    /// written once. `lost()` is checked first, so `work` never starts on a hold already lost.
    ///
    /// # Errors
    /// [`LockLost`] when the lease was lost first; `work` was then dropped where it stood (at
    /// its current `.await`), so write it to be stopped there.
    ///
    /// # Cancel safety
    /// Cancel-safe: dropping the returned future drops `work` with it, and the hold stays as it
    /// was (still held unless lost), ready for another section or its release.
    #[doc(alias = "run_while_held", alias = "critical_section", alias = "with_lock")]
    pub async fn run<F: Future>(&self, work: F) -> std::result::Result<F::Output, LockLost> {
        run_until_lost(self.lost(), work, || Some(self.lease_path().to_owned())).await
    }

    /// Releases the lease: deletes its node now and reports the outcome. A node already gone
    /// (its session ended) counts as released. A failure that outlasts the retry policy is
    /// returned (a retryable one is left to the framework's reaper).
    ///
    /// # Errors
    /// The ZooKeeper error that stopped the delete.
    ///
    /// # Cancel safety
    /// Cancel-safe: if cancelled, the delete is finished in the background.
    pub async fn release(self) -> Result<()> {
        let SemaphoreLease { node, count } = self;
        drop(count);
        let span = tracing::debug_span!("zk_recipes.semaphore.release", lease = %node.watch().user_path());
        tracing::Instrument::instrument(node.release(), span).await
    }

    /// [`run`](Self::run) for several leases (those of
    /// [`acquire_many`](InterProcessSemaphore::acquire_many)): runs `work` until it finishes or
    /// any of `leases` is lost, whichever comes first (with no lease, `work` just runs).
    ///
    /// # Errors
    /// [`LockLost`] (naming the lease that went) when a lease was lost first; `work` was then
    /// dropped where it stood.
    ///
    /// # Cancel safety
    /// Cancel-safe: dropping the returned future drops `work` with it; the leases stay as they
    /// were.
    #[doc(alias = "run_while_held", alias = "critical_section")]
    pub async fn run_all<F: Future>(leases: &[SemaphoreLease], work: F) -> std::result::Result<F::Output, LockLost> {
        if leases.is_empty() {
            return Ok(work.await);
        }
        let lost = futures::future::select_all(leases.iter().map(|lease| lease.lost().boxed()));
        // A lease whose `lost()` completed reads not held from then on.
        let which = || leases.iter().find(|lease| !lease.is_held()).unwrap_or(&leases[0]).lease_path().to_owned();
        run_until_lost(lost.map(drop), work, || Some(which())).await
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

impl Hold for SemaphoreLease {
    fn into_lock_hold(self) -> Box<dyn LockHold> {
        Box::new(self)
    }
}

#[async_trait::async_trait]
impl LockHold for SemaphoreLease {
    async fn release(self: Box<Self>) -> Result<()> {
        SemaphoreLease::release(*self).await
    }

    fn is_held(&self) -> bool {
        SemaphoreLease::is_held(self)
    }

    async fn lost(&self) {
        SemaphoreLease::lost(self).await
    }

    fn fencing_tokens(&self) -> Vec<i64> {
        vec![self.fencing_token()]
    }
}
