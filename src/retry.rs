//! Retry policies: how long to wait before trying a failed operation again.
//!
//! A policy is stateless (Curator's `RetryPolicy.allowRetry`): it is asked, for the `attempt`-th
//! retry (0 for the first) after `elapsed` time since the operation began, how long to sleep
//! before trying again, or `None` to give up. Before that, it is asked whether the error is
//! worth another try at all ([`RetryPolicy::allow_retry`], Curator 5's
//! `allowRetry(Throwable)`); the default is [`Error::is_retryable`].
//!
//! ```
//! use std::time::Duration;
//! use zk_recipes::retry::{RetryNTimes, RetryPolicy};
//!
//! let policy = RetryNTimes::new(2, Duration::from_millis(100));
//! assert_eq!(policy.next_delay(0, Duration::ZERO), Some(Duration::from_millis(100)));
//! assert_eq!(policy.next_delay(2, Duration::ZERO), None);
//! ```

use std::fmt::{Debug, Display};
use std::future::Future;
use std::hash::{BuildHasher, Hasher};
use std::time::Duration;

use tokio::time::Instant;

use crate::error::{Error, Result};

/// Decides whether, and after what delay, a failed operation is tried again.
pub trait RetryPolicy: Debug + Send + Sync + 'static {
    /// The delay before retry number `attempt` (0-based), or `None` to give up.
    /// `elapsed` is the time since the operation first started.
    fn next_delay(&self, attempt: u32, elapsed: Duration) -> Option<Duration>;

    /// Whether a try that failed with `error` may be tried again at all (Curator 5's
    /// `RetryPolicy.allowRetry(Throwable)`); when it says yes, [`next_delay`](Self::next_delay)
    /// decides whether the budget allows it, and when.
    ///
    /// The default is [`Error::is_retryable`]: connection loss and the client's transport
    /// errors, an expired or moved session, throttling. A policy may refuse some of those (for
    /// example, fail at the first `ConnectionLoss` rather than wait for a reconnect) or accept
    /// more.
    ///
    /// The framework asks it for every operation it retries under the framework's policy: its
    /// data plane (creates, reads, writes, deletes, transactions, parents), the protected
    /// creates of the recipes and their starting over. A refused error is returned as it is (a
    /// sequential create or a transaction whose outcome is unknown still fails with
    /// [`Error::OutcomeUnknown`]). Work the framework must finish whatever the policy says
    /// (background deletes, re-adding watches after a reconnect) does not ask it.
    ///
    /// ```
    /// use std::time::Duration;
    /// use zk_recipes::retry::{RetryNTimes, RetryPolicy};
    /// use zk_recipes::{zk, Error};
    ///
    /// // Fail fast on a lost connection; keep retrying the rest.
    /// #[derive(Debug)]
    /// struct NoConnectionLoss(RetryNTimes);
    ///
    /// impl RetryPolicy for NoConnectionLoss {
    ///     fn next_delay(&self, attempt: u32, elapsed: Duration) -> Option<Duration> {
    ///         self.0.next_delay(attempt, elapsed)
    ///     }
    ///
    ///     fn allow_retry(&self, error: &Error) -> bool {
    ///         !error.is_connection_loss() && error.is_retryable()
    ///     }
    /// }
    ///
    /// let policy = NoConnectionLoss(RetryNTimes::new(3, Duration::from_millis(100)));
    /// assert!(!policy.allow_retry(&Error::ZooKeeper(zk::Error::ConnectionLoss)));
    /// assert!(policy.allow_retry(&Error::ZooKeeper(zk::Error::SessionMoved)));
    /// ```
    fn allow_retry(&self, error: &Error) -> bool {
        error.is_retryable()
    }

    /// Checks the policy's settings when a framework is built with it
    /// ([`FrameworkBuilder::build`](crate::FrameworkBuilder::build) returns the error). The
    /// built-in policies refuse a zero sleep: retrying a ZooKeeper request at once, in a loop,
    /// only burns CPU while the connection is down. The default accepts everything.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] describing the bad setting.
    fn validate(&self) -> Result<()> {
        Ok(())
    }
}

