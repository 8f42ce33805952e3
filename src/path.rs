//! ZooKeeper paths: validation, joining, Curator's protected names and sort keys.
//!
//! ```
//! use zk_recipes::path;
//!
//! assert!(path::validate("/locks/orders").is_ok());
//! assert!(path::validate("locks/orders").is_err());
//! assert_eq!(path::sort_key("_c_1b4e28ba-2fa1-11d2-883f-0016d3cca427-lock-0000000042", "lock-"), "0000000042");
//! ```

use crate::error::{Error, Result};

/// Length of Curator's protected prefix: `_c_` + 36-character UUID + `-`.
pub const PROTECTED_PREFIX_LEN: usize = 40;

const PROTECTED_MARK: &str = "_c_";

/// Checks that `path` is a valid absolute ZooKeeper path (the rules of ZooKeeper's
/// `PathUtils.validatePath`): starts with `/`, no trailing `/` (except the root itself), no
/// empty, `.` or `..` segments, no NUL or other control characters.
///
/// # Errors
/// [`Error::InvalidPath`] naming the first rule broken.
pub fn validate(path: &str) -> Result<()> {
    let fail = |reason| Err(Error::InvalidPath { path: path.to_owned(), reason });
    if path.is_empty() {
        return fail("path is empty");
    }
    if !path.starts_with('/') {
        return fail("path must start with '/'");
    }
    if path == "/" {
        return Ok(());
    }
    if path.ends_with('/') {
        return fail("path must not end with '/'");
    }
    for segment in path[1..].split('/') {
        match segment {
            "" => return fail("path has an empty segment"),
            "." | ".." => return fail("path has a relative segment ('.' or '..')"),
            _ => {}
        }
        if segment.chars().any(is_forbidden_char) {
            return fail("path has a forbidden character (NUL, control, private use, non-character, or outside the Basic Multilingual Plane)");
        }
    }
    Ok(())
}

/// Checks a lock or recipe path: valid, and not the root (a recipe needs a node to put its
/// children under).
///
/// # Errors
/// [`Error::InvalidPath`].
pub fn validate_recipe_path(path: &str) -> Result<()> {
    validate(path)?;
    if path == "/" {
        return Err(Error::InvalidPath { path: path.into(), reason: "a recipe cannot use the root node" });
    }
    if path == "/zookeeper" || path.starts_with("/zookeeper/") {
        return Err(Error::InvalidPath { path: path.into(), reason: "/zookeeper is reserved by the server" });
    }
    Ok(())
}

/// Checks a namespace as given to `FrameworkBuilder::namespace`: either a bare name (`"app"`,
/// Curator's form) or an absolute path (`"/app"`); the result is the absolute form.
///
/// # Errors
/// [`Error::InvalidPath`] for an empty namespace, a trailing `/`, empty or relative segments,
/// or forbidden characters.
pub fn normalize_namespace(namespace: &str) -> Result<String> {
    if namespace.is_empty() {
        return Err(Error::InvalidPath { path: namespace.into(), reason: "namespace is empty" });
    }
    let absolute = if namespace.starts_with('/') { namespace.to_owned() } else { format!("/{namespace}") };
    validate_recipe_path(&absolute).map_err(|_| {
        // Report against what the user typed.
        match validate(&absolute) {
            Err(Error::InvalidPath { reason, .. }) => Error::InvalidPath { path: namespace.into(), reason },
            _ => Error::InvalidPath { path: namespace.into(), reason: "namespace cannot be the root or /zookeeper" },
        }
    })?;
    Ok(absolute)
}

/// ZooKeeper's forbidden characters (its `PathUtils.validatePath`): controls, the private use
/// area, the last 16 code points of the Basic Multilingual Plane, and every surrogate, which in
/// Java is any character outside that plane (a surrogate pair there).
fn is_forbidden_char(c: char) -> bool {
    matches!(
        c,
        '\u{0}'..='\u{1f}' | '\u{7f}'..='\u{9f}' | '\u{e000}'..='\u{f8ff}' | '\u{fff0}'..='\u{ffff}' | '\u{10000}'..
    )
}

/// Joins a parent path and a child name (`/a` + `b` → `/a/b`; `/` + `b` → `/b`).
pub fn join(parent: &str, child: &str) -> String {
    if parent == "/" {
        format!("/{child}")
    } else {
        format!("{parent}/{child}")
    }
}

/// The parent of `path` (`/a/b` → `/a`, `/a` → `/`); `None` for the root.
pub fn parent(path: &str) -> Option<&str> {
    if path == "/" {
        return None;
    }
    match path.rfind('/') {
        Some(0) => Some("/"),
        Some(i) => Some(&path[..i]),
        None => None,
    }
}

/// The last segment of `path` (`/a/b` → `b`).
pub fn node_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// A fresh protected prefix, `_c_<random uuid v4>-` (40 characters), as Curator's protected
/// mode writes before a node name.
pub fn new_protected_prefix() -> String {
    format!("{PROTECTED_MARK}{}-", uuid::Uuid::new_v4())
}

