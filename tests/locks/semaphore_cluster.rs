//! `InterProcessSemaphore` on a real 3-node ZooKeeper ensemble (Curator's
//! `TestInterProcessSemaphoreCluster`): looping clients keep going through a leader loss, stop
//! when the whole ensemble is down, resume when a quorum is back, and are never over the limit.

use crate::common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::fixtures::{children_count_becomes, framework, plain_framework, unique_path};
use common::timing::{FAULT_SESSION as SESSION, SLOW_LIMIT as LIMIT};
use tokio::time::{timeout, Instant};
use zk_recipes::testing::TestingCluster;
use zk_recipes::{Error, InterProcessSemaphore};

const CLIENTS: usize = 5;
const MAX: usize = 2;

/// Counts completed acquisitions and checks that holders never exceed the limit.
#[derive(Default)]
struct Stats {
    ops: AtomicUsize,
    holding: AtomicUsize,
    peak: AtomicUsize,
}

impl Stats {
    fn ops(&self) -> usize {
        self.ops.load(Ordering::SeqCst)
    }

    /// Waits until `n` more acquisitions have completed, bounded by `limit`.
    async fn progress(&self, n: usize, limit: Duration, what: &str) {
        let target = self.ops() + n;
        let deadline = Instant::now() + limit;
        while self.ops() < target {
            assert!(
                Instant::now() < deadline,
                "{what}: {} of {n} acquisitions within {limit:?}",
                n + self.ops() - target
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

async fn client_loop(semaphore: InterProcessSemaphore, stats: Arc<Stats>) {
    loop {
        match semaphore.acquire().await {
            Ok(lease) => {
                // Checked by the test through `peak`: a panic here would only end this loop.
                let now = stats.holding.fetch_add(1, Ordering::SeqCst) + 1;
                stats.peak.fetch_max(now, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(5)).await; // the work
                stats.holding.fetch_sub(1, Ordering::SeqCst);
                stats.ops.fetch_add(1, Ordering::SeqCst);
                let _ = lease.release().await; // may fail in an outage; the reaper finishes it
            }
            Err(Error::Closed) => return,
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
}

/// Runs on a runtime of its own thread and is bounded from outside it: a runtime whose workers
/// are all stuck cannot fire its own timers, and must fail the test rather than hang it.
#[test]
fn operations_stop_with_the_ensemble_and_resume_with_a_quorum() {
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        runtime.block_on(stop_and_resume());
        let _ = done_tx.send(());
    });
    match done_rx.recv_timeout(LIMIT + Duration::from_secs(10)) {
        Ok(()) => {}
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => panic!("the scenario failed (see its panic above)"),
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => panic!("the scenario hung: its runtime never came back"),
    }
}

async fn stop_and_resume() {
    timeout(LIMIT, async {
        let mut cluster = TestingCluster::builder().size(3).start().await.unwrap();
        cluster.settle(Duration::from_secs(30)).await.unwrap();
        let path = unique_path("sem-cluster", "stop-resume");
        let stats = Arc::new(Stats::default());
        let mut frameworks = Vec::new();
        let mut loops = Vec::new();
        for _ in 0..CLIENTS {
            let fw = framework(&cluster.connect_string(), SESSION).await;
            let semaphore = InterProcessSemaphore::new(&fw, &path, MAX).unwrap();
            loops.push(tokio::spawn(client_loop(semaphore, stats.clone())));
            frameworks.push(fw);
        }
        stats.progress(30, Duration::from_secs(10), "before any fault").await;

        // Losing the leader: the ensemble elects another; the clients carry on.
        let leader = cluster.leader().await.expect("a leader");
        cluster.kill(leader).await.unwrap();
        stats.progress(30, SESSION * 3, "after losing the leader").await;

        // The whole ensemble down: nothing can be acquired any more.
        for i in 0..cluster.len() {
            cluster.kill(i).await.unwrap();
        }
        // Usually Suspended at once. zookeeper-client 0.11.2 can be caught reporting
        // SyncConnected after a handshake that a dying member answered and then reset (it does
        // not go back to Disconnected while the next hosts refuse); its own expiry (1.4 x the
        // session timeout) then ends that, and the framework reports Lost.
        for (i, fw) in frameworks.iter().enumerate() {
            let mut rx = fw.state_watch();
            if timeout(SESSION * 2, rx.wait_for(|s| !s.state.is_connected())).await.is_err() {
                panic!("client {i} did not notice the ensemble is gone: {:?}", fw.snapshot());
            }
        }
        let stopped_at = stats.ops();
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert_eq!(stats.ops(), stopped_at, "acquisitions while no server runs");

        // Two of three back (a quorum): the clients resume once the old sessions' leases are
        // gone (their sessions expire one session timeout after the quorum is back).
        cluster.restart(0).await.unwrap();
        cluster.restart(1).await.unwrap();
        stats.progress(30, SESSION * 4 + Duration::from_secs(10), "after the quorum is back").await;
        let peak = stats.peak.load(Ordering::SeqCst);
        assert!(peak <= MAX, "{peak} holders at once, max {MAX}");

        // Every lease is freed once the clients are gone.
        for task in &loops {
            task.abort();
        }
        for task in loops {
            if let Err(e) = task.await {
                assert!(e.is_cancelled(), "a client loop failed: {e}");
            }
        }
        let admin = plain_framework(&cluster.connect_string(), SESSION).await;
        for fw in &frameworks {
            fw.close().await;
        }
        // Every lease gone after every client closed.
        children_count_becomes(&admin, &format!("{path}/leases"), 0, SESSION * 2).await;
        admin.close().await;
    })
    .await
    .expect("test finished in time");
}
