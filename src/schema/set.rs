//! A set of schemas and how a path finds its own.

use std::collections::HashMap;
use std::sync::OnceLock;

use super::rule::{Schema, Where};
use crate::error::{Error, Result};

/// The schemas of a framework (Curator's `SchemaSet`). A path's schema is the one with that
/// exact path, else the first pattern (in the order given) that matches the whole path, else
/// the default schema (everything allowed) when the set uses one, else none: the operation
/// fails with [`Error::SchemaViolation`] (`No schema found for: <path>`).
#[derive(Debug, Clone)]
pub struct SchemaSet {
    schemas: Vec<Schema>,
    exact: HashMap<String, usize>,
    patterns: Vec<usize>,
    use_default: bool,
}

impl SchemaSet {
    /// A set of `schemas`; `use_default` says whether a path no schema covers is allowed
    /// everything (true) or refused (false).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when two schemas share a name or an exact path (Curator
    /// refuses both too).
    pub fn new(schemas: Vec<Schema>, use_default: bool) -> Result<SchemaSet> {
        let mut names = HashMap::new();
        let mut exact = HashMap::new();
        let mut patterns = Vec::new();
        for (index, schema) in schemas.iter().enumerate() {
            if names.insert(schema.name().to_owned(), index).is_some() {
                return Err(Error::invalid_argument(
                    "schema set",
                    format!("two schemas are named {:?}", schema.name()),
                ));
            }
            match &schema.at {
                Where::Exact(path) => {
                    if exact.insert(path.clone(), index).is_some() {
                        return Err(Error::invalid_argument(
                            "schema set",
                            format!("two schemas have the path {path:?}"),
                        ));
                    }
                }
                Where::Pattern { .. } => patterns.push(index),
            }
        }
        Ok(SchemaSet { schemas, exact, patterns, use_default })
    }

    /// The default set: no schemas, everything allowed (Curator's `getDefaultSchemaSet`).
    pub fn default_set() -> SchemaSet {
        SchemaSet { schemas: Vec::new(), exact: HashMap::new(), patterns: Vec::new(), use_default: true }
    }

    /// The schemas, in the order given.
    pub fn schemas(&self) -> &[Schema] {
        &self.schemas
    }

    /// The schema named `name`, if any (Curator's `getNamedSchema`).
    pub fn named(&self, name: &str) -> Option<&Schema> {
        self.schemas.iter().find(|s| s.name() == name)
    }

    /// The schema of `path` (a path without the namespace).
    ///
    /// # Errors
    /// [`Error::SchemaViolation`] with no schema name when none matches and the set has no
    /// default.
    pub fn schema_for(&self, path: &str) -> Result<&Schema> {
        if let Some(&index) = self.exact.get(path) {
            return Ok(&self.schemas[index]);
        }
        if let Some(&index) = self.patterns.iter().find(|&&i| self.schemas[i].matches(path)) {
            return Ok(&self.schemas[index]);
        }
        if self.use_default {
            return Ok(default_schema());
        }
        Err(Error::SchemaViolation {
            schema: None,
            path: path.to_owned(),
            violation: format!("No schema found for: {path}"),
        })
    }

    /// A text describing every schema, for people (Curator's `toDocumentation`).
    pub fn to_documentation(&self) -> String {
        let mut text = String::from("Curator Schemas:\n\n");
        for schema in &self.schemas {
            text.push_str(schema.name());
            text.push('\n');
            text.push_str(&schema.to_documentation());
            text.push('\n');
        }
        text
    }
}

/// Curator's `__default__` schema: everything allowed.
fn default_schema() -> &'static Schema {
    static DEFAULT: OnceLock<Schema> = OnceLock::new();
    DEFAULT.get_or_init(|| {
        Schema::builder_for_default()
            .name("__default__")
            .documentation("Default schema")
            .build()
            .expect("the default schema is valid")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_paths_first_then_patterns_in_order_then_the_default() {
        let set = SchemaSet::new(
            vec![
                Schema::builder_for_pattern("/a/.*").name("first").build().unwrap(),
                Schema::builder_for_pattern("/a/b.*").name("second").build().unwrap(),
                Schema::builder("/a/b").name("exact").build().unwrap(),
            ],
            false,
        )
        .unwrap();
        assert_eq!(set.schema_for("/a/b").unwrap().name(), "exact");
        assert_eq!(set.schema_for("/a/bc").unwrap().name(), "first");
        assert!(matches!(set.schema_for("/z"), Err(Error::SchemaViolation { schema: None, .. })));
        assert_eq!(set.named("second").unwrap().raw_path(), "/a/b.*");
        let with_default = SchemaSet::new(vec![], true).unwrap();
        assert_eq!(with_default.schema_for("/z").unwrap().name(), "__default__");
        assert!(set.to_documentation().contains("Path Regex: /a/.*"));
    }

    #[test]
    fn duplicate_names_and_paths_are_refused() {
        let a = || Schema::builder("/a").name("a").build().unwrap();
        assert!(SchemaSet::new(vec![a(), a()], true).is_err());
        let other_name = Schema::builder("/a").name("b").build().unwrap();
        assert!(SchemaSet::new(vec![a(), other_name], true).is_err());
    }
}
