//! Writes: set data and delete (with an expected version, guaranteed, recursive), `sync`, and
//! ACLs.
//!
//! A write is retried under the framework's retry policy. After a connection loss the first
//! send may have been applied: a versioned write that then finds another version reports
//! [`Error::OutcomeUnknown`] (the version it found may be its own work), and a delete that
//! then finds no node counts as done (the node is gone, which is what was asked).

use std::future::IntoFuture;
use std::sync::atomic::{AtomicBool, Ordering};

use futures::future::BoxFuture;
use zookeeper_client::{Acl, Stat};

use super::{Framework, ReaperCmd, SchemaOp};
use crate::error::{is_zk_connection_error, Error, Result, ZkError};
use crate::framework::metrics::Op;
use crate::path;
use crate::protocol::gzip;

/// An expected version as the server takes it: `-1` means any version; every other value is
/// compared with the node's. Versions below -1 are real: a node's version is a signed 32-bit
/// counter that wraps past `i32::MAX` (Curator's CURATOR-688), so refusing them would leave a
/// busy node impossible to write with a version.
fn check_version(version: i32) -> Option<i32> {
    (version != -1).then_some(version)
}

/// Passes `reply` on, noting in `in_doubt` a connection error (the request may have been
/// applied).
fn note_doubt<T>(in_doubt: &AtomicBool, reply: Result<T, ZkError>) -> Result<T, ZkError> {
    if matches!(&reply, Err(e) if is_zk_connection_error(e)) {
        in_doubt.store(true, Ordering::Relaxed);
    }
    reply
}

/// A write of a node's data (Curator's `setData()`), sent when awaited.
#[must_use = "a write does nothing until it is awaited"]
#[derive(Debug)]
pub struct SetData<'a> {
    framework: &'a Framework,
    path: &'a str,
    data: &'a [u8],
    version: i32,
    /// Gzip the data: `None` follows the framework's `enable_compression`.
    compress: Option<bool>,
}

/// A delete (Curator's `delete()`), sent when awaited.
#[must_use = "a delete does nothing until it is awaited"]
#[derive(Debug)]
pub struct Delete<'a> {
    framework: &'a Framework,
    path: &'a str,
    version: i32,
    guaranteed: bool,
    recursive: bool,
}

