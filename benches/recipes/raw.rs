//! The raw floors: Curator's algorithms done with plain zookeeper-client calls, each call
//! awaited before the next unless a comment says otherwise.

use zk_recipes::zk::{self, Acls, CreateMode};

use crate::report::{BenchError, BenchResult};

fn ephemeral_sequential() -> zk::CreateOptions<'static> {
    CreateMode::EphemeralSequential.with_acls(Acls::anyone_all())
}

/// Curator's mutex algorithm, naively, with plain zookeeper-client calls: create an
/// ephemeral-sequential `lock-` node, list the children, hold if first, otherwise watch the
/// predecessor (getData watch), and list again when it changes. Every call is awaited before
/// the next is sent (no pipelining).
pub(crate) struct RawMutex {
    pub(crate) client: zk::Client,
    pub(crate) dir: String,
}

impl RawMutex {
    pub(crate) async fn create(&self) -> BenchResult<String> {
        let prefix = format!("{}/lock-", self.dir);
        let (_, sequence) = self.client.create(&prefix, &[], &ephemeral_sequential()).await?;
        Ok(format!("{prefix}{sequence}"))
    }

    /// The create with a getChildren sent right behind it (one round trip), as an uncontended
    /// acquire that must see the children to know it is first. Fails if it is not first.
    pub(crate) async fn create_listed(&self) -> BenchResult<String> {
        let prefix = format!("{}/lock-", self.dir);
        let options = ephemeral_sequential();
        let create = self.client.create(&prefix, &[], &options);
        let list = self.client.list_children(&self.dir);
        let (created, listed) = futures::join!(create, list);
        let node = format!("{prefix}{}", created?.1);
        let first = listed?.into_iter().min();
        if first.as_deref() != Some(&node[self.dir.len() + 1..]) {
            return Err(BenchError::Failed(format!("raw floor: {node} is not first; is the path in use?")));
        }
        Ok(node)
    }

    /// Returns the full path of the held node.
    pub(crate) async fn acquire(&self) -> BenchResult<String> {
        let node = self.create().await?;
        wait_until_first(&self.client, &self.dir, &node).await?;
        Ok(node)
    }
}

/// The wait loop of Curator's `LockInternals` for a mutex whose children are all `lock-<seq>`.
async fn wait_until_first(client: &zk::Client, dir: &str, node: &str) -> BenchResult<()> {
    let ours = &node[dir.len() + 1..];
    loop {
        let mut children = client.list_children(dir).await?;
        children.sort_unstable();
        let Some(index) = children.iter().position(|c| c == ours) else {
            return Err(BenchError::Failed(format!("raw floor: our node {node} vanished")));
        };
        if index == 0 {
            return Ok(());
        }
        let predecessor = format!("{dir}/{}", children[index - 1]);
        match client.get_and_watch_data(&predecessor).await {
            Ok((_, _, watcher)) => {
                watcher.changed().await;
            }
            Err(zk::Error::NoNode) => {}
            Err(e) => return Err(e.into()),
        }
    }
}

/// Curator's `InterProcessSemaphoreV2` algorithm with plain calls: take the internal mutex
/// (`<path>/locks`, as [`RawMutex`]), create the lease node (`<path>/leases/lease-`), list the
/// leases with a children watch until ours is among the first `max` (waiting for the watch
/// otherwise), release the internal mutex; the lease is released by deleting its node.
pub(crate) struct RawSemaphore {
    pub(crate) client: zk::Client,
    pub(crate) locks: RawMutex,
    pub(crate) leases: String,
    pub(crate) max: usize,
}

impl RawSemaphore {
    pub(crate) async fn acquire(&self) -> BenchResult<String> {
        let lock = self.locks.acquire().await?;
        let prefix = format!("{}/lease-", self.leases);
        let (_, sequence) = self.client.create(&prefix, &[], &ephemeral_sequential()).await?;
        let lease = format!("{prefix}{sequence}");
        let ours = &lease[self.leases.len() + 1..];
        loop {
            let (children, watcher) = self.client.list_and_watch_children(&self.leases).await?;
            if !children.iter().any(|c| c == ours) {
                return Err(BenchError::Failed(format!("raw floor: our lease {lease} vanished")));
            }
            if children.len() <= self.max {
                break;
            }
            watcher.changed().await;
        }
        self.client.delete(&lock, None).await?;
        Ok(lease)
    }
}

/// Curator's read-write lock algorithm, naively, with plain calls: create an
/// ephemeral-sequential `__READ__`/`__WRIT__` node, list the children and sort them by
/// sequence; a writer holds when first and otherwise watches its predecessor, a reader holds
/// when no writer is ahead and otherwise watches the first writer; list again when the watched
/// node changes. Every call awaited before the next; release = delete.
pub(crate) struct RawReadWrite {
    pub(crate) client: zk::Client,
    pub(crate) dir: String,
}

impl RawReadWrite {
    /// Returns the full path of the held node.
    pub(crate) async fn acquire(&self, write: bool) -> BenchResult<String> {
        let prefix = format!("{}/{}", self.dir, if write { "__WRIT__" } else { "__READ__" });
        let (_, sequence) = self.client.create(&prefix, &[], &ephemeral_sequential()).await?;
        let node = format!("{prefix}{sequence}");
        let ours = &node[self.dir.len() + 1..];
        // Every child here is `<marker><10 digits>`: the sequence is the sort key.
        let key = |name: &str| name.get(name.len().saturating_sub(10)..).unwrap_or(name).to_owned();
        loop {
            let mut children = self.client.list_children(&self.dir).await?;
            children.sort_by_key(|c| key(c));
            let Some(index) = children.iter().position(|c| c == ours) else {
                return Err(BenchError::Failed(format!("raw floor: our node {node} vanished")));
            };
            let blocker = if write {
                index.checked_sub(1)
            } else {
                children[..index].iter().position(|c| c.contains("__WRIT__"))
            };
            let Some(blocker) = blocker else { return Ok(node) };
            match self.client.get_and_watch_data(&format!("{}/{}", self.dir, children[blocker])).await {
                Ok((_, _, watcher)) => {
                    watcher.changed().await;
                }
                Err(zk::Error::NoNode) => {}
                Err(e) => return Err(e.into()),
            }
        }
    }
}
