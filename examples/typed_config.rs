//! Typed configuration (Curator's `ModeledFramework` with `JacksonModelSerializer`): one JSON
//! node per service under `/examples/typed-config/{service}`, written and read as a Rust
//! struct, changed with compare-and-set, and followed by a `ModeledCache` that keeps each
//! service's last good configuration when someone writes one that does not decode.
//!
//! `cargo run --features testing,serde --example typed_config [-- --connect host:port]`
//! (without `--connect` it starts an embedded ZooKeeper server).

use std::time::Duration;

use futures::StreamExt;
use serde::{Deserialize, Serialize};
use zk_recipes::{Error as ZkrError, Framework, ModelSpec, ModeledCacheEvent, ModeledFramework, Parents, ZPath};

mod common;
use common::{remove_tree, server_or_connect, Error};

/// How long each step may take before the example gives up.
const STEP: Duration = Duration::from_secs(20);

/// A service's configuration, as a Java service would declare it (same fields, same order).
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
struct ServiceConfig {
    replicas: u32,
    image: String,
    max_connections: Option<u32>,
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    let (_server, connect) = server_or_connect().await?;
    let framework = Framework::builder(&connect).session_timeout(Duration::from_secs(10)).start().await?;
    let root = "/examples/typed-config";
    // Start from nothing (an earlier run may have left nodes behind).
    remove_tree(&framework, root).await?;

    let spec = ModelSpec::new(ZPath::parse_with_ids(&format!("{root}/{{service}}"))?).parents(Parents::Containers);
    let configs: ModeledFramework<ServiceConfig> = ModeledFramework::new(&framework, spec);
    for (service, replicas) in [("orders", 3), ("billing", 2)] {
        let config = ServiceConfig { replicas, image: format!("{service}:1.0"), max_connections: None };
        let created = configs.resolved([service])?.create(&config).await?;
        println!("created {} = {}", created.path, String::from_utf8_lossy(&framework.get_data(&created.path).await?.0));
    }
    let services: Vec<String> = configs.ids().await?;
    println!("services: {services:?}");

    // The cache, as a service would run it.
    let cache = configs.cached()?;
    let mut events = cache.events();
    cache.start().await?;
    tokio::time::timeout(STEP, cache.initialized()).await??;
    for model in cache.models() {
        println!("cached {:?}: {:?} (version {})", model.ids, model.value, model.stat.version);
    }

    // Compare-and-set: the first writer with the version it read wins; a stale one is refused.
    let orders = configs.resolved(["orders"])?;
    let read = orders.read().await?;
    let scaled = ServiceConfig { replicas: 5, ..read.value.clone() };
    orders.compare_and_set(&scaled, read.stat.version).await?;
    match orders.compare_and_set(&read.value, read.stat.version).await {
        Err(ZkrError::BadVersion { expected, .. }) => println!("stale write refused (expected version {expected})"),
        other => return Err(format!("a stale compare-and-set went through: {other:?}").into()),
    }

    // Someone writes bytes that are not a ServiceConfig: the cache reports it and keeps the
    // last good configuration.
    framework.set_data(&format!("{root}/billing"), b"{\"replicas\":\"many\"}").await?;
    loop {
        match tokio::time::timeout(STEP, events.next()).await?.ok_or("the cache closed")? {
            ModeledCacheEvent::Updated(model) => println!("updated {:?}: {:?}", model.ids, model.value),
            ModeledCacheEvent::DecodeFailed(bad) => {
                let kept = cache.get_path(&bad.path).map(|m| m.value.replicas);
                println!(
                    "{} version {} does not decode ({}); keeping replicas = {kept:?}",
                    bad.path, bad.version, bad.error
                );
                break;
            }
            _ => {}
        }
    }

    // Then a good one again.
    let billing = ServiceConfig { replicas: 4, image: "billing:1.1".into(), max_connections: Some(100) };
    configs.resolved(["billing"])?.set(&billing).await?;
    loop {
        match tokio::time::timeout(STEP, events.next()).await?.ok_or("the cache closed")? {
            ModeledCacheEvent::Updated(model) if *model.value == billing => {
                println!("updated {:?}: {:?}", model.ids, model.value);
                break;
            }
            _ => {}
        }
    }

    cache.close().await;
    framework.delete(root).recursive().await?;
    framework.close().await;
    Ok(())
}
