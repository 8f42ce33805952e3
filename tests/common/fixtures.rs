//! Small helpers for the lock tests: unique paths, bounded waits and polls, frameworks, a
//! server behind a fault proxy, and checks of Curator's node names.
#![allow(dead_code)] // each test binary uses a different part of this module

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures::StreamExt;
use tokio::time::Instant;
use zk_recipes::retry::RetryForever;
use zk_recipes::testing::{self, FaultProxy, TestingServer};
use zk_recipes::{ConnectionState, ConnectionStateStream, Error, Framework, StateSnapshot};

/// How often [`eventually`] polls.
pub const POLL: Duration = Duration::from_millis(20);

/// A top-level path no other test of this process (or earlier run) uses:
/// `/<area>-<name>-<pid>-<n>-<nanos>`. Top-level, so that no two tests share a container
/// parent that the server could remove under one of them.
pub fn unique_path(area: &str, name: &str) -> String {
    static N: AtomicU64 = AtomicU64::new(0);
    let n = N.fetch_add(1, Ordering::Relaxed);
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
    format!("/{area}-{name}-{}-{n}-{nanos}", std::process::id())
}

/// Runs `test` and panics if it takes longer than `limit`.
pub async fn bounded<T>(limit: Duration, test: impl Future<Output = T>) -> T {
    match tokio::time::timeout(limit, test).await {
        Ok(value) => value,
        Err(_) => panic!("test exceeded its time limit of {limit:?}"),
    }
}

/// Awaits `fut`, panicking with `what` if it takes longer than `limit`.
pub async fn within<T>(limit: Duration, what: &str, fut: impl Future<Output = T>) -> T {
    match tokio::time::timeout(limit, fut).await {
        Ok(value) => value,
        Err(_) => panic!("{what}: not within {limit:?}"),
    }
}

