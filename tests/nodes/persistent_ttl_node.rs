//! `PersistentTtlNode` against real servers with TTL nodes enabled: Curator 5.4's layout (a
//! container with a `touch` child that has the TTL), the node kept while its handle lives (also
//! across a new session), gone within the TTL and the server's container checks once the
//! handle is dropped or its framework closed (a process killed), `close` deleting at once, a
//! server without TTL nodes refused with a typed error and nothing left, bad input, and the
//! same layout as Curator's own `PersistentTtlNode`.

use crate::common;

use std::time::{Duration, Instant};

use common::curator::CuratorPeer;
use common::fixtures::{bounded, children, eventually, framework, init_tracing, unique_path, wait_connected, within};
use common::timing::{EVENT, FAULT_SESSION, INTEROP_EVENT, INTEROP_SESSION, LIMIT, SESSION, SLOW_LIMIT};
use zk_recipes::testing::{self, FaultProxy, TestingServer};
use zk_recipes::{Error, Framework, PersistentTtlNode};

/// The test server's `znode.container.checkIntervalMs`: how often it reaps expired TTL nodes
/// and empty containers.
const CHECK_INTERVAL: Duration = Duration::from_millis(100);

/// The TTL of the nodes here: a few container checks, and long enough that a touch every
/// TTL / 2 is never late on a loaded machine.
const TTL: Duration = Duration::from_secs(2);

/// How long the server may take to reap a node that nobody touches any more, after the last
/// touch: the child's TTL and the check that finds it, then the check that finds the empty
/// container, and the slack of a loaded machine (a check is a pass over every node and a
/// delete through the server's pipeline).
fn reaped_within(ttl: Duration) -> Duration {
    ttl + CHECK_INTERVAL * 2 + Duration::from_secs(3)
}

/// The server of this file: TTL nodes enabled, container checks every [`CHECK_INTERVAL`].
async fn ttl_server() -> &'static TestingServer {
    static SERVER: tokio::sync::OnceCell<TestingServer> = tokio::sync::OnceCell::const_new();
    let start = || {
        TestingServer::builder()
            .extended_types()
            .system_property("znode.container.checkIntervalMs", CHECK_INTERVAL.as_millis().to_string())
            .start()
    };
    SERVER.get_or_try_init(start).await.expect("starting a ZooKeeper server")
}

/// A server without TTL nodes (the servers' default), for the refusal.
async fn plain_server() -> &'static TestingServer {
    testing::shared_server().await.expect("starting a ZooKeeper server")
}

/// The layout of a TTL node at `path` as clients see it: the node's `ephemeralOwner` and data,
/// its children and, per child, its `ephemeralOwner`. The server reports 0 for containers and
/// TTL nodes alike (it keeps their markers to itself), so their modes show only in how the
/// server reaps them, which the other tests check.
async fn layout(fw: &Framework, path: &str) -> Option<(i64, Vec<u8>, Vec<(String, i64)>)> {
    let (data, stat) = match fw.get_data(path).await {
        Ok(found) => found,
        Err(e) if e.is_no_node() => return None,
        Err(e) => panic!("reading {path}: {e}"),
    };
    let mut kids = Vec::new();
    for name in children(fw, path).await {
        let (_, child) = fw.get_data(&format!("{path}/{name}")).await.expect("reading the child");
        kids.push((name, child.ephemeral_owner));
    }
    Some((stat.ephemeral_owner, data, kids))
}

/// Waits until the node at `path` has Curator's layout with `data`.
async fn has_curator_layout(fw: &Framework, path: &str, data: &[u8], limit: Duration) {
    let want = (0, data.to_vec(), vec![("touch".to_owned(), 0)]);
    eventually(limit, "Curator's layout", || async {
        match layout(fw, path).await {
            Some(found) if found == want => Ok(()),
            other => Err(format!("{other:?}, want {want:?}")),
        }
    })
    .await;
}

