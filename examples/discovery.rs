//! Service discovery wire-compatible with curator-x-discovery: register instances, query them,
//! pick one through a provider.
//!
//! `cargo run --features testing,discovery --example discovery [-- --connect host:port]`
//! (without `--connect` it starts an embedded ZooKeeper server).

use std::time::Duration;

use serde_json::json;
use zk_recipes::discovery::{
    DownInstancePolicy, JsonInstanceSerializer, ProviderStrategy, ServiceDiscovery, ServiceInstance, ServiceProvider,
    UriSpec,
};
use zk_recipes::Framework;

mod common;
use common::{server_or_connect, Error};

#[tokio::main]
async fn main() -> Result<(), Error> {
    let (_server, connect) = server_or_connect().await?;
    let framework = Framework::builder(&connect).session_timeout(Duration::from_secs(10)).start().await?;
    // Java readers with `ServiceDiscoveryBuilder.builder(InstanceDetails.class)` need the
    // payload's `@class`.
    let serializer = JsonInstanceSerializer::new().payload_class("com.example.InstanceDetails");
    let discovery: ServiceDiscovery = ServiceDiscovery::new(&framework, "/examples/discovery", serializer)?;

    for (id, port) in [("api-1", 8080), ("api-2", 8081)] {
        let instance = ServiceInstance::builder("api")
            .id(id)
            .address("127.0.0.1")
            .port(port)
            .payload(json!({"description": format!("instance {id}")}))
            .uri_spec(UriSpec::new("{scheme}://{address}:{port}/api"))
            .build()?;
        discovery.register(&instance).await?;
        println!("registered {id} on port {port}");
    }
    println!("services: {:?}", discovery.query_for_names().await?);
    for instance in discovery.query_for_instances("api").await? {
        println!(
            "instance {} at {:?}:{:?} payload {:?}",
            instance.id, instance.address, instance.port, instance.payload
        );
    }

    let cache = discovery.service_cache("api")?;
    cache.start().await?;
    let provider = ServiceProvider::new(cache, ProviderStrategy::RoundRobin, DownInstancePolicy::default());
    for _ in 0..4 {
        let picked = provider.instance().ok_or("no instance")?;
        println!("picked {}", picked.id);
    }
    provider.close().await;
    discovery.close().await?;
    println!("unregistered: {:?}", discovery.query_for_instances("api").await?.len());
    framework.close().await;
    Ok(())
}
