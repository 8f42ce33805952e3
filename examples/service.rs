//! One service using the recipes together: it follows its typed configuration through a
//! cache (which keeps the last good one when a bad one is written), registers itself for
//! discovery, counts the jobs it runs in a shared counter, runs a job under a lock (stopped if
//! the lock is lost, its result written fenced), runs the leader's job while its latch leads,
//! and shuts down cleanly.
//!
//! `cargo run --features testing,discovery,serde --example service [-- --connect host:port]`
//! (without `--connect` it starts an embedded ZooKeeper server).

use std::time::Duration;

use futures::StreamExt;
use serde::{Deserialize, Serialize};
use serde_json::json;
use zk_recipes::discovery::{JsonInstanceSerializer, ServiceDiscovery, ServiceInstance};
use zk_recipes::retry::RetryNTimes;
use zk_recipes::{
    DistributedAtomicLong, Framework, InterProcessMutex, LeaderLatch, ModelSpec, ModeledCache, ModeledCacheEvent,
    ModeledFramework, Parents, ZPath,
};

mod common;
use common::{server_or_connect, Error};

/// Bound on each wait of this program, so that it always ends.
const WAIT: Duration = Duration::from_secs(20);

/// The service's configuration: one JSON node, as a Java service's `ModeledFramework` with
/// Jackson writes and reads it.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
struct Config {
    batch_size: u32,
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    let (_server, connect) = server_or_connect().await?;
    let framework = Framework::builder(&connect).session_timeout(Duration::from_secs(10)).start().await?;
    let root = "/examples/service";

    // Configuration: written by an operator (here: by us), followed through a typed cache.
    let configs: ModeledFramework<Config> = ModeledFramework::new(
        &framework,
        ModelSpec::new(ZPath::parse(&format!("{root}/config"))?).parents(Parents::Containers),
    );
    let wanted = Config { batch_size: 40 };
    match configs.create(&wanted).await {
        Err(e) if e.is_node_exists() => drop(configs.set(&wanted).await?),
        created => drop(created?),
    }
    let config = configs.cached()?;
    let mut changes = config.events();
    config.start().await?;
    tokio::time::timeout(WAIT, config.initialized()).await??;
    let batch_size = |cache: &ModeledCache<Config>| cache.models().first().map_or(0, |m| m.value.batch_size);
    println!("config: batch-size = {}", batch_size(&config));
    // A write that is not a configuration: reported once, and the last good one stays.
    framework.set_data(&format!("{root}/config"), b"batch_size=80").await?;
    loop {
        match tokio::time::timeout(WAIT, changes.next()).await? {
            Some(ModeledCacheEvent::DecodeFailed(bad)) => {
                println!("config: version {} does not decode; batch-size stays {}", bad.version, batch_size(&config));
                break;
            }
            Some(_) => {}
            None => break,
        }
    }

    // Discovery: this instance, as curator-x-discovery's readers see it.
    let discovery: ServiceDiscovery =
        ServiceDiscovery::new(&framework, "/examples/services", JsonInstanceSerializer::new())?;
    let me = ServiceInstance::builder("worker").id("worker-1").address("127.0.0.1").port(8080);
    discovery.register(&me.payload(json!({"zone": "a"})).build()?).await?;
    println!(
        "registered: {:?}",
        discovery.query_for_instances("worker").await?.iter().map(|i| &i.id).collect::<Vec<_>>()
    );

    // A counter shared by every instance, and a job run under a lock.
    let jobs = DistributedAtomicLong::new(
        &framework,
        &format!("{root}/jobs-run"),
        RetryNTimes::new(10, Duration::from_millis(10)),
    )?;
    let mutex = InterProcessMutex::new(&framework, &format!("{root}/locks/report"))?;
    let guard = tokio::time::timeout(WAIT, mutex.acquire()).await??;
    let report = format!("{root}/report");
    framework.create(&report).or_set().await?;
    let job = async {
        let counted = jobs.increment().await?;
        // Written only while the lock node exists: a late write after a loss fails on the server.
        let line = format!("job {} with batch-size {}", counted.post_value(), batch_size(&config));
        guard.fenced_transaction(&framework).set_data(&report, line.as_bytes()).commit().await?;
        Ok::<_, zk_recipes::Error>(line)
    };
    match guard.run(job).await {
        Ok(line) => println!("under the lock: {}", line?),
        Err(lost) => println!("{lost}"),
    }
    guard.release().await?;

    // The leader's job: runs while this instance leads, stopped if leadership is lost.
    let latch = LeaderLatch::new(&framework, &format!("{root}/leader"), "worker-1")?;
    latch.start()?;
    let leadership = tokio::time::timeout(WAIT, latch.await_leadership()).await??;
    let led = leadership.run(async { jobs.increment().await.map(|v| *v.post_value()) }).await;
    println!("as leader: jobs-run = {}", led??);
    latch.close().await?;

    // Shut down: unregister, stop following, end the session.
    discovery.close().await?;
    config.close().await;
    framework.close().await;
    println!("shut down");
    Ok(())
}
