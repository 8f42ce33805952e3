//! The mutex waiter first in line takes the lock when the holder's node is deleted, without
//! listing the children again, because it also watches its own node and, on one connection,
//! would have heard of its own node's deletion first (the server notifies in zxid order).
//! After a reconnect that proof is gone: the client sets its watches again and the server
//! reports what they missed in its own order, so the holder's deletion can come before the
//! waiter's own. Against a real ZooKeeper 3.8 server.

use crate::common;

use std::time::Duration;

use common::fixtures::*;
use common::timing::{EVENT, LIMIT, SESSION};
use zk_recipes::retry::RetryForever;
use zk_recipes::testing::{CountingProxy, FaultProxy, ProxyMode, TestingServer};
use zk_recipes::{Framework, InterProcessMutex};

async fn counted(proxy: &CountingProxy, kind: &'static str, at_least: u64) {
    eventually(EVENT, &format!("{at_least} {kind} requests"), || async {
        let n = proxy.counts().get(kind);
        if n >= at_least {
            Ok(())
        } else {
            Err(format!("{n}"))
        }
    })
    .await;
}

/// The holder's node is deleted while the waiter's connection is down; the event reaches the
/// waiter with the reconnect. The waiter must list the children before it takes the lock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_predecessor_deleted_during_an_outage_is_confirmed_by_a_listing() {
    init_tracing();
    bounded(LIMIT, async {
        let server = TestingServer::start().await.unwrap();
        let cut = FaultProxy::start(&server.connect_string()).await.unwrap();
        let counting = CountingProxy::start(&cut.connect_string()).await.unwrap();
        let holder_fw = classic_framework(&server.connect_string(), SESSION).await;
        let waiter_fw = Framework::builder(&counting.connect_string())
            .wait_strategy(zk_recipes::WaitStrategy::PerWaiterWatch)
            .session_timeout(SESSION)
            .retry_policy(RetryForever::new(Duration::from_millis(50)))
            .start()
            .await
            .unwrap();
        let path = unique_path("handoff", "after-reconnect");
        let holder = InterProcessMutex::new(&holder_fw, &path).unwrap().acquire().await.unwrap();
        let waiting = {
            let mutex = InterProcessMutex::new(&waiter_fw, &path).unwrap();
            tokio::spawn(async move { mutex.acquire().await.unwrap() })
        };
        // The waiter's two data watches: its own node and the holder's.
        counted(&counting, "getData+watch", 2).await;
        let lists = counting.counts().get("getChildren");

        cut.set_mode(ProxyMode::BlackHole);
        holder.release().await.unwrap(); // its notification goes into the black hole
        cut.reset_connections();
        cut.set_mode(ProxyMode::Pass);

        let guard = within(EVENT, "the waiter's lock after the reconnect", waiting).await.unwrap();
        assert!(
            counting.counts().get("getChildren") > lists,
            "the waiter took the lock on an event replayed after a reconnect, without listing again"
        );
        assert!(holder_fw.exists(guard.lock_path()).await.unwrap().is_some(), "the guard's node exists");
        guard.release().await.unwrap();
        waiter_fw.close().await;
        holder_fw.close().await;
    })
    .await;
}
