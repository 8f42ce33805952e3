//! Framework behaviour against a real 3-node ZooKeeper ensemble: losing the connected server,
//! losing the leader, and read-only mode.

use crate::common;

use std::time::Duration;

use common::fixtures::next_event as next;
use common::timing::SLOW_LIMIT as LIMIT;
use futures::StreamExt;
use tokio::time::{timeout, Instant};
use zk_recipes::testing::{four_letter_word, TestingCluster};
use zk_recipes::zk::CreateMode;
use zk_recipes::{ConnectionState, Framework, InterProcessMutex};

/// The member whose `cons` output lists our session.
async fn member_serving(cluster: &TestingCluster, session_id: i64) -> Option<usize> {
    let needle = format!("sid=0x{session_id:x}");
    for i in 0..cluster.len() {
        if !cluster.is_running(i) {
            continue;
        }
        if let Ok(cons) = four_letter_word(&cluster.server_connect_string(i), "cons", Duration::from_secs(2)).await {
            if cons.contains(&needle) {
                return Some(i);
            }
        }
    }
    None
}

#[tokio::test]
async fn losing_the_connected_server_and_the_leader_keeps_the_session() {
    timeout(LIMIT, async {
        let mut cluster = TestingCluster::start().await.unwrap();
        cluster.settle(Duration::from_secs(30)).await.unwrap();
        let session_timeout = Duration::from_secs(15);
        let fw = Framework::builder(&cluster.connect_string()).session_timeout(session_timeout).build().unwrap();
        let mut events = fw.state_changes();
        fw.start().await.unwrap();
        let connected = next(&mut events, Duration::from_secs(5)).await;
        assert_eq!(connected.state, ConnectionState::Connected);
        fw.create("/cluster-a").mode(CreateMode::Ephemeral).await.unwrap();

        // Kill the member serving our session.
        let serving = member_serving(&cluster, connected.session_id).await.expect("a member serves our session");
        cluster.kill(serving).await.unwrap();
        assert_eq!(next(&mut events, session_timeout).await.state, ConnectionState::Suspended);
        let back = next(&mut events, session_timeout).await;
        assert_eq!((back.state, back.session_id, back.epoch), (ConnectionState::Reconnected, connected.session_id, 1));
        fw.create("/cluster-b").mode(CreateMode::Ephemeral).await.unwrap();
        cluster.restart(serving).await.unwrap();
        cluster.settle(Duration::from_secs(30)).await.unwrap();

        // Kill the leader: the followers drop their clients while they elect a new one.
        let leader = cluster.leader().await.expect("a leader");
        let before = Instant::now();
        cluster.kill(leader).await.unwrap();
        // Operations continue on the same session (they wait out the election).
        fw.create("/cluster-c").mode(CreateMode::Ephemeral).await.unwrap();
        assert!(before.elapsed() < session_timeout);
        // The framework reports the reconnect once its own round trip (a sync) is answered,
        // which may come just after the create's answer.
        let mut watch = fw.state_watch();
        let snapshot = *timeout(session_timeout, watch.wait_for(|s| s.state.is_connected()))
            .await
            .expect("connected again within the session timeout")
            .unwrap();
        assert_eq!((snapshot.session_id, snapshot.epoch), (connected.session_id, 1));
        // Every transition on the way was Suspended/Reconnected on the same session, in pairs.
        fw.close().await;
        let rest: Vec<_> = events.collect().await;
        for pair in rest.chunks(2) {
            assert_eq!(pair[0].state, ConnectionState::Suspended, "{rest:?}");
            assert_eq!(
                pair.get(1).map(|e| (e.state, e.session_id)),
                Some((ConnectionState::Reconnected, connected.session_id))
            );
        }
    })
    .await
    .expect("test finished in time");
}

#[tokio::test]
async fn read_only_server_is_reported_as_read_only() {
    timeout(LIMIT, async {
        // read_only(true) also enables local sessions, which read-only sessions are.
        let mut cluster = TestingCluster::builder().read_only(true).start().await.unwrap();
        cluster.settle(Duration::from_secs(30)).await.unwrap();
        cluster.stop(1).await.unwrap();
        cluster.stop(2).await.unwrap();
        let deadline = Instant::now() + Duration::from_secs(30);
        while cluster.mode(0).await.as_deref() != Some("read-only") {
            assert!(Instant::now() < deadline, "member 0 never went read-only");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        // Long enough for two members to restart and form a quorum again on a loaded machine:
        // no read-write connection within the session timeout of leaving read-only is `Lost`.
        let fw = Framework::builder(&cluster.server_connect_string(0))
            .session_timeout(Duration::from_secs(30))
            .can_be_read_only(true)
            .build()
            .unwrap();
        let mut events = fw.state_changes();
        fw.start().await.unwrap();
        let first = next(&mut events, Duration::from_secs(5)).await;
        assert_eq!(first.state, ConnectionState::ReadOnly);
        // Reads work, writes are refused.
        fw.get_children("/").await.unwrap();
        let refused = fw.create("/ro-write").await;
        assert!(
            matches!(refused, Err(zk_recipes::Error::ZooKeeper(zk_recipes::zk::Error::NotReadOnly))),
            "{refused:?}"
        );
        // A runtime stalled past 3/10 of the session timeout reads `Suspended`; the round trip
        // that confirms the connection is a read on a read-only server (which refuses every
        // `sync`), and the state goes back to `ReadOnly`, not on to `Lost`.
        let negotiated = fw.negotiated_session_timeout().unwrap();
        std::thread::sleep(negotiated * 4 / 10);
        assert_eq!(next(&mut events, Duration::from_secs(5)).await.state, ConnectionState::Suspended);
        assert_eq!(next(&mut events, negotiated / 2).await.state, ConnectionState::ReadOnly);

        cluster.restart(1).await.unwrap();
        cluster.restart(2).await.unwrap();
        // The member leaves read-only mode to rejoin the quorum (Suspended), and the client
        // then gets its first read-write connection: Curator reports that as Connected (a
        // read-only start never sent Connected).
        let mut seen = Vec::new();
        let back = loop {
            let event = next(&mut events, Duration::from_secs(60)).await;
            if event.state != ConnectionState::Suspended {
                break event;
            }
            seen.push(event);
        };
        assert_eq!(back.state, ConnectionState::Connected, "after {seen:?}");
        assert_eq!(back.epoch, 1);
        fw.create("/ro-write").mode(CreateMode::Ephemeral).await.unwrap();
        // The read-write session has a new id, which zookeeper-client does not report (it
        // keeps the read-only one): the framework learns it from the first lock node it
        // creates, and publishes it.
        let guard = InterProcessMutex::new(&fw, "/ro-lock").unwrap().acquire().await.unwrap();
        let owner = fw.exists(guard.lock_path()).await.unwrap().expect("the lock node").ephemeral_owner;
        assert_ne!(owner, 0);
        assert_eq!(fw.snapshot().session_id, owner, "the published session id is the lock node's owner");
        guard.release().await.unwrap();
        fw.close().await;
    })
    .await
    .expect("test finished in time");
}
