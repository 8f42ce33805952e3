//! [`ModelSpec`]: where a typed node lives and how it is written (Curator's `ModelSpec`).

use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

use zookeeper_client::{Acl, CreateMode};

use super::codec::{Codec, JsonCodec};
use super::zpath::ZPath;
use crate::error::Result;
use crate::framework::Parents;

/// Where a typed node lives and how it is written (Curator's `ModelSpec`): its path template,
/// its codec, and the create options of [`ModeledFramework::create`](crate::ModeledFramework::create).
///
/// The defaults are Curator's `ModelSpecBuilder`'s: a persistent node, the framework's ACL
/// provider, missing parents an error ([`Parents::MustExist`]: Curator creates no parents
/// unless `CreateOption.createParentsIfNeeded` or `createParentsAsContainers` is given), not
/// protected, no TTL, and the framework's compression default.
///
/// ```
/// use zk_recipes::{ModelSpec, Parents, ZPath};
/// # #[derive(serde::Serialize, serde::Deserialize)] struct Order { id: u64 }
///
/// let orders: ModelSpec<Order> = ModelSpec::new(ZPath::parse_with_ids("/orders/{id}")?)
///     .parents(Parents::Containers);
/// assert_eq!(orders.path().to_string(), "/orders/{id}");
/// # Ok::<(), zk_recipes::Error>(())
/// ```
pub struct ModelSpec<T, C = JsonCodec> {
    pub(super) path: ZPath,
    pub(super) codec: Arc<C>,
    pub(super) mode: CreateMode,
    pub(super) acl: Option<Vec<Acl>>,
    pub(super) parents: Parents,
    pub(super) protected: bool,
    pub(super) ttl: Option<Duration>,
    pub(super) compressed: Option<bool>,
    model: PhantomData<fn() -> T>,
}

impl<T> ModelSpec<T, JsonCodec>
where
    JsonCodec: Codec<T>,
{
    /// A spec at `path` whose values are JSON ([`JsonCodec`], what Curator's
    /// `JacksonModelSerializer` writes).
    pub fn new(path: ZPath) -> Self {
        Self::with_codec(path, JsonCodec)
    }
}

impl<T, C: Codec<T>> ModelSpec<T, C> {
    /// A spec at `path` whose values `codec` encodes.
    pub fn with_codec(path: ZPath, codec: C) -> Self {
        ModelSpec {
            path,
            codec: Arc::new(codec),
            mode: CreateMode::Persistent,
            acl: None,
            parents: Parents::MustExist,
            protected: false,
            ttl: None,
            compressed: None,
            model: PhantomData,
        }
    }

    /// The node's create mode (Curator's `withCreateMode`; default persistent).
    pub fn mode(mut self, mode: CreateMode) -> Self {
        self.mode = mode;
        self
    }

    /// The node's ACL instead of the framework's ACL provider's (Curator's `withAclList`).
    pub fn acl(mut self, acl: Vec<Acl>) -> Self {
        self.acl = Some(acl);
        self
    }

    /// What a create does about missing parents (default [`Parents::MustExist`], as Curator;
    /// [`Parents::Containers`] is Curator's `createParentsAsContainers`,
    /// [`Parents::Persistent`] its `createParentsIfNeeded`).
    pub fn parents(mut self, parents: Parents) -> Self {
        self.parents = parents;
        self
    }

    /// Protected creates (Curator's `CreateOption.doProtected`): see
    /// [`CreateBuilder::protected`](crate::CreateBuilder::protected).
    pub fn protected(mut self) -> Self {
        self.protected = true;
        self
    }

    /// A TTL for created nodes (Curator's `withTtl`), with a persistent mode.
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.ttl = Some(ttl);
        self
    }

    /// Values are stored gzip-compressed (Curator's `CreateOption.compress`): writes compress,
    /// reads and the cache decompress, whatever the framework's default.
    pub fn compressed(mut self) -> Self {
        self.compressed = Some(true);
        self
    }

    /// Values are stored as encoded, whatever the framework's default.
    pub fn uncompressed(mut self) -> Self {
        self.compressed = Some(false);
        self
    }

    /// The path template.
    pub fn path(&self) -> &ZPath {
        &self.path
    }

    /// The codec.
    pub fn codec(&self) -> &C {
        &self.codec
    }

    /// This spec at another path (Curator's `withPath`).
    pub fn with_path(&self, path: ZPath) -> Self {
        ModelSpec { path, ..self.clone() }
    }

    /// This spec with its path's parameters given `values`, in order (see [`ZPath::resolved`]).
    ///
    /// # Errors
    /// As [`ZPath::resolved`].
    pub fn resolved<I>(&self, values: I) -> Result<Self>
    where
        I: IntoIterator,
        I::Item: fmt::Display,
    {
        Ok(self.with_path(self.path.resolved(values)?))
    }
}

impl<T, C> Clone for ModelSpec<T, C> {
    fn clone(&self) -> Self {
        ModelSpec {
            path: self.path.clone(),
            codec: self.codec.clone(),
            mode: self.mode,
            acl: self.acl.clone(),
            parents: self.parents,
            protected: self.protected,
            ttl: self.ttl,
            compressed: self.compressed,
            model: PhantomData,
        }
    }
}

impl<T, C> fmt::Debug for ModelSpec<T, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ModelSpec")
            .field("path", &self.path)
            .field("model", &std::any::type_name::<T>())
            .field("codec", &std::any::type_name::<C>())
            .field("mode", &self.mode)
            .field("acl", &self.acl)
            .field("parents", &self.parents)
            .field("protected", &self.protected)
            .field("ttl", &self.ttl)
            .field("compressed", &self.compressed)
            .finish()
    }
}
