//! One schema: where it applies, what it allows, and the checks.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use regex_automata::meta::Regex;
use zookeeper_client::{Acl, CreateMode};

use crate::error::{Error, Result};

/// Whether nodes of a schema can, must or cannot be something (Curator's `Schema.Allowance`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Allowance {
    /// Either way (the default).
    #[default]
    Can,
    /// Always.
    Must,
    /// Never.
    Cannot,
}

impl Allowance {
    /// Curator's name (`CAN`, `MUST`, `CANNOT`), case-insensitive as its loader reads it.
    pub(crate) fn parse(name: &str) -> Option<Allowance> {
        match name.to_ascii_uppercase().as_str() {
            "CAN" => Some(Allowance::Can),
            "MUST" => Some(Allowance::Must),
            "CANNOT" => Some(Allowance::Cannot),
            _ => None,
        }
    }

    /// Curator's name for it.
    fn curator_name(self) -> &'static str {
        match self {
            Allowance::Can => "CAN",
            Allowance::Must => "MUST",
            Allowance::Cannot => "CANNOT",
        }
    }

    /// The violation when a node that `is` (or is not) something breaks this allowance.
    fn violation(self, is: bool, what: &str) -> Option<String> {
        match (self, is) {
            (Allowance::Cannot, true) => Some(format!("Cannot be {what}")),
            (Allowance::Must, false) => Some(format!("Must be {what}")),
            _ => None,
        }
    }
}

/// Decides whether the data (and, for creates and ACL changes, the ACL) of an operation is
/// valid under a schema (Curator's `SchemaValidator`). `data` is `None` for an ACL change;
/// `acl` is `None` for a data change.
pub trait SchemaValidator: fmt::Debug + Send + Sync + 'static {
    /// True when the operation may go ahead.
    fn is_valid(&self, schema: &Schema, path: &str, data: Option<&[u8]>, acl: Option<&[Acl]>) -> bool;
}

/// Where a schema applies.
#[derive(Clone)]
pub(crate) enum Where {
    Exact(String),
    Pattern { source: String, regex: Regex },
}

/// A rule for the nodes at one path, or at every path a pattern matches (Curator's `Schema`).
/// Built with [`Schema::builder`], [`Schema::builder_for_pattern`] or the recipe shorthands,
/// or loaded with [`SchemaSet::from_json`](super::SchemaSet::from_json).
#[derive(Clone)]
pub struct Schema {
    pub(crate) name: String,
    pub(crate) at: Where,
    documentation: String,
    validator: Option<Arc<dyn SchemaValidator>>,
    ephemeral: Allowance,
    sequential: Allowance,
    watched: Allowance,
    can_be_deleted: bool,
    metadata: BTreeMap<String, String>,
}

impl fmt::Debug for Schema {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Schema")
            .field("name", &self.name)
            .field("path", &self.raw_path())
            .field("is_pattern", &self.is_pattern())
            .field("ephemeral", &self.ephemeral)
            .field("sequential", &self.sequential)
            .field("watched", &self.watched)
            .field("can_be_deleted", &self.can_be_deleted)
            .field("validator", &self.validator)
            .field("metadata", &self.metadata)
            .finish()
    }
}

impl Schema {
    /// A schema for exactly `path` (exact paths win over patterns). A trailing `/` is dropped,
    /// as Curator does. An invalid path (one no node can have) is reported by
    /// [`SchemaBuilder::build`].
    pub fn builder(path: &str) -> SchemaBuilder {
        let path = match path.strip_suffix('/') {
            Some(rest) if !rest.is_empty() => rest,
            _ => path,
        };
        SchemaBuilder::new(crate::path::validate(path).map(|()| Where::Exact(path.to_owned())))
    }

    /// The place of Curator's `__default__` schema: the empty path, which no node has (a set
    /// falls back to that schema; no path selects it).
    pub(crate) fn builder_for_default() -> SchemaBuilder {
        SchemaBuilder::new(Ok(Where::Exact(String::new())))
    }

    /// A schema for every path that `pattern` matches as a whole (Java's `matches()`).
    /// An invalid pattern is reported by [`SchemaBuilder::build`].
    pub fn builder_for_pattern(pattern: &str) -> SchemaBuilder {
        SchemaBuilder::new(compile(pattern))
    }

