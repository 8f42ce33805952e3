//! Server requests per discovery operation, counted by a proxy that reads the protocol's
//! frames: a registration, an unregistration, a query through a started `ServiceCache`.

#![cfg(feature = "discovery")]

use crate::common;

use common::fixtures::*;
use common::timing::{COUNTING_SESSION as SESSION, EVENT, LIMIT};
use zk_recipes::discovery::{JsonInstanceSerializer, ServiceDiscovery, ServiceInstance};
use zk_recipes::testing::{CountingProxy, RequestCounts, TestingServer};
use zk_recipes::Framework;

const CYCLES: u64 = 10;

async fn counted() -> (CountingProxy, Framework, TestingServer) {
    // The container reaper must not run during a measurement: the service's node is a
    // container, empty between cycles, and creating it again costs requests.
    let server = TestingServer::builder()
        .system_property("znode.container.checkIntervalMs", "3600000")
        .start()
        .await
        .expect("starting a ZooKeeper server");
    let proxy = CountingProxy::start(&server.connect_string()).await.expect("counting proxy");
    let fw = plain_framework(&proxy.connect_string(), SESSION).await;
    (proxy, fw, server)
}

/// The counts by kind, pings and round trips left out (they depend on idle time and the
/// kernel, see `RequestCounts`).
fn kinds(counts: &RequestCounts) -> Vec<(&'static str, u64)> {
    counts.iter().filter(|(kind, _)| !matches!(*kind, "ping" | "round-trip")).collect()
}

fn instance(id: &str) -> ServiceInstance {
    ServiceInstance::new("api").unwrap().with_id(id).unwrap().with_address("10.0.0.5").with_port(8080).unwrap()
}

/// `CYCLES` register/unregister cycles of one instance at a time on a fresh registry, after one
/// that made the parents; the counts by kind.
async fn cycles(watch_instances: bool) -> Vec<(&'static str, u64)> {
    let (proxy, fw, mut server) = counted().await;
    let base = unique_path("discovery-counts", "register");
    let discovery: ServiceDiscovery =
        ServiceDiscovery::new(&fw, &base, JsonInstanceSerializer::new()).unwrap().watch_instances(watch_instances);
    // The first registration makes the parents.
    discovery.register(&instance("warm")).await.unwrap();
    discovery.unregister("api", "warm").await.unwrap();

    let before = proxy.counts();
    for n in 0..CYCLES {
        discovery.register(&instance(&format!("i{n}"))).await.unwrap();
        discovery.unregister("api", &format!("i{n}")).await.unwrap();
    }
    eventually(EVENT, "the last background work", || async {
        match fw.pending_deletes() {
            0 => Ok(()),
            n => Err(format!("{n} pending")),
        }
    })
    .await;
    // The watched mode's last watch read may still be on its way (it is sent behind the
    // create, and the delete does not wait for it): the watch event comes with the delete.
    if watch_instances {
        eventually(EVENT, "every watch's event", || async {
            match proxy.counts().since(&before).get("watch-event") {
                CYCLES => Ok(()),
                n => Err(format!("{n} events")),
            }
        })
        .await;
    }
    let counts = proxy.counts().since(&before);
    eprintln!(
        "{CYCLES} register/unregister cycles, watch_instances({watch_instances}): {}",
        counts.per_op(CYCLES as usize)
    );
    fw.close().await;
    server.stop().await.unwrap();
    kinds(&counts)
}

/// As Curator's `registerService` and `unregisterService` without `watchInstances`: a
/// registration is its node's create, an unregistration the delete.
#[tokio::test]
async fn a_registration_is_a_create_an_unregistration_a_delete() {
    init_tracing();
    bounded(LIMIT, async {
        assert_eq!(cycles(false).await, [("create2", CYCLES), ("delete", CYCLES)]);
    })
    .await;
}

/// With `watch_instances(true)` a registration adds the exists watch that brings the node back
/// after another client's delete; the watch's event is the server's note of the
/// unregistration's delete, not a request.
#[tokio::test]
async fn a_watched_registration_adds_one_exists_watch() {
    init_tracing();
    bounded(LIMIT, async {
        let expected = [("create2", CYCLES), ("delete", CYCLES), ("exists+watch", CYCLES), ("watch-event", CYCLES)];
        assert_eq!(cycles(true).await, expected);
    })
    .await;
}

/// A query through a started cache reads what the cache parsed: no request at all.
#[tokio::test]
async fn a_cache_query_costs_no_request() {
    init_tracing();
    bounded(LIMIT, async {
        let (proxy, fw, mut server) = counted().await;
        let base = unique_path("discovery-counts", "cache");
        let discovery: ServiceDiscovery = ServiceDiscovery::new(&fw, &base, JsonInstanceSerializer::new()).unwrap();
        for n in 0..5 {
            discovery.register(&instance(&format!("i{n}"))).await.unwrap();
        }
        let cache = discovery.service_cache("api").unwrap();
        cache.start().await.unwrap();
        eventually(EVENT, "five instances cached", || async {
            match cache.instances().len() {
                5 => Ok(()),
                n => Err(format!("{n}")),
            }
        })
        .await;
        let before = proxy.counts();
        for _ in 0..100 {
            assert_eq!(cache.instances().len(), 5);
        }
        assert_eq!(kinds(&proxy.counts().since(&before)), vec![], "100 cache queries");
        cache.close().await;
        discovery.close().await.unwrap();
        fw.close().await;
        server.stop().await.unwrap();
    })
    .await;
}

/// A query without a cache lists the service and reads its instances in `multiRead`
/// requests of up to 64 reads: 200 instances cost one listing and four requests (Curator reads
/// them one `getData` at a time: 201 requests).
#[tokio::test]
async fn a_query_reads_its_instances_in_multi_reads() {
    init_tracing();
    bounded(LIMIT, async {
        let (proxy, fw, mut server) = counted().await;
        let base = unique_path("discovery-counts", "query");
        let discovery: ServiceDiscovery = ServiceDiscovery::new(&fw, &base, JsonInstanceSerializer::new()).unwrap();
        let writer: ServiceDiscovery = ServiceDiscovery::new(
            &plain_framework(&server.connect_string(), SESSION).await,
            &base,
            JsonInstanceSerializer::new(),
        )
        .unwrap();
        for n in 0..200 {
            writer.register(&instance(&format!("i{n:03}"))).await.unwrap();
        }
        let before = proxy.counts();
        let found = discovery.query_for_instances("api").await.unwrap();
        assert_eq!(found.len(), 200);
        assert_eq!(found[7].id, "i007", "in id order");
        assert_eq!(kinds(&proxy.counts().since(&before)), vec![("getChildren", 1), ("multiRead", 4)]);
        writer.close().await.unwrap();
        discovery.close().await.unwrap();
        fw.close().await;
        server.stop().await.unwrap();
    })
    .await;
}
