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

/// An experiment, not Curator's algorithm: a waiter whose listing shows two or more nodes
/// ahead watches the node ahead *and* the one before it (both `exists` watches, sent
/// together) and lists again as soon as the one before it goes, while the node ahead holds;
/// a listing with one node ahead, whose deletion it already watches, then lets that deletion
/// alone hand it the lock. Every node ahead of ours was created before it, so the set ahead
/// only shrinks: a listing after our create that shows one node ahead, and that node gone,
/// leaves none. The listing is sent while the node ahead holds rather than after it let go,
/// so it is off the handoff's chain; it costs a request and an event more per cycle than
/// Curator's wait.
pub(crate) async fn acquire_two_ahead(raw: &RawMutex) -> BenchResult<String> {
    use futures::future::{BoxFuture, FutureExt as _};
    type Change = BoxFuture<'static, zk::WatchedEvent>;
    let node = raw.create().await?;
    let (client, dir) = (&raw.client, raw.dir.as_str());
    let ours = &node[dir.len() + 1..];
    // An `exists` watch: `None` if the node is gone already.
    let watch = |path: String| async move {
        match client.check_and_watch_stat(&path).await? {
            (None, _) => Ok::<_, BenchError>(None),
            (Some(_), watcher) => Ok(Some(watcher.changed().boxed())),
        }
    };
    // The node ahead whose deletion is watched already, and that watch.
    let mut watched: Option<(String, Change)> = None;
    loop {
        let mut children = client.list_children(dir).await?;
        children.sort_unstable();
        let Some(index) = children.iter().position(|c| c == ours) else {
            return Err(BenchError::Failed(format!("raw two-ahead: our node {node} vanished")));
        };
        if index == 0 {
            return Ok(node);
        }
        let ahead = format!("{dir}/{}", children[index - 1]);
        let kept = watched.take().filter(|(name, _)| *name == ahead).map(|(_, change)| change);
        if index == 1 {
            let change = match kept {
                Some(change) => change,
                None => match watch(ahead).await? {
                    None => return Ok(node),
                    Some(change) => change,
                },
            };
            if change.await.event_type == zk::EventType::NodeDeleted {
                return Ok(node);
            }
            continue;
        }
        let before = format!("{dir}/{}", children[index - 2]);
        let (ahead_change, before_change) = match kept {
            Some(change) => (Some(change), watch(before).await?),
            None => {
                let (a, b) = futures::join!(watch(ahead.clone()), watch(before));
                (a?, b?)
            }
        };
        let Some(mut ahead_change) = ahead_change else { continue };
        if let Some(before_change) = before_change {
            tokio::select! {
                _ = before_change => {}
                _ = &mut ahead_change => continue,
            }
        }
        watched = Some((ahead, ahead_change));
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
