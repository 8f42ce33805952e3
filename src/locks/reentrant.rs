//! Reentrant holds: who holds a lock through a handle (a Tokio task, or a thread outside any
//! task), how many nested guards it has out, and which hold each guard belongs to.
//!
//! Every guard gets a number of its own, and a hold lists the numbers of its live guards. Ending
//! a guard removes its number, so ending it twice is harmless, and a guard of an old hold (its
//! session ended, and the same owner acquired again since) never ends, reads or deletes the
//! newer hold.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread::ThreadId;

use super::held::{HeldNode, NodeWatch};
use crate::error::{Error, Result};
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

/// The holds of one lock handle (shared by its clones).
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

/// One guard's claim on a hold.
#[derive(Debug)]
pub(crate) struct Ticket {
    owner: Owner,
    guard: u64,
    watch: NodeWatch,
    /// The revocation requests this guard has reported.
    revocations_seen: AtomicU64,
}

impl Ticket {
    fn new(owner: Owner, guard: u64, watch: NodeWatch) -> Self {
        Ticket { owner, guard, watch, revocations_seen: AtomicU64::new(0) }
    }

    /// The held node, as the guard sees it.
    pub(crate) fn watch(&self) -> &NodeWatch {
        &self.watch
    }

    /// The next revocation request to the node that this guard has not reported yet (true),
    /// or false once none can come; see [`NodeWatch::revocation_requested`].
    pub(crate) async fn revocation_requested(&self) -> bool {
        self.watch.revocation_requested(&self.revocations_seen).await
    }
}

impl Holds {
    /// Another guard for `owner`'s hold, when it has one.
    ///
    /// # Errors
    /// [`Error::LockLost`] when that hold is over (its session ended or its node was deleted):
    /// someone else may hold the lock now, so nesting a guard in it would make a second holder.
    pub(crate) fn reenter(&self, owner: Owner) -> Result<Option<Ticket>> {
        let mut holds = self.holds.lock();
        let Some(hold) = holds.get_mut(&owner) else { return Ok(None) };
        let watch = hold.node.watch();
        if watch.is_over() {
            return Err(Error::LockLost { path: watch.user_path().to_owned() });
        }
        let guard = self.next_guard.fetch_add(1, Ordering::Relaxed);
        hold.guards.push(guard);
        Ok(Some(Ticket::new(owner, guard, watch.clone())))
    }

    /// Records `node` as `owner`'s hold and returns its first guard's ticket. An older hold of
    /// the same owner can only be over (the new acquire waited behind it otherwise): it is
    /// replaced, and its remaining guards no longer match.
    pub(crate) fn insert(&self, owner: Owner, node: HeldNode) -> Ticket {
        let guard = self.next_guard.fetch_add(1, Ordering::Relaxed);
        let watch = node.watch().clone();
        let replaced = self.holds.lock().insert(owner, Hold { node, guards: vec![guard] });
        drop(replaced); // outside the lock: dropping a node sends its delete
        Ticket::new(owner, guard, watch)
    }

    /// Ends `ticket`'s guard (again: nothing happens). Returns the node when it was its
    /// hold's last guard.
    pub(crate) fn end(&self, ticket: &Ticket) -> Option<HeldNode> {
        let mut holds = self.holds.lock();
        let hold = holds.get_mut(&ticket.owner)?;
        let before = hold.guards.len();
        hold.guards.retain(|g| *g != ticket.guard);
        if hold.guards.len() == before || !hold.guards.is_empty() {
            return None;
        }
        holds.remove(&ticket.owner).map(|h| h.node)
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

/// A reentrant lock's guard (the mutex's, a read-write half's): a ticket of a hold in the field
/// `$holds` of the lock's shared state (the invoking module's `Shared`), with the inherent
/// methods every lock guard has, `Drop`, and `Hold`.
macro_rules! ticket_guard {
    ($(#[$meta:meta])* $guard:ident, $holds:ident, $marker:literal) => {
        $(#[$meta])*
        #[must_use = "dropping the guard releases the lock"]
        #[clippy::has_significant_drop]
        #[derive(Debug)]
        pub struct $guard {
            shared: Arc<Shared>,
            ticket: Ticket,
        }

        impl $guard {
            node_accessors! {
                via ticket;
                #[doc = concat!(
                    "The lock node's path (namespace stripped), e.g. `/locks/a/_c_<uuid>-",
                    $marker,
                    "0000000003`."
                )]
                lock_path;
                /// The lock node's creation zxid: strictly increasing across successive nodes of
                /// this lock, across sessions too. Pass it to systems that reject stale writers.
                fencing_token;
                /// Whether the lock can still be trusted: same session, not `Suspended`/`Lost` as
                /// the framework's error policy counts them, and the node not known to be deleted.
                /// A cheap local check, no I/O.
                is_held;
                /// Completes when the lock can no longer be trusted: the connection is `Suspended`
                /// or `Lost` (per the error policy), a new session replaced ours, or our node was
                /// deleted (from then on [`is_held`](Self::is_held) is false too).
                ///
                /// # Cancel safety
                /// Cancel-safe: it only observes.
                lost;
            }

            /// Completes with `true` at each revocation request to the lock node (another
            /// process wrote `__REVOKE__` into it), once per request and guard, requests made
            /// while the acquire waited included; with `false` when no request can come (the
            /// node is gone or its session ended, or the hold was not acquired revocably: then
            /// at once). See [`Revocable`](crate::Revocable).
            ///
            /// # Cancel safety
            /// Cancel-safe: a request is counted as reported only when this returns `true`.
            pub async fn revocation_requested(&self) -> bool {
                self.ticket.revocation_requested().await
            }

            /// Ends this hold. When it was the owner's last, the node is deleted now and the
            /// outcome reported; a failure that outlasts the retry policy is returned (a
            /// retryable one is left to the framework's reaper, which keeps trying while the
            /// session lasts). A node already gone (its session ended) counts as released.
            ///
            /// # Errors
            /// The ZooKeeper error that stopped the delete.
            ///
            /// # Cancel safety
            /// Cancel-safe: a cancelled release finishes in the background.
            pub async fn release(self) -> Result<()> {
                let Some(node) = self.shared.$holds.end(&self.ticket) else { return Ok(()) };
                let span = tracing::debug_span!("zk_recipes.lock.release", node = %self.lock_path());
                tracing::Instrument::instrument(node.release(), span).await
            }
        }

        impl Drop for $guard {
            fn drop(&mut self) {
                // Ends the guard unless `release` did; dropping the node sends its delete at once.
                drop(self.shared.$holds.end(&self.ticket));
            }
        }

        hold_one_node!($guard);
    };
}

pub(crate) use ticket_guard;
