//! The state manager's heartbeat: when the task last ran, in real time, how late that may be
//! before the framework's view of the connection is out of date, and until when the session
//! can be counted alive without the task's help.
//!
//! Readers ([`Framework::snapshot`](super::Framework::snapshot), and through it every guard's
//! `is_held()`) consult it without waiting for the task: on a starved runtime the task cannot
//! run, but the first reader that does run sees how old its last word is.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// No deadline: no session, or nothing vouched for yet.
const NONE: u64 = u64::MAX;

/// How current the state manager's last word is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Freshness {
    /// The task ran recently enough: the published state stands.
    Current,
    /// The task has not run for longer than the stall limit: a connected state cannot be
    /// vouched for.
    Late,
    /// The last contact the task vouched for is a whole session timeout old: the ensemble may
    /// have expired the session.
    Expired,
}

/// When the state manager last ran and what it vouched for then. All times are milliseconds
/// since `base`.
#[derive(Debug)]
pub(crate) struct Heartbeat {
    base: Instant,
    /// The last beat.
    last: AtomicU64,
    /// The stall limit; 0 while no session exists.
    limit: AtomicU64,
    /// From this moment on the session counts as lost unless the task beats again with a
    /// later deadline; [`NONE`] while there is none.
    lost_at: AtomicU64,
}

impl Heartbeat {
    pub(crate) fn new() -> Heartbeat {
        Heartbeat {
            base: Instant::now(),
            last: AtomicU64::new(0),
            limit: AtomicU64::new(0),
            lost_at: AtomicU64::new(NONE),
        }
    }

    fn now_ms(&self) -> u64 {
        millis(self.base.elapsed())
    }

    /// A new session: beats may be at most `stall` apart, and it is vouched for during
    /// `vouched_for` from now.
    pub(crate) fn start(&self, stall: Duration, vouched_for: Duration) {
        self.limit.store(millis(stall).max(1), Ordering::Release);
        self.beat(vouched_for);
    }

    /// The task ran now, and vouches for the session during `vouched_for` from now.
    pub(crate) fn beat(&self, vouched_for: Duration) {
        let now = self.now_ms();
        self.lost_at.store(now.saturating_add(millis(vouched_for)), Ordering::Release);
        self.last.store(now, Ordering::Release);
    }

    /// How current the last beat is now.
    pub(crate) fn freshness(&self) -> Freshness {
        self.freshness_at(self.now_ms())
    }

    fn freshness_at(&self, now: u64) -> Freshness {
        let limit = self.limit.load(Ordering::Acquire);
        if limit == 0 {
            return Freshness::Current;
        }
        if now >= self.lost_at.load(Ordering::Acquire) {
            Freshness::Expired
        } else if now.saturating_sub(self.last.load(Ordering::Acquire)) > limit {
            Freshness::Late
        } else {
            Freshness::Current
        }
    }
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(NONE - 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn late_after_the_stall_limit_expired_at_the_deadline() {
        let heartbeat = Heartbeat::new();
        assert_eq!(heartbeat.freshness_at(1_000_000), Freshness::Current, "no session: nothing to judge");
        heartbeat.start(Duration::from_millis(300), Duration::from_millis(550));
        let start = heartbeat.last.load(Ordering::Acquire);
        assert_eq!(heartbeat.freshness_at(start + 300), Freshness::Current);
        assert_eq!(heartbeat.freshness_at(start + 301), Freshness::Late);
        assert_eq!(heartbeat.freshness_at(start + 550), Freshness::Expired);
    }

    #[test]
    fn a_beat_moves_both_forward() {
        let heartbeat = Heartbeat::new();
        heartbeat.start(Duration::from_millis(300), Duration::from_millis(550));
        heartbeat.beat(Duration::from_secs(3600));
        let now = heartbeat.last.load(Ordering::Acquire);
        assert_eq!(heartbeat.freshness_at(now + 200), Freshness::Current);
        assert_eq!(heartbeat.freshness_at(now + 1000), Freshness::Late);
        heartbeat.beat(Duration::ZERO);
        assert_eq!(heartbeat.freshness_at(heartbeat.last.load(Ordering::Acquire)), Freshness::Expired);
    }
}
