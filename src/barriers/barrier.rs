//! `DistributedBarrier`: one node; while it exists, waiters wait.

use std::time::Duration;

use tokio::time::Instant;

use super::wake;
use crate::deadline;
use crate::error::{Error, Result, ZkError};
use crate::framework::Framework;
use crate::path;

/// A barrier that holds every waiter while its node exists (Curator's `DistributedBarrier`,
/// same node): [`set`](Self::set) raises it, [`remove`](Self::remove) lowers it, and
/// [`wait`](Self::wait) returns once it is down. Any process, in Rust or Java, can do any of
/// the three.
///
/// ```no_run
/// # async fn example(fw: zk_recipes::Framework) -> zk_recipes::Result<()> {
/// use zk_recipes::DistributedBarrier;
///
/// let gate = DistributedBarrier::new(&fw, "/jobs/nightly/gate")?;
/// gate.set().await?;
/// // ... workers call gate.wait().await ...
/// gate.remove().await?; // every waiter goes
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct DistributedBarrier {
    framework: Framework,
    path: String,
}

impl DistributedBarrier {
    /// A barrier whose node is `path`. Does no I/O.
    ///
    /// # Errors
    /// [`Error::InvalidPath`] for an invalid path, the root or a path under `/zookeeper`.
    pub fn new(framework: &Framework, path: &str) -> Result<Self> {
        path::validate_recipe_path(path)?;
        Ok(DistributedBarrier { framework: framework.clone(), path: path.to_owned() })
    }

    /// The barrier's node.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// Raises the barrier: creates its node (persistent, missing parents as containers); an
    /// existing node is fine (Curator's `setBarrier`).
    ///
    /// # Errors
    /// The server's refusal (`NoAuth`, ...); a connection error the retry policy gave up on.
    ///
    /// # Cancel safety
    /// A cancelled set may still happen on the server.
    pub async fn set(&self) -> Result<()> {
        match self.framework.create(&self.path).plain().await {
            Ok(_) | Err(Error::ZooKeeper(ZkError::NodeExists)) => Ok(()),
            // Sent again after a connection loss: a node is there, which is all that is asked.
            Err(Error::OutcomeUnknown { .. }) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Lowers the barrier: deletes its node; a missing node is fine (Curator's
    /// `removeBarrier`).
    ///
    /// # Errors
    /// The server's refusal (`NotEmpty` when something was created under the node, `NoAuth`);
    /// a connection error the retry policy gave up on.
    ///
    /// # Cancel safety
    /// A cancelled remove may still happen on the server.
    pub async fn remove(&self) -> Result<()> {
        match self.framework.delete(&self.path).await {
            Ok(()) | Err(Error::ZooKeeper(ZkError::NoNode)) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// True while the node exists.
    ///
    /// # Errors
    /// The server's refusal; a connection error the retry policy gave up on.
    ///
    /// # Cancel safety
    /// Cancel-safe: a read changes nothing.
    pub async fn is_set(&self) -> Result<bool> {
        Ok(self.framework.exists(&self.path).await?.is_some())
    }

    /// Waits until the barrier is down (its node does not exist); at once when it is not set
    /// (Curator's `waitOnBarrier`).
    ///
    /// # Errors
    /// [`Error::Closed`]; the server's refusal; a connection error the retry policy gave up on.
    ///
    /// # Cancel safety
    /// Cancel-safe: it only reads and watches.
    pub async fn wait(&self) -> Result<()> {
        self.wait_until(None).await.map(drop)
    }

    /// Waits at most `timeout` for the barrier to be down: true when it is, false when the
    /// time ran out.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a zero timeout; otherwise as [`wait`](Self::wait).
    ///
    /// # Cancel safety
    /// Cancel-safe: it only reads and watches.
    pub async fn wait_timeout(&self, timeout: Duration) -> Result<bool> {
        let deadline = deadline::of_wait(timeout)?;
        match tokio::time::timeout_at(deadline, self.wait_until(Some(deadline))).await {
            Ok(result) => result,
            Err(_) => Ok(false),
        }
    }

    async fn wait_until(&self, deadline: Option<Instant>) -> Result<bool> {
        loop {
            let (stat, watch) = self.framework.exists(&self.path).watch().await?;
            if stat.is_none() {
                return Ok(true);
            }
            if !wake(watch, deadline).await? {
                return Ok(false);
            }
        }
    }
}
