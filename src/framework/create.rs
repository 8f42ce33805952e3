//! Creating nodes: [`Framework::create`] and its options ([`CreateBuilder`]).
//!
//! One loop sends the create on the current session and decides, per answer, what a retry may
//! do. A connection error leaves the outcome unknown: a protected create then looks for its
//! node by its prefix before it sends again (the lock nodes' recovery,
//! `PendingCreate`), a plain create sends again and
//! counts a `NodeExists` of its own session's ephemeral node as done, and a sequential create
//! without protection stops with [`Error::OutcomeUnknown`] (sending it again could make a
//! second node).

use std::future::IntoFuture;
use std::time::Duration;

use futures::future::BoxFuture;
use zookeeper_client::{Acl, Acls, CreateMode, Stat};

use super::node::{Failure, PendingCreate};
use super::{Framework, SchemaOp, Session};
use crate::error::{is_zk_connection_error, is_zk_retryable, Error, Result, ZkError};
use crate::framework::metrics::Op;
use crate::path;
use crate::protocol::gzip;

/// The longest TTL ZooKeeper stores (five bytes of milliseconds).
pub(crate) const TTL_MAX: Duration = Duration::from_millis(0x00FF_FFFF_FFFF);

/// How a create treats missing parents of its node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Parents {
    /// Missing parents are created as container nodes, which the server removes once they are
    /// empty (Curator's `creatingParentContainersIfNeeded`). The default.
    #[default]
    Containers,
    /// Missing parents are created as persistent nodes (Curator's `creatingParentsIfNeeded`).
    Persistent,
    /// Missing parents are an error (`NoNode`), as with Curator's plain `create()`.
    MustExist,
}

/// A node made (or found) by [`Framework::create`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Created {
    /// The node's path, namespace stripped, with the protected prefix and the sequence number
    /// when the create had them.
    pub path: String,
    /// The node's stat right after the create (or after the write of
    /// [`or_set`](CreateBuilder::or_set)).
    pub stat: Stat,
    /// True when the node existed already and [`idempotent`](CreateBuilder::idempotent) or
    /// [`or_set`](CreateBuilder::or_set) accepted it.
    pub existed: bool,
}

/// The options of one create (Curator's `create()` builder), sent when awaited.
///
/// ```no_run
/// # async fn example(fw: zk_recipes::Framework) -> zk_recipes::Result<()> {
/// use zk_recipes::zk::CreateMode;
/// use zk_recipes::Parents;
///
/// // Curator: create().creatingParentsIfNeeded().withProtection()
/// //          .withMode(CreateMode.EPHEMERAL_SEQUENTIAL).forPath("/services/api/member-", data)
/// let member = fw
///     .create("/services/api/member-")
///     .mode(CreateMode::EphemeralSequential)
///     .protected()
///     .parents(Parents::Persistent)
///     .data(b"10.0.0.7:8080")
///     .await?;
/// println!("registered as {}", member.path);
/// # Ok(()) }
/// ```
#[must_use = "a create does nothing until it is awaited"]
#[derive(Debug)]
pub struct CreateBuilder<'a> {
    framework: &'a Framework,
    path: &'a str,
    data: &'a [u8],
    mode: CreateMode,
    acl: Option<Vec<Acl>>,
    protected: bool,
    parents: Parents,
    ttl: Option<Duration>,
    idempotent: bool,
    or_set: bool,
    /// Gzip the data: `None` follows the framework's `enable_compression`.
    compress: Option<bool>,
}

