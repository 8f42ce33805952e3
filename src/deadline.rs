//! Deadlines of the timed waits (`take_timeout`, `wait_timeout`, `put_timeout`, ...).
//!
//! A wait given `Duration::MAX` waits for ever, as tokio's `timeout` does: `Instant::now() +
//! timeout` would overflow the clock and panic, so the deadline is saturated instead.

use std::time::Duration;

use tokio::time::Instant;

use crate::error::{Error, Result};

/// How far on a deadline is saturated: about 30 years, as tokio's own far future.
const FAR_FUTURE: Duration = Duration::from_secs(86_400 * 365 * 30);

/// The instant `timeout` from now, at most [`FAR_FUTURE`] on.
pub(crate) fn after(timeout: Duration) -> Instant {
    Instant::now() + timeout.min(FAR_FUTURE)
}

/// The deadline of a timed wait, [`after`] `timeout`; a zero timeout is refused (a wait that
/// cannot wait is a caller's mistake: each timed wait has a form that does not wait).
///
/// # Errors
/// [`Error::InvalidArgument`] for a zero timeout.
pub(crate) fn of_wait(timeout: Duration) -> Result<Instant> {
    if timeout.is_zero() {
        return Err(Error::invalid_argument("timeout", "must be greater than zero"));
    }
    Ok(after(timeout))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_longest_timeout_saturates_instead_of_overflowing() {
        let deadline = of_wait(Duration::MAX).unwrap();
        assert!(deadline >= Instant::now() + Duration::from_secs(86_400 * 365));
        assert!(after(Duration::MAX) <= Instant::now() + FAR_FUTURE);
    }

    #[test]
    fn a_zero_timeout_is_refused_and_a_short_one_is_not() {
        assert!(matches!(of_wait(Duration::ZERO), Err(Error::InvalidArgument { name: "timeout", .. })));
        let before = Instant::now();
        let deadline = of_wait(Duration::from_millis(5)).unwrap();
        assert!(deadline >= before + Duration::from_millis(5));
        assert!(deadline <= Instant::now() + Duration::from_millis(5));
    }
}
