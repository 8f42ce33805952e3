//! [`ModeledFramework`]: typed operations on the nodes of one [`ModelSpec`] (Curator's
//! `ModeledFramework`).

use std::fmt;
use std::str::FromStr;

use zookeeper_client::Stat;

use super::codec::{Codec, JsonCodec};
use super::spec::ModelSpec;
use super::zpath::ZPath;
use crate::error::{Error, Result, ZkError};
use crate::framework::{Created, Framework, OpResult, Transaction, TransactionOp};

/// A typed node as read: its path, its stat and its value (Curator's `ZNode`).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ZNode<T> {
    /// The node's path (namespace stripped).
    pub path: ZPath,
    /// The node's stat when it held the value; `stat.version` is what
    /// [`ModeledFramework::compare_and_set`] expects.
    pub stat: Stat,
    /// The decoded value.
    pub value: T,
}

/// Typed operations on the nodes of one [`ModelSpec`] (Curator's `ModeledFramework`): the
/// spec's codec encodes every write and decodes every read, its options make every create,
/// and its path template names the nodes. JSON by default ([`JsonCodec`]), as Curator's
/// `JacksonModelSerializer` writes it, so a Java service using `ModeledFramework` with
/// Jackson and a Rust service share the nodes.
///
/// ```no_run
/// # async fn example(fw: zk_recipes::Framework) -> zk_recipes::Result<()> {
/// use serde::{Deserialize, Serialize};
/// use zk_recipes::{ModelSpec, ModeledFramework, Parents, ZPath};
///
/// #[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
/// struct Order {
///     id: u64,
///     item: String,
/// }
///
/// let spec = ModelSpec::new(ZPath::parse_with_ids("/orders/{id}")?).parents(Parents::Containers);
/// let orders: ModeledFramework<Order> = ModeledFramework::new(&fw, spec);
///
/// let order = orders.resolved([42])?;
/// order.create(&Order { id: 42, item: "tea".into() }).await?;
/// let read = order.read().await?;
/// order.compare_and_set(&Order { id: 42, item: "coffee".into() }, read.stat.version).await?;
/// let ids: Vec<u64> = orders.ids().await?; // [42]
/// # Ok(()) }
/// ```
///
/// Operations need a resolved path (every parameter given), except [`ids`](Self::ids), which
/// lists the values of the path's last parameter, and [`cached`](Self::cached).
///
/// Typed writes also go into transactions (Curator's `createOp`, `updateOp`, `deleteOp`,
/// `checkExistsOp` and `inTransaction`): [`create_op`](Self::create_op),
/// [`update_op`](Self::update_op), [`delete_op`](Self::delete_op) and
/// [`check_exists_op`](Self::check_exists_op) make [`TransactionOp`]s with the bytes and
/// options the typed calls write, which [`Transaction::add_op`] mixes with untyped operations
/// and [`in_transaction`](Self::in_transaction) commits:
///
/// ```no_run
/// # async fn example(fw: zk_recipes::Framework) -> zk_recipes::Result<()> {
/// # use serde::{Deserialize, Serialize};
/// # use zk_recipes::{ModelSpec, ModeledFramework, ZPath};
/// # #[derive(Serialize, Deserialize)] struct Order { id: u64, item: String }
/// # #[derive(Serialize, Deserialize)] struct Stock { tea: u32 }
/// let orders: ModeledFramework<Order> = ModeledFramework::new(&fw, ModelSpec::new(ZPath::parse_with_ids("/orders/{id}")?));
/// let stock: ModeledFramework<Stock> = ModeledFramework::new(&fw, ModelSpec::new(ZPath::parse("/stock")?));
///
/// let seen = stock.read().await?;
/// fw.transaction()
///     .add_op(orders.resolved([43])?.create_op(&Order { id: 43, item: "tea".into() })?)
///     .add_op(stock.update_op_with_version(&Stock { tea: seen.value.tea - 1 }, seen.stat.version)?)
///     .set_data("/orders", b"last=43") // untyped operations mix in
///     .commit()
///     .await?; // all three, or none (`TransactionFailed` with BadVersion: the stock moved)
/// # Ok(()) }
/// ```
pub struct ModeledFramework<T, C = JsonCodec> {
    framework: Framework,
    spec: ModelSpec<T, C>,
}

