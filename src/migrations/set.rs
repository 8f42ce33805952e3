//! Migrations, migration sets, and the fingerprint Curator records for each migration.

use zookeeper_client::{Acl, CreateMode, Permission};

use super::sha256::Sha256;
use crate::error::{Error, Result};
use crate::framework::Framework;

/// One operation of a migration (the operations a ZooKeeper transaction holds).
#[derive(Debug, Clone, PartialEq, Eq)]
enum MigrationOp {
    Create { path: String, data: Vec<u8>, mode: CreateMode },
    SetData { path: String, data: Vec<u8>, version: i32 },
    Delete { path: String, version: i32 },
    Check { path: String, version: i32 },
}

/// One migration: operations applied together, in one transaction with the record that they
/// were (Curator's `Migration`, whose `operations()` list this is). Paths are the framework's
/// (its namespace is prepended).
///
/// ```
/// use zk_recipes::migrations::Migration;
/// use zk_recipes::CreateMode;
///
/// let v1 = Migration::new()
///     .create("/app/config", b"{}", CreateMode::Persistent)
///     .create("/app/workers", b"", CreateMode::Persistent);
/// assert_eq!(v1.len(), 2);
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[must_use = "a migration does nothing until a MigrationManager applies its set"]
pub struct Migration {
    ops: Vec<MigrationOp>,
}

impl Migration {
    /// A migration with no operations yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Creates `path` with `data` in `mode`, with the framework's ACL.
    pub fn create(mut self, path: &str, data: &[u8], mode: CreateMode) -> Self {
        self.ops.push(MigrationOp::Create { path: path.to_owned(), data: data.to_vec(), mode });
        self
    }

    /// Writes `data` to `path` if it is at `version` (-1 for any).
    pub fn set_data(mut self, path: &str, data: &[u8], version: i32) -> Self {
        self.ops.push(MigrationOp::SetData { path: path.to_owned(), data: data.to_vec(), version });
        self
    }

    /// Deletes `path` if it is at `version` (-1 for any).
    pub fn delete(mut self, path: &str, version: i32) -> Self {
        self.ops.push(MigrationOp::Delete { path: path.to_owned(), version });
        self
    }

    /// Fails the migration unless `path` is at `version`.
    pub fn check(mut self, path: &str, version: i32) -> Self {
        self.ops.push(MigrationOp::Check { path: path.to_owned(), version });
        self
    }

    /// The number of operations.
    pub fn len(&self) -> usize {
        self.ops.len()
    }

    /// True when the migration has no operations.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    /// Adds the operations to `transaction`.
    pub(crate) fn add_to<'a>(
        &self,
        mut transaction: crate::framework::Transaction<'a>,
    ) -> crate::framework::Transaction<'a> {
        for op in &self.ops {
            transaction = match op {
                MigrationOp::Create { path, data, mode } => transaction.create(path, data, *mode),
                MigrationOp::SetData { path, data, version } => transaction.set_data(path, data).version(*version),
                MigrationOp::Delete { path, version } => transaction.delete(path).version(*version),
                MigrationOp::Check { path, version } => transaction.check(path).version(*version),
            };
        }
        transaction
    }

    /// The fingerprint Curator records for this migration: SHA-256 over each operation's
    /// server path, its opcode in decimal, and its request record as ZooKeeper's jute
    /// `toString()` prints it (Curator's `CuratorMultiTransactionRecord.addToDigest`). Creates
    /// carry the ACL the framework's provider gives them, as the create will.
    ///
    /// # Errors
    /// [`Error::InvalidPath`] for a path that is not valid; [`Error::InvalidArgument`] for an
    /// empty ACL from the provider.
    pub(crate) fn fingerprint(&self, framework: &Framework) -> Result<[u8; 32]> {
        let mut digest = Sha256::new();
        for op in &self.ops {
            let (path, opcode, record) = match op {
                MigrationOp::Create { path, data, mode } => {
                    let full = framework.full_path(path)?;
                    let acl = framework.acl_for(&full)?;
                    let (opcode, flags) = match mode {
                        CreateMode::Persistent => (1, 0),
                        CreateMode::Ephemeral => (1, 1),
                        CreateMode::PersistentSequential => (1, 2),
                        CreateMode::EphemeralSequential => (1, 3),
                        CreateMode::Container => (19, 4),
                    };
                    let record = format!("{},{},{},{flags}\n", text(&full), buffer(data), acl_vector(&acl));
                    (full, opcode, record)
                }
                MigrationOp::SetData { path, data, version } => {
                    let full = framework.full_path(path)?;
                    let record = format!("{},{},{version}\n", text(&full), buffer(data));
                    (full, 5, record)
                }
                MigrationOp::Delete { path, version } => {
                    let full = framework.full_path(path)?;
                    let record = format!("{},{version}\n", text(&full));
                    (full, 2, record)
                }
                MigrationOp::Check { path, version } => {
                    let full = framework.full_path(path)?;
                    let record = format!("{},{version}\n", text(&full));
                    (full, 13, record)
                }
            };
            digest.update(path.as_bytes());
            digest.update(opcode.to_string().as_bytes());
            digest.update(record.as_bytes());
        }
        Ok(digest.finish())
    }
}