impl Framework {
    /// Writes a node's data when awaited, at any version unless `.version(v)` is given
    /// (compare-and-set).
    ///
    /// ```no_run
    /// # async fn example(fw: zk_recipes::Framework) -> zk_recipes::Result<()> {
    /// let (data, stat) = fw.get_data("/counter").await?;
    /// let next = (String::from_utf8_lossy(&data).parse::<u64>().unwrap_or(0) + 1).to_string();
    /// match fw.set_data("/counter", next.as_bytes()).version(stat.version).await {
    ///     Ok(_) => {}
    ///     Err(zk_recipes::Error::BadVersion { .. }) => { /* someone else wrote first: read again */ }
    ///     Err(e) => return Err(e),
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// When awaited: [`Error::InvalidPath`]; [`Error::TooLarge`]; [`Error::BadVersion`]; [`Error::OutcomeUnknown`] for a
    /// versioned write that found another version after a connection loss (perhaps its own
    /// first send); or the server's refusal (`NoNode`, `NoAuth`).
    ///
    /// # Cancel safety
    /// A cancelled write may still happen on the server.
    pub fn set_data<'a>(&'a self, path: &'a str, data: &'a [u8]) -> SetData<'a> {
        SetData { framework: self, path, data, version: -1, compress: None }
    }

    /// Deletes a node when awaited (any version unless `.version(v)`); `.guaranteed()` keeps
    /// trying in the background after a failure, `.recursive()` deletes its children first.
    /// A missing node is `NoNode`.
    ///
    /// # Errors
    /// When awaited: [`Error::InvalidPath`] (the root cannot be deleted);
    /// [`Error::BadVersion`]; or the server's refusal (`NoNode`, `NotEmpty` without
    /// `recursive`, `NoAuth`). After a connection
    /// loss, `NoNode` counts as done (the first send may have deleted it).
    ///
    /// # Cancel safety
    /// A cancelled delete may still happen on the server; a cancelled `guaranteed()` delete is
    /// finished by the reaper.
    pub fn delete<'a>(&'a self, path: &'a str) -> Delete<'a> {
        Delete { framework: self, path, version: -1, guaranteed: false, recursive: false }
    }

    /// Waits until the server this session talks to has caught up with the leader for `path`
    /// (Curator's `sync()`): a read after it sees every write committed before it began.
    ///
    /// # Errors
    /// [`Error::InvalidPath`] or the server's refusal.
    ///
    /// # Cancel safety
    /// Cancel-safe: a sync changes nothing.
    pub async fn sync(&self, path: &str) -> Result<()> {
        let full = self.full_path(path)?;
        let full = &full;
        self.with_retry(|s| async move {
            s.sent(Op::Sync);
            s.client.sync(full).await
        })
        .await
    }

    /// A node's ACL and stat (Curator's `getACL()`).
    ///
    /// # Errors
    /// [`Error::InvalidPath`] or the server's refusal (`NoNode`).
    ///
    /// # Cancel safety
    /// Cancel-safe: a read changes nothing.
    pub async fn get_acl(&self, path: &str) -> Result<(Vec<Acl>, Stat)> {
        let full = self.full_path(path)?;
        let full = &full;
        self.with_retry(|s| async move {
            s.sent(Op::GetAcl);
            s.client.get_acl(full).await
        })
        .await
    }

    /// Replaces a node's ACL (Curator's `setACL().withVersion(v)`); `acl_version` is the
    /// expected ACL version (`stat.aversion`), -1 for any.
    ///
    /// # Errors
    /// [`Error::InvalidPath`]; [`Error::InvalidArgument`] for an empty ACL; [`Error::TooLarge`]
    /// for an ACL (with the path) over the request size; [`Error::BadVersion`]; or the server's
    /// refusal (`NoNode`, `NoAuth`, `InvalidAcl`).
    ///
    /// # Cancel safety
    /// A cancelled write may still happen on the server.
    pub async fn set_acl(&self, path: &str, acl: &[Acl], acl_version: i32) -> Result<Stat> {
        let full = self.full_path(path)?;
        let version = check_version(acl_version);
        if acl.is_empty() {
            return Err(Error::invalid_argument("acl", "an ACL needs at least one entry"));
        }
        let acl_size = self.check_acl_size(acl)?;
        // xid, type, path length, ACL count, version: five 4-byte fields.
        let limit = self.config().max_request_bytes.saturating_sub(20 + acl_size);
        if full.len() > limit {
            return Err(Error::TooLarge { name: "path", size: full.len(), limit });
        }
        self.check_schema(path, SchemaOp::SetAcl(acl))?;
        let full = &full;
        match self
            .with_retry(|s| async move {
                s.sent(Op::SetAcl);
                s.client.set_acl(full, acl, version).await
            })
            .await
        {
            Err(Error::ZooKeeper(ZkError::BadVersion)) => {
                Err(Error::BadVersion { path: path.to_owned(), expected: acl_version })
            }
            other => other,
        }
    }
}

impl SetData<'_> {
    /// Writes only when the node is at `version` (`stat.version` from a read; -1 for any):
    /// otherwise [`Error::BadVersion`] (Curator's `withVersion`).
    pub fn version(mut self, version: i32) -> Self {
        self.version = version;
        self
    }

    /// Writes the data gzip-compressed (Curator's `setData().compressed()`); the request size
    /// is checked on the compressed bytes, and data over
    /// [`MAX_DECOMPRESSED`](crate::protocol::gzip::MAX_DECOMPRESSED) (64 MiB) before
    /// compression is refused with [`Error::TooLarge`] (no reader here would decompress it).
    pub fn compressed(mut self) -> Self {
        self.compress = Some(true);
        self
    }

    /// Writes the data as given even when the framework compresses by default
    /// ([`enable_compression`](crate::FrameworkBuilder::enable_compression); Curator 5.8's
    /// `uncompressed()`).
    pub fn uncompressed(mut self) -> Self {
        self.compress = Some(false);
        self
    }

    /// The recipes' own nodes keep Curator's uncompressed layouts whatever the framework's
    /// default.
    pub(crate) fn plain(self) -> Self {
        self.uncompressed()
    }

    async fn run(self) -> Result<Stat> {
        let fw = self.framework;
        let full = fw.full_path(self.path)?;
        fw.check_schema(self.path, SchemaOp::SetData(self.data))?;
        let version = check_version(self.version);
        let packed = match self.compress.unwrap_or(fw.config().compression) {
            true => Some(gzip::compress_for_write(self.data)?),
            false => None,
        };
        let data = packed.as_deref().unwrap_or(self.data);
        let limit = fw.config().max_request_bytes.saturating_sub(full.len() + 20);
        if data.len() > limit {
            return Err(Error::TooLarge { name: "data", size: data.len(), limit });
        }
        let full = &full;
        let in_doubt = AtomicBool::new(false);
        let result = fw
            .with_retry(|s| {
                let in_doubt = &in_doubt;
                s.sent(Op::SetData);
                async move { note_doubt(in_doubt, s.client.set_data(full, data, version).await) }
            })
            .await;
        match result {
            Err(Error::ZooKeeper(ZkError::BadVersion)) if in_doubt.load(Ordering::Relaxed) => {
                Err(Error::OutcomeUnknown {
                    operation: "set_data",
                    path: self.path.to_owned(),
                    error: ZkError::ConnectionLoss,
                })
            }
            Err(Error::ZooKeeper(ZkError::BadVersion)) => {
                Err(Error::BadVersion { path: self.path.to_owned(), expected: self.version })
            }
            other => other,
        }
    }
}

