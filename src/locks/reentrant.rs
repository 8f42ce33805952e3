//! Reentrant locks: who holds a lock through a handle (a Tokio task, or a thread outside any
//! task), how many nested guards it has out, the one acquire core of the mutex and of both
//! halves of the read-write lock, and the one guard behind their public guards.
//!
//! Every guard gets a number of its own, and a hold lists the numbers of its live guards. Ending
//! a guard removes its number, so ending it twice is harmless, and a guard of an old hold (its
//! session ended, and the same owner acquired again since) never ends, reads or deletes the
//! newer hold.
//!
//! An owner's acquires through one lock take turns ([`Turns`]): while one is in flight, another
//! of the same owner (a second branch of a `join!` or `select!` in one task) waits for it to end
//! and then nests on the hold it made, or tries itself if it made none; a try does not wait and
//! reports the lock busy. So an owner never queues behind its own node, and a live hold is never
//! replaced: only the owner's turn records a hold, and only when the owner has none.

use std::collections::HashMap;
use std::fmt::Debug;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::ThreadId;

use async_trait::async_trait;
use tokio::sync::OwnedMutexGuard;

use super::acquire::{self, Acquire, LockHold, Mode};
use super::held::{HeldNode, NodeWatch};
use super::internals::LockInternals;
use super::revocation::{RevocableLock, Signal};
use crate::error::{Error, Result};
use crate::framework::metrics::LockMetrics;
use crate::framework::Framework;
use crate::sync::Mutex;

/// The identity reentrancy is keyed by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Owner {
    Task(tokio::task::Id),
    Thread(ThreadId),
}

impl Owner {
    /// The caller's identity: its Tokio task, or its thread when not inside a task (for
    /// example the future passed to `Runtime::block_on`, as with `#[tokio::main]`).
    pub(crate) fn current() -> Owner {
        match tokio::task::try_id() {
            Some(id) => Owner::Task(id),
            None => Owner::Thread(std::thread::current().id()),
        }
    }
}

/// A lock the reentrant core acquires: a mutex, or one half of a read-write lock. Each is a lock
/// handle ([`Acquire`]) that can be acquired revocably ([`RevocableLock`]), both through
/// [`acquire`]. The two hooks are how a half treats an owner that holds the other half.
pub(crate) trait Reentrant: Guarded + Clone + Send + Sync + Debug + 'static {
    /// The half, as spans and logs name it (`None` for a mutex).
    const HALF: Option<&'static str>;

    /// What the core works on.
    fn parts(&self) -> Parts<'_>;

    /// The public guard around `inner`.
    fn guard(inner: TicketGuard) -> Self::Guard;

    /// Hook (upgrade refusal): true when what `owner` holds rules this acquire out before
    /// anything is sent (the read lock, for the write half).
    fn refuses(&self, _owner: Owner) -> bool {
        false
    }

    /// Hook (downgrade): the node `owner` gets at once, without queueing, because of what it
    /// holds (the write lock, for the read half), revocable when `revocable` is given; `None`
    /// to queue.
    fn downgrade(
        &self,
        _owner: Owner,
        _revocable: Option<&Arc<Signal>>,
    ) -> impl Future<Output = Result<Option<HeldNode>>> + Send {
        async { Ok(None) }
    }
}

/// The public guard of a reentrant lock. A trait of its own, and public (though unreachable
/// from outside the crate), because the [`Acquire`] implementation names the guard type.
pub trait Guarded {
    /// The public guard.
    type Guard: acquire::Hold;
}

impl<L: Reentrant> Acquire for L {
    type Guard = <L as Guarded>::Guard;

    async fn acquire_with<M: Mode>(&self) -> Result<M::Out<Self::Guard>> {
        acquire::<L, M>(self, None).await
    }

    fn is_acquired_in_this_process(&self) -> bool {
        self.parts().holds.any()
    }

    fn lock_metrics(&self) -> Option<&LockMetrics> {
        self.parts().internals.metrics()
    }
}

impl<L: Reentrant> RevocableLock for L {
    async fn acquire_revocable<M: Mode>(&self, signal: &Arc<Signal>) -> Result<M::Out<Self::Guard>> {
        acquire::<L, M>(self, Some(signal)).await
    }
}

