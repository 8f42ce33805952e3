//! A set divided among a group: three workers on their own sessions share 12 shards through
//! kazoo's `SetPartitioner` (each shard locked by exactly one of them); a fourth joins, they
//! release and divide the shards again, and one leaves.
//!
//! `cargo run --features testing --example set_partitioner [-- --connect host:port]` (without
//! `--connect` it starts an embedded ZooKeeper server).

use std::collections::BTreeMap;
use std::time::Duration;

use zk_recipes::{Framework, PartitionState, SetPartitioner};

mod common;
use common::{server_or_connect, Error};

const PATH: &str = "/examples/set_partitioner";

async fn member(connect: &str, id: &str, shards: &[String]) -> Result<(Framework, SetPartitioner), Error> {
    let framework = Framework::builder(connect).session_timeout(Duration::from_secs(10)).start().await?;
    let partitioner = SetPartitioner::builder(&framework, PATH, shards.iter().cloned())
        .identifier(id)
        .time_boundary(Duration::from_millis(500))
        .start()
        .await?;
    Ok((framework, partitioner))
}

/// Lets every member release what it holds after a change, until all hold their shares of a
/// division that covers every shard once; prints it.
async fn settle(members: &[(Framework, SetPartitioner)], shards: &[String]) -> Result<(), Error> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let mut owners = BTreeMap::new();
        let mut all_acquired = true;
        for (_, p) in members {
            match p.state() {
                PartitionState::Release => p.release_set().await, // a worker would stop first
                PartitionState::Acquired => {
                    for shard in p.partition() {
                        owners.entry(shard).or_insert_with(Vec::new).push(p.identifier().to_owned());
                    }
                }
                PartitionState::Failure => return Err(format!("{} failed: {:?}", p.identifier(), p.error()).into()),
                _ => all_acquired = false,
            }
        }
        if all_acquired && owners.len() == shards.len() && owners.values().all(|o| o.len() == 1) {
            for (_, p) in members {
                println!("  {} holds {}", p.identifier(), p.partition().join(" "));
            }
            return Ok(());
        }
        if tokio::time::Instant::now() > deadline {
            return Err("the members did not settle within 60 s".into());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    let (_server, connect) = server_or_connect().await?;
    let shards: Vec<String> = (0..12).map(|i| format!("shard-{i:02}")).collect();
    let mut members = Vec::new();
    for id in ["worker-a", "worker-b", "worker-c"] {
        members.push(member(&connect, id, &shards).await?);
    }
    println!("three workers:");
    settle(&members, &shards).await?;

    members.push(member(&connect, "worker-d", &shards).await?);
    println!("worker-d joined:");
    settle(&members, &shards).await?;

    let (framework, leaving) = members.remove(1);
    leaving.finish().await;
    framework.close().await;
    println!("worker-b left:");
    settle(&members, &shards).await?;

    for (framework, partitioner) in members {
        partitioner.finish().await;
        framework.close().await;
    }
    Ok(())
}
