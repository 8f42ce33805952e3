//! The Curator 5.4 runtime classpath, shared by the interop tests (`tests/common/curator.rs`)
//! and the benchmark (`benches/locks.rs`), which include this file with `#[path]`.

use std::path::Path;

/// Debian's jar directory (package `libcurator-recipes-java` and its dependencies).
const DEBIAN_JARS: &str = "/usr/share/java";
/// The jars Curator's recipes need at run time.
const CURATOR_JARS: &[&str] = &[
    "curator-recipes.jar",
    "curator-framework.jar",
    "curator-client.jar",
    "zookeeper.jar",
    "zookeeper-jute.jar",
    "guava.jar",
    "slf4j-api.jar",
];
/// slf4j bindings, first found wins (without one, slf4j falls back to no logging).
const SLF4J_BINDINGS: &[&str] = &["slf4j-simple.jar", "slf4j-nop.jar"];

/// `ZKR_CURATOR_CLASSPATH` when set and not empty, else Debian's jars; an error naming the
/// missing jar and the package to install.
pub fn curator_classpath() -> Result<String, String> {
    if let Some(classpath) = std::env::var("ZKR_CURATOR_CLASSPATH").ok().filter(|cp| !cp.is_empty()) {
        return Ok(classpath);
    }
    let dir = Path::new(DEBIAN_JARS);
    let mut jars = Vec::new();
    for jar in CURATOR_JARS {
        let path = dir.join(jar);
        if !path.is_file() {
            return Err(format!(
                "{} not found (install libcurator-recipes-java, or set ZKR_CURATOR_CLASSPATH)",
                path.display()
            ));
        }
        jars.push(path.display().to_string());
    }
    if let Some(binding) = SLF4J_BINDINGS.iter().map(|jar| dir.join(jar)).find(|p| p.is_file()) {
        jars.push(binding.display().to_string());
    }
    Ok(jars.join(":"))
}
