//! [`PersistentTtlNode`]: a node that lives while its process does and for a TTL after it
//! dies (Curator's `PersistentTtlNode`, in its 5.4 layout).
//!
//! The node at the path is a container kept by a [`PersistentNode`] (not protected, data as
//! set). Below it a child (`touch` by default) is a persistent node with a TTL, which a task
//! touches (an unversioned `setData`; when the child is missing, a create with the TTL that
//! sets the data of a node found existing) every TTL / factor (factor 2 by default). While the
//! process touches, the child's modification time stays younger than its TTL and the container
//! has a child. When touching stops (the process died, the handle was dropped, the session and
//! every later one are gone), the server deletes the child once it is older than the TTL, and
//! then the empty container, each at its next container check
//! (`znode.container.checkIntervalMs`, one minute by default).
//!
//! Curator touches first one interval after start; this node touches as soon as the container
//! exists (and again whenever the container had to be created again), so the container always
//! gets its child: a container that never had one is never reaped by the server.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::MissedTickBehavior;
use zookeeper_client::CreateMode;

use crate::error::{Error, Result};
use crate::framework::{BackgroundErrorKind, Framework, Parents};
use crate::path;

use super::persistent::PersistentNode;

/// How long the toucher waits at a time for the container's first create, between checks of
/// its stop signal (a bound on nothing the caller sees).
const FIRST_CREATE_WAIT: Duration = Duration::from_secs(3600);

/// Options of a [`PersistentTtlNode`], from [`PersistentTtlNode::builder`].
#[must_use = "a builder does nothing until `start` is called"]
#[derive(Debug)]
pub struct PersistentTtlNodeBuilder {
    framework: Framework,
    path: String,
    ttl: Duration,
    data: Vec<u8>,
    child_name: String,
    touch_schedule_factor: u32,
    parents: Parents,
}

impl PersistentTtlNodeBuilder {
    /// The node's data (default none); the child's data is empty.
    pub fn data(mut self, data: impl Into<Vec<u8>>) -> Self {
        self.data = data.into();
        self
    }

    /// The name of the touched child (default [`PersistentTtlNode::DEFAULT_CHILD_NODE_NAME`], `touch`). Peers
    /// that share the node must agree on it.
    pub fn child_name(mut self, name: impl Into<String>) -> Self {
        self.child_name = name.into();
        self
    }

    /// The child is touched every TTL / `factor` (default
    /// [`PersistentTtlNode::DEFAULT_TOUCH_SCHEDULE_FACTOR`]);
    /// at least 2, so that one late touch does not let the child expire.
    pub fn touch_schedule_factor(mut self, factor: u32) -> Self {
        self.touch_schedule_factor = factor;
        self
    }

    /// How the node's missing parents are made (default: containers, as Curator's
    /// `useParentCreation`).
    pub fn parents(mut self, parents: Parents) -> Self {
        self.parents = parents;
        self
    }

    /// Starts the node and its toucher (Curator's `start()`); it returns at once.
    /// [`PersistentTtlNode::wait_for_initial_create`] waits for the node and its first touch.
    ///
    /// # Errors
    /// [`Error::InvalidPath`] for the path (also the root and `/zookeeper`),
    /// [`Error::InvalidArgument`] for a child name that is not one node name, a TTL below
    /// 2 ms or beyond the server's limit (2^40 - 1 ms), a factor below 2 or above the TTL in
    /// milliseconds, or a call outside a Tokio runtime (the toucher is a task);
    /// [`Error::Closed`]. Nothing is created then. A server without TTL nodes is found out by
    /// the first touch ([`Error::Unsupported`], from
    /// [`wait_for_initial_create`](PersistentTtlNode::wait_for_initial_create)).
    pub fn start(self) -> Result<PersistentTtlNode> {
        let runtime = crate::runtime::current("start")?;
        path::validate_recipe_path(&self.path)?;
        validate_child_name(&self.child_name)?;
        let interval = touch_interval(self.ttl, self.touch_schedule_factor)?;
        let child = format!("{}/{}", self.path, self.child_name);
        path::validate_recipe_path(&child)?;
        let node = PersistentNode::builder(&self.framework, &self.path)
            .mode(CreateMode::Container)
            .protected(false)
            .data(self.data)
            .parents(self.parents)
            .delete_when_dropped(false)
            .start()?;
        let node = Arc::new(node);
        let (status_tx, status_rx) = watch::channel(TouchStatus::default());
        let (stop_tx, stop_rx) = mpsc::unbounded_channel();
        let failure = Arc::new(Mutex::new(None));
        let toucher = Toucher {
            framework: self.framework.clone(),
            node: node.clone(),
            child: child.clone(),
            ttl: self.ttl,
            interval,
            status: status_tx,
            stop: stop_rx,
            failure: failure.clone(),
        };
        runtime.spawn(toucher.run());
        Ok(PersistentTtlNode {
            framework: self.framework,
            node,
            child,
            ttl: self.ttl,
            interval,
            status: status_rx,
            stop: stop_tx,
            failure,
        })
    }
}

