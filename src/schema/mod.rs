//! Schemas (feature `schema`; Curator's `org.apache.curator.framework.schema`): rules for what
//! may be done where in the tree, checked by the framework before any request is sent.
//!
//! A [`Schema`] names a path (exact, or a regular expression matching the whole path) and says
//! whether nodes there can, must or cannot be ephemeral, sequential or watched, whether they
//! can be deleted, and which data is valid (a [`SchemaValidator`]). A [`SchemaSet`] finds a
//! path's schema: an exact path first, then the first pattern that matches, in the order given,
//! then the default schema (anything goes) or, without one, a violation. Give the set to
//! [`FrameworkBuilder::schema_set`](crate::FrameworkBuilder::schema_set); every create,
//! `set_data`, delete, read (watched or not) and transaction operation of that framework is
//! checked against its path's schema, and a broken rule fails the operation with
//! [`Error::SchemaViolation`](crate::Error::SchemaViolation) naming the schema and the rule.
//!
//! Paths are the paths the operations are given, without the framework's namespace (as in
//! Curator). The recipes' own requests (lock nodes, caches, ...) are not checked: only the
//! framework's data-plane operations are.
//!
//! [`SchemaSet::from_json`] reads Curator's `SchemaSetLoader` JSON: a list of objects with
//! `name` and `path` (required), `isRegex`, `documentation`, `schemaValidator` (a name the
//! caller maps to a validator), `ephemeral`, `sequential`, `watched` (`"CAN"`, `"MUST"` or
//! `"CANNOT"`, default `"CAN"`), `canBeDeleted` (default **false**, as Curator's loader reads it;
//! the builder's default is true) and `metadata` (an object of strings). The same file loaded
//! by Curator 5.4 accepts and refuses the same operations. Patterns use the `regex` crate's
//! syntax (`regex-automata`), which agrees with Java's for the usual path patterns (`.*`,
//! classes, groups, alternation, repetition); look-around and back-references are refused, and
//! so is a pattern with an unbalanced group (as Java refuses it). Where the two differ: `\w`,
//! `\d`, `\s` and `(?i)` are Unicode-aware here and ASCII in Java (`/users/\w+` matches
//! `/users/é` here only: write `[A-Za-z0-9_]+` for the same answer on both sides), and `.`
//! matches U+2028 and U+2029 here.
//!
//! | file | holds |
//! | --- | --- |
//! | `rule.rs` | [`Schema`], its builder, [`Allowance`], [`SchemaValidator`] and the checks |
//! | `set.rs` | [`SchemaSet`]: finding a path's schema |
//! | `loader.rs` | Curator's JSON format |

mod loader;
mod rule;
mod set;

pub use self::rule::{Allowance, Schema, SchemaBuilder, SchemaValidator};
pub use self::set::SchemaSet;
