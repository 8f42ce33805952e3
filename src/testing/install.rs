//! Finding the ZooKeeper jars and a Java runtime.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use super::TestingError;

/// Where Debian's `zookeeper`/`libzookeeper-java` packages put their jars.
const DEBIAN_JAR_DIR: &str = "/usr/share/java";
/// Debian's `ZOOKEEPER_HOME`-like directory (scripts only, but a tarball may live there too).
const DEBIAN_HOME: &str = "/usr/share/zookeeper";

/// A ZooKeeper server installation: the Java runtime and the class path that runs
/// `org.apache.zookeeper.server.ZooKeeperServerMain` and `QuorumPeerMain`.
///
/// Found with [`Installation::find`] (environment `ZOOKEEPER_HOME`, else Debian's
/// `/usr/share/java`), or from an explicit directory with [`Installation::from_dir`].
/// Two layouts are understood:
///
/// * Debian's: a directory holding an unversioned `zookeeper.jar` whose manifest names its
///   dependencies; the class path is that jar plus `zookeeper-jute.jar`, `slf4j-api.jar` and
///   `slf4j-simple.jar` when present (the server logs to stderr, which goes to the log file).
/// * Apache's release tarball: `zookeeper-<version>.jar` in the directory or its `lib/`; the
///   class path is every jar there, plus `conf/` (for `logback.xml`) when it exists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Installation {
    java: PathBuf,
    classpath: Vec<PathBuf>,
}

impl Installation {
    /// Finds the installation the way the servers of this module do by default.
    ///
    /// `ZOOKEEPER_HOME`, when set, must point at an installation (no fallback: a wrong
    /// setting should not be hidden). Otherwise Debian's `/usr/share/java` and
    /// `/usr/share/zookeeper` are searched. Java comes from `JAVA_HOME/bin/java`, else `java`
    /// on `PATH`.
    ///
    /// # Errors
    /// [`TestingError::InstallationNotFound`] (the message names `apt-get install zookeeper`)
    /// or [`TestingError::JavaNotFound`].
    pub fn find() -> Result<Installation, TestingError> {
        match std::env::var_os("ZOOKEEPER_HOME").filter(|home| !home.is_empty()) {
            Some(home) => Installation::from_dir(Path::new(&home)),
            None => {
                let candidates = [Path::new(DEBIAN_JAR_DIR), Path::new(DEBIAN_HOME)];
                let classpath = find_classpath(&candidates)?;
                Ok(Installation { java: find_java()?, classpath })
            }
        }
    }

    /// Uses the installation in `dir`: a directory holding the ZooKeeper jars, directly or in
    /// its `lib/` (a `ZOOKEEPER_HOME`).
    ///
    /// # Errors
    /// [`TestingError::InstallationNotFound`] when `dir` holds no ZooKeeper server jar, and
    /// [`TestingError::JavaNotFound`] when no Java runtime is found.
    pub fn from_dir(dir: &Path) -> Result<Installation, TestingError> {
        let classpath = find_classpath(&[dir])?;
        Ok(Installation { java: find_java()?, classpath })
    }

    /// Replaces the Java executable (for example a specific JDK's `bin/java`).
    #[must_use]
    pub fn with_java(mut self, java: impl Into<PathBuf>) -> Installation {
        self.java = java.into();
        self
    }

    /// The Java executable.
    pub fn java(&self) -> &Path {
        &self.java
    }

    /// The class path entries (jars and directories).
    pub fn classpath(&self) -> &[PathBuf] {
        &self.classpath
    }

    /// The class path joined for `java -cp`.
    pub(crate) fn classpath_arg(&self) -> OsString {
        let mut joined = OsString::new();
        for (i, entry) in self.classpath.iter().enumerate() {
            if i > 0 {
                joined.push(":");
            }
            joined.push(entry);
        }
        joined
    }
}

/// Looks for a ZooKeeper server jar in each candidate and its `lib/`.
fn find_classpath(candidates: &[&Path]) -> Result<Vec<PathBuf>, TestingError> {
    let mut searched = Vec::new();
    for candidate in candidates {
        for dir in [candidate.to_path_buf(), candidate.join("lib")] {
            searched.push(dir.display().to_string());
            if let Some(classpath) = classpath_in(&dir) {
                return Ok(classpath);
            }
        }
    }
    Err(TestingError::InstallationNotFound { searched: searched.join(", ") })
}