fn non_zero_sleep(policy: &str, sleep: Duration) -> Result<()> {
    if sleep.is_zero() {
        return Err(Error::invalid_argument(
            "retry_policy",
            format!("{policy} needs a sleep above zero (a zero sleep retries in a busy loop)"),
        ));
    }
    Ok(())
}

/// Sleeps `base × max(1, random(0 .. 2^(attempt+1)))`, at most `max_sleep`, for up to
/// `max_retries` retries (Curator's `ExponentialBackoffRetry` /
/// `BoundedExponentialBackoffRetry`, the same formula: the first retry sleeps `base`; it was `ExponentialBackoff` before, an alias kept, deprecated).
/// One difference: [`new`](Self::new) caps each sleep at 30 s where Curator's two-argument
/// constructor caps it at `Integer.MAX_VALUE` ms; [`max_sleep`](Self::max_sleep) sets it.
#[doc(alias = "ExponentialBackoff", alias = "BoundedExponentialBackoffRetry")]
#[derive(Debug, Clone)]
pub struct ExponentialBackoffRetry {
    base: Duration,
    max_retries: u32,
    max_sleep: Duration,
}

/// The former name of [`ExponentialBackoffRetry`] (Curator's name).
#[deprecated(note = "renamed ExponentialBackoffRetry, Curator's name")]
pub type ExponentialBackoff = ExponentialBackoffRetry;

impl ExponentialBackoffRetry {
    /// Curator caps the retry count at 29 so the multiplier cannot overflow; so do we.
    pub const MAX_RETRIES_LIMIT: u32 = 29;

    /// A policy with the given base sleep and retry count (capped at 29), with sleeps capped
    /// at 30 s.
    pub fn new(base: Duration, max_retries: u32) -> Self {
        Self { base, max_retries: max_retries.min(Self::MAX_RETRIES_LIMIT), max_sleep: Duration::from_secs(30) }
    }

    /// Caps every single sleep at `max_sleep`.
    pub fn max_sleep(mut self, max_sleep: Duration) -> Self {
        self.max_sleep = max_sleep;
        self
    }
}

impl Default for ExponentialBackoffRetry {
    /// 100 ms base, 10 retries, 5 s cap.
    fn default() -> Self {
        Self::new(Duration::from_millis(100), 10).max_sleep(Duration::from_secs(5))
    }
}

impl RetryPolicy for ExponentialBackoffRetry {
    fn validate(&self) -> Result<()> {
        non_zero_sleep("ExponentialBackoffRetry", self.base.min(self.max_sleep))
    }

    fn next_delay(&self, attempt: u32, _elapsed: Duration) -> Option<Duration> {
        if attempt >= self.max_retries {
            return None;
        }
        // Curator's `Math.max(1, random.nextInt(1 << (retryCount + 1)))`.
        let span = 1u64 << (attempt + 1).min(Self::MAX_RETRIES_LIMIT + 1);
        let factor = (random_u64() % span).max(1);
        let sleep = self.base.saturating_mul(u32::try_from(factor).unwrap_or(u32::MAX));
        Some(sleep.min(self.max_sleep))
    }
}

/// A fixed sleep, `n` times (Curator's `RetryNTimes`; `RetryNTimes::new(1, d)` is `RetryOneTime`).
#[derive(Debug, Clone)]
pub struct RetryNTimes {
    n: u32,
    sleep: Duration,
}

impl RetryNTimes {
    /// Retries `n` times, sleeping `sleep` before each.
    pub fn new(n: u32, sleep: Duration) -> Self {
        Self { n, sleep }
    }
}

impl RetryPolicy for RetryNTimes {
    fn validate(&self) -> Result<()> {
        non_zero_sleep("RetryNTimes", self.sleep)
    }

    fn next_delay(&self, attempt: u32, _elapsed: Duration) -> Option<Duration> {
        (attempt < self.n).then_some(self.sleep)
    }
}

/// A fixed sleep until `max_elapsed` has passed since the operation began (Curator's
/// `RetryUntilElapsed`).
#[derive(Debug, Clone)]
pub struct RetryUntilElapsed {
    max_elapsed: Duration,
    sleep: Duration,
}

