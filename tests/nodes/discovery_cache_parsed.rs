//! A `ServiceCache` keeps each instance as parsed from its node's last change: changes,
//! deletes and data that is not an instance's JSON show in `instances()` as the events come.
#![cfg(feature = "discovery")]

use crate::common;

use std::sync::Arc;

use common::fixtures::{bounded, eventually, framework, init_tracing, shared_connect, unique_path};
use common::timing::{EVENT, LIMIT, SESSION};
use zk_recipes::discovery::{JsonInstanceSerializer, ServiceDiscovery, ServiceInstance, ServiceType};

fn instance(id: &str, port: u32) -> ServiceInstance {
    ServiceInstance::new("api")
        .unwrap()
        .with_id(id)
        .unwrap()
        .with_address("10.0.0.5")
        .with_port(port)
        .unwrap()
        .with_service_type(ServiceType::Static)
}

fn ports(instances: &[Arc<ServiceInstance>]) -> Vec<(String, Option<u16>)> {
    instances.iter().map(|i| (i.id.clone(), i.port)).collect()
}

#[tokio::test]
async fn the_cache_follows_changes_deletes_and_unreadable_data() {
    init_tracing();
    bounded(LIMIT, async {
        let fw = framework(&shared_connect().await, SESSION).await;
        let base = unique_path("discovery-parsed", "follow");
        let serializer = JsonInstanceSerializer::new();
        let discovery: ServiceDiscovery = ServiceDiscovery::new(&fw, &base, serializer.clone()).unwrap();
        discovery.register(&instance("a", 1)).await.unwrap();
        discovery.register(&instance("b", 2)).await.unwrap();
        fw.create(&format!("{base}/api/junk")).data(b"not json").await.unwrap();
        let cache = discovery.service_cache("api").unwrap();
        cache.start().await.unwrap();
        let want = |expected: Vec<(&str, Option<u16>)>| {
            let expected: Vec<(String, Option<u16>)> = expected.into_iter().map(|(i, p)| (i.to_owned(), p)).collect();
            let cache = &cache;
            async move {
                eventually(EVENT, "the cache's instances", || {
                    let expected = expected.clone();
                    async move {
                        let got = ports(&cache.instances());
                        if got == expected {
                            Ok(())
                        } else {
                            Err(format!("{got:?}, want {expected:?}"))
                        }
                    }
                })
                .await
            }
        };
        want(vec![("a", Some(1)), ("b", Some(2))]).await;
        // Unreadable data becomes an instance, an instance becomes unreadable data.
        fw.set_data(&format!("{base}/api/junk"), &serializer.serialize(&instance("junk", 3)).unwrap()).await.unwrap();
        want(vec![("a", Some(1)), ("b", Some(2)), ("junk", Some(3))]).await;
        fw.set_data(&format!("{base}/api/a"), b"{").await.unwrap();
        want(vec![("b", Some(2)), ("junk", Some(3))]).await;
        discovery.update(&instance("b", 20)).await.unwrap();
        want(vec![("b", Some(20)), ("junk", Some(3))]).await;
        fw.delete(&format!("{base}/api/junk")).await.unwrap();
        want(vec![("b", Some(20))]).await;
        cache.close().await;
        assert!(cache.instances().is_empty(), "a closed cache holds nothing");
        discovery.close().await.unwrap();
        fw.close().await;
    })
    .await;
}
