//! What a waiting `InterProcessMutex` acquire costs the client in memory when waiters arrive
//! one at a time (each lists the whole queue ahead of it on arrival, and none shares that
//! listing with another): no waiter may keep its listing while it waits, so the queue costs
//! O(queue) in total, not O(queue²). The client's resident memory is printed with the full
//! queue in place, as a JSON line, and must stay under [`RSS_LIMIT_KIB`]. The figure is the
//! whole process's, so the test that CI runs runs its body in a process of its own.
//!
//! Slow (10,000 waiters, each listing up to 10,000 names): run with
//! `cargo test --release --features testing --test locks -- --ignored --nocapture --test-threads=1 ten_thousand_waiters`
//! (one at a time: the figure is the whole process's).

use crate::common;

use std::time::Duration;

use common::fixtures::{
    bounded, children_count_becomes, classic_framework, init_tracing, rss_kib, run_alone, unique_path,
};
use tokio::time::Instant;
use zk_recipes::testing::{four_letter_word, CountingProxy, TestingServer};
use zk_recipes::{Framework, InterProcessMutex};

const SESSION: Duration = Duration::from_secs(60);
const EVENT: Duration = Duration::from_secs(30);
/// The most the client may take with 10,000 waiters queued.
const RSS_LIMIT_KIB: u64 = 150 * 1024;

/// `Total watches:` from the server's `wchs`.
async fn total_watches(connect: &str) -> u64 {
    let wchs = four_letter_word(connect, "wchs", Duration::from_secs(10)).await.expect("wchs");
    wchs.lines().find_map(|l| l.strip_prefix("Total watches:")).and_then(|n| n.trim().parse().ok()).expect("wchs total")
}

/// Waits until the proxy has passed on more than `above` data watches.
async fn watches_sent(proxy: &CountingProxy, above: u64) {
    let deadline = Instant::now() + EVENT;
    while proxy.counts().get("getData+watch") <= above {
        assert!(Instant::now() < deadline, "a waiter did not start waiting within {EVENT:?}");
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// `waiters` acquires over `sessions` sessions join one mutex's queue one at a time: each is
/// started once the one before it has listed the queue and sent its predecessor's watch.
async fn waiters_arriving_one_at_a_time(waiters: usize, sessions: usize) {
    init_tracing();
    bounded(Duration::from_secs(3600), async {
        let server = TestingServer::start().await.unwrap();
        let direct = server.connect_string();
        let proxy = CountingProxy::start(&direct).await.unwrap();
        let path = unique_path("waiter-memory", &format!("{waiters}-over-{sessions}"));

        // A holder, and a first waiter (it watches the holder and its own node), both on
        // sessions of their own, straight to the server: every waiter measured then watches
        // exactly one node (its predecessor's), through the proxy.
        let holder_fw = classic_framework(&direct, SESSION).await;
        let holder = InterProcessMutex::new(&holder_fw, &path).unwrap().acquire().await.unwrap();
        let first_fw = classic_framework(&direct, SESSION).await;
        let first = {
            let mutex = InterProcessMutex::new(&first_fw, &path).unwrap();
            tokio::spawn(async move { drop(mutex.acquire().await) })
        };
        let deadline = Instant::now() + EVENT;
        while total_watches(&direct).await < 2 {
            assert!(Instant::now() < deadline, "the first waiter did not start waiting");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }

        let mut frameworks: Vec<Framework> = Vec::new();
        for _ in 0..sessions {
            frameworks.push(classic_framework(&proxy.connect_string(), SESSION).await);
        }
        let rss_start = rss_kib();
        let started = Instant::now();
        let base = proxy.counts().get("getData+watch");
        let mut tasks = Vec::with_capacity(waiters);
        for i in 0..waiters {
            let mutex = InterProcessMutex::new(&frameworks[i % sessions], &path).unwrap();
            tasks.push(tokio::spawn(async move { drop(mutex.acquire().await) }));
            watches_sent(&proxy, base + i as u64).await;
        }
        let queued = started.elapsed();
        children_count_becomes(&holder_fw, &path, waiters + 2, EVENT).await;
        let rss_full = rss_kib();
        println!(
            "{{\"test\":\"waiter_memory\",\"waiters\":{waiters},\"sessions\":{sessions},\"queued_s\":{:.1},\
             \"rss_start_kib\":{},\"rss_full_queue_kib\":{}}}",
            queued.as_secs_f64(),
            rss_start.unwrap_or(0),
            rss_full.unwrap_or(0),
        );
        if let Some(rss) = rss_full {
            assert!(rss < RSS_LIMIT_KIB, "{rss} KiB with {waiters} waiters queued over {sessions} sessions");
        }

        for task in &tasks {
            task.abort();
        }
        first.abort();
        drop(holder);
        for fw in frameworks {
            fw.close().await;
        }
        first_fw.close().await;
        holder_fw.close().await;
    })
    .await;
}

/// 10,000 waiters joining one session's queue one at a time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "slow: 10,000 waiters arriving one at a time (run with --ignored)"]
async fn ten_thousand_waiters_arriving_one_at_a_time_over_one_session() {
    waiters_arriving_one_at_a_time(10_000, 1).await;
}

/// 10,000 waiters joining over ten sessions, one at a time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "slow: 10,000 waiters arriving one at a time (run with --ignored)"]
async fn ten_thousand_waiters_arriving_one_at_a_time_over_ten_sessions() {
    waiters_arriving_one_at_a_time(10_000, 10).await;
}

/// The CI-sized run: 300 waiters over one session (and the same checks), in a child process
/// of this test binary where no other test adds to the memory.
#[tokio::test]
async fn waiters_arriving_one_at_a_time_over_one_session() {
    run_alone("locks::waiter_memory::waiters_arriving_one_at_a_time_over_one_session_alone").await;
}

/// The body of the test above, in its child process.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "the body of waiters_arriving_one_at_a_time_over_one_session, run in a process of its own"]
async fn waiters_arriving_one_at_a_time_over_one_session_alone() {
    waiters_arriving_one_at_a_time(300, 1).await;
}
