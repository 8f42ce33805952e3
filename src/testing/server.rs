//! A standalone ZooKeeper server.

use crate::sync::Mutex;
use std::path::Path;
use std::time::Duration;

use super::options::LaunchOptions;
use super::process::{self, LaunchSpec, ProcessSlot};
use super::security::{self, TlsFiles};
use super::TestingError;

/// The class that runs a standalone server.
const STANDALONE_MAIN: &str = "org.apache.zookeeper.server.ZooKeeperServerMain";
/// How many fresh ports a start tries when the chosen one was taken before the JVM bound it.
const PORT_ATTEMPTS: usize = 4;

/// A standalone ZooKeeper server in its own JVM, on `127.0.0.1` and a free port, with a
/// temporary data directory (Curator's `TestingServer`).
///
/// Defaults: `tickTime` 200 ms (so sessions may be as short as 400 ms), maximum session
/// timeout 60 s, container nodes checked every 100 ms, no fsync, four-letter words enabled,
/// no admin server, unlimited connections per client address. The server's output goes to
/// `zookeeper.log` in [`data_dir`](TestingServer::data_dir).
///
/// Dropping it SIGKILLs the JVM and removes the directory. If the test process dies without
/// dropping it (SIGKILL, abort, or a `static` that is never dropped), a watchdog started with
/// the JVM does the same.
#[derive(Debug)]
pub struct TestingServer {
    // Field order matters: the process is killed before the directory is removed.
    process: ProcessSlot,
    spec: LaunchSpec,
    port: u16,
    /// The TLS port and files, for a server started with [`TestingServerBuilder::tls`].
    tls: Option<(u16, TlsFiles)>,
    tick_time: Duration,
    start_timeout: Duration,
    dir: tempfile::TempDir,
}

impl TestingServer {
    /// Starts a server with the default settings ([`TestingServerBuilder`]'s defaults).
    ///
    /// # Errors
    /// [`TestingError::InstallationNotFound`] / [`TestingError::JavaNotFound`] when ZooKeeper
    /// or Java is missing; [`TestingError::ServerExited`] / [`TestingError::StartTimeout`]
    /// (with the log tail) when the server does not come up; [`TestingError::Io`].
    ///
    /// # Cancel safety
    /// Cancelling drops the half-started server: the JVM is killed and the directory removed.
    pub async fn start() -> Result<TestingServer, TestingError> {
        TestingServer::builder().start().await
    }

    /// A builder for a server with non-default settings.
    pub fn builder() -> TestingServerBuilder {
        TestingServerBuilder::default()
    }

    /// The connect string, `127.0.0.1:PORT`.
    pub fn connect_string(&self) -> String {
        process::loopback(self.port)
    }

    /// The client port (the same across restarts).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The TLS client port of a server started with [`tls()`](TestingServerBuilder::tls)
    /// (the same across restarts).
    pub fn secure_port(&self) -> Option<u16> {
        self.tls.as_ref().map(|(port, _)| *port)
    }

    /// The connect string of the TLS port, `tcp+tls://127.0.0.1:PORT`, for a server started
    /// with [`tls()`](TestingServerBuilder::tls). The plain [`port`](Self::port) keeps
    /// serving too.
    pub fn secure_connect_string(&self) -> Option<String> {
        self.secure_port().map(|port| format!("tcp+tls://{}", process::loopback(port)))
    }

    /// The CA, client certificate and key made for a server started with
    /// [`tls()`](TestingServerBuilder::tls).
    pub fn tls_files(&self) -> Option<&TlsFiles> {
        self.tls.as_ref().map(|(_, files)| files)
    }

    /// The configured `tickTime`; the shortest session the server grants is twice this.
    pub fn tick_time(&self) -> Duration {
        self.tick_time
    }

    /// The directory holding the configuration, the data and `zookeeper.log`.
    pub fn data_dir(&self) -> &Path {
        self.dir.path()
    }

    /// The server's log file (its stdout and stderr).
    pub fn log_file(&self) -> &Path {
        &self.spec.log_file
    }

    /// The JVM's process id, or `None` when it is not running.
    pub fn pid(&self) -> Option<u32> {
        let mut slot = self.process.lock();
        slot.as_mut().and_then(|process| process.is_running().then(|| process.pid()))
    }

    /// Whether the JVM is running (a paused server counts as running).
    pub fn is_running(&self) -> bool {
        self.pid().is_some()
    }

