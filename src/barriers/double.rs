//! `DistributedDoubleBarrier`: members enter together once enough have arrived, and leave
//! together once all have left.

use std::time::Duration;

use tokio::time::Instant;
use zookeeper_client::CreateMode;

use futures::FutureExt;

use super::wake;
use crate::deadline;
use crate::error::{Error, Result, ZkError};
use crate::framework::{Framework, NodeEventKind, Parents, ReaperCmd};
use crate::path;
use crate::protocol::READY_NODE;

/// A double barrier (Curator's `DistributedDoubleBarrier`, same nodes): [`enter`](Self::enter)
/// waits until `member_quantity` members have entered, and [`leave`](Self::leave) waits until
/// every member has left.
///
/// Under the barrier's path each member has an ephemeral node named by a random UUID chosen
/// when the handle is made, and the member that completes the group creates the persistent
/// `ready` node that lets everyone in. A member whose session ends loses its node: before
/// `ready` it no longer counts toward the quantity, and while members leave it counts as
/// having left. Unlike Curator 5.4: a timed `enter` re-checks the count after every wake-up
/// (Curator's may return true early), an `enter` that times out or fails deletes its
/// member node, so later arrivals do not count a member that gave up, and a member that has
/// left keeps waiting while the lowest member's node is the one left (Curator's returns once
/// a single node is left, whoever's it is).
///
/// ```no_run
/// # async fn example(fw: zk_recipes::Framework) -> zk_recipes::Result<()> {
/// use zk_recipes::DistributedDoubleBarrier;
///
/// let round = DistributedDoubleBarrier::new(&fw, "/jobs/round-7", 3)?;
/// round.enter().await?; // all three start together
/// // ... work ...
/// round.leave().await?; // and finish together
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct DistributedDoubleBarrier {
    framework: Framework,
    path: String,
    member_quantity: usize,
    our_path: String,
    ready_path: String,
}

impl DistributedDoubleBarrier {
    /// A double barrier at `path` for `member_quantity` members (Curator's `memberQty`, an
    /// `int`). Does no I/O.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a quantity below 1; [`Error::InvalidPath`] for an
    /// invalid path, the root or a path under `/zookeeper`.
    pub fn new(framework: &Framework, path: &str, member_quantity: i32) -> Result<Self> {
        path::validate_recipe_path(path)?;
        let member_quantity = usize::try_from(member_quantity)
            .ok()
            .filter(|&q| q >= 1)
            .ok_or_else(|| Error::invalid_argument("member_quantity", format!("{member_quantity} is below 1")))?;
        let our_path = path::join(path, &uuid::Uuid::new_v4().to_string());
        let ready_path = path::join(path, READY_NODE);
        Ok(DistributedDoubleBarrier {
            framework: framework.clone(),
            path: path.to_owned(),
            member_quantity,
            our_path,
            ready_path,
        })
    }

    /// The barrier's path.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// This member's node (`<path>/<uuid>`).
    pub fn member_path(&self) -> &str {
        &self.our_path
    }

    /// Enters and waits until `member_quantity` members have (Curator's `enter()`).
    ///
    /// # Errors
    /// `NodeExists` when this handle has entered already; [`Error::LockLost`] when the member
    /// node went away while waiting (the session ended: enter again), also when the group
    /// completed meanwhile; [`Error::Closed`]; the server's refusal; a connection error the
    /// retry policy gave up on (the member node is deleted).
    ///
    /// # Cancel safety
    /// Cancel-safe: a cancelled enter has its member node deleted in the background.
    pub async fn enter(&self) -> Result<()> {
        self.enter_until(None).await.map(drop)
    }

    /// [`enter`](Self::enter) for at most `timeout`: true when the group is complete, false
    /// when the time ran out (the member node is then deleted). A member that another one
    /// counted to complete the group just as its time ran out (`ready` was made before its
    /// delete reached the server) is in the group: true, and its node is made again for the
    /// leave. (Curator 5.4 leaves a timed-out member's node in place, so the others may count
    /// a member that gave up; this one withdraws unless it was counted.)
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a zero timeout; otherwise as [`enter`](Self::enter).
    ///
    /// # Cancel safety
    /// Cancel-safe, as [`enter`](Self::enter).
    pub async fn enter_timeout(&self, timeout: Duration) -> Result<bool> {
        let deadline = deadline::of_wait(timeout)?;
        self.enter_until(Some(deadline)).await
    }