/// What the reentrant core works on, for one lock (one half).
pub(crate) struct Parts<'a> {
    /// The turns of the owners' acquires (both halves of a read-write lock share them).
    pub(crate) turns: &'a Turns,
    /// This lock's (this half's) holds.
    pub(crate) holds: &'a Arc<Holds>,
    /// The wait engine of the lock directory.
    pub(crate) internals: &'a LockInternals,
}

/// Takes `lock` in mode `M` for the calling owner, revocably when `revocable` is given: a
/// nested guard of the owner's hold at once, else (in the owner's turn) a nested guard of
/// the hold its previous acquire made, a refusal, a downgrade, or the lock's queue.
///
/// # Errors
/// [`Error::LockLost`] when the owner's hold is over; [`Error::UpgradeRefused`] (blocking mode)
/// when [`Reentrant::refuses`] says so; whatever the downgrade or the queue report.
async fn acquire<L: Reentrant, M: Mode>(lock: &L, revocable: Option<&Arc<Signal>>) -> Result<M::Out<L::Guard>> {
    Ok(M::map(acquire_ticket::<L, M>(lock, revocable).await?, L::guard))
}

async fn acquire_ticket<L: Reentrant, M: Mode>(
    lock: &L,
    revocable: Option<&Arc<Signal>>,
) -> Result<M::Out<TicketGuard>> {
    let Parts { turns, holds, internals } = lock.parts();
    let owner = Owner::current();
    let nested = || Ok::<_, Error>(holds.reenter(owner)?.map(M::held));
    if let Some(guard) = nested()? {
        return Ok(guard);
    }
    let turn = match turns.try_take(owner) {
        Some(turn) => turn,
        None => match M::busy() {
            Some(busy) => return Ok(busy), // the owner's own acquire is in flight
            None => turns.take(owner).await,
        },
    };
    if let Some(guard) = nested()? {
        return Ok(guard); // the owner's acquire before this one took the lock
    }
    if lock.refuses(owner) {
        return match M::busy() {
            Some(refused) => Ok(refused),
            None => Err(Error::UpgradeRefused { path: internals.path().to_owned() }),
        };
    }
    let span = tracing::debug_span!("zk_recipes.lock.acquire", path = %internals.path(), half = L::HALF);
    let started = tokio::time::Instant::now();
    let framework = internals.framework();
    if let Some(node) = tracing::Instrument::instrument(lock.downgrade(owner, revocable), span.clone()).await? {
        span.in_scope(|| log_acquired(framework, Some("read (downgrade)"), &node, started));
        return Ok(M::held(holds.insert(&turn, node)));
    }
    let queued = internals.acquire_with::<M>(revocable);
    let acquired = tracing::Instrument::instrument(queued, span.clone()).await?;
    Ok(M::map(acquired, |node| {
        span.in_scope(|| log_acquired(framework, L::HALF, &node, started));
        holds.insert(&turn, node)
    }))
}

fn log_acquired(framework: &Framework, half: Option<&str>, node: &HeldNode, started: tokio::time::Instant) {
    let watch = node.watch();
    let session = framework.snapshot().session_id;
    tracing::debug!(
        node = %watch.user_path(),
        half,
        session = format_args!("{session:#x}"),
        epoch = watch.epoch(),
        waited = ?started.elapsed(),
        "lock acquired"
    );
}

/// The turns of the owners' acquires through one lock: one acquire in flight per owner.
#[derive(Debug, Default)]
pub(crate) struct Turns {
    gates: Mutex<HashMap<Owner, Gate>>,
}

/// One owner's gate: held by its acquire in flight, waited for by its others.
#[derive(Debug)]
struct Gate {
    lock: Arc<tokio::sync::Mutex<()>>,
    /// The owner's turns, taken or awaited: the gate goes when none is left.
    turns: usize,
}

/// An owner's turn: while it is held, no other acquire of the owner through the lock runs.
#[derive(Debug)]
pub(crate) struct Turn<'a> {
    turns: &'a Turns,
    owner: Owner,
    held: Option<OwnedMutexGuard<()>>,
}