    /// Stops the server gracefully (SIGTERM) and waits for the JVM to exit; SIGKILL if it
    /// has not exited after 10 s. Data survives for [`restart`](Self::restart). Stopping a
    /// stopped server does nothing.
    ///
    /// # Errors
    /// [`TestingError::Timeout`] if the JVM does not even die from SIGKILL in time.
    ///
    /// # Cancel safety
    /// Cancelling after the signal was sent leaves the server shutting down; it is not
    /// restarted, and the next call finishes the job.
    pub async fn stop(&mut self) -> Result<(), TestingError> {
        if let Some(process) = self.process.get_mut().as_mut() {
            process.terminate(Duration::from_secs(10)).await?;
        }
        tracing::debug!(port = self.port, "testing server stopped");
        Ok(())
    }

    /// Kills the server (SIGKILL, like a crash or power loss, minus the page cache) and waits
    /// for the JVM to exit.
    ///
    /// # Errors
    /// [`TestingError::Timeout`] if the JVM does not die in time.
    ///
    /// # Cancel safety
    /// The signal is sent before the first await; cancelling only skips waiting for the exit.
    pub async fn kill(&mut self) -> Result<(), TestingError> {
        if let Some(process) = self.process.get_mut().as_mut() {
            process.kill_and_wait().await?;
        }
        tracing::debug!(port = self.port, "testing server killed");
        Ok(())
    }

    /// Starts the server again on the same port and data directory (stopping it gracefully
    /// first if it runs) and waits until it serves.
    ///
    /// # Errors
    /// As for [`stop`](Self::stop) and [`start`](Self::start); a port taken by someone else
    /// in the meantime shows as [`TestingError::ServerExited`] with a `BindException` in the
    /// log tail.
    ///
    /// # Cancel safety
    /// Cancelling while waiting for the server leaves it starting; it is owned and cleaned up
    /// as usual, and [`is_running`](Self::is_running) tells whether it came up.
    pub async fn restart(&mut self) -> Result<(), TestingError> {
        self.stop().await?;
        let slot = self.process.get_mut();
        *slot = None;
        *slot = Some(self.spec.spawn()?);
        let address = process::loopback(self.port);
        process::wait_for_srvr(slot, &self.spec, &address, self.start_timeout, process::mode_in(&["standalone"]))
            .await?;
        tracing::debug!(port = self.port, "testing server restarted");
        Ok(())
    }

    /// Pauses the JVM (SIGSTOP): connections stay open and nothing is answered, like a long
    /// GC pause or a hung machine.
    ///
    /// Returns once every thread of the JVM has stopped (checked through `/proc` on Linux),
    /// so nothing is answered after it returns.
    ///
    /// # Errors
    /// [`TestingError::NotRunning`], [`TestingError::Signal`], or [`TestingError::Timeout`]
    /// if the threads have not all stopped within 5 s.
    pub fn pause(&self) -> Result<(), TestingError> {
        self.signal("STOP")
    }

    /// Resumes a paused JVM (SIGCONT).
    ///
    /// # Errors
    /// [`TestingError::NotRunning`] or [`TestingError::Signal`].
    pub fn resume(&self) -> Result<(), TestingError> {
        self.signal("CONT")
    }

    fn signal(&self, signal: &'static str) -> Result<(), TestingError> {
        match self.process.lock().as_mut() {
            Some(process) => process.signal(signal),
            None => Err(TestingError::NotRunning { name: self.spec.name.clone() }),
        }
    }
}

/// Settings for a [`TestingServer`]; by value, nothing happens until
/// [`start`](TestingServerBuilder::start).
#[derive(Debug, Clone)]
#[must_use = "a builder does nothing until `start().await`"]
pub struct TestingServerBuilder {
    options: LaunchOptions,
    min_session_timeout: Option<Duration>,
    port: Option<u16>,
    tls: bool,
    sasl_users: Vec<(String, String)>,
    #[cfg(feature = "sasl-gssapi")]
    kerberos: Option<super::KerberosLogin>,
}

impl Default for TestingServerBuilder {
    fn default() -> Self {
        TestingServerBuilder {
            options: LaunchOptions::with_system_properties(vec![(
                "znode.container.checkIntervalMs".to_owned(),
                "100".to_owned(),
            )]),
            min_session_timeout: None,
            port: None,
            tls: false,
            sasl_users: Vec::new(),
            #[cfg(feature = "sasl-gssapi")]
            kerberos: None,
        }
    }
}

impl TestingServerBuilder {
    /// The `tickTime` of the server (default 200 ms). A server grants session timeouts from 2
    /// ticks up to `maxSessionTimeout`, and expires sessions with tick granularity.
    pub fn tick_time(mut self, tick_time: Duration) -> Self {
        self.options.tick_time = tick_time;
        self
    }

    /// `maxSessionTimeout` of the server (default 60 s).
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

