//! Leader election, wire-compatible with Curator's leader recipes, on the lock core.
//!
//! | file | holds |
//! | --- | --- |
//! | `leadership.rs` | one term of leadership as a handle ([`Leadership`]) and the event stream |
//! | `latch.rs` | [`LeaderLatch`]: a candidate node that stays in the queue; leads while first |
//! | `selector.rs` | [`LeaderSelector`]: a mutex whose holder runs the user's closure |
//! | `observer.rs` | [`LeaderObserver`]: who leads, for a process that is no candidate |
//!
//! Both recipes are the lock engine (`LockInternals`) with a node name marker and the
//! participant id as node data: `latch-` for the latch (Curator's `LeaderLatch`), `lock-`
//! for the selector (Curator's `LeaderSelector` is an `InterProcessMutex`). Each runs one
//! background task, spawned by `start()` and aborted by `close()` or by dropping the handle.

mod latch;
mod leadership;
mod observer;
mod selector;

use std::time::Duration;

pub use self::latch::{CloseMode, LeaderLatch};
pub use self::leadership::{Leadership, LeadershipEvent, LeadershipEvents};
pub use self::observer::{ElectionKind, LeaderChanges, LeaderObserver};
pub use self::selector::LeaderSelector;

use crate::error::{Error, Result, ZkError};
use crate::framework::metrics::Op;
use crate::framework::Framework;
use crate::locks::LockInternals;
use crate::protocol::driver::Driver;
use crate::retry::{Doubling, RetryLoop};
use crate::sync::Mutex;

/// A candidate in an election, as read from its node (Curator's `Participant`).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Participant {
    /// The candidate's id: its node's data read as UTF-8 (invalid bytes replaced), as Curator
    /// reads it. Curator candidates without an id show an empty id (a latch) or their host's
    /// address (a selector).
    pub id: String,
    /// True for the first node in election order: the leader, or the candidate about to
    /// notice that it leads.
    pub is_leader: bool,
    /// The candidate's node (namespace stripped).
    pub node: String,
}

/// Where a latch or selector is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Phase {
    Latent,
    Started,
    Closed,
}

impl Phase {
    /// `Ok` while started; otherwise the error that says why the handle takes no part.
    pub(crate) fn check(self, path: &str) -> Result<()> {
        let reason = match self {
            Phase::Started => return Ok(()),
            Phase::Latent => "not started",
            Phase::Closed => "closed",
        };
        Err(Error::NotInElection { path: path.to_owned(), reason })
    }
}

/// Checks a participant id: not empty (participants are told apart by it) and free of
/// control characters (it is shown in logs and tables, one per line).
pub(crate) fn validate_id(id: &str) -> Result<()> {
    if id.is_empty() {
        return Err(Error::invalid_argument("id", "must not be empty: participants are told apart by their ids"));
    }
    if id.chars().any(char::is_control) {
        return Err(Error::invalid_argument("id", format!("{id:?} contains control characters")));
    }
    Ok(())
}

/// The lock engine for an election at `path`: nodes named after `driver`'s marker, carrying
/// `id` as their data.
///
/// # Errors
/// [`Error::InvalidArgument`] for a bad id; [`Error::InvalidPath`]; [`Error::TooLarge`]
/// (naming the id) when the path and id do not fit in one request.
pub(crate) fn election(framework: &Framework, path: &str, driver: impl Driver, id: &str) -> Result<LockInternals> {
    validate_id(id)?;
    let internals = LockInternals::new(framework, path, std::sync::Arc::new(driver), id.as_bytes().to_vec()).map_err(
        |e| match e {
            Error::TooLarge { name: "data", size, limit } => Error::TooLarge { name: "id", size, limit },
            other => other,
        },
    )?;
    Ok(internals.with_mirror_wait().counted("leader"))
}

/// Every candidate of an election in election order, with ids read from the nodes' data; the
/// first one whose node still exists is the leader. Children that are not candidates of
/// this recipe (foreign children) are included, as Curator counts them.
pub(crate) async fn read_participants(internals: &LockInternals) -> Result<Vec<Participant>> {
    let nodes = internals.participant_nodes().await?;
    let framework = internals.framework();
    let full: Vec<String> = nodes.iter().map(|node| framework.fix_path(node)).collect();
    // All reads go out back to back: one round trip, whatever the number of candidates.
    let data = framework
        .with_read_retry(|session| {
            let full = &full;
            async move {
                let replies = futures::future::join_all(full.iter().map(|p| {
                    session.sent(Op::GetData);
                    session.client.get_data(p)
                }))
                .await;
                replies
                    .into_iter()
                    .map(|reply| match reply {
                        Ok((data, _)) => Ok(Some(data)),
                        Err(ZkError::NoNode) => Ok(None), // left meanwhile
                        Err(e) => Err(e),
                    })
                    .collect::<Result<Vec<_>, ZkError>>()
            }
        })
        .await?;
    let mut participants = Vec::with_capacity(nodes.len());
    for (node, data) in nodes.into_iter().zip(data) {
        if let Some(data) = data {
            let is_leader = participants.is_empty();
            participants.push(Participant { id: String::from_utf8_lossy(&data).into_owned(), is_leader, node });
        }
    }
    Ok(participants)
}

