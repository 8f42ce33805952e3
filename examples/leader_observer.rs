//! Who leads, seen by a process that is no candidate: a `LeaderObserver` follows a
//! `LeaderLatch` election while three candidates come and go (the leader closes its latch, the
//! next one's process ends, the last one closes), printing each leader it sees.
//!
//! `cargo run --features testing --example leader_observer [-- --connect host:port]` (without
//! `--connect` it starts an embedded ZooKeeper server).

use std::time::Duration;

use futures::StreamExt;
use zk_recipes::{ElectionKind, Framework, LeaderChanges, LeaderLatch, LeaderObserver};

mod common;
use common::{server_or_connect, Error};

const ELECTION: &str = "/examples/leader_observer/scheduler";
/// Bound on each wait for the observer: well past the session timeout below.
const WAIT: Duration = Duration::from_secs(30);

async fn session(connect: &str) -> Result<Framework, Error> {
    Ok(Framework::builder(connect).session_timeout(Duration::from_secs(10)).start().await?)
}

/// Reads the observer's changes, printing each, until `expected` leads (`None`: no candidate).
async fn seen(changes: &mut LeaderChanges, expected: Option<&str>) -> Result<(), Error> {
    loop {
        let change = tokio::time::timeout(WAIT, changes.next())
            .await
            .map_err(|_| format!("the observer did not see {expected:?} lead within {WAIT:?}"))?
            .ok_or("the observer stopped")?;
        match &change {
            Some(leader) => {
                let node = leader.node.rsplit('/').next().unwrap_or_default();
                println!("observer: {} leads (its node {node})", leader.id);
            }
            None => println!("observer: no leader"),
        }
        if change.as_ref().map(|leader| leader.id.as_str()) == expected {
            return Ok(());
        }
    }
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    let (_server, connect) = server_or_connect().await?;

    // The observer's process takes no part: it creates nothing in the election.
    let watcher = session(&connect).await?;
    let observer = LeaderObserver::start(&watcher, ELECTION, ElectionKind::Latch)?;
    let mut changes = observer.changes();
    seen(&mut changes, None).await?;

    // Three candidates, each a process with its own session; candidate-a joins first and leads.
    let mut candidates = Vec::new();
    for id in ["candidate-a", "candidate-b", "candidate-c"] {
        let framework = session(&connect).await?;
        let latch = LeaderLatch::new(&framework, ELECTION, id)?;
        latch.start()?;
        if candidates.is_empty() {
            latch.await_leadership().await?;
        }
        candidates.push((framework, latch));
    }
    seen(&mut changes, Some("candidate-a")).await?;
    let queue: Vec<String> = candidates[0].1.participants().await?.into_iter().map(|p| p.id).collect();
    println!("candidates in queue order: {queue:?}");

    // The leader resigns: the next in the queue takes over.
    let (framework_a, latch_a) = candidates.remove(0);
    println!("candidate-a closes its latch");
    latch_a.close().await?;
    framework_a.close().await;
    seen(&mut changes, Some("candidate-b")).await?;

    // The new leader's process ends: its session closes, its node goes with it.
    let (framework_b, latch_b) = candidates.remove(0);
    println!("candidate-b's process ends");
    framework_b.close().await;
    drop(latch_b);
    seen(&mut changes, Some("candidate-c")).await?;
    let term = candidates[0].1.await_leadership().await?;
    println!("candidate-c knows it leads (fencing token {})", term.fencing_token());

    // The last candidate leaves: nobody leads.
    let (framework_c, latch_c) = candidates.remove(0);
    println!("candidate-c closes its latch");
    latch_c.close().await?;
    framework_c.close().await;
    seen(&mut changes, None).await?;

    drop(observer);
    watcher.close().await;
    Ok(())
}
