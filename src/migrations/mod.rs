//! Migrations (curator-x-async's `MigrationManager`): versioned sets of operations, each
//! applied once across every process that runs them, recorded in ZooKeeper.
//!
//! A [`MigrationSet`] is an id and an ordered list of [`Migration`]s; a migration is a list of
//! operations (creates, writes, deletes, version checks) applied in one transaction. A
//! [`MigrationManager`] applies a set: under an `InterProcessSemaphoreMutex` at
//! `<lock path>/<set id>`, it reads the set's metadata, one persistent sequential node
//! `<metadata path>/<set id>/meta-<sequence>` per migration already applied, holding that
//! migration's fingerprint; checks that the applied migrations are, in order, the set's first
//! ones (a set changed under the same id is refused with [`Error::Migration`]); then applies
//! the rest in one transaction together with their metadata nodes. Running the same set again,
//! from this process or another, applies nothing; a set with migrations appended applies the
//! new ones only.
//!
//! The layout is curator-x-async's: the same lock, the same metadata nodes, and the same
//! fingerprint (SHA-256 of each operation's path, opcode and jute request record, as
//! `CuratorMultiTransactionRecord.addToDigest` computes it; a unit test checks it against a
//! value computed with Curator's classes), so a Rust service and a Java one that run the same
//! set agree on what is applied. (Debian ships no curator-x-async jar, so there is no
//! interop test against a running Java `MigrationManager`.)
//!
//! ```no_run
//! # async fn example(framework: zk_recipes::Framework) -> zk_recipes::Result<()> {
//! use std::time::Duration;
//! use zk_recipes::migrations::{Migration, MigrationManager, MigrationSet};
//! use zk_recipes::CreateMode;
//!
//! let set = MigrationSet::new(
//!     "app-schema",
//!     vec![
//!         Migration::new().create("/app", b"", CreateMode::Persistent),
//!         Migration::new().create("/app/config", b"{}", CreateMode::Persistent),
//!     ],
//! )?;
//! let manager = MigrationManager::new(&framework, "/migrations/locks", "/migrations/meta", Duration::from_secs(30))?;
//! let applied = manager.migrate(&set).await?;
//! println!("applied {applied} migration(s)");
//! # Ok(()) }
//! ```

mod set;
mod sha256;

use std::time::Duration;

pub use self::set::{Migration, MigrationSet};
use crate::error::{Error, Result};
use crate::framework::Framework;
use crate::locks::InterProcessSemaphoreMutex;
use crate::path;
use crate::protocol::MIGRATION_META_NAME;
use zookeeper_client::CreateMode;

/// Applies [`MigrationSet`]s (curator-x-async's `MigrationManager`); see the
/// [module](self) for the layout.
#[derive(Debug, Clone)]
pub struct MigrationManager {
    framework: Framework,
    lock_path: String,
    meta_data_path: String,
    lock_max: Duration,
}

impl MigrationManager {
    /// A manager keeping its locks under `lock_path` and its metadata under `meta_data_path`,
    /// waiting at most `lock_max` for a set's lock. Does no I/O.
    ///
    /// # Errors
    /// [`Error::InvalidPath`] for a path that is not valid (the root and `/zookeeper` too);
    /// [`Error::InvalidArgument`] for the same path for both, or one under the other (a set's
    /// lock nodes would be read as its metadata), or a zero `lock_max`.
    pub fn new(framework: &Framework, lock_path: &str, meta_data_path: &str, lock_max: Duration) -> Result<Self> {
        path::validate_recipe_path(lock_path)?;
        path::validate_recipe_path(meta_data_path)?;
        let under = |a: &str, b: &str| a.strip_prefix(b).is_some_and(|rest| rest.starts_with('/'));
        if lock_path == meta_data_path || under(lock_path, meta_data_path) || under(meta_data_path, lock_path) {
            return Err(Error::invalid_argument(
                "meta_data_path",
                format!("{meta_data_path} and the lock path {lock_path} must be apart (neither under the other)"),
            ));
        }
        if lock_max.is_zero() {
            return Err(Error::invalid_argument("lock_max", "must be greater than zero"));
        }
        Ok(Self {
            framework: framework.clone(),
            lock_path: lock_path.to_owned(),
            meta_data_path: meta_data_path.to_owned(),
            lock_max,
        })
    }

