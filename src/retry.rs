//! Retry policies: how long to wait before trying a failed operation again.
//!
//! A policy is stateless (Curator's `RetryPolicy.allowRetry`): it is asked, for the `attempt`-th
//! retry (0 for the first) after `elapsed` time since the operation began, how long to sleep
//! before trying again, or `None` to give up.
//!
//! ```
//! use std::time::Duration;
//! use zk_recipes::retry::{RetryNTimes, RetryPolicy};
//!
//! let policy = RetryNTimes::new(2, Duration::from_millis(100));
//! assert_eq!(policy.next_delay(0, Duration::ZERO), Some(Duration::from_millis(100)));
//! assert_eq!(policy.next_delay(2, Duration::ZERO), None);
//! ```

use std::fmt::Debug;
use std::hash::{BuildHasher, Hasher};
use std::time::Duration;

/// Decides whether, and after what delay, a failed operation is tried again.
pub trait RetryPolicy: Debug + Send + Sync + 'static {
    /// The delay before retry number `attempt` (0-based), or `None` to give up.
    /// `elapsed` is the time since the operation first started.
    fn next_delay(&self, attempt: u32, elapsed: Duration) -> Option<Duration>;
}

/// Sleeps `base × random(1 ..= 2^(attempt+1))`, at most `max_sleep`, for up to `max_retries`
/// retries (Curator's `ExponentialBackoffRetry` / `BoundedExponentialBackoffRetry`).
#[derive(Debug, Clone)]
pub struct ExponentialBackoff {
    base: Duration,
    max_retries: u32,
    max_sleep: Duration,
}

impl ExponentialBackoff {
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

impl Default for ExponentialBackoff {
    /// 100 ms base, 10 retries, 5 s cap.
    fn default() -> Self {
        Self::new(Duration::from_millis(100), 10).max_sleep(Duration::from_secs(5))
    }
}

impl RetryPolicy for ExponentialBackoff {
    fn next_delay(&self, attempt: u32, _elapsed: Duration) -> Option<Duration> {
        if attempt >= self.max_retries {
            return None;
        }
        let span = 1u64 << (attempt + 1).min(Self::MAX_RETRIES_LIMIT + 1);
        let factor = 1 + random_u64() % span;
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
    fn next_delay(&self, _attempt: u32, _elapsed: Duration) -> Option<Duration> {
        Some(self.interval)
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
        let policy = ExponentialBackoff::new(base, 5).max_sleep(Duration::from_millis(200));
        for attempt in 0..5 {
            for _ in 0..50 {
                let d = policy.next_delay(attempt, Duration::ZERO).unwrap();
                let ceiling = base * (1u32 << (attempt + 1));
                assert!(d >= base, "{d:?} below base");
                assert!(d <= ceiling.min(Duration::from_millis(200)), "{d:?} above ceiling at {attempt}");
            }
        }
        assert_eq!(policy.next_delay(5, Duration::ZERO), None);
    }

    #[test]
    fn exponential_backoff_caps_retry_count() {
        let policy = ExponentialBackoff::new(Duration::from_millis(1), 1000);
        assert!(policy.next_delay(28, Duration::ZERO).is_some());
        assert_eq!(policy.next_delay(29, Duration::ZERO), None);
    }

    #[test]
    fn exponential_backoff_never_overflows() {
        let policy = ExponentialBackoff::new(Duration::from_secs(3600), 29).max_sleep(Duration::MAX);
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
    fn jitter_varies() {
        let draws: std::collections::HashSet<u64> = (0..20).map(|_| random_u64()).collect();
        assert!(draws.len() > 1);
    }
}