/// What the toucher has done so far.
#[derive(Debug, Clone, Copy, Default)]
struct TouchStatus {
    /// The child has been touched (or created) at least once.
    touched: bool,
    /// The toucher has stopped (closed, or a refusal it cannot cure).
    stopped: bool,
}

/// A node kept while this process lives and for its TTL after (Curator's
/// `PersistentTtlNode`): a container at the path, kept by a [`PersistentNode`], with a child
/// that has the TTL and is touched every TTL / factor. The server needs
/// `zookeeper.extendedTypesEnabled=true`.
///
/// ```no_run
/// # async fn example(fw: zk_recipes::Framework) -> zk_recipes::Result<()> {
/// use std::time::Duration;
/// use zk_recipes::PersistentTtlNode;
///
/// let node = PersistentTtlNode::builder(&fw, "/workers/worker-7", Duration::from_secs(30))
///     .data(b"10.0.0.7:8080".to_vec())
///     .start()?;
/// node.wait_for_initial_create(Duration::from_secs(10)).await?;
/// // ... until shutdown; a crash leaves the node for at most the TTL and a container check.
/// node.close().await?;
/// # Ok(()) }
/// ```
///
/// [`close`](Self::close) deletes the child and the node at once. Dropping the handle without
/// `close` only stops touching: the server deletes the child once it is older than the TTL and
/// then the empty container, each at its next container check, which is what Curator's
/// `close()` does (it never deletes). A process that dies is the same case.
#[derive(Debug)]
pub struct PersistentTtlNode {
    framework: Framework,
    node: Arc<PersistentNode>,
    child: String,
    ttl: Duration,
    interval: Duration,
    status: watch::Receiver<TouchStatus>,
    stop: mpsc::UnboundedSender<oneshot::Sender<()>>,
    failure: Arc<Mutex<Option<Error>>>,
}

impl PersistentTtlNode {
    /// The touched child's default name (Curator's `DEFAULT_CHILD_NODE_NAME`).
    pub const DEFAULT_CHILD_NODE_NAME: &'static str = "touch";

    /// The default touch schedule factor (Curator's `DEFAULT_TOUCH_SCHEDULE_FACTOR`): the
    /// child is touched every TTL / 2.
    pub const DEFAULT_TOUCH_SCHEDULE_FACTOR: u32 = 2;

    /// Options for a node at `path` (namespace applied) with a TTL of `ttl`, touched by a
    /// child named `touch` every `ttl / 2` (Curator's defaults).
    pub fn builder(framework: &Framework, path: &str, ttl: Duration) -> PersistentTtlNodeBuilder {
        PersistentTtlNodeBuilder {
            framework: framework.clone(),
            path: path.to_owned(),
            ttl,
            data: Vec::new(),
            child_name: Self::DEFAULT_CHILD_NODE_NAME.to_owned(),
            touch_schedule_factor: Self::DEFAULT_TOUCH_SCHEDULE_FACTOR,
            parents: Parents::default(),
        }
    }

    /// The node's path (the container's).
    pub fn path(&self) -> &str {
        self.node.base_path()
    }

    /// The touched child's path.
    pub fn child_path(&self) -> &str {
        &self.child
    }

    /// The TTL given to the builder.
    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// How often the child is touched (TTL / factor).
    pub fn touch_interval(&self) -> Duration {
        self.interval
    }

    /// True while the node exists and is kept by this handle (as last seen by its task).
    pub fn is_registered(&self) -> bool {
        self.node.is_registered()
    }

    /// Follows [`is_registered`](Self::is_registered), as [`PersistentNode::registered`].
    pub fn registered(&self) -> watch::Receiver<bool> {
        self.node.registered()
    }

