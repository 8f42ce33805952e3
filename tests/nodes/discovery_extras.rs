//! Discovery extras: a provider's instance filters and a strategy of the caller's, and the
//! stream of a `ServiceCache`'s instances after each change, through a black-holed connection
//! (the list after the outage names what was registered and unregistered meanwhile).
#![cfg(feature = "discovery")]

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use common::fixtures::*;
use common::timing::{back_within, EVENT, FAULT_SESSION, LIMIT, SESSION};
use futures::StreamExt;
use zk_recipes::discovery::{
    DownInstancePolicy, InstanceStrategy, JsonInstanceSerializer, ProviderStrategy, ServiceDiscovery, ServiceInstance,
    ServiceProvider,
};
use zk_recipes::testing::ProxyMode;

fn instance(id: &str, port: u16) -> ServiceInstance {
    ServiceInstance::new("api").unwrap().with_id(id).unwrap().with_address("10.0.0.5").with_port(port.into()).unwrap()
}

/// The instance on the highest port.
struct HighestPort;

impl<T> InstanceStrategy<T> for HighestPort {
    fn pick(&self, instances: &[Arc<ServiceInstance<T>>]) -> Option<Arc<ServiceInstance<T>>> {
        instances.iter().max_by_key(|i| i.port).cloned()
    }
}

fn ids(instances: &[Arc<ServiceInstance>]) -> Vec<String> {
    instances.iter().map(|i| i.id.clone()).collect()
}

#[tokio::test]
async fn providers_filter_and_pick_by_a_strategy_of_the_callers() {
    init_tracing();
    bounded(LIMIT, async {
        let fw = plain_framework(&shared_connect().await, SESSION).await;
        let base = unique_path("discovery-extras", "provider");
        let discovery = ServiceDiscovery::new(&fw, &base, JsonInstanceSerializer::new()).unwrap();
        for (id, port) in [("a", 8080), ("b", 8081), ("c", 9090), ("d", 9091)] {
            discovery.register(&instance(id, port)).await.unwrap();
        }
        let cache = discovery.service_cache("api").unwrap();
        cache.start().await.unwrap();
        let filtered = ServiceProvider::new(cache, ProviderStrategy::RoundRobin, DownInstancePolicy::default())
            .with_filter(|i| i.port.is_some_and(|p| p < 9000))
            .with_filter(|i| i.id != "a");
        assert_eq!(ids(&filtered.all_instances()), ["b"]);
        for _ in 0..3 {
            assert_eq!(filtered.instance().unwrap().id, "b");
        }

        let cache = discovery.service_cache("api").unwrap();
        cache.start().await.unwrap();
        let policy = DownInstancePolicy { timeout: Duration::from_secs(60), error_threshold: 1 };
        let custom = ServiceProvider::with_strategy(cache, HighestPort, policy).with_filter(|i| i.id != "c");
        assert_eq!(custom.instance().unwrap().id, "d");
        custom.note_error(&custom.instance().unwrap());
        assert_eq!(custom.instance().unwrap().id, "b", "d is down, c filtered out");

        // A filter may call back into its own provider (here: noting every instance it sees
        // on port 8081 as failing): the filters run without the provider's lock, which this
        // call would otherwise wait on for ever.
        let cache = discovery.service_cache("api").unwrap();
        cache.start().await.unwrap();
        type Slot = std::sync::OnceLock<std::sync::Weak<ServiceProvider>>;
        let slot: Arc<Slot> = Arc::default();
        let reentrant = {
            let slot = slot.clone();
            ServiceProvider::new(cache, ProviderStrategy::RoundRobin, policy).with_filter(move |i| {
                if let Some(provider) = slot.get().and_then(std::sync::Weak::upgrade) {
                    if i.port == Some(8081) {
                        provider.note_error(i);
                    }
                }
                true
            })
        };
        let reentrant = Arc::new(reentrant);
        slot.set(Arc::downgrade(&reentrant)).unwrap();
        let picking = {
            let reentrant = reentrant.clone();
            tokio::task::spawn_blocking(move || ids(&reentrant.all_instances()))
        };
        let seen = within(EVENT, "a pick whose filter calls back into its provider", picking).await.unwrap();
        assert_eq!(seen, ["a", "b", "c", "d"]);
        assert_eq!(ids(&reentrant.all_instances()), ["a", "c", "d"], "b noted failing by the filter");
        reentrant.cache().close().await;
        discovery.close().await.unwrap();
        fw.delete(&base).recursive().await.unwrap();
        fw.close().await;
    })
    .await;
}

