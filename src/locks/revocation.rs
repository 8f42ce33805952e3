//! Revocation (Curator's `makeRevocable`, `RevocationListener` and `Revoker`): asking the
//! holder of a lock, or a contender waiting for it, to give it up.
//!
//! On the wire: a revocable contender creates its node with **empty** data and keeps a data
//! watch on it from then on; a revoker writes the 10 ASCII bytes `__REVOKE__` into the node
//! (`setData`, any version). The contender re-reads the node on every data change, re-arming
//! the watch, and takes exactly those bytes as a request. Revocation is cooperative: the
//! holder decides when to release.
//!
//! Inside: each revocable node has a [`NodeRevocation`], fed by one watch task per node (the
//! node's data watch of `node_watch.rs`, which is set again after connection trouble) that
//! ends when the node is deleted or its session ends; guards read it through their node's
//! `NodeWatch` (`held.rs`), and it also raises the [`Signal`] of the [`Revocable`] handle the
//! acquire came from.

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use super::acquire::{self, Acquire, Mode};
use super::node_watch::{watch_node, End, MirrorSeat};
use crate::error::{Error, Result, ZkError};
use crate::framework::metrics::Op;
use crate::framework::Framework;
use crate::path;
use crate::protocol::{LOCK_NAME, READ_LOCK_NAME, REVOKE_MESSAGE, WRITE_LOCK_NAME};

#[derive(Debug, Clone, Copy, Default)]
struct State {
    /// Requests seen so far.
    requests: u64,
    end: Option<End>,
}

/// The revocation requests seen on one revocable node.
#[derive(Debug)]
pub(crate) struct NodeRevocation {
    state: watch::Sender<State>,
    /// The signal of the handle whose acquire created the node.
    handle: Arc<Signal>,
}

impl NodeRevocation {
    /// Starts watching the node at `full_path` (of session `epoch`) for revocation requests;
    /// each also raises `handle`. With `seat`, through the session's mirror of the node's
    /// directory (one plain read per data change, no watch of its own).
    ///
    /// The watch runs as a task that ends when the node is deleted or its session ends. It
    /// never keeps the session's client across a wait, so it never keeps a closed framework's
    /// session open.
    pub(crate) fn start(
        framework: &Framework,
        epoch: u64,
        full_path: &str,
        seat: Option<MirrorSeat>,
        handle: Arc<Signal>,
    ) -> Arc<Self> {
        let node = Arc::new(NodeRevocation::new(handle));
        let task = watch_requests(framework.clone(), epoch, full_path.to_owned(), seat, node.clone());
        tokio::spawn(async move {
            let end = task.await;
            tracing::trace!(?end, "revocation watch ended");
        });
        node
    }

    fn new(handle: Arc<Signal>) -> Self {
        NodeRevocation { state: watch::Sender::new(State::default()), handle }
    }

    fn request(&self) {
        self.state.send_modify(|s| s.requests += 1);
        self.handle.raise();
    }

    fn end(&self, end: End) {
        self.state.send_modify(|s| s.end = s.end.or(Some(end)));
    }

    /// Waits for a request not yet counted in `seen` and counts it (true), or for the end of
    /// the watch with every request counted (false). Cancel-safe: `seen` changes only when
    /// it returns true.
    pub(crate) async fn next_request(&self, seen: &AtomicU64) -> bool {
        let mut rx = self.state.subscribe();
        loop {
            let state = match rx.wait_for(|s| s.requests > seen.load(Ordering::SeqCst) || s.end.is_some()).await {
                Ok(state) => *state,
                Err(_) => return false, // unreachable while `self` lives: it owns the sender
            };
            let counted =
                seen.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |s| (s < state.requests).then_some(s + 1));
            match counted {
                Ok(_) => return true,
                Err(_) if state.end.is_some() => return false,
                Err(_) => continue, // another call on the same guard took it
            }
        }
    }

    /// Waits until the watch ends and says why.
    pub(crate) async fn ended(&self) -> End {
        let mut rx = self.state.subscribe();
        let end = match rx.wait_for(|s| s.end.is_some()).await {
            Ok(state) => state.end,
            Err(_) => None,
        };
        end.unwrap_or(End::SessionOver)
    }
}

