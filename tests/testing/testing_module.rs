//! Tests of the testing module against real ZooKeeper servers.
#![cfg(feature = "testing")]

use crate::common;

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::fixtures::{init_tracing, unique_path};
use zk_recipes::testing::{
    expire_session, four_letter_word, shared_server, FaultProxy, Installation, ProxyMode, TestingCluster, TestingError,
    TestingServer,
};
use zookeeper_client::{Client, CreateMode, SessionState};

/// Upper bound for any single test.
const TEST_TIMEOUT: Duration = Duration::from_secs(120);

async fn bounded<F: std::future::Future<Output = ()>>(test: F) {
    init_tracing();
    common::fixtures::bounded(TEST_TIMEOUT, test).await
}

async fn connect(connect_string: &str, session_timeout: Duration) -> Client {
    Client::connector().with_session_timeout(session_timeout).connect(connect_string).await.expect("connect")
}

fn persistent() -> zookeeper_client::CreateOptions<'static> {
    CreateMode::Persistent.with_acls(zookeeper_client::Acls::anyone_all())
}

fn ephemeral() -> zookeeper_client::CreateOptions<'static> {
    CreateMode::Ephemeral.with_acls(zookeeper_client::Acls::anyone_all())
}

/// Waits until the client reports `want` (the watcher may coalesce intermediate states).
async fn wait_state(client: &Client, want: SessionState, within: Duration) {
    let mut watcher = client.state_watcher();
    let deadline = Instant::now() + within;
    let mut seen = client.state();
    while seen != want {
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, watcher.changed()).await {
            Ok(state) => seen = state,
            Err(_) => panic!("state {want:?} not reached within {within:?}; last {seen:?}"),
        }
    }
}

/// A process is gone once /proc has no entry for it or it is a zombie.
fn process_gone(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat.rsplit_once(')').is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
    }
}