    /// Curator's `builderForRecipeParent`: the parent node of a recipe (neither sequential nor
    /// ephemeral).
    pub fn builder_for_recipe_parent(parent_path: &str) -> SchemaBuilder {
        Self::builder(parent_path).sequential(Allowance::Cannot).ephemeral(Allowance::Cannot)
    }

    /// Curator's `builderForRecipe`: the children of a recipe's parent (`<parent>/.*`: must be
    /// sequential, ephemeral and watched; can be deleted).
    pub fn builder_for_recipe(parent_path: &str) -> SchemaBuilder {
        let pattern = if parent_path == "/" { "/.*".to_owned() } else { format!("{parent_path}/.*") };
        SchemaBuilder::new(crate::path::validate(parent_path).and_then(|()| compile(&pattern)))
            .sequential(Allowance::Must)
            .ephemeral(Allowance::Must)
            .watched(Allowance::Must)
            .can_be_deleted(true)
    }

    /// The schema's name (unique in its set).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The exact path, or the pattern as given (Curator's `getRawPath`).
    pub fn raw_path(&self) -> &str {
        match &self.at {
            Where::Exact(path) => path,
            Where::Pattern { source, .. } => source,
        }
    }

    /// True when the schema applies to a pattern rather than one path.
    pub fn is_pattern(&self) -> bool {
        matches!(self.at, Where::Pattern { .. })
    }

    /// The documentation string.
    pub fn documentation(&self) -> &str {
        &self.documentation
    }

    /// Whether nodes here can, must or cannot be ephemeral.
    pub fn ephemeral(&self) -> Allowance {
        self.ephemeral
    }

    /// Whether nodes here can, must or cannot be sequential.
    pub fn sequential(&self) -> Allowance {
        self.sequential
    }

    /// Whether reads here can, must or cannot leave a watch.
    pub fn watched(&self) -> Allowance {
        self.watched
    }

    /// Whether nodes here may be deleted.
    pub fn can_be_deleted(&self) -> bool {
        self.can_be_deleted
    }

    /// Free-form metadata.
    pub fn metadata(&self) -> &BTreeMap<String, String> {
        &self.metadata
    }

    /// Whether the schema applies to `path`.
    pub(crate) fn matches(&self, path: &str) -> bool {
        match &self.at {
            Where::Exact(exact) => exact == path,
            Where::Pattern { regex, .. } => regex.is_match(path),
        }
    }

    fn violation(&self, path: &str, violation: String) -> Error {
        Error::SchemaViolation { schema: Some(self.name.clone()), path: path.to_owned(), violation }
    }

    /// Curator's `validateDelete`.
    pub(crate) fn check_delete(&self, path: &str) -> Result<()> {
        if !self.can_be_deleted {
            return Err(self.violation(path, "Cannot be deleted".into()));
        }
        Ok(())
    }

    /// Curator's `validateWatch`: every read is checked, watched or not.
    pub(crate) fn check_read(&self, path: &str, watched: bool) -> Result<()> {
        match self.watched.violation(watched, "watched") {
            Some(violation) => Err(self.violation(path, violation)),
            None => Ok(()),
        }
    }

    /// Curator's `validateCreate`: the mode, then the data.
    pub(crate) fn check_create(&self, path: &str, mode: CreateMode, data: &[u8], acl: &[Acl]) -> Result<()> {
        let ephemeral = matches!(mode, CreateMode::Ephemeral | CreateMode::EphemeralSequential);
        let sequential = matches!(mode, CreateMode::PersistentSequential | CreateMode::EphemeralSequential);
        let broken = self
            .ephemeral
            .violation(ephemeral, "ephemeral")
            .or_else(|| self.sequential.violation(sequential, "sequential"));
        if let Some(violation) = broken {
            return Err(self.violation(path, violation));
        }
        self.check_data(path, Some(data), Some(acl))
    }

    /// Curator's `validateGeneral`: the validator's word on the data (or the ACL).
    pub(crate) fn check_data(&self, path: &str, data: Option<&[u8]>, acl: Option<&[Acl]>) -> Result<()> {
        match &self.validator {
            Some(validator) if !validator.is_valid(self, path, data, acl) => {
                Err(self.violation(path, "Data is not valid".into()))
            }
            _ => Ok(()),
        }
    }