impl Framework {
    /// Creates a node at `path` (namespace applied) when awaited; options are set on the
    /// returned builder. Defaults: persistent, no data, the ACL provider's ACL, missing
    /// parents created as containers, not protected, not compressed (unless the framework was
    /// built with [`enable_compression`](crate::FrameworkBuilder::enable_compression)).
    ///
    /// The operations of this framework (create, reads, writes, [`transaction`](Self::transaction))
    /// apply the namespace, retry under the retry policy (on the next session too, after
    /// `Lost`), apply the ACL provider and check the request size before sending.
    ///
    /// # Errors
    /// When awaited: [`Error::InvalidPath`]; [`Error::InvalidArgument`] for a TTL on a mode
    /// other than persistent or persistent-sequential, a zero TTL, an empty ACL, or
    /// `idempotent`/`or_set` with a sequential or protected create; [`Error::TooLarge`];
    /// [`Error::OutcomeUnknown`] for a sequential create without protection whose connection
    /// broke while it was in flight (it is not sent again), or a create sent again after a
    /// connection loss that found a node it cannot tell from its own; [`Error::Unsupported`]
    /// for a TTL on a server without extended types; or the server's refusal (`NodeExists`,
    /// `NoNode` with [`Parents::MustExist`], `NoAuth`, `NoChildrenForEphemerals`, ...).
    ///
    /// # Cancel safety
    /// A protected create is cancel-safe: once sent, a cancelled create has its node deleted
    /// in the background (as after a failure). Any other cancelled create may still happen on
    /// the server.
    pub fn create<'a>(&'a self, path: &'a str) -> CreateBuilder<'a> {
        CreateBuilder {
            framework: self,
            path,
            data: &[],
            mode: CreateMode::Persistent,
            acl: None,
            protected: false,
            parents: Parents::default(),
            ttl: None,
            idempotent: false,
            or_set: false,
            compress: None,
        }
    }
}

impl<'a> CreateBuilder<'a> {
    /// The node's mode (Curator's `withMode`): persistent, ephemeral, either sequential form,
    /// or container. A TTL node is a persistent (or persistent-sequential) one with
    /// [`ttl`](Self::ttl).
    pub fn mode(mut self, mode: CreateMode) -> Self {
        self.mode = mode;
        self
    }

    /// The node's data (Curator's `forPath(path, data)`); empty by default.
    pub fn data(mut self, data: &'a [u8]) -> Self {
        self.data = data;
        self
    }

    /// The node's ACL instead of the ACL provider's (Curator's `withACL`). It must not be
    /// empty. Parents created on the way still get the provider's ACL.
    pub fn acl(mut self, acl: Vec<Acl>) -> Self {
        self.acl = Some(acl);
        self
    }

    /// Protected mode (Curator's `withProtection`): the node's name gets Curator's
    /// `_c_<uuid>-` prefix, so that after a connection loss the create can find its node
    /// (by that prefix, after a `sync`) instead of creating a second one. An ephemeral node is
    /// adopted only when it belongs to the current session; a persistent node has no owner, and
    /// the uuid alone identifies it. A protected create that fails or is cancelled after it was
    /// sent has its node deleted in the background, as Curator does.
    pub fn protected(mut self) -> Self {
        self.protected = true;
        self
    }

    /// What to do about missing parents (default [`Parents::Containers`]).
    pub fn parents(mut self, parents: Parents) -> Self {
        self.parents = parents;
        self
    }