async fn wait_gone(pid: u32, dir: &Path, within: Duration) {
    let deadline = Instant::now() + within;
    while !process_gone(pid) || dir.exists() {
        assert!(
            Instant::now() < deadline,
            "process {pid} gone: {}, {} exists: {}",
            process_gone(pid),
            dir.display(),
            dir.exists()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn standalone_stop_kill_restart_keep_data() {
    bounded(async {
        let started = Instant::now();
        let mut server = TestingServer::start().await.unwrap();
        eprintln!("standalone start took {:?}", started.elapsed());
        assert!(server.is_running());
        assert_eq!(server.connect_string(), format!("127.0.0.1:{}", server.port()));
        assert_eq!(server.tick_time(), Duration::from_millis(200));
        assert_eq!(four_letter_word(&server.connect_string(), "ruok", Duration::from_secs(5)).await.unwrap(), "imok");

        let client = connect(&server.connect_string(), Duration::from_secs(5)).await;
        client.create("/kept", b"v1", &persistent()).await.unwrap();
        drop(client);

        let port = server.port();
        server.stop().await.unwrap();
        assert!(!server.is_running());
        assert!(server.pid().is_none());
        assert!(four_letter_word(&server.connect_string(), "ruok", Duration::from_secs(2)).await.is_err());
        server.stop().await.unwrap(); // idempotent

        let started = Instant::now();
        server.restart().await.unwrap();
        eprintln!("standalone restart took {:?}", started.elapsed());
        assert_eq!(server.port(), port);
        let client = connect(&server.connect_string(), Duration::from_secs(5)).await;
        assert_eq!(client.get_data("/kept").await.unwrap().0, b"v1");
        client.set_data("/kept", b"v2", None).await.unwrap();
        drop(client);

        server.kill().await.unwrap();
        assert!(!server.is_running());
        server.restart().await.unwrap();
        let client = connect(&server.connect_string(), Duration::from_secs(5)).await;
        assert_eq!(client.get_data("/kept").await.unwrap().0, b"v2", "acknowledged writes survive SIGKILL");

        // restart() of a running server stops it first.
        let pid = server.pid().unwrap();
        server.restart().await.unwrap();
        assert_ne!(server.pid().unwrap(), pid);
    })
    .await;
}

#[tokio::test]
async fn standalone_pause_and_resume() {
    bounded(async {
        let server = TestingServer::start().await.unwrap();
        let client = connect(&server.connect_string(), Duration::from_secs(20)).await;
        client.create("/p", b"x", &persistent()).await.unwrap();

        server.pause().unwrap();
        assert!(server.is_running(), "a paused server is still running");
        let stalled = tokio::time::timeout(Duration::from_secs(1), client.get_data("/p")).await;
        assert!(stalled.is_err(), "an operation must not be answered while paused: {stalled:?}");
        assert!(four_letter_word(&server.connect_string(), "ruok", Duration::from_millis(500)).await.is_err());

        server.resume().unwrap();
        // The request sent while paused, or a retry after a reconnect, is answered now.
        let answered = tokio::time::timeout(Duration::from_secs(15), async {
            loop {
                match client.get_data("/p").await {
                    Ok((data, _)) => break data,
                    Err(err) => {
                        eprintln!("after resume: {err}");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                }
            }
        })
        .await
        .expect("answered after resume");
        assert_eq!(answered, b"x");
        assert_eq!(client.state(), SessionState::SyncConnected);
    })
    .await;
}

#[tokio::test]
async fn dropping_a_server_leaves_nothing_behind() {
    bounded(async {
        let server = TestingServer::start().await.unwrap();
        let pid = server.pid().unwrap();
        let dir = server.data_dir().to_path_buf();
        assert!(dir.join("zookeeper.log").exists());
        let started = Instant::now();
        drop(server);
        eprintln!("drop took {:?}", started.elapsed());
        wait_gone(pid, &dir, Duration::from_secs(5)).await;

        // Also when the owner panics.
        let (tx, rx) = std::sync::mpsc::channel();
        let task = tokio::spawn(async move {
            let server = TestingServer::start().await.unwrap();
            tx.send((server.pid().unwrap(), server.data_dir().to_path_buf())).unwrap();
            // resume_unwind: a panic without the noise of the panic hook.
            std::panic::resume_unwind(Box::new("test panic with a server"));
        });
        assert!(task.await.unwrap_err().is_panic());
        let (pid, dir) = rx.recv().unwrap();
        wait_gone(pid, &dir, Duration::from_secs(5)).await;
    })
    .await;
}

/// Run by `a_killed_test_process_leaves_nothing_behind` in a child process (with
/// `--ignored`); on its own it only starts servers and waits to be killed.
#[tokio::test]
#[ignore = "a helper process of a_killed_test_process_leaves_nothing_behind"]
async fn child_process_holding_a_server() {
    let server = TestingServer::start().await.unwrap();
    let cluster = TestingCluster::builder().size(1).start().await.unwrap();
    println!(
        "ZK_CHILD {} {} {} {}",
        server.pid().unwrap(),
        server.data_dir().display(),
        cluster.pid(0).unwrap().unwrap(),
        cluster.data_dir().display()
    );
    tokio::time::sleep(Duration::from_secs(60)).await;
}

#[tokio::test]
async fn a_killed_test_process_leaves_nothing_behind() {
    bounded(async {
        let mut child = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "testing::testing_module::child_process_holding_a_server",
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::inherit())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let line = tokio::task::spawn_blocking(move || {
            std::io::BufReader::new(stdout)
                .lines()
                .map_while(Result::ok)
                // libtest prints "test name ... " without a newline before the test's output.
                .find_map(|line| line.find("ZK_CHILD ").map(|at| line[at..].to_owned()))
                .expect("child reports its servers")
        })
        .await
        .unwrap();
        let fields: Vec<&str> = line.split_whitespace().collect();
        let (pid, dir): (u32, PathBuf) = (fields[1].parse().unwrap(), fields[2].into());
        let (cluster_pid, cluster_dir): (u32, PathBuf) = (fields[3].parse().unwrap(), fields[4].into());
        assert!(!process_gone(pid) && dir.exists());
        child.kill().unwrap(); // SIGKILL: no destructor runs in the child
        child.wait().unwrap();
        wait_gone(pid, &dir, Duration::from_secs(10)).await;
        wait_gone(cluster_pid, &cluster_dir, Duration::from_secs(10)).await;
    })
    .await;
}

#[tokio::test]
async fn shared_server_is_started_once() {
    bounded(async {
        let a = shared_server().await.unwrap();
        let b = shared_server().await.unwrap();
        assert!(std::ptr::eq(a, b));
        let client = connect(&a.connect_string(), Duration::from_secs(5)).await;
        let path = unique_path("testing", "shared");
        client.create(&path, b"", &ephemeral()).await.unwrap();
    })
    .await;
}

#[tokio::test]
async fn start_failure_reports_the_log_tail() {
    bounded(async {
        let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = taken.local_addr().unwrap().port();
        // The longest start timeout waits as long as it takes (here: until the JVM exits).
        let err = TestingServer::builder().port(port).start_timeout(Duration::MAX).start().await.unwrap_err();
        assert!(matches!(err, TestingError::ServerExited { .. }), "{err:?}");
        assert!(err.to_string().contains("Address already in use"), "{err}");
    })
    .await;
}

/// A tick time the server cannot take (it counts whole milliseconds: under one it was
/// written as 0 and the server exited) and an empty ensemble are refused before anything
/// starts.
#[tokio::test]
async fn settings_no_server_can_take_are_refused_before_anything_starts() {
    for tick in [Duration::ZERO, Duration::from_micros(500)] {
        let err = TestingServer::builder().tick_time(tick).start().await.unwrap_err();
        assert!(matches!(err, TestingError::InvalidConfig(_)), "{tick:?}: {err:?}");
    }
    let err = zk_recipes::testing::TestingCluster::builder().size(0).start().await.unwrap_err();
    assert!(matches!(err, TestingError::InvalidConfig(_)), "{err:?}");
}

/// A port another ZooKeeper serves already: that server answers `srvr` while ours has yet to
/// find the port taken, and the start must not take it for ours (it returned `Ok` with a
/// connect string to the other server, and ours died with a `BindException`).
#[tokio::test]
async fn a_port_another_server_serves_is_no_start() {
    bounded(async {
        let mut other = TestingServer::start().await.unwrap();
        let err = TestingServer::builder().port(other.port()).start().await.unwrap_err();
        assert!(matches!(err, TestingError::ServerExited { .. }), "{err:?}");
        assert!(err.to_string().contains("Address already in use"), "{err}");
        other.stop().await.unwrap();
    })
    .await;
}

#[test]
fn missing_installation_names_the_package() {
    let empty = tempfile::tempdir().unwrap();
    let err = Installation::from_dir(empty.path()).unwrap_err();
    assert!(matches!(err, TestingError::InstallationNotFound { .. }), "{err:?}");
    let message = err.to_string();
    assert!(message.contains("apt-get install zookeeper"), "{message}");
    assert!(message.contains("ZOOKEEPER_HOME"), "{message}");
    assert!(message.contains(&empty.path().display().to_string()), "{message}");
}

#[test]
fn debian_installation_is_found() {
    let installation = Installation::find().unwrap();
    assert!(installation.java().exists());
    assert!(installation.classpath().iter().all(|entry| entry.exists()));
    assert!(installation.classpath().iter().any(|jar| jar.to_string_lossy().contains("zookeeper")));
}

#[tokio::test]
async fn cluster_survives_losing_its_leader() {
    bounded(async {
        let started = Instant::now();
        let mut cluster = TestingCluster::start().await.unwrap();
        eprintln!("cluster start took {:?}", started.elapsed());
        assert_eq!(cluster.len(), 3);
        assert_eq!(cluster.connect_string().split(',').count(), 3);
        let started = Instant::now();
        cluster.settle(Duration::from_secs(60)).await.unwrap();
        eprintln!("cluster settle took {:?}", started.elapsed());
        // The longest timeout is no overflow: settled already, it returns at once.
        cluster.settle(Duration::MAX).await.unwrap();

        let leader = cluster.leader().await.expect("a leader");
        let mut modes = Vec::new();
        for i in 0..3 {
            modes.push(cluster.mode(i).await.unwrap());
        }
        assert_eq!(modes.iter().filter(|m| *m == "leader").count(), 1, "{modes:?}");
        assert_eq!(modes.iter().filter(|m| *m == "follower").count(), 2, "{modes:?}");

        let client = connect(&cluster.connect_string(), Duration::from_secs(10)).await;
        let session = client.session_id();
        client.create("/before", b"1", &persistent()).await.unwrap();

        let killed_at = Instant::now();
        cluster.kill(leader).await.unwrap();
        assert!(!cluster.is_running(leader));
        assert_eq!(cluster.mode(leader).await, None);

        // The client's operations continue through another server, on the same session.
        let data = tokio::time::timeout(Duration::from_secs(30), async {
            loop {
                match client.create("/after", b"2", &persistent()).await {
                    Ok(_) | Err(zookeeper_client::Error::NodeExists) => break client.get_data("/before").await,
                    Err(err) => {
                        eprintln!("during failover: {err}");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                }
            }
        })
        .await
        .expect("failover within 30 s")
        .unwrap();
        assert_eq!(data.0, b"1");
        assert_eq!(client.session_id(), session);
        eprintln!("failover took {:?}", killed_at.elapsed());
        let new_leader = cluster.leader().await.expect("a new leader");
        assert_ne!(new_leader, leader);

        // The old leader comes back as a follower.
        cluster.restart(leader).await.unwrap();
        assert_eq!(cluster.mode(leader).await.as_deref(), Some("follower"));
        let direct = connect(&cluster.server_connect_string(leader), Duration::from_secs(10)).await;
        direct.sync("/").await.unwrap();
        assert_eq!(direct.get_data("/after").await.unwrap().0, b"2");
    })
    .await;
}

/// Polls `mode(i)` until it is `want`.
async fn wait_mode(cluster: &TestingCluster, i: usize, want: Option<&str>, within: Duration) {
    let deadline = Instant::now() + within;
    loop {
        let mode = cluster.mode(i).await;
        if mode.as_deref() == want {
            return;
        }
        assert!(Instant::now() < deadline, "server {i}: mode {mode:?}, want {want:?} within {within:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn cluster_pause_and_read_only() {
    bounded(async {
        let mut cluster = TestingCluster::builder().read_only(true).start().await.unwrap();
        cluster.settle(Duration::from_secs(60)).await.unwrap();
        let leader = cluster.leader().await.unwrap();
        let followers: Vec<usize> = (0..3).filter(|&i| i != leader).collect();

        cluster.pause(followers[0]).unwrap();
        assert!(cluster.is_running(followers[0]));
        assert_eq!(cluster.mode(followers[0]).await, None, "a paused server does not answer");
        let client = connect(&cluster.server_connect_string(leader), Duration::from_secs(10)).await;
        client.create("/while-paused", b"", &persistent()).await.unwrap();
        cluster.resume(followers[0]).unwrap();
        wait_mode(&cluster, followers[0], Some("follower"), Duration::from_secs(20)).await;

        // Losing the quorum: the last server serves read-only.
        cluster.stop(followers[0]).await.unwrap();
        cluster.stop(followers[1]).await.unwrap();
        let started = Instant::now();
        wait_mode(&cluster, leader, Some("read-only"), Duration::from_secs(30)).await;
        eprintln!("read-only after {:?}", started.elapsed());

        // Back to a quorum.
        cluster.restart(followers[0]).await.unwrap();
        let mode = cluster.mode(followers[0]).await.unwrap();
        assert!(mode == "leader" || mode == "follower", "{mode}");
        cluster.settle(Duration::from_secs(30)).await.unwrap();
        let client = connect(&cluster.server_connect_string(leader), Duration::from_secs(10)).await;
        client.create("/after-read-only", b"", &persistent()).await.unwrap();
    })
    .await;
}

#[tokio::test]
async fn proxy_pass_and_black_hole() {
    bounded(async {
        let server = shared_server().await.unwrap();
        let proxy = FaultProxy::start(&server.connect_string()).await.unwrap();
        assert_eq!(proxy.mode(), ProxyMode::Pass);
        let client = connect(&proxy.connect_string(), Duration::from_secs(4)).await;
        let session = client.session_id();
        let path = unique_path("testing", "pass");
        client.create(&path, b"1", &ephemeral()).await.unwrap();
        assert_eq!(proxy.connection_count(), 1);

        proxy.set_mode(ProxyMode::BlackHole);
        let started = Instant::now();
        let stalled = tokio::time::timeout(Duration::from_millis(500), client.get_data(&path)).await;
        assert!(stalled.is_err(), "black hole forwards nothing");
        wait_state(&client, SessionState::Disconnected, Duration::from_secs(4)).await;
        eprintln!("black hole: Disconnected after {:?}", started.elapsed());
        assert!(proxy.connection_count() >= 1, "black-holed connections stay open");

        proxy.set_mode(ProxyMode::Pass);
        wait_state(&client, SessionState::SyncConnected, Duration::from_secs(4)).await;
        assert_eq!(client.session_id(), session);
        assert_eq!(client.get_data(&path).await.unwrap().0, b"1");
    })
    .await;
}

/// A counting proxy drops a connection whose first bytes are no ZooKeeper frame (a TLS
/// ClientHello announces a frame of ~370 MB) instead of waiting for that much, and counts
/// the next client as before.
#[tokio::test]
async fn a_counting_proxy_drops_a_connection_that_is_not_zookeeper() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    bounded(async {
        let server = shared_server().await.unwrap();
        let proxy = zk_recipes::testing::CountingProxy::start(&server.connect_string()).await.unwrap();
        let mut stream = tokio::net::TcpStream::connect(proxy.connect_string()).await.unwrap();
        // The start of a TLS 1.0 record: 0x16030102 read as a length is 369,295,618 bytes.
        stream.write_all(&[0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc]).await.unwrap();
        let mut byte = [0u8; 1];
        let read = tokio::time::timeout(Duration::from_secs(10), stream.read(&mut byte)).await;
        assert!(matches!(read, Ok(Ok(0) | Err(_))), "the proxy closes a connection that is not ZooKeeper's: {read:?}");

        let client = connect(&proxy.connect_string(), Duration::from_secs(4)).await;
        let before = proxy.counts();
        client.check_stat("/").await.unwrap();
        assert_eq!(proxy.counts().since(&before).get("exists"), 1);
    })
    .await;
}

/// Sends a request into the black hole, then closes the connection with `close`; the
/// in-flight request fails and the client comes back on the same session.
async fn in_flight_request_fails_on(close: impl Fn(&FaultProxy)) -> zookeeper_client::Error {
    let server = shared_server().await.unwrap();
    let proxy = FaultProxy::start(&server.connect_string()).await.unwrap();
    let client = connect(&proxy.connect_string(), Duration::from_secs(10)).await;
    let session = client.session_id();
    let path = unique_path("testing", "inflight");
    client.create(&path, b"1", &ephemeral()).await.unwrap();

    proxy.set_mode(ProxyMode::BlackHole);
    let in_flight = client.get_data(&path);
    tokio::time::sleep(Duration::from_millis(100)).await;
    proxy.set_mode(ProxyMode::Pass);
    close(&proxy);
    let err = tokio::time::timeout(Duration::from_secs(5), in_flight).await.expect("in-flight fails").unwrap_err();

    let data = tokio::time::timeout(Duration::from_secs(5), client.get_data(&path)).await.unwrap().unwrap();
    assert_eq!(data.0, b"1");
    assert_eq!(client.session_id(), session, "same session after the reconnect");
    assert_eq!(client.state(), SessionState::SyncConnected);
    assert_eq!(proxy.connection_count(), 1);
    err
}

#[tokio::test]
async fn proxy_drop_gives_connection_loss() {
    bounded(async {
        let err = in_flight_request_fails_on(FaultProxy::drop_connections).await;
        assert_eq!(err, zookeeper_client::Error::ConnectionLoss);
    })
    .await;
}

#[tokio::test]
async fn proxy_reset_gives_connection_reset() {
    bounded(async {
        let err = in_flight_request_fails_on(FaultProxy::reset_connections).await;
        assert!(matches!(err, zookeeper_client::Error::Custom(_)), "{err:?}");
        assert!(err.to_string().to_lowercase().contains("reset"), "{err}");
    })
    .await;
}

#[tokio::test]
async fn proxy_refuse_new_keeps_existing() {
    bounded(async {
        let server = shared_server().await.unwrap();
        let proxy = FaultProxy::start(&server.connect_string()).await.unwrap();
        let client = connect(&proxy.connect_string(), Duration::from_secs(10)).await;
        let session = client.session_id();
        let path = unique_path("testing", "refuse");
        client.create(&path, b"1", &ephemeral()).await.unwrap();

        proxy.refuse_new(true);
        assert_eq!(client.get_data(&path).await.unwrap().0, b"1", "existing connection untouched");
        let refused = Client::connector()
            .with_session_timeout(Duration::from_secs(2))
            .with_fail_eagerly()
            .connect(&proxy.connect_string())
            .await;
        assert!(refused.is_err(), "a new client cannot get in");

        proxy.drop_connections();
        wait_state(&client, SessionState::Disconnected, Duration::from_secs(5)).await;
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert_eq!(proxy.connection_count(), 0);
        assert_eq!(client.state(), SessionState::Disconnected, "reconnects are refused");

        proxy.refuse_new(false);
        wait_state(&client, SessionState::SyncConnected, Duration::from_secs(8)).await;
        assert_eq!(client.session_id(), session);
        assert_eq!(client.get_data(&path).await.unwrap().0, b"1");
    })
    .await;
}

/// `HandshakeThenRefuse`: the black-holed client reconnects, hears the server accept its
/// session (zookeeper-client then reports `SyncConnected` although nothing else will get
/// through), the connection is reset and further connects are refused outright; back in
/// `Pass`, the proxy listens on the same address again.
#[tokio::test]
async fn proxy_handshake_then_refuse() {
    bounded(async {
        let server = shared_server().await.unwrap();
        let proxy = FaultProxy::start(&server.connect_string()).await.unwrap();
        let client = connect(&proxy.connect_string(), Duration::from_secs(4)).await;
        let session = client.session_id();
        let path = unique_path("testing", "handshake");
        client.create(&path, b"1", &ephemeral()).await.unwrap();

        proxy.set_mode(ProxyMode::HandshakeThenRefuse);
        assert_eq!(proxy.mode(), ProxyMode::HandshakeThenRefuse);
        wait_state(&client, SessionState::Disconnected, Duration::from_secs(4)).await;
        let passed = tokio::time::timeout(Duration::from_secs(4), proxy.handshake_passed()).await.expect("handshake");
        assert!(passed <= tokio::time::Instant::now());
        wait_state(&client, SessionState::SyncConnected, Duration::from_secs(4)).await;
        let refused = tokio::net::TcpStream::connect(proxy.local_addr()).await;
        assert_eq!(refused.map(drop).unwrap_err().kind(), std::io::ErrorKind::ConnectionRefused);
        let stalled = tokio::time::timeout(Duration::from_millis(500), client.get_data(&path)).await;
        assert!(stalled.is_err(), "nothing gets through after the handshake");

        proxy.set_mode(ProxyMode::Pass);
        let deadline = Instant::now() + Duration::from_secs(5);
        let ruok = loop {
            match four_letter_word(&proxy.connect_string(), "ruok", Duration::from_secs(2)).await {
                Ok(answer) => break answer,
                Err(e) => assert!(Instant::now() < deadline, "the proxy does not listen again: {e}"),
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        assert_eq!(ruok, "imok");
        // The client gets back in on its session if it has not given up on it yet.
        match tokio::time::timeout(Duration::from_secs(8), client.get_data(&path)).await {
            Ok(Ok((data, _))) => assert_eq!((data.as_slice(), client.session_id()), (&b"1"[..], session)),
            Ok(Err(zookeeper_client::Error::SessionExpired)) => {}
            other => panic!("after the proxy passes again: {other:?}"),
        }
    })
    .await;
}

#[tokio::test]
async fn expire_session_expires_the_proxied_client() {
    bounded(async {
        let server = shared_server().await.unwrap();
        let proxy = FaultProxy::start(&server.connect_string()).await.unwrap();
        // A long session: only expire_session can end it within this test.
        let client = connect(&proxy.connect_string(), Duration::from_secs(30)).await;
        let path = unique_path("testing", "expire");
        client.create(&path, b"", &ephemeral()).await.unwrap();
        let observer = connect(&server.connect_string(), Duration::from_secs(10)).await;
        assert!(observer.check_stat(&path).await.unwrap().is_some());

        let started = Instant::now();
        expire_session(&proxy, &server.connect_string(), client.session().clone()).await.unwrap();
        eprintln!("expire_session took {:?}", started.elapsed());
        assert_eq!(proxy.mode(), ProxyMode::Pass);
        assert!(observer.check_stat(&path).await.unwrap().is_none(), "ephemeral node deleted with the session");

        wait_state(&client, SessionState::Expired, Duration::from_secs(10)).await;
        eprintln!("client saw Expired after {:?}", started.elapsed());
        assert_eq!(client.get_data(&path).await.unwrap_err(), zookeeper_client::Error::SessionExpired);
    })
    .await;
}

#[tokio::test]
async fn expire_session_on_a_cluster() {
    bounded(async {
        let cluster = TestingCluster::start().await.unwrap();
        cluster.settle(Duration::from_secs(60)).await.unwrap();
        let proxy = FaultProxy::start(&cluster.server_connect_string(0)).await.unwrap();
        let client = connect(&proxy.connect_string(), Duration::from_secs(30)).await;
        let path = unique_path("testing", "expire");
        client.create(&path, b"", &ephemeral()).await.unwrap();

        let started = Instant::now();
        expire_session(&proxy, &cluster.connect_string(), client.session().clone()).await.unwrap();
        eprintln!("cluster expire_session took {:?}", started.elapsed());
        wait_state(&client, SessionState::Expired, Duration::from_secs(10)).await;
        let observer = connect(&cluster.connect_string(), Duration::from_secs(10)).await;
        observer.sync("/").await.unwrap();
        assert!(observer.check_stat(&path).await.unwrap().is_none());
    })
    .await;
}

/// The member lines (`server.N=...`) of the ensemble's configuration as `client` reads it.
/// The configuration the client's server has, once it has caught up with the leader: a read
/// is served by the member the client is connected to, which may not yet have applied a
/// reconfiguration another member committed.
async fn config_lines(client: &Client) -> Vec<String> {
    client.sync("/").await.expect("sync with the leader");
    let (data, _) = client.get_config().await.expect("configuration read");
    String::from_utf8_lossy(&data).lines().filter(|l| l.starts_with("server.")).map(str::to_owned).collect()
}

#[tokio::test]
async fn dynamic_cluster_adds_an_observer_and_removes_a_member() {
    bounded(async {
        let mut cluster = TestingCluster::builder().dynamic_reconfig(true).start().await.unwrap();
        cluster.settle(Duration::from_secs(60)).await.unwrap();
        let (scheme, auth) = cluster.superuser_auth().expect("a superuser");
        assert_eq!(scheme, "digest");
        assert!(auth.starts_with(b"super:"));
        let client = connect(&cluster.server_connect_string(1), Duration::from_secs(10)).await;
        assert_eq!(config_lines(&client).await.len(), 3);

        // An observer joins: it serves, and the configuration lists it as one.
        let observer = cluster.add_server(zk_recipes::testing::MemberRole::Observer).await.unwrap();
        assert_eq!(observer, 3);
        wait_mode(&cluster, observer, Some("observer"), Duration::from_secs(30)).await;
        let line = cluster.member_line(observer, zk_recipes::testing::MemberRole::Observer).unwrap();
        assert!(config_lines(&client).await.contains(&line), "{line}");
        let through_observer = connect(&cluster.server_connect_string(observer), Duration::from_secs(10)).await;
        let path = unique_path("testing", "observer");
        through_observer.create(&path, b"x", &persistent()).await.unwrap();

        // Member 0 leaves and stops; the rest go on.
        cluster.remove_server(0).await.unwrap();
        assert!(!cluster.is_running(0));
        let lines = config_lines(&client).await;
        assert!(lines.iter().all(|l| !l.starts_with("server.1=")), "{lines:?}");
        assert_eq!(lines.len(), 3, "{lines:?}");
        client.delete(&path, None).await.unwrap();
    })
    .await;
}

/// A write through member `i` with a fresh client answered within `within`.
async fn writes_through(cluster: &TestingCluster, i: usize, within: Duration) {
    let client = connect(&cluster.server_connect_string(i), Duration::from_secs(10)).await;
    let path = unique_path("testing", "through");
    tokio::time::timeout(within, client.create(&path, b"", &ephemeral()))
        .await
        .unwrap_or_else(|_| panic!("no answer through server {i} within {within:?}"))
        .unwrap();
}

/// Isolates member `i` of a dynamic cluster with quorum proxies and checks that it stops
/// serving while `others` (the rest of the quorum, leader included) go on; then heals it and
/// waits until it follows again.
async fn isolate_and_heal(cluster: &TestingCluster, i: usize, others: &[usize]) {
    // Cut off, the member drops its clients after syncLimit x tickTime, and cannot rejoin.
    let out = cluster.sync_timeout() * 5;
    cluster.isolate(i).unwrap();
    wait_mode(cluster, i, None, out).await;
    // Leader election is not cut, and the member keeps trying the leader's quorum port: one
    // more syncLimit later it still does not serve, while the others do.
    tokio::time::sleep(cluster.sync_timeout()).await;
    assert_eq!(cluster.mode(i).await, None, "server {i} serves while isolated");
    for &j in others {
        let mode = cluster.mode(j).await;
        assert!(matches!(mode.as_deref(), Some("leader" | "follower")), "server {j}: {mode:?} while {i} is isolated");
        writes_through(cluster, j, out).await;
    }
    cluster.heal(i).unwrap();
    wait_mode(cluster, i, Some("follower"), out * 2).await;
    writes_through(cluster, i, out).await;
}

#[tokio::test]
async fn dynamic_cluster_with_quorum_proxies_isolates_members_added_later_too() {
    bounded(async {
        let mut cluster = TestingCluster::builder().dynamic_reconfig(true).quorum_proxies(true).start().await.unwrap();
        cluster.settle(Duration::from_secs(60)).await.unwrap();
        assert_eq!(cluster.members(), [0, 1, 2]);
        let client = connect(&cluster.server_connect_string(0), Duration::from_secs(10)).await;
        let lines = config_lines(&client).await;
        for i in cluster.members() {
            let line = cluster.member_line(i, zk_recipes::testing::MemberRole::Participant).unwrap();
            assert!(line.contains("=zk-testing-member-"), "{line}");
            assert!(lines.contains(&line), "{line} in {lines:?}");
        }

        // A follower, isolated, stops serving; the leader keeps the other follower (whose
        // connection goes through the same proxy, in front of the leader).
        let leader = cluster.leader().await.unwrap();
        let followers: Vec<usize> = cluster.members().into_iter().filter(|&i| i != leader).collect();
        isolate_and_heal(&cluster, followers[0], &[leader, followers[1]]).await;

        // A member added by reconfiguration gets its own proxies, and the configuration every
        // member shares names it by host too.
        let added = cluster.add_server(zk_recipes::testing::MemberRole::Participant).await.unwrap();
        assert_eq!(cluster.members(), [0, 1, 2, added]);
        wait_mode(&cluster, added, Some("follower"), Duration::from_secs(30)).await;
        let line = cluster.member_line(added, zk_recipes::testing::MemberRole::Participant).unwrap();
        assert!(config_lines(&client).await.contains(&line), "{line}");
        let leader = cluster.leader().await.unwrap();
        let others: Vec<usize> = cluster.members().into_iter().filter(|&i| i != added).collect();
        assert!(others.contains(&leader));
        isolate_and_heal(&cluster, added, &others).await;

        // An old follower leaves; the three left still isolate and heal.
        let leaving = followers[1];
        cluster.remove_server(leaving).await.unwrap();
        assert!(!cluster.is_running(leaving));
        assert!(!cluster.members().contains(&leaving));
        cluster.settle(Duration::from_secs(60)).await.unwrap();
        let leader = cluster.leader().await.unwrap();
        let follower = cluster.members().into_iter().find(|&i| i != leader).unwrap();
        let others: Vec<usize> = cluster.members().into_iter().filter(|&i| i != follower).collect();
        isolate_and_heal(&cluster, follower, &others).await;
    })
    .await;
}