impl<T, C> Clone for ModeledFramework<T, C> {
    fn clone(&self) -> Self {
        ModeledFramework { framework: self.framework.clone(), spec: self.spec.clone() }
    }
}

impl<T, C> fmt::Debug for ModeledFramework<T, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ModeledFramework").field("spec", &self.spec).finish_non_exhaustive()
    }
}

impl<T, C: Codec<T>> ModeledFramework<T, C> {
    /// Typed operations on `spec`'s nodes through `framework` (Curator's
    /// `ModeledFramework.wrap`). Does no I/O.
    #[doc(alias = "wrap")]
    pub fn new(framework: &Framework, spec: ModelSpec<T, C>) -> Self {
        ModeledFramework { framework: framework.clone(), spec }
    }

    /// The spec.
    pub fn spec(&self) -> &ModelSpec<T, C> {
        &self.spec
    }

    /// The path template.
    pub fn path(&self) -> &ZPath {
        &self.spec.path
    }

    /// The framework.
    pub fn framework(&self) -> &Framework {
        &self.framework
    }

    /// These operations at the path with its parameters given `values`, in order.
    ///
    /// # Errors
    /// As [`ZPath::resolved`].
    pub fn resolved<I>(&self, values: I) -> Result<Self>
    where
        I: IntoIterator,
        I::Item: fmt::Display,
    {
        Ok(ModeledFramework { framework: self.framework.clone(), spec: self.spec.resolved(values)? })
    }

    /// These operations at a child of the path (Curator's `at(child)`).
    ///
    /// # Errors
    /// As [`ZPath::child`].
    pub fn at(&self, child: impl fmt::Display) -> Result<Self> {
        let path = self.spec.path.child(child)?;
        Ok(ModeledFramework { framework: self.framework.clone(), spec: self.spec.with_path(path) })
    }

    fn node_path(&self) -> Result<String> {
        self.spec.path.full_path()
    }

    fn compress(&self) -> bool {
        self.spec.compressed.unwrap_or(self.framework.config().compression)
    }

    /// `value`'s bytes.
    pub(super) fn encode(&self, value: &T) -> Result<Vec<u8>> {
        self.spec.codec.encode(value).map_err(|e| Error::invalid_argument("value", format!("cannot encode: {e}")))
    }

    /// The value in a node's bytes as stored (decompressed first when the spec says so).
    pub(super) fn decode(&self, path: &str, stored: &[u8]) -> Result<T> {
        let corrupt = |expected, reason| Error::CorruptData { path: path.to_owned(), expected, reason };
        let unpacked;
        let bytes = if self.compress() {
            unpacked = crate::protocol::gzip::decompress(stored).map_err(|e| corrupt(e.expected, e.found))?;
            &unpacked[..]
        } else {
            stored
        };
        self.spec.codec.decode(bytes).map_err(|e| corrupt(self.spec.codec.name(), e.to_string()))
    }

    /// Creates the node with `value` (Curator's `set(model)`), with the spec's mode, ACL,
    /// parents, protection, TTL and compression.
    ///
    /// # Errors
    /// [`Error::InvalidPath`] for an unresolved path; [`Error::InvalidArgument`] for a value
    /// the codec refuses (or options [`Framework::create`] refuses); `NodeExists`; as
    /// [`Framework::create`].
    ///
    /// # Cancel safety
    /// As [`Framework::create`]: a protected create is cancel-safe; another may still happen
    /// on the server.
    #[doc(alias = "set")]
    pub async fn create(&self, value: &T) -> Result<Created> {
        let path = self.node_path()?;
        let data = self.encode(value)?;
        let mut create = self.framework.create(&path).data(&data).mode(self.spec.mode).parents(self.spec.parents);
        create = if self.compress() { create.compressed() } else { create.uncompressed() };
        if let Some(acl) = &self.spec.acl {
            create = create.acl(acl.clone());
        }
        if self.spec.protected {
            create = create.protected();
        }
        if let Some(ttl) = self.spec.ttl {
            create = create.ttl(ttl);
        }
        create.await
    }