impl<'a> IntoFuture for SetData<'a> {
    type Output = Result<Stat>;
    type IntoFuture = BoxFuture<'a, Result<Stat>>;

    /// Sends the write.
    ///
    /// # Errors
    /// [`Error::InvalidPath`]; [`Error::TooLarge`]; [`Error::BadVersion`]; [`Error::OutcomeUnknown`] for a versioned
    /// write that found another version after a connection loss; or the server's refusal
    /// (`NoNode`, `NoAuth`).
    ///
    /// # Cancel safety
    /// A cancelled write may still happen on the server.
    fn into_future(self) -> Self::IntoFuture {
        Box::pin(self.run())
    }
}

impl Delete<'_> {
    /// Deletes only when the node is at `version` (-1 for any): otherwise
    /// [`Error::BadVersion`] (Curator's `withVersion`). With `recursive`, it applies to the
    /// node itself, not to its children.
    pub fn version(mut self, version: i32) -> Self {
        self.version = version;
        self
    }

    /// Curator's `guaranteed()`: when the delete fails for a reason retrying may cure
    /// (connection loss outlasting the retry policy), or the call is cancelled, the framework's
    /// background reaper keeps deleting the node for as long as the framework is open (after
    /// the session ends, through the next one, a node there that is not ephemeral: an
    /// ephemeral node went with its session, and one there then is another's); the error is still
    /// returned. Not combined with `recursive` children (their deletes are not handed over).
    pub fn guaranteed(mut self) -> Self {
        self.guaranteed = true;
        self
    }

    /// Deletes the node's children (and theirs) first (Curator's `deletingChildrenIfNeeded`).
    /// Children created meanwhile are deleted too, until the node is gone. A node that was
    /// there when its children were listed and is gone by its own delete counts as deleted
    /// (without `.version(v)`): a container node is reaped by the server once its last child
    /// goes, and Curator's recursive delete ignores that `NoNode` too. A node missing from the
    /// start is still `NoNode`.
    pub fn recursive(mut self) -> Self {
        self.recursive = true;
        self
    }

    async fn run(self) -> Result<()> {
        let fw = self.framework;
        let full = fw.full_path(self.path)?;
        fw.check_schema(self.path, SchemaOp::Delete)?;
        let version = check_version(self.version);
        if self.path == "/" {
            return Err(Error::InvalidPath { path: self.path.to_owned(), reason: "the root node cannot be deleted" });
        }
        let mut handover =
            self.guaranteed.then(|| Handover { framework: fw, path: full.clone(), version, armed: true });
        let mut retry = fw.retry_loop();
        let mut listed = false;
        let result = loop {
            if self.recursive {
                match self.delete_children(&full).await {
                    Ok(found) => listed |= found,
                    Err(e) => break Err(e),
                }
            }
            match self.delete_one(&full, version).await {
                // Children created meanwhile: again, under the retry policy.
                Err(Error::ZooKeeper(ZkError::NotEmpty)) if self.recursive && retry.backoff().await => continue,
                // Gone since we listed it (a container reaped after its last child, or another
                // client's delete): the subtree is gone, which is what was asked.
                Err(Error::ZooKeeper(ZkError::NoNode)) if listed && version.is_none() => break Ok(()),
                other => break other,
            }
        };
        if let Some(handover) = handover.as_mut() {
            // Only a failure that retrying may cure is left to the reaper.
            handover.armed = matches!(&result, Err(e) if e.is_retryable());
        }
        match result {
            Err(Error::ZooKeeper(ZkError::BadVersion)) => {
                Err(Error::BadVersion { path: self.path.to_owned(), expected: self.version })
            }
            other => other,
        }
    }

    /// Deletes one node; `NoNode` after a connection loss counts as done.
    async fn delete_one(&self, full: &str, version: Option<i32>) -> Result<()> {
        let in_doubt = AtomicBool::new(false);
        let result = self
            .framework
            .with_retry(|s| {
                let in_doubt = &in_doubt;
                s.sent(Op::Delete);
                async move { note_doubt(in_doubt, s.client.delete(full, version).await) }
            })
            .await;
        match result {
            Err(Error::ZooKeeper(ZkError::NoNode)) if in_doubt.load(Ordering::Relaxed) => Ok(()),
            other => other,
        }
    }

    /// Deletes every descendant of `full`, deepest first; nodes that went meanwhile are fine.
    /// Returns whether `full` itself was there to be listed.
    async fn delete_children(&self, full: &str) -> Result<bool> {
        let fw = self.framework;
        // Depth-first listing, then deletes from the end (children before their parents).
        let mut order = Vec::new();
        let mut top_listed = false;
        let mut stack = vec![full.to_owned()];
        while let Some(at) = stack.pop() {
            let listed = {
                let at = &at;
                fw.with_retry(|s| async move {
                    s.sent(Op::GetChildren);
                    s.client.list_children(at).await
                })
                .await
            };
            let children = match listed {
                Ok(children) => children,
                Err(Error::ZooKeeper(ZkError::NoNode)) => continue,
                Err(e) => return Err(e),
            };
            top_listed |= at == full;
            for child in children {
                let child = path::join(&at, &child);
                stack.push(child.clone());
                order.push(child);
            }
        }
        for node in order.iter().rev() {
            match self.delete_one(node, None).await {
                Ok(()) | Err(Error::ZooKeeper(ZkError::NoNode)) => {}
                // A child created meanwhile: the parent's delete finds it and goes round again.
                Err(Error::ZooKeeper(ZkError::NotEmpty)) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(top_listed)
    }
}

/// A guaranteed delete's hand-over to the reaper, when the call fails or is dropped.
struct Handover<'a> {
    framework: &'a Framework,
    path: String,
    /// The version the delete was asked for: the reaper's delete keeps to it.
    version: Option<i32>,
    armed: bool,
}