    /// A time to live (Curator's `withTtl`), for [`CreateMode::Persistent`] and
    /// [`CreateMode::PersistentSequential`] only: the server may delete the node once it has
    /// had no children and no change for this long. Needs a server with
    /// `zookeeper.extendedTypesEnabled=true`; others refuse with [`Error::Unsupported`].
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.ttl = Some(ttl);
        self
    }

    /// An existing node with the same data counts as created (Curator's `idempotent()`);
    /// `existed` tells. A node with other data is `NodeExists`.
    pub fn idempotent(mut self) -> Self {
        self.idempotent = true;
        self
    }

    /// An existing node gets the data written instead (Curator's `orSetData()`), at any
    /// version; `existed` tells.
    pub fn or_set(mut self) -> Self {
        self.or_set = true;
        self
    }

    /// Writes the data gzip-compressed (Curator's `create().compressed()`, its
    /// `GzipCompressionProvider`): readers decompress it with
    /// [`get_data().decompressed()`](crate::GetData::decompressed) (Curator's
    /// `getData().decompressed()`). The request size is checked on the compressed bytes; data
    /// over [`MAX_DECOMPRESSED`](crate::protocol::gzip::MAX_DECOMPRESSED) (64 MiB) before
    /// compression is refused with [`Error::TooLarge`], as no reader here would decompress it.
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

    fn sequential(&self) -> bool {
        matches!(self.mode, CreateMode::PersistentSequential | CreateMode::EphemeralSequential)
    }

    fn ephemeral(&self) -> bool {
        matches!(self.mode, CreateMode::Ephemeral | CreateMode::EphemeralSequential)
    }

    /// The refusals that need no server.
    fn validate(&self) -> Result<()> {
        if let Some(ttl) = self.ttl {
            if !matches!(self.mode, CreateMode::Persistent | CreateMode::PersistentSequential) {
                return Err(Error::invalid_argument(
                    "ttl",
                    format!("a TTL needs a persistent or persistent-sequential mode, not {:?}", self.mode),
                ));
            }
            if ttl < Duration::from_millis(1) {
                return Err(Error::invalid_argument("ttl", "must be at least one millisecond"));
            }
            if ttl > TTL_MAX {
                return Err(Error::invalid_argument("ttl", format!("must be at most {TTL_MAX:?}")));
            }
        }
        if (self.idempotent || self.or_set) && (self.sequential() || self.protected) {
            return Err(Error::invalid_argument(
                if self.or_set { "or_set" } else { "idempotent" },
                "a sequential or protected create makes a new name each time; it never finds its node existing",
            ));
        }
        if matches!(&self.acl, Some(acl) if acl.is_empty()) {
            return Err(Error::invalid_argument("acl", "an ACL needs at least one entry"));
        }
        Ok(())
    }

    async fn run(self) -> Result<Created> {
        let fw = self.framework;
        let full = fw.full_path(self.path)?;
        if self.path == "/" {
            return Err(Error::InvalidPath { path: self.path.to_owned(), reason: "the root node cannot be created" });
        }
        self.validate()?;
        let compressed = match self.compress.unwrap_or(fw.config().compression) {
            true => Some(gzip::compress_for_write(self.data)?),
            false => None,
        };
        let this = CreateBuilder { data: compressed.as_deref().unwrap_or(self.data), ..self };
        this.send(&full, compressed.is_some()).await
    }

    async fn send(self, full: &str, compressed: bool) -> Result<Created> {
        let fw = self.framework;
        let full = full.to_owned();
        let dir = path::parent(&full).unwrap_or("/").to_owned();
        let prefix = self.protected.then(path::new_protected_prefix);
        let target = match &prefix {
            Some(prefix) => path::join(&dir, &format!("{prefix}{}", path::node_name(&full))),
            None => full.clone(),
        };
        let acl = match &self.acl {
            Some(acl) => acl.clone(),
            None => fw.acl_for(&target)?,
        };
        fw.check_schema(self.path, SchemaOp::Create { mode: self.mode, data: self.data, acl: &acl })?;
        fw.check_create_with(&target, if self.sequential() { 10 } else { 0 }, self.data, &acl)?;
        let mut options = self.mode.with_acls(Acls::new(&acl));
        if let Some(ttl) = self.ttl {
            options = options.with_ttl(ttl);
        }

        let mut retry = fw.retry_loop();
        let mut made_parents = false;
        // A parent that must exist may be the namespace's node, which Curator makes on first
        // use: made (as a container) once, on the first `NoNode`.
        let mut made_namespace = fw.namespace().is_none();
        // True once a create may have happened without our hearing of it.
        let mut in_doubt = false;
        let mut pending: Option<PendingCreate> = None;
        // Under `SessionFailurePolicy::Fail`, no try after the first one's session ended.
        let (policy, mut first_epoch) = (fw.config().session_failure_policy, None);
        loop {
            let session = policy.keep_session(&mut first_epoch, fw.session()?)?;
            if let Some(prefix) = &prefix {
                if pending.as_ref().map_or(true, |p| p.epoch() != session.epoch) {
                    if let Some(old) = pending.take() {
                        old.disarm();
                    }
                    pending = Some(PendingCreate::protected(fw, session.epoch, &dir, prefix.clone()));
                }
                if in_doubt {
                    if let Some(found) = self.find_protected(&session, pending.as_ref()).await? {
                        if let Some(p) = pending.take() {
                            p.disarm();
                        }
                        return Ok(found);
                    }
                }
            }
            session.sent(Op::Create);
            // A server may hold the reply back (see `stall`).
            let error = match session.unstalled(session.client.create(&target, self.data, &options)).await {
                Ok((stat, sequence)) => {
                    if let Some(p) = pending.take() {
                        p.disarm();
                    }
                    if self.ephemeral() {
                        session.learn_id(stat.ephemeral_owner);
                        fw.note_session_id(&session);
                    }
                    let created = if self.sequential() { format!("{target}{sequence}") } else { target };
                    return Ok(Created { path: fw.unfix_path(&created).to_owned(), stat, existed: false });
                }
                Err(e) => e,
            };
            match error {
                e if is_zk_connection_error(&e) => {
                    if self.sequential() && prefix.is_none() {
                        return Err(Error::OutcomeUnknown {
                            operation: "create",
                            path: self.path.to_owned(),
                            error: e,
                        });
                    }
                    in_doubt = true;
                    if !retry.allows_zk(&e) || !retry.backoff().await {
                        return Err(e.into());
                    }
                }
                e if is_zk_retryable(&e) => {
                    if !retry.allows_zk(&e) || !retry.backoff().await {
                        return Err(e.into());
                    }
                }
                ZkError::NoNode if self.parents == Parents::MustExist && !made_namespace => {
                    made_namespace = true;
                    // Only a missing namespace node is made (read first: a create of an
                    // existing node may be refused `NoAuth` by its parent's ACL, and it is a
                    // write all the same); another missing parent stays `NoNode`.
                    match fw.namespace() {
                        Some(namespace) if fw.exists("/").await?.is_none() => {
                            fw.ensure_containers(namespace, true).await?;
                        }
                        _ => {
                            // A refusal: nothing was made, nothing to look for.
                            if let Some(p) = pending.take() {
                                p.disarm();
                            }
                            return Err(ZkError::NoNode.into());
                        }
                    }
                }
                ZkError::NoNode if !made_parents && self.parents != Parents::MustExist => {
                    made_parents = true;
                    if dir != "/" {
                        match self.parents {
                            Parents::Persistent => fw.ensure_persistent(&dir, true).await?,
                            _ => fw.ensure_containers(&dir, true).await?,
                        }
                    }
                }
                ZkError::NodeExists => {
                    if let Some(p) = pending.take() {
                        p.disarm();
                    }
                    match self.existing(&session, &target, in_doubt, compressed).await? {
                        Some(found) => return Ok(found),
                        // Gone meanwhile: create again, under the retry policy (a node that
                        // keeps coming and going must not keep this loop busy).
                        None if retry.backoff().await => continue,
                        None => return Err(ZkError::NodeExists.into()),
                    }
                }
                ZkError::Unimplemented if self.ttl.is_some() => {
                    if let Some(p) = pending.take() {
                        p.disarm();
                    }
                    return Err(Error::Unsupported {
                        feature: "ttl",
                        reason: "TTL nodes need a server started with zookeeper.extendedTypesEnabled=true",
                    });
                }
                e => {
                    // A refusal: nothing was made, nothing to look for.
                    if let Some(p) = pending.take() {
                        p.disarm();
                    }
                    return Err(e.into());
                }
            }
        }
    }

    /// After a connection error: the node created under our prefix, if the create happened.
    async fn find_protected(&self, session: &Session, pending: Option<&PendingCreate>) -> Result<Option<Created>> {
        let Some(pending) = pending else { return Ok(None) };
        let fw = self.framework;
        let found = match pending.recover(session, !self.ephemeral()).await {
            Ok(found) => found,
            // The directory is gone or the session ended: the node is not there.
            Err(Failure::NodeMissing) => None,
            Err(Failure::Error(e)) => return Err(e),
        };
        let Some((name, _)) = found else { return Ok(None) };
        let node = path::join(path::parent(&fw.full_path(self.path)?).unwrap_or("/"), &name);
        let stat = fw.with_read_retry(|s| {
            let node = &node;
            async move {
                s.sent(Op::Exists);
                s.client.check_stat(node).await
            }
        });
        match stat.await? {
            Some(stat) => Ok(Some(Created { path: fw.unfix_path(&node).to_owned(), stat, existed: false })),
            None => Ok(None),
        }
    }

    /// The node exists: ours after a lost reply, accepted (idempotent, or_set), or refused.
    /// `None` to send the create again (the node went meanwhile).
    async fn existing(
        &self,
        session: &Session,
        target: &str,
        in_doubt: bool,
        compressed: bool,
    ) -> Result<Option<Created>> {
        let fw = self.framework;
        let user_path = fw.unfix_path(target).to_owned();
        if self.or_set {
            let set = fw
                .with_retry(|s| async move {
                    s.sent(Op::SetData);
                    s.client.set_data(target, self.data, None).await
                })
                .await;
            return match set {
                Ok(stat) => Ok(Some(Created { path: user_path, stat, existed: true })),
                Err(Error::ZooKeeper(ZkError::NoNode)) => Ok(None),
                Err(e) => Err(e),
            };
        }
        let read = fw
            .with_read_retry(|s| async move {
                s.sent(Op::GetData);
                s.client.get_data(target).await
            })
            .await;
        let (data, stat) = match read {
            Ok(found) => found,
            Err(Error::ZooKeeper(ZkError::NoNode)) => return Ok(None),
            Err(e) => return Err(e),
        };
        // A protected name is ours alone (its uuid is fresh): our own create, landed.
        if self.protected {
            return Ok(Some(Created { path: user_path, stat, existed: false }));
        }
        // Our own create, whose reply was lost: an ephemeral node of this session.
        if in_doubt && self.ephemeral() && stat.ephemeral_owner != 0 && stat.ephemeral_owner == session.id() {
            return Ok(Some(Created { path: user_path, stat, existed: false }));
        }
        // Compressed data is the same when it holds the same bytes (another writer's deflate
        // may differ in bytes).
        let same = data == self.data
            || (compressed && gzip::is_gzip(&data) && gzip::decompress(&data).ok() == gzip::decompress(self.data).ok());
        if self.idempotent && same {
            return Ok(Some(Created { path: user_path, stat, existed: true }));
        }
        if in_doubt && !self.idempotent {
            // Perhaps our own first send, perhaps someone else's node: no way to tell.
            return Err(Error::OutcomeUnknown {
                operation: "create",
                path: self.path.to_owned(),
                error: ZkError::NodeExists,
            });
        }
        Err(ZkError::NodeExists.into())
    }
}