    /// Applies the migrations of `set` that are not applied yet, in one transaction with their
    /// metadata, under the set's lock; returns how many it applied (0 when the set was applied
    /// already, by anyone).
    ///
    /// # Errors
    /// [`Error::Migration`] when the applied metadata does not match the set (more migrations
    /// applied than the set has, or a fingerprint that differs: the set changed under the same
    /// id) or the lock was not taken within `lock_max`; a refused transaction
    /// ([`Error::TransactionFailed`], nothing of it applied); [`Error::OutcomeUnknown`] when the
    /// connection broke during the commit (migrate again: the metadata tells); the
    /// framework's errors.
    ///
    /// # Cancel safety
    /// Cancel-safe in the sense that matters: the transaction is applied whole or not at all,
    /// with its metadata, so a cancelled migrate leaves the set consistent (migrate again to
    /// learn where it stands); the set's lock is released in the background.
    pub async fn migrate(&self, set: &MigrationSet) -> Result<usize> {
        let lock = InterProcessSemaphoreMutex::new(&self.framework, &path::join(&self.lock_path, set.id()))?;
        let Some(guard) = lock.acquire_timeout(self.lock_max).await? else {
            return Err(Error::Migration {
                id: set.id().to_owned(),
                reason: format!("could not take the lock {} within {:?}", lock.path(), self.lock_max),
            });
        };
        let applied = self.migrate_locked(set).await;
        if let Err(error) = guard.release().await {
            tracing::warn!(id = set.id(), %error, "migration lock release failed; the reaper deletes it");
        }
        applied
    }

    /// The fingerprints of the set's applied migrations, in order; `None` when the set's
    /// metadata node does not exist yet.
    async fn applied(&self, meta: &str) -> Result<Option<Vec<Vec<u8>>>> {
        let mut names = match self.framework.get_children(meta).await {
            Ok(names) => names,
            Err(e) if e.is_no_node() => return Ok(None),
            Err(e) => return Err(e),
        };
        names.sort();
        let mut hashes = Vec::with_capacity(names.len());
        for name in names {
            // Written by a transaction, never compressed: read as stored whatever the
            // framework's compression default (as Curator reads them).
            hashes.push(self.framework.get_data(&path::join(meta, &name)).undecompressed().await?.0);
        }
        Ok(Some(hashes))
    }

    async fn migrate_locked(&self, set: &MigrationSet) -> Result<usize> {
        let meta = path::join(&self.meta_data_path, set.id());
        let found = self.applied(&meta).await?;
        let applied = found.as_deref().unwrap_or_default();
        let mismatch = |reason: &str| Error::Migration {
            id: set.id().to_owned(),
            reason: format!("{reason}. Migration ID: {}", set.id()),
        };
        if applied.len() > set.migrations().len() {
            return Err(mismatch("More metadata than migrations"));
        }
        for (migration, hash) in set.migrations().iter().zip(applied) {
            if migration.fingerprint(&self.framework)?.as_slice() != hash.as_slice() {
                return Err(mismatch("Metadata mismatch"));
            }
        }
        let to_apply = &set.migrations()[applied.len()..];
        if to_apply.is_empty() {
            return Ok(0);
        }
        let meta_node = path::join(&meta, MIGRATION_META_NAME);
        let fingerprints = to_apply.iter().map(|m| m.fingerprint(&self.framework)).collect::<Result<Vec<_>>>()?;
        let mut transaction = self.framework.transaction();
        if found.is_none() {
            // The set's metadata node goes with its first migrations, so a transaction that is
            // refused (or a set that cannot be sent) leaves none behind.
            self.framework.ensure_path(&self.meta_data_path).await?;
            transaction = transaction.create(&meta, b"", CreateMode::Container);
        }
        for (migration, fingerprint) in to_apply.iter().zip(&fingerprints) {
            transaction = migration.add_to(transaction);
            transaction = transaction.create(&meta_node, fingerprint, CreateMode::PersistentSequential);
        }
        transaction.commit().await?;
        tracing::info!(id = set.id(), applied = to_apply.len(), "migrations applied");
        Ok(to_apply.len())
    }
}