/// Watches the node's data until it is deleted or its session ends, counting every read that
/// finds the revoke message in a version not seen before (the first read included: a request
/// written before the watch was set is not missed). Other data only re-arms the watch.
async fn watch_requests(
    framework: Framework,
    epoch: u64,
    full_path: String,
    seat: Option<MirrorSeat>,
    node: Arc<NodeRevocation>,
) -> End {
    let mut fired_version: Option<i32> = None;
    let end = watch_node(&framework, epoch, &full_path, seat, true, |data, stat| {
        if data == REVOKE_MESSAGE && fired_version.map_or(true, |v| stat.version > v) {
            fired_version = Some(stat.version);
            tracing::debug!(node = %full_path, "revocation requested");
            node.request();
        }
    })
    .await;
    node.end(end);
    end
}

/// The requests that reached the nodes of one [`Revocable`] handle's acquires.
#[derive(Debug, Default)]
pub struct Signal {
    raised: watch::Sender<u64>,
}

impl Signal {
    fn raise(&self) {
        self.raised.send_modify(|n| *n += 1);
    }

    /// Completes at the first request after this call.
    fn next(&self) -> impl Future<Output = ()> + Send + 'static {
        let mut rx = self.raised.subscribe();
        let start = *rx.borrow_and_update();
        async move {
            if rx.wait_for(|n| *n > start).await.is_err() {
                std::future::pending::<()>().await;
            }
        }
    }
}

/// A lock of this crate that can be acquired revocably (the mutex and both halves of the
/// read-write lock). Sealed: implemented inside the crate only.
pub trait RevocableLock: Acquire + Clone {
    /// Takes the lock in mode `M` with a revocable node (empty data, watched for requests from
    /// its creation on; each request also raises `signal`).
    fn acquire_revocable<M: Mode>(
        &self,
        signal: &Arc<Signal>,
    ) -> impl Future<Output = Result<M::Out<Self::Guard>>> + Send;
}

/// A lock handle whose acquires are **revocable** (Curator's `makeRevocable`): made by
/// [`InterProcessMutex::revocable`](crate::InterProcessMutex::revocable),
/// [`ReadLock::revocable`](crate::ReadLock::revocable) or
/// [`WriteLock::revocable`](crate::WriteLock::revocable).
///
/// An acquire through it creates its node with empty data (as Curator does for revocable
/// locks) and watches the node for revocation requests from its creation until it is deleted.
/// A request is another process writing exactly the ten bytes `__REVOKE__` into the node
/// ([`Revoker::attempt_revoke`], or Curator's `Revoker.attemptRevoke`); any other data is
/// ignored. Revocation is cooperative: nothing is released for you.
///
/// - [`revocation_requested`](Self::revocation_requested) here completes at the next request
///   to the node of any acquire through this handle, waiting or holding: await it next to the
///   acquire, in `tokio::select!`, to give up waiting when asked. It is also how a revocable
///   lock inside a [`MultiLock`](crate::MultiLock) hears requests.
/// - The **guard's** `revocation_requested()` reports every request made to its node, once
///   each, those that reached the node while the acquire waited included.
///
/// Unlike Curator, revocability is an option of each acquire rather than state on the lock
/// object, so nothing has to be set again before every acquire and no other task's acquire
/// changes it. A task that already holds the lock through the same lock handle (or whose
/// acquire through it is still in flight, as in two branches of one `join!`) gets a nested
/// guard of its hold, which is revocable only if that hold's acquire was.
///
/// The handle is usable wherever a lock is ([`Lockable`](crate::Lockable), so in a
/// [`MultiLock`](crate::MultiLock) too). Use one per contender: they are cheap.
///
/// ```no_run
/// # async fn example(framework: zk_recipes::Framework) -> zk_recipes::Result<()> {
/// use zk_recipes::InterProcessMutex;
///
/// let mutex = InterProcessMutex::new(&framework, "/locks/report")?;
/// let revocable = mutex.revocable();
/// let guard = tokio::select! {
///     guard = revocable.acquire() => guard?,
///     () = revocable.revocation_requested() => return Ok(()), // asked to stop waiting
/// };
/// tokio::select! {
///     _ = async { /* the work */ } => {}
///     _ = guard.revocation_requested() => { /* someone asked for the lock: wrap up */ }
/// }
/// guard.release().await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct Revocable<L> {
    lock: L,
    signal: Arc<Signal>,
}

