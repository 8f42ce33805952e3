//! Barriers: workers held at a `DistributedBarrier` until it is removed, then a
//! `DistributedDoubleBarrier` that starts three workers together and lets them finish
//! together.
//!
//! `cargo run --features testing --example barrier [-- --connect host:port]` (without
//! `--connect` it starts an embedded ZooKeeper server).

use std::time::Duration;

use zk_recipes::{DistributedBarrier, DistributedDoubleBarrier, Framework};

mod common;
use common::{server_or_connect, Error};

const WORKERS: i32 = 3;

#[tokio::main]
async fn main() -> Result<(), Error> {
    let (_server, connect) = server_or_connect().await?;
    let framework = Framework::builder(&connect).session_timeout(Duration::from_secs(10)).start().await?;

    // A gate: workers wait until the coordinator removes it.
    let gate = DistributedBarrier::new(&framework, "/examples/barrier/gate")?;
    gate.set().await?;
    let mut waiting = Vec::new();
    for i in 0..WORKERS {
        let gate = gate.clone();
        waiting.push(tokio::spawn(async move {
            gate.wait().await?;
            println!("worker {i} passed the gate");
            Ok::<(), zk_recipes::Error>(())
        }));
    }
    println!("gate set; still closed after 200 ms: {}", !gate.wait_timeout(Duration::from_millis(200)).await?);
    gate.remove().await?;
    for worker in waiting {
        worker.await.map_err(|e| e.to_string())??;
    }

    // A double barrier: each worker on its own session, all start and finish together.
    let mut members = Vec::new();
    for i in 0..u64::from(WORKERS.unsigned_abs()) {
        let connect = connect.clone();
        members.push(tokio::spawn(async move {
            let fw = Framework::builder(&connect).session_timeout(Duration::from_secs(10)).start().await?;
            let round = DistributedDoubleBarrier::new(&fw, "/examples/barrier/round", WORKERS)?;
            if !round.enter_timeout(Duration::from_secs(30)).await? {
                return Err("the group did not form".into());
            }
            println!("worker {i} entered with the others");
            tokio::time::sleep(Duration::from_millis(50 * i)).await; // finishing at different times
            if !round.leave_timeout(Duration::from_secs(30)).await? {
                return Err("the group did not finish".into());
            }
            println!("worker {i} left with the others");
            fw.close().await;
            Ok::<(), Error>(())
        }));
    }
    for member in members {
        member.await.map_err(|e| e.to_string())??;
    }
    framework.delete("/examples/barrier").recursive().await?;
    framework.close().await;
    Ok(())
}