    /// Sets a `zoo.cfg` entry of the server (overrides the defaults), for example
    /// `.config("forceSync", "yes")` to fsync the transaction log as ZooKeeper does by
    /// default, or `.config("extendedTypesEnabled", "true")` for TTL nodes.
    pub fn config(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.options.set_config(key, value);
        self
    }

    /// Sets a JVM system property (`-Dkey=value`) of the server, for example
    /// `.system_property("znode.container.maxNeverUsedIntervalMs", "500")`.
    pub fn system_property(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.options.set_system_property(key, value);
        self
    }

    /// Appends a JVM option of the server after the defaults, which it can override. The defaults
    /// favour start-up time (`-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -Xmx256m`); a benchmark
    /// that wants the server's peak speed can pass `-XX:TieredStopAtLevel=4`.
    pub fn jvm_arg(mut self, arg: impl Into<String>) -> Self {
        self.options.jvm_args.push(arg.into());
        self
    }

    /// `minSessionTimeout` (default: the server's, 2 × tickTime).
    pub fn min_session_timeout(mut self, timeout: Duration) -> Self {
        self.min_session_timeout = Some(timeout);
        self
    }

    /// Enables TTL nodes (`zookeeper.extendedTypesEnabled`), which
    /// [`CreateBuilder::ttl`](crate::CreateBuilder::ttl) and
    /// [`PersistentTtlNode`](crate::PersistentTtlNode) need; servers refuse them by default.
    /// The server reaps expired TTL nodes at its container checks, every 100 ms on these
    /// servers (`znode.container.checkIntervalMs`, settable with
    /// [`system_property`](Self::system_property)).
    pub fn extended_types(mut self) -> Self {
        self.options.set_system_property("zookeeper.extendedTypesEnabled", "true");
        self
    }

    /// A fixed client port instead of a free one (no retry if it is taken).
    pub fn port(mut self, port: u16) -> Self {
        self.port = Some(port);
        self
    }

    /// Also serves TLS, on a second client port ([`TestingServer::secure_port`]), through
    /// ZooKeeper's Netty connection factory, with keystores made at start with the JDK's
    /// `keytool` (a CA, a server certificate for `127.0.0.1`, a client certificate:
    /// [`TestingServer::tls_files`]). The server requires the client certificate (mutual
    /// TLS); `.config("ssl.clientAuth", "none")` makes it optional. The plain port keeps
    /// serving.
    ///
    /// Needs `keytool` (next to `java` or on `PATH`) and `openssl` (to export the client's
    /// key as PEM); making the files takes a dozen short JVM runs, a few seconds.
    pub fn tls(mut self) -> Self {
        self.tls = true;
        self
    }

    /// Lets clients log in with SASL DIGEST-MD5 as `user` with `password` (a JAAS `Server`
    /// section with ZooKeeper's `DigestLoginModule`, and the SASL authentication provider);
    /// call once per user. A client that logged in has the identity `sasl:<user>` in ACLs.
    /// Clients without SASL are still accepted (ZooKeeper's default); require SASL with
    /// `.config("sessionRequireClientSASLAuth", "true")`.
    ///
    /// User names are letters, digits, `_`, `-` and `.`; passwords must not hold quotes,
    /// backslashes or control characters (checked by [`start`](Self::start)).
    pub fn sasl_digest_user(mut self, user: impl Into<String>, password: impl Into<String>) -> Self {
        self.sasl_users.push((user.into(), password.into()));
        self
    }

    /// Lets clients log in with SASL GSSAPI (Kerberos) in `kdc`'s realm: the server logs in as
    /// `zookeeper/localhost` (a JAAS `Server` section with the JDK's `Krb5LoginModule` and a
    /// keytab the KDC writes now), with the SASL authentication provider. A client that
    /// logged in has the identity `sasl:<principal>` in ACLs (`sasl:client@ZKR.TEST`); clients
    /// name the server's host `localhost`. Replaces [`sasl_digest_user`](Self::sasl_digest_user)
    /// (a server has one JAAS `Server` section).
    ///
    /// # Errors
    /// As [`TestingKdc::add_principal`](super::TestingKdc::add_principal).
    ///
    /// # Cancel safety
    /// As [`TestingKdc::add_principal`](super::TestingKdc::add_principal).
    #[cfg(feature = "sasl-gssapi")]
    pub async fn kerberos(mut self, kdc: &super::TestingKdc) -> Result<Self, TestingError> {
        self.kerberos = Some(kdc.server_login().await?);
        Ok(self)
    }

