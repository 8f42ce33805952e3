//! A Kerberos realm for the SASL GSSAPI tests: an MIT Kerberos KDC (Debian's `krb5-kdc`
//! package: `kdb5_util`, `kadmin.local`, `krb5kdc`) with a database of its own in a temporary
//! directory, on a free loopback port, and the keytabs of the principals a test adds.

use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::Duration;

use tempfile::TempDir;

use super::error::TestingError;
use super::process;

/// How long the KDC may take to listen.
const KDC_START: Duration = Duration::from_secs(10);

/// A Kerberos KDC for tests (realm `ZKR.TEST`), stopped and removed on drop.
///
/// ```no_run
/// # async fn example() -> Result<(), zk_recipes::testing::TestingError> {
/// use zk_recipes::testing::{TestingKdc, TestingServer};
///
/// let kdc = TestingKdc::start().await?;
/// let server = TestingServer::builder().kerberos(&kdc).await?.start().await?;
/// let client_keytab = kdc.add_principal("client").await?;
/// // The client's process: KRB5_CONFIG = kdc.krb5_conf(), KRB5_CLIENT_KTNAME = client_keytab.
/// # drop((server, client_keytab)); Ok(()) }
/// ```
#[derive(Debug)]
pub struct TestingKdc {
    dir: TempDir,
    port: u16,
    /// `sh` running the KDC until its standard input closes (this handle's drop, or the test
    /// process's death): then it stops the KDC.
    watchdog: Child,
    pipe: Option<ChildStdin>,
}

/// What a ZooKeeper server needs to accept Kerberos logins: the KDC's `krb5.conf`, and the
/// server principal's keytab.
#[derive(Debug, Clone)]
pub struct KerberosLogin {
    pub(crate) krb5_conf: PathBuf,
    pub(crate) keytab: PathBuf,
    pub(crate) principal: String,
}

impl TestingKdc {
    /// The realm.
    pub const REALM: &'static str = "ZKR.TEST";