/// Polls `probe` every [`POLL`] until it returns `Some`, for at most `limit` (then panics with
/// `what` and the last probe's description).
pub async fn eventually<T, F, Fut>(limit: Duration, what: &str, mut probe: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, String>>,
{
    let deadline = Instant::now() + limit;
    loop {
        let last = match probe().await {
            Ok(value) => return value,
            Err(last) => last,
        };
        if Instant::now() >= deadline {
            panic!("{what}: not within {limit:?}; last seen: {last}");
        }
        tokio::time::sleep(POLL).await;
    }
}

/// The connect string of the process-wide server (for tests that inject no server faults), or
/// the ensemble named by `ZKR_TEST_CONNECT` when it is set (for example the docker compose
/// ensemble; see `docker/README.md`). Tests that stop, pause or break servers start their own
/// whatever this says.
pub async fn shared_connect() -> String {
    if let Some(connect) = std::env::var("ZKR_TEST_CONNECT").ok().filter(|c| !c.trim().is_empty()) {
        return connect;
    }
    testing::shared_server().await.expect("starting the shared ZooKeeper server").connect_string()
}

/// A process-wide server whose container reaper does not run (ZooKeeper's
/// `znode.container.checkIntervalMs` at an hour): an empty lock directory is a container the
/// server may remove at any time, and creating it again costs requests. For the tests that count
/// requests or rely on an empty directory staying; none stops, pauses or breaks it.
pub async fn reaperless_connect() -> String {
    static SERVER: tokio::sync::OnceCell<TestingServer> = tokio::sync::OnceCell::const_new();
    let start = || TestingServer::builder().system_property("znode.container.checkIntervalMs", "3600000").start();
    SERVER.get_or_try_init(start).await.expect("starting a ZooKeeper server").connect_string()
}

/// A framework on the [`shared_connect`] server with the common session timeout
/// ([`super::timing::SESSION`]), tracing set up.
pub async fn shared_framework() -> Framework {
    init_tracing();
    framework(&shared_connect().await, super::timing::SESSION).await
}

/// A started framework with `session_timeout` that retries connection loss forever (so a test
/// decides how long an outage lasts, not the retry policy).
pub async fn framework(connect: &str, session_timeout: Duration) -> Framework {
    framework_waiting(connect, session_timeout, zk_recipes::WaitStrategy::default()).await
}

/// As [`framework`], with lock waits on the session's mirror of each lock directory
/// (`WaitStrategy::Mirror`).
pub async fn mirror_framework(connect: &str, session_timeout: Duration) -> Framework {
    framework_waiting(connect, session_timeout, zk_recipes::WaitStrategy::Mirror).await
}

/// `WaitStrategy::Mirror` when `mirror`, `WaitStrategy::PerWaiterWatch` otherwise.
pub fn waits(mirror: bool) -> zk_recipes::WaitStrategy {
    if mirror {
        zk_recipes::WaitStrategy::Mirror
    } else {
        zk_recipes::WaitStrategy::PerWaiterWatch
    }
}

/// As [`framework`], with each lock waiter watching the node ahead of it
/// (`WaitStrategy::PerWaiterWatch`, Curator's way; the fast path on).
pub async fn classic_framework(connect: &str, session_timeout: Duration) -> Framework {
    framework_waiting(connect, session_timeout, zk_recipes::WaitStrategy::PerWaiterWatch).await
}

/// As [`plain_framework`], with each lock waiter watching the node ahead of it.
pub async fn plain_classic_framework(connect: &str, session_timeout: Duration) -> Framework {
    Framework::builder(connect)
        .session_timeout(session_timeout)
        .wait_strategy(zk_recipes::WaitStrategy::PerWaiterWatch)
        .start()
        .await
        .expect("framework starts")
}

/// As [`framework`], with lock waits by `strategy`.
pub async fn framework_waiting(
    connect: &str,
    session_timeout: Duration,
    strategy: zk_recipes::WaitStrategy,
) -> Framework {
    Framework::builder(connect)
        .session_timeout(session_timeout)
        .retry_policy(RetryForever::new(Duration::from_millis(50)))
        .wait_strategy(strategy)
        .start()
        .await
        .expect("starting a framework")
}

/// A started framework with `session_timeout` and the builder's default retry policy.
pub async fn plain_framework(connect: &str, session_timeout: Duration) -> Framework {
    Framework::builder(connect).session_timeout(session_timeout).start().await.expect("framework starts")
}

/// Waits until the framework's snapshot satisfies `pred`.
pub async fn wait_for_state(
    fw: &Framework,
    limit: Duration,
    what: &str,
    pred: impl FnMut(&StateSnapshot) -> bool,
) -> StateSnapshot {
    let mut rx = fw.state_watch();
    let snapshot = within(limit, what, rx.wait_for(pred)).await.expect("framework state channel closed");
    *snapshot
}

/// The next state event of `stream`, bounded in time.
pub async fn next_event(stream: &mut ConnectionStateStream, limit: Duration) -> StateSnapshot {
    within(limit, "a state event", stream.next()).await.expect("state stream open")
}

/// Waits for an event in `state`, returning it and the events skipped on the way.
pub async fn wait_for_event(
    stream: &mut ConnectionStateStream,
    state: ConnectionState,
    limit: Duration,
) -> (StateSnapshot, Vec<StateSnapshot>) {
    let deadline = Instant::now() + limit;
    let mut seen = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let event = next_event(stream, left).await;
        if event.state == state {
            return (event, seen);
        }
        seen.push(event);
    }
}

/// Waits until the framework is connected on a session with epoch ≥ `min_epoch`.
pub async fn wait_connected(fw: &Framework, limit: Duration, min_epoch: u64) -> StateSnapshot {
    wait_for_state(fw, limit, "reconnect", |s| s.state.is_connected() && s.epoch >= min_epoch).await
}

/// Children of `path` (names, sorted by name); a missing node has none.
pub async fn children(fw: &Framework, path: &str) -> Vec<String> {
    match fw.get_children(path).await {
        Ok(mut names) => {
            names.sort();
            names
        }
        Err(Error::ZooKeeper(zk_recipes::zk::Error::NoNode)) => Vec::new(),
        Err(e) => panic!("listing {path}: {e}"),
    }
}

/// Polls until the children of `path` are exactly `expected` (as full paths, any order).
pub async fn children_become(fw: &Framework, path: &str, expected: &[String], limit: Duration) {
    let mut want: Vec<String> = expected.to_vec();
    want.sort();
    eventually(limit, &format!("children of {path} becoming {want:?}"), || async {
        let got: Vec<String> = children(fw, path).await.into_iter().map(|c| format!("{path}/{c}")).collect();
        if got == want {
            Ok(())
        } else {
            Err(format!("{got:?}"))
        }
    })
    .await
}

