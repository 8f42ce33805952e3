//! Namespaced, retried ZooKeeper operations on the framework (the slice of Curator's
//! `CuratorFramework` operations that recipes and users need).

use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;
use zookeeper_client::{Acls, Client, CreateMode, Stat};

use super::{Framework, Session};
use crate::error::{is_zk_retryable, Error, Result, ZkError};
use crate::path;

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
        let started = Instant::now();
        let mut attempt = 0u32;
        loop {
            let session = self.inner.session()?;
            match op(session).await {
                Ok(value) => return Ok(value),
                Err(e) if is_zk_retryable(&e) => match self.retry_delay(attempt, started) {
                    Some(delay) => {
                        tracing::debug!(error = %e, attempt, ?delay, "retrying operation");
                        attempt += 1;
                        tokio::time::sleep(delay).await;
                    }
                    None => return Err(e.into()),
                },
                Err(e) => return Err(e.into()),
            }
        }
    }

    pub(crate) fn retry_delay(&self, attempt: u32, started: Instant) -> Option<Duration> {
        if self.is_closed() {
            return None;
        }
        self.inner.config.retry_policy.next_delay(attempt, started.elapsed())
    }

    /// The ACL the provider gives a node at `full_path`.
    pub(crate) fn acl_for(&self, full_path: &str) -> Vec<zookeeper_client::Acl> {
        let acl = self.inner.config.acl_provider.acl_for_path(full_path);
        if acl.is_empty() {
            Acls::anyone_all().to_vec()
        } else {
            acl
        }
    }

    /// Creates every missing ancestor of `full_path` and, with `include_self`, the node itself,
    /// as empty container nodes with the provider's ACL (Curator's
    /// `creatingParentContainersIfNeeded`). Existing nodes are left alone. All creates go out
    /// back to back, so this costs one round trip.
    pub(crate) async fn ensure_containers(&self, full_path: &str, include_self: bool) -> Result<()> {
        self.with_retry(
            |session| async move { create_containers(&session.client, self, full_path, include_self).await },
        )
        .await
    }

    /// Creates a node. Parents are created as containers when missing. Returns the path as
    /// created (with the sequence number for sequential modes), without the namespace.
    ///
    /// # Errors
    /// [`Error::InvalidPath`], or the server's refusal (`NodeExists`, `NoAuth`, ...).
    ///
    /// # Cancel safety
    /// Not cancel-safe in the strict sense: a cancelled create may still happen on the server.
    pub async fn create(&self, path: &str, data: &[u8], mode: CreateMode) -> Result<String> {
        let full = self.full_path(path)?;
        let acl = self.acl_for(&full);
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
    /// [`Error::InvalidPath`] or the server's refusal.
    ///
    /// # Cancel safety
    /// A cancelled write may still happen on the server.
    pub async fn set_data(&self, path: &str, data: &[u8]) -> Result<Stat> {
        let full = self.full_path(path)?;
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

/// Sends one container create per missing level, back to back, and waits for all of them.
async fn create_containers(
    client: &Client,
    framework: &Framework,
    full_path: &str,
    include_self: bool,
) -> Result<(), ZkError> {
    let mut levels: Vec<&str> = Vec::new();
    let mut at = if include_self { Some(full_path) } else { path::parent(full_path) };
    while let Some(level) = at.filter(|p| *p != "/") {
        levels.push(level);
        at = path::parent(level);
    }
    levels.reverse();
    let acls: Vec<_> = levels.iter().map(|level| framework.acl_for(level)).collect();
    let options: Vec<_> = acls.iter().map(|acl| CreateMode::Container.with_acls(Acls::new(acl))).collect();
    let creates: Vec<_> = levels.iter().zip(&options).map(|(level, opts)| client.create(level, &[], opts)).collect();
    for result in futures::future::join_all(creates).await {
        match result {
            Ok(_) | Err(ZkError::NodeExists) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}
