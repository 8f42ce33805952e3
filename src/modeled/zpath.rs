//! [`ZPath`]: a ZooKeeper path template with named parameters (Curator's `ZPath`).

use std::fmt;

use crate::error::{Error, Result};
use crate::path;

/// One segment of a [`ZPath`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Segment {
    /// A node name.
    Name(String),
    /// A parameter, by its name (`id` for `{id}`).
    Parameter(String),
}

/// A ZooKeeper path that may have named parameters (Curator's `ZPath`): `/orders/{id}` is the
/// template of `/orders/42`, `/orders/43`, ... [`resolved`](Self::resolved) fills the
/// parameters in, in order; [`ids`](Self::ids) reads them back from a node's path.
///
/// ```
/// use zk_recipes::ZPath;
///
/// let template = ZPath::parse_with_ids("/tenants/{tenant}/orders/{id}")?;
/// assert_eq!(template.parameters(), ["tenant", "id"]);
/// assert!(template.full_path().is_err()); // not resolved
///
/// let order = template.resolved(["acme", "42"])?;
/// assert_eq!(order.full_path()?, "/tenants/acme/orders/42");
/// assert_eq!(template.ids("/tenants/acme/orders/42"), Some(vec!["acme".to_owned(), "42".to_owned()]));
/// assert_eq!(template.ids("/tenants/acme/invoices/42"), None);
///
/// // Partly resolved, as Curator allows: the rest stays a parameter.
/// let acme = template.resolved(["acme"])?;
/// assert_eq!(acme.to_string(), "/tenants/acme/orders/{id}");
/// # Ok::<(), zk_recipes::Error>(())
/// ```
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct ZPath {
    segments: Vec<Segment>,
}

fn is_parameter(segment: &str) -> bool {
    segment.len() >= 2 && segment.starts_with('{') && segment.ends_with('}')
}

/// Checks one node name (a value for a parameter, or a child's name).
fn check_name(name: &str) -> Result<()> {
    if name.is_empty() {
        return Err(Error::InvalidPath { path: name.to_owned(), reason: "a node name must not be empty" });
    }
    if name.contains('/') {
        return Err(Error::InvalidPath { path: name.to_owned(), reason: "a node name must not contain '/'" });
    }
    path::validate(&format!("/{name}")).map_err(|_| Error::InvalidPath {
        path: name.to_owned(),
        reason: "not a valid node name (empty, '.', '..', or a forbidden character)",
    })
}

impl ZPath {
    /// The root, `/`.
    pub fn root() -> ZPath {
        ZPath { segments: Vec::new() }
    }

    /// A path with no parameters (Curator's `ZPath.parse`): every segment is a node name,
    /// `{id}` included.
    ///
    /// # Errors
    /// [`Error::InvalidPath`] for a path ZooKeeper would refuse.
    pub fn parse(path: &str) -> Result<ZPath> {
        Self::parse_as(path, false)
    }

    /// A path whose `{name}` segments are parameters (Curator's `ZPath.parseWithIds`). Values
    /// go to parameters by position; a name may repeat, as in Curator's own `/foo/{id}/bar/{id}`
    /// (where the name only documents).
    ///
    /// # Errors
    /// [`Error::InvalidPath`] for a path ZooKeeper would refuse (parameters aside).
    #[doc(alias = "parseWithIds")]
    pub fn parse_with_ids(path: &str) -> Result<ZPath> {
        Self::parse_as(path, true)
    }

    fn parse_as(full: &str, ids: bool) -> Result<ZPath> {
        path::validate(full)?;
        let mut segments = Vec::new();
        if full != "/" {
            for segment in full[1..].split('/') {
                if ids && is_parameter(segment) {
                    let name = &segment[1..segment.len() - 1];
                    segments.push(Segment::Parameter(name.to_owned()));
                } else {
                    segments.push(Segment::Name(segment.to_owned()));
                }
            }
        }
        Ok(ZPath { segments })
    }

    /// This path with a child node `name` (Curator's `child`).
    ///
    /// # Errors
    /// [`Error::InvalidPath`] for a name that is not a valid node name.
    pub fn child(&self, name: impl fmt::Display) -> Result<ZPath> {
        let name = name.to_string();
        check_name(&name)?;
        let mut segments = self.segments.clone();
        segments.push(Segment::Name(name));
        Ok(ZPath { segments })
    }