/// Polls until `path` has `n` children.
pub async fn children_count_becomes(fw: &Framework, path: &str, n: usize, limit: Duration) -> Vec<String> {
    eventually(limit, &format!("{path} having {n} children"), || async {
        let got = children(fw, path).await;
        if got.len() == n {
            Ok(got)
        } else {
            Err(format!("{got:?}"))
        }
    })
    .await
}

/// Polls until the semaphore (or semaphore mutex) at `path` has no node under `locks` and
/// exactly `leases` under `leases`.
pub async fn semaphore_settles(fw: &Framework, path: &str, leases: usize) {
    children_count_becomes(fw, &format!("{path}/locks"), 0, super::timing::PROMPT).await;
    children_count_becomes(fw, &format!("{path}/leases"), leases, super::timing::PROMPT).await;
}

/// Whether `name` is a Curator mutex node name: `_c_<36-char lowercase uuid>-lock-<10 digits>`.
pub fn is_curator_lock_name(name: &str) -> bool {
    is_curator_node_name(name, "lock-")
}

/// Whether `name` is a Curator lock node name with `marker` (`lock-`, `__READ__`, `__WRIT__`):
/// `_c_<36-char lowercase v4 uuid>-<marker><10 digits>`.
pub fn is_curator_node_name(name: &str, marker: &str) -> bool {
    let Some(rest) = name.strip_prefix("_c_") else { return false };
    if rest.len() != 36 + 1 + marker.len() + 10 {
        return false;
    }
    let (uuid, tail) = rest.split_at(36);
    let uuid_ok = uuid.char_indices().all(|(i, c)| match i {
        8 | 13 | 18 | 23 => c == '-',
        14 => c == '4', // version 4
        _ => c.is_ascii_digit() || ('a'..='f').contains(&c),
    });
    let Some(sequence) = tail.strip_prefix('-').and_then(|t| t.strip_prefix(marker)) else { return false };
    uuid_ok && sequence.len() == 10 && sequence.bytes().all(|b| b.is_ascii_digit())
}

/// The last path segment.
pub fn node_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// The 10-digit sequence at the end of a lock node path.
pub fn sequence_of(path: &str) -> u64 {
    let name = node_name(path);
    name[name.len().saturating_sub(10)..].parse().unwrap_or_else(|_| panic!("no sequence in {path}"))
}

/// A server whose watch manager cannot keep persistent watches (ZooKeeper's
/// `WatchManagerOptimized`: it answers `addWatch` as a 3.5 server would not have it).
pub async fn server_without_persistent_watches() -> TestingServer {
    TestingServer::builder()
        .system_property("zookeeper.watchManagerName", "org.apache.zookeeper.server.watch.WatchManagerOptimized")
        .start()
        .await
        .expect("starting a server without persistent watches")
}

/// A dedicated server (the test may stop, restart or pause it) and a fault proxy in front of it.
pub struct FaultyServer {
    pub server: TestingServer,
    pub proxy: FaultProxy,
}

impl FaultyServer {
    /// Starts a server with the testing module's defaults and a proxy to it.
    pub async fn start() -> FaultyServer {
        let server = TestingServer::start().await.expect("starting a ZooKeeper server");
        let proxy = FaultProxy::start(&server.connect_string()).await.expect("starting a fault proxy");
        FaultyServer { server, proxy }
    }

    /// The server's own address (bypasses the proxy).
    pub fn direct(&self) -> String {
        self.server.connect_string()
    }

    /// The proxy's address.
    pub fn proxied(&self) -> String {
        self.proxy.connect_string()
    }

    /// Expires `fw`'s current session on the server (`fw` must connect through the proxy) and
    /// waits until `fw` runs on a new session.
    pub async fn expire(&self, fw: &Framework, limit: Duration) -> StateSnapshot {
        let before = fw.snapshot();
        let session = fw.zk_client().expect("framework has a session").session().clone();
        within(limit, "expiring the session", testing::expire_session(&self.proxy, &self.direct(), session))
            .await
            .expect("expiring the session");
        wait_connected(fw, limit, before.epoch + 1).await
    }
}

/// Logs to the test's output when `RUST_LOG` is set (e.g. `RUST_LOG=zk_recipes=debug`).
pub fn init_tracing() {
    if std::env::var_os("RUST_LOG").is_some() {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_test_writer()
            .try_init();
    }
}

