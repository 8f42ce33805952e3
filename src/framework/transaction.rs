//! Transactions ([`Framework::transaction`]): creates, writes, deletes and version checks
//! committed all-or-nothing in one `multi` request, operations made apart ([`TransactionOp`]),
//! and fenced writes ([`Fence`]).

use std::time::Duration;

use zookeeper_client::{Acl, Acls, CreateMode, MultiWriteError, MultiWriteResult, Stat};

use super::{Framework, SchemaOp};
use crate::error::{is_zk_connection_error, Error, Result, ZkError};
use crate::framework::metrics::Op as Sent;

/// Something that holds a lock node and can fence writes with it: every lock guard, semaphore
/// lease and leadership term. A transaction [`fenced_by`](Transaction::fenced_by) it starts
/// with a check that the node still exists, so the whole transaction fails on the server
/// ([`Error::LockLost`]) once the lock is lost, however late the write comes (after a long
/// pause, a partition, an expired session).
///
/// The check is of the node's existence (version -1), not of its creation version 0: a
/// revocation request writes `__REVOKE__` into the holder's node, which raises its version
/// while the lock is still held. Existence is as strong a proof: the node's name carries a
/// fresh uuid and a sequence number, so no other holder's node can have it, and an ephemeral
/// node exists only while its session lives.
///
/// The path is the node's path with the namespace stripped, so fence a transaction of the
/// framework (or a framework with the same namespace) the guard was taken with.
pub trait Fence {
    /// The lock node's path (namespace stripped) and the version its check expects (-1: any).
    fn fence_node(&self) -> (&str, i32);

    /// A transaction on `framework` fenced by this lock node:
    /// `framework.transaction().fenced_by(self)`.
    fn fenced_transaction<'a>(&self, framework: &'a Framework) -> Transaction<'a>
    where
        Self: Sized,
    {
        framework.transaction().fenced_by(self)
    }
}

/// What one operation of a committed transaction did, in the order they were added.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum OpResult {
    /// A create: the node's path (namespace stripped, with its sequence number when
    /// sequential) and stat. On ZooKeeper 3.8.0 and 3.7.0/3.7.1 the server sends an invalid
    /// stat here (all fields -1; ZOOKEEPER-4026): read the node for it.
    Created {
        /// The node's path.
        path: String,
        /// Its stat (see above).
        stat: Stat,
    },
    /// A data write: the node's new stat.
    DataSet {
        /// The node's stat after the write.
        stat: Stat,
    },
    /// A delete.
    Deleted,
    /// A version check (a fence's too).
    Checked,
}

#[derive(Debug, Clone)]
enum Op {
    Create { path: String, data: Vec<u8>, mode: CreateMode, ttl: Option<Duration>, acl: Option<Vec<Acl>> },
    SetData { path: String, data: Vec<u8>, version: i32 },
    Delete { path: String, version: i32 },
    Check { path: String, version: i32, fence: bool },
}

impl Op {
    fn path(&self) -> &str {
        match self {
            Op::Create { path, .. } | Op::SetData { path, .. } | Op::Delete { path, .. } | Op::Check { path, .. } => {
                path
            }
        }
    }
}

/// One operation made apart from a transaction (Curator's `CuratorOp`): a typed node's
/// `create_op`, `update_op`, `delete_op` or `check_exists_op` (`ModeledFramework`, feature
/// `serde`), with its bytes already encoded. Add it to a transaction with
/// [`Transaction::add_op`], among untyped operations, or commit several with
/// `ModeledFramework::in_transaction`.
///
/// Its path is namespace-stripped, as every path given to a framework: it is taken in the
/// namespace of the transaction it is added to, so add it to a transaction of the framework it
/// was made with (or of one with the same namespace).
#[derive(Debug, Clone)]
pub struct TransactionOp(Op);

impl TransactionOp {
    /// The node's path (namespace stripped).
    pub fn path(&self) -> &str {
        self.0.path()
    }
}

#[cfg(feature = "serde")]
impl TransactionOp {
    pub(crate) fn create(
        path: String,
        data: Vec<u8>,
        mode: CreateMode,
        ttl: Option<Duration>,
        acl: Option<Vec<Acl>>,
    ) -> Self {
        TransactionOp(Op::Create { path, data, mode, ttl, acl })
    }

    pub(crate) fn set_data(path: String, data: Vec<u8>, version: i32) -> Self {
        TransactionOp(Op::SetData { path, data, version })
    }

    pub(crate) fn delete(path: String, version: i32) -> Self {
        TransactionOp(Op::Delete { path, version })
    }