    /// Reads and decodes the node (Curator's `read()` / `readAsZNode()`).
    ///
    /// # Errors
    /// [`Error::InvalidPath`] for an unresolved path; [`Error::CorruptData`] when the node's
    /// bytes do not decode (naming the codec and why); `NoNode`; as [`Framework::get_data`].
    ///
    /// # Cancel safety
    /// Cancel-safe: a read changes nothing.
    #[doc(alias = "readAsZNode")]
    pub async fn read(&self) -> Result<ZNode<T>> {
        let path = self.node_path()?;
        let (data, stat) = self.framework.get_data(&path).undecompressed().await?;
        let value = self.decode(&path, &data)?;
        Ok(ZNode { path: self.spec.path.clone(), stat, value })
    }

    /// Writes `value` at any version (Curator's `update(model)`).
    ///
    /// # Errors
    /// [`Error::InvalidPath`] for an unresolved path; [`Error::InvalidArgument`] for a value
    /// the codec refuses; `NoNode`; as [`Framework::set_data`].
    ///
    /// # Cancel safety
    /// A cancelled write may still happen on the server.
    #[doc(alias = "update")]
    pub async fn set(&self, value: &T) -> Result<Stat> {
        self.write(value, -1).await
    }

    /// Writes `value` only if the node is at `version` (`stat.version` of a
    /// [`read`](Self::read); Curator's `update(model, version)`): otherwise
    /// [`Error::BadVersion`], and nothing is written.
    ///
    /// # Errors
    /// [`Error::BadVersion`]; [`Error::OutcomeUnknown`] when the connection broke while the
    /// write was in flight and another version was found after (perhaps this write's);
    /// otherwise as [`set`](Self::set).
    ///
    /// # Cancel safety
    /// A cancelled write may still happen on the server.
    #[doc(alias = "update")]
    pub async fn compare_and_set(&self, value: &T, version: i32) -> Result<Stat> {
        self.write(value, version).await
    }

    /// `value`'s bytes as [`create`](Self::create) and [`set`](Self::set) store them:
    /// encoded, then compressed when the spec (or the framework's default) says so.
    fn stored(&self, value: &T) -> Result<Vec<u8>> {
        let data = self.encode(value)?;
        if self.compress() {
            crate::protocol::gzip::compress_for_write(&data)
        } else {
            Ok(data)
        }
    }

    /// A create of the node with `value`, for a transaction (Curator's `createOp(model)`): the
    /// bytes [`create`](Self::create) writes (codec, compression) with the spec's mode, ACL
    /// (or the ACL provider's) and TTL. Parents are not created, whatever the spec's
    /// [`parents`](ModelSpec::parents): they must exist or be created earlier in the
    /// transaction (as Curator's `createOp`). A TTL misuse is refused by the commit.
    ///
    /// # Errors
    /// [`Error::InvalidPath`] for an unresolved path; [`Error::InvalidArgument`] for a value
    /// the codec refuses, or a [`protected`](ModelSpec::protected) spec (a protected name is
    /// found again after a connection loss by a retry, and a transaction is not retried then).
    #[doc(alias = "createOp")]
    pub fn create_op(&self, value: &T) -> Result<TransactionOp> {
        let path = self.node_path()?;
        if self.spec.protected {
            return Err(Error::invalid_argument(
                "spec",
                "a protected create cannot be a transaction's operation (its name is found again by a retry)",
            ));
        }
        let data = self.stored(value)?;
        Ok(TransactionOp::create(path, data, self.spec.mode, self.spec.ttl, self.spec.acl.clone()))
    }

