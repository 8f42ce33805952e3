//! [`QueueSharder`]: one logical queue spread over several [`DistributedQueue`]s (Curator's
//! `QueueSharder`).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use tokio::task::AbortHandle;

use super::distributed::DistributedQueue;
use crate::deadline;
use crate::error::{Error, Result, ZkError};
use crate::framework::Framework;
use crate::leader::LeaderLatch;
use crate::path;
use crate::protocol::queue_names::SHARD_PREFIX;
use crate::sync::Mutex;

/// When a [`QueueSharder`] adds a shard (Curator's `QueueSharderPolicies`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueSharderPolicies {
    new_queue_threshold: usize,
    threshold_check: Duration,
    max_queues: usize,
}

impl Default for QueueSharderPolicies {
    /// Curator's defaults: a new shard past 10,000 items in one, checked every 30 s, at most 10
    /// shards.
    fn default() -> Self {
        QueueSharderPolicies { new_queue_threshold: 10_000, threshold_check: Duration::from_secs(30), max_queues: 10 }
    }
}

impl QueueSharderPolicies {
    /// A shard with this many items or more makes the leader add one (and is no longer
    /// preferred for puts until it is down to half).
    pub fn new_queue_threshold(mut self, threshold: usize) -> Self {
        self.new_queue_threshold = threshold;
        self
    }

    /// How often the shards are counted.
    pub fn threshold_check(mut self, every: Duration) -> Self {
        self.threshold_check = every;
        self
    }

    /// The most shards the leader adds up to.
    pub fn max_queues(mut self, max: usize) -> Self {
        self.max_queues = max;
        self
    }
}

/// One logical queue spread over shards (Curator's `QueueSharder` over `DistributedQueue`s),
/// on Curator's layout: each shard a queue at `<queue_path>/queue-<uuid>` (persistent), and a
/// [`LeaderLatch`] at `leader_path` among the sharders, whose leader adds a shard when one
/// holds the threshold's number of items or more, up to the maximum. Every sharder counts the
/// shards' items on its schedule and hands out, for puts, a random shard among those under
/// the threshold (below half of it once they were over), or any when none is.
///
/// Shards are never removed (as in Curator): a consumer takes from every shard in
/// [`queue_paths`](Self::queue_paths).
#[derive(Debug)]
pub struct QueueSharder {
    shared: Arc<Shared>,
    latch: Arc<LeaderLatch>,
    task: Mutex<Option<AbortHandle>>,
}

#[derive(Debug)]
struct Shared {
    framework: Framework,
    queue_path: String,
    policies: QueueSharderPolicies,
    queues: Mutex<BTreeMap<String, DistributedQueue>>,
    preferred: Mutex<BTreeSet<String>>,
}

impl Drop for QueueSharder {
    fn drop(&mut self) {
        if let Some(task) = self.task.lock().take() {
            task.abort();
        }
    }
}

impl QueueSharder {
    /// A sharder of the queue at `queue_path` whose leader is elected at `leader_path`. Does
    /// no I/O.
    ///
    /// # Errors
    /// [`Error::InvalidPath`]; [`Error::InvalidArgument`] for a threshold, check interval or
    /// maximum of 0.
    pub fn new(
        framework: &Framework,
        queue_path: &str,
        leader_path: &str,
        policies: QueueSharderPolicies,
    ) -> Result<Self> {
        path::validate_recipe_path(queue_path)?;
        if policies.new_queue_threshold == 0 || policies.threshold_check.is_zero() || policies.max_queues == 0 {
            return Err(Error::invalid_argument("policies", "threshold, check interval and maximum must be above 0"));
        }
        // Curator's latch has no id; this one's is random (ids only tell candidates apart).
        let latch = Arc::new(LeaderLatch::new(framework, leader_path, &uuid::Uuid::new_v4().to_string())?);
        let shared = Shared {
            framework: framework.clone(),
            queue_path: queue_path.to_owned(),
            policies,
            queues: Mutex::default(),
            preferred: Mutex::default(),
        };
        Ok(QueueSharder { shared: Arc::new(shared), latch, task: Mutex::default() })
    }

    /// Creates the queue's node (a container), takes up the shards there are (adding one
    /// when there is none), joins the leader election and starts counting.
    ///
    /// # Errors
    /// A connection error the retry policy gave up on; the server's refusal;
    /// [`Error::NotInElection`] when closed; [`Error::InvalidArgument`] outside a Tokio
    /// runtime.
    ///
    /// # Cancel safety
    /// A cancelled start may have created the queue's node and a shard (as a finished one
    /// would); it has not joined the election.
    pub async fn start(&self) -> Result<()> {
        let shared = &self.shared;
        shared.framework.ensure_path(&shared.queue_path).await?;
        let children = shared.framework.get_children(&shared.queue_path).await?;
        for child in &children {
            shared.add_if_needed(&path::join(&shared.queue_path, child)).await?;
        }
        if children.is_empty() {
            shared.add_new().await?;
        }
        self.latch.start()?;
        let (shared, latch) = (self.shared.clone(), self.latch.clone());
        let task = tokio::spawn(async move {
            loop {
                tokio::time::sleep(shared.policies.threshold_check).await;
                if let Err(e) = shared.check_threshold(&latch).await {
                    tracing::warn!(path = %shared.queue_path, error = %e, "queue sharder: counting the shards failed");
                }
            }
        });
        if let Some(old) = self.task.lock().replace(task.abort_handle()) {
            old.abort();
        }
        Ok(())
    }