    /// Waits until the node has been created and its child touched the first time (Curator's
    /// `waitForInitialCreate` waits for the node only): true when both happened, false when
    /// `timeout` passed first.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a zero timeout; the refusal that stopped the node:
    /// [`Error::Unsupported`] when the server has no TTL nodes (`zookeeper.extendedTypesEnabled`
    /// is off; the node is deleted again), `NoAuth`, `NoNode` with [`Parents::MustExist`];
    /// [`Error::Closed`] when the node was closed first.
    ///
    /// # Cancel safety
    /// Cancel-safe: it only waits.
    pub async fn wait_for_initial_create(&self, timeout: Duration) -> Result<bool> {
        let deadline = crate::deadline::of_wait(timeout)?;
        let mut status = self.status.clone();
        let waited = tokio::time::timeout_at(deadline, status.wait_for(|s| s.touched || s.stopped)).await;
        match waited.map(|r| r.map(|s| *s)) {
            Err(_) => Ok(false),
            Ok(Ok(s)) if s.touched && !s.stopped => Ok(true),
            Ok(_) => Err(self.stop_reason()),
        }
    }

    /// Sets the node's data (unversioned), now and for every later re-create (Curator's
    /// `setData`), as [`PersistentNode::set_data`].
    ///
    /// # Errors
    /// As [`PersistentNode::set_data`]; the refusal that stopped the toucher, or
    /// [`Error::Closed`] after close.
    ///
    /// # Cancel safety
    /// Cancel-safe in the sense that the data is taken: a cancelled call may still write it.
    pub async fn set_data(&self, data: impl Into<Vec<u8>>) -> Result<()> {
        if self.status.borrow().stopped {
            return Err(self.stop_reason());
        }
        self.node.set_data(data).await
    }

    /// Stops touching and deletes the child and the node (each a guaranteed delete: after a
    /// failure the framework's reaper keeps deleting for as long as the framework is open; a node that
    /// holds other children is left to the server, which deletes an empty container). Later
    /// calls are `Ok`.
    ///
    /// The child is shared by every process that keeps the node at this path: where several
    /// do (Curator's `PersistentTtlNode`s or ours), closing one deletes it for all until the
    /// next touch of another makes it again, and a watcher sees the node go and come back.
    /// Drop the handle instead there (Curator's `close()`: touching stops, the node expires).
    ///
    /// # Errors
    /// A delete's error (the reaper still deletes the node).
    ///
    /// # Cancel safety
    /// Cancel-safe: once called, the toucher stops whether or not the call is awaited to the
    /// end; a cancelled call may leave the deletes undone, in which case the node expires as
    /// after a drop.
    pub async fn close(&self) -> Result<()> {
        let (tx, rx) = oneshot::channel();
        if self.stop.send(tx).is_ok() {
            // The toucher acknowledges once no touch is in flight (or it has already ended).
            let _ = rx.await;
        }
        let child = delete(&self.framework, &self.child).await;
        let node = match self.node.close().await {
            // Someone else's child keeps the container; the server deletes it once empty.
            Err(e) if e.is_not_empty() => Ok(()),
            other => other,
        };
        child.and(node)
    }

    fn stop_reason(&self) -> Error {
        match &*self.failure.lock().unwrap_or_else(|e| e.into_inner()) {
            Some(e) => super::persistent::copy_error(e),
            None => Error::Closed,
        }
    }
}

/// The child's name must be one node name.
fn validate_child_name(name: &str) -> Result<()> {
    if name.is_empty() || name.contains('/') || name == "." || name == ".." {
        return Err(Error::invalid_argument("child_name", format!("{name:?} is not one node name")));
    }
    Ok(())
}

/// The largest TTL a server accepts (ZooKeeper's `EphemeralType.TTL` keeps it in 40 bits of
/// milliseconds).
const MAX_TTL_MS: u128 = (1 << 40) - 1;

/// TTL / factor, refusing what cannot keep a child alive.
fn touch_interval(ttl: Duration, factor: u32) -> Result<Duration> {
    let ms = ttl.as_millis();
    if !(2..=MAX_TTL_MS).contains(&ms) {
        return Err(Error::invalid_argument("ttl", format!("{ttl:?} is not between 2 ms and 2^40 - 1 ms")));
    }
    if factor < 2 || u128::from(factor) > ms {
        return Err(Error::invalid_argument(
            "touch_schedule_factor",
            format!("{factor} is not between 2 and the TTL in milliseconds ({ms})"),
        ));
    }
    Ok(ttl / factor)
}

/// A guaranteed delete; a node already gone (or a closed framework) is fine.
async fn delete(fw: &Framework, path: &str) -> Result<()> {
    match fw.delete(path).guaranteed().await {
        Err(e) if e.is_no_node() => Ok(()),
        Err(Error::Closed) => Ok(()),
        other => other,
    }
}

