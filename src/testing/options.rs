//! The launch settings that [`TestingServerBuilder`](super::TestingServerBuilder) and
//! [`TestingClusterBuilder`](super::TestingClusterBuilder) share, and what both make of them.

use std::path::Path;
use std::time::Duration;

use super::install::Installation;
use super::process;
use super::TestingError;

/// Settings every ZooKeeper JVM of a builder gets: timing, installation, extra `zoo.cfg`
/// entries, system properties and JVM options.
#[derive(Debug, Clone)]
pub(crate) struct LaunchOptions {
    pub(crate) tick_time: Duration,
    pub(crate) max_session_timeout: Duration,
    pub(crate) start_timeout: Duration,
    pub(crate) installation: Option<Installation>,
    pub(crate) config: Vec<(String, String)>,
    pub(crate) system_properties: Vec<(String, String)>,
    pub(crate) jvm_args: Vec<String>,
}

impl LaunchOptions {
    /// The defaults (tick 200 ms, maximum session 60 s, start timeout 30 s) with these system
    /// properties.
    pub(crate) fn with_system_properties(system_properties: Vec<(String, String)>) -> Self {
        LaunchOptions {
            tick_time: Duration::from_millis(200),
            max_session_timeout: Duration::from_secs(60),
            start_timeout: Duration::from_secs(30),
            installation: None,
            config: Vec::new(),
            jvm_args: Vec::new(),
            system_properties,
        }
    }

    /// Sets a `zoo.cfg` entry.
    pub(crate) fn set_config(&mut self, key: impl Into<String>, value: impl Into<String>) {
        process::set_entry(&mut self.config, &key.into(), value.into());
    }

    /// Sets a JVM system property.
    pub(crate) fn set_system_property(&mut self, key: impl Into<String>, value: impl Into<String>) {
        process::set_entry(&mut self.system_properties, &key.into(), value.into());
    }

    /// Rejects a tick time under a millisecond (the server's unit: it would be written as 0).
    pub(crate) fn check_tick_time(&self) -> Result<(), TestingError> {
        if self.tick_time < std::time::Duration::from_millis(1) {
            return Err(TestingError::InvalidConfig(format!(
                "tick_time must be at least 1 ms (the server counts whole milliseconds), got {:?}",
                self.tick_time
            )));
        }
        Ok(())
    }

    /// The chosen installation, or [`Installation::find`].
    pub(crate) fn installation(&self) -> Result<Installation, TestingError> {
        match &self.installation {
            Some(installation) => Ok(installation.clone()),
            None => Installation::find(),
        }
    }

    /// A temporary directory named `<prefix>...`.
    pub(crate) fn temp_dir(prefix: &str) -> Result<tempfile::TempDir, TestingError> {
        tempfile::Builder::new()
            .prefix(prefix)
            .tempdir()
            .map_err(|e| TestingError::io("creating a temporary directory", e))
    }

    /// The `zoo.cfg` entries every server gets, from `dataDir` to `maxSessionTimeout`.
    pub(crate) fn server_config(&self, data_dir: &Path, client_port: u16) -> Vec<(String, String)> {
        vec![
            ("dataDir".to_owned(), data_dir.display().to_string()),
            ("clientPort".to_owned(), client_port.to_string()),
            ("clientPortAddress".to_owned(), "127.0.0.1".to_owned()),
            ("maxClientCnxns".to_owned(), "0".to_owned()),
            ("admin.enableServer".to_owned(), "false".to_owned()),
            ("4lw.commands.whitelist".to_owned(), "*".to_owned()),
            ("forceSync".to_owned(), "no".to_owned()),
            ("maxSessionTimeout".to_owned(), self.max_session_timeout.as_millis().to_string()),
        ]
    }

    /// Applies the [`config`](Self::config) overrides to `config`.
    pub(crate) fn apply_config(&self, config: &mut Vec<(String, String)>) {
        for (key, value) in &self.config {
            process::set_entry(config, key, value.clone());
        }
    }
}