    /// Curator's `toDocumentation`.
    pub(crate) fn to_documentation(&self) -> String {
        let label = if self.is_pattern() { "Path Regex: " } else { "Path: " };
        let validator =
            self.validator.as_ref().map_or_else(|| "DefaultSchemaValidator".to_owned(), |v| format!("{v:?}"));
        format!(
            "Name: {}\n{label}{}\nDoc: {}\nValidator: {validator}\nMeta: {:?}\nephemeral: {} | sequential: {} | watched: {} | canBeDeleted: {}\n",
            self.name,
            self.raw_path(),
            self.documentation,
            self.metadata,
            self.ephemeral.curator_name(),
            self.sequential.curator_name(),
            self.watched.curator_name(),
            self.can_be_deleted
        )
    }
}

fn compile(pattern: &str) -> Result<Where> {
    // The pattern alone first: one with an unbalanced group (`a)|(?:.*`) would otherwise
    // close the anchoring group early and match every path, where Java refuses it.
    let whole = match Regex::new(pattern) {
        Ok(_) => Regex::new(&format!("^(?:{pattern})$")),
        Err(e) => Err(e),
    };
    match whole {
        Ok(regex) => Ok(Where::Pattern { source: pattern.to_owned(), regex }),
        Err(e) => {
            Err(Error::invalid_argument("schema path pattern", format!("{pattern:?} is not a valid pattern: {e}")))
        }
    }
}

/// Builds a [`Schema`] (Curator's `SchemaBuilder`; the same defaults: a random name, no
/// documentation, every data valid, ephemeral, sequential and watched `Can`, deletable).
#[derive(Debug, Clone)]
#[must_use = "a builder does nothing until `build()`"]
pub struct SchemaBuilder {
    at: Result<Where, String>,
    name: Option<String>,
    documentation: String,
    validator: Option<Arc<dyn SchemaValidator>>,
    ephemeral: Allowance,
    sequential: Allowance,
    watched: Allowance,
    can_be_deleted: bool,
    metadata: BTreeMap<String, String>,
}

impl fmt::Debug for Where {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Where::Exact(path) => write!(f, "Exact({path:?})"),
            Where::Pattern { source, .. } => write!(f, "Pattern({source:?})"),
        }
    }
}

impl SchemaBuilder {
    fn new(at: Result<Where>) -> Self {
        Self {
            at: at.map_err(|e| e.to_string()),
            name: None,
            documentation: String::new(),
            validator: None,
            ephemeral: Allowance::Can,
            sequential: Allowance::Can,
            watched: Allowance::Can,
            can_be_deleted: true,
            metadata: BTreeMap::new(),
        }
    }

    /// The schema's name (default: a random UUID, as Curator's).
    pub fn name(mut self, name: &str) -> Self {
        self.name = Some(name.to_owned());
        self
    }

    /// The documentation string.
    pub fn documentation(mut self, documentation: &str) -> Self {
        self.documentation = documentation.to_owned();
        self
    }

    /// The data validator (default: every data is valid).
    pub fn validator(mut self, validator: Arc<dyn SchemaValidator>) -> Self {
        self.validator = Some(validator);
        self
    }

    /// Whether created nodes can, must or cannot be ephemeral.
    pub fn ephemeral(mut self, allowance: Allowance) -> Self {
        self.ephemeral = allowance;
        self
    }

    /// Whether created nodes can, must or cannot be sequential.
    pub fn sequential(mut self, allowance: Allowance) -> Self {
        self.sequential = allowance;
        self
    }

    /// Whether reads can, must or cannot leave a watch.
    pub fn watched(mut self, allowance: Allowance) -> Self {
        self.watched = allowance;
        self
    }

    /// Whether nodes may be deleted (default true).
    pub fn can_be_deleted(mut self, can: bool) -> Self {
        self.can_be_deleted = can;
        self
    }

    /// Free-form metadata, replacing any set before.
    pub fn metadata(mut self, metadata: BTreeMap<String, String>) -> Self {
        self.metadata = metadata;
        self
    }

