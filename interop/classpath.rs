//! The Curator 5.4 runtime classpath and the JDK tools, shared by the interop tests
//! (`tests/common/curator.rs`) and the benchmark (`benches/recipes/`), which include this file
//! with `#[path]`.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

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
/// curator-x-discovery and its Jackson (package `libcurator-discovery-java`), added when present.
const DISCOVERY_JARS: &[&str] =
    &["curator-x-discovery.jar", "jackson-databind.jar", "jackson-core.jar", "jackson-annotations.jar"];
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
    jars.extend(
        DISCOVERY_JARS.iter().map(|jar| dir.join(jar)).filter(|p| p.is_file()).map(|p| p.display().to_string()),
    );
    if let Some(binding) = SLF4J_BINDINGS.iter().map(|jar| dir.join(jar)).find(|p| p.is_file()) {
        jars.push(binding.display().to_string());
    }
    Ok(jars.join(":"))
}

/// A JDK tool (`java`, `javac`) from `$JAVA_HOME/bin`, else from `PATH`, that answers
/// `-version`; an error saying what is missing.
pub fn find_jdk_tool(name: &str) -> Result<PathBuf, String> {
    let from_home = std::env::var_os("JAVA_HOME").map(|home| PathBuf::from(home).join("bin").join(name));
    let path = match from_home.filter(|p| p.is_file()) {
        Some(path) => path,
        None => std::env::var_os("PATH")
            .iter()
            .flat_map(std::env::split_paths)
            .map(|dir| dir.join(name))
            .find(|p| p.is_file())
            .ok_or_else(|| format!("`{name}` not found (JAVA_HOME or PATH)"))?,
    };
    let out = Command::new(&path)
        .arg("-version")
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run {}: {e}", path.display()))?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        return Err(format!("{} -version failed ({}): {}", path.display(), out.status, stderr.trim()));
    }
    Ok(path)
}
