//! TLS connections (feature `tls`) against a real ZooKeeper server speaking TLS on its secure
//! client port, with certificates made by the testing module: connect, lock and watch over
//! mutual TLS, and the refusals (wrong CA, no client certificate, bad files).

#![cfg(feature = "tls")]

use std::time::{Duration, Instant};

use futures::StreamExt;
use tokio::sync::OnceCell;
use tokio::time::timeout;
use zk_recipes::testing::{expire_session, FaultProxy, TestingServer};
use zk_recipes::{
    ConnectionState, Error, Framework, FrameworkBuilder, InterProcessMutex, NodeEventKind, WatchEvent, WatchMode,
};

const LIMIT: Duration = Duration::from_secs(90);

/// One TLS server for the tests of this file (none stops or restarts it).
static SERVER: OnceCell<TestingServer> = OnceCell::const_new();

async fn server() -> &'static TestingServer {
    SERVER.get_or_init(|| async { TestingServer::builder().tls().start().await.expect("a TLS testing server") }).await
}

fn unique_path(name: &str) -> String {
    format!("/tls-tests/{name}-{}", uuid::Uuid::new_v4().simple())
}

/// A builder for the server's TLS port with its CA and the client certificate.
fn mutual_tls(server: &TestingServer, connect_string: &str) -> FrameworkBuilder {
    let files = server.tls_files().expect("TLS files");
    Framework::builder(connect_string)
        .session_timeout(Duration::from_secs(10))
        .connection_timeout(Duration::from_secs(10))
        .tls_ca_file(files.ca_file())
        .tls_client_identity(files.client_cert_file(), files.client_key_file())
}

