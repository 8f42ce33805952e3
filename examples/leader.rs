//! Leader election: three `LeaderLatch` candidates hand leadership down their queue, then two
//! `LeaderSelector`s take turns running a job.
//!
//! `cargo run --features testing --example leader [-- --connect host:port]` (without
//! `--connect` it starts an embedded ZooKeeper server).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use zk_recipes::{Framework, LeaderLatch, LeaderSelector};

mod common;
use common::{server_or_connect, Error};

#[tokio::main]
async fn main() -> Result<(), Error> {
    let (_server, connect) = server_or_connect().await?;
    // Each candidate has its own session, as separate processes would.
    let mut frameworks = Vec::new();
    for _ in 0..3 {
        frameworks.push(Framework::builder(&connect).session_timeout(Duration::from_secs(10)).start().await?);
    }

    // LeaderLatch: the first node in the queue leads until its latch closes.
    let mut latches = Vec::new();
    for (i, framework) in frameworks.iter().enumerate() {
        let latch = LeaderLatch::new(framework, "/examples/leader/latch", &format!("candidate-{i}"))?;
        latch.start()?;
        latches.push(latch);
    }
    while !latches.is_empty() {
        // Whichever latch is first in the queue leads.
        let waits = latches.iter().map(|latch| Box::pin(latch.await_leadership()));
        let (leadership, i, _) = futures::future::select_all(waits).await;
        let (leadership, latch) = (leadership?, latches.remove(i));
        let queue: Vec<String> = latch.participants().await?.into_iter().map(|p| p.id).collect();
        println!("{} leads (fencing token {}); queue {queue:?}", latch.id(), leadership.fencing_token());
        // The leader's work, stopped (dropped) if leadership is lost first.
        if let Err(lost) = leadership.run(tokio::time::sleep(Duration::from_millis(100))).await {
            println!("{}: {lost}", latch.id());
        }
        latch.close().await?; // the next candidate leads
    }

    // LeaderSelector: the closure runs while its selector leads; returning gives leadership up,
    // and auto-requeue queues the selector again.
    let runs = Arc::new(AtomicUsize::new(0));
    let mut selectors = Vec::new();
    for (i, framework) in frameworks.iter().take(2).enumerate() {
        let runs = runs.clone();
        let selector =
            LeaderSelector::new(framework, "/examples/leader/selector", &format!("worker-{i}"), move |leadership| {
                let runs = runs.clone();
                async move {
                    let n = runs.fetch_add(1, Ordering::SeqCst) + 1;
                    println!("worker-{i} runs the job (term {n}, fencing token {})", leadership.fencing_token());
                    if leadership.run(tokio::time::sleep(Duration::from_millis(50))).await.is_err() {
                        println!("worker-{i} lost leadership mid-job");
                    }
                }
            })?
            .auto_requeue(true);
        selector.start()?;
        selectors.push(selector);
    }
    while runs.load(Ordering::SeqCst) < 6 {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    for selector in &selectors {
        selector.close().await?;
    }
    for framework in frameworks {
        framework.close().await;
    }
    Ok(())
}