impl RetryUntilElapsed {
    /// Retries with `sleep` between tries while less than `max_elapsed` has passed.
    pub fn new(max_elapsed: Duration, sleep: Duration) -> Self {
        Self { max_elapsed, sleep }
    }
}

impl RetryPolicy for RetryUntilElapsed {
    fn validate(&self) -> Result<()> {
        non_zero_sleep("RetryUntilElapsed", self.sleep)
    }

    fn next_delay(&self, _attempt: u32, elapsed: Duration) -> Option<Duration> {
        (elapsed < self.max_elapsed).then_some(self.sleep)
    }
}

/// Never gives up; sleeps `interval` between tries (Curator's `RetryForever`).
#[derive(Debug, Clone)]
pub struct RetryForever {
    interval: Duration,
}

impl RetryForever {
    /// Retries forever with `interval` between tries.
    pub fn new(interval: Duration) -> Self {
        Self { interval }
    }
}

impl RetryPolicy for RetryForever {
    fn validate(&self) -> Result<()> {
        non_zero_sleep("RetryForever", self.interval)
    }

    fn next_delay(&self, _attempt: u32, _elapsed: Duration) -> Option<Duration> {
        Some(self.interval)
    }
}

/// The shortest sleep between two tries, whatever a policy says: a policy that answers zero
/// must not turn a retry loop into a busy loop.
pub(crate) const MIN_SLEEP: Duration = Duration::from_millis(1);

/// The crate's own spacing for work that must never give up (background deletes, an election
/// task rejoining): `first`, doubling, at most `max`, forever.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Doubling {
    pub(crate) first: Duration,
    pub(crate) max: Duration,
}

impl RetryPolicy for Doubling {
    fn next_delay(&self, attempt: u32, _elapsed: Duration) -> Option<Duration> {
        Some(self.first.saturating_mul(1 << attempt.min(16)).min(self.max))
    }
}

/// Something whose end makes retrying pointless (a closed framework).
pub(crate) trait Ends: Send + Sync {
    fn has_ended(&self) -> bool;

    /// A failed try is about to be tried again (counted in the owner's metrics).
    fn retrying(&self) {}
}

/// The crate's one retry loop (Curator's `RetryLoop`): counts the tries of one operation and
/// sleeps the policy's delays between them. Every request this crate retries goes through one.
pub(crate) struct RetryLoop<'a> {
    policy: &'a dyn RetryPolicy,
    /// Gives up early once this has ended.
    stop: Option<&'a dyn Ends>,
    started: Instant,
    attempt: u32,
}

impl<'a> RetryLoop<'a> {
    /// A loop whose clock starts now.
    pub(crate) fn new(policy: &'a dyn RetryPolicy) -> Self {
        Self { policy, stop: None, started: Instant::now(), attempt: 0 }
    }

    /// Gives up as soon as `owner` has ended.
    pub(crate) fn stop_when(mut self, owner: &'a dyn Ends) -> Self {
        self.stop = Some(owner);
        self
    }

    /// Counts a failed try and returns the sleep before the next one, or `None` to give up.
    pub(crate) fn next_delay(&mut self) -> Option<Duration> {
        if self.stop.is_some_and(|owner| owner.has_ended()) {
            return None;
        }
        let delay = self.policy.next_delay(self.attempt, self.started.elapsed())?;
        self.attempt = self.attempt.saturating_add(1);
        if let Some(owner) = self.stop {
            owner.retrying();
        }
        Some(delay.max(MIN_SLEEP))
    }

    /// Counts a failed try and sleeps before the next one; false when the policy gives up.
    pub(crate) async fn backoff(&mut self) -> bool {
        match self.next_delay() {
            Some(delay) => {
                tokio::time::sleep(delay).await;
                true
            }
            None => false,
        }
    }

    /// Whether the policy lets a try that failed with the client's `error` be tried again at
    /// all ([`RetryPolicy::allow_retry`]).
    pub(crate) fn allows_zk(&self, error: &crate::error::ZkError) -> bool {
        self.policy.allow_retry(&Error::ZooKeeper(error.clone()))
    }

    /// How many retries have been counted.
    pub(crate) fn attempts(&self) -> u32 {
        self.attempt
    }