/// Waits until nothing is left at `path`; the time it took.
async fn gone(fw: &Framework, path: &str, limit: Duration) -> Duration {
    let start = Instant::now();
    eventually(limit, "the node reaped", || async {
        match fw.exists(path).await {
            Ok(None) => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    start.elapsed()
}

#[tokio::test]
async fn the_node_lives_while_touched_with_current_data_and_close_deletes_it() {
    init_tracing();
    bounded(LIMIT, async {
        let connect = ttl_server().await.connect_string();
        let fw = framework(&connect, SESSION).await;
        let observer = framework(&connect, SESSION).await;
        let path = unique_path("ttlnode", "lives");
        let node = PersistentTtlNode::builder(&fw, &path, TTL).data(b"one".to_vec()).start().unwrap();
        assert_eq!(node.touch_interval(), TTL / 2);
        assert!(node.wait_for_initial_create(EVENT).await.unwrap());
        assert!(node.is_registered());
        has_curator_layout(&observer, &path, b"one", EVENT).await;

        node.set_data(b"two".to_vec()).await.unwrap();
        has_curator_layout(&observer, &path, b"two", EVENT).await;
        // Several TTLs with nobody else writing: only the touches keep the child (and so the
        // container) alive. This waits for time itself, which no event marks.
        let (_, before) = observer.get_data(node.child_path()).await.unwrap();
        tokio::time::sleep(TTL * 3).await;
        has_curator_layout(&observer, &path, b"two", Duration::ZERO).await;
        let (_, after) = observer.get_data(node.child_path()).await.unwrap();
        assert!(after.version >= before.version + 4, "touched every TTL / 2: {} -> {}", before.version, after.version);
        assert!(after.mtime > before.mtime);

        node.close().await.unwrap();
        assert!(observer.exists(&path).await.unwrap().is_none(), "close deleted the node at once");
        assert!(!node.is_registered());
        assert!(node.set_data(b"x".to_vec()).await.unwrap_err().is_closed());
        node.close().await.unwrap();
        fw.close().await;
        observer.close().await;
    })
    .await;
}

#[tokio::test]
async fn a_dropped_node_is_reaped_within_the_ttl_and_two_container_checks() {
    init_tracing();
    bounded(LIMIT, async {
        let connect = ttl_server().await.connect_string();
        let fw = framework(&connect, SESSION).await;
        let observer = framework(&connect, SESSION).await;
        let path = unique_path("ttlnode", "dropped");
        let node = PersistentTtlNode::builder(&fw, &path, TTL).data(b"d".to_vec()).start().unwrap();
        assert!(node.wait_for_initial_create(EVENT).await.unwrap());
        has_curator_layout(&observer, &path, b"d", EVENT).await;

        // The handle goes without close, as in a process that dies: touching stops, the
        // framework (and its session) lives on and deletes nothing.
        drop(node);
        let dropped = Instant::now();
        // The last touch was at most TTL / 2 before the drop: the server keeps the child at
        // least until TTL after it.
        tokio::time::sleep(TTL / 2 - CHECK_INTERVAL * 2).await;
        assert!(observer.exists(&path).await.unwrap().is_some(), "not reaped before its TTL");
        gone(&observer, &path, reaped_within(TTL).saturating_sub(dropped.elapsed())).await;
        let took = dropped.elapsed();
        assert!(took >= TTL / 2, "reaped after {took:?}, before the TTL from the last touch");
        eprintln!("dropped node reaped {took:?} after the drop (TTL {TTL:?}, checks every {CHECK_INTERVAL:?})");
        fw.close().await;
        observer.close().await;
    })
    .await;
}

#[tokio::test]
async fn a_killed_process_leaves_the_node_for_its_ttl_only() {
    init_tracing();
    bounded(LIMIT, async {
        let connect = ttl_server().await.connect_string();
        let fw = framework(&connect, SESSION).await;
        let observer = framework(&connect, SESSION).await;
        let path = unique_path("ttlnode", "killed");
        let node = PersistentTtlNode::builder(&fw, &path, TTL).data(b"k".to_vec()).start().unwrap();
        assert!(node.wait_for_initial_create(EVENT).await.unwrap());
        has_curator_layout(&observer, &path, b"k", EVENT).await;

        // The process's session ends and nothing of it runs any more; the handle itself is
        // never dropped, so no code of the node's gets to delete anything.
        fw.close().await;
        let killed = Instant::now();
        std::mem::forget(node);
        assert!(observer.exists(&path).await.unwrap().is_some(), "the node outlives its session");
        gone(&observer, &path, reaped_within(TTL)).await;
        let took = killed.elapsed();
        assert!(took >= TTL / 2 - CHECK_INTERVAL, "reaped after {took:?}, before the TTL from the last touch");
        eprintln!("killed process's node reaped {took:?} after its end (TTL {TTL:?}, checks every {CHECK_INTERVAL:?})");
        observer.close().await;
    })
    .await;
}

/// The environment variables that make [`child_process_keeps_a_ttl_node`] the body of a
/// process that [`a_process_killed_with_sigkill_leaves_the_node_for_its_ttl_only`] kills.
const CHILD_CONNECT: &str = "ZKR_TTL_CHILD_CONNECT";
const CHILD_PATH: &str = "ZKR_TTL_CHILD_PATH";

/// Not a test of its own: run by the test below as a child process (this test binary, this
/// test only), it keeps a TTL node until it is killed. Without the variables it does nothing.
#[tokio::test]
#[ignore = "the body of a child process started by a_process_killed_with_sigkill_leaves_the_node_for_its_ttl_only"]
async fn child_process_keeps_a_ttl_node() {
    let (Ok(connect), Ok(path)) = (std::env::var(CHILD_CONNECT), std::env::var(CHILD_PATH)) else {
        return;
    };
    let fw = framework(&connect, SESSION).await;
    let node = PersistentTtlNode::builder(&fw, &path, TTL).data(b"child".to_vec()).start().unwrap();
    assert!(node.wait_for_initial_create(EVENT).await.unwrap());
    // Until SIGKILL (bounded, should the parent die first).
    tokio::time::sleep(LIMIT).await;
}

#[tokio::test]
async fn a_process_killed_with_sigkill_leaves_the_node_for_its_ttl_only() {
    init_tracing();
    bounded(LIMIT, async {
        let connect = ttl_server().await.connect_string();
        let observer = framework(&connect, SESSION).await;
        let path = unique_path("ttlnode", "sigkill");
        let mut child = tokio::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "nodes::persistent_ttl_node::child_process_keeps_a_ttl_node",
                "--ignored",
                "--test-threads=1",
            ])
            .env(CHILD_CONNECT, &connect)
            .env(CHILD_PATH, &path)
            .stdout(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        has_curator_layout(&observer, &path, b"child", EVENT).await;
        // Kept while the process lives: past a TTL, only its touches keep the node.
        tokio::time::sleep(TTL + TTL / 2).await;
        has_curator_layout(&observer, &path, b"child", Duration::ZERO).await;

        child.start_kill().unwrap();
        let killed = Instant::now();
        child.wait().await.unwrap();
        assert!(observer.exists(&path).await.unwrap().is_some(), "the node outlives its process");
        gone(&observer, &path, reaped_within(TTL)).await;
        let took = killed.elapsed();
        assert!(took >= TTL / 2 - CHECK_INTERVAL, "reaped after {took:?}, before the TTL from the last touch");
        eprintln!(
            "SIGKILLed process's node reaped {took:?} after the kill (TTL {TTL:?}, checks every {CHECK_INTERVAL:?})"
        );
        observer.close().await;
    })
    .await;
}

#[tokio::test]
async fn the_node_is_kept_across_a_new_session() {
    init_tracing();
    bounded(LIMIT, async {
        let server = ttl_server().await;
        let proxy = FaultProxy::start(&server.connect_string()).await.unwrap();
        let fw = framework(&proxy.connect_string(), FAULT_SESSION).await;
        let observer = framework(&server.connect_string(), SESSION).await;
        let path = unique_path("ttlnode", "expired");
        let node = PersistentTtlNode::builder(&fw, &path, TTL).data(b"s".to_vec()).start().unwrap();
        assert!(node.wait_for_initial_create(EVENT).await.unwrap());
        let (_, first) = observer.get_data(&path).await.unwrap();

        let before = fw.snapshot();
        let session = fw.zk_client().unwrap().session().clone();
        within(EVENT, "expiring the session", testing::expire_session(&proxy, &server.connect_string(), session))
            .await
            .unwrap();
        wait_connected(&fw, EVENT, before.epoch + 1).await;
        node.set_data(b"after".to_vec()).await.unwrap();
        has_curator_layout(&observer, &path, b"after", EVENT).await;
        let (_, child_before) = observer.get_data(node.child_path()).await.unwrap();
        // More than a TTL on the new session: the touches go on.
        tokio::time::sleep(TTL + TTL / 2).await;
        has_curator_layout(&observer, &path, b"after", Duration::ZERO).await;
        let (_, child_after) = observer.get_data(node.child_path()).await.unwrap();
        assert!(child_after.mtime > child_before.mtime, "touched on the new session");
        let (_, now) = observer.get_data(&path).await.unwrap();
        assert_eq!(now.czxid, first.czxid, "the same node, never re-created");

        node.close().await.unwrap();
        assert!(observer.exists(&path).await.unwrap().is_none());
        fw.close().await;
        observer.close().await;
    })
    .await;
}

#[tokio::test]
async fn a_reaped_node_is_created_again_with_its_child() {
    init_tracing();
    bounded(LIMIT, async {
        let connect = ttl_server().await.connect_string();
        let fw = framework(&connect, SESSION).await;
        let other = framework(&connect, SESSION).await;
        let path = unique_path("ttlnode", "recreated");
        let node = PersistentTtlNode::builder(&fw, &path, TTL).data(b"r".to_vec()).start().unwrap();
        assert!(node.wait_for_initial_create(EVENT).await.unwrap());
        has_curator_layout(&other, &path, b"r", EVENT).await;
        let (_, first) = other.get_data(&path).await.unwrap();

        // Someone deletes the child and the node (as the server does once the child expired),
        // in one transaction: the node is a container, which the server's container check may
        // reap on its own between two separate deletes.
        let mut registered = node.registered();
        other.transaction().delete(node.child_path()).delete(&path).commit().await.unwrap();
        // The handle noticed the delete once the node is made again: `registered()` can be
        // false too briefly for a receiver to see (a watch channel keeps the last value).
        eventually(EVENT, "noticing the delete", || async {
            match other.get_data(&path).await {
                Ok((_, stat)) if stat.czxid > first.czxid => Ok(()),
                read => Err(format!("{read:?}")),
            }
        })
        .await;
        // Back at once, child included (not one touch interval later).
        within(TTL / 2, "the node back", registered.wait_for(|r| *r)).await.unwrap();
        has_curator_layout(&other, &path, b"r", TTL / 2).await;
        let (_, again) = other.get_data(&path).await.unwrap();
        assert!(again.czxid > first.czxid);

        node.close().await.unwrap();
        assert!(other.exists(&path).await.unwrap().is_none());
        fw.close().await;
        other.close().await;
    })
    .await;
}

#[tokio::test]
async fn a_server_without_ttl_nodes_is_refused_with_unsupported_and_nothing_is_left() {
    init_tracing();
    bounded(LIMIT, async {
        let fw = framework(&plain_server().await.connect_string(), SESSION).await;
        let path = unique_path("ttlnode", "unsupported");
        let node = PersistentTtlNode::builder(&fw, &path, TTL).start().unwrap();
        let refused = within(EVENT, "the refusal", node.wait_for_initial_create(EVENT)).await;
        assert!(matches!(refused, Err(Error::Unsupported { feature: "ttl", .. })), "{refused:?}");
        eventually(EVENT, "the container deleted", || async {
            match fw.exists(&path).await {
                Ok(None) => Ok(()),
                other => Err(format!("{other:?}")),
            }
        })
        .await;
        let again = node.set_data(b"x".to_vec()).await;
        assert!(matches!(again, Err(Error::Unsupported { .. })), "{again:?}");
        node.close().await.unwrap();
        fw.close().await;
    })
    .await;
}

#[tokio::test]
async fn bad_input_is_refused_and_creates_nothing() {
    init_tracing();
    bounded(LIMIT, async {
        let fw = framework(&ttl_server().await.connect_string(), SESSION).await;
        let parent = unique_path("ttlnode", "bad");
        let path = format!("{parent}/node");
        let refused = |r: zk_recipes::Result<PersistentTtlNode>| r.unwrap_err();
        assert!(matches!(refused(PersistentTtlNode::builder(&fw, "/", TTL).start()), Error::InvalidPath { .. }));
        assert!(matches!(refused(PersistentTtlNode::builder(&fw, "rel", TTL).start()), Error::InvalidPath { .. }));
        for name in ["", "a/b", ".", ".."] {
            let r = PersistentTtlNode::builder(&fw, &path, TTL).child_name(name).start();
            assert!(refused(r).is_invalid_argument(), "child name {name:?}");
        }
        for ttl in [Duration::ZERO, Duration::from_millis(1), Duration::from_millis(1 << 40)] {
            assert!(refused(PersistentTtlNode::builder(&fw, &path, ttl).start()).is_invalid_argument(), "{ttl:?}");
        }
        for factor in [0, 1, 3000] {
            let r = PersistentTtlNode::builder(&fw, &path, TTL).touch_schedule_factor(factor).start();
            assert!(refused(r).is_invalid_argument(), "factor {factor}");
        }
        let outside = std::thread::spawn({
            let (fw, path) = (fw.clone(), path.clone());
            move || PersistentTtlNode::builder(&fw, &path, TTL).start().map(drop)
        });
        let outside = outside.join().expect("no panic outside a runtime");
        assert!(outside.unwrap_err().is_invalid_argument(), "outside a runtime");
        assert!(fw.exists(&parent).await.unwrap().is_none(), "nothing created");
        let node = PersistentTtlNode::builder(&fw, &path, TTL).start().unwrap();
        assert!(node.wait_for_initial_create(Duration::ZERO).await.unwrap_err().is_invalid_argument());
        node.close().await.unwrap();
        fw.close().await;
    })
    .await;
}

#[tokio::test]
async fn curators_persistent_ttl_node_and_ours_have_one_layout() {
    init_tracing();
    bounded(SLOW_LIMIT, async {
        let connect = ttl_server().await.connect_string();
        let Some(mut peer) = CuratorPeer::started(&connect, INTEROP_SESSION).await else {
            return;
        };
        let fw = framework(&connect, INTEROP_SESSION).await;
        let base = unique_path("ttlnode", "interop");
        let (java, rust) = (format!("{base}/java"), format!("{base}/rust"));
        let reply = peer.command(&format!("ttl j {java} {} jdata", TTL.as_millis())).await.unwrap();
        assert_eq!(reply, "ttl j ok");
        let node = PersistentTtlNode::builder(&fw, &rust, TTL).data(b"jdata".to_vec()).start().unwrap();
        assert!(node.wait_for_initial_create(EVENT).await.unwrap());
        // Curator touches first TTL / 2 after start.
        has_curator_layout(&fw, &java, b"jdata", INTEROP_EVENT).await;
        has_curator_layout(&fw, &rust, b"jdata", EVENT).await;

        // Curator's close stops touching and deletes nothing: its node is reaped as ours is
        // after a drop.
        assert_eq!(peer.command("ttl_close j").await.unwrap(), "ttl_close j ok");
        let took = gone(&fw, &java, reaped_within(TTL)).await;
        assert!(fw.exists(&rust).await.unwrap().is_some(), "ours is still touched ({took:?})");
        node.close().await.unwrap();
        assert!(fw.exists(&rust).await.unwrap().is_none());
        peer.quit().await.unwrap();
        fw.close().await;
    })
    .await;
}

#[tokio::test]
async fn close_leaves_a_node_with_someone_elses_child_to_the_server() {
    init_tracing();
    bounded(LIMIT, async {
        let connect = ttl_server().await.connect_string();
        let fw = framework(&connect, SESSION).await;
        let other = framework(&connect, SESSION).await;
        let path = unique_path("ttlnode", "foreign-child");
        let node = PersistentTtlNode::builder(&fw, &path, TTL).start().unwrap();
        assert!(node.wait_for_initial_create(EVENT).await.unwrap());
        let foreign = format!("{path}/foreign");
        other.create(&foreign).await.unwrap();

        node.close().await.unwrap();
        assert_eq!(children(&other, &path).await, ["foreign"], "our child deleted, theirs kept");
        other.delete(&foreign).await.unwrap();
        // An emptied container: the server's next check deletes it.
        gone(&other, &path, CHECK_INTERVAL * 2 + EVENT).await;
        fw.close().await;
        other.close().await;
    })
    .await;
}