    /// Makes the realm's database and starts `krb5kdc` on a free loopback port.
    ///
    /// # Errors
    /// [`TestingError::ToolFailed`] when a Kerberos tool is missing or fails (install Debian's
    /// `krb5-kdc` and `krb5-admin-server`), [`TestingError::Io`] for the files,
    /// [`TestingError::StartTimeout`] when the KDC does not listen within 10 s.
    ///
    /// # Cancel safety
    /// Cancelling kills the KDC started so far and removes its directory.
    pub async fn start() -> Result<TestingKdc, TestingError> {
        let dir = tempfile::Builder::new()
            .prefix("zk-testing-kdc-")
            .tempdir()
            .map_err(|e| TestingError::io("creating the KDC's directory", e))?;
        let port = process::free_port()?;
        let path = dir.path();
        let shown = path.display();
        write(
            &path.join("krb5.conf"),
            &format!(
                "[libdefaults]\n default_realm = {realm}\n dns_lookup_realm = false\n dns_lookup_kdc = false\n \
                 rdns = false\n dns_canonicalize_hostname = false\n udp_preference_limit = 1\n\n[realms]\n \
                 {realm} = {{\n  kdc = 127.0.0.1:{port}\n }}\n",
                realm = Self::REALM
            ),
        )?;
        write(
            &path.join("kdc.conf"),
            &format!(
                "[kdcdefaults]\n kdc_ports = {port}\n kdc_tcp_ports = {port}\n\n[realms]\n {realm} = {{\n  \
                 database_name = {shown}/principal\n  key_stash_file = {shown}/stash\n  acl_file = \
                 {shown}/kadm5.acl\n  max_life = 1h\n }}\n\n[logging]\n kdc = FILE:{shown}/kdc.log\n",
                realm = Self::REALM
            ),
        )?;
        let tools = Tools { dir: path.to_path_buf() };
        tools.run("kdb5_util", &["create", "-s", "-r", Self::REALM, "-P", "zk-testing-master"])?;
        let krb5kdc = find("krb5kdc");
        if !krb5kdc.is_file() && Command::new(&krb5kdc).arg("-?").stdin(Stdio::null()).output().is_err() {
            return Err(TestingError::ToolFailed {
                command: "krb5kdc".to_owned(),
                detail: "not found (install Debian's krb5-kdc)".to_owned(),
            });
        }
        // The KDC lives while this process holds the pipe: `read` returns at its end.
        let script = format!(
            "'{}' -n -r {} & kdc=$!; read _ignored; kill $kdc 2>/dev/null; wait $kdc",
            krb5kdc.display(),
            Self::REALM
        );
        let mut watchdog = tools
            .command("sh")
            .args(["-c", &script])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| TestingError::io("starting krb5kdc", e))?;
        let pipe = watchdog.stdin.take();
        let kdc = TestingKdc { dir, port, watchdog, pipe };
        let deadline = tokio::time::Instant::now() + KDC_START;
        while tokio::net::TcpStream::connect(("127.0.0.1", port)).await.is_err() {
            if tokio::time::Instant::now() >= deadline {
                let log = kdc.dir.path().join("kdc.log");
                let log_tail = process::log_tail(&log, 20);
                return Err(TestingError::StartTimeout { name: "kdc".to_owned(), timeout: KDC_START, log, log_tail });
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Ok(kdc)
    }

    /// The `krb5.conf` that names this KDC (a client's `KRB5_CONFIG`).
    pub fn krb5_conf(&self) -> PathBuf {
        self.dir.path().join("krb5.conf")
    }

    /// The KDC's port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Adds `principal` (in the realm) with a random key, and writes its keytab; returns the
    /// keytab's path. Adding it again gives it new keys: a keytab written before no longer
    /// logs in (a wrong keytab).
    ///
    /// # Errors
    /// [`TestingError::ToolFailed`] when `kadmin.local` fails.
    ///
    /// # Cancel safety
    /// Runs the tools to the end (they are short); cancelling only drops the answer.
    pub async fn add_principal(&self, principal: &str) -> Result<PathBuf, TestingError> {
        let tools = Tools { dir: self.dir.path().to_path_buf() };
        let keytab = self.dir.path().join(format!("{}-{}.keytab", principal.replace('/', "_"), unique()));
        let exists = tools.run("kadmin.local", &["-r", Self::REALM, "-q", &format!("getprinc {principal}")]);
        let add = match exists {
            Ok(out) if out.contains("Principal:") => format!("cpw -randkey {principal}"),
            _ => format!("addprinc -randkey {principal}"),
        };
        tools.run("kadmin.local", &["-r", Self::REALM, "-q", &add])?;
        // `-norandkey` exports the current keys instead of making new ones.
        tools.run(
            "kadmin.local",
            &["-r", Self::REALM, "-q", &format!("ktadd -norandkey -k {} {principal}", keytab.display())],
        )?;
        Ok(keytab)
    }

    /// Adds the server principal `zookeeper/localhost` and returns what a server needs to
    /// accept Kerberos logins ([`TestingServerBuilder::kerberos`](super::TestingServerBuilder::kerberos)
    /// does this).
    ///
    /// # Errors
    /// As [`add_principal`](Self::add_principal).
    ///
    /// # Cancel safety
    /// As [`add_principal`](Self::add_principal).
    pub async fn server_login(&self) -> Result<KerberosLogin, TestingError> {
        let principal = format!("zookeeper/localhost@{}", Self::REALM);
        let keytab = self.add_principal("zookeeper/localhost").await?;
        Ok(KerberosLogin { krb5_conf: self.krb5_conf(), keytab, principal })
    }
}

impl Drop for TestingKdc {
    /// Closes the pipe (the watchdog stops the KDC) and waits for that, at most 2 s.
    fn drop(&mut self) {
        drop(self.pipe.take());
        for _ in 0..100 {
            if !matches!(self.watchdog.try_wait(), Ok(None)) {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.watchdog.kill();
        let _ = self.watchdog.wait();
    }
}

/// Writes the JAAS file of a server that logs in as `login`'s principal with its keytab.
pub(crate) fn write_kerberos_jaas(path: &Path, login: &KerberosLogin) -> Result<(), TestingError> {
    write(
        path,
        &format!(
            "Server {{\n  com.sun.security.auth.module.Krb5LoginModule required\n  useKeyTab=true\n  keyTab=\"{}\"\n  \
             storeKey=true\n  useTicketCache=false\n  principal=\"{}\";\n}};\n",
            login.keytab.display(),
            login.principal
        ),
    )
}

/// Runs the Kerberos tools with the KDC's configuration.
struct Tools {
    dir: PathBuf,
}

impl Tools {
    fn command(&self, tool: &str) -> Command {
        let mut command = Command::new(find(tool));
        command
            .current_dir(&self.dir)
            .env("KRB5_CONFIG", self.dir.join("krb5.conf"))
            .env("KRB5_KDC_PROFILE", self.dir.join("kdc.conf"))
            .stdin(Stdio::null());
        command
    }

    fn run(&self, tool: &str, args: &[&str]) -> Result<String, TestingError> {
        let shown = format!("{tool} {}", args.first().copied().unwrap_or_default());
        let output = self.command(tool).args(args).output().map_err(|e| TestingError::ToolFailed {
            command: shown.clone(),
            detail: format!("{e} (install Debian's krb5-kdc and krb5-admin-server)"),
        })?;
        if !output.status.success() {
            return Err(TestingError::ToolFailed {
                command: shown,
                detail: format!(
                    "{}: {}{}",
                    output.status,
                    String::from_utf8_lossy(&output.stderr).trim(),
                    String::from_utf8_lossy(&output.stdout).trim()
                ),
            });
        }
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    }
}

/// The tool in `/usr/sbin` (where Debian puts the KDC's tools, often not on a user's `PATH`),
/// else from `PATH`.
fn find(tool: &str) -> PathBuf {
    let sbin = Path::new("/usr/sbin").join(tool);
    if sbin.is_file() {
        sbin
    } else {
        PathBuf::from(tool)
    }
}

fn unique() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

fn write(path: &Path, text: &str) -> Result<(), TestingError> {
    std::fs::write(path, text).map_err(|e| TestingError::io(format!("writing {}", path.display()), e))
}