impl Turns {
    /// The owner's turn, now, unless another acquire of the owner is in flight.
    fn try_take(&self, owner: Owner) -> Option<Turn<'_>> {
        let (gate, mut turn) = self.enter(owner);
        turn.held = Some(gate.try_lock_owned().ok()?);
        Some(turn)
    }

    /// The owner's turn, once the owner's acquires before it have ended. Cancel-safe.
    async fn take(&self, owner: Owner) -> Turn<'_> {
        let (gate, mut turn) = self.enter(owner);
        turn.held = Some(gate.lock_owned().await);
        turn
    }

    fn enter(&self, owner: Owner) -> (Arc<tokio::sync::Mutex<()>>, Turn<'_>) {
        let mut gates = self.gates.lock();
        let gate = gates.entry(owner).or_insert_with(|| Gate { lock: Arc::default(), turns: 0 });
        gate.turns += 1;
        (gate.lock.clone(), Turn { turns: self, owner, held: None })
    }
}

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        drop(self.held.take()); // the owner's next acquire may go on
        let mut gates = self.turns.gates.lock();
        if let Some(gate) = gates.get_mut(&self.owner) {
            gate.turns -= 1;
            if gate.turns == 0 {
                gates.remove(&self.owner);
            }
        }
    }
}

/// The holds of one lock handle (shared by its clones and by its guards).
#[derive(Debug, Default)]
pub(crate) struct Holds {
    holds: Mutex<HashMap<Owner, Hold>>,
    next_guard: AtomicU64,
}

#[derive(Debug)]
struct Hold {
    node: HeldNode,
    /// The numbers of the hold's live guards.
    guards: Vec<u64>,
}

impl Holds {
    /// Another guard for `owner`'s hold, when it has one.
    ///
    /// # Errors
    /// [`Error::LockLost`] when that hold is over (its session ended or its node was deleted):
    /// someone else may hold the lock now, so nesting a guard in it would make a second holder.
    fn reenter(self: &Arc<Self>, owner: Owner) -> Result<Option<TicketGuard>> {
        let mut holds = self.holds.lock();
        let Some(hold) = holds.get_mut(&owner) else { return Ok(None) };
        let watch = hold.node.watch();
        if watch.is_over() {
            return Err(Error::LockLost { path: watch.user_path().to_owned() });
        }
        Ok(Some(self.guard(owner, hold)))
    }

    /// Records `node` as the hold of the turn's owner and returns its first guard.
    ///
    /// The owner has no hold here: its turn began after it was found to have none, and only a
    /// turn records one. Were there one all the same, it is kept (a live hold is never
    /// replaced): the guard nests in it and `node` is deleted.
    fn insert(self: &Arc<Self>, turn: &Turn<'_>, node: HeldNode) -> TicketGuard {
        let owner = turn.owner;
        let mut holds = self.holds.lock();
        if let Some(hold) = holds.get_mut(&owner) {
            let guard = self.guard(owner, hold);
            drop(holds); // outside the lock: dropping a node sends its delete
            drop(node);
            return guard;
        }
        let hold = holds.entry(owner).or_insert(Hold { node, guards: Vec::new() });
        self.guard(owner, hold)
    }

    fn guard(self: &Arc<Self>, owner: Owner, hold: &mut Hold) -> TicketGuard {
        let number = self.next_guard.fetch_add(1, Ordering::Relaxed);
        hold.guards.push(number);
        TicketGuard {
            holds: self.clone(),
            owner,
            number,
            watch: hold.node.watch().clone(),
            revocations_seen: AtomicU64::new(0),
        }
    }

    /// Ends `guard` (again: nothing happens). Returns the node when it was its hold's last
    /// guard.
    fn end(&self, guard: &TicketGuard) -> Option<HeldNode> {
        let mut holds = self.holds.lock();
        let hold = holds.get_mut(&guard.owner)?;
        let before = hold.guards.len();
        hold.guards.retain(|g| *g != guard.number);
        if hold.guards.len() == before || !hold.guards.is_empty() {
            return None;
        }
        holds.remove(&guard.owner).map(|h| h.node)
    }

    /// True when any owner holds the lock.
    pub(crate) fn any(&self) -> bool {
        !self.holds.lock().is_empty()
    }

    /// True when `owner` holds the lock.
    pub(crate) fn held_by(&self, owner: Owner) -> bool {
        self.holds.lock().contains_key(&owner)
    }