/// This process's resident memory (`VmRSS` of `/proc/self/status`), in KiB; `None` off Linux.
pub fn rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status.lines().find_map(|l| l.strip_prefix("VmRSS:"))?.trim().trim_end_matches("kB").trim().parse().ok()
}

/// Runs the ignored test `name` (its full name: `<binary>::<module>::<test>`) alone in a child
/// process of this test binary, and panics unless it passed: for a test whose figure is the
/// whole process's (its memory), which the binary's other tests would add to.
pub async fn run_alone(name: &str) {
    run_alone_with(name, &[]).await
}

/// [`run_alone`] with `env` set in the child (for example `ZKR_TEST_CONNECT`, so that it uses
/// this process's shared server rather than starting its own).
pub async fn run_alone_with(name: &str, env: &[(&str, &str)]) {
    let exe = std::env::current_exe().expect("the test binary's path");
    let output = tokio::process::Command::new(exe)
        .args(["--exact", name, "--ignored", "--nocapture", "--test-threads=1"])
        .envs(env.iter().copied())
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
        .output()
        .await
        .expect("running a test in a child process");
    let stdout = String::from_utf8_lossy(&output.stdout);
    print!("{stdout}");
    eprint!("{}", String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success(), "{name}, run alone: {}", output.status);
    assert!(stdout.contains("test result: ok. 1 passed"), "{name}, run alone, ran no test");
}

/// Checks that no two holders are inside a critical section at once, and counts entries.
#[derive(Debug, Clone, Default)]
pub struct Exclusion {
    inside: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    entries: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

impl Exclusion {
    /// Call right after acquiring; panics if someone else is inside.
    pub fn enter(&self, who: &str) {
        let before = self.inside.fetch_add(1, Ordering::SeqCst);
        assert_eq!(before, 0, "{who} entered while another holder was inside");
        self.entries.fetch_add(1, Ordering::SeqCst);
    }

    /// Call right before releasing.
    pub fn exit(&self) {
        self.inside.fetch_sub(1, Ordering::SeqCst);
    }

    /// How many times a holder entered.
    pub fn entries(&self) -> usize {
        self.entries.load(Ordering::SeqCst)
    }
}

/// The holders in `log`'s order, which must show no overlap (every enter followed by the same
/// holder's exit); the log is removed.
pub fn holders_in(log: &std::path::Path) -> Vec<String> {
    let text = std::fs::read_to_string(log).unwrap();
    let _ = std::fs::remove_file(log);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len() % 2, 0, "an unfinished hold: {text}");
    let mut holders = Vec::new();
    for (i, pair) in lines.chunks(2).enumerate() {
        let who = pair[0]
            .strip_prefix("enter ")
            .and_then(|rest| rest.split_whitespace().next())
            .unwrap_or_else(|| panic!("line {}: expected an enter line, got {pair:?}", 2 * i + 1));
        assert_eq!(pair[1], format!("exit {who}"), "overlapping holders at line {}: {pair:?}", 2 * i + 1);
        holders.push(who.to_owned());
    }
    holders
}

/// Set when dropped: tells whether a future that owns it (a critical section, a leader's
/// work) was dropped.
pub struct DropFlag(std::sync::Arc<std::sync::atomic::AtomicBool>);

impl Drop for DropFlag {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// Work that never finishes on its own: it says it started, then waits forever owning a
/// [`DropFlag`]. Returns the work, the dropped flag and the started signal.
pub fn endless_work(
) -> (impl Future<Output = ()>, std::sync::Arc<std::sync::atomic::AtomicBool>, tokio::sync::oneshot::Receiver<()>) {
    let dropped = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (started_tx, started) = tokio::sync::oneshot::channel();
    let flag = DropFlag(dropped.clone());
    let work = async move {
        let _flag = flag;
        let _ = started_tx.send(());
        std::future::pending::<()>().await
    };
    (work, dropped, started)
}

/// Waits until `proxy` (in [`ProxyMode::Hold`](zk_recipes::testing::ProxyMode::Hold)) holds back
/// more than a ping's 12 bytes from its clients: the request the test made happen is on its way,
/// held. Panics after [`EVENT`](super::timing::EVENT).
pub async fn request_held_back(proxy: &FaultProxy, what: &str) {
    eventually(super::timing::EVENT, what, || async {
        let held = proxy.held_from_clients();
        if held > 12 {
            Ok(())
        } else {
            Err(held.to_string())
        }
    })
    .await;
}