impl Drop for Handover<'_> {
    fn drop(&mut self) {
        if self.armed {
            let inner = self.framework;
            let epoch = inner.epoch();
            if epoch != 0 {
                tracing::debug!(node = %self.path, "guaranteed delete handed to the reaper");
                let path = std::mem::take(&mut self.path);
                let recipe = "framework";
                inner.reap(match self.version {
                    Some(version) => ReaperCmd::DeleteAt { path, version, epoch, recipe },
                    None => ReaperCmd::Delete { path, epoch, recipe },
                });
            }
        }
    }
}

impl<'a> IntoFuture for Delete<'a> {
    type Output = Result<()>;
    type IntoFuture = BoxFuture<'a, Result<()>>;

    /// Sends the delete(s).
    ///
    /// # Errors
    /// [`Error::InvalidPath`] (the root cannot be deleted); [`Error::BadVersion`]; or the
    /// server's refusal (`NoNode`, `NotEmpty` without `recursive`, `NoAuth`).
    ///
    /// # Cancel safety
    /// A cancelled delete may still happen on the server; a cancelled `guaranteed()` delete is
    /// finished by the reaper.
    fn into_future(self) -> Self::IntoFuture {
        Box::pin(self.run())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn minus_one_is_any_version_and_wrapped_versions_are_sent() {
        assert_eq!(check_version(-1), None);
        assert_eq!(check_version(0), Some(0));
        assert_eq!(check_version(i32::MAX), Some(i32::MAX));
        for wrapped in [-2, -100, i32::MIN] {
            assert_eq!(check_version(wrapped), Some(wrapped));
        }
    }
}