/// The class path for the jars in `dir`, if it holds a ZooKeeper server jar.
fn classpath_in(dir: &Path) -> Option<Vec<PathBuf>> {
    let debian = dir.join("zookeeper.jar");
    if debian.is_file() {
        let mut classpath = vec![debian];
        // The manifest's Class-Path covers jute and part of netty; slf4j-simple is the log
        // binding we want (stderr, which goes to the server's log file), not a dependency.
        // The netty jars the manifest leaves out are those the Netty connection factory
        // needs for TLS (without netty-codec every TLS connection fails to initialize).
        for extra in [
            "zookeeper-jute.jar",
            "slf4j-api.jar",
            "slf4j-simple.jar",
            "netty-codec.jar",
            "netty-resolver.jar",
            "netty-transport-native-unix-common.jar",
        ] {
            let jar = dir.join(extra);
            if jar.is_file() {
                classpath.push(jar);
            }
        }
        return Some(classpath);
    }
    let mut jars: Vec<PathBuf> = std::fs::read_dir(dir)
        .ok()?
        .filter_map(|entry| entry.ok().map(|entry| entry.path()))
        .filter(|path| path.extension().is_some_and(|ext| ext == "jar") && path.is_file())
        .collect();
    if !jars.iter().any(|jar| is_versioned_server_jar(jar)) {
        return None;
    }
    jars.sort();
    // Apache's tarball keeps logback.xml in conf/, next to lib/.
    let conf = if dir.file_name().is_some_and(|name| name == "lib") {
        dir.parent().map(|home| home.join("conf"))
    } else {
        Some(dir.join("conf"))
    };
    if let Some(conf) = conf.filter(|conf| conf.is_dir()) {
        jars.insert(0, conf);
    }
    Some(jars)
}

/// `zookeeper-3.8.0.jar` yes; `zookeeper-jute-3.8.0.jar`, `zookeeper-recipes-…` no.
fn is_versioned_server_jar(path: &Path) -> bool {
    path.file_name()
        .and_then(|name| name.to_str())
        .and_then(|name| name.strip_prefix("zookeeper-"))
        .is_some_and(|rest| rest.starts_with(|c: char| c.is_ascii_digit()) && rest.ends_with(".jar"))
}

/// `JAVA_HOME/bin/java`, else `java` on `PATH`, else `/usr/bin/java`.
fn find_java() -> Result<PathBuf, TestingError> {
    let mut searched = Vec::new();
    if let Some(home) = std::env::var_os("JAVA_HOME").filter(|home| !home.is_empty()) {
        let java = Path::new(&home).join("bin").join("java");
        if java.is_file() {
            return Ok(java);
        }
        searched.push(java.display().to_string());
    }
    if let Some(path) = std::env::var_os("PATH") {
        for dir in std::env::split_paths(&path) {
            let java = dir.join("java");
            if java.is_file() {
                return Ok(java);
            }
        }
        searched.push("PATH".to_owned());
    }
    let java = PathBuf::from("/usr/bin/java");
    if java.is_file() {
        return Ok(java);
    }
    searched.push(java.display().to_string());
    Err(TestingError::JavaNotFound { searched: searched.join(", ") })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_jar_names() {
        assert!(is_versioned_server_jar(Path::new("/x/zookeeper-3.8.0.jar")));
        assert!(!is_versioned_server_jar(Path::new("/x/zookeeper-jute-3.8.0.jar")));
        assert!(!is_versioned_server_jar(Path::new("/x/zookeeper.jar")));
    }

    #[test]
    fn tarball_layout() {
        let home = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(home.path().join("lib")).unwrap();
        std::fs::create_dir_all(home.path().join("conf")).unwrap();
        for jar in ["zookeeper-3.9.2.jar", "zookeeper-jute-3.9.2.jar", "logback-core-1.2.13.jar"] {
            std::fs::write(home.path().join("lib").join(jar), b"").unwrap();
        }
        let classpath = find_classpath(&[home.path()]).unwrap();
        assert_eq!(classpath[0], home.path().join("conf"));
        assert_eq!(classpath.len(), 4);
    }

    #[test]
    fn empty_dir_is_not_an_installation() {
        let empty = tempfile::tempdir().unwrap();
        let err = find_classpath(&[empty.path()]).unwrap_err();
        assert!(err.to_string().contains("apt-get install zookeeper"), "{err}");
    }
}
