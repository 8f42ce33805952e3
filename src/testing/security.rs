//! What a testing server needs for TLS and SASL: keystores made with the JDK's `keytool` (a
//! CA, a server certificate and a client certificate signed by it), their PEM exports for
//! clients, and a JAAS file with digest logins.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::TestingError;

/// The password of the generated keystores (test material only).
const STORE_PASSWORD: &str = "zk-testing";
/// Days the generated certificates are valid.
const VALIDITY_DAYS: &str = "7";
/// JVM options that make each `keytool` run start faster.
const KEYTOOL_JVM: &[&str] = &["-J-XX:TieredStopAtLevel=1", "-J-XX:+UseSerialGC", "-J-XX:-UsePerfData"];

/// The TLS files of a [`TestingServer`](super::TestingServer) started with
/// [`tls()`](super::TestingServerBuilder::tls), made fresh for each server and removed with it.
///
/// A CA signs the server's certificate and a client certificate. The server's certificate
/// names `127.0.0.1` only (its one subject alternative name), so a client reaching it as
/// `localhost` sees a name the certificate does not hold: a test of hostname verification.
/// The server requires a client certificate signed by that CA (ZooKeeper's default
/// `ssl.clientAuth=need`; `.config("ssl.clientAuth", "none")` turns that off). A second CA,
/// which signed nothing the server uses, is there for tests of a client that trusts the wrong
/// CA.
///
/// With the crate's `tls` feature:
///
/// ```no_run
/// # #[cfg(feature = "tls")]
/// # async fn example() -> Result<(), Box<dyn std::error::Error>> {
/// use zk_recipes::testing::TestingServer;
/// use zk_recipes::Framework;
///
/// let server = TestingServer::builder().tls().start().await?;
/// let tls = server.tls_files().expect("started with tls()");
/// let framework = Framework::builder(&server.secure_connect_string().expect("a secure port"))
///     .tls_ca_file(tls.ca_file())
///     .tls_client_identity(tls.client_cert_file(), tls.client_key_file())
///     .start()
///     .await?;
/// # drop(framework); Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct TlsFiles {
    ca: PathBuf,
    client_cert: PathBuf,
    client_key: PathBuf,
    untrusted_ca: PathBuf,
    key_store: PathBuf,
    trust_store: PathBuf,
}

impl TlsFiles {
    /// The CA certificate (PEM) that signed the server's and the client's certificates.
    pub fn ca_file(&self) -> &Path {
        &self.ca
    }

    /// The client certificate (PEM), signed by the CA, for mutual TLS.
    pub fn client_cert_file(&self) -> &Path {
        &self.client_cert
    }

    /// The client certificate's private key (PEM, PKCS#8).
    pub fn client_key_file(&self) -> &Path {
        &self.client_key
    }

    /// A CA certificate (PEM) that signed nothing of this server: a client trusting only it
    /// must refuse the server.
    pub fn untrusted_ca_file(&self) -> &Path {
        &self.untrusted_ca
    }

    /// The server's keystore (PKCS#12: its key, its certificate and the CA's).
    pub fn server_key_store(&self) -> &Path {
        &self.key_store
    }

    /// The server's trust store (PKCS#12: the CA's certificate).
    pub fn server_trust_store(&self) -> &Path {
        &self.trust_store
    }

    /// The `zoo.cfg` entries that make a server speak TLS on `secure_port` with these files.
    pub(crate) fn server_config(&self, secure_port: u16) -> Vec<(String, String)> {
        let entry = |key: &str, value: String| (key.to_owned(), value);
        vec![
            entry("secureClientPort", secure_port.to_string()),
            entry("secureClientPortAddress", "127.0.0.1".to_owned()),
            entry("serverCnxnFactory", "org.apache.zookeeper.server.NettyServerCnxnFactory".to_owned()),
            entry("ssl.keyStore.location", self.key_store.display().to_string()),
            entry("ssl.keyStore.password", STORE_PASSWORD.to_owned()),
            entry("ssl.keyStore.type", "PKCS12".to_owned()),
            entry("ssl.trustStore.location", self.trust_store.display().to_string()),
            entry("ssl.trustStore.password", STORE_PASSWORD.to_owned()),
            entry("ssl.trustStore.type", "PKCS12".to_owned()),
        ]
    }