/// The first candidate in election order whose node still exists.
pub(crate) async fn read_leader(internals: &LockInternals) -> Result<Option<Participant>> {
    let framework = internals.framework();
    for node in internals.participant_nodes().await? {
        match framework.get_data(&node).plain().await {
            Ok((data, _)) => {
                let id = String::from_utf8_lossy(&data).into_owned();
                return Ok(Some(Participant { id, is_leader: true, node }));
            }
            Err(Error::ZooKeeper(ZkError::NoNode)) => continue,
            Err(e) => return Err(e),
        }
    }
    Ok(None)
}

/// Waits until `framework` is connected on a session (after `start()`, between sessions);
/// false when it closed.
pub(crate) async fn wait_until_usable(framework: &Framework) -> bool {
    let mut states = framework.state_watch();
    let _ = states.wait_for(|s| framework.is_closed() || (s.state.is_connected() && s.epoch > 0)).await;
    !framework.is_closed()
}

/// The pause between failed attempts to join an election: 100 ms doubling up to 5 s, on the
/// crate's one retry loop under a policy that never gives up (`backoff()` sleeps the next
/// pause; a fresh loop starts over at 100 ms).
pub(crate) fn rejoin_pause() -> RetryLoop<'static> {
    /// The spacing of the pauses.
    const REJOIN: Doubling = Doubling { first: Duration::from_millis(100), max: Duration::from_secs(5) };
    RetryLoop::new(&REJOIN)
}

/// A recipe's background task: spawned by `start()`, aborted by `close()` or when the
/// handle is dropped (never spawned or awaited from `Drop`).
#[derive(Debug, Default)]
pub(crate) struct Task(Mutex<Option<tokio::task::JoinHandle<()>>>);

impl Task {
    /// A handle's `start()`: spawns `task()` on the current runtime and marks `phase` started
    /// when it is latent; does nothing when started already. Returns whether it spawned. The
    /// caller holds the lock `phase` lives under, so a concurrent `close()` sees the task and
    /// stops it.
    ///
    /// # Errors
    /// [`Error::NotInElection`] when closed; [`Error::InvalidArgument`] outside a Tokio
    /// runtime.
    pub(crate) fn start<F>(&self, phase: &mut Phase, path: &str, task: impl FnOnce() -> F) -> Result<bool>
    where
        F: std::future::Future<Output = ()> + Send + 'static,
    {
        match *phase {
            Phase::Latent => {}
            Phase::Started => return Ok(false),
            Phase::Closed => return Phase::Closed.check(path).map(|()| false),
        }
        let runtime = crate::runtime::current("start")?;
        let replaced = self.0.lock().replace(runtime.spawn(task()));
        if let Some(old) = replaced {
            old.abort();
        }
        *phase = Phase::Started;
        Ok(true)
    }

    /// Aborts the task and waits until its future has been dropped. Called from inside the
    /// task itself, it ends the caller there (at this await).
    pub(crate) async fn stop(&self) {
        let handle = self.0.lock().take();
        if let Some(handle) = handle {
            handle.abort();
            let _ = handle.await;
        }
    }
}

impl Drop for Task {
    fn drop(&mut self) {
        if let Some(handle) = self.0.lock().take() {
            handle.abort();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids() {
        assert!(validate_id("worker-1").is_ok());
        assert!(validate_id("Ünïcode id with spaces").is_ok());
        for bad in ["", "a\nb", "nul\0", "\t"] {
            assert!(matches!(validate_id(bad), Err(Error::InvalidArgument { name: "id", .. })), "{bad:?}");
        }
    }

    #[test]
    fn phases() {
        assert!(Phase::Started.check("/e").is_ok());
        assert!(matches!(Phase::Latent.check("/e"), Err(Error::NotInElection { reason: "not started", .. })));
        assert!(matches!(Phase::Closed.check("/e"), Err(Error::NotInElection { reason: "closed", .. })));
    }
}
