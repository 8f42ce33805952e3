//! The circuit-breaking connection-state listener (Curator's
//! `CircuitBreakingConnectionStateListener`): passes on the first `Suspended` or `Lost`, then
//! swallows the flapping that follows for a period the retry policy decides, and passes on the
//! state the connection ended up in once the period is over.
//!
//! One engine, [`Breaker`], pure and clock-driven; the stream and the listener task are its
//! two fronts.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use futures::{FutureExt, Stream, StreamExt};
use tokio::time::{Instant, Sleep};

use super::listener::{ConnectionStateListener, ConnectionStateStream, ListenerHandle};
use super::state::StateSnapshot;
use super::{ConnectionState, Framework, WeakFramework};
use crate::error::Result;
use crate::retry::RetryPolicy;

/// The shortest period between two checks of an open circuit (a policy answering zero must
/// not make a busy loop).
const MIN_PERIOD: Duration = Duration::from_millis(1);

/// The circuit: closed (`None`) or open since the first bad state.
#[derive(Debug, Default)]
struct Breaker {
    open: Option<Open>,
}

#[derive(Debug)]
struct Open {
    started: Instant,
    /// Periods granted so far.
    periods: u32,
    /// The state passed on when the circuit opened (or the `Lost` passed on while open).
    initial: StateSnapshot,
    /// The newest state seen while open.
    newest: StateSnapshot,
    lost_sent: bool,
}

impl Breaker {
    /// A transition: what to pass on now, and the period before the first check when the
    /// circuit opens.
    fn on_event(
        &mut self,
        snapshot: StateSnapshot,
        policy: &dyn RetryPolicy,
        now: Instant,
    ) -> (Option<StateSnapshot>, Option<Duration>) {
        if let Some(open) = &mut self.open {
            if snapshot.state == ConnectionState::Lost && !open.lost_sent {
                // A lost session is never swallowed: passed on once per open circuit.
                open.lost_sent = true;
                open.initial = snapshot;
                open.newest = snapshot;
                return (Some(snapshot), None);
            }
            open.newest = snapshot;
            return (None, None);
        }
        if snapshot.state.is_connected() {
            return (Some(snapshot), None);
        }
        match policy.next_delay(0, Duration::ZERO) {
            Some(period) => {
                self.open = Some(Open {
                    started: now,
                    periods: 1,
                    initial: snapshot,
                    newest: snapshot,
                    lost_sent: snapshot.state == ConnectionState::Lost,
                });
                (Some(snapshot), Some(period.max(MIN_PERIOD)))
            }
            // The policy grants no period: the circuit stays closed and the state goes through.
            None => (Some(snapshot), None),
        }
    }

    /// The period is over: the circuit closes (passing on the newest state when it differs
    /// from the one passed on at the opening) when the connection is back or the policy grants
    /// no further period; otherwise the next period.
    fn on_period_end(&mut self, policy: &dyn RetryPolicy, now: Instant) -> (Option<StateSnapshot>, Option<Duration>) {
        let Some(open) = &mut self.open else { return (None, None) };
        if !open.newest.state.is_connected() {
            if let Some(period) = policy.next_delay(open.periods, now.saturating_duration_since(open.started)) {
                open.periods = open.periods.saturating_add(1);
                return (None, Some(period.max(MIN_PERIOD)));
            }
        }
        let open = self.open.take().expect("checked above");
        ((open.newest != open.initial).then_some(open.newest), None)
    }

    fn is_open(&self) -> bool {
        self.open.is_some()
    }
}