impl<'a> IntoFuture for CreateBuilder<'a> {
    type Output = Result<Created>;
    type IntoFuture = BoxFuture<'a, Result<Created>>;

    /// Sends the create.
    ///
    /// # Errors
    /// [`Error::InvalidPath`]; [`Error::InvalidArgument`] for a TTL on another mode, a zero
    /// TTL, an empty ACL, `idempotent`/`or_set` with a sequential or protected create;
    /// [`Error::TooLarge`]; [`Error::OutcomeUnknown`] for a sequential create without
    /// protection whose connection broke while it was in flight; [`Error::Unsupported`] for a
    /// TTL on a server without extended types; or the server's refusal (`NodeExists`,
    /// `NoNode` with [`Parents::MustExist`], `NoAuth`, `NoChildrenForEphemerals`, ...).
    ///
    /// # Cancel safety
    /// A protected create is cancel-safe: once sent, a cancelled create has its node deleted
    /// in the background. Any other create may still happen on the server when cancelled.
    fn into_future(self) -> Self::IntoFuture {
        let framework = self.framework;
        Box::pin(async move { self.run().await.map_err(|e| framework.closed_or(e)) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn framework() -> Framework {
        Framework::builder("127.0.0.1:2181").build().expect("a framework builds without I/O")
    }

    fn refused(builder: CreateBuilder<'_>) -> Option<&'static str> {
        match builder.validate() {
            Err(Error::InvalidArgument { name, .. }) => Some(name),
            Err(other) => panic!("{other:?}"),
            Ok(()) => None,
        }
    }

    #[test]
    fn ttls_go_with_persistent_modes_only() {
        let fw = framework();
        let ttl = Duration::from_secs(1);
        for mode in [CreateMode::Persistent, CreateMode::PersistentSequential] {
            assert_eq!(refused(fw.create("/a").mode(mode).ttl(ttl)), None, "{mode:?}");
        }
        for mode in [CreateMode::Ephemeral, CreateMode::EphemeralSequential, CreateMode::Container] {
            assert_eq!(refused(fw.create("/a").mode(mode).ttl(ttl)), Some("ttl"), "{mode:?}");
        }
        assert_eq!(refused(fw.create("/a").ttl(Duration::ZERO)), Some("ttl"));
        assert_eq!(refused(fw.create("/a").ttl(Duration::from_micros(999))), Some("ttl"));
        assert_eq!(refused(fw.create("/a").ttl(TTL_MAX)), None);
        assert_eq!(refused(fw.create("/a").ttl(TTL_MAX + Duration::from_millis(1))), Some("ttl"));
    }

    #[test]
    fn options_that_cannot_apply_are_refused() {
        let fw = framework();
        assert_eq!(refused(fw.create("/a").idempotent()), None);
        assert_eq!(refused(fw.create("/a").or_set()), None);
        assert_eq!(refused(fw.create("/a").mode(CreateMode::EphemeralSequential).idempotent()), Some("idempotent"));
        assert_eq!(refused(fw.create("/a").protected().or_set()), Some("or_set"));
        assert_eq!(refused(fw.create("/a").acl(Vec::new())), Some("acl"));
    }
}