    /// The schema.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a pattern that does not compile or an empty name.
    pub fn build(self) -> Result<Schema> {
        let at = self.at.map_err(|reason| Error::invalid_argument("schema path pattern", reason))?;
        let name = self.name.unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
        if name.is_empty() {
            return Err(Error::invalid_argument("schema name", "is empty"));
        }
        Ok(Schema {
            name,
            at,
            documentation: self.documentation,
            validator: self.validator,
            ephemeral: self.ephemeral,
            sequential: self.sequential,
            watched: self.watched,
            can_be_deleted: self.can_be_deleted,
            metadata: self.metadata,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_match_whole_paths_and_exact_paths_drop_a_trailing_slash() {
        let schema = Schema::builder_for_pattern("/a/[0-9]+").build().unwrap();
        assert!(schema.matches("/a/12"));
        assert!(!schema.matches("/a/12/b"), "a pattern matches the whole path");
        assert!(!schema.matches("/x/a/12"));
        let exact = Schema::builder("/a/b/").build().unwrap();
        assert_eq!(exact.raw_path(), "/a/b");
        assert!(exact.matches("/a/b") && !exact.matches("/a/b/c"));
        assert!(Schema::builder_for_pattern("/a/(").build().is_err());
        // Unbalanced groups that would close the anchors early (and match every path) are
        // refused, as Java's Pattern refuses them.
        for escaping in ["/a)|(?:.*", "x)|(?:/y"] {
            assert!(Schema::builder_for_pattern(escaping).build().is_err(), "{escaping:?}");
        }
        assert!(Schema::builder("/a").name("").build().is_err());
        let root = Schema::builder("/").build().unwrap();
        assert!(root.matches("/") && !root.matches("/a"), "the root keeps its one slash");
    }

    #[test]
    fn a_path_no_node_can_have_is_refused() {
        for bad in ["", "a", "a/b", "/a//b", "/a/./b", "/a\0b"] {
            let refused = |b: SchemaBuilder| matches!(b.build(), Err(Error::InvalidArgument { .. }));
            assert!(refused(Schema::builder(bad)), "{bad:?}");
            assert!(refused(Schema::builder_for_recipe(bad)), "{bad:?}");
            assert!(refused(Schema::builder_for_recipe_parent(bad)), "{bad:?}");
        }
    }

    #[test]
    fn checks_name_the_rule_broken() {
        let schema = Schema::builder("/n")
            .name("n")
            .ephemeral(Allowance::Must)
            .sequential(Allowance::Cannot)
            .watched(Allowance::Must)
            .can_be_deleted(false)
            .build()
            .unwrap();
        let rule = |r: Result<()>| match r {
            Err(Error::SchemaViolation { schema, violation, .. }) => {
                assert_eq!(schema.as_deref(), Some("n"));
                violation
            }
            other => panic!("{other:?}"),
        };
        assert_eq!(rule(schema.check_create("/n", CreateMode::Persistent, b"", &[])), "Must be ephemeral");
        assert_eq!(rule(schema.check_create("/n", CreateMode::EphemeralSequential, b"", &[])), "Cannot be sequential");
        assert!(schema.check_create("/n", CreateMode::Ephemeral, b"", &[]).is_ok());
        assert_eq!(rule(schema.check_delete("/n")), "Cannot be deleted");
        assert_eq!(rule(schema.check_read("/n", false)), "Must be watched");
        assert!(schema.check_read("/n", true).is_ok());
        let recipe = Schema::builder_for_recipe("/r").build().unwrap();
        assert!(recipe.matches("/r/x") && !recipe.matches("/r"));
        assert!(recipe.check_create("/r/x", CreateMode::EphemeralSequential, b"", &[]).is_ok());
    }

    #[derive(Debug)]
    struct NonEmpty;

    impl SchemaValidator for NonEmpty {
        fn is_valid(&self, _schema: &Schema, _path: &str, data: Option<&[u8]>, _acl: Option<&[Acl]>) -> bool {
            data.map_or(true, |d| !d.is_empty())
        }
    }

    #[test]
    fn the_validator_judges_the_data() {
        let schema = Schema::builder("/v").validator(Arc::new(NonEmpty)).build().unwrap();
        assert!(matches!(
            schema.check_create("/v", CreateMode::Persistent, b"", &[]),
            Err(Error::SchemaViolation { violation, .. }) if violation == "Data is not valid"
        ));
        assert!(schema.check_data("/v", Some(b"x"), None).is_ok());
        assert!(schema.check_data("/v", None, Some(&[])).is_ok());
    }
}