impl<L: RevocableLock> Revocable<L> {
    pub(crate) fn new(lock: L) -> Self {
        Self { lock, signal: Arc::default() }
    }

    /// The lock handle this acquires.
    pub fn lock(&self) -> &L {
        &self.lock
    }

    /// Waits until the lock is held, revocably.
    ///
    /// # Errors
    /// As the lock's own `acquire`.
    ///
    /// # Cancel safety
    /// Cancel-safe, as the lock's own `acquire`: a cancelled acquire leaves no node behind.
    pub async fn acquire(&self) -> Result<L::Guard> {
        acquire::acquire(self).await
    }

    /// Takes the lock revocably if it is free now; never waits.
    ///
    /// # Errors
    /// As the lock's own `try_acquire`.
    ///
    /// # Cancel safety
    /// Cancel-safe, as [`acquire`](Self::acquire).
    pub async fn try_acquire(&self) -> Result<Option<L::Guard>> {
        acquire::try_acquire(self).await
    }

    /// Waits at most `timeout` for the lock, revocably; `None` when the time ran out (and, for a
    /// write lock, at once when the task holds the read lock: see
    /// [`WriteLock::acquire_timeout`](crate::WriteLock::acquire_timeout)).
    ///
    /// # Errors
    /// As the lock's own `acquire_timeout`.
    ///
    /// # Cancel safety
    /// Cancel-safe, as [`acquire`](Self::acquire).
    pub async fn acquire_timeout(&self, timeout: Duration) -> Result<Option<L::Guard>> {
        acquire::acquire_timeout(self, timeout).await
    }

    /// Completes at the next revocation request that reaches the node of an acquire through
    /// this handle (still waiting, or holding), until that node is deleted. Requests made
    /// before this call are not reported here (a guard's `revocation_requested()` reports every
    /// request to its node).
    ///
    /// # Cancel safety
    /// Cancel-safe: it only observes.
    pub fn revocation_requested(&self) -> impl Future<Output = ()> + Send + 'static {
        self.signal.next()
    }
}

impl<L: RevocableLock> Acquire for Revocable<L> {
    type Guard = L::Guard;

    fn acquire_with<M: Mode>(&self) -> impl Future<Output = Result<M::Out<L::Guard>>> + Send {
        self.lock.acquire_revocable::<M>(&self.signal)
    }

    fn is_acquired_in_this_process(&self) -> bool {
        self.lock.is_acquired_in_this_process()
    }

    fn lock_metrics(&self) -> Option<&crate::framework::metrics::LockMetrics> {
        self.lock.lock_metrics()
    }
}

/// Asks the holder of a lock node to release it (Curator's `Revoker`).
#[derive(Debug)]
#[non_exhaustive]
pub struct Revoker;

impl Revoker {
    /// Checks, without I/O, that `node_path` is a valid path to a lock node of a revocable
    /// lock (its name ends in `lock-`, `__READ__` or `__WRIT__` and a 10-digit sequence), as
    /// [`attempt_revoke`](Self::attempt_revoke) does before it writes anything.
    ///
    /// # Errors
    /// [`Error::InvalidPath`] for an invalid path or another node's name.
    pub fn check_node_path(node_path: &str) -> Result<()> {
        path::validate_recipe_path(node_path)?;
        if !is_lock_node_name(path::node_name(node_path)) {
            return Err(Error::InvalidPath {
                path: node_path.to_owned(),
                reason: "not a lock node (a name ending in lock-, __READ__ or __WRIT__ and a 10-digit sequence)",
            });
        }
        Ok(())
    }