    /// A write of `value` at any version, for a transaction (Curator's `updateOp(model)`): the
    /// bytes [`set`](Self::set) writes.
    ///
    /// # Errors
    /// [`Error::InvalidPath`] for an unresolved path; [`Error::InvalidArgument`] for a value
    /// the codec refuses.
    #[doc(alias = "updateOp")]
    pub fn update_op(&self, value: &T) -> Result<TransactionOp> {
        self.update_op_with_version(value, -1)
    }

    /// A write of `value` only at `version` (`stat.version` of a [`read`](Self::read)), for a
    /// transaction (Curator's `updateOp(model, version)`): the bytes
    /// [`compare_and_set`](Self::compare_and_set) writes. At another version the whole
    /// transaction fails, with `BadVersion` inside [`Error::TransactionFailed`].
    ///
    /// # Errors
    /// As [`update_op`](Self::update_op).
    #[doc(alias = "updateOp")]
    pub fn update_op_with_version(&self, value: &T, version: i32) -> Result<TransactionOp> {
        let path = self.node_path()?;
        Ok(TransactionOp::set_data(path, self.stored(value)?, version))
    }

    /// A delete of the node at any version, for a transaction (Curator's `deleteOp()`).
    ///
    /// # Errors
    /// [`Error::InvalidPath`] for an unresolved path.
    #[doc(alias = "deleteOp")]
    pub fn delete_op(&self) -> Result<TransactionOp> {
        self.delete_op_with_version(-1)
    }

    /// A delete of the node only at `version`, for a transaction (Curator's
    /// `deleteOp(version)`).
    ///
    /// # Errors
    /// [`Error::InvalidPath`] for an unresolved path.
    #[doc(alias = "deleteOp")]
    pub fn delete_op_with_version(&self, version: i32) -> Result<TransactionOp> {
        Ok(TransactionOp::delete(self.node_path()?, version))
    }

    /// A check that the node exists, for a transaction (Curator's `checkExistsOp()`): the
    /// transaction fails with `NoNode` inside [`Error::TransactionFailed`] when it does not.
    ///
    /// # Errors
    /// [`Error::InvalidPath`] for an unresolved path.
    #[doc(alias = "checkExistsOp")]
    pub fn check_exists_op(&self) -> Result<TransactionOp> {
        self.check_exists_op_with_version(-1)
    }

    /// A check that the node is at `version`, for a transaction (Curator's
    /// `checkExistsOp(version)`): a compare without a write.
    ///
    /// # Errors
    /// [`Error::InvalidPath`] for an unresolved path.
    #[doc(alias = "checkExistsOp")]
    pub fn check_exists_op_with_version(&self, version: i32) -> Result<TransactionOp> {
        Ok(TransactionOp::check(self.node_path()?, version))
    }

    /// Commits `ops` in one transaction of this framework (Curator's `inTransaction(ops)`):
    /// all are applied, or none. The ops may come from typed nodes of other models on the same
    /// framework; a transaction that also needs untyped operations is
    /// [`Framework::transaction`] with [`Transaction::add_op`].
    ///
    /// # Errors
    /// As [`Transaction::commit`]: [`Error::InvalidArgument`] for no ops;
    /// [`Error::TransactionFailed`] with the failing op's index, path and error (`BadVersion`
    /// for a stale version, `NodeExists`, `NoNode`); [`Error::OutcomeUnknown`].
    ///
    /// # Cancel safety
    /// As [`Transaction::commit`]: a cancelled commit may still be applied (all of it, or
    /// nothing).
    #[doc(alias = "inTransaction")]
    pub async fn in_transaction(&self, ops: impl IntoIterator<Item = TransactionOp>) -> Result<Vec<OpResult>> {
        ops.into_iter().fold(self.framework.transaction(), Transaction::add_op).commit().await
    }

