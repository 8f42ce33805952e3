//! Compiling a Java peer of a bench (its Curator side) for this run.

use std::path::Path;
use std::process::Stdio;

/// Compiles `source` against `classpath` with `javac` into a fresh temporary directory named
/// `prefix…` (removed when dropped), for Java 17.
pub(crate) fn compile(javac: &Path, classpath: &str, source: &str, prefix: &str) -> Result<tempfile::TempDir, String> {
    let classes = tempfile::Builder::new()
        .prefix(prefix)
        .tempdir()
        .map_err(|e| format!("creating a directory for {source}'s classes: {e}"))?;
    let out = std::process::Command::new(javac)
        .args(["-encoding", "UTF-8", "--release", "17", "-nowarn", "-cp"])
        .arg(classpath)
        .arg("-d")
        .arg(classes.path())
        .arg(source)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("running {}: {e}", javac.display()))?;
    if !out.status.success() {
        return Err(format!(
            "javac {source} failed ({}):\n{}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(classes)
}