    /// Writes the revoke message (the ten bytes `__REVOKE__`) into the lock node at `node_path`
    /// (a full node path, namespace stripped, as `participant_nodes()` and `lock_path()` give
    /// them), unconditionally (any version), as Curator's `Revoker.attemptRevoke` does. A node
    /// that no longer exists is not an error: there is nothing left to revoke.
    ///
    /// Whether the holder releases is up to it: only a holder that acquired revocably (here
    /// through [`Revocable`], in Curator with `makeRevocable`) hears the request. The write
    /// replaces the node's data and wakes every watcher of the node (a waiter behind it
    /// re-checks the queue and waits on).
    ///
    /// # Errors
    /// [`Error::InvalidPath`] for an invalid path or one whose last segment is not a lock node
    /// of a revocable lock (`...lock-`, `...__READ__` or `...__WRIT__` followed by a 10-digit
    /// sequence): writing the message into any other node would only destroy its data.
    /// Otherwise a ZooKeeper error the retry policy gave up on (`NoAuth`, a long outage).
    ///
    /// # Cancel safety
    /// A cancelled call may still have written the message.
    pub async fn attempt_revoke(framework: &Framework, node_path: &str) -> Result<()> {
        let full = framework.full_path(node_path)?;
        Self::check_node_path(node_path)?;
        let written = framework.with_retry(|s| {
            let full = &full;
            async move {
                s.sent(Op::SetData);
                s.client.set_data(full, REVOKE_MESSAGE, None).await
            }
        });
        match written.await {
            Ok(_) | Err(Error::ZooKeeper(ZkError::NoNode)) => Ok(()),
            Err(e) => Err(e),
        }
    }
}

/// Whether `name` is a node of a revocable lock: a marker (`lock-`, `__READ__`, `__WRIT__`)
/// followed by ten digits at its end.
fn is_lock_node_name(name: &str) -> bool {
    let Some(head) = name.len().checked_sub(10).and_then(|at| name.get(..at)) else { return false };
    path::sequence(name).is_some()
        && [LOCK_NAME, READ_LOCK_NAME, WRITE_LOCK_NAME].iter().any(|marker| head.ends_with(marker))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_message_is_curators_ten_bytes() {
        assert_eq!(REVOKE_MESSAGE, [0x5F, 0x5F, 0x52, 0x45, 0x56, 0x4F, 0x4B, 0x45, 0x5F, 0x5F]);
    }

    #[test]
    fn lock_node_names() {
        for ok in [
            "_c_3f1c2b9e-8d6a-4e1f-9b0a-1c2d3e4f5a6b-lock-0000000012",
            "_c_3f1c2b9e-8d6a-4e1f-9b0a-1c2d3e4f5a6b-__READ__0000000001",
            "_c_3f1c2b9e-8d6a-4e1f-9b0a-1c2d3e4f5a6b-__WRIT__0000000001",
            "lock-0000000000",
        ] {
            assert!(is_lock_node_name(ok), "{ok}");
        }
        for bad in
            ["", "config", "lock-", "lock-12", "_c_x-lease-0000000001", "leases", "__READ__000000000x", "é0000000001"]
        {
            assert!(!is_lock_node_name(bad), "{bad}");
        }
    }

    #[tokio::test]
    async fn requests_are_counted_once_per_reader_and_end_quietly() {
        let node = NodeRevocation::new(Arc::default());
        let (one, two) = (AtomicU64::new(0), AtomicU64::new(0));
        node.request();
        node.request();
        assert!(node.next_request(&one).await);
        assert!(node.next_request(&one).await);
        assert!(node.next_request(&two).await);
        let pending = node.next_request(&one);
        tokio::pin!(pending);
        assert!(futures::poll!(&mut pending).is_pending(), "no third request");
        node.end(End::Deleted);
        assert!(!pending.await, "ends quietly once the node is gone");
        // requests seen before the end are still reported to a reader that has not seen them
        assert!(node.next_request(&two).await);
        assert!(!node.next_request(&two).await);
        assert_eq!(node.ended().await, End::Deleted);
    }

    #[tokio::test]
    async fn the_handle_hears_requests_made_after_it_started_listening() {
        let signal = Arc::new(Signal::default());
        let node = NodeRevocation::new(signal.clone());
        node.request(); // before anyone listens: not reported on the handle
        let next = signal.next();
        tokio::pin!(next);
        assert!(futures::poll!(&mut next).is_pending());
        node.request();
        next.await;
    }
}
