//! Server requests of a losing `SharedCount::try_set`, counted by a proxy that reads the
//! protocol's frames: the copy's watch-driven read brings the newer value, and the losing
//! try_set reads nothing of its own.

mod common;

use std::time::Duration;

use common::fixtures::*;
use common::timing::LIMIT;
use zk_recipes::testing::{CountingProxy, TestingServer};
use zk_recipes::SharedCount;

/// Long enough that no ping falls into a measurement (pings are not counted anyway).
const SESSION: Duration = Duration::from_secs(60);
const ROUNDS: u64 = 20;

#[tokio::test]
async fn a_losing_try_set_shares_the_copys_read() {
    init_tracing();
    bounded(LIMIT, async {
        let mut server = TestingServer::builder().start().await.expect("starting a ZooKeeper server");
        let other = plain_framework(&server.connect_string(), SESSION).await;
        let proxy = CountingProxy::start(&server.connect_string()).await.expect("counting proxy");
        let fw = plain_framework(&proxy.connect_string(), SESSION).await;
        let path = unique_path("scounts", "losing");
        let count = SharedCount::new(&fw, &path, 0).unwrap();
        count.start().await.unwrap();
        let before = proxy.counts();
        let mut sent = 0;
        for round in 0..ROUNDS {
            let seen = count.versioned_count().unwrap();
            let theirs = seen.value() + 100;
            other.set_data(&path, &theirs.to_be_bytes()).await.unwrap();
            let before_set = proxy.counts().get("setData");
            assert!(!count.try_set(&seen, seen.value() + 1).await.unwrap(), "round {round}");
            sent += proxy.counts().get("setData") - before_set;
            // A losing try_set returns with the copy past what it lost to.
            assert_eq!(count.count().unwrap(), theirs, "round {round}");
        }
        let counts = proxy.counts().since(&before);
        let summary = counts.per_op(ROUNDS as usize);
        assert!(sent > 0, "no try_set reached the server: {summary}");
        assert_eq!(counts.get("getData"), 0, "{summary}");
        assert_eq!(counts.get("setData"), sent, "{summary}");
        assert_eq!(counts.get("getData+watch"), ROUNDS, "{summary}");
        count.close();
        fw.close().await;
        other.close().await;
        server.stop().await.unwrap();
    })
    .await;
}