/// Jute's `Utils.toCSVString`.
fn text(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 1);
    out.push('\'');
    for c in s.chars() {
        match c {
            '\0' => out.push_str("%00"),
            '\n' => out.push_str("%0A"),
            '\r' => out.push_str("%0D"),
            ',' => out.push_str("%2C"),
            '}' => out.push_str("%7D"),
            '%' => out.push_str("%25"),
            c => out.push(c),
        }
    }
    out
}

/// Jute's `Utils.toCSVBuffer`: `#` and each byte as Java's `Integer.toHexString` of the signed
/// byte (no padding; negative bytes sign-extended); nothing at all for no bytes.
fn buffer(data: &[u8]) -> String {
    if data.is_empty() {
        return String::new();
    }
    let mut out = String::from("#");
    for &b in data {
        out.push_str(&format!("{:x}", i32::from(b as i8) as u32));
    }
    out
}

/// A jute vector of ACL records: `v{s{perms,s{'scheme,'id}},...}`.
fn acl_vector(acl: &[Acl]) -> String {
    let entries: Vec<String> = acl
        .iter()
        .map(|a| {
            format!(
                "s{{{},s{{{},{}}}}}",
                permission_bits(a.permission()),
                text(a.auth_id().scheme()),
                text(a.auth_id().id())
            )
        })
        .collect();
    format!("v{{{}}}", entries.join(","))
}

/// The permission as ZooKeeper's bit mask (read 1, write 2, create 4, delete 8, admin 16).
fn permission_bits(permission: Permission) -> i32 {
    [
        (Permission::READ, 1),
        (Permission::WRITE, 2),
        (Permission::CREATE, 4),
        (Permission::DELETE, 8),
        (Permission::ADMIN, 16),
    ]
    .into_iter()
    .filter(|(p, _)| permission.has(*p))
    .map(|(_, bit)| bit)
    .sum()
}

/// An id and its migrations, applied in order, each once (Curator's `MigrationSet`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MigrationSet {
    id: String,
    migrations: Vec<Migration>,
}

impl MigrationSet {
    /// The set `id` (a single path segment: it names the set's lock and metadata nodes).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for an id that is no node name (empty, with `/`, `.`, `..`,
    /// control characters); an empty migration.
    pub fn new(id: &str, migrations: Vec<Migration>) -> Result<MigrationSet> {
        let named = crate::nodes::validate_name("migration set id", id).is_ok();
        if !named || id == "." || id == ".." || id == "zookeeper" {
            return Err(Error::invalid_argument("migration set id", format!("{id:?} is not a single path segment")));
        }
        if let Some(index) = migrations.iter().position(Migration::is_empty) {
            return Err(Error::invalid_argument("migrations", format!("migration {index} has no operation")));
        }
        Ok(MigrationSet { id: id.to_owned(), migrations })
    }

    /// The set's id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The migrations, in the order they apply.
    pub fn migrations(&self) -> &[Migration] {
        &self.migrations
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(bytes: &[u8]) -> String {
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// The digest Curator 5.4's `CuratorMultiTransactionRecord.addToDigest` gives these seven
    /// operations (`transactionOp()` with the open ACL), computed with Curator's own classes.
    #[test]
    fn the_fingerprint_is_curators() {
        let framework = Framework::builder("127.0.0.1:2181").build().unwrap();
        let migration = Migration::new()
            .create("/a/b", b"hi", CreateMode::Persistent)
            .create("/a/s-", b"", CreateMode::PersistentSequential)
            .set_data("/a/b", &[1, 2, 255], 3)
            .delete("/a/b", -1)
            .check("/a", 7)
            .create("/a/x,y%}z", &[0, 16, 0x80], CreateMode::Container)
            .create("/a/é", b"x", CreateMode::EphemeralSequential);
        assert_eq!(
            hex(&migration.fingerprint(&framework).unwrap()),
            "1433556ecafe3226779883d3cfa127180c9be6af26b4f41f8707ec25ed972363"
        );
        assert_eq!(buffer(&[0, 16, 0x80]), "#010ffffff80");
        assert_eq!(text("/a/x,y%}z"), "'/a/x%2Cy%25%7Dz");
    }

    #[test]
    fn bad_sets_are_refused() {
        let one = || vec![Migration::new().create("/a", b"", CreateMode::Persistent)];
        for bad in ["", "a/b", ".", ".."] {
            assert!(MigrationSet::new(bad, one()).is_err(), "{bad:?}");
        }
        assert!(MigrationSet::new("v", vec![Migration::new()]).is_err());
        assert_eq!(MigrationSet::new("v", one()).unwrap().migrations().len(), 1);
    }
}