    /// This path with a child that is a parameter named `name` (`{name}`; the name may repeat
    /// one the path has).
    ///
    /// # Errors
    /// [`Error::InvalidPath`] when the name is not a valid node name.
    pub fn child_parameter(&self, name: &str) -> Result<ZPath> {
        check_name(name)?;
        let mut segments = self.segments.clone();
        segments.push(Segment::Parameter(name.to_owned()));
        Ok(ZPath { segments })
    }

    /// The parent path (Curator's `parent`); `None` for the root.
    pub fn parent(&self) -> Option<ZPath> {
        let (_, parent) = self.segments.split_last()?;
        Some(ZPath { segments: parent.to_vec() })
    }

    /// The last segment as written (`42`, or `{id}` for a parameter); `None` for the root.
    pub fn node_name(&self) -> Option<String> {
        self.segments.last().map(|segment| match segment {
            Segment::Name(name) => name.clone(),
            Segment::Parameter(name) => format!("{{{name}}}"),
        })
    }

    /// The names of the parameters still to resolve, in order.
    pub fn parameters(&self) -> Vec<&str> {
        self.segments
            .iter()
            .filter_map(|segment| match segment {
                Segment::Parameter(name) => Some(name.as_str()),
                Segment::Name(_) => None,
            })
            .collect()
    }

    /// True when no parameter is left: the path names one node.
    pub fn is_resolved(&self) -> bool {
        self.segments.iter().all(|segment| matches!(segment, Segment::Name(_)))
    }

    /// True when the last segment is the only parameter left: the template of a directory's
    /// children, whose names are its values (as [`ModeledFramework::ids`](crate::ModeledFramework::ids) lists them).
    pub fn is_resolved_but_last(&self) -> bool {
        match self.segments.split_last() {
            Some((Segment::Parameter(_), rest)) => rest.iter().all(|segment| matches!(segment, Segment::Name(_))),
            _ => false,
        }
    }

    /// This path with its parameters given `values`, in order (Curator's `resolved`): fewer
    /// values than parameters resolve the first ones and leave the rest. Each value is written
    /// with `Display`.
    ///
    /// # Errors
    /// [`Error::InvalidPath`] for a value that is not a valid node name (empty, with a `/`,
    /// `.`, `..`, control characters); [`Error::InvalidArgument`] for more values than
    /// parameters.
    pub fn resolved<I>(&self, values: I) -> Result<ZPath>
    where
        I: IntoIterator,
        I::Item: fmt::Display,
    {
        let mut values = values.into_iter();
        let mut segments = Vec::with_capacity(self.segments.len());
        for segment in &self.segments {
            match segment {
                Segment::Parameter(_) => match values.next() {
                    Some(value) => {
                        let value = value.to_string();
                        check_name(&value)?;
                        segments.push(Segment::Name(value));
                    }
                    None => segments.push(segment.clone()),
                },
                Segment::Name(_) => segments.push(segment.clone()),
            }
        }
        if values.next().is_some() {
            return Err(Error::invalid_argument(
                "values",
                format!("{self} has {} parameters; more values were given", self.parameters().len()),
            ));
        }
        Ok(ZPath { segments })
    }

    /// This path with the parameters named in `values` resolved; the others stay. Where a name
    /// repeats, each value goes to the first parameter of that name still unresolved.
    ///
    /// # Errors
    /// [`Error::InvalidPath`] for a value that is not a valid node name;
    /// [`Error::InvalidArgument`] for a name that is not one of the parameters.
    pub fn resolved_named<K, V>(&self, values: impl IntoIterator<Item = (K, V)>) -> Result<ZPath>
    where
        K: AsRef<str>,
        V: fmt::Display,
    {
        let mut segments = self.segments.clone();
        for (name, value) in values {
            let name = name.as_ref();
            let Some(slot) = segments.iter_mut().find(|s| matches!(s, Segment::Parameter(n) if n == name)) else {
                return Err(Error::invalid_argument("values", format!("{self} has no parameter {name:?}")));
            };
            let value = value.to_string();
            check_name(&value)?;
            *slot = Segment::Name(value);
        }
        Ok(ZPath { segments })
    }

    /// The segments before the first parameter (the whole path when it is resolved).
    pub(crate) fn fixed_prefix(&self) -> ZPath {
        let end = self.segments.iter().position(|s| matches!(s, Segment::Parameter(_))).unwrap_or(self.segments.len());
        ZPath { segments: self.segments[..end].to_vec() }
    }