    async fn enter_until(&self, deadline: Option<Instant>) -> Result<bool> {
        let fw = &self.framework;
        let (ready, mut watch) = fw.exists(&self.ready_path).watch().await?;
        let mut undo = Undo { framework: fw, path: Some(fw.fix_path(&self.our_path)) };
        let created = fw.create(&self.our_path).plain().mode(CreateMode::Ephemeral).parents(Parents::Containers).await;
        if let Err(e) = created {
            if e.is_node_exists() {
                undo.path = None; // an earlier enter's node: not ours to delete here
            }
            return Err(e);
        }
        if ready.is_some() {
            undo.path = None;
            return Ok(true);
        }
        let our_name = path::node_name(&self.our_path);
        loop {
            let members = fw.get_children(&self.path).await?;
            if !members.iter().any(|m| m == our_name) {
                // Our session ended (or someone deleted the node): we are no member any more.
                undo.path = None;
                return Err(Error::LockLost { path: self.our_path.clone() });
            }
            if members.len() >= self.member_quantity {
                match fw.create(&self.ready_path).plain().parents(Parents::MustExist).await {
                    Ok(_) | Err(Error::ZooKeeper(ZkError::NodeExists)) | Err(Error::OutcomeUnknown { .. }) => {}
                    Err(e) => return Err(e),
                }
                undo.path = None;
                return Ok(true);
            }
            let changed = watch.changed();
            let mut changed = std::pin::pin!(changed);
            let woke = match deadline {
                None => Some(changed.as_mut().await),
                Some(deadline) => tokio::time::timeout_at(deadline, changed.as_mut()).await.ok(),
            };
            match woke {
                Some(Err(Error::Closed)) => return Err(Error::Closed),
                Some(_) => {}
                None => {
                    // The time ran out: withdraw. A member may have counted us and made `ready`
                    // meanwhile; then the watch on `ready`, still armed, has fired by the time our
                    // delete is answered (the server sends a session its watch events and its
                    // replies in the order of the changes), and we are in the group after all:
                    // our node is made again, for the leave to count.
                    self.delete_ours().await?;
                    undo.path = None;
                    let ready_came = changed
                        .as_mut()
                        .now_or_never()
                        .is_some_and(|event| event.is_ok_and(|e| e.kind == NodeEventKind::Created));
                    if !ready_came {
                        return Ok(false);
                    }
                    undo.path = Some(fw.fix_path(&self.our_path));
                    let again =
                        fw.create(&self.our_path).plain().mode(CreateMode::Ephemeral).parents(Parents::MustExist);
                    let entered = match again.await {
                        Ok(_) => true,
                        // Everyone left already, and the barrier's node went with them.
                        Err(Error::ZooKeeper(ZkError::NoNode)) => false,
                        Err(e) => return Err(e),
                    };
                    undo.path = None;
                    return Ok(entered);
                }
            }
            let (ready, next) = fw.exists(&self.ready_path).watch().await?;
            if ready.is_some() {
                undo.path = None;
                // Woken by our session's end, we may find `ready` made without our node, or
                // counting a node that went with the session: our node must still be there,
                // looked for after `ready` (a node there now was there when `ready` was made).
                if fw.exists(&self.our_path).await?.is_none() {
                    return Err(Error::LockLost { path: self.our_path.clone() });
                }
                return Ok(true);
            }
            watch = next;
        }
    }

    /// Leaves and waits until every member has (Curator's `leave()`): every member but the
    /// lowest-named deletes its node and waits for the lowest's to go (however it wakes up
    /// meanwhile); the lowest waits until it is the last and deletes its own. The last one out
    /// deletes `ready`.
    ///
    /// # Errors
    /// [`Error::LockLost`] when this member's node is gone before it left (its session
    /// ended); [`Error::Closed`]; the server's refusal; a connection error the retry policy
    /// gave up on.
    ///
    /// # Cancel safety
    /// Cancel-safe in that nothing is left half-written: the member node is either still there
    /// (leave again) or deleted (it has left).
    pub async fn leave(&self) -> Result<()> {
        self.leave_until(None).await.map(drop)
    }

    /// [`leave`](Self::leave) for at most `timeout`: true when everyone has left, false when
    /// the time ran out.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a zero timeout; otherwise as [`leave`](Self::leave).
    ///
    /// # Cancel safety
    /// As [`leave`](Self::leave).
    pub async fn leave_timeout(&self, timeout: Duration) -> Result<bool> {
        let deadline = deadline::of_wait(timeout)?;
        self.leave_until(Some(deadline)).await
    }

    async fn leave_until(&self, deadline: Option<Instant>) -> Result<bool> {
        let fw = &self.framework;
        let our_name = path::node_name(&self.our_path);
        let mut ours_exists = true;
        let left = loop {
            let mut children = match fw.get_children(&self.path).await {
                Ok(children) => children,
                Err(Error::ZooKeeper(ZkError::NoNode)) => Vec::new(),
                Err(e) => return Err(e),
            };
            children.retain(|c| c != READY_NODE);
            children.sort();
            if children.is_empty() {
                break true;
            }
            let ours = children.iter().position(|c| c == our_name);
            if ours.is_none() && ours_exists {
                return Err(Error::LockLost { path: self.our_path.clone() });
            }
            // Ours alone: the last one out. Another member's node alone is the lowest's, which
            // we wait for even after a wake-up for another reason (our session's end).
            if children.len() == 1 && ours == Some(0) {
                self.delete_ours().await?;
                break true;
            }
            let (stat, watch) = if ours == Some(0) {
                let highest = path::join(&self.path, &children[children.len() - 1]);
                fw.exists(&highest).watch().await?
            } else {
                let lowest = path::join(&self.path, &children[0]);
                let watched = fw.exists(&lowest).watch().await?;
                if ours_exists {
                    self.delete_ours().await?;
                    ours_exists = false;
                }
                watched
            };
            if stat.is_some() && !wake(watch, deadline).await? {
                break false;
            }
        };
        match fw.delete(&self.ready_path).await {
            Ok(()) | Err(Error::ZooKeeper(ZkError::NoNode)) => Ok(left),
            Err(e) => Err(e),
        }
    }

    async fn delete_ours(&self) -> Result<()> {
        match self.framework.delete(&self.our_path).await {
            Ok(()) | Err(Error::ZooKeeper(ZkError::NoNode)) => Ok(()),
            Err(e) => Err(e),
        }
    }
}

/// Deletes the member node in the background unless disarmed: an enter that timed out,
/// failed or was cancelled leaves no member behind.
struct Undo<'a> {
    framework: &'a Framework,
    /// The full path to delete; `None` when disarmed.
    path: Option<String>,
}

impl Drop for Undo<'_> {
    fn drop(&mut self) {
        if let Some(path) = self.path.take() {
            let inner = &self.framework;
            let epoch = inner.epoch();
            if epoch != 0 {
                inner.reap(ReaperCmd::Delete { path, epoch, recipe: "double_barrier" });
            }
        }
    }
}
