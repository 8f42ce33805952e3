//! One term of leadership as a handle, and a latch's leadership events as a stream.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures::Stream;
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::{broadcast, watch, Notify};

use crate::framework::{Fence, Framework};
use crate::locks::{run_until_lost, LockLost, NodeWatch};

/// One term of leadership: from the moment a latch or selector became the leader until it
/// stopped being the leader (connection `Suspended` or `Lost` as the framework's error policy
/// counts them, a new session, its node deleted, `close()`, or, for a selector, the leader
/// closure's end). A later term is a new `Leadership`, even on the same node.
///
/// It observes and owns nothing: cloning it is cheap and dropping it changes nothing. Hand it
/// (or its [`fencing_token`](Self::fencing_token)) to the work done as leader, and stop that
/// work when [`lost`](Self::lost) completes.
///
/// The promise is the locks' one: under the default error policy, `lost()` completes (and
/// `is_leader()` turns false) when the connection is suspended, before the server can expire
/// the session and let another candidate lead.
#[derive(Debug, Clone)]
pub struct Leadership {
    watch: NodeWatch,
    /// True (or the sender gone) once the term is over.
    ended: watch::Receiver<bool>,
    /// Tells the term's owner that a `lost()` completed (it may have seen the node deleted).
    seen_lost: Arc<Notify>,
}

impl Leadership {
    /// The leader node's creation zxid. It only grows from one leader to the next (across
    /// sessions too), so downstream systems can refuse writes from an older leader. A term
    /// regained on the same node after a short disconnection keeps its token: no one else led
    /// in between.
    pub fn fencing_token(&self) -> i64 {
        self.watch.fencing_token()
    }

    /// The leader node's path (namespace stripped).
    pub fn node_path(&self) -> &str {
        self.watch.user_path()
    }

    /// Whether this term is still on: not ended, same session, not `Suspended`/`Lost` as the
    /// error policy counts them, the node not known to be deleted. A local check, no I/O.
    pub fn is_leader(&self) -> bool {
        self.ended.has_changed().is_ok() && !*self.ended.borrow() && self.watch.is_held()
    }

    /// Completes when this term is over (see the type's docs); from then on
    /// [`is_leader`](Self::is_leader) is false, for good.
    ///
    /// While it is awaited it also watches the leader node, so a deletion of the node by
    /// another client ends the term too (as a lock guard's `lost()` notices it).
    ///
    /// # Cancel safety
    /// Cancel-safe: it only observes; each call sets a data watch on the leader node.
    pub async fn lost(&self) {
        let mut ended = self.ended.clone();
        let term_over = async move {
            let _ = ended.wait_for(|ended| *ended).await;
        };
        tokio::select! {
            biased;
            () = term_over => {}
            () = self.watch.lost() => self.seen_lost.notify_one(),
        }
    }

    /// Runs `work`, the critical section, until it finishes or the leadership is lost (as
    /// [`lost`](Self::lost) tells), whichever comes first: the `tokio::select!` on `lost()`
    /// written once. `lost()` is checked first, so `work` never starts on a hold already lost.
    ///
    /// # Errors
    /// [`LockLost`] when the leadership was lost first; `work` was then dropped where it stood (at
    /// its current `.await`), so write it to be stopped there.
    ///
    /// # Cancel safety
    /// Cancel-safe: dropping the returned future drops `work` with it, and the hold stays as it
    /// was (still held unless lost), ready for another section or its release.
    #[doc(
        alias = "run_while_held",
        alias = "critical_section",
        alias = "with_lock",
        alias = "run_while_leader",
        alias = "while_leading"
    )]
    pub async fn run<F: Future>(&self, work: F) -> std::result::Result<F::Output, LockLost> {
        run_until_lost(self.lost(), work, || Some(self.node_path().to_owned())).await
    }
}

/// The owner's side of a term: dropping it (or [`end`](Term::end)) ends the term.
#[derive(Debug)]
pub(crate) struct Term {
    ended: watch::Sender<bool>,
    seen_lost: Arc<Notify>,
}