    /// Starts the server and waits until it serves (`srvr` reports `Mode: standalone`).
    ///
    /// # Errors
    /// As for [`TestingServer::start`]; [`TestingError::InvalidConfig`] for a zero tick time
    /// or an unusable SASL user; [`TestingError::ToolFailed`] when `keytool` or `openssl`
    /// fails while making a TLS server's files.
    ///
    /// # Cancel safety
    /// Cancelling drops the half-started server: the JVM is killed and the directory removed.
    pub async fn start(self) -> Result<TestingServer, TestingError> {
        let mut options = self.options.clone();
        options.check_tick_time()?;
        for (user, password) in &self.sasl_users {
            security::check_digest_user(user, password)?;
        }
        let installation = options.installation()?;
        let dir = LaunchOptions::temp_dir("zk-testing-")?;
        let data_dir = dir.path().join("data");
        std::fs::create_dir(&data_dir).map_err(|e| TestingError::io("creating the data directory", e))?;
        let tls_files = match self.tls {
            false => None,
            true => Some(make_tls_files(dir.path(), installation.java()).await?),
        };
        if !self.sasl_users.is_empty() {
            let jaas = dir.path().join("jaas.conf");
            security::write_jaas(&jaas, &self.sasl_users)?;
            options.set_system_property("java.security.auth.login.config", jaas.display().to_string());
            options.set_config("authProvider.1", "org.apache.zookeeper.server.auth.SASLAuthenticationProvider");
        }
        #[cfg(feature = "sasl-gssapi")]
        if let Some(login) = &self.kerberos {
            let jaas = dir.path().join("jaas.conf");
            super::kerberos::write_kerberos_jaas(&jaas, login)?;
            options.set_system_property("java.security.auth.login.config", jaas.display().to_string());
            options.set_system_property("java.security.krb5.conf", login.krb5_conf.display().to_string());
            options.set_config("authProvider.1", "org.apache.zookeeper.server.auth.SASLAuthenticationProvider");
        }
        let options = &options;
        let spec = LaunchSpec {
            name: "standalone".to_owned(),
            installation,
            main_class: STANDALONE_MAIN,
            config_file: dir.path().join("zoo.cfg"),
            log_file: dir.path().join("zookeeper.log"),
            cleanup_dir: dir.path().to_path_buf(),
            system_properties: options.system_properties.clone(),
            jvm_args: options.jvm_args.clone(),
        };
        let mut server = TestingServer {
            process: Mutex::new(None),
            spec,
            port: 0,
            tls: None,
            tick_time: options.tick_time,
            start_timeout: options.start_timeout,
            dir,
        };
        let mut attempt = 0;
        loop {
            attempt += 1;
            server.port = match self.port {
                Some(port) => port,
                None => process::free_port()?,
            };
            let mut config = vec![("tickTime".to_owned(), options.tick_time.as_millis().to_string())];
            config.extend(options.server_config(&data_dir, server.port));
            if let Some(min) = self.min_session_timeout {
                config.push(("minSessionTimeout".to_owned(), min.as_millis().to_string()));
            }
            if let Some(files) = &tls_files {
                let secure_port = process::free_port()?;
                config.extend(files.server_config(secure_port));
                server.tls = Some((secure_port, files.clone()));
            }
            options.apply_config(&mut config);
            process::write_config(&server.spec.config_file, &config)?;
            // A fresh log per attempt, so an old BindException is not mistaken for a new one.
            std::fs::write(&server.spec.log_file, b"").map_err(|e| TestingError::io("creating the server log", e))?;
            let slot = server.process.get_mut();
            *slot = Some(server.spec.spawn()?);
            let address = process::loopback(server.port);
            let serving = process::mode_in(&["standalone"]);
            match process::wait_for_srvr(slot, &server.spec, &address, options.start_timeout, serving).await {
                Ok(()) => break,
                Err(err) if err.is_address_in_use() && self.port.is_none() && attempt < PORT_ATTEMPTS => {
                    tracing::debug!(port = server.port, "port taken before the server bound it; retrying");
                    // Reap it before dropping, so its watchdog is released, not triggered
                    // (a triggered watchdog would remove the directory we keep using).
                    if let Some(mut old) = slot.take() {
                        old.kill_and_wait().await?;
                    }
                }
                Err(err) => return Err(err),
            }
        }
        tracing::debug!(port = server.port, secure_port = ?server.secure_port(), pid = ?server.pid(), "testing server started");
        Ok(server)
    }
}

/// [`TlsFiles::generate`] in `dir/tls`, off the runtime's worker threads.
async fn make_tls_files(dir: &Path, java: &Path) -> Result<TlsFiles, TestingError> {
    let tls_dir = dir.join("tls");
    std::fs::create_dir(&tls_dir).map_err(|e| TestingError::io("creating the TLS directory", e))?;
    let java = java.to_path_buf();
    tokio::task::spawn_blocking(move || TlsFiles::generate(&tls_dir, &java))
        .await
        .map_err(|e| TestingError::io("making TLS files", std::io::Error::other(e.to_string())))?
}
