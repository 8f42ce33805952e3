//! The distributed atomics on a server without persistent watches (a 3.8 server whose watch
//! manager is `WatchManagerOptimized`, which refuses `addWatch` as ZooKeeper 3.5 does): every
//! try reads first, as Curator's does, and two sessions incrementing at once still add up
//! exactly. (A shared value on such a server: `shared_value_follow`.)

use crate::common;

use std::time::Duration;

use common::fixtures::*;
use common::timing::{LIMIT, SESSION};
use zk_recipes::retry::RetryUntilElapsed;
use zk_recipes::DistributedAtomicLong;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_sessions_incrementing_add_up_without_persistent_watches() {
    init_tracing();
    bounded(LIMIT, async {
        let server = server_without_persistent_watches().await;
        let path = unique_path("atomic", "oneshot");
        let mut tasks = Vec::new();
        let mut frameworks = Vec::new();
        for _ in 0..2 {
            let fw = plain_framework(&server.connect_string(), SESSION).await;
            let long = DistributedAtomicLong::new(
                &fw,
                &path,
                RetryUntilElapsed::new(Duration::from_secs(30), Duration::from_millis(2)),
            )
            .unwrap();
            frameworks.push(fw);
            tasks.push(tokio::spawn(async move {
                for _ in 0..25 {
                    assert!(long.increment().await.unwrap().succeeded(), "an increment gave up");
                }
            }));
        }
        for task in tasks {
            task.await.unwrap();
        }
        let fw = &frameworks[0];
        assert!(!fw.server_info().await.unwrap().persistent_watches, "the server refused addWatch");
        assert_eq!(fw.get_data(&path).await.unwrap().0, 50i64.to_be_bytes());
        let reader = DistributedAtomicLong::new(
            fw,
            &path,
            RetryUntilElapsed::new(Duration::from_secs(5), Duration::from_millis(2)),
        )
        .unwrap();
        assert_eq!(*reader.get().await.unwrap().post_value(), 50);
        for fw in frameworks {
            fw.close().await;
        }
    })
    .await;
}
