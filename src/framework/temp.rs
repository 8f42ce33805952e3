//! [`TempFramework`] (Curator's `CuratorTempFramework`): a framework for occasional use that
//! opens its session on first use and closes it after a period without use.

use std::sync::{Arc, Weak};
use std::time::Duration;

use tokio::time::Instant;
use zookeeper_client::Stat;

use super::builder::FrameworkBuilder;
use super::transaction::{OpResult, Transaction};
use super::Framework;
use crate::error::{Error, Result};
use crate::sync::Mutex;

/// The shortest idle check period (a tiny threshold must not make a busy loop).
const MIN_CHECK: Duration = Duration::from_millis(10);

/// A framework for occasional use (Curator's `CuratorTempFramework`, from `buildTemp`): no
/// session until the first operation, which opens one; the session is closed again once no
/// operation has run for the inactive threshold, and the next operation opens a new one. Its
/// operations are Curator's limited set: transactions and reads of a node's data.
///
/// Each session is a fresh one: ephemeral nodes made through it go when it closes. Made with
/// [`FrameworkBuilder::build_temp`]; the builder's settings (retry policy, namespace, ACL
/// provider, auth, TLS, ...) apply to every session it opens.
///
/// ```no_run
/// # async fn example() -> zk_recipes::Result<()> {
/// use std::time::Duration;
/// use zk_recipes::{CreateMode, Framework};
///
/// let temp = Framework::builder("127.0.0.1:2181").build_temp(Duration::from_secs(180))?;
/// temp.transaction(|t| t.create("/reports/today", b"ok", CreateMode::Persistent)).await?;
/// let (data, _stat) = temp.get_data("/reports/today").await?;
/// # let _ = data;
/// temp.close().await;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct TempFramework {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    builder: FrameworkBuilder,
    threshold: Duration,
    /// Held while a session is being opened, so that concurrent first uses open one.
    opening: tokio::sync::Mutex<()>,
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    framework: Option<Framework>,
    /// Counts sessions opened; an idle task watches its own.
    generation: u64,
    in_flight: usize,
    last_use: Instant,
    closed: bool,
}

/// An operation's use of the current session; its end counts as the last use.
struct Use {
    framework: Framework,
    shared: Arc<Shared>,
}

impl Drop for Use {
    fn drop(&mut self) {
        let mut state = self.shared.state.lock();
        state.in_flight -= 1;
        state.last_use = Instant::now();
    }
}

impl TempFramework {
    pub(crate) fn new(builder: FrameworkBuilder, threshold: Duration) -> TempFramework {
        let state = State { framework: None, generation: 0, in_flight: 0, last_use: Instant::now(), closed: false };
        let shared = Shared { builder, threshold, opening: tokio::sync::Mutex::new(()), state: Mutex::new(state) };
        TempFramework { shared: Arc::new(shared) }
    }

    /// The inactive threshold: how long the session stays open without an operation.
    pub fn inactive_threshold(&self) -> Duration {
        self.shared.threshold
    }

    /// True while a session is open.
    pub fn is_open(&self) -> bool {
        self.shared.state.lock().framework.as_ref().is_some_and(|f| !f.is_closed())
    }

    /// The open session's id, if a session is open.
    pub fn session_id(&self) -> Option<i64> {
        let state = self.shared.state.lock();
        state.framework.as_ref().filter(|f| !f.is_closed()).map(|f| f.snapshot().session_id)
    }

    /// Reads a node's data and stat (Curator's `getData().forPath(p)`), opening a session if
    /// none is open.
    ///
    /// # Errors
    /// As [`Framework::get_data`]; opening a session fails as [`FrameworkBuilder::start`];
    /// [`Error::Closed`] after [`close`](Self::close).
    ///
    /// # Cancel safety
    /// Cancel-safe: a read changes nothing, and a session being opened is closed again (a
    /// cancelled open) or kept for the next operation (a cancelled read).
    pub async fn get_data(&self, path: &str) -> Result<(Vec<u8>, Stat)> {
        let using = self.use_session().await?;
        using.framework.get_data(path).await
    }