    /// The node of `owner`'s hold, if it has one (over or not).
    pub(crate) fn node_of(&self, owner: Owner) -> Option<NodeWatch> {
        self.holds.lock().get(&owner).map(|hold| hold.node.watch().clone())
    }
}

/// The guard behind every public guard of a reentrant lock ([`MutexGuard`](crate::MutexGuard),
/// [`ReadLockGuard`](crate::ReadLockGuard), [`WriteLockGuard`](crate::WriteLockGuard)): one
/// guard of a hold. Its `Drop` ends the guard, and the hold's last guard drops the node, which
/// sends the delete; nothing waits.
#[derive(Debug)]
pub(crate) struct TicketGuard {
    holds: Arc<Holds>,
    owner: Owner,
    /// This guard's number in its hold.
    number: u64,
    watch: NodeWatch,
    /// The revocation requests this guard has reported.
    revocations_seen: AtomicU64,
}

impl TicketGuard {
    /// The lock node's path (namespace stripped).
    pub(crate) fn lock_path(&self) -> &str {
        self.watch.user_path()
    }

    /// The lock node's creation zxid.
    pub(crate) fn fencing_token(&self) -> i64 {
        self.watch.fencing_token()
    }

    /// Whether the lock can still be trusted (a local check).
    pub(crate) fn is_held(&self) -> bool {
        self.watch.is_held()
    }

    /// Completes when the lock can no longer be trusted.
    pub(crate) async fn lost(&self) {
        self.watch.lost().await
    }

    /// The next revocation request to the node that this guard has not reported yet (true),
    /// or false once none can come; see [`NodeWatch::revocation_requested`].
    pub(crate) async fn revocation_requested(&self) -> bool {
        self.watch.revocation_requested(&self.revocations_seen).await
    }

    /// Ends this guard; when it was its hold's last, deletes the node now and reports the
    /// outcome.
    pub(crate) async fn release(self) -> Result<()> {
        let Some(node) = self.holds.end(&self) else { return Ok(()) };
        let span = tracing::debug_span!("zk_recipes.lock.release", node = %self.lock_path());
        tracing::Instrument::instrument(node.release(), span).await
    }
}

impl Drop for TicketGuard {
    fn drop(&mut self) {
        // Ends the guard unless `release` did; dropping the node sends its delete at once.
        drop(self.holds.end(self));
    }
}

#[async_trait]
impl LockHold for TicketGuard {
    async fn release(self: Box<Self>) -> Result<()> {
        TicketGuard::release(*self).await
    }

    fn is_held(&self) -> bool {
        TicketGuard::is_held(self)
    }

    async fn lost(&self) {
        TicketGuard::lost(self).await
    }

    fn fencing_tokens(&self) -> Vec<i64> {
        vec![self.fencing_token()]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gates(turns: &Turns) -> usize {
        turns.gates.lock().len()
    }

    #[tokio::test]
    async fn an_owners_acquires_take_turns_and_leave_no_gate_behind() {
        let turns = Turns::default();
        let owner = Owner::current();
        let first = turns.try_take(owner).expect("no acquire in flight yet");
        assert!(turns.try_take(owner).is_none(), "a try while the owner's acquire is in flight");
        let second = turns.take(owner);
        tokio::pin!(second);
        assert!(futures::poll!(&mut second).is_pending(), "waits for the first turn");
        drop(first);
        let second = second.await;
        assert_eq!(gates(&turns), 1);
        drop(second);
        assert_eq!(gates(&turns), 0, "the gate goes with the owner's last turn");
    }

    #[tokio::test]
    async fn a_cancelled_wait_for_a_turn_leaves_no_gate_behind() {
        let turns = Turns::default();
        let owner = Owner::current();
        let first = turns.try_take(owner).expect("no acquire in flight yet");
        {
            let waiting = turns.take(owner);
            tokio::pin!(waiting);
            assert!(futures::poll!(&mut waiting).is_pending());
        } // cancelled
        drop(first);
        assert_eq!(gates(&turns), 0);
        let other = tokio::spawn(async { Owner::current() }).await.expect("the task runs");
        assert_ne!(other, owner);
        let _mine = turns.try_take(owner).expect("free again");
        assert!(turns.try_take(other).is_some(), "another owner's turn is its own");
    }
}