impl Term {
    /// A new term on the node `watch` observes, and its handle.
    pub(crate) fn begin(watch: &NodeWatch) -> (Term, Leadership) {
        let (ended, receiver) = watch::channel(false);
        let seen_lost = Arc::new(Notify::new());
        let leadership = Leadership { watch: watch.clone(), ended: receiver, seen_lost: seen_lost.clone() };
        (Term { ended, seen_lost }, leadership)
    }

    pub(crate) fn end(self) {
        self.ended.send_replace(true);
    }

    /// What completes when the term's node can no longer be trusted as far as this process
    /// knows without a request of its own: an error state under the policy, a new session, the
    /// framework closed, or the node seen deleted by a handle's [`Leadership::lost`].
    pub(crate) fn untrusted(&self, framework: &Framework, watch: &NodeWatch) -> impl std::future::Future<Output = ()> {
        let (seen_lost, framework, watch) = (self.seen_lost.clone(), framework.clone(), watch.clone());
        async move {
            let mut states = framework.state_watch();
            loop {
                let notified = seen_lost.notified();
                if !watch.is_held() {
                    return;
                }
                tokio::select! {
                    _ = states.changed() => {}
                    () = notified => {}
                }
            }
        }
    }
}

/// A change of a [`LeaderLatch`](crate::LeaderLatch)'s leadership (Curator's
/// `LeaderLatchListener.isLeader()` / `notLeader()`).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum LeadershipEvent {
    /// The latch became the leader; the term's handle.
    Gained(Leadership),
    /// The latch is no longer the leader.
    Lost,
}

/// A latch's leadership changes, in order, as a [`Stream`]; see
/// [`LeaderLatch::leadership_events`](crate::LeaderLatch::leadership_events).
///
/// A consumer that falls behind by more than the buffer gets the current state as one event
/// in place of what it missed. The stream ends when the latch is closed.
///
/// `StreamExt::next` on it is cancel-safe: no event is lost by dropping a `next()` future.
pub struct LeadershipEvents {
    inner: Pin<Box<dyn Stream<Item = LeadershipEvent> + Send>>,
}

impl std::fmt::Debug for LeadershipEvents {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeadershipEvents").finish_non_exhaustive()
    }
}

impl LeadershipEvents {
    pub(crate) fn new(
        events: Option<broadcast::Receiver<LeadershipEvent>>,
        current: watch::Receiver<Option<Leadership>>,
    ) -> Self {
        let inner = futures::stream::unfold((events, current), |(events, current)| async move {
            let mut events = events?;
            let event = match events.recv().await {
                Ok(event) => event,
                Err(RecvError::Lagged(missed)) => {
                    tracing::warn!(missed, "leadership event consumer fell behind; resyncing to the current state");
                    match current.borrow().clone().filter(Leadership::is_leader) {
                        Some(leadership) => LeadershipEvent::Gained(leadership),
                        None => LeadershipEvent::Lost,
                    }
                }
                Err(RecvError::Closed) => return None,
            };
            Some((event, (Some(events), current)))
        });
        Self { inner: Box::pin(inner) }
    }
}

impl Stream for LeadershipEvents {
    type Item = LeadershipEvent;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<LeadershipEvent>> {
        self.inner.as_mut().poll_next(cx)
    }
}

impl Leadership {
    /// A transaction on `framework` that starts with a check of the leader node, so it fails
    /// on the server ([`Error::LockLost`](crate::Error::LockLost)) once the term is over; see
    /// [`Fence`]. The trait's method, callable without importing it.
    pub fn fenced_transaction<'a>(&self, framework: &'a Framework) -> crate::framework::Transaction<'a> {
        Fence::fenced_transaction(self, framework)
    }
}

/// A term fences with its own election node at any version (why: see [`Fence`]).
impl Fence for Leadership {
    fn fence_node(&self) -> (&str, i32) {
        (self.node_path(), -1)
    }
}
