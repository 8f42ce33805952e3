//! `PersistentNode` through server and network faults, each with a protected ephemeral
//! sequential node (the mode where a lost answer could leave a second node): the server paused
//! longer than the session timeout, the ensemble's leader killed, the connection black-holed
//! for less than the session timeout. In each the node is back within a bound derived from the
//! session timeout, exactly one node for the registration (under its first name), owned by the
//! framework's current session, with the data last set, also data set during the fault.

use crate::common;

use std::time::Duration;

use common::fixtures::{bounded, children, framework, init_tracing, unique_path, within, FaultyServer};
use common::timing::{back_within, EVENT, FAULT_SESSION, SESSION};
use zk_recipes::testing::{ProxyMode, TestingCluster};
use zk_recipes::{CreateMode, Framework, PersistentNode};

/// Starts a protected ephemeral sequential node under `parent` with `data` and waits for it.
async fn start_node(fw: &Framework, parent: &str, data: &[u8]) -> PersistentNode {
    let node = PersistentNode::builder(fw, &format!("{parent}/member-"))
        .mode(CreateMode::EphemeralSequential)
        .data(data.to_vec())
        .start()
        .unwrap();
    assert!(node.wait_for_initial_create(EVENT).await.unwrap());
    node
}

/// Waits until `parent` holds exactly the node `name` with `data`, owned by `fw`'s current
/// session, and the node says it is registered. Polls the server (the observer has no event
/// for "the other framework's node is back").
async fn exactly_one(
    observer: &Framework,
    fw: &Framework,
    node: &PersistentNode,
    parent: &str,
    name: &str,
    data: &[u8],
    limit: Duration,
) {
    let deadline = tokio::time::Instant::now() + limit;
    let path = format!("{parent}/{name}");
    loop {
        let kids = children(observer, parent).await;
        let read = observer.get_data(&path).await;
        let session = fw.snapshot().session_id;
        let seen = match (&kids[..], &read) {
            ([only], Ok((d, stat))) if only == name && d == data && stat.ephemeral_owner == session => {
                if node.is_registered() {
                    return;
                }
                "not registered yet".to_owned()
            }
            _ => format!("children {kids:?}, data {read:?}, session {session:#x}"),
        };
        assert!(tokio::time::Instant::now() < deadline, "one node {name} with {data:?}: {seen}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn name_of(path: &str) -> String {
    path.rsplit('/').next().unwrap().to_owned()
}

#[tokio::test]
async fn a_server_paused_longer_than_the_session_timeout() {
    init_tracing();
    bounded(Duration::from_secs(120), async {
        let servers = FaultyServer::start().await;
        let fw = framework(&servers.direct(), FAULT_SESSION).await;
        let parent = unique_path("pnode-faults", "paused");
        let node = start_node(&fw, &parent, b"before").await;
        let name = name_of(&node.actual_path().unwrap());
        let session = fw.snapshot().session_id;

        servers.server.pause().unwrap();
        // Longer than the session timeout: when the server runs again it expires the session.
        // New data meanwhile: its write may fail with the old session, the data is kept for the
        // node's re-create either way.
        let resume = async {
            tokio::time::sleep(FAULT_SESSION * 2).await;
            servers.server.resume().unwrap();
        };
        let during = b"during".to_vec();
        let (written, ()) = tokio::join!(node.set_data(during.clone()), resume);
        tracing::debug!(?written, "set_data across the pause");
        let observer = framework(&servers.direct(), SESSION).await;
        exactly_one(&observer, &fw, &node, &parent, &name, &during, back_within(FAULT_SESSION)).await;
        assert_ne!(fw.snapshot().session_id, session, "the paused server expired the old session");
        node.set_data(b"after".to_vec()).await.unwrap();
        exactly_one(&observer, &fw, &node, &parent, &name, b"after", EVENT).await;
        node.close().await.unwrap();
        assert!(children(&observer, &parent).await.is_empty());
        fw.close().await;
        observer.close().await;
    })
    .await;
}

#[tokio::test]
async fn the_ensemble_leader_killed() {
    init_tracing();
    bounded(Duration::from_secs(240), async {
        let mut cluster = TestingCluster::start().await.unwrap();
        cluster.settle(Duration::from_secs(60)).await.unwrap();
        // Long enough that an election on a loaded machine usually ends within it; a slow one
        // ends the session, and the node is then made again on the new one.
        let session_timeout = Duration::from_secs(10);
        let fw = framework(&cluster.connect_string(), session_timeout).await;
        let parent = unique_path("pnode-faults", "leader");
        let node = start_node(&fw, &parent, b"before").await;
        let name = name_of(&node.actual_path().unwrap());

        let leader = cluster.leader().await.expect("a leader");
        let survivor = cluster.server_connect_string((leader + 1) % cluster.len());
        cluster.kill(leader).await.unwrap();
        within(back_within(session_timeout), "set_data after the election", node.set_data(b"after".to_vec()))
            .await
            .unwrap();
        let observer = framework(&survivor, session_timeout).await;
        exactly_one(&observer, &fw, &node, &parent, &name, b"after", back_within(session_timeout)).await;
        node.close().await.unwrap();
        assert!(children(&observer, &parent).await.is_empty());
        fw.close().await;
        observer.close().await;
    })
    .await;
}

#[tokio::test]
async fn a_connection_black_holed_shorter_than_the_session_timeout() {
    init_tracing();
    bounded(Duration::from_secs(120), async {
        let servers = FaultyServer::start().await;
        let fw = framework(&servers.proxied(), FAULT_SESSION).await;
        let observer = framework(&servers.direct(), SESSION).await;
        let parent = unique_path("pnode-faults", "blackhole");
        let node = start_node(&fw, &parent, b"before").await;
        let name = name_of(&node.actual_path().unwrap());
        let session = fw.snapshot().session_id;

        servers.proxy.set_mode(ProxyMode::BlackHole);
        // New data while nothing gets through: written once the connection is back.
        let setting = node.set_data(b"during".to_vec());
        // Shorter than the session timeout: the same session goes on.
        let pass = async {
            tokio::time::sleep(FAULT_SESSION / 2).await;
            servers.proxy.set_mode(ProxyMode::Pass);
            servers.proxy.drop_connections();
        };
        let (written, ()) =
            tokio::join!(within(back_within(FAULT_SESSION), "set_data through the fault", setting), pass);
        written.unwrap();
        exactly_one(&observer, &fw, &node, &parent, &name, b"during", back_within(FAULT_SESSION)).await;
        assert_eq!(fw.snapshot().session_id, session, "the same session");
        node.close().await.unwrap();
        assert!(children(&observer, &parent).await.is_empty());
        fw.close().await;
        observer.close().await;
    })
    .await;
}