#[tokio::test]
async fn connect_lock_and_watch_over_mutual_tls() {
    timeout(LIMIT, async {
        let server = server().await;
        let secure = server.secure_connect_string().unwrap();
        let fw = mutual_tls(server, &secure).start().await.unwrap();
        assert!(fw.state().is_connected());

        // The server authenticated the session by its client certificate.
        let users = fw.zk_client().unwrap().list_auth_users().await.unwrap();
        assert!(
            users.iter().any(|user| user.scheme() == "x509" && user.user().contains("zk-recipes testing client")),
            "{users:?}"
        );

        // A lock, contended by a second framework whose host has no scheme: with a CA
        // configured, it connects with TLS too (the secure port speaks nothing else).
        let plain_host = secure.trim_start_matches("tcp+tls://");
        let other = mutual_tls(server, plain_host).start().await.unwrap();
        let path = unique_path("lock");
        let mutex = InterProcessMutex::new(&fw, &path).unwrap();
        let rival = InterProcessMutex::new(&other, &path).unwrap();
        let guard = mutex.acquire().await.unwrap();
        assert!(rival.acquire_timeout(Duration::from_millis(300)).await.unwrap().is_none());
        guard.release().await.unwrap();
        let rival_guard =
            rival.acquire_timeout(Duration::from_secs(10)).await.unwrap().expect("the lock after release");
        rival_guard.release().await.unwrap();

        // A persistent watch and a one-shot watch set over TLS both see the other session's
        // create.
        let watched = unique_path("watched");
        fw.ensure_path("/tls-tests").await.unwrap();
        let mut persistent = fw.watch(&watched, WatchMode::Persistent).await.unwrap();
        // (A one-shot watch goes on another path: one framework keeps the two kinds apart.)
        let once = format!("{watched}-once");
        let (stat, oneshot) = fw.exists(&once).watch().await.unwrap();
        assert!(stat.is_none());
        other.create(&once).data(b"v1").await.unwrap();
        let event = timeout(Duration::from_secs(10), oneshot.changed()).await.expect("the watch event").unwrap();
        assert_eq!((event.kind, event.path.as_str()), (NodeEventKind::Created, once.as_str()));
        other.create(&watched).data(b"v1").await.unwrap();
        let item = timeout(Duration::from_secs(10), persistent.next()).await.expect("the persistent watch's event");
        match item {
            Some(Ok(WatchEvent::Node(event))) => {
                assert_eq!((event.kind, event.path.as_str()), (NodeEventKind::Created, watched.as_str()))
            }
            other => panic!("expected the creation, got {other:?}"),
        }
        drop(persistent);

        other.delete(&watched).await.unwrap();
        other.delete(&once).await.unwrap();
        other.close().await;
        fw.close().await;
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn the_session_after_an_expiry_is_over_tls_too() {
    timeout(LIMIT, async {
        let server = server().await;
        // The proxy passes bytes through: TLS is between the client and the server.
        let proxy = FaultProxy::start(&format!("127.0.0.1:{}", server.secure_port().unwrap())).await.unwrap();
        let fw = mutual_tls(server, &proxy.connect_string()).build().unwrap();
        let mut events = fw.state_changes();
        fw.start().await.unwrap();
        let first = fw.snapshot();

        let info = fw.zk_client().unwrap().session().clone();
        expire_session(&proxy, &server.connect_string(), info).await.unwrap();
        let back = timeout(Duration::from_secs(30), async {
            loop {
                let event = events.next().await.expect("state events");
                if event.state == ConnectionState::Reconnected && event.epoch > first.epoch {
                    return event;
                }
            }
        })
        .await
        .expect("a new session");
        assert_ne!(back.session_id, first.session_id);

        let users = fw.zk_client().unwrap().list_auth_users().await.unwrap();
        assert!(users.iter().any(|user| user.scheme() == "x509"), "{users:?}");
        let guard = InterProcessMutex::new(&fw, &unique_path("after-expiry")).unwrap().acquire().await.unwrap();
        guard.release().await.unwrap();
        fw.close().await;
    })
    .await
    .unwrap();
}

/// A refused TLS handshake is retried until the connection timeout and then reported as
/// `ConnectionTimeout`: a typed error in bounded time, not a hang.
async fn assert_refused(builder: FrameworkBuilder, connection_timeout: Duration) {
    let started = Instant::now();
    let result = builder.connection_timeout(connection_timeout).start().await;
    let took = started.elapsed();
    assert!(matches!(result, Err(Error::ConnectionTimeout(t)) if t == connection_timeout), "{result:?}");
    assert!(took < connection_timeout + Duration::from_secs(5), "refused after {took:?}");
}

#[tokio::test]
async fn a_server_signed_by_another_ca_is_refused() {
    timeout(LIMIT, async {
        let server = server().await;
        let files = server.tls_files().unwrap();
        let wrong_ca = Framework::builder(&server.secure_connect_string().unwrap())
            .session_timeout(Duration::from_secs(10))
            .tls_ca_file(files.untrusted_ca_file())
            .tls_client_identity(files.client_cert_file(), files.client_key_file());
        assert_refused(wrong_ca, Duration::from_secs(3)).await;
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn without_a_client_certificate_the_server_refuses() {
    timeout(LIMIT, async {
        let server = server().await;
        let no_identity = Framework::builder(&server.secure_connect_string().unwrap())
            .session_timeout(Duration::from_secs(10))
            .tls_ca_file(server.tls_files().unwrap().ca_file());
        assert_refused(no_identity, Duration::from_secs(3)).await;
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn hostname_verification_refuses_a_name_the_certificate_does_not_hold() {
    timeout(LIMIT, async {
        let server = server().await;
        // The server's certificate names 127.0.0.1 only.
        let by_name = format!("tcp+tls://localhost:{}", server.secure_port().unwrap());
        assert_refused(mutual_tls(server, &by_name), Duration::from_secs(3)).await;
        let unverified = mutual_tls(server, &by_name).tls_hostname_verification(false).start().await.unwrap();
        assert!(unverified.state().is_connected());
        unverified.close().await;
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn without_hostname_verification_a_connection_still_checks_the_ca() {
    timeout(LIMIT, async {
        let server = server().await;
        let secure = server.secure_connect_string().unwrap();

        let files = server.tls_files().unwrap();
        let wrong_ca = Framework::builder(&secure)
            .session_timeout(Duration::from_secs(10))
            .tls_hostname_verification(false)
            .tls_ca_file(files.untrusted_ca_file())
            .tls_client_identity(files.client_cert_file(), files.client_key_file());
        assert_refused(wrong_ca, Duration::from_secs(3)).await;
    })
    .await
    .unwrap();
}

#[test]
fn tls_files_that_are_missing_or_unparsable_fail_build() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.pem");
    let garbage = dir.path().join("garbage.pem");
    std::fs::write(&garbage, "-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydGlmaWNhdGU=\n-----END CERTIFICATE-----\n")
        .unwrap();
    let builder = || Framework::builder("tcp+tls://127.0.0.1:2281");
    for ca in [&missing, &garbage] {
        let err = builder().tls_ca_file(ca).build().unwrap_err();
        assert!(matches!(err, Error::InvalidArgument { name: "tls_ca_file", .. }), "{err}");
    }
    // A tcp+tls:// host needs a CA bundle.
    let err = builder().build().unwrap_err();
    assert!(matches!(err, Error::InvalidArgument { name: "tls_ca_file", .. }), "{err}");

    // A valid CA (any PEM certificate will do for build()) with a missing or broken identity.
    let ca = dir.path().join("ca.pem");
    std::fs::write(&ca, SELF_SIGNED).unwrap();
    assert!(builder().tls_ca_file(&ca).build().is_ok());
    for (cert, key) in [(&missing, &ca), (&ca, &missing), (&ca, &garbage), (&garbage, &garbage)] {
        let err = builder().tls_ca_file(&ca).tls_client_identity(cert, key).build().unwrap_err();
        assert!(matches!(err, Error::InvalidArgument { name: "tls_client_identity", .. }), "{cert:?} {key:?}: {err}");
    }
}

/// A self-signed EC certificate (`CN=zk-recipes build test`), only parsed, never trusted.
const SELF_SIGNED: &str = "-----BEGIN CERTIFICATE-----
MIIBlTCCATugAwIBAgIUFuLznHWnz+G3nHR9hs1l7ebOElcwCgYIKoZIzj0EAwIw
IDEeMBwGA1UEAwwVemstcmVjaXBlcyBidWlsZCB0ZXN0MB4XDTI2MTIwMTIxNTM0
MloXDTM2MTEyODIxNTM0MlowIDEeMBwGA1UEAwwVemstcmVjaXBlcyBidWlsZCB0
ZXN0MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE/p7ofvxvWDyWdFsQHveWJOKQ
E2L+25iMvsZqFvWHsDY0Rn4w0/5PxfJX3UwvIzU+7dU1drBp+5pJQOxxDU/LD6NT
MFEwHQYDVR0OBBYEFPzBpYSdZoSztbXojqn4carTZ2QhMB8GA1UdIwQYMBaAFPzB
pYSdZoSztbXojqn4carTZ2QhMA8GA1UdEwEB/wQFMAMBAf8wCgYIKoZIzj0EAwID
SAAwRQIhAIapOHd5kYqhEo0aP1FwGZVTjyBUxzz4vyhjw+W3sPxDAiB8NiKnkjSj
eAgFKC4YIgxb9qewoKhUu/lzVUASrGMl/Q==
-----END CERTIFICATE-----
";

#[test]
fn a_client_key_that_does_not_match_its_certificate_fails_build() {
    let dir = tempfile::tempdir().unwrap();
    let ca = dir.path().join("ca.pem");
    std::fs::write(&ca, SELF_SIGNED).unwrap();
    let (cert, key) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
    std::fs::write(&cert, SELF_SIGNED).unwrap();
    std::fs::write(&key, OTHER_KEY).unwrap();
    let err = Framework::builder("tcp+tls://127.0.0.1:2281").tls_ca_file(&ca).tls_client_identity(&cert, &key).build();
    assert!(
        matches!(&err, Err(Error::InvalidArgument { name: "tls_client_identity", reason }) if reason.contains("is not the key of")),
        "{err:?}"
    );
}

/// An EC P-256 key that belongs to no certificate here.
const OTHER_KEY: &str = "-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgPptrLYZztKg3ABYV
QANigNDDudzQnkyI8q67bQjBO/yhRANCAATZNOTHtwHkSSNLu2ED4Jy7H+PERTwY
MpXa52uymDYQuc7dLA2wDUU8OPCHN+nPxRuVstLj45mBLYarYTCjdqID
-----END PRIVATE KEY-----
";
