//! TLS and SASL settings: collected by the builder, read and checked by `build()` (so a missing
//! or unparsable file is an error before anything is sent), applied to every session's
//! connector.

use std::fmt;
#[cfg(feature = "tls")]
use std::path::{Path, PathBuf};

use zookeeper_client::{Client, Connector};

use crate::error::{Error, Result};

/// What the builder was told, before any file is read.
#[derive(Clone, Default)]
pub(crate) struct SecurityOptions {
    #[cfg(feature = "tls")]
    pub(crate) tls_ca_file: Option<PathBuf>,
    #[cfg(feature = "tls")]
    pub(crate) tls_identity: Option<(PathBuf, PathBuf)>,
    /// `None`: the default (verify).
    #[cfg(feature = "tls")]
    pub(crate) tls_hostname_verification: Option<bool>,
    #[cfg(feature = "sasl")]
    pub(crate) sasl_digest: Option<(String, String)>,
    /// SASL GSSAPI: the server's Kerberos service name and host (`None`: each server's host
    /// as the connect string names it).
    #[cfg(feature = "sasl-gssapi")]
    pub(crate) sasl_gssapi: Option<(String, Option<String>)>,
}

impl fmt::Debug for SecurityOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut s = f.debug_struct("SecurityOptions");
        #[cfg(feature = "tls")]
        s.field("tls_ca_file", &self.tls_ca_file)
            .field("tls_identity", &self.tls_identity)
            .field("tls_hostname_verification", &self.tls_hostname_verification);
        #[cfg(feature = "sasl")]
        s.field("sasl_digest", &self.sasl_digest.as_ref().map(|(user, _)| (user, "<redacted>")));
        #[cfg(feature = "sasl-gssapi")]
        s.field("sasl_gssapi", &self.sasl_gssapi);
        s.finish_non_exhaustive()
    }
}

impl SecurityOptions {
    /// Reads and checks the files, and checks the connect string against what is configured.
    pub(crate) fn load(&self, connect_string: &str) -> Result<Security> {
        #[cfg(not(feature = "tls"))]
        refuse_tls_hosts(connect_string)?;
        #[cfg(feature = "tls")]
        let tls = self.load_tls(has_tls_host(connect_string))?;
        #[cfg(feature = "sasl")]
        let sasl = match &self.sasl_digest {
            None => None,
            Some((user, password)) => {
                if user.is_empty() || user.chars().any(char::is_control) {
                    return Err(Error::invalid_argument(
                        "sasl_digest",
                        "the user name is empty or has control characters",
                    ));
                }
                Some(SaslDigest { user: user.clone(), password: password.clone() })
            }
        };
        #[cfg(feature = "sasl-gssapi")]
        let gssapi = match &self.sasl_gssapi {
            None => None,
            Some((service, host)) => {
                #[cfg(feature = "sasl")]
                if self.sasl_digest.is_some() {
                    return Err(Error::invalid_argument(
                        "sasl_gssapi",
                        "a connection logs in with one SASL mechanism: DIGEST-MD5 or GSSAPI, not both",
                    ));
                }
                let bad = |s: &str| s.is_empty() || s.chars().any(|c| c.is_control() || c == '/' || c == '@');
                if bad(service) || host.as_deref().is_some_and(bad) {
                    return Err(Error::invalid_argument(
                        "sasl_gssapi",
                        "the service name and host are non-empty, without '/', '@' or control characters",
                    ));
                }
                let options = zookeeper_client::SaslOptions::gssapi().with_username(service.clone());
                let options = match host {
                    Some(host) => options.with_hostname(host.clone()),
                    None => options,
                };
                Some(Gssapi { options, service: service.clone(), host: host.clone() })
            }
        };
        Ok(Security {
            #[cfg(feature = "tls")]
            tls,
            #[cfg(feature = "sasl")]
            sasl,
            #[cfg(feature = "sasl-gssapi")]
            gssapi,
        })
    }