    pub(crate) fn check(path: String, version: i32) -> Self {
        TransactionOp(Op::Check { path, version, fence: false })
    }
}

/// Operations committed together in one `multi` request (Curator's `transaction()`): either
/// all are applied or none. Paths are namespaced; creates get the ACL provider's ACL. Add
/// operations, then [`commit`](Self::commit).
///
/// A write, delete or check expects any version unless [`version`](Self::version) follows it
/// (Curator's `withVersion(v)`), as on the framework's own
/// [`set_data`](crate::Framework::set_data) and [`delete`](crate::Framework::delete).
///
/// ```no_run
/// # async fn example(fw: zk_recipes::Framework, guard: zk_recipes::MutexGuard) -> zk_recipes::Result<()> {
/// use zk_recipes::zk::CreateMode;
///
/// let results = guard
///     .fenced_transaction(&fw)
///     .set_data("/jobs/42/state", b"done")
///     .check("/jobs/42").version(3) // compare-and-set: only at version 3
///     .create("/jobs/42/result", b"ok", CreateMode::Persistent)
///     .commit()
///     .await?; // Err(LockLost) once the guard's node is gone
/// # Ok(()) }
/// ```
#[must_use = "a transaction does nothing until committed"]
#[derive(Debug)]
pub struct Transaction<'a> {
    framework: &'a Framework,
    ops: Vec<Op>,
    /// The index of the first operation a `version` followed that takes none (a create, a
    /// fence), or `ops.len()` when it came first: refused by `commit`.
    misplaced_version: Option<usize>,
}

impl Framework {
    /// A new, empty transaction on this framework; add operations, then
    /// [`commit`](Transaction::commit) (whose docs give its errors and cancel safety).
    pub fn transaction(&self) -> Transaction<'_> {
        Transaction { framework: self, ops: Vec::new(), misplaced_version: None }
    }
}

impl<'a> Transaction<'a> {
    /// Adds a create of `path` with `data` in `mode` (parents are not created: they must exist
    /// or be created earlier in the same transaction).
    pub fn create(self, path: &str, data: &[u8], mode: CreateMode) -> Self {
        self.push(Op::Create { path: path.to_owned(), data: data.to_vec(), mode, ttl: None, acl: None })
    }

    /// Adds a create with a TTL (persistent modes only; see
    /// [`CreateBuilder::ttl`](crate::CreateBuilder::ttl)).
    pub fn create_with_ttl(self, path: &str, data: &[u8], mode: CreateMode, ttl: Duration) -> Self {
        self.push(Op::Create { path: path.to_owned(), data: data.to_vec(), mode, ttl: Some(ttl), acl: None })
    }

    /// Adds a create with its own ACL instead of the provider's.
    pub fn create_with_acl(self, path: &str, data: &[u8], mode: CreateMode, acl: Vec<Acl>) -> Self {
        self.push(Op::Create { path: path.to_owned(), data: data.to_vec(), mode, ttl: None, acl: Some(acl) })
    }

    /// Adds a data write, at any version unless [`version`](Self::version) follows.
    pub fn set_data(self, path: &str, data: &[u8]) -> Self {
        self.push(Op::SetData { path: path.to_owned(), data: data.to_vec(), version: -1 })
    }

    /// Adds a delete, at any version unless [`version`](Self::version) follows.
    pub fn delete(self, path: &str) -> Self {
        self.push(Op::Delete { path: path.to_owned(), version: -1 })
    }

    /// Adds a check that `path` exists, at any version unless [`version`](Self::version)
    /// follows. A failed check fails the transaction with [`Error::TransactionFailed`]
    /// (`NoNode` or `BadVersion` inside).
    pub fn check(self, path: &str) -> Self {
        self.push(Op::Check { path: path.to_owned(), version: -1, fence: false })
    }

    /// Adds an operation made apart (Curator's `forOperations`): a typed node's `create_op`,
    /// `update_op`, ... ([`TransactionOp`], feature `serde`). It mixes with
    /// the operations above in one commit; [`version`](Self::version) after it applies to a
    /// write, delete or check as after [`set_data`](Self::set_data).
    #[doc(alias = "forOperations", alias = "for_operations", alias = "add")]
    pub fn add_op(self, op: TransactionOp) -> Self {
        self.push(op.0)
    }