/// A stream of connection states with a circuit breaker (Curator's
/// `CircuitBreakingConnectionStateListener`, as a stream): the first `Suspended` or `Lost`
/// goes through and opens the circuit; while it is open, the states that follow are swallowed
/// (a connection flapping between `Suspended` and `Reconnected` reaches the consumer as one
/// `Suspended`), except a first `Lost`, which always goes through. The circuit stays open for
/// a period from the retry policy ([`RetryPolicy::next_delay`] with the number of periods
/// granted so far and the time since the opening); at its end, it closes if the connection is
/// back, else the policy grants another period, until it grants none. On closing, the newest
/// state goes through if it differs from the one that went through last (the session and epoch
/// included), so the consumer ends up with the current state.
///
/// When the policy grants no period at all, the bad state goes through and the circuit stays
/// closed, as in Curator. The difference from Curator: states are [`StateSnapshot`]s, so a
/// new session (a new epoch) is never mistaken for the old one.
///
/// ```no_run
/// # async fn example(framework: zk_recipes::Framework) {
/// use std::time::Duration;
/// use futures::StreamExt;
/// use zk_recipes::retry::RetryNTimes;
/// use zk_recipes::CircuitBreakingStream;
///
/// let policy = RetryNTimes::new(3, Duration::from_secs(5));
/// let mut states = CircuitBreakingStream::new(framework.state_changes(), policy);
/// while let Some(snapshot) = states.next().await {
///     println!("{:?}", snapshot.state); // at most one Suspended per flapping period
/// }
/// # }
/// ```
pub struct CircuitBreakingStream {
    states: ConnectionStateStream,
    policy: Arc<dyn RetryPolicy>,
    breaker: Breaker,
    period: Option<Pin<Box<Sleep>>>,
}

impl std::fmt::Debug for CircuitBreakingStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CircuitBreakingStream")
            .field("policy", &self.policy)
            .field("open", &self.breaker.is_open())
            .finish_non_exhaustive()
    }
}

impl CircuitBreakingStream {
    /// `states` (from [`Framework::state_changes`]) through a circuit breaker whose periods
    /// come from `policy`.
    pub fn new(states: ConnectionStateStream, policy: impl RetryPolicy) -> Self {
        Self::with_policy(states, Arc::new(policy))
    }

    fn with_policy(states: ConnectionStateStream, policy: Arc<dyn RetryPolicy>) -> Self {
        Self { states, policy, breaker: Breaker::default(), period: None }
    }

    /// True while the circuit is open (states are being swallowed).
    pub fn is_open(&self) -> bool {
        self.breaker.is_open()
    }
}

impl Stream for CircuitBreakingStream {
    type Item = StateSnapshot;

    /// Cancel-safe, as the underlying stream: a dropped `next()` loses no state.
    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<StateSnapshot>> {
        let this = self.get_mut();
        loop {
            match this.states.poll_next_unpin(cx) {
                Poll::Ready(Some(snapshot)) => {
                    let (pass, period) = this.breaker.on_event(snapshot, &*this.policy, Instant::now());
                    if let Some(period) = period {
                        this.period = Some(Box::pin(tokio::time::sleep(period)));
                    }
                    if let Some(pass) = pass {
                        return Poll::Ready(Some(pass));
                    }
                    continue;
                }
                Poll::Ready(None) => return Poll::Ready(None),
                Poll::Pending => {}
            }
            let Some(period) = this.period.as_mut() else { return Poll::Pending };
            if period.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
            this.period = None;
            let (pass, next) = this.breaker.on_period_end(&*this.policy, Instant::now());
            if let Some(next) = next {
                this.period = Some(Box::pin(tokio::time::sleep(next)));
            }
            if let Some(pass) = pass {
                return Poll::Ready(Some(pass));
            }
        }
    }
}

impl Framework {
    /// Registers `listener` behind a circuit breaker whose periods come from `policy` (Curator's
    /// `new CircuitBreakingConnectionStateListener(client, listener, retryPolicy)`): it hears
    /// the states of [`CircuitBreakingStream`], in order, on its own task. A panic is logged
    /// and the listener stays registered; dropping the handle unregisters it.
    ///
    /// # Errors
    /// As [`add_listener`](Self::add_listener); [`Error::InvalidArgument`](crate::Error::InvalidArgument)
    /// when `policy` refuses its own settings ([`RetryPolicy::validate`]).
    pub fn add_circuit_breaking_listener(
        &self,
        listener: Arc<dyn ConnectionStateListener>,
        policy: impl RetryPolicy,
    ) -> Result<ListenerHandle> {
        policy.validate()?;
        let runtime = self.listener_runtime()?;
        if self.is_closed() {
            return Err(crate::error::Error::Closed);
        }
        let states = CircuitBreakingStream::with_policy(self.state_changes(), Arc::new(policy));
        let task = runtime.spawn(run(self.downgrade(), states, listener));
        Ok(ListenerHandle::new(task.abort_handle()))
    }
}