    #[cfg(feature = "tls")]
    fn load_tls(&self, wants_tls: bool) -> Result<Option<zookeeper_client::TlsOptions>> {
        let Some(ca_file) = &self.tls_ca_file else {
            if wants_tls {
                return Err(Error::invalid_argument(
                    "tls_ca_file",
                    "a tcp+tls:// host needs the CA bundle that signed the servers' certificates",
                ));
            }
            if self.tls_identity.is_some() || self.tls_hostname_verification.is_some() {
                return Err(Error::invalid_argument(
                    "tls_ca_file",
                    "TLS options were given without the CA bundle that signed the servers' certificates",
                ));
            }
            return Ok(None);
        };
        let ca = read_pem("tls_ca_file", ca_file)?;
        let mut options = zookeeper_client::TlsOptions::new()
            .with_pem_ca(&ca)
            .map_err(|e| unparsable("tls_ca_file", ca_file, "no CA certificate", &e))?;
        if let Some((cert_file, key_file)) = &self.tls_identity {
            let cert = read_pem("tls_client_identity", cert_file)?;
            let key = read_pem("tls_client_identity", key_file)?;
            // zookeeper-client accepts a file without any certificate; the server would refuse it.
            if !cert.contains("-----BEGIN CERTIFICATE-----") {
                return Err(unparsable(
                    "tls_client_identity",
                    cert_file,
                    "no certificate",
                    &"no PEM CERTIFICATE block",
                ));
            }
            options = options
                .with_pem_identity(&cert, &key)
                .map_err(|e| unparsable("tls_client_identity", key_file, "no private key", &e))?;
            // zookeeper-client would find a mismatch only when it connects.
            keys_match(&cert, &key).map_err(|e| {
                let (cert, key) = (cert_file.display(), key_file.display());
                Error::invalid_argument("tls_client_identity", format!("{key} is not the key of {cert}: {e}"))
            })?;
        }
        if self.tls_hostname_verification == Some(false) {
            // SAFETY: zookeeper-client marks this `unsafe` only as a warning that a certificate
            // for any name signed by the CA is then accepted (a man-in-the-middle risk the
            // caller chose explicitly); no memory safety is involved.
            #[allow(unsafe_code)]
            let unverified = unsafe { options.with_no_hostname_verification() };
            options = unverified;
        }
        Ok(Some(options))
    }
}

/// Whether the private key in `key_pem` belongs to the first certificate in `cert_pem`.
#[cfg(feature = "tls")]
fn keys_match(cert_pem: &str, key_pem: &str) -> std::result::Result<(), String> {
    let certs: Vec<_> = rustls_pemfile::certs(&mut cert_pem.as_bytes())
        .collect::<std::result::Result<_, _>>()
        .map_err(|e| e.to_string())?;
    let key = rustls_pemfile::private_key(&mut key_pem.as_bytes())
        .map_err(|e| e.to_string())?
        .ok_or_else(|| "no private key".to_owned())?;
    let provider = rustls::crypto::aws_lc_rs::default_provider();
    rustls::sign::CertifiedKey::from_der(certs, key, &provider).map(drop).map_err(|e| e.to_string())
}

#[cfg(feature = "tls")]
fn read_pem(name: &'static str, path: &Path) -> Result<String> {
    std::fs::read_to_string(path)
        .map_err(|e| Error::invalid_argument(name, format!("cannot read {}: {e}", path.display())))
}

#[cfg(feature = "tls")]
fn unparsable(name: &'static str, path: &Path, what: &str, error: &dyn fmt::Display) -> Error {
    Error::invalid_argument(name, format!("{} holds {what} in PEM form that could be used: {error}", path.display()))
}

/// Without the `tls` feature a `tcp+tls://` host could never connect (zookeeper-client would
/// retry it until the connection timeout): refuse it up front.
#[cfg_attr(feature = "tls", allow(dead_code))]
fn refuse_tls_hosts(connect_string: &str) -> Result<()> {
    if !has_tls_host(connect_string) {
        return Ok(());
    }
    Err(Error::InvalidConnectString {
        connect_string: connect_string.to_owned(),
        reason: "a tcp+tls:// host needs zk-recipes' `tls` feature".to_owned(),
    })
}

/// Whether any host of the connect string names the `tcp+tls://` scheme.
fn has_tls_host(connect_string: &str) -> bool {
    connect_string.split(',').any(|host| host.starts_with("tcp+tls://"))
}