    /// Builds a transaction with `build` and commits it (Curator's `inTransaction()`),
    /// opening a session if none is open.
    ///
    /// # Errors
    /// As [`Transaction::commit`]; opening a session fails as [`FrameworkBuilder::start`];
    /// [`Error::Closed`] after [`close`](Self::close).
    ///
    /// # Cancel safety
    /// As [`Transaction::commit`]: a cancelled commit may still be applied (all of it, or
    /// nothing).
    pub async fn transaction<F>(&self, build: F) -> Result<Vec<OpResult>>
    where
        F: for<'a> FnOnce(Transaction<'a>) -> Transaction<'a>,
    {
        let using = self.use_session().await?;
        build(using.framework.transaction()).commit().await
    }

    /// Closes the open session, if any; every later operation fails with [`Error::Closed`].
    ///
    /// # Cancel safety
    /// Cancel-safe: the temp framework is marked closed at the first poll; a cancelled close
    /// may leave the session to expire on its own, as [`Framework::close`].
    pub async fn close(&self) {
        let framework = {
            let mut state = self.shared.state.lock();
            state.closed = true;
            state.framework.take()
        };
        if let Some(framework) = framework {
            framework.close().await;
        }
    }

    /// The current session (opened if needed), counted as in use until the result drops.
    async fn use_session(&self) -> Result<Use> {
        let _opening = self.shared.opening.lock().await;
        {
            let mut state = self.shared.state.lock();
            if state.closed {
                return Err(Error::Closed);
            }
            if let Some(framework) = state.framework.as_ref().filter(|f| !f.is_closed()).cloned() {
                state.in_flight += 1;
                state.last_use = Instant::now();
                return Ok(Use { framework, shared: self.shared.clone() });
            }
        }
        // Dropped (cancelled) before it is stored, the new framework's session closes with it.
        let framework = self.shared.builder.clone().start().await?;
        let stored = {
            let mut state = self.shared.state.lock();
            (!state.closed).then(|| {
                state.framework = Some(framework.clone());
                state.generation += 1;
                state.in_flight += 1;
                state.last_use = Instant::now();
                state.generation
            })
        };
        let Some(generation) = stored else {
            // Closed while the session was being opened.
            framework.close().await;
            return Err(Error::Closed);
        };
        tracing::debug!(session = framework.snapshot().session_id, "temp framework: session opened");
        tokio::spawn(close_when_idle(Arc::downgrade(&self.shared), generation));
        Ok(Use { framework, shared: self.shared.clone() })
    }
}

/// Closes session `generation` once no operation has used it for the threshold; ends when the
/// temp framework is gone or the session was closed otherwise.
async fn close_when_idle(shared: Weak<Shared>, generation: u64) {
    loop {
        let wait = {
            let Some(shared) = shared.upgrade() else { return };
            let state = shared.state.lock();
            if state.generation != generation || state.framework.is_none() {
                return;
            }
            // An operation in progress ends by setting `last_use`: the session closes a whole
            // threshold after that at the earliest, so a threshold's sleep comes no later.
            match state.in_flight {
                0 => shared.threshold.saturating_sub(state.last_use.elapsed()),
                _ => shared.threshold,
            }
        };
        tokio::time::sleep(wait.max(MIN_CHECK)).await;
        let idle = {
            let Some(shared) = shared.upgrade() else { return };
            let mut state = shared.state.lock();
            if state.generation != generation {
                return;
            }
            let quiet = state.last_use.elapsed() >= shared.threshold;
            if state.in_flight == 0 && quiet {
                state.framework.take()
            } else {
                continue;
            }
        };
        if let Some(framework) = idle {
            tracing::debug!(session = framework.snapshot().session_id, "temp framework: idle, closing the session");
            framework.close().await;
        }
        return;
    }
}

impl FrameworkBuilder {
    /// A [`TempFramework`] with these settings (Curator's `buildTemp(inactiveThreshold)`;
    /// Curator's default threshold is 3 minutes): it opens a session on first use and closes
    /// it after `inactive_threshold` without an operation. Does no I/O.
    ///
    /// # Errors
    /// As [`build`](Self::build); [`Error::InvalidArgument`] for a zero threshold.
    pub fn build_temp(self, inactive_threshold: Duration) -> Result<TempFramework> {
        if inactive_threshold.is_zero() {
            return Err(Error::invalid_argument("inactive_threshold", "must be greater than zero"));
        }
        // Validate now, as `build` does; each session gets a framework of its own.
        drop(self.clone().build()?);
        Ok(TempFramework::new(self, inactive_threshold))
    }
}