/// Whether `name` is a protected node name in Curator's sense (`ProtectedUtils.isProtectedZNode`):
/// longer than the prefix, starting with `_c_`, a `-` at index 39 and a UUID in between.
pub fn is_protected(name: &str) -> bool {
    name.len() > PROTECTED_PREFIX_LEN
        && name.starts_with(PROTECTED_MARK)
        && name.as_bytes()[PROTECTED_PREFIX_LEN - 1] == b'-'
        && name.is_char_boundary(PROTECTED_PREFIX_LEN)
        && uuid::Uuid::parse_str(&name[3..PROTECTED_PREFIX_LEN - 1]).is_ok()
}

/// The name with its protected prefix removed, when it has one.
pub fn strip_protected(name: &str) -> &str {
    if is_protected(name) {
        &name[PROTECTED_PREFIX_LEN..]
    } else {
        name
    }
}

/// Curator's `standardFixForSorting`: the text after the **last** occurrence of `lock_name`,
/// or the whole name when it does not occur. Keys compare as plain strings.
pub fn sort_key<'a>(name: &'a str, lock_name: &str) -> &'a str {
    match name.rfind(lock_name) {
        Some(i) => &name[i + lock_name.len()..],
        None => name,
    }
}

/// The sequence number ZooKeeper appended to `name`, if any: its last ten characters, ten
/// digits or (once the parent's create counter wrapped past `i32::MAX`) a minus sign and nine
/// digits, as `%010d` prints a signed 32-bit counter.
///
/// A counter below -999,999,999 prints eleven characters (`-2147483648`), which cannot be told
/// from a name ending in `-` followed by ten digits without knowing the name's prefix; this
/// reads those ten digits. Lock nodes are read by their sort key instead, which knows the
/// prefix.
pub fn sequence(name: &str) -> Option<i64> {
    if name.len() < 10 || !name.is_char_boundary(name.len() - 10) {
        return None;
    }
    let tail = &name[name.len() - 10..];
    let digits = tail.strip_prefix('-').unwrap_or(tail);
    if digits.bytes().all(|b| b.is_ascii_digit()) {
        tail.parse().ok()
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validate_accepts_and_rejects() {
        for ok in ["/", "/a", "/a/b", "/locks/our-lock", "/a.b", "/...", "/é"] {
            assert!(validate(ok).is_ok(), "{ok}");
        }
        // ZooKeeper refuses a character outside the Basic Multilingual Plane (a surrogate pair
        // in Java) with BadArguments; it is refused here first, typed.
        for bad in [
            "",
            "a",
            "a/b",
            "/a/",
            "//a",
            "/a//b",
            "/.",
            "/a/..",
            "/a/./b",
            "/a\0b",
            "/a\u{1}",
            "/a\u{1f600}",
            "/\u{e000}",
        ] {
            let err = validate(bad).unwrap_err();
            assert!(matches!(err, Error::InvalidPath { .. }), "{bad:?}");
        }
    }

    #[test]
    fn recipe_paths_exclude_root_and_zookeeper() {
        assert!(validate_recipe_path("/").is_err());
        assert!(validate_recipe_path("/zookeeper/x").is_err());
        assert!(validate_recipe_path("/zookeeperx").is_ok());
    }

    #[test]
    fn namespaces() {
        assert_eq!(normalize_namespace("app").unwrap(), "/app");
        assert_eq!(normalize_namespace("/app/x").unwrap(), "/app/x");
        for bad in ["", "/", "app/", "a//b", "/a/../b", "a\0", "zookeeper"] {
            assert!(normalize_namespace(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn join_parent_name() {
        assert_eq!(join("/", "a"), "/a");
        assert_eq!(join("/a", "b"), "/a/b");
        assert_eq!(parent("/a/b"), Some("/a"));
        assert_eq!(parent("/a"), Some("/"));
        assert_eq!(parent("/"), None);
        assert_eq!(node_name("/a/b"), "b");
    }

    #[test]
    fn protected_names() {
        let prefix = new_protected_prefix();
        assert_eq!(prefix.len(), PROTECTED_PREFIX_LEN);
        let name = format!("{prefix}lock-0000000007");
        assert!(is_protected(&name));
        assert_eq!(strip_protected(&name), "lock-0000000007");
        assert!(!is_protected(&prefix));
        assert!(!is_protected("lock-0000000007"));
        // go-zookeeper's 32-hex form is not protected in Curator's sense
        assert!(!is_protected("_c_0123456789abcdef0123456789abcdef-lock-0000000001"));
        assert_ne!(new_protected_prefix(), prefix);
    }

    #[test]
    fn sort_keys_follow_curator() {
        assert_eq!(sort_key("_c_x-lock-0000000012", "lock-"), "0000000012");
        assert_eq!(sort_key("lock-lock-0000000001", "lock-"), "0000000001");
        assert_eq!(sort_key("junk", "lock-"), "junk");
        // a foreign child without the marker is keyed by its whole name and may sort first
        let mut children = vec!["_c_a-lock-0000000002".to_owned(), "0".to_owned(), "_c_b-lock-0000000001".to_owned()];
        children.sort_by(|a, b| sort_key(a, "lock-").cmp(sort_key(b, "lock-")));
        assert_eq!(children, ["0", "_c_b-lock-0000000001", "_c_a-lock-0000000002"]);
    }

    #[test]
    fn sequences() {
        assert_eq!(sequence("_c_x-lock-0000000012"), Some(12));
        assert_eq!(sequence("lock-"), None);
        assert_eq!(sequence("abc"), None);
        assert_eq!(sequence("lock--000000012"), Some(-12));
        assert_eq!(sequence("lock-00000-0012"), None);
    }
}