/// SASL DIGEST-MD5 credentials; the password never appears in `Debug` output.
#[cfg(feature = "sasl")]
#[derive(Clone)]
struct SaslDigest {
    user: String,
    password: String,
}

/// Checked settings, applied to each session's connector.
#[derive(Clone, Default)]
pub(crate) struct Security {
    #[cfg(feature = "tls")]
    tls: Option<zookeeper_client::TlsOptions>,
    #[cfg(feature = "sasl")]
    sasl: Option<SaslDigest>,
    #[cfg(feature = "sasl-gssapi")]
    gssapi: Option<Gssapi>,
}

/// SASL GSSAPI settings: the client's options, and the names the login is checked with.
#[cfg(feature = "sasl-gssapi")]
#[derive(Clone, Debug)]
struct Gssapi {
    options: zookeeper_client::GssapiSaslOptions,
    service: String,
    host: Option<String>,
}

impl fmt::Debug for Security {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut s = f.debug_struct("Security");
        #[cfg(feature = "tls")]
        s.field("tls", &self.tls.is_some());
        #[cfg(feature = "sasl")]
        s.field("sasl_digest_user", &self.sasl.as_ref().map(|sasl| &sasl.user));
        #[cfg(feature = "sasl-gssapi")]
        s.field("sasl_gssapi", &self.gssapi);
        s.finish_non_exhaustive()
    }
}

impl Security {
    /// Connects `connector` with these settings. With TLS configured, hosts without a scheme
    /// use TLS too (`tcp://` hosts stay plain).
    pub(crate) async fn connect(
        &self,
        connector: Connector,
        connect_string: &str,
    ) -> std::result::Result<Client, zookeeper_client::Error> {
        #[cfg(feature = "sasl")]
        let connector = match &self.sasl {
            Some(sasl) => {
                connector.with_sasl(zookeeper_client::SaslOptions::digest_md5(sasl.user.clone(), sasl.password.clone()))
            }
            None => connector,
        };
        #[cfg(feature = "sasl-gssapi")]
        let connector = match &self.gssapi {
            Some(gssapi) => {
                let service = gssapi.service.clone();
                let host = gssapi.host.clone().unwrap_or_else(|| first_host(connect_string));
                // A blocking call of the Kerberos library (it asks the KDC).
                let checked = tokio::task::spawn_blocking(move || check_gssapi(&service, &host)).await;
                if let Ok(Err(reason)) = checked {
                    tracing::warn!(%reason, "the Kerberos login failed before connecting");
                    return Err(zookeeper_client::Error::AuthFailed);
                }
                connector.with_sasl(gssapi.options.clone())
            }
            None => connector,
        };
        #[cfg(feature = "tls")]
        if let Some(tls) = &self.tls {
            return connector.with_tls(tls.clone()).secure_connect(connect_string).await;
        }
        connector.connect(connect_string).await
    }
}

/// The host of the first server of `connect_string` (no scheme, port or chroot).
#[cfg(feature = "sasl-gssapi")]
fn first_host(connect_string: &str) -> String {
    let first = connect_string.split(',').next().unwrap_or_default();
    let first = first.split_once("://").map_or(first, |(_, rest)| rest);
    let first = first.split('/').next().unwrap_or_default();
    match first.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or_default().to_owned(),
        None => first.rsplit_once(':').map_or(first, |(host, _)| host).to_owned(),
    }
}

