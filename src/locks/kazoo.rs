//! kazoo's lock (the Python client's `Lock`), on its own layout, for the kazoo recipes that
//! take one (`NonBlockingLease`, `SetPartitioner`): `<path>/<uuid hex>__lock__<sequence>`,
//! ephemeral, the contender's identifier as data; the holder is the contender no other has a
//! lower sequence than (compared as text), and a waiter watches the contender just before it.
//! Not reentrant, no fast path, no mirror: kazoo and this crate take turns on the same nodes.

use tokio::time::Instant;

use crate::error::{Error, Result, ZkError};
use crate::framework::node::{CreatedNode, PendingCreate};
use crate::framework::Framework;
use crate::path;
use crate::protocol::kazoo::{lock_predecessor, KAZOO_LOCK_NAME};
use zookeeper_client::CreateMode;

/// How many fresh contender nodes an acquire makes after creates whose outcome was unknown
/// (their nodes are deleted in the background) before it reports the error.
const UNKNOWN_CREATES: u32 = 3;

/// A kazoo lock at one path.
#[derive(Debug, Clone)]
pub(crate) struct KazooLock {
    framework: Framework,
    path: String,
    full_dir: String,
}

/// A held kazoo lock: dropping it deletes the contender node (sent at once on its session,
/// seen through by the reaper).
#[derive(Debug)]
#[must_use = "dropping the hold releases the lock"]
pub(crate) struct KazooHold {
    /// Kept for its `Drop`, which deletes the node.
    _node: CreatedNode,
}

impl KazooLock {
    pub(crate) fn new(framework: &Framework, path: &str) -> Result<Self> {
        let full_dir = framework.full_path(path)?;
        Ok(KazooLock { framework: framework.clone(), path: path.to_owned(), full_dir })
    }

    /// Takes the lock, waiting until `deadline` (`None`: as long as it takes; a deadline in
    /// the past: not at all). `None` when the deadline passed first; the contender node is
    /// then deleted. A contender whose node went with its session starts again with a new
    /// node.
    ///
    /// Cancel-safe: a cancelled acquire leaves no node behind (deleted in the background).
    pub(crate) async fn acquire(&self, data: &[u8], deadline: Option<Instant>) -> Result<Option<KazooHold>> {
        let fw = &self.framework;
        fw.ensure_persistent(&self.full_dir, true).await?;
        let mut unknown = 0;
        loop {
            let prefix = format!("{}{KAZOO_LOCK_NAME}", uuid::Uuid::new_v4().simple());
            let pending = PendingCreate::new(fw, fw.epoch(), &self.full_dir, prefix.clone(), "", "kazoo_lock");
            let create =
                fw.create(&path::join(&self.path, &prefix)).mode(CreateMode::EphemeralSequential).data(data).await;
            let created = match create {
                Ok(created) => created,
                Err(e @ Error::OutcomeUnknown { .. }) => {
                    unknown += 1;
                    if unknown >= UNKNOWN_CREATES {
                        return Err(e);
                    }
                    continue; // `pending` deletes a node the create may have made
                }
                Err(e) => return Err(e),
            };
            let name = created.path.rsplit('/').next().unwrap_or_default().to_owned();
            let node = pending.named_for_owner(name, created.stat.czxid, created.stat.ephemeral_owner);
            match self.wait(node, deadline).await? {
                Wait::Held(hold) => return Ok(Some(hold)),
                Wait::TimedOut => return Ok(None),
                Wait::NodeGone => continue,
            }
        }
    }

    async fn wait(&self, node: CreatedNode, deadline: Option<Instant>) -> Result<Wait> {
        let fw = &self.framework;
        loop {
            // A node of a session the framework gave up holds nothing, though the server may
            // list it until that session expires.
            if fw.epoch() != node.epoch() {
                return Ok(Wait::NodeGone);
            }
            let children = fw.get_children(&self.path).await?;
            if !children.iter().any(|c| c == node.name()) {
                return Ok(Wait::NodeGone);
            }
            let Some(predecessor) = lock_predecessor(&children, node.name()) else {
                return Ok(Wait::Held(KazooHold { _node: node }));
            };
            if deadline.is_some_and(|d| d <= Instant::now()) {
                return Ok(Wait::TimedOut);
            }
            let (stat, watch) = match fw.exists(&path::join(&self.path, predecessor)).watch().await {
                Ok(found) => found,
                Err(Error::ZooKeeper(ZkError::NoNode)) => continue,
                Err(e) => return Err(e),
            };
            if stat.is_none() {
                continue;
            }
            let event = match deadline {
                None => watch.changed().await,
                Some(deadline) => match tokio::time::timeout_at(deadline, watch.changed()).await {
                    Ok(event) => event,
                    Err(_) => return Ok(Wait::TimedOut),
                },
            };
            // A watch whose session ended counts as an event: the listing tells what is left.
            if let Err(Error::Closed) = event {
                return Err(Error::Closed);
            }
        }
    }
}

enum Wait {
    Held(KazooHold),
    TimedOut,
    NodeGone,
}
