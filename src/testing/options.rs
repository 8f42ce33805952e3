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

    /// Rejects a zero tick time.
    pub(crate) fn check_tick_time(&self) -> Result<(), TestingError> {
        if self.tick_time.is_zero() {
            return Err(TestingError::InvalidConfig("tick_time must not be zero".to_owned()));
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

/// The setters [`TestingServerBuilder`](super::TestingServerBuilder) and
/// [`TestingClusterBuilder`](super::TestingClusterBuilder) share, over their `options:
/// LaunchOptions` field. `$whom` names what a setting applies to, in the docs.
macro_rules! launch_setters {
    ($whom:literal) => {
        #[doc = concat!("The `tickTime` of ", $whom, " (default 200 ms). A server grants session timeouts")]
        /// from 2 ticks up to `maxSessionTimeout`, and expires sessions with tick granularity.
        pub fn tick_time(mut self, tick_time: Duration) -> Self {
            self.options.tick_time = tick_time;
            self
        }

        #[doc = concat!("`maxSessionTimeout` of ", $whom, " (default 60 s).")]
        pub fn max_session_timeout(mut self, timeout: Duration) -> Self {
            self.options.max_session_timeout = timeout;
            self
        }

        /// How long [`start`](Self::start) and restarts wait for serving (default 30 s).
        pub fn start_timeout(mut self, timeout: Duration) -> Self {
            self.options.start_timeout = timeout;
            self
        }

        /// Uses this installation instead of [`Installation::find`](super::Installation::find).
        pub fn installation(mut self, installation: super::Installation) -> Self {
            self.options.installation = Some(installation);
            self
        }

        #[doc = concat!("Sets a `zoo.cfg` entry of ", $whom, " (overrides the defaults), for example")]
        /// `.config("forceSync", "yes")` to fsync the transaction log as ZooKeeper does by
        /// default, or `.config("extendedTypesEnabled", "true")` for TTL nodes.
        pub fn config(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
            self.options.set_config(key, value);
            self
        }

        #[doc = concat!("Sets a JVM system property (`-Dkey=value`) of ", $whom, ", for example")]
        /// `.system_property("znode.container.maxNeverUsedIntervalMs", "500")`.
        pub fn system_property(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
            self.options.set_system_property(key, value);
            self
        }

        #[doc = concat!("Appends a JVM option of ", $whom, " after the defaults, which it can override.")]
        /// The defaults favour start-up time (`-XX:TieredStopAtLevel=1 -XX:+UseSerialGC
        /// -Xmx256m`); a benchmark that wants the server's peak speed can pass
        /// `-XX:TieredStopAtLevel=4`.
        pub fn jvm_arg(mut self, arg: impl Into<String>) -> Self {
            self.options.jvm_args.push(arg.into());
            self
        }
    };
}
pub(crate) use launch_setters;