    /// The version the operation just added expects (Curator's `withVersion`): the
    /// [`set_data`](Self::set_data), [`delete`](Self::delete) or [`check`](Self::check) before
    /// it applies only while the node is at `version` (-1: any), else the transaction fails
    /// with `BadVersion` inside [`Error::TransactionFailed`].
    ///
    /// After a create or a fence, or first in a transaction, it is a mistake that
    /// [`commit`](Self::commit) refuses with [`Error::InvalidArgument`] (nothing is sent).
    #[doc(alias = "with_version", alias = "withVersion")]
    pub fn version(mut self, version: i32) -> Self {
        match self.ops.last_mut() {
            Some(Op::SetData { version: expected, .. } | Op::Delete { version: expected, .. }) => *expected = version,
            Some(Op::Check { version: expected, fence: false, .. }) => *expected = version,
            _ => {
                self.misplaced_version.get_or_insert(self.ops.len());
            }
        }
        self
    }

    /// Adds the check of a lock node (see [`Fence`]); add it first. When it fails, the commit
    /// returns [`Error::LockLost`] and nothing is applied.
    pub fn fenced_by(self, fence: &impl Fence) -> Self {
        let (path, version) = fence.fence_node();
        self.push(Op::Check { path: path.to_owned(), version, fence: true })
    }

    /// How many operations were added.
    pub fn len(&self) -> usize {
        self.ops.len()
    }

