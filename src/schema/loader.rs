//! Curator's `SchemaSetLoader` JSON format.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::Value;

use super::rule::{Allowance, Schema, SchemaValidator};
use super::set::SchemaSet;
use crate::error::{Error, Result};

impl SchemaSet {
    /// Reads Curator's `SchemaSetLoader` JSON (see the [module](crate::schema) for the fields),
    /// with no data validators: a schema naming a `schemaValidator` is refused, as Curator's
    /// loader refuses it without a mapper.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming what is wrong: not JSON, a missing `name` or `path`,
    /// an unknown allowance, a pattern that does not compile, duplicate names or paths.
    pub fn from_json(json: &str, use_default: bool) -> Result<SchemaSet> {
        Self::from_json_with_validators(json, use_default, |_| None)
    }

    /// [`from_json`](Self::from_json), with `validators` mapping each `schemaValidator` name
    /// to its validator (Curator's `SchemaValidatorMapper`).
    ///
    /// # Errors
    /// As [`from_json`](Self::from_json); also a validator name `validators` does not know.
    pub fn from_json_with_validators(
        json: &str,
        use_default: bool,
        validators: impl Fn(&str) -> Option<Arc<dyn SchemaValidator>>,
    ) -> Result<SchemaSet> {
        let root: Value = serde_json::from_str(json).map_err(|e| bad(format!("not JSON: {e}")))?;
        let nodes: Vec<&Value> = match &root {
            Value::Array(items) => items.iter().collect(),
            Value::Object(fields) => fields.values().collect(),
            _ => return Err(bad("the root must be a list of schemas".into())),
        };
        let schemas = nodes.into_iter().map(|node| read(node, &validators)).collect::<Result<Vec<_>>>()?;
        SchemaSet::new(schemas, use_default)
    }
}

fn bad(reason: String) -> Error {
    Error::invalid_argument("schema JSON", reason)
}

fn read(node: &Value, validators: &dyn Fn(&str) -> Option<Arc<dyn SchemaValidator>>) -> Result<Schema> {
    let name = text(node, "name").ok_or_else(|| bad(format!("name is required at: {node}")))?;
    let path = text(node, "path").ok_or_else(|| bad(format!("path is required at: {node}")))?;
    let mut builder =
        if boolean(node, "isRegex") { Schema::builder_for_pattern(&path) } else { Schema::builder(&path) };
    if let Some(validator) = text(node, "schemaValidator") {
        let found =
            validators(&validator).ok_or_else(|| bad(format!("unknown schemaValidator {validator:?} at: {node}")))?;
        builder = builder.validator(found);
    }
    let mut metadata = BTreeMap::new();
    if let Some(Value::Object(fields)) = node.get("metadata") {
        for (key, value) in fields {
            metadata.insert(key.clone(), as_text(value));
        }
    }
    builder
        .name(&name)
        .documentation(&text(node, "documentation").unwrap_or_default())
        .ephemeral(allowance(node, "ephemeral")?)
        .sequential(allowance(node, "sequential")?)
        .watched(allowance(node, "watched")?)
        .can_be_deleted(boolean(node, "canBeDeleted"))
        .metadata(metadata)
        .build()
}

/// Jackson's `asText()`: a string as it is, other scalars printed, containers empty.
fn as_text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Null => "null".to_owned(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::Array(_) | Value::Object(_) => String::new(),
    }
}

fn text(node: &Value, field: &str) -> Option<String> {
    node.get(field).map(as_text)
}

/// Jackson's `asBoolean()`: `true`, the text "true", or a non-zero number; false otherwise and
/// when absent.
fn boolean(node: &Value, field: &str) -> bool {
    match node.get(field) {
        Some(Value::Bool(b)) => *b,
        Some(Value::String(s)) => s.trim() == "true",
        Some(Value::Number(n)) => n.as_f64().is_some_and(|n| n != 0.0),
        _ => false,
    }
}

fn allowance(node: &Value, field: &str) -> Result<Allowance> {
    match node.get(field) {
        None => Ok(Allowance::Can),
        Some(value) => Allowance::parse(&as_text(value))
            .ok_or_else(|| bad(format!("{field} must be one of: [CAN, MUST, CANNOT] at {node}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CURATOR_EXAMPLE: &str = r#"[
        {
            "name": "test",
            "path": "/a/b/c",
            "ephemeral": "MUST",
            "sequential": "CANNOT",
            "metadata": { "one": 1, "two": "2" }
        },
        {
            "name": "test2",
            "path": "/a/.*",
            "isRegex": true,
            "schemaValidator": "test",
            "ephemeral": "CANNOT",
            "canBeDeleted": true
        }
    ]"#;

    #[derive(Debug)]
    struct Always;

    impl SchemaValidator for Always {
        fn is_valid(&self, _: &Schema, _: &str, _: Option<&[u8]>, _: Option<&[zookeeper_client::Acl]>) -> bool {
            true
        }
    }

    #[test]
    fn reads_curators_format_with_its_defaults() {
        let set = SchemaSet::from_json_with_validators(CURATOR_EXAMPLE, true, |name| {
            (name == "test").then(|| Arc::new(Always) as Arc<dyn SchemaValidator>)
        })
        .unwrap();
        let test = set.named("test").unwrap();
        assert_eq!(test.ephemeral(), Allowance::Must);
        assert_eq!(test.sequential(), Allowance::Cannot);
        assert_eq!(test.watched(), Allowance::Can);
        assert!(!test.can_be_deleted(), "the loader's default is false");
        assert_eq!(test.metadata().get("one").map(String::as_str), Some("1"));
        let test2 = set.named("test2").unwrap();
        assert!(test2.is_pattern() && test2.can_be_deleted());
        assert_eq!(set.schema_for("/a/x").unwrap().name(), "test2");
        assert_eq!(set.schema_for("/a/b/c").unwrap().name(), "test");
    }

    #[test]
    fn bad_input_is_a_typed_error() {
        assert!(SchemaSet::from_json(CURATOR_EXAMPLE, true).is_err(), "a validator without a mapper");
        for bad in [
            "not json",
            "3",
            r#"[{"path": "/a"}]"#,
            r#"[{"name": "a"}]"#,
            r#"[{"name": "a", "path": "/a", "ephemeral": "SOMETIMES"}]"#,
            r#"[{"name": "a", "path": "/a/(", "isRegex": true}]"#,
        ] {
            assert!(matches!(SchemaSet::from_json(bad, true), Err(Error::InvalidArgument { .. })), "{bad}");
        }
        assert_eq!(SchemaSet::from_json("[]", false).unwrap().schemas().len(), 0);
    }
}