    /// The path of the node (Curator's `fullPath`).
    ///
    /// # Errors
    /// [`Error::InvalidPath`] while a parameter is unresolved.
    pub fn full_path(&self) -> Result<String> {
        if !self.is_resolved() {
            return Err(Error::InvalidPath { path: self.to_string(), reason: "the path has unresolved parameters" });
        }
        Ok(self.to_string())
    }

    /// The values of this template's parameters in `path`, in order, when `path` has the
    /// template's shape (as many segments, the same names where the template has names);
    /// `None` otherwise.
    pub fn ids(&self, path: &str) -> Option<Vec<String>> {
        let segments: Vec<&str> = if path == "/" { Vec::new() } else { path.strip_prefix('/')?.split('/').collect() };
        if segments.len() != self.segments.len() {
            return None;
        }
        let mut ids = Vec::new();
        for (segment, found) in self.segments.iter().zip(segments) {
            match segment {
                Segment::Name(name) if name == found => {}
                Segment::Name(_) => return None,
                Segment::Parameter(_) if found.is_empty() => return None,
                Segment::Parameter(_) => ids.push(found.to_owned()),
            }
        }
        Some(ids)
    }
}

impl fmt::Display for ZPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.segments.is_empty() {
            return f.write_str("/");
        }
        for segment in &self.segments {
            match segment {
                Segment::Name(name) => write!(f, "/{name}")?,
                Segment::Parameter(name) => write!(f, "/{{{name}}}")?,
            }
        }
        Ok(())
    }
}

impl fmt::Debug for ZPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ZPath({self})")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_resolves_and_matches() {
        let t = ZPath::parse_with_ids("/a/{x}/b/{y}").unwrap();
        assert_eq!(t.to_string(), "/a/{x}/b/{y}");
        assert!(!t.is_resolved());
        assert_eq!(t.resolved(["1", "2"]).unwrap().full_path().unwrap(), "/a/1/b/2");
        assert_eq!(t.resolved_named([("y", 7)]).unwrap().to_string(), "/a/{x}/b/7");
        assert!(t.resolved_named([("z", 7)]).is_err());
        assert!(t.resolved(["1", "2", "3"]).is_err());
        assert!(t.resolved(["a/b"]).is_err());
        assert!(t.resolved([".."]).is_err());
        assert!(t.resolved([""]).is_err());
        assert_eq!(t.ids("/a/1/b/2"), Some(vec!["1".into(), "2".into()]));
        assert_eq!(t.ids("/a/1/b"), None);
        assert_eq!(t.ids("/a/1/c/2"), None);
        // A repeated name, as Curator's templates write every parameter `{id}`: by position.
        let twice = ZPath::parse_with_ids("/foo/{id}/bar/{id}").unwrap();
        assert_eq!(twice.parameters(), ["id", "id"]);
        assert_eq!(twice.resolved(["a", "b"]).unwrap().full_path().unwrap(), "/foo/a/bar/b");
        assert_eq!(twice.resolved_named([("id", "a")]).unwrap().to_string(), "/foo/a/bar/{id}");
        assert_eq!(twice.resolved_named([("id", "a"), ("id", "b")]).unwrap().full_path().unwrap(), "/foo/a/bar/b");
        assert!(twice.resolved_named([("id", "a"), ("id", "b"), ("id", "c")]).is_err());
        assert_eq!(twice.ids("/foo/a/bar/b"), Some(vec!["a".into(), "b".into()]));
        assert_eq!(
            ZPath::parse("/x").unwrap().child_parameter("id").unwrap().child_parameter("id").unwrap().to_string(),
            "/x/{id}/{id}"
        );
        assert!(ZPath::parse("/a/{x}").unwrap().is_resolved());
        assert_eq!(ZPath::root().to_string(), "/");
        assert_eq!(ZPath::parse("/").unwrap(), ZPath::root());
        assert!(ZPath::parse("a").is_err());
        let orders = ZPath::parse("/orders").unwrap().child_parameter("id").unwrap();
        assert!(orders.is_resolved_but_last());
        assert_eq!(orders.parent().unwrap().full_path().unwrap(), "/orders");
        assert_eq!(orders.node_name().unwrap(), "{id}");
    }
}
