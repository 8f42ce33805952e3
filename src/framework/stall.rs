//! Replies a ZooKeeper server holds back until another request reaches it.
//!
//! The commit processor of ZooKeeper 3.6.0 to 3.8.0 servers in an ensemble has a race
//! (ZOOKEEPER-4537; the fix went into the 3.6, 3.7 and 3.8 branches in May 2022, 3.8.0 was
//! released before it): it decides to sleep from queue sizes read before it takes its lock,
//! so a request or a commit that arrives in between is not seen, and the server answers
//! nothing of it until another request or commit reaches the same server. On a busy server
//! that is a few milliseconds. Where every session waits for that one reply (a queue of lock
//! waiters behind a listing or a release that went unanswered), nothing else comes until a
//! client pings: 9 to 12 s with zookeeper-client at the default 60 s session timeout.
//! Measured on a 3-server 3.8.0 ensemble, 64 sessions on one lock: one such stall in 8 of 82
//! runs of 3,968 handoffs, the server showing the request queued and nothing sent.
//!
//! So where the framework waits on a reply (every operation of the framework, a cache's reads,
//! a lock's requests) or where a lock's handoff waits on a watch event, the wait nudges the
//! server once it has lasted [`FIRST`], and again after twice as long each time (at most a
//! third of the session timeout apart): a nudge is one `exists` of the root on the same
//! session, which wakes the commit processor, so both are answered. (An event a cache or a
//! watch is not waiting for in particular cannot be told late: it comes with the session's
//! next request or ping.) It is sent only when the framework has
//! sent no request for [`FIRST`]: any request that reached the server after the one held back
//! has let it go already, and a thousand waiters of one session send one nudge, not a
//! thousand. On a server without the race a nudge is one read it answers, like an early ping;
//! a wait of less than a second never sends one.

use std::future::Future;
use std::pin::pin;
use std::time::Duration;

use tokio::time::Instant;
use zookeeper_client::Client;

use super::errors::Observer;
use super::metrics::Op;
use super::Framework;

/// How long a wait lasts before its first nudge: ZooKeeper answers in milliseconds, and a
/// second is rare enough that a slow server is not sent much more.
const FIRST: Duration = Duration::from_secs(1);

/// The times at which a wait nudges its server: after [`FIRST`], then twice as long each
/// time, at most `cap` apart.
#[derive(Debug)]
pub(crate) struct Nudges {
    gap: Duration,
    cap: Duration,
}

impl Nudges {
    /// Nudges for a wait on a session of `session_timeout`.
    pub(crate) fn new(session_timeout: Duration) -> Self {
        Self { gap: FIRST, cap: (session_timeout / 3).max(FIRST) }
    }

    /// How long after `since` (the wait's start, or its last nudge) the next nudge is due.
    pub(crate) fn due_at(&self, since: Instant) -> Instant {
        since + self.gap
    }

    /// A nudge was sent: the next one is due twice as long after it.
    pub(crate) fn sent(&mut self) {
        self.gap = (self.gap * 2).min(self.cap);
    }

    /// The wait got what it waited for: a new wait starts at [`FIRST`] again.
    pub(crate) fn reset(&mut self) {
        self.gap = FIRST;
    }

    /// Completes when the next nudge is due (a fresh wait each call: dropping it loses
    /// nothing).
    async fn due(&mut self) {
        tokio::time::sleep(self.gap).await;
        self.sent();
    }
}

/// Sends one `exists` of the root on `client`, whose reply nobody waits for, unless the
/// framework (whose requests `observer` counts) sent a request less than [`FIRST`] ago.
pub(crate) fn nudge(client: &Client, observer: &Observer) {
    if observer.quiet_for() < FIRST {
        return;
    }
    tracing::debug!("no reply or event for a second and no request sent: nudging the server with one read");
    observer.request(Op::Exists);
    drop(client.check_stat("/"));
}

/// Awaits `done`, calling `nudge` while it is late (see the module docs).
async fn nudging<F: Future>(session_timeout: Duration, mut nudge: impl FnMut(), done: F) -> F::Output {
    let mut reply = pin!(done);
    let mut nudges = Nudges::new(session_timeout);
    loop {
        tokio::select! {
            biased;
            out = &mut reply => return out,
            () = nudges.due() => nudge(),
        }
    }
}

/// Awaits `done` (a reply to a request sent on `client`, or a wait for an event that such a
/// server may hold back), nudging the server while it is late (see the module docs).
pub(crate) fn unstalled<'a, F: Future + 'a>(
    client: &'a Client,
    observer: &'a Observer,
    done: F,
) -> impl Future<Output = F::Output> + 'a {
    nudging(client.session_timeout(), || nudge(client, observer), done)
}

/// Awaits `done`, a reply to a request of `framework`'s current session, nudging that
/// session's server while it is late. The session is looked up only when a nudge is due (a
/// retry may have moved to a new one by then), so a reply in time costs one timer.
pub(crate) fn framework_unstalled<'a, F: Future + 'a>(
    framework: &'a Framework,
    done: F,
) -> impl Future<Output = F::Output> + 'a {
    let nudge = || {
        if let Ok(session) = framework.session() {
            nudge(&session.client, framework.observer());
        }
    };
    nudging(framework.config().session_timeout, nudge, done)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn nudges_double_up_to_a_third_of_the_session_timeout() {
        let mut nudges = Nudges::new(Duration::from_secs(12));
        let start = tokio::time::Instant::now();
        let mut at = Vec::new();
        for _ in 0..5 {
            nudges.due().await;
            at.push(start.elapsed().as_secs());
        }
        assert_eq!(at, [1, 3, 7, 11, 15]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_short_session_still_waits_a_second_between_nudges() {
        let mut nudges = Nudges::new(Duration::from_millis(600));
        let start = tokio::time::Instant::now();
        nudges.due().await;
        nudges.due().await;
        assert_eq!(start.elapsed(), Duration::from_secs(2));
    }
}