    /// Makes the keystores and PEM files in `dir` (which must exist) with the `keytool` next
    /// to `java` (else the one on `PATH`), and `openssl` for the client's key (keytool cannot
    /// export a private key). Blocking: about a dozen short JVM runs.
    pub(crate) fn generate(dir: &Path, java: &Path) -> Result<TlsFiles, TestingError> {
        let keytool = keytool_next_to(java);
        let at = |name: &str| dir.join(name);
        let files = TlsFiles {
            ca: at("ca.pem"),
            client_cert: at("client.pem"),
            client_key: at("client-key.pem"),
            untrusted_ca: at("untrusted-ca.pem"),
            key_store: at("server.p12"),
            trust_store: at("truststore.p12"),
        };
        let run = |args: &[&str]| run_tool(&keytool, dir, &[KEYTOOL_JVM, args].concat());
        let ca_store = at("ca.p12");
        let ca_store = ca_store.to_str().ok_or_else(|| non_utf8(dir))?;
        let path = |p: &Path| p.to_str().map(str::to_owned).ok_or_else(|| non_utf8(dir));
        let (ca_pem, key_store, trust_store) = (path(&files.ca)?, path(&files.key_store)?, path(&files.trust_store)?);

        // The CA, and its certificate in PEM.
        new_key_pair(&run, ca_store, "ca", "CN=zk-recipes testing CA", &["-ext", "bc:c"])?;
        run(&["-exportcert", "-keystore", ca_store, "-storepass", STORE_PASSWORD, "-alias", "ca", "-rfc"])
            .and_then(|pem| write(&files.ca, &pem))?;

        // The server: a key pair, a certificate signed by the CA for 127.0.0.1 only, installed
        // with the CA's certificate above it.
        new_key_pair(&run, &key_store, "server", "CN=127.0.0.1", &[])?;
        let server_pem = sign(&run, ca_store, &key_store, "server", &["san=ip:127.0.0.1", "eku=serverAuth"])?;
        let server_cert = at("server.pem");
        write(&server_cert, &server_pem)?;
        let store = ["-keystore", key_store.as_str(), "-storepass", STORE_PASSWORD, "-noprompt"];
        run(&[&["-importcert", "-alias", "ca", "-file", ca_pem.as_str()][..], &store].concat())?;
        run(&[&["-importcert", "-alias", "server", "-file", path(&server_cert)?.as_str()][..], &store].concat())?;
        let trust = ["-keystore", trust_store.as_str(), "-storetype", "PKCS12", "-storepass", STORE_PASSWORD];
        run(&[&["-importcert", "-noprompt", "-alias", "ca", "-file", ca_pem.as_str()][..], &trust].concat())?;

        // The client: a certificate signed by the CA, and its key in PEM.
        let client_store = at("client.p12");
        let client_store = client_store.to_str().ok_or_else(|| non_utf8(dir))?;
        new_key_pair(&run, client_store, "client", "CN=zk-recipes testing client", &[])?;
        let client_pem = sign(&run, ca_store, client_store, "client", &["eku=clientAuth"])?;
        write(&files.client_cert, &client_pem)?;
        let password = format!("pass:{STORE_PASSWORD}");
        let key = run_tool(
            Path::new("openssl"),
            dir,
            &["pkcs12", "-in", client_store, "-passin", &password, "-nocerts", "-nodes"],
        )?;
        write(&files.client_key, &key)?;

        // A CA nobody uses.
        let other_store = at("untrusted-ca.p12");
        let other_store = other_store.to_str().ok_or_else(|| non_utf8(dir))?;
        new_key_pair(&run, other_store, "ca", "CN=zk-recipes untrusted testing CA", &["-ext", "bc:c"])?;
        run(&["-exportcert", "-keystore", other_store, "-storepass", STORE_PASSWORD, "-alias", "ca", "-rfc"])
            .and_then(|pem| write(&files.untrusted_ca, &pem))?;
        Ok(files)
    }
}

/// `keytool -genkeypair` of an EC P-256 key in a new PKCS#12 store.
fn new_key_pair(
    run: &dyn Fn(&[&str]) -> Result<String, TestingError>,
    store: &str,
    alias: &str,
    dname: &str,
    extra: &[&str],
) -> Result<(), TestingError> {
    let args = [
        "-genkeypair",
        "-keystore",
        store,
        "-storetype",
        "PKCS12",
        "-storepass",
        STORE_PASSWORD,
        "-alias",
        alias,
        "-dname",
        dname,
        "-keyalg",
        "EC",
        "-groupname",
        "secp256r1",
        "-validity",
        VALIDITY_DAYS,
    ];
    run(&[&args[..], extra].concat()).map(drop)
}

