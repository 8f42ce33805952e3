//! One logical queue over several shards (Curator's `QueueSharder`): a producer's sharder puts
//! items into a shard under the threshold, and the sharders' leader adds a shard each time
//! one fills up, to at most four; then a consumer takes every item from every shard.
//!
//! `cargo run --features testing --example queue_sharder [-- --connect host:port]` (without
//! `--connect` it starts an embedded ZooKeeper server).

use std::collections::BTreeMap;
use std::time::Duration;

use futures::StreamExt;
use zk_recipes::{DistributedQueue, Framework, QueueSharder, QueueSharderPolicies};

mod common;
use common::{remove_tree, server_or_connect, Error};

const ROOT: &str = "/examples/queue_sharder";
const QUEUE: &str = "/examples/queue_sharder/jobs";
const LEADER: &str = "/examples/queue_sharder/leader";
/// Items per shard before the leader adds one, and the most shards.
const THRESHOLD: usize = 10;
const MAX_SHARDS: usize = 4;
/// Bound on each wait below: well past the session timeout.
const WAIT: Duration = Duration::from_secs(30);

async fn session(connect: &str) -> Result<Framework, Error> {
    Ok(Framework::builder(connect).session_timeout(Duration::from_secs(10)).start().await?)
}

fn policies() -> QueueSharderPolicies {
    // The shards are counted on demand below (`check_now`); the schedule stays at Curator's 30 s.
    QueueSharderPolicies::default().new_queue_threshold(THRESHOLD).max_queues(MAX_SHARDS)
}

/// The last part of a shard's path.
fn shard_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    let (_server, connect) = server_or_connect().await?;
    let producing = session(&connect).await?;
    remove_tree(&producing, ROOT).await?; // shards left by an earlier run

    // The producer's sharder makes the first shard and, alone in the election, leads.
    let producer = QueueSharder::new(&producing, QUEUE, LEADER, policies())?;
    producer.start().await?;
    let deadline = tokio::time::Instant::now() + WAIT;
    while !producer.is_leader() {
        if tokio::time::Instant::now() > deadline {
            return Err(format!("the producer's sharder did not lead within {WAIT:?}").into());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // Each round fills the shard under the threshold; counting the shards then makes the
    // leader add one, until there are four.
    let mut put = 0;
    for round in 1..=MAX_SHARDS {
        for _ in 0..THRESHOLD {
            producer.queue()?.put(format!("job-{put:02}").as_bytes()).await?;
            put += 1;
        }
        producer.check_now().await?;
        println!("round {round}: {put} items put, {} shards", producer.shard_count());
    }
    if producer.shard_count() != MAX_SHARDS {
        return Err(format!("{} shards where {MAX_SHARDS} were expected", producer.shard_count()).into());
    }

    // A consumer in another process: its sharder takes up the shards there are, and it takes
    // from all of them at once.
    let consuming = session(&connect).await?;
    let consumer = QueueSharder::new(&consuming, QUEUE, LEADER, policies())?;
    consumer.start().await?;
    println!("the consumer finds {} shards", consumer.shard_count());
    let mut takes = Vec::new();
    for path in consumer.queue_paths() {
        let shard = DistributedQueue::new(&consuming, &path)?;
        takes.push(shard.stream().map(move |taken| (path.clone(), taken)).boxed());
    }
    let mut takes = futures::stream::select_all(takes);
    let mut per_shard: BTreeMap<String, usize> = BTreeMap::new();
    let mut consumed = 0;
    while consumed < put {
        let (path, taken) = tokio::time::timeout(WAIT, takes.next())
            .await
            .map_err(|_| format!("{consumed} of {put} items consumed after {WAIT:?}"))?
            .ok_or("the consumer's streams ended")?;
        let items = taken?;
        consumed += items.len();
        *per_shard.entry(path).or_default() += items.len();
    }
    drop(takes); // every item is taken: the takes still waiting lose nothing
    for (path, n) in &per_shard {
        println!("  {n} items from {}", shard_name(path));
    }
    println!("consumed {consumed} items from {} shards", per_shard.len());

    consumer.close().await?;
    producer.close().await?;
    remove_tree(&consuming, ROOT).await?;
    consuming.close().await;
    producing.close().await;
    Ok(())
}