    /// A shard to put into: a random one among the preferred (under the threshold), or among
    /// all when none is (Curator's `getQueue`).
    ///
    /// # Errors
    /// [`Error::NotStarted`] before [`start`](Self::start) found a shard.
    pub fn queue(&self) -> Result<DistributedQueue> {
        let preferred: Vec<String> = self.shared.preferred.lock().iter().cloned().collect();
        let queues = self.shared.queues.lock();
        let pick = |keys: &[&String]| -> Option<DistributedQueue> {
            let i = (uuid::Uuid::new_v4().as_u128() % keys.len().max(1) as u128) as usize;
            keys.get(i).and_then(|k| queues.get(*k)).cloned()
        };
        let preferred: Vec<&String> = preferred.iter().filter(|p| queues.contains_key(*p)).collect();
        let all: Vec<&String> = queues.keys().collect();
        pick(&preferred).or_else(|| pick(&all)).ok_or(Error::NotStarted)
    }

    /// How many shards this sharder knows.
    pub fn shard_count(&self) -> usize {
        self.shared.queues.lock().len()
    }

    /// The shards' paths.
    pub fn queue_paths(&self) -> Vec<String> {
        self.shared.queues.lock().keys().cloned().collect()
    }

    /// Counts the shards now (what the schedule does every check interval), adding a shard
    /// if this sharder leads and one is over the threshold.
    ///
    /// # Errors
    /// A connection error the retry policy gave up on; the server's refusal.
    ///
    /// # Cancel safety
    /// A cancelled check may have added a shard.
    pub async fn check_now(&self) -> Result<()> {
        self.shared.check_threshold(&self.latch).await
    }

    /// True while this sharder leads (and so adds shards).
    pub fn is_leader(&self) -> bool {
        self.latch.is_leader()
    }

    /// Waits until no background put through the shards' queues handed out by
    /// [`queue`](Self::queue) is pending (Curator's `close()` flushes each shard's queue), as
    /// [`DistributedQueue::flush_puts`]: true once none is, false when some still were after
    /// `timeout`.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a zero timeout.
    ///
    /// # Cancel safety
    /// Cancel-safe: it only waits; the puts go on.
    pub async fn flush_puts(&self, timeout: Duration) -> Result<bool> {
        let deadline = deadline::of_wait(timeout)?;
        let queues: Vec<DistributedQueue> = self.shared.queues.lock().values().cloned().collect();
        for queue in queues {
            if !queue.flush_puts_until(deadline).await {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Stops counting and leaves the election; the shards stay. Background puts through its
    /// queues go on: [`flush_puts`](Self::flush_puts) first to wait for them.
    ///
    /// # Errors
    /// As [`LeaderLatch::close`].
    ///
    /// # Cancel safety
    /// As [`LeaderLatch::close`].
    pub async fn close(&self) -> Result<()> {
        if let Some(task) = self.task.lock().take() {
            task.abort();
        }
        self.latch.close().await
    }
}

impl Shared {
    /// Takes up the shard at `shard` (full path, namespace stripped) if it is new.
    async fn add_if_needed(&self, shard: &str) -> Result<()> {
        if self.queues.lock().contains_key(shard) {
            return Ok(());
        }
        let queue = DistributedQueue::new(&self.framework, shard)?;
        // The shard's node, persistent, as Curator's queue `start()` makes it.
        match self.framework.create(shard).await {
            Ok(_) | Err(Error::ZooKeeper(ZkError::NodeExists)) => {}
            Err(e) => return Err(e),
        }
        let added = self.queues.lock().insert(shard.to_owned(), queue).is_none();
        if added {
            self.preferred.lock().insert(shard.to_owned());
        }
        Ok(())
    }

    async fn add_new(&self) -> Result<()> {
        let shard = path::join(&self.queue_path, &format!("{SHARD_PREFIX}{}", uuid::Uuid::new_v4()));
        self.add_if_needed(&shard).await
    }

    async fn check_threshold(&self, latch: &LeaderLatch) -> Result<()> {
        let threshold = self.policies.new_queue_threshold;
        let mut add = false;
        for child in self.framework.get_children(&self.queue_path).await? {
            let shard = path::join(&self.queue_path, &child);
            self.add_if_needed(&shard).await?;
            let Some(stat) = self.framework.exists(&shard).await? else { continue };
            let items = usize::try_from(stat.num_children).unwrap_or(0);
            if items >= threshold {
                add = true;
                self.preferred.lock().remove(&shard);
            } else if items <= threshold / 2 {
                self.preferred.lock().insert(shard);
            }
        }
        if add && latch.is_leader() {
            if self.queues.lock().len() < self.policies.max_queues {
                tracing::info!(path = %self.queue_path, threshold, "queue sharder: adding a shard");
                self.add_new().await?;
            } else {
                tracing::warn!(path = %self.queue_path, max = self.policies.max_queues, "queue sharder: at the most shards");
            }
        }
        Ok(())
    }
}
