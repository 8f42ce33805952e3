//! The framework's schema check: every data-plane operation asks it before sending (a no-op
//! without the `schema` feature or without a schema set).

use zookeeper_client::{Acl, CreateMode};

use super::Framework;
use crate::error::Result;

/// What an operation is about to do at a path, as the schema sees it (read only with the
/// `schema` feature).
#[derive(Debug, Clone, Copy)]
#[cfg_attr(not(feature = "schema"), allow(dead_code))]
pub(crate) enum SchemaOp<'a> {
    Create {
        mode: CreateMode,
        data: &'a [u8],
        acl: &'a [Acl],
    },
    SetData(&'a [u8]),
    SetAcl(&'a [Acl]),
    Delete,
    Read {
        watched: bool,
    },
    /// A transaction's version check: only looked up (a path no schema covers is refused),
    /// as Curator's transaction looks up the schema of every operation.
    Check,
}

impl Framework {
    /// Checks `op` at `path` (a user path, without the namespace) against the schema set.
    ///
    /// # Errors
    /// [`Error::SchemaViolation`](crate::Error::SchemaViolation) naming the schema and the rule.
    #[cfg_attr(not(feature = "schema"), allow(clippy::unnecessary_wraps, unused_variables))]
    pub(crate) fn check_schema(&self, path: &str, op: SchemaOp<'_>) -> Result<()> {
        #[cfg(feature = "schema")]
        if let Some(set) = &self.config().schema_set {
            let schema = set.schema_for(path)?;
            return match op {
                SchemaOp::Create { mode, data, acl } => schema.check_create(path, mode, data, acl),
                SchemaOp::SetData(data) => schema.check_data(path, Some(data), None),
                SchemaOp::SetAcl(acl) => schema.check_data(path, None, Some(acl)),
                SchemaOp::Delete => schema.check_delete(path),
                SchemaOp::Read { watched } => schema.check_read(path, watched),
                SchemaOp::Check => Ok(()),
            };
        }
        Ok(())
    }

    /// The schema set every operation of this framework is checked against (feature
    /// `schema`), if one was given to [`FrameworkBuilder::schema_set`](crate::FrameworkBuilder::schema_set).
    #[cfg(feature = "schema")]
    pub fn schema_set(&self) -> Option<&crate::schema::SchemaSet> {
        self.config().schema_set.as_deref()
    }
}
