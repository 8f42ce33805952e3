//! `SimpleDistributedQueue`: raw items as `qn-<sequence>` nodes, taken in name order.

use std::time::Duration;

use tokio::time::Instant;
use zookeeper_client::CreateMode;

use super::delete_taken;
use crate::deadline;
use crate::error::{Error, Result, ZkError};
use crate::framework::{Framework, OneshotWatch};
use crate::path;
use crate::protocol::SIMPLE_QUEUE_PREFIX;

/// A queue of raw items (Curator's `SimpleDistributedQueue`, same nodes: Rust and Java
/// producers and consumers share it). [`offer`](Self::offer) adds an item as a persistent
/// sequential node `<path>/qn-<sequence>`; consumers take items in name order, the one whose
/// delete succeeds getting it. The queue's node is a container: the server removes it once it
/// is empty, and it is made again as needed. A node under an item's name that has children of
/// its own cannot be deleted, so it is no item: consumers pass over it (Curator's `take` fails
/// on it, again on every call).
///
/// Delivery is at most once, as Curator's: an item is deleted before it is returned. Where
/// Curator silently drops an item whose delete was applied but whose reply was lost, this
/// queue reports [`Error::OutcomeUnknown`] naming the item's node.
///
/// ```no_run
/// # async fn example(fw: zk_recipes::Framework) -> zk_recipes::Result<()> {
/// use zk_recipes::SimpleDistributedQueue;
///
/// let queue = SimpleDistributedQueue::new(&fw, "/jobs/queue")?;
/// queue.offer(b"job-1").await?;
/// let job = queue.take().await?;
/// assert_eq!(job, b"job-1");
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct SimpleDistributedQueue {
    framework: Framework,
    path: String,
    item_prefix: String,
}

/// What one pass over the children found.
enum Pass {
    Item(Vec<u8>),
    Empty(Option<OneshotWatch>),
}

impl SimpleDistributedQueue {
    /// A queue at `path`. Does no I/O.
    ///
    /// # Errors
    /// [`Error::InvalidPath`] for an invalid path, the root or a path under `/zookeeper`.
    pub fn new(framework: &Framework, path: &str) -> Result<Self> {
        path::validate_recipe_path(path)?;
        let item_prefix = path::join(path, SIMPLE_QUEUE_PREFIX);
        Ok(SimpleDistributedQueue { framework: framework.clone(), path: path.to_owned(), item_prefix })
    }

    /// The queue's path.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// Adds an item (Curator's `offer`); returns its node's path.
    ///
    /// # Errors
    /// [`Error::TooLarge`] for an item over the request limit (nothing is sent);
    /// [`Error::OutcomeUnknown`] when the connection broke while the create was in flight (it
    /// is not sent again: that could add the item twice); the server's refusal; a connection
    /// error the retry policy gave up on.
    ///
    /// # Cancel safety
    /// A cancelled offer may still add the item.
    pub async fn offer(&self, item: &[u8]) -> Result<String> {
        let created =
            self.framework.create(&self.item_prefix).plain().mode(CreateMode::PersistentSequential).data(item).await?;
        Ok(created.path)
    }

    /// The first item without removing it (Curator's `peek`); `None` when the queue is empty.
    ///
    /// # Errors
    /// The server's refusal; a connection error the retry policy gave up on.
    ///
    /// # Cancel safety
    /// Cancel-safe: a read changes nothing.
    pub async fn peek(&self) -> Result<Option<Vec<u8>>> {
        for name in self.items().await? {
            match self.framework.get_data(&path::join(&self.path, &name)).plain().await {
                // No item (see `pass`).
                Ok((_, stat)) if stat.num_children > 0 => continue,
                Ok((data, _)) => return Ok(Some(data)),
                Err(Error::ZooKeeper(ZkError::NoNode)) => continue,
                Err(e) => return Err(e),
            }
        }
        Ok(None)
    }