    /// Runs `op` until it succeeds, fails with an error `retryable` refuses, or the policy
    /// gives up (then the last error is returned), sleeping the policy's delays between tries.
    pub(crate) async fn run<T, E, F, Fut>(&mut self, op: F, retryable: impl Fn(&E) -> bool) -> Result<T, E>
    where
        E: Display,
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        self.run_with(op, retryable, tokio::time::sleep).await
    }

    /// [`run`](Self::run), with `pause` in place of sleeping the policy's delay (it may wait
    /// less when it knows better, but it must give other tasks a turn).
    pub(crate) async fn run_with<T, E, F, Fut, P, PFut>(
        &mut self,
        mut op: F,
        retryable: impl Fn(&E) -> bool,
        mut pause: P,
    ) -> Result<T, E>
    where
        E: Display,
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, E>>,
        P: FnMut(Duration) -> PFut,
        PFut: Future<Output = ()>,
    {
        loop {
            match op().await {
                Err(e) if retryable(&e) => {
                    tracing::debug!(error = %e, attempt = self.attempt, "retrying");
                    match self.next_delay() {
                        Some(delay) => pause(delay).await,
                        None => return Err(e),
                    }
                }
                done => return done,
            }
        }
    }
}

/// A random number from the standard library's per-instance hasher keys (no extra dependency;
/// jitter needs no cryptographic quality).
fn random_u64() -> u64 {
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u64(0x9e37_79b9_7f4a_7c15);
    hasher.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exponential_backoff_grows_within_bounds_and_stops() {
        let base = Duration::from_millis(10);
        let policy = ExponentialBackoffRetry::new(base, 5).max_sleep(Duration::from_millis(200));
        for attempt in 0..5 {
            for _ in 0..50 {
                let d = policy.next_delay(attempt, Duration::ZERO).unwrap();
                // Curator's factor: max(1, 0 ..= 2^(attempt+1) - 1).
                let ceiling = base * ((1u32 << (attempt + 1)) - 1);
                assert!(d >= base, "{d:?} below base");
                assert!(d <= ceiling.min(Duration::from_millis(200)), "{d:?} above ceiling at {attempt}");
            }
        }
        assert_eq!(policy.next_delay(5, Duration::ZERO), None);
    }

    #[test]
    fn exponential_backoff_caps_retry_count() {
        let policy = ExponentialBackoffRetry::new(Duration::from_millis(1), 1000);
        assert!(policy.next_delay(28, Duration::ZERO).is_some());
        assert_eq!(policy.next_delay(29, Duration::ZERO), None);
    }

    #[test]
    fn exponential_backoff_never_overflows() {
        let policy = ExponentialBackoffRetry::new(Duration::from_secs(3600), 29).max_sleep(Duration::MAX);
        assert!(policy.next_delay(28, Duration::ZERO).is_some());
    }

    #[test]
    fn retry_n_times_and_until_elapsed_and_forever() {
        let n = RetryNTimes::new(3, Duration::from_millis(5));
        assert_eq!(n.next_delay(2, Duration::from_secs(100)), Some(Duration::from_millis(5)));
        assert_eq!(n.next_delay(3, Duration::ZERO), None);

        let until = RetryUntilElapsed::new(Duration::from_secs(1), Duration::from_millis(50));
        assert_eq!(until.next_delay(100, Duration::from_millis(999)), Some(Duration::from_millis(50)));
        assert_eq!(until.next_delay(0, Duration::from_secs(1)), None);

        let forever = RetryForever::new(Duration::from_millis(7));
        assert_eq!(forever.next_delay(u32::MAX, Duration::MAX), Some(Duration::from_millis(7)));
    }

    #[test]
    fn doubling_starts_at_first_caps_at_max_and_never_gives_up() {
        let doubling = Doubling { first: Duration::from_millis(50), max: Duration::from_millis(1600) };
        let delays: Vec<_> = (0..7).map(|a| doubling.next_delay(a, Duration::ZERO).unwrap().as_millis()).collect();
        assert_eq!(delays, [50, 100, 200, 400, 800, 1600, 1600]);
        assert_eq!(doubling.next_delay(u32::MAX, Duration::MAX), Some(Duration::from_millis(1600)));
    }

    #[test]
    fn zero_sleeps_are_refused() {
        assert!(RetryForever::new(Duration::ZERO).validate().is_err());
        assert!(RetryNTimes::new(3, Duration::ZERO).validate().is_err());
        assert!(RetryUntilElapsed::new(Duration::from_secs(1), Duration::ZERO).validate().is_err());
        assert!(ExponentialBackoffRetry::new(Duration::ZERO, 3).validate().is_err());
        assert!(ExponentialBackoffRetry::new(Duration::from_millis(5), 3)
            .max_sleep(Duration::ZERO)
            .validate()
            .is_err());
        assert!(ExponentialBackoffRetry::default().validate().is_ok());
        assert!(RetryForever::new(Duration::from_millis(1)).validate().is_ok());
    }

    #[derive(Debug)]
    struct Zero;

    impl RetryPolicy for Zero {
        fn next_delay(&self, attempt: u32, _elapsed: Duration) -> Option<Duration> {
            (attempt < 3).then_some(Duration::ZERO)
        }
    }

    #[tokio::test(start_paused = true)]
    async fn retry_loop_counts_sleeps_at_least_a_millisecond_and_gives_up() {
        let started = Instant::now();
        let mut tries = 0;
        let result: Result<(), String> = RetryLoop::new(&Zero)
            .run(
                || {
                    tries += 1;
                    async { Err("down".to_owned()) }
                },
                |_| true,
            )
            .await;
        assert_eq!(result, Err("down".to_owned()));
        assert_eq!(tries, 4, "one try and three retries");
        assert!(started.elapsed() >= MIN_SLEEP * 3);
    }

    #[tokio::test(start_paused = true)]
    async fn retry_loop_stops_on_a_permanent_error_and_when_told() {
        let mut tries = 0;
        let result: Result<(), String> = RetryLoop::new(&RetryForever::new(Duration::from_millis(5)))
            .run(
                || {
                    tries += 1;
                    async { Err("no auth".to_owned()) }
                },
                |e| e != "no auth",
            )
            .await;
        assert!(result.is_err());
        assert_eq!(tries, 1);
        struct Ended;
        impl Ends for Ended {
            fn has_ended(&self) -> bool {
                true
            }
        }
        let policy = RetryForever::new(Duration::from_millis(5));
        let mut retry = RetryLoop::new(&policy).stop_when(&Ended);
        assert_eq!(retry.next_delay(), None);
    }

    #[derive(Debug)]
    struct NoConnectionLoss;

    impl RetryPolicy for NoConnectionLoss {
        fn next_delay(&self, _attempt: u32, _elapsed: Duration) -> Option<Duration> {
            Some(Duration::from_millis(1))
        }

        fn allow_retry(&self, error: &Error) -> bool {
            !error.is_connection_loss() && error.is_retryable()
        }
    }

    #[test]
    fn allow_retry_defaults_to_the_retryable_errors_and_can_be_narrowed() {
        use crate::error::ZkError;
        let default = RetryNTimes::new(3, Duration::from_millis(5));
        for retryable in [ZkError::ConnectionLoss, ZkError::SessionMoved, ZkError::Throttled, ZkError::SessionExpired] {
            assert!(default.allow_retry(&Error::ZooKeeper(retryable.clone())), "{retryable:?}");
        }
        for permanent in [ZkError::NoNode, ZkError::NoAuth, ZkError::BadVersion, ZkError::NodeExists] {
            assert!(!default.allow_retry(&Error::ZooKeeper(permanent.clone())), "{permanent:?}");
        }
        assert!(!default.allow_retry(&Error::Closed));
        assert!(!NoConnectionLoss.allow_retry(&Error::ZooKeeper(ZkError::ConnectionLoss)));
        assert!(NoConnectionLoss.allow_retry(&Error::ZooKeeper(ZkError::SessionMoved)));
        let retry = RetryLoop::new(&NoConnectionLoss);
        assert!(!retry.allows_zk(&ZkError::ConnectionLoss));
        assert!(retry.allows_zk(&ZkError::Throttled));
    }

    #[test]
    fn jitter_varies() {
        let draws: std::collections::HashSet<u64> = (0..20).map(|_| random_u64()).collect();
        assert!(draws.len() > 1);
    }
}