/// A certificate request for `alias` in `store`, signed by the CA with `extensions`; the
/// certificate in PEM.
fn sign(
    run: &dyn Fn(&[&str]) -> Result<String, TestingError>,
    ca_store: &str,
    store: &str,
    alias: &str,
    extensions: &[&str],
) -> Result<String, TestingError> {
    let request = run(&["-certreq", "-keystore", store, "-storepass", STORE_PASSWORD, "-alias", alias])?;
    let request_file = format!("{store}.csr");
    write(Path::new(&request_file), &request)?;
    let mut args = vec![
        "-gencert",
        "-keystore",
        ca_store,
        "-storepass",
        STORE_PASSWORD,
        "-alias",
        "ca",
        "-infile",
        &request_file,
        "-rfc",
        "-validity",
        VALIDITY_DAYS,
    ];
    for extension in extensions {
        args.extend(["-ext", extension]);
    }
    run(&args)
}

/// The `keytool` in the directory of the real `java` binary (symlinks resolved), else
/// `keytool` from `PATH`.
fn keytool_next_to(java: &Path) -> PathBuf {
    std::fs::canonicalize(java)
        .ok()
        .and_then(|java| java.parent().map(|bin| bin.join("keytool")))
        .filter(|keytool| keytool.is_file())
        .unwrap_or_else(|| PathBuf::from("keytool"))
}

/// Runs `tool args` in `dir`; its standard output on success.
fn run_tool(tool: &Path, dir: &Path, args: &[&str]) -> Result<String, TestingError> {
    let command = args.iter().find(|arg| !arg.starts_with("-J")).copied().unwrap_or_default();
    let shown = || format!("{} {command}", tool.display());
    let output = Command::new(tool)
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| TestingError::io(format!("running {} (needed for a TLS testing server)", shown()), e))?;
    if !output.status.success() {
        return Err(TestingError::ToolFailed {
            command: shown(),
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

fn write(path: &Path, text: &str) -> Result<(), TestingError> {
    std::fs::write(path, text).map_err(|e| TestingError::io(format!("writing {}", path.display()), e))
}

fn non_utf8(dir: &Path) -> TestingError {
    TestingError::InvalidConfig(format!("the temporary directory {} is not valid UTF-8", dir.display()))
}

/// Writes a JAAS file whose `Server` section logs clients in with SASL DIGEST-MD5 as one of
/// `users` (ZooKeeper's `DigestLoginModule`, `user_<name>="<password>"` entries).
pub(crate) fn write_jaas(path: &Path, users: &[(String, String)]) -> Result<(), TestingError> {
    let mut text = String::from("Server {\n  org.apache.zookeeper.server.auth.DigestLoginModule required");
    for (user, password) in users {
        text.push_str(&format!("\n  user_{user}=\"{password}\""));
    }
    text.push_str(";\n};\n");
    write(path, &text)
}

/// Checks a digest login for the JAAS file: names of letters, digits, `_`, `-`, `.`;
/// passwords without quotes, backslashes or control characters.
pub(crate) fn check_digest_user(user: &str, password: &str) -> Result<(), TestingError> {
    if user.is_empty() || !user.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.')) {
        return Err(TestingError::InvalidConfig(format!(
            "SASL user name {user:?}: use letters, digits, '_', '-' and '.'"
        )));
    }
    if password.chars().any(|c| c == '"' || c == '\\' || c.is_control()) {
        return Err(TestingError::InvalidConfig(format!(
            "the SASL password of {user:?} has a quote, a backslash or a control character"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jaas_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("jaas.conf");
        write_jaas(&path, &[("alice".into(), "a-secret".into()), ("bob".into(), "b".into())]).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.starts_with("Server {\n  org.apache.zookeeper.server.auth.DigestLoginModule required\n"));
        assert!(text.ends_with("  user_alice=\"a-secret\"\n  user_bob=\"b\";\n};\n"), "{text}");
        assert!(check_digest_user("alice", "x y").is_ok());
        assert!(check_digest_user("a b", "x").is_err());
        assert!(check_digest_user("a", "x\"").is_err());
    }
}
