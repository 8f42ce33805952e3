//! Starting an acquire over with a fresh node when its node went missing (deleted by someone
//! else, or its session ended), under the framework's retry policy.

use std::future::Future;
use std::time::Duration;

use crate::error::{Error, Result};
use crate::framework::node::Failure;
use crate::framework::Framework;

/// Runs `attempt` until it ends with a verdict, starting a fresh one (with a new node)
/// whenever its node went missing, as long as the retry policy allows.
///
/// # Errors
/// The attempt's error; [`Error::Closed`] when the framework closed under it;
/// [`Error::RetriesExhausted`] when the policy gave up starting over.
pub(crate) async fn fresh_attempts<T, F, Fut>(framework: &Framework, path: &str, attempt: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, Failure>>,
{
    let mut retry = framework.retry_loop();
    let node_missing = |f: &Failure| {
        let missing = matches!(f, Failure::NodeMissing);
        if missing {
            tracing::debug!(path, "our node went missing: starting a fresh attempt");
        }
        missing
    };
    match retry.run_with(attempt, node_missing, |delay| pause_before_new_attempt(framework, delay)).await {
        Ok(value) => Ok(value),
        Err(Failure::Error(e)) => Err(e),
        Err(Failure::NodeMissing) if framework.is_closed() => Err(Error::Closed),
        Err(Failure::NodeMissing) => Err(Error::RetriesExhausted { path: path.to_owned(), attempts: retry.attempts() }),
    }
}

/// Waits before a fresh attempt after a node went missing: the retry delay when the framework
/// is not connected or its session's client has ended (the state manager is about to replace
/// it), otherwise only a yield.
///
/// It never returns without giving other tasks a turn. Requests on an ended client fail at
/// once, without ever being pending, and the framework's state may still read "connected" for a
/// moment (zookeeper-client 0.11.2 can even report `SyncConnected` until its own expiry). A
/// retry loop that did not pause then burnt its whole retry policy in microseconds or, under
/// `RetryForever`, never yielded and starved the state manager that would replace the session
/// (a livelock). Regression test:
/// `tests/locks/semaphore.rs::waiters_survive_a_session_that_ends_while_connected`.
async fn pause_before_new_attempt(framework: &Framework, delay: Duration) {
    let client_ended = framework.session().map_or(true, |s| s.client.state().is_terminated());
    if client_ended || !framework.state().is_connected() {
        tokio::time::sleep(delay).await;
    } else {
        tokio::task::yield_now().await;
    }
}