    async fn write(&self, value: &T, version: i32) -> Result<Stat> {
        let path = self.node_path()?;
        let data = self.encode(value)?;
        let write = self.framework.set_data(&path, &data).version(version);
        if self.compress() {
            write.compressed().await
        } else {
            write.uncompressed().await
        }
    }

    /// Deletes the node at any version (Curator's `delete()`).
    ///
    /// # Errors
    /// [`Error::InvalidPath`] for an unresolved path; `NoNode`; `NotEmpty`; as
    /// [`Framework::delete`].
    ///
    /// # Cancel safety
    /// A cancelled delete may still happen on the server.
    pub async fn delete(&self) -> Result<()> {
        self.framework.delete(&self.node_path()?).await
    }

    /// Deletes the node only if it is at `version` (Curator's `delete(version)`).
    ///
    /// # Errors
    /// [`Error::BadVersion`]; otherwise as [`delete`](Self::delete).
    ///
    /// # Cancel safety
    /// A cancelled delete may still happen on the server.
    pub async fn compare_and_delete(&self, version: i32) -> Result<()> {
        self.framework.delete(&self.node_path()?).version(version).await
    }

    /// The node's stat, `None` when it does not exist (Curator's `checkExists()`).
    ///
    /// # Errors
    /// [`Error::InvalidPath`] for an unresolved path; as [`Framework::exists`].
    ///
    /// # Cancel safety
    /// Cancel-safe: a read changes nothing.
    #[doc(alias = "checkExists")]
    pub async fn exists(&self) -> Result<Option<Stat>> {
        self.framework.exists(&self.node_path()?).await
    }

    /// The paths of the node's children (Curator's `children()`), sorted by name.
    ///
    /// # Errors
    /// [`Error::InvalidPath`] for an unresolved path; `NoNode`; as [`Framework::get_children`].
    ///
    /// # Cancel safety
    /// Cancel-safe: a read changes nothing.
    pub async fn children(&self) -> Result<Vec<ZPath>> {
        let mut names = self.framework.get_children(&self.node_path()?).await?;
        names.sort();
        names.into_iter().map(|name| self.spec.path.child(name)).collect()
    }

    /// The values of the path's last parameter that name a node: the names of the children
    /// of the path's parent, each parsed as an `I`, sorted by name (for `/orders/{id}`, the
    /// ids of the orders). A parent that does not exist has none.
    ///
    /// # Errors
    /// [`Error::InvalidPath`] when the last segment is not the only parameter left;
    /// [`Error::CorruptData`] for a child name that does not parse as an `I` (the listing is
    /// not what the template says); as [`Framework::get_children`].
    ///
    /// # Cancel safety
    /// Cancel-safe: a read changes nothing.
    pub async fn ids<I>(&self) -> Result<Vec<I>>
    where
        I: FromStr,
        I::Err: fmt::Display,
    {
        let path = &self.spec.path;
        let parent = match path.parent() {
            Some(parent) if path.is_resolved_but_last() => parent.full_path()?,
            _ => {
                return Err(Error::InvalidPath {
                    path: path.to_string(),
                    reason: "ids need a path whose last segment is its only unresolved parameter",
                })
            }
        };
        let mut names = match self.framework.get_children(&parent).await {
            Ok(names) => names,
            Err(Error::ZooKeeper(ZkError::NoNode)) => Vec::new(),
            Err(e) => return Err(e),
        };
        names.sort();
        names
            .into_iter()
            .map(|name| {
                name.parse::<I>().map_err(|e| Error::CorruptData {
                    path: crate::path::join(&parent, &name),
                    expected: "node name that parses as the template's id",
                    reason: e.to_string(),
                })
            })
            .collect()
    }
}