    /// Removes and returns the first item (Curator's `poll`); `None` when the queue is empty.
    ///
    /// # Errors
    /// [`Error::OutcomeUnknown`] when the delete of an item broke mid-flight and the item then
    /// was gone: this consumer or another took it, and its bytes are not returned; the
    /// server's refusal; a connection error the retry policy gave up on.
    ///
    /// # Cancel safety
    /// A cancelled poll may have removed an item, which is then lost.
    pub async fn poll(&self) -> Result<Option<Vec<u8>>> {
        match self.pass(false).await? {
            Pass::Item(item) => Ok(Some(item)),
            Pass::Empty(_) => Ok(None),
        }
    }

    /// Removes and returns the first item, waiting for one (Curator's `take`).
    ///
    /// # Errors
    /// As [`poll`](Self::poll); [`Error::Closed`].
    ///
    /// # Cancel safety
    /// As [`poll`](Self::poll).
    pub async fn take(&self) -> Result<Vec<u8>> {
        self.take_until(None).await.map(|item| item.unwrap_or_default())
    }

    /// [`take`](Self::take) for at most `timeout` (Curator's `poll(timeout, unit)`); `None`
    /// when the time ran out.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a zero timeout; otherwise as [`take`](Self::take).
    ///
    /// # Cancel safety
    /// As [`poll`](Self::poll).
    pub async fn take_timeout(&self, timeout: Duration) -> Result<Option<Vec<u8>>> {
        self.take_until(Some(deadline::of_wait(timeout)?)).await
    }

    async fn take_until(&self, deadline: Option<Instant>) -> Result<Option<Vec<u8>>> {
        // A listing with a watch only once one without found nothing: a watch set by a listing
        // that then gave an item would be removed unfired, a request more per item.
        if let Pass::Item(item) = self.pass(false).await? {
            return Ok(Some(item));
        }
        loop {
            let watch = match self.pass(true).await? {
                Pass::Item(item) => return Ok(Some(item)),
                Pass::Empty(watch) => watch,
            };
            let Some(watch) = watch else { continue };
            let event = match deadline {
                None => watch.changed().await,
                Some(deadline) => match tokio::time::timeout_at(deadline, watch.changed()).await {
                    Ok(event) => event,
                    Err(_) => return Ok(None),
                },
            };
            if let Err(Error::Closed) = event {
                return Err(Error::Closed);
            }
        }
    }

    /// The item names, in Curator's order (plain string order of the whole name); a missing
    /// queue node is made again, as a container.
    async fn items(&self) -> Result<Vec<String>> {
        Ok(self.list(false).await?.0)
    }

    async fn list(&self, watch: bool) -> Result<(Vec<String>, Option<OneshotWatch>)> {
        let fw = &self.framework;
        let (mut names, watch) = loop {
            let listed = if watch {
                fw.get_children(&self.path).watch().await.map(|(names, _, w)| (names, Some(w)))
            } else {
                fw.get_children(&self.path).await.map(|names| (names, None))
            };
            match listed {
                Ok(listed) => break listed,
                Err(Error::ZooKeeper(ZkError::NoNode)) => {
                    // A container the server reaped once it was empty: make it again.
                    fw.ensure_containers(&fw.full_path(&self.path)?, true).await?;
                }
                Err(e) => return Err(e),
            }
        };
        names.retain(|n| n.starts_with(SIMPLE_QUEUE_PREFIX));
        names.sort();
        Ok((names, watch))
    }

    /// One pass: the first item this consumer manages to delete, or nothing (with a watch on
    /// the children when asked).
    async fn pass(&self, watch: bool) -> Result<Pass> {
        let (names, watch) = self.list(watch).await?;
        for name in names {
            let item = path::join(&self.path, &name);
            let data = match self.framework.get_data(&item).plain().await {
                // No item: a node with children cannot be deleted, so no consumer can take it.
                Ok((_, stat)) if stat.num_children > 0 => {
                    tracing::warn!(item, "queue: a node with children under an item's name is no item: passed over");
                    continue;
                }
                Ok((data, _)) => data,
                Err(Error::ZooKeeper(ZkError::NoNode)) => continue,
                Err(e) => return Err(e),
            };
            if delete_taken(&self.framework, &item, None).await? {
                return Ok(Pass::Item(data));
            }
        }
        Ok(Pass::Empty(watch))
    }
}
