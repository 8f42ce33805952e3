//! The `zkr` binary against real ZooKeeper servers and real Apache Curator: what `zkr locks`
//! shows for each recipe (ours and Curator's, side by side in one queue), `--json` and
//! `--watch`, `zkr revoke` reaching a Curator holder, `zkr demo`, and the exit codes.

#[path = "../../tests/common/mod.rs"]
mod common;

use std::process::Stdio;
use std::time::Duration;

use common::curator::CuratorPeer;
use common::fixtures::{bounded, children_count_becomes, plain_framework, shared_connect, unique_path, within};
use common::timing::{SESSION, SLOW_LIMIT as LIMIT};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};
use zk_recipes::zk::{Acls, CreateMode};
use zk_recipes::{FixedAclProvider, Framework, InterProcessMutex, InterProcessSemaphore, InterProcessSemaphoreMutex};

/// Bound on waiting for the contenders to queue up.
const QUEUE_UP: Duration = Duration::from_secs(20);

/// What one run of `zkr` produced.
#[derive(Debug)]
struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

impl Run {
    /// The JSON document on stdout.
    fn json(&self) -> Value {
        assert_eq!(self.code, 0, "zkr failed: {self:?}");
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {self:?}"))
    }
}

/// `zkr` with a clean environment (no `ZK_CONNECT`, no `ZK_DIGEST`), bounded in time.
fn command(args: &[&str]) -> tokio::process::Command {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_zkr"));
    command.args(args).env_remove("ZK_CONNECT").env_remove("ZK_DIGEST").stdin(Stdio::null()).kill_on_drop(true);
    command
}

async fn zkr(args: &[&str]) -> Run {
    run(command(args)).await
}

async fn run(mut command: tokio::process::Command) -> Run {
    let output = within(Duration::from_secs(90), "zkr to finish", command.output()).await.expect("running zkr");
    Run {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

/// The next line of `zkr locks --watch --json`, parsed.
async fn next_json(lines: &mut tokio::io::Lines<BufReader<tokio::process::ChildStdout>>) -> Value {
    let line = within(QUEUE_UP, "a line from zkr --watch", lines.next_line()).await.unwrap().expect("more output");
    serde_json::from_str(&line).expect("a JSON line")
}

/// `zkr --connect <connect> locks <path> --json`.
async fn locks_json(connect: &str, path: &str) -> Value {
    zkr(&["--connect", connect, "locks", path, "--json"]).await.json()
}

fn nodes(report: &Value) -> &Vec<Value> {
    report["nodes"].as_array().expect("nodes is an array")
}

fn field<'a>(nodes: &'a [Value], name: &str) -> Vec<&'a str> {
    nodes.iter().map(|n| n[name].as_str().unwrap_or("null")).collect()
}

fn session_of(framework: &Framework) -> String {
    format!("{:#x}", framework.snapshot().session_id)
}

/// Starts the Curator peer, or `None` (the test then skips) when Curator is not installed.
async fn curator(connect: &str) -> Option<CuratorPeer> {
    CuratorPeer::started(connect, SESSION).await
}

async fn curator_session(peer: &mut CuratorPeer) -> String {
    let reply = peer.command("session").await.expect("session");
    reply.split_whitespace().nth(1).expect("session 0x...").to_owned()
}