    /// True when no operation was added.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    fn push(mut self, op: Op) -> Self {
        self.ops.push(op);
        self
    }

    /// Everything checked before sending: paths, versions, TTLs, ACLs, sizes. Returns the
    /// full paths and ACLs.
    fn prepare(&self) -> Result<Vec<(String, Option<Vec<Acl>>)>> {
        let fw = self.framework;
        if self.ops.is_empty() {
            return Err(Error::invalid_argument("transaction", "has no operation"));
        }
        if let Some(after) = self.misplaced_version {
            let reason = match after {
                0 => "came before any operation".to_owned(),
                n => format!("follows operation {} (a create or a fence), which takes no version", n - 1),
            };
            return Err(Error::invalid_argument("version", reason));
        }
        let mut size = 0usize;
        let mut prepared = Vec::with_capacity(self.ops.len());
        for op in &self.ops {
            let full = fw.full_path(op.path())?;
            let schema_op = match op {
                Op::Create { .. } => None,
                Op::Check { .. } => Some(SchemaOp::Check),
                Op::SetData { data, .. } => Some(SchemaOp::SetData(data)),
                Op::Delete { .. } => Some(SchemaOp::Delete),
            };
            if let Some(schema_op) = schema_op {
                fw.check_schema(op.path(), schema_op)?;
            }
            let acl = match op {
                Op::Create { mode, ttl, acl, data, .. } => {
                    if op.path() == "/" {
                        return Err(Error::InvalidPath { path: "/".into(), reason: "the root node cannot be created" });
                    }
                    if let Some(ttl) = ttl {
                        if !matches!(mode, CreateMode::Persistent | CreateMode::PersistentSequential) {
                            return Err(Error::invalid_argument("ttl", "a TTL needs a persistent mode"));
                        }
                        if *ttl < Duration::from_millis(1) || *ttl > Duration::from_millis(0x00FF_FFFF_FFFF) {
                            return Err(Error::invalid_argument("ttl", "must be between 1 ms and 2^40 ms"));
                        }
                    }
                    let acl = match acl {
                        Some(acl) if acl.is_empty() => {
                            return Err(Error::invalid_argument("acl", "an ACL needs at least one entry"))
                        }
                        Some(acl) => acl.clone(),
                        None => fw.acl_for(&full)?,
                    };
                    fw.check_schema(op.path(), SchemaOp::Create { mode: *mode, data, acl: &acl })?;
                    size += data.len() + 24 + fw.check_acl_size(&acl)?;
                    Some(acl)
                }
                Op::SetData { data, .. } => {
                    size += data.len() + 16;
                    None
                }
                Op::Delete { .. } => {
                    if op.path() == "/" {
                        return Err(Error::InvalidPath { path: "/".into(), reason: "the root node cannot be deleted" });
                    }
                    size += 16;
                    None
                }
                Op::Check { .. } => {
                    size += 16;
                    None
                }
            };
            size += full.len();
            prepared.push((full, acl));
        }
        let limit = fw.config().max_request_bytes;
        if size > limit {
            return Err(Error::TooLarge { name: "transaction", size, limit });
        }
        Ok(prepared)
    }

    /// Commits every operation in one `multi` request: all are applied, or none.
    ///
    /// A transaction is not sent again after a connection loss while it was in flight: it may
    /// have been applied, and a second send would fail (a create finding its own node) or
    /// apply twice, so the commit returns [`Error::OutcomeUnknown`]. (Curator sends it again.)
    /// It is retried when it was refused without being applied (session expired, throttled).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for an empty transaction, a TTL misuse,
    /// an empty ACL or a misplaced [`version`](Self::version); [`Error::InvalidPath`]; [`Error::TooLarge`] (all operations together);
    /// [`Error::LockLost`] when a fence's check failed; [`Error::TransactionFailed`] with the
    /// failing operation's index, path and error; [`Error::OutcomeUnknown`];
    /// [`Error::Unsupported`] for a TTL create on a server without extended types.
    ///
    /// # Cancel safety
    /// A cancelled commit may still be applied on the server (all of it, or nothing).
    pub async fn commit(self) -> Result<Vec<OpResult>> {
        let framework = self.framework;
        self.commit_once().await.map_err(|e| framework.closed_or(e))
    }

    async fn commit_once(self) -> Result<Vec<OpResult>> {
        let prepared = self.prepare()?;
        let fw = self.framework;
        let mut retry = fw.retry_loop();
        // Under `SessionFailurePolicy::Fail`, no try after the first one's session ended.
        let (policy, mut first_epoch) = (fw.config().session_failure_policy, None);
        // The namespace's node, which Curator makes on first use: made (as a container) once,
        // when an operation finds a parent missing.
        let mut made_namespace = fw.namespace().is_none();
        loop {
            let session = policy.keep_session(&mut first_epoch, fw.session()?)?;
            session.sent(Sent::Multi);
            let mut writer = session.client.new_multi_writer();
            for (op, (full, acl)) in self.ops.iter().zip(&prepared) {
                let added = match op {
                    Op::Create { data, mode, ttl, .. } => {
                        let acl = acl.as_deref().unwrap_or_default();
                        let mut options = mode.with_acls(Acls::new(acl));
                        if let Some(ttl) = ttl {
                            options = options.with_ttl(*ttl);
                        }
                        writer.add_create(full, data, &options)
                    }
                    Op::SetData { data, version, .. } => writer.add_set_data(full, data, version_of(*version)),
                    Op::Delete { version, .. } => writer.add_delete(full, version_of(*version)),
                    Op::Check { version, .. } => writer.add_check_version(full, *version),
                };
                added?;
            }
            // A server may hold the reply back (see `stall`).
            let error = match session.unstalled(writer.commit()).await {
                Ok(results) => return Ok(self.results(results)),
                Err(MultiWriteError::OperationFailed { index, source: ZkError::NoNode }) if !made_namespace => {
                    made_namespace = true;
                    // The handle's root is the namespace's node.
                    if fw.exists("/").await?.is_some() {
                        return Err(self.failed(index, ZkError::NoNode));
                    }
                    fw.ensure_containers(fw.namespace().unwrap_or("/"), true).await?;
                    continue;
                }
                Err(MultiWriteError::OperationFailed { index, source }) => return Err(self.failed(index, source)),
                Err(MultiWriteError::RequestFailed { source }) => source,
            };
            if is_zk_connection_error(&error) {
                return Err(Error::OutcomeUnknown {
                    operation: "transaction",
                    path: self.ops[0].path().to_owned(),
                    error,
                });
            }
            if error == ZkError::Unimplemented
                && self.ops.iter().any(|op| matches!(op, Op::Create { ttl: Some(_), .. }))
            {
                return Err(ttl_unsupported());
            }
            if !retry.allows_zk(&error) || !retry.backoff().await {
                return Err(error.into());
            }
        }
    }

    fn results(&self, results: Vec<MultiWriteResult>) -> Vec<OpResult> {
        let fw = self.framework;
        results
            .into_iter()
            .map(|result| match result {
                MultiWriteResult::Create { path, stat } => {
                    OpResult::Created { path: fw.unfix_path(&path).to_owned(), stat }
                }
                MultiWriteResult::SetData { stat } => OpResult::DataSet { stat },
                MultiWriteResult::Delete => OpResult::Deleted,
                _ => OpResult::Checked,
            })
            .collect()
    }

    fn failed(&self, index: usize, source: ZkError) -> Error {
        let Some(op) = self.ops.get(index) else { return source.into() };
        match (op, &source) {
            (Op::Check { fence: true, path, .. }, ZkError::NoNode | ZkError::BadVersion) => {
                Error::LockLost { path: path.clone() }
            }
            (Op::Create { ttl: Some(_), .. }, ZkError::Unimplemented) => ttl_unsupported(),
            _ => Error::TransactionFailed { index, path: op.path().to_owned(), error: source },
        }
    }
}

fn version_of(version: i32) -> Option<i32> {
    (version != -1).then_some(version)
}

fn ttl_unsupported() -> Error {
    Error::Unsupported {
        feature: "ttl",
        reason: "TTL nodes need a server started with zookeeper.extendedTypesEnabled=true",
    }
}