/// Starts a GSSAPI login to `service/host` as the Kerberos library's default credentials
/// would (the first step asks the KDC for the service's ticket, with the client keytab or
/// ticket cache of the environment), as zookeeper-client will: a login the KDC refuses fails
/// here, with the library's reason, instead of as a connection that times out.
#[cfg(feature = "sasl-gssapi")]
fn check_gssapi(service: &str, host: &str) -> std::result::Result<(), String> {
    use rsasl::callback::{Context, Request, SessionCallback, SessionData};
    use rsasl::mechanisms::gssapi::properties::GssService;
    use rsasl::prelude::*;
    use rsasl::property::Hostname;

    struct Names {
        service: String,
        host: String,
    }
    impl SessionCallback for Names {
        fn callback(
            &self,
            _session_data: &SessionData,
            _context: &Context<'_>,
            request: &mut Request<'_>,
        ) -> std::result::Result<(), SessionError> {
            if request.is::<Hostname>() {
                request.satisfy::<Hostname>(&self.host)?;
            } else if request.is::<GssService>() {
                request.satisfy::<GssService>(&self.service)?;
            }
            Ok(())
        }
    }
    let names = Names { service: service.to_owned(), host: host.to_owned() };
    let config = SASLConfig::builder().with_defaults().with_callback(names).map_err(|e| e.to_string())?;
    let mechanism = Mechname::parse(b"GSSAPI").map_err(|e| e.to_string())?;
    let mut session = SASLClient::new(config).start_suggested(&[mechanism]).map_err(|e| e.to_string())?;
    let mut first = Vec::new();
    session.step(Some(&[]), &mut first).map_err(|e| e.to_string())?;
    Ok(())
}

#[cfg(test)]
mod tests {
    #[cfg(feature = "sasl-gssapi")]
    #[test]
    fn the_first_host_names_the_kerberos_service_host() {
        assert_eq!(first_host("zk1.example:2181,zk2.example:2181/chroot"), "zk1.example");
        assert_eq!(first_host("tcp+tls://zk1.example:2281"), "zk1.example");
        assert_eq!(first_host("[::1]:2181"), "::1");
        assert_eq!(first_host("localhost"), "localhost");
    }

    use super::*;

    #[test]
    fn tls_hosts() {
        assert!(has_tls_host("tcp+tls://a:1"));
        assert!(has_tls_host("a:1,tcp+tls://b:2/chroot"));
        assert!(!has_tls_host("a:1,tcp://b:2"));
    }

    #[test]
    fn tls_host_without_the_feature_is_refused() {
        let err = refuse_tls_hosts("a:1,tcp+tls://b:2").unwrap_err();
        assert!(
            matches!(&err, Error::InvalidConnectString { reason, .. } if reason.contains("`tls` feature")),
            "{err}"
        );
        assert!(refuse_tls_hosts("a:1,tcp://b:2").is_ok());
        #[cfg(not(feature = "tls"))]
        assert!(matches!(Framework::builder("tcp+tls://b:2").build(), Err(Error::InvalidConnectString { .. })));
    }

    #[cfg(feature = "tls")]
    #[test]
    fn tls_files_are_checked() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("missing.pem");
        let garbage = dir.path().join("garbage.pem");
        std::fs::write(&garbage, "not a certificate\n").unwrap();
        let with_ca = |ca: &Path| SecurityOptions { tls_ca_file: Some(ca.to_owned()), ..Default::default() };
        for ca in [&missing, &garbage] {
            let err = with_ca(ca).load("tcp+tls://a:1").unwrap_err();
            assert!(matches!(err, Error::InvalidArgument { name: "tls_ca_file", .. }), "{err}");
        }
        let err = SecurityOptions::default().load("tcp+tls://a:1").unwrap_err();
        assert!(matches!(err, Error::InvalidArgument { name: "tls_ca_file", .. }), "{err}");
        let only_identity =
            SecurityOptions { tls_identity: Some((garbage.clone(), garbage.clone())), ..Default::default() };
        assert!(matches!(only_identity.load("a:1"), Err(Error::InvalidArgument { name: "tls_ca_file", .. })));
    }

    #[cfg(feature = "sasl")]
    #[test]
    fn sasl_password_is_redacted() {
        let options =
            SecurityOptions { sasl_digest: Some(("alice".into(), "secret-password".into())), ..Default::default() };
        let shown = format!("{options:?} {:?}", options.load("a:1").unwrap());
        assert!(!shown.contains("secret-password") && shown.contains("alice"), "{shown}");
        let empty = SecurityOptions { sasl_digest: Some((String::new(), "x".into())), ..Default::default() };
        assert!(matches!(empty.load("a:1"), Err(Error::InvalidArgument { name: "sasl_digest", .. })));
    }
}
