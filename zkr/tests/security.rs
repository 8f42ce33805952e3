//! `zkr` over TLS (`--tls-ca`, `--tls-cert`, `--tls-key`) and SASL (`--sasl`) against a real
//! ZooKeeper server that speaks TLS on its secure port and logs clients in with SASL
//! DIGEST-MD5, and the exit codes of the refusals.

use std::process::Stdio;
use std::time::Duration;

use tokio::sync::OnceCell;
use tokio::time::timeout;
use zk_recipes::testing::TestingServer;
use zk_recipes::zk::Acls;
use zk_recipes::{FixedAclProvider, Framework, InterProcessMutex};

const LIMIT: Duration = Duration::from_secs(120);

static SERVER: OnceCell<TestingServer> = OnceCell::const_new();

async fn server() -> &'static TestingServer {
    SERVER
        .get_or_init(|| async {
            TestingServer::builder()
                .tls()
                .sasl_digest_user("alice", "alice-secret")
                .sasl_digest_user("bob", "bob-secret")
                .start()
                .await
                .expect("a TLS and SASL testing server")
        })
        .await
}

/// What one run of `zkr` produced.
#[derive(Debug)]
struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

/// Runs `zkr` with a clean environment (none of its `ZK_*` variables), bounded in time.
async fn zkr(args: &[&str]) -> Run {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_zkr"));
    command.args(args).stdin(Stdio::null()).kill_on_drop(true);
    for var in ["ZK_CONNECT", "ZK_DIGEST", "ZK_SASL", "ZK_TLS_CA", "ZK_TLS_CERT", "ZK_TLS_KEY"] {
        command.env_remove(var);
    }
    let output = timeout(Duration::from_secs(60), command.output()).await.expect("zkr to finish").expect("running zkr");
    Run {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

fn unique_path(name: &str) -> String {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_nanos();
    format!("/zkr-security-{name}/{}-{nanos}", std::process::id())
}

#[tokio::test(flavor = "multi_thread")]
async fn locks_over_mutual_tls_and_the_refusals() {
    timeout(LIMIT, async {
        let server = server().await;
        let files = server.tls_files().unwrap();
        let holder = Framework::builder(&server.connect_string()).start().await.unwrap();
        let path = unique_path("tls");
        let guard = InterProcessMutex::with_data(&holder, &path, b"held".to_vec()).unwrap().acquire().await.unwrap();

        let secure = server.secure_connect_string().unwrap();
        let (ca, cert, key) = (
            files.ca_file().to_str().unwrap(),
            files.client_cert_file().to_str().unwrap(),
            files.client_key_file().to_str().unwrap(),
        );
        let tls = ["--connect", secure.as_str(), "--tls-ca", ca, "--tls-cert", cert, "--tls-key", key];
        let run = zkr(&[&tls[..], &["locks", path.as_str(), "--json"]].concat()).await;
        assert_eq!(run.code, 0, "{run:?}");
        assert!(run.stdout.contains("\"held\""), "{run:?}");

        // Another CA: the server is refused, reported as unreachable (3) after the timeout.
        let wrong_ca = files.untrusted_ca_file().to_str().unwrap();
        let run = zkr(&[
            "--connect",
            &secure,
            "--connection-timeout",
            "2s",
            "--tls-ca",
            wrong_ca,
            "--tls-cert",
            cert,
            "--tls-key",
            key,
            "locks",
            &path,
        ])
        .await;
        assert_eq!(run.code, 3, "{run:?}");

        // A missing file is a bad argument (2), found before connecting.
        let run = zkr(&["--connect", &secure, "--tls-ca", "/nonexistent/ca.pem", "locks", &path]).await;
        assert_eq!(run.code, 2, "{run:?}");
        assert!(run.stderr.contains("/nonexistent/ca.pem"), "{run:?}");
        // A certificate without its key is a usage error (2).
        let run = zkr(&["--connect", &secure, "--tls-ca", ca, "--tls-cert", cert, "locks", &path]).await;
        assert_eq!(run.code, 2, "{run:?}");

        guard.release().await.unwrap();
        holder.close().await;
    })
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn locks_over_sasl_and_the_refusals() {
    timeout(LIMIT, async {
        let server = server().await;
        let alice = Framework::builder(&server.connect_string())
            .sasl_digest("alice", "alice-secret")
            .acl_provider(FixedAclProvider::new(Acls::creator_all().to_vec()))
            .start()
            .await
            .unwrap();
        let path = unique_path("sasl");
        let guard = InterProcessMutex::with_data(&alice, &path, b"alice's".to_vec()).unwrap().acquire().await.unwrap();
        let connect = server.connect_string();

        let run = zkr(&["--connect", &connect, "--sasl", "alice:alice-secret", "locks", &path, "--json"]).await;
        assert_eq!(run.code, 0, "{run:?}");
        assert!(run.stdout.contains("\"alice's\""), "{run:?}");

        // Another user, no login, a wrong password: authorization or authentication failure (5).
        for sasl in [Some("bob:bob-secret"), None, Some("alice:wrong")] {
            let mut args = vec!["--connect", connect.as_str(), "--connection-timeout", "5s"];
            if let Some(sasl) = sasl {
                args.extend(["--sasl", sasl]);
            }
            args.extend(["locks", path.as_str()]);
            let run = zkr(&args).await;
            assert_eq!(run.code, 5, "{sasl:?}: {run:?}");
            assert!(!run.stderr.contains("secret") && !run.stderr.contains("wrong"), "{run:?}");
        }

        // SASL over TLS at once.
        let files = server.tls_files().unwrap();
        let run = zkr(&[
            "--connect",
            &server.secure_connect_string().unwrap(),
            "--tls-ca",
            files.ca_file().to_str().unwrap(),
            "--tls-cert",
            files.client_cert_file().to_str().unwrap(),
            "--tls-key",
            files.client_key_file().to_str().unwrap(),
            "--sasl",
            "alice:alice-secret",
            "locks",
            &path,
            "--json",
        ])
        .await;
        assert_eq!(run.code, 0, "{run:?}");

        guard.release().await.unwrap();
        alice.close().await;
    })
    .await
    .unwrap();
}