async fn run(weak: WeakFramework, mut states: CircuitBreakingStream, listener: Arc<dyn ConnectionStateListener>) {
    while let Some(snapshot) = states.next().await {
        let Some(framework) = weak.upgrade() else { return };
        let call = AssertUnwindSafe(listener.state_changed(&framework, snapshot));
        if call.catch_unwind().await.is_err() {
            tracing::error!(state = ?snapshot.state, "connection state listener panicked; it stays registered");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::retry::RetryNTimes;

    fn at(state: ConnectionState, epoch: u64) -> StateSnapshot {
        StateSnapshot { state, session_id: epoch as i64 * 100, epoch }
    }

    #[test]
    fn flapping_is_swallowed_and_the_current_state_passed_at_the_end() {
        use ConnectionState::*;
        let policy = RetryNTimes::new(2, Duration::from_secs(5));
        let mut breaker = Breaker::default();
        let t0 = Instant::now();
        assert_eq!(breaker.on_event(at(Connected, 1), &policy, t0), (Some(at(Connected, 1)), None));
        assert_eq!(
            breaker.on_event(at(Suspended, 1), &policy, t0),
            (Some(at(Suspended, 1)), Some(Duration::from_secs(5)))
        );
        for _ in 0..10 {
            assert_eq!(breaker.on_event(at(Reconnected, 1), &policy, t0), (None, None));
            assert_eq!(breaker.on_event(at(Suspended, 1), &policy, t0), (None, None));
        }
        // Still suspended at the end of the period: another period.
        assert_eq!(breaker.on_period_end(&policy, t0 + Duration::from_secs(5)), (None, Some(Duration::from_secs(5))));
        assert_eq!(breaker.on_event(at(Reconnected, 1), &policy, t0), (None, None));
        assert_eq!(breaker.on_period_end(&policy, t0 + Duration::from_secs(10)), (Some(at(Reconnected, 1)), None));
        assert!(!breaker.is_open());
    }

    #[test]
    fn a_lost_goes_through_once_and_the_same_state_is_not_repeated() {
        use ConnectionState::*;
        let policy = RetryNTimes::new(1, Duration::from_secs(1));
        let mut breaker = Breaker::default();
        let t0 = Instant::now();
        assert_eq!(breaker.on_event(at(Suspended, 1), &policy, t0).0, Some(at(Suspended, 1)));
        assert_eq!(breaker.on_event(at(Lost, 1), &policy, t0).0, Some(at(Lost, 1)));
        assert_eq!(breaker.on_event(at(Lost, 1), &policy, t0).0, None);
        assert_eq!(breaker.on_event(at(Reconnected, 2), &policy, t0).0, None);
        assert_eq!(breaker.on_event(at(Suspended, 2), &policy, t0).0, None);
        // Not connected, and the policy grants no second period: closes with the newest state.
        assert_eq!(breaker.on_period_end(&policy, t0 + Duration::from_secs(1)), (Some(at(Suspended, 2)), None));
        // A circuit that ends on the state it opened with passes nothing.
        assert!(breaker.on_event(at(Lost, 2), &policy, t0).0.is_some());
        assert_eq!(breaker.on_period_end(&policy, t0 + Duration::from_secs(1)), (None, None));
        // No period at all: the state goes through, the circuit stays closed.
        let never = RetryNTimes::new(0, Duration::from_secs(1));
        assert_eq!(breaker.on_event(at(Suspended, 3), &never, t0), (Some(at(Suspended, 3)), None));
        assert!(!breaker.is_open());
    }
}
