//! Namespaced, retried ZooKeeper operations on the framework (the slice of Curator's
//! `CuratorFramework` operations that recipes and users need).

use std::future::Future;

use zookeeper_client::{Acl, Acls, Client, CreateMode, Stat};

use super::{Framework, Session};
use crate::error::{Error, Result, ZkError};
use crate::path;
use crate::retry::RetryLoop;

impl Framework {
    /// The full server path of a user path: the namespace prepended (`/locks/a` → `/app/locks/a`).
    ///
    /// # Errors
    /// [`Error::InvalidPath`] when `path` is not a valid absolute path.
    pub fn full_path(&self, path: &str) -> Result<String> {
        path::validate(path)?;
        Ok(self.fix_path(path))
    }

    /// `full_path` for a path already validated.
    pub(crate) fn fix_path(&self, path: &str) -> String {
        match self.namespace() {
            None => path.to_owned(),
            Some(ns) if path == "/" => ns.to_owned(),
            Some(ns) => format!("{ns}{path}"),
        }
    }

    /// The user path of a full server path (the namespace stripped).
    pub fn unfix_path<'a>(&self, full_path: &'a str) -> &'a str {
        match self.namespace() {
            Some(ns) => match full_path.strip_prefix(ns) {
                Some("") => "/",
                Some(rest) if rest.starts_with('/') => rest,
                _ => full_path,
            },
            None => full_path,
        }
    }

    /// Runs `op` on the current session, retrying retryable failures (connection loss,
    /// session moved or expired, throttling) under the retry policy. A retry after `Lost` runs
    /// on the new session.
    pub(crate) async fn with_retry<T, F, Fut>(&self, mut op: F) -> Result<T>
    where
        F: FnMut(Session) -> Fut,
        Fut: Future<Output = Result<T, ZkError>>,
    {
        let on_session = || {
            let session = self.session();
            let reply = session.map(&mut op);
            async move { Ok(reply?.await?) }
        };
        self.retry_loop().run(on_session, Error::is_retryable).await
    }

    /// A retry loop under the framework's policy that gives up once the framework closes.
    pub(crate) fn retry_loop(&self) -> RetryLoop<'_> {
        RetryLoop::new(&*self.config().retry_policy).stop_when(self)
    }

    /// The ACL the provider gives a node at `full_path`.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when the provider returns an empty list: the node must not
    /// be created with an ACL the user did not choose.
    pub(crate) fn acl_for(&self, full_path: &str) -> Result<Vec<Acl>> {
        let acl = self.config().acl_provider.acl_for_path(full_path);
        if acl.is_empty() {
            return Err(Error::invalid_argument(
                "acl_provider",
                format!("returned an empty ACL for {full_path}; every node needs at least one entry"),
            ));
        }
        Ok(acl)
    }

    /// Checks that a create of `data` at `full_path` (plus `extra_path` bytes the server or a
    /// recipe appends: a protected prefix, a sequence number) fits the servers' request limit.
    ///
    /// # Errors
    /// [`Error::TooLarge`] naming the data or the path; [`Error::InvalidArgument`] for an empty
    /// ACL.
    pub(crate) fn check_create(&self, full_path: &str, extra_path: usize, data: &[u8]) -> Result<()> {
        let acl = self.acl_for(full_path)?;
        let acl_bytes: usize = acl.iter().map(|a| 12 + a.auth_id().scheme().len() + a.auth_id().id().len()).sum();
        // xid, type, path length, data length, ACL count, flags: six 4-byte fields.
        let framing = 24 + acl_bytes;
        let limit = self.config().max_request_bytes.saturating_sub(framing);
        let path_len = full_path.len() + extra_path;
        if path_len > limit {
            return Err(Error::TooLarge { name: "path", size: path_len, limit });
        }
        let limit = limit - path_len;
        if data.len() > limit {
            return Err(Error::TooLarge { name: "data", size: data.len(), limit });
        }
        Ok(())
    }

    /// Creates every missing ancestor of `full_path` and, with `include_self`, the node itself,
    /// as empty container nodes with the provider's ACL (Curator's
    /// `creatingParentContainersIfNeeded`). Existing nodes are left alone. All creates go out
    /// back to back, so this costs one round trip.
    pub(crate) async fn ensure_containers(&self, full_path: &str, include_self: bool) -> Result<()> {
        let mut levels: Vec<&str> = Vec::new();
        let mut at = if include_self { Some(full_path) } else { path::parent(full_path) };
        while let Some(level) = at.filter(|p| *p != "/") {
            levels.push(level);
            at = path::parent(level);
        }
        levels.reverse();
        let acls: Vec<_> = levels.iter().map(|level| self.acl_for(level)).collect::<Result<_>>()?;
        let levels: Vec<_> = levels.into_iter().zip(&acls).collect();
        let on_session = || {
            let (session, levels) = (self.session(), &levels);
            async move { Ok(create_containers(&session?.client, levels).await?) }
        };
        // A level that exists when its create is sent can be gone by the time the next
        // level's create arrives (the server removes an empty container at any moment, and
        // its delete can land between two of our creates): `NoNode` then sends every level
        // again, under the retry policy, like a connection loss.
        let parent_vanished = |e: &Error| e.is_retryable() || matches!(e, Error::ZooKeeper(ZkError::NoNode));
        self.retry_loop().run(on_session, parent_vanished).await
    }

    /// Creates a node. Parents are created as containers when missing. Returns the path as
    /// created (with the sequence number for sequential modes), without the namespace.
    ///
    /// # Errors
    /// [`Error::InvalidPath`], [`Error::TooLarge`] for a request over the limit
    /// ([`FrameworkBuilder::max_request_bytes`](crate::FrameworkBuilder::max_request_bytes)),
    /// [`Error::InvalidArgument`] for an empty ACL from the provider, or the server's refusal
    /// (`NodeExists`, `NoAuth`, ...).
    ///
    /// # Cancel safety
    /// Not cancel-safe in the strict sense: a cancelled create may still happen on the server.
    pub async fn create(&self, path: &str, data: &[u8], mode: CreateMode) -> Result<String> {
        let full = self.full_path(path)?;
        self.check_create(&full, 0, data)?;
        let acl = self.acl_for(&full)?;
        let create = |session: Session| {
            let (full, acl) = (&full, &acl);
            async move {
                let options = mode.with_acls(Acls::new(acl));
                let (_, sequence) = session.client.create(full, data, &options).await?;
                Ok(match mode {
                    CreateMode::PersistentSequential | CreateMode::EphemeralSequential => format!("{full}{sequence}"),
                    _ => full.clone(),
                })
            }
        };
        let created = match self.with_retry(create).await {
            Err(Error::ZooKeeper(ZkError::NoNode)) => {
                if let Some(parent) = path::parent(&full) {
                    self.ensure_containers(parent, true).await?;
                }
                self.with_retry(create).await?
            }
            other => other?,
        };
        Ok(self.unfix_path(&created).to_owned())
    }

    /// Creates `path` and its missing ancestors as container nodes (no-op when it exists).
    ///
    /// # Errors
    /// [`Error::InvalidPath`] or the server's refusal.
    ///
    /// # Cancel safety
    /// Cancel-safe: creating containers is idempotent.
    pub async fn ensure_path(&self, path: &str) -> Result<()> {
        let full = self.full_path(path)?;
        self.ensure_containers(&full, true).await
    }

    /// Deletes a node (any version). `NoNode` is an error here; use the recipes' release for
    /// "delete if present".
    ///
    /// # Errors
    /// [`Error::InvalidPath`] or the server's refusal (`NoNode`, `NotEmpty`, `NoAuth`).
    ///
    /// # Cancel safety
    /// A cancelled delete may still happen on the server.
    pub async fn delete(&self, path: &str) -> Result<()> {
        let full = self.full_path(path)?;
        self.with_retry(|s| {
            let full = &full;
            async move { s.client.delete(full, None).await }
        })
        .await
    }

    /// Reads a node's data and stat.
    ///
    /// # Errors
    /// [`Error::InvalidPath`] or the server's refusal (`NoNode`, `NoAuth`).
    ///
    /// # Cancel safety
    /// Cancel-safe: reads change nothing.
    pub async fn get_data(&self, path: &str) -> Result<(Vec<u8>, Stat)> {
        let full = self.full_path(path)?;
        self.with_retry(|s| {
            let full = &full;
            async move { s.client.get_data(full).await }
        })
        .await
    }

    /// Writes a node's data (any version).
    ///
    /// # Errors
    /// [`Error::InvalidPath`], [`Error::TooLarge`] for data over the request limit, or the
    /// server's refusal.
    ///
    /// # Cancel safety
    /// A cancelled write may still happen on the server.
    pub async fn set_data(&self, path: &str, data: &[u8]) -> Result<Stat> {
        let full = self.full_path(path)?;
        let limit = self.config().max_request_bytes.saturating_sub(full.len() + 20);
        if data.len() > limit {
            return Err(Error::TooLarge { name: "data", size: data.len(), limit });
        }
        self.with_retry(|s| {
            let full = &full;
            async move { s.client.set_data(full, data, None).await }
        })
        .await
    }

    /// Lists a node's children (names, unsorted).
    ///
    /// # Errors
    /// [`Error::InvalidPath`] or the server's refusal (`NoNode`).
    ///
    /// # Cancel safety
    /// Cancel-safe: reads change nothing.
    pub async fn get_children(&self, path: &str) -> Result<Vec<String>> {
        let full = self.full_path(path)?;
        self.with_retry(|s| {
            let full = &full;
            async move { s.client.list_children(full).await }
        })
        .await
    }

    /// A node's stat, or `None` when it does not exist.
    ///
    /// # Errors
    /// [`Error::InvalidPath`] or the server's refusal.
    ///
    /// # Cancel safety
    /// Cancel-safe: reads change nothing.
    pub async fn exists(&self, path: &str) -> Result<Option<Stat>> {
        let full = self.full_path(path)?;
        self.with_retry(|s| {
            let full = &full;
            async move { s.client.check_stat(full).await }
        })
        .await
    }
}

/// Sends one container create per level (with its ACL), back to back, and waits for all of
/// them; levels that exist already are fine.
async fn create_containers(client: &Client, levels: &[(&str, &Vec<Acl>)]) -> Result<(), ZkError> {
    let options: Vec<_> = levels.iter().map(|(_, acl)| CreateMode::Container.with_acls(Acls::new(acl))).collect();
    let creates: Vec<_> =
        levels.iter().zip(&options).map(|((level, _), opts)| client.create(level, &[], opts)).collect();
    for result in futures::future::join_all(creates).await {
        match result {
            Ok(_) | Err(ZkError::NodeExists) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}