/// The task that touches the child.
struct Toucher {
    framework: Framework,
    node: Arc<PersistentNode>,
    child: String,
    ttl: Duration,
    interval: Duration,
    status: watch::Sender<TouchStatus>,
    stop: mpsc::UnboundedReceiver<oneshot::Sender<()>>,
    failure: Arc<Mutex<Option<Error>>>,
}

impl Toucher {
    async fn run(mut self) {
        // The container first: the child is created in it, never with parents of its own.
        loop {
            tokio::select! {
                created = self.node.wait_for_initial_create(FIRST_CREATE_WAIT) => match created {
                    Ok(true) => break,
                    Ok(false) => continue,
                    Err(e) => return self.fail(e).await,
                },
                stop = self.stop.recv() => return self.finish(stop),
            }
        }
        let mut registered = self.node.registered();
        let mut ticks = tokio::time::interval(self.interval);
        ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
        loop {
            match self.touch().await {
                Ok(()) => {
                    self.status.send_if_modified(|s| !std::mem::replace(&mut s.touched, true));
                }
                // No TTL nodes on this server, or the framework closed: touching cannot go on.
                Err(e @ (Error::Unsupported { .. } | Error::Closed)) => return self.fail(e).await,
                Err(e) => tracing::debug!(path = %self.child, error = %e, "ttl node: touch failed"),
            }
            // Every interval, and at once when the container has been created again (its new
            // incarnation must get a child, or the server never reaps it).
            loop {
                tokio::select! {
                    _ = ticks.tick() => break,
                    changed = registered.changed() => {
                        if changed.is_err() {
                            return self.finish(None);
                        }
                        if *registered.borrow_and_update() {
                            ticks.reset();
                            break;
                        }
                    }
                    stop = self.stop.recv() => return self.finish(stop),
                }
            }
        }
    }

    /// One touch (Curator's): set the child's data; when it is missing, create it with the
    /// TTL (setting the data of a node that appeared meanwhile). A missing container is left
    /// to its [`PersistentNode`], the next touch creates the child.
    async fn touch(&self) -> Result<()> {
        let fw = &self.framework;
        match fw.set_data(&self.child, b"").plain().await {
            Ok(_) => return Ok(()),
            Err(e) if e.is_no_node() => {}
            Err(e) => return Err(e),
        }
        fw.create(&self.child)
            .plain()
            .mode(CreateMode::Persistent)
            .ttl(self.ttl)
            .or_set()
            .parents(Parents::MustExist)
            .await
            .map(|_| ())
    }

    /// A refusal that touching again cannot cure: the node is deleted (its container would
    /// never get a child, and a container that never had one is never reaped) and the
    /// refusal kept for the handle.
    async fn fail(self, e: Error) {
        if e.is_closed() {
            tracing::debug!(path = %self.child, "ttl node: the framework closed; touching stops");
        } else {
            tracing::warn!(path = %self.child, error = %e, "ttl node: stopped by a refusal");
            let (kind, full) = (BackgroundErrorKind::NodeNotRecreated, self.framework.fix_path(&self.child));
            self.framework.observer().error_ref("persistent_ttl_node", kind, &full, &e);
        }
        *self.failure.lock().unwrap_or_else(|e| e.into_inner()) = Some(e);
        let _ = self.node.close().await;
        self.status.send_modify(|s| s.stopped = true);
    }

    /// Stopped by the handle: acknowledges a close (no touch is in flight any more).
    fn finish(self, stop: Option<oneshot::Sender<()>>) {
        self.status.send_modify(|s| s.stopped = true);
        if let Some(ack) = stop {
            let _ = ack.send(());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_touch_interval_is_the_ttl_over_the_factor() {
        assert_eq!(touch_interval(Duration::from_secs(10), 2).unwrap(), Duration::from_secs(5));
        assert_eq!(touch_interval(Duration::from_millis(900), 3).unwrap(), Duration::from_millis(300));
        assert!(touch_interval(Duration::from_millis(1), 2).unwrap_err().is_invalid_argument());
        assert!(touch_interval(Duration::ZERO, 2).unwrap_err().is_invalid_argument());
        assert!(touch_interval(Duration::from_secs(10), 1).unwrap_err().is_invalid_argument());
        assert!(touch_interval(Duration::from_millis(5), 6).unwrap_err().is_invalid_argument());
        assert!(touch_interval(Duration::from_millis(1 << 40), 2).unwrap_err().is_invalid_argument());
    }

    #[test]
    fn the_child_is_one_node_name() {
        assert!(validate_child_name("touch").is_ok());
        for bad in ["", "a/b", "/touch", ".", ".."] {
            assert!(validate_child_name(bad).unwrap_err().is_invalid_argument(), "{bad:?}");
        }
    }
}