async fn ok(peer: &mut CuratorPeer, line: &str) {
    let reply = peer.command(line).await.expect(line);
    assert!(
        reply.starts_with("ok") || reply.starts_with("acquired") || reply.starts_with("released"),
        "{line}: {reply}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn mutex_holder_and_waiters_in_queue_order() {
    bounded(LIMIT, async {
        let connect = shared_connect().await;
        let path = unique_path("zkr", "mutex");
        let (fa, fb, fc) = (
            plain_framework(&connect, SESSION).await,
            plain_framework(&connect, SESSION).await,
            plain_framework(&connect, SESSION).await,
        );
        let a = InterProcessMutex::with_data(&fa, &path, b"worker-a".to_vec()).unwrap();
        let guard_a = a.acquire().await.unwrap();
        let b = InterProcessMutex::with_data(&fb, &path, vec![0, 1, 0xff]).unwrap();
        let waiting_b = tokio::spawn(async move { b.acquire().await });
        children_count_becomes(&fa, &path, 2, QUEUE_UP).await;
        let c = InterProcessMutex::new(&fc, &path).unwrap();
        let waiting_c = tokio::spawn(async move { c.acquire().await });
        children_count_becomes(&fa, &path, 3, QUEUE_UP).await;

        let report = locks_json(&connect, &path).await;
        assert_eq!(report["recipe"], "mutex");
        assert_eq!(report["path"], path.as_str());
        let list = nodes(&report);
        assert_eq!(field(list, "role"), ["holder", "waiter", "waiter"]);
        assert_eq!(field(list, "kind"), ["lock", "lock", "lock"]);
        assert_eq!(list[0]["path"], guard_a.lock_path());
        assert_eq!(field(list, "owner_session"), [session_of(&fa), session_of(&fb), session_of(&fc)]);
        assert_eq!((&list[0]["data"], &list[0]["data_format"]), (&Value::from("worker-a"), &Value::from("text")));
        assert_eq!((&list[1]["data"], &list[1]["data_format"]), (&Value::from("0001ff"), &Value::from("hex")));
        assert_eq!((&list[2]["data"], &list[2]["data_format"]), (&Value::from(""), &Value::from("text")));
        let sequences: Vec<i64> = list.iter().map(|n| n["sequence"].as_i64().expect("a sequence")).collect();
        assert!(sequences.windows(2).all(|w| w[0] < w[1]), "{sequences:?}");
        assert!(list.iter().all(|n| n["age_ms"].as_i64().is_some_and(|age| age >= 0)));
        assert_eq!(a.participant_nodes().await.unwrap(), field(list, "path"), "the library's own order");
        // Each waiter waits on the node just ahead of it; nobody has asked for a revocation.
        assert_eq!(list[0]["waits_on"], Value::Null);
        assert_eq!(list[1]["waits_on"], list[0]["name"]);
        assert_eq!(list[2]["waits_on"], list[1]["name"]);
        assert!(list.iter().all(|n| n["revocation_requested"] == false));

        // The table says the same.
        let table = zkr(&["--connect", &connect, "locks", &path]).await;
        assert_eq!(table.code, 0, "{table:?}");
        assert!(table.stdout.contains("mutex (InterProcessMutex"), "{}", table.stdout);
        assert!(table.stdout.contains("1 holder, 2 waiters"), "{}", table.stdout);
        let holder_line = table.stdout.lines().find(|l| l.starts_with("holder")).expect("a holder row");
        assert!(holder_line.contains(zk_recipes::path::node_name(guard_a.lock_path())), "{holder_line}");
        assert!(holder_line.contains("worker-a") && holder_line.contains(&session_of(&fa)), "{holder_line}");

        // The next in line takes over.
        guard_a.release().await.unwrap();
        let guard_b = within(QUEUE_UP, "b acquiring", waiting_b).await.unwrap().unwrap();
        let list = locks_json(&connect, &path).await["nodes"].as_array().unwrap().clone();
        assert_eq!(field(&list, "role"), ["holder", "waiter"]);
        assert_eq!(list[0]["path"], guard_b.lock_path());
        guard_b.release().await.unwrap();
        within(QUEUE_UP, "c acquiring", waiting_c).await.unwrap().unwrap().release().await.unwrap();
        for fw in [fa, fb, fc] {
            fw.close().await;
        }
    })
    .await
}

#[tokio::test(flavor = "multi_thread")]
async fn semaphore_leases_and_the_internal_lock_queue() {
    bounded(LIMIT, async {
        let connect = shared_connect().await;
        let path = unique_path("zkr", "semaphore");
        let fws = [
            plain_framework(&connect, SESSION).await,
            plain_framework(&connect, SESSION).await,
            plain_framework(&connect, SESSION).await,
            plain_framework(&connect, SESSION).await,
        ];
        let semaphore = |i: usize| InterProcessSemaphore::with_data(&fws[i], &path, 2, vec![b'a' + i as u8]).unwrap();
        let lease_a = semaphore(0).acquire().await.unwrap();
        let lease_b = semaphore(1).acquire().await.unwrap();
        // c takes the internal lock and waits for a free lease; d queues behind c.
        let c = semaphore(2);
        let waiting_c = tokio::spawn(async move { c.acquire().await });
        children_count_becomes(&fws[0], &format!("{path}/leases"), 3, QUEUE_UP).await;
        let d = semaphore(3);
        let waiting_d = tokio::spawn(async move { d.acquire().await });
        children_count_becomes(&fws[0], &format!("{path}/locks"), 2, QUEUE_UP).await;

        let report = locks_json(&connect, &path).await;
        assert_eq!(report["recipe"], "semaphore");
        let list = nodes(&report);
        let leases: Vec<Value> = list.iter().filter(|n| n["section"] == "leases").cloned().collect();
        let locks: Vec<Value> = list.iter().filter(|n| n["section"] == "locks").cloned().collect();
        assert_eq!(field(&leases, "role"), ["lease", "lease", "lease"]);
        assert_eq!(field(&leases, "data"), ["a", "b", "c"]);
        assert_eq!(leases[0]["path"], lease_a.lease_path());
        assert_eq!(field(&locks, "role"), ["holder", "waiter"]);
        assert_eq!(field(&locks, "owner_session"), [session_of(&fws[2]), session_of(&fws[3])]);

        // The leases directory on its own is understood too.
        let report = locks_json(&connect, &format!("{path}/leases")).await;
        assert_eq!(report["recipe"], "leases");
        assert_eq!(nodes(&report).len(), 3);

        lease_a.release().await.unwrap();
        lease_b.release().await.unwrap();
        within(QUEUE_UP, "c", waiting_c).await.unwrap().unwrap().release().await.unwrap();
        within(QUEUE_UP, "d", waiting_d).await.unwrap().unwrap().release().await.unwrap();
        for fw in fws {
            fw.close().await;
        }
    })
    .await
}

#[tokio::test(flavor = "multi_thread")]
async fn semaphore_mutex_shows_its_semaphore_layout() {
    bounded(LIMIT, async {
        let connect = shared_connect().await;
        let path = unique_path("zkr", "semmutex");
        let (fa, fb) = (plain_framework(&connect, SESSION).await, plain_framework(&connect, SESSION).await);
        let guard = InterProcessSemaphoreMutex::new(&fa, &path).unwrap().acquire().await.unwrap();
        let b = InterProcessSemaphoreMutex::new(&fb, &path).unwrap();
        let waiting = tokio::spawn(async move { b.acquire().await });
        // b holds the internal lock and has made its lease node; it waits for a's to go.
        children_count_becomes(&fa, &format!("{path}/locks"), 1, QUEUE_UP).await;
        children_count_becomes(&fa, &format!("{path}/leases"), 2, QUEUE_UP).await;

        let report = locks_json(&connect, &path).await;
        assert_eq!(report["recipe"], "semaphore");
        let list = nodes(&report);
        let lease_sessions: Vec<&str> =
            list.iter().filter(|n| n["section"] == "leases").map(|n| n["owner_session"].as_str().unwrap()).collect();
        assert_eq!(lease_sessions, [session_of(&fa), session_of(&fb)]);
        let locks: Vec<&Value> = list.iter().filter(|n| n["section"] == "locks").collect();
        assert_eq!(locks.len(), 1);
        assert_eq!(
            (locks[0]["role"].as_str(), locks[0]["owner_session"].as_str()),
            (Some("holder"), Some(session_of(&fb).as_str()))
        );

        guard.release().await.unwrap();
        within(QUEUE_UP, "b", waiting).await.unwrap().unwrap().release().await.unwrap();
        fa.close().await;
        fb.close().await;
    })
    .await
}

#[tokio::test(flavor = "multi_thread")]
async fn leader_latch_nodes_and_foreign_children() {
    bounded(LIMIT, async {
        let connect = shared_connect().await;
        let (fa, fb) = (plain_framework(&connect, SESSION).await, plain_framework(&connect, SESSION).await);

        // Latch-style nodes, as Curator's LeaderLatch names them: the first one leads.
        let latch = unique_path("zkr", "latch");
        let first = fa
            .create(&format!("{latch}/{}latch-", zk_recipes::path::new_protected_prefix()))
            .data(b"a")
            .mode(CreateMode::EphemeralSequential)
            .await
            .unwrap()
            .path;
        let second = fb
            .create(&format!("{latch}/{}latch-", zk_recipes::path::new_protected_prefix()))
            .data(b"b")
            .mode(CreateMode::EphemeralSequential)
            .await
            .unwrap()
            .path;
        let report = locks_json(&connect, &latch).await;
        assert_eq!(report["recipe"], "leader-latch");
        let list = nodes(&report);
        assert_eq!(field(list, "path"), [first.as_str(), second.as_str()]);
        assert_eq!(field(list, "role"), ["holder", "waiter"]);
        assert_eq!(field(list, "kind"), ["latch", "latch"]);

        // A foreign child that sorts first is what every contender waits on, as in Curator.
        let path = unique_path("zkr", "foreign");
        fa.create(&format!("{path}/0")).await.unwrap();
        let mutex = InterProcessMutex::new(&fb, &path).unwrap();
        let waiting = tokio::spawn(async move { mutex.acquire().await });
        children_count_becomes(&fa, &path, 2, QUEUE_UP).await;
        let report = locks_json(&connect, &path).await;
        let list = nodes(&report);
        assert_eq!(field(list, "name")[0], "0");
        assert_eq!(field(list, "role"), ["holder", "waiter"]);
        assert_eq!(field(list, "kind"), ["foreign", "lock"]);
        assert_eq!(list[0]["owner_session"], Value::Null, "a persistent node has no owner");
        fa.delete(&format!("{path}/0")).await.unwrap();
        within(QUEUE_UP, "the waiter after the foreign node went", waiting)
            .await
            .unwrap()
            .unwrap()
            .release()
            .await
            .unwrap();
        fa.close().await;
        fb.close().await;
    })
    .await
}

/// Rust and Curator contenders in one queue, shown in Curator's own order with the right
/// owners, and the holder handed over across the two.
#[tokio::test(flavor = "multi_thread")]
async fn mixed_rust_and_curator_queue() {
    bounded(LIMIT, async {
        let connect = shared_connect().await;
        let Some(mut peer) = curator(&connect).await else { return };
        let path = unique_path("zkr", "mixed");
        let (fa, fb) = (plain_framework(&connect, SESSION).await, plain_framework(&connect, SESSION).await);
        let a = InterProcessMutex::new(&fa, &path).unwrap();
        let guard_a = a.acquire().await.unwrap();
        ok(&mut peer, &format!("mutex C1 {path}")).await;
        ok(&mut peer, &format!("mutex C2 {path}")).await;
        peer.send("acquire C1").await.unwrap();
        children_count_becomes(&fa, &path, 2, QUEUE_UP).await;
        let b = InterProcessMutex::with_data(&fb, &path, b"rust-b".to_vec()).unwrap();
        let waiting_b = tokio::spawn(async move { b.acquire().await });
        children_count_becomes(&fa, &path, 3, QUEUE_UP).await;
        peer.send("acquire C2").await.unwrap();
        children_count_becomes(&fa, &path, 4, QUEUE_UP).await;
        let java = curator_session(&mut peer).await;

        let report = locks_json(&connect, &path).await;
        assert_eq!(report["recipe"], "mutex");
        let list = nodes(&report);
        assert_eq!(field(list, "role"), ["holder", "waiter", "waiter", "waiter"]);
        assert_eq!(field(list, "owner_session"), [session_of(&fa), java.clone(), session_of(&fb), java.clone()]);
        assert_eq!(list[0]["path"], guard_a.lock_path());
        // Curator's own order (getParticipantNodes sorts with its driver) is zkr's order.
        let curator_order = peer.participants("C1").await.unwrap();
        assert_eq!(field(list, "path"), curator_order);
        // Curator writes the host's address as node data; our node carries what we gave it.
        assert_eq!(list[1]["data_format"], "text");
        assert!(!list[1]["data"].as_str().unwrap().is_empty(), "{}", list[1]);
        assert_eq!(list[2]["data"], "rust-b");

        // The lock passes to the Curator contender, and zkr follows.
        guard_a.release().await.unwrap();
        peer.wait_for("acquired C1", QUEUE_UP).await.unwrap();
        let list = locks_json(&connect, &path).await["nodes"].as_array().unwrap().clone();
        assert_eq!(field(&list, "role"), ["holder", "waiter", "waiter"]);
        assert_eq!(field(&list, "owner_session"), [java.clone(), session_of(&fb), java.clone()]);
        assert_eq!(peer.lock_paths("C1").await.unwrap(), [list[0]["path"].as_str().unwrap()]);

        ok(&mut peer, "release C1").await;
        within(QUEUE_UP, "b", waiting_b).await.unwrap().unwrap().release().await.unwrap();
        peer.wait_for("acquired C2", QUEUE_UP).await.unwrap();
        ok(&mut peer, "release C2").await;
        peer.quit().await.unwrap();
        fa.close().await;
        fb.close().await;
    })
    .await
}

#[tokio::test(flavor = "multi_thread")]
async fn curator_read_write_lock() {
    bounded(LIMIT, async {
        let connect = shared_connect().await;
        let Some(mut peer) = curator(&connect).await else { return };
        let path = unique_path("zkr", "rwlock");
        let fw = plain_framework(&connect, SESSION).await;
        for id in ["R", "W", "S"] {
            ok(&mut peer, &format!("rwlock {id} {path}")).await;
        }
        ok(&mut peer, "acquire R.read").await;
        peer.send("acquire W.write").await.unwrap();
        children_count_becomes(&fw, &path, 2, QUEUE_UP).await;
        peer.send("acquire S.read").await.unwrap();
        children_count_becomes(&fw, &path, 3, QUEUE_UP).await;

        let report = locks_json(&connect, &path).await;
        assert_eq!(report["recipe"], "read-write");
        let list = nodes(&report);
        assert_eq!(field(list, "kind"), ["read", "write", "read"]);
        // the second reader queued behind a writer, so it waits although a reader holds
        assert_eq!(field(list, "role"), ["holder", "waiter", "waiter"]);

        ok(&mut peer, "release R.read").await;
        peer.wait_for("acquired W.write", QUEUE_UP).await.unwrap();
        let list = locks_json(&connect, &path).await["nodes"].as_array().unwrap().clone();
        assert_eq!(field(&list, "kind"), ["write", "read"]);
        assert_eq!(field(&list, "role"), ["holder", "waiter"]);
        assert_eq!(peer.lock_paths("W.write").await.unwrap(), [list[0]["path"].as_str().unwrap()]);

        ok(&mut peer, "release W.write").await;
        peer.wait_for("acquired S.read", QUEUE_UP).await.unwrap();
        ok(&mut peer, "release S.read").await;
        peer.quit().await.unwrap();
        fw.close().await;
    })
    .await
}

#[tokio::test(flavor = "multi_thread")]
async fn revoke_asks_a_curator_holder_to_let_go() {
    bounded(LIMIT, async {
        let connect = shared_connect().await;
        let Some(mut peer) = curator(&connect).await else { return };
        let path = unique_path("zkr", "revoke");
        let fw = plain_framework(&connect, SESSION).await;
        ok(&mut peer, &format!("mutex V {path}")).await;
        ok(&mut peer, "revocable V").await;
        ok(&mut peer, "acquire V").await;
        let node = nodes(&locks_json(&connect, &path).await)[0]["path"].as_str().unwrap().to_owned();

        let run = zkr(&["--connect", &connect, "revoke", &node]).await;
        assert_eq!(run.code, 0, "{run:?}");
        assert!(run.stdout.contains("revocation requested"), "{run:?}");
        peer.wait_for("revoke-requested V", QUEUE_UP).await.unwrap();
        let (data, _) = fw.get_data(&node).await.unwrap();
        assert_eq!(data, b"__REVOKE__");
        let report = locks_json(&connect, &path).await;
        let shown = &nodes(&report)[0];
        assert_eq!((&shown["path"], &shown["revocation_requested"]), (&Value::from(node.as_str()), &Value::from(true)));

        // Revoking a node that is gone is not an error (Curator's Revoker ignores it too).
        ok(&mut peer, "release V").await;
        let run = zkr(&["--connect", &connect, "revoke", &node]).await;
        assert_eq!(run.code, 0, "{run:?}");
        assert!(run.stdout.contains("nothing to revoke"), "{run:?}");
        peer.quit().await.unwrap();
        fw.close().await;
    })
    .await
}

#[tokio::test(flavor = "multi_thread")]
async fn watch_prints_a_document_per_change() {
    bounded(LIMIT, async {
        let connect = shared_connect().await;
        let path = unique_path("zkr", "watch");
        let (fa, fb) = (plain_framework(&connect, SESSION).await, plain_framework(&connect, SESSION).await);
        let guard_a = InterProcessMutex::new(&fa, &path).unwrap().acquire().await.unwrap();

        let mut child = command(&["--connect", &connect, "locks", &path, "--watch", "--json"])
            .stdout(Stdio::piped())
            .spawn()
            .expect("starting zkr --watch");
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        assert_eq!(field(nodes(&next_json(&mut lines).await), "role"), ["holder"]);

        let b = InterProcessMutex::new(&fb, &path).unwrap();
        let waiting_b = tokio::spawn(async move { b.acquire().await });
        assert_eq!(field(nodes(&next_json(&mut lines).await), "role"), ["holder", "waiter"]);

        guard_a.release().await.unwrap();
        let report = next_json(&mut lines).await;
        assert_eq!(field(nodes(&report), "owner_session"), [session_of(&fb)]);
        within(QUEUE_UP, "b", waiting_b).await.unwrap().unwrap().release().await.unwrap();
        let _ = child.start_kill();
        let _ = child.wait().await;
        fa.close().await;
        fb.close().await;
    })
    .await
}

#[tokio::test(flavor = "multi_thread")]
async fn namespaced_paths() {
    bounded(LIMIT, async {
        let connect = shared_connect().await;
        let namespace = unique_path("zkr", "ns")[1..].to_owned();
        let fw = Framework::builder(&connect).namespace(&namespace).session_timeout(SESSION).start().await.unwrap();
        let guard = InterProcessMutex::new(&fw, "/orders").unwrap().acquire().await.unwrap();
        let report =
            zkr(&["--connect", &connect, "--namespace", &namespace, "locks", "/orders", "--json"]).await.json();
        assert_eq!(field(nodes(&report), "path"), [guard.lock_path()]);
        // Without the namespace the same nodes sit under /<namespace>.
        let report = locks_json(&connect, &format!("/{namespace}/orders")).await;
        assert_eq!(nodes(&report).len(), 1);
        guard.release().await.unwrap();
        fw.close().await;
    })
    .await
}

#[tokio::test(flavor = "multi_thread")]
async fn missing_path_empty_and_not_a_lock_directory() {
    bounded(LIMIT, async {
        let connect = shared_connect().await;
        let fw = plain_framework(&connect, SESSION).await;

        let missing = unique_path("zkr", "missing");
        let run = zkr(&["--connect", &connect, "locks", &missing]).await;
        assert_eq!(run.code, 4, "{run:?}");
        assert!(run.stderr.contains("no such node"), "{run:?}");
        let run = zkr(&["--connect", &connect, "locks", &missing, "--watch"]).await;
        assert_eq!(run.code, 4, "--watch on a missing path: {run:?}");

        let empty = unique_path("zkr", "empty");
        fw.create(&empty).await.unwrap();
        let run = zkr(&["--connect", &connect, "locks", &empty]).await;
        assert_eq!(run.code, 0, "{run:?}");
        assert!(run.stdout.contains("nobody holds or waits"), "{run:?}");
        assert_eq!(locks_json(&connect, &empty).await["recipe"], "empty");

        let config = unique_path("zkr", "config");
        for child in ["users", "settings"] {
            fw.create(&format!("{config}/{child}")).await.unwrap();
        }
        let run = zkr(&["--connect", &connect, "locks", &config]).await;
        assert_eq!(run.code, 6, "{run:?}");
        assert!(run.stderr.contains("is not a lock directory") && run.stderr.contains("settings, users"), "{run:?}");

        // A queue is no lock directory either: zkr says which subcommand shows it.
        let queue = unique_path("zkr", "queue");
        zk_recipes::SimpleDistributedQueue::new(&fw, &queue).unwrap().offer(b"item").await.unwrap();
        let run = zkr(&["--connect", &connect, "locks", &queue]).await;
        assert_eq!(run.code, 6, "{run:?}");
        assert!(run.stderr.contains(&format!("zkr queue {queue}")), "{run:?}");
        fw.close().await;
    })
    .await
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_arguments_exit_2_before_connecting() {
    bounded(LIMIT, async {
        // Nothing listens on port 1: these must fail on the arguments, never on the connection.
        for args in [
            &[][..],
            &["locks"],
            &["locks", "relative/path"],
            &["locks", "/a/"],
            &["--session-timeout", "soon", "locks", "/a"],
            &["--connection-timeout", "0s", "locks", "/a"],
            &["--digest", "no-colon", "locks", "/a"],
            &["--connect", "bad host:1", "locks", "/a"],
            &["--namespace", "a//b", "locks", "/a"],
            &["revoke", "/"],
            &["revoke", "/config/app"],
            &["revoke", "/locks/orders/typo"],
            &["demo", "--leases", "0"],
            &["demo", "--path", "relative"],
            &["frobnicate"],
        ] {
            let mut all = vec!["--connect", "127.0.0.1:1"];
            if args.first() == Some(&"--connect") {
                all.clear();
            }
            all.extend_from_slice(args);
            let run = zkr(&all).await;
            assert_eq!(run.code, 2, "{all:?}: {run:?}");
            assert!(!run.stderr.contains("cannot reach"), "{all:?} tried to connect: {run:?}");
        }
        let help = zkr(&["--help"]).await;
        assert_eq!(help.code, 0);
        for code in [
            "0  success",
            "2  bad arguments",
            "3  ZooKeeper unreachable",
            "4  the path",
            "5  authentication",
            "6  the path exists but",
            "7  zkr demo",
        ] {
            assert!(help.stdout.contains(code), "--help lacks {code:?}: {}", help.stdout);
        }
    })
    .await
}

#[tokio::test(flavor = "multi_thread")]
async fn unreachable_ensemble_exits_3() {
    bounded(LIMIT, async {
        // A port that was just free: nothing listens there.
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let connect = format!("127.0.0.1:{port}");
        for command in [&["locks", "/a"][..], &["revoke", "/a/_c_x-lock-0000000001"], &["demo"]] {
            let mut args = vec!["--connect", &connect, "--connection-timeout", "1s"];
            args.extend_from_slice(command);
            let run = zkr(&args).await;
            assert_eq!(run.code, 3, "{args:?}: {run:?}");
            assert!(run.stderr.contains("cannot reach ZooKeeper") && run.stderr.contains(&connect), "{run:?}");
            assert!(
                run.stderr.contains("connecting to") || run.stderr.contains("opening"),
                "no progress line: {run:?}"
            );
        }
    })
    .await
}

#[tokio::test(flavor = "multi_thread")]
async fn digest_acl_refuses_other_clients_exit_5() {
    bounded(LIMIT, async {
        let connect = shared_connect().await;
        let path = unique_path("zkr", "acl");
        let alice = Framework::builder(&connect)
            .session_timeout(SESSION)
            .auth("digest", b"alice:secret")
            .acl_provider(FixedAclProvider::new(Acls::creator_all().to_vec()))
            .start()
            .await
            .unwrap();
        let guard = InterProcessMutex::with_data(&alice, &path, b"alice's".to_vec()).unwrap().acquire().await.unwrap();

        for digest in [None, Some("bob:secret"), Some("alice:wrong")] {
            let mut args = vec!["--connect", connect.as_str()];
            if let Some(digest) = digest {
                args.extend(["--digest", digest]);
            }
            args.extend(["locks", path.as_str()]);
            let run = zkr(&args).await;
            assert_eq!(run.code, 5, "{digest:?}: {run:?}");
            assert!(run.stderr.contains("not authorized") && !run.stderr.contains("secret"), "{run:?}");
        }
        let report = zkr(&["--connect", &connect, "--digest", "alice:secret", "locks", &path, "--json"]).await.json();
        assert_eq!(field(nodes(&report), "data"), ["alice's"]);
        // The digest may come from the environment instead of the command line.
        let mut from_env = command(&["--connect", &connect, "locks", &path, "--json"]);
        from_env.env("ZK_DIGEST", "alice:secret");
        assert_eq!(nodes(&run(from_env).await.json()).len(), 1);
        // Revoking needs the right to write the node.
        let run = zkr(&["--connect", &connect, "revoke", guard.lock_path()]).await;
        assert_eq!(run.code, 5, "{run:?}");

        guard.release().await.unwrap();
        alice.close().await;
    })
    .await
}

/// The README's demo command: an embedded server, both scenarios, checked by zkr itself and
/// again here from its output.
#[tokio::test(flavor = "multi_thread")]
async fn demo_on_an_embedded_server() {
    bounded(LIMIT, async {
        let run = zkr(&["demo"]).await;
        assert_eq!(run.code, 0, "{run:?}");
        assert!(run.stdout.contains("embedded ZooKeeper server at"), "{}", run.stdout);
        assert!(run.stdout.contains("demo passed"), "{}", run.stdout);

        let (mutex_part, semaphore_part) = run.stdout.split_once("InterProcessSemaphore").expect("two scenarios");
        let events: Vec<(String, String)> = mutex_part
            .lines()
            .filter_map(|l| {
                let words: Vec<&str> = l.split_whitespace().collect();
                (words.first() == Some(&"worker")).then(|| (words[1].to_owned(), words[2].to_owned()))
            })
            .collect();
        assert_eq!(events.len(), 2 * 5 * 2, "5 workers x 2 turns, a start and an end each");
        for pair in events.chunks(2) {
            assert_eq!((pair[0].1.as_str(), pair[1].1.as_str()), ("start", "end"), "{pair:?}");
            assert_eq!(pair[0].0, pair[1].0, "a turn ends with the worker that started it: {pair:?}");
        }
        let mut inside = 0i32;
        let mut workers = std::collections::BTreeSet::new();
        for line in semaphore_part.lines().filter(|l| l.starts_with("worker ")) {
            let words: Vec<&str> = line.split_whitespace().collect();
            match words[2] {
                "start" => {
                    inside += 1;
                    workers.insert(words[1].to_owned());
                }
                _ => inside -= 1,
            }
            assert!((0..=3).contains(&inside), "{inside} inside at {line:?}");
        }
        assert_eq!(workers.len(), 15);
    })
    .await
}

#[tokio::test(flavor = "multi_thread")]
async fn demo_against_a_given_ensemble() {
    bounded(LIMIT, async {
        let connect = shared_connect().await;
        let path = unique_path("zkr", "demo");
        let run = zkr(&[
            "--connect",
            &connect,
            "demo",
            "--path",
            &path,
            "--workers",
            "3",
            "--rounds",
            "1",
            "--semaphore-workers",
            "4",
            "--leases",
            "2",
        ])
        .await;
        assert_eq!(run.code, 0, "{run:?}");
        assert!(!run.stdout.contains("embedded"), "{}", run.stdout);
        assert!(
            run.stdout.contains("3 turns by 3 workers") && run.stdout.contains("4 workers, 2 leases"),
            "{}",
            run.stdout
        );
        assert!(!run.stdout.contains("== metrics =="), "{}", run.stdout);
    })
    .await
}

/// `zkr demo --metrics` prints the library's metrics after the summary: every mutex turn is one
/// acquire in the wait histogram, and the sessions are counted.
#[tokio::test(flavor = "multi_thread")]
async fn demo_prints_its_metrics() {
    bounded(LIMIT, async {
        let connect = shared_connect().await;
        let path = unique_path("zkr", "demo-metrics");
        let args = ["--workers", "3", "--rounds", "2", "--semaphore-workers", "2", "--leases", "1"];
        let run =
            zkr(&[&["--connect", connect.as_str(), "demo", "--path", path.as_str(), "--metrics"][..], &args].concat())
                .await;
        assert_eq!(run.code, 0, "{run:?}");
        let (_, metrics) = run.stdout.split_once("== metrics ==").expect("a metrics section");
        let sample = |name: &str, labels: &str| {
            metrics
                .lines()
                .find(|line| line.starts_with(name) && line.contains(labels))
                .and_then(|line| line.rsplit_once(' '))
                .map(|(_, value)| value.to_owned())
        };
        let mutex = format!("path=\"{path}/mutex\"");
        assert_eq!(sample("zk_recipes_lock_acquire_wait_seconds_count", &mutex).as_deref(), Some("6"), "{metrics}");
        assert_eq!(sample("zk_recipes_sessions_opened_total", "zkr-demo").as_deref(), Some("5"), "{metrics}");
        let semaphore = format!("path=\"{path}/semaphore\"");
        assert_eq!(sample("zk_recipes_lock_acquire_wait_seconds_count", &semaphore).as_deref(), Some("2"), "{metrics}");
    })
    .await
}