/// The cache's stream gives the instances now, then after each change; the cache's own
/// connection is black-holed while one instance is registered and another unregistered, and
/// the list after the outage has both changes.
#[tokio::test]
async fn a_service_cache_streams_its_instances_after_each_change_and_an_outage() {
    init_tracing();
    bounded(LIMIT, async {
        let faulty = FaultyServer::start().await;
        let base = unique_path("discovery-extras", "changes");
        let registrar = plain_framework(&faulty.direct(), SESSION).await;
        let discovery = ServiceDiscovery::new(&registrar, &base, JsonInstanceSerializer::new()).unwrap();
        discovery.register(&instance("a", 8080)).await.unwrap();
        let watching = framework(&faulty.proxied(), FAULT_SESSION).await;
        let reader = ServiceDiscovery::new(&watching, &base, JsonInstanceSerializer::new()).unwrap();
        let cache = reader.service_cache("api").unwrap();
        cache.start().await.unwrap();
        let mut changes = cache.changes();
        assert_eq!(ids(&within(EVENT, "the first list", changes.next()).await.unwrap()), ["a"]);

        discovery.register(&instance("b", 8081)).await.unwrap();
        assert_eq!(ids(&within(EVENT, "b registered", changes.next()).await.unwrap()), ["a", "b"]);

        faulty.proxy.set_mode(ProxyMode::BlackHole);
        discovery.register(&instance("c", 8082)).await.unwrap();
        discovery.unregister("api", "a").await.unwrap();
        tokio::time::sleep(FAULT_SESSION / 4).await; // the outage lasts (no event to await)
        assert_eq!(ids(&cache.instances()), ["a", "b"], "nothing heard during the outage");
        faulty.proxy.set_mode(ProxyMode::Pass);
        let mut last = Vec::new();
        let settled = tokio::time::timeout(back_within(FAULT_SESSION), async {
            while let Some(list) = changes.next().await {
                last = ids(&list);
                if last == ["b", "c"] {
                    return;
                }
            }
        })
        .await;
        assert!(settled.is_ok(), "the list after the outage: {last:?}");
        cache.close().await;
        // After close: one empty list (the stream then waits).
        let closed = within(EVENT, "the list after close", changes.next()).await.unwrap();
        assert!(closed.is_empty(), "{:?}", ids(&closed));
        discovery.close().await.unwrap();
        registrar.delete(&base).recursive().await.unwrap();
        watching.close().await;
        registrar.close().await;
    })
    .await;
}

/// The names of `dir`'s dynamic-sequential nodes of instance `id` (`<id><ten digits>`).
async fn sequential_nodes(fw: &zk_recipes::Framework, dir: &str, id: &str) -> Vec<String> {
    children(fw, dir)
        .await
        .into_iter()
        .filter(|n| n.strip_prefix(id).is_some_and(|s| s.len() == 10 && s.bytes().all(|b| b.is_ascii_digit())))
        .collect()
}

/// A dynamic-sequential registration's create (its node's name known only from its reply)
/// is never dropped in flight: an update while it is held back by a stalled link makes no
/// second node (the new data is written after the create), and an unregister then deletes
/// the node the create made, not a node at the name without its sequence.
#[tokio::test]
async fn a_sequential_registration_in_flight_makes_one_node_and_unregister_deletes_it() {
    init_tracing();
    bounded(LIMIT, async {
        let connect = shared_connect().await;
        let proxy = zk_recipes::testing::FaultProxy::start(&connect).await.unwrap();
        let fw = plain_framework(&proxy.connect_string(), SESSION).await;
        let observer = plain_framework(&connect, SESSION).await;
        let base = unique_path("discovery", "sequential-in-flight");
        let discovery: ServiceDiscovery = ServiceDiscovery::new(&fw, &base, JsonInstanceSerializer::new()).unwrap();
        // The service's node first, so that the held request is the instance's create.
        discovery.register(&instance("plain", 8000)).await.unwrap();
        let dir = format!("{base}/api");
        let sequential =
            |port: u16| instance("s1", port).with_service_type(zk_recipes::discovery::ServiceType::DynamicSequential);
        let held_back = || async {
            request_held_back(&proxy, "the create sent").await;
        };

        proxy.set_mode(ProxyMode::Hold);
        let updated = async {
            held_back().await;
            discovery.update(&sequential(8002)).await.unwrap();
            proxy.set_mode(ProxyMode::Pass);
        };
        let first = sequential(8001);
        let (registered, ()) = tokio::join!(discovery.register(&first), updated);
        registered.unwrap();
        let node = eventually(EVENT, "one node with the new data", || async {
            let nodes = sequential_nodes(&observer, &dir, "s1").await;
            let [node] = &nodes[..] else { return Err(format!("{nodes:?}")) };
            let (data, _) = observer.get_data(&format!("{dir}/{node}")).await.map_err(|e| e.to_string())?;
            let port =
                JsonInstanceSerializer::new().deserialize::<serde_json::Value>(&data).map_err(|e| e.to_string())?.port;
            if port == Some(8002) {
                Ok(node.clone())
            } else {
                Err(format!("{node}: port {port:?}"))
            }
        })
        .await;
        assert_eq!(sequential_nodes(&observer, &dir, "s1").await, [node], "no second node");

        // Unregistered while a new registration's create is held back (the link is let go once
        // the close is sent): the node the create made is deleted once its name is known.
        proxy.set_mode(ProxyMode::Hold);
        let s2 = instance("s2", 8003).with_service_type(zk_recipes::discovery::ServiceType::DynamicSequential);
        let unregistered = async {
            held_back().await;
            let mut unregistering = std::pin::pin!(discovery.unregister("api", "s2"));
            assert!(futures::poll!(unregistering.as_mut()).is_pending(), "the close is sent");
            proxy.set_mode(ProxyMode::Pass);
            unregistering.await
        };
        let (registered, unregistered) = tokio::join!(discovery.register(&s2), unregistered);
        unregistered.unwrap();
        assert!(matches!(registered, Err(zk_recipes::Error::Closed)), "{registered:?}");
        children_count_becomes(&observer, &dir, 2, EVENT).await; // `plain` and `s1`
        assert!(sequential_nodes(&observer, &dir, "s2").await.is_empty());
        discovery.close().await.unwrap();
        fw.close().await;
        observer.close().await;
    })
    .await;
}
