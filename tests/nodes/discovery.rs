//! Service discovery on real servers: registration at `<base>/<name>/<id>` with Curator's
//! JSON, queries field for field, the service cache and provider strategies, a dynamic
//! instance back after its session expired, bad input registering nothing.
#![cfg(feature = "discovery")]

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use common::fixtures::{
    bounded, children, eventually, framework, init_tracing, shared_connect, unique_path, within, FaultyServer,
};
use common::timing::{EVENT, FAULT_SESSION, LIMIT, SESSION};
use serde_json::{json, Value};
use zk_recipes::discovery::{
    DownInstancePolicy, JsonInstanceSerializer, ProviderStrategy, ServiceDiscovery, ServiceInstance, ServiceProvider,
    ServiceType, UriSpec,
};
use zk_recipes::retry::RetryNTimes;
use zk_recipes::testing::{CountingProxy, ProxyMode};
use zk_recipes::{Framework, Parents};

fn serializer() -> JsonInstanceSerializer {
    JsonInstanceSerializer::new().payload_class("com.example.InstanceDetails")
}

fn instance(id: &str, port: u32) -> ServiceInstance {
    ServiceInstance::new("api")
        .unwrap()
        .with_id(id)
        .unwrap()
        .with_address("10.0.0.5")
        .with_port(port)
        .unwrap()
        .with_payload(json!({"description": format!("instance {id}")}))
        .with_uri_spec(UriSpec::new("{scheme}://{address}:{port}/api"))
}

#[tokio::test]
async fn register_query_cache_provider_and_unregister() {
    init_tracing();
    bounded(LIMIT, async {
        let connect = shared_connect().await;
        let fw = framework(&connect, SESSION).await;
        let reader_fw = framework(&connect, SESSION).await;
        let base = unique_path("discovery", "basic");
        let discovery = ServiceDiscovery::new(&fw, &base, serializer()).unwrap();
        let reader: ServiceDiscovery = ServiceDiscovery::new(&reader_fw, &base, serializer()).unwrap();
        let one = instance("one", 8080);
        let two = instance("two", 8081).with_service_type(ServiceType::Static);
        discovery.register(&one).await.unwrap();
        discovery.register(&two).await.unwrap();

        let (data, stat) = reader_fw.get_data(&format!("{base}/api/one")).await.unwrap();
        assert_ne!(stat.ephemeral_owner, 0, "a dynamic instance is ephemeral");
        let text = String::from_utf8(data).unwrap();
        assert!(text.starts_with(r#"{"name":"api","id":"one","address":"10.0.0.5","port":8080,"sslPort":null,"payload":{"@class":"com.example.InstanceDetails","#), "{text}");
        assert!(!text.contains("enabled"), "Curator's default serializer writes no `enabled`");
        let (_, stat) = reader_fw.get_data(&format!("{base}/api/two")).await.unwrap();
        assert_eq!(stat.ephemeral_owner, 0, "a static instance is persistent");

        assert_eq!(reader.query_for_names().await.unwrap(), vec!["api".to_string()]);
        assert_eq!(reader.query_for_instances("api").await.unwrap(), vec![one.clone(), two.clone()]);
        assert_eq!(reader.query_for_instance("api", "one").await.unwrap(), Some(one.clone()));
        assert_eq!(reader.query_for_instance("api", "missing").await.unwrap(), None);

        let cache = reader.service_cache("api").unwrap();
        cache.start().await.unwrap();
        assert_eq!(*cache.instances(), [Arc::new(one.clone()), Arc::new(two.clone())]);
        let provider = ServiceProvider::new(cache, ProviderStrategy::RoundRobin, DownInstancePolicy::default());
        let picks: Vec<String> = (0..4).map(|_| provider.instance().unwrap().id).collect();
        assert_eq!(picks, ["one", "two", "one", "two"]);
        provider.note_error(&one);
        assert_eq!(provider.all_instances().len(), 2, "one error is below the threshold");
        provider.note_error(&one);
        assert_eq!(provider.all_instances(), vec![Arc::new(two.clone())], "two errors leave it out");

        // Errors older than the policy's timeout are forgiven before a new one is counted
        // (Curator's `add` purges first): one error, the timeout, then two errors leave the
        // instance out (the late errors were added to the stale count, which the next pick
        // then dropped, and the instance stayed in).
        let short = DownInstancePolicy { timeout: Duration::from_millis(300), error_threshold: 2 };
        let strict = ServiceProvider::new(reader.service_cache("api").unwrap(), ProviderStrategy::RoundRobin, short);
        strict.cache().start().await.unwrap();
        strict.note_error(&one);
        tokio::time::sleep(short.timeout + Duration::from_millis(50)).await; // the policy's own time
        strict.note_error(&one);
        strict.note_error(&one);
        assert_eq!(strict.all_instances(), vec![Arc::new(two.clone())], "two fresh errors leave it out");
        strict.cache().close().await;

        let updated = one.clone().with_port(9090).unwrap().with_enabled(false);
        discovery.update(&updated).await.unwrap();
        eventually(EVENT, "the update in the cache", || async {
            let got = provider.cache().instances();
            if got.first().and_then(|i| i.port) == Some(9090) {
                Ok(())
            } else {
                Err(format!("{got:?}"))
            }
        })
        .await;

        discovery.unregister("api", "one").await.unwrap();
        discovery.close().await.unwrap();
        assert!(children(&reader_fw, &format!("{base}/api")).await.is_empty(), "close unregisters everything");
        provider.cache().close().await;
        fw.close().await;
        reader_fw.close().await;
    })
    .await;
}

#[tokio::test]
async fn strategies_pick_as_curators_do() {
    init_tracing();
    bounded(LIMIT, async {
        let fw = framework(&shared_connect().await, SESSION).await;
        let base = unique_path("discovery", "strategies");
        let discovery = ServiceDiscovery::new(&fw, &base, serializer()).unwrap();
        for (id, port) in [("a", 1), ("b", 2), ("c", 3)] {
            discovery.register(&instance(id, port)).await.unwrap();
        }
        discovery.register(&instance("off", 4).with_enabled(false)).await.unwrap();
        let serializer_with_enabled = serializer().with_enabled_field();
        // A node written with `enabled:false` (Curator's non-compatible serializer) is left out.
        let off = instance("off", 4).with_enabled(false);
        fw.set_data(&format!("{base}/api/off"), &serializer_with_enabled.serialize(&off).unwrap()).await.unwrap();

        let sticky_cache = discovery.service_cache("api").unwrap();
        sticky_cache.start().await.unwrap();
        eventually(EVENT, "four instances cached", || async {
            let n = sticky_cache.instances().len();
            if n == 4 {
                Ok(())
            } else {
                Err(format!("{n}"))
            }
        })
        .await;
        let sticky = ServiceProvider::new(sticky_cache, ProviderStrategy::Sticky, DownInstancePolicy::default());
        let first = sticky.instance().unwrap();
        assert!(first.enabled);
        for _ in 0..5 {
            assert_eq!(sticky.instance().unwrap(), first);
        }
        let random_cache = discovery.service_cache("api").unwrap();
        random_cache.start().await.unwrap();
        let random = ServiceProvider::new(random_cache, ProviderStrategy::Random, DownInstancePolicy::default());
        for _ in 0..20 {
            assert!(["a", "b", "c"].contains(&random.instance().unwrap().id.as_str()));
        }
        discovery.close().await.unwrap();
        sticky.close().await;
        assert!(!sticky.cache().curator_cache().is_complete(), "closing the provider closes its cache");
        random.close().await;
        fw.close().await;
    })
    .await;
}

#[tokio::test]
async fn a_dynamic_instance_is_back_after_its_session_expired() {
    init_tracing();
    bounded(LIMIT, async {
        let servers = FaultyServer::start().await;
        let fw = framework(&servers.proxied(), FAULT_SESSION).await;
        let observer = framework(&servers.direct(), FAULT_SESSION).await;
        let base = unique_path("discovery", "expired");
        let discovery = ServiceDiscovery::new(&fw, &base, serializer()).unwrap();
        let reader: ServiceDiscovery = ServiceDiscovery::new(&observer, &base, serializer()).unwrap();
        let one = instance("one", 8080);
        discovery.register(&one).await.unwrap();
        let updated = one.clone().with_port(8181).unwrap();
        discovery.update(&updated).await.unwrap();
        let session = servers.expire(&fw, FAULT_SESSION * 3).await;
        eventually(FAULT_SESSION * 3 + EVENT, "the instance back on the new session", || async {
            let got = reader.query_for_instances("api").await.map_err(|e| e.to_string())?;
            let owner = observer.exists(&format!("{base}/api/one")).await.ok().flatten().map(|s| s.ephemeral_owner);
            if got == vec![updated.clone()] && owner == Some(session.session_id) {
                Ok(())
            } else {
                Err(format!("{got:?} owner {owner:?}"))
            }
        })
        .await;
        discovery.close().await.unwrap();
        fw.close().await;
        observer.close().await;
    })
    .await;
}

/// A registration of `watch_instances(true)` is made again at once when another client
/// deletes its node; one without (Curator's default) is left deleted until a new session.
#[tokio::test]
async fn a_watched_instance_deleted_by_another_client_is_back() {
    init_tracing();
    bounded(LIMIT, async {
        let fw = framework(&shared_connect().await, SESSION).await;
        let other = framework(&shared_connect().await, SESSION).await;
        let base = unique_path("discovery", "repaired");
        let watched = ServiceDiscovery::new(&fw, &base, serializer()).unwrap().watch_instances(true);
        let unwatched = ServiceDiscovery::new(&fw, &base, serializer()).unwrap();
        let one = instance("watched", 1);
        watched.register(&one).await.unwrap();
        unwatched.register(&instance("unwatched", 2)).await.unwrap();
        let reader: ServiceDiscovery = ServiceDiscovery::new(&other, &base, serializer()).unwrap();

        other.delete(&format!("{base}/api/watched")).await.unwrap();
        other.delete(&format!("{base}/api/unwatched")).await.unwrap();
        eventually(EVENT, "the watched instance back", || async {
            match reader.query_for_instance("api", "watched").await.map_err(|e| e.to_string())? {
                Some(found) if found == one => Ok(()),
                other => Err(format!("{other:?}")),
            }
        })
        .await;
        assert_eq!(reader.query_for_instance("api", "unwatched").await.unwrap(), None);

        watched.close().await.unwrap();
        unwatched.close().await.unwrap();
        assert!(reader.query_for_instances("api").await.unwrap().is_empty());
        fw.close().await;
        other.close().await;
    })
    .await;
}

#[tokio::test]
async fn bad_input_registers_nothing() {
    init_tracing();
    bounded(LIMIT, async {
        let fw = framework(&shared_connect().await, SESSION).await;
        let base = unique_path("discovery", "bad");
        assert!(ServiceDiscovery::<Value>::new(&fw, "relative", serializer())
            .unwrap_err()
            .to_string()
            .contains("path"));
        let discovery: ServiceDiscovery = ServiceDiscovery::new(&fw, &base, serializer()).unwrap();
        assert!(ServiceInstance::<Value>::new("").unwrap_err().is_invalid_argument());
        assert!(ServiceInstance::<Value>::new("a/b").unwrap_err().is_invalid_argument());
        assert!(ServiceInstance::<Value>::new("api").unwrap().with_id("x/y").unwrap_err().is_invalid_argument());
        assert!(ServiceInstance::<Value>::new("api").unwrap().with_port(65_536).unwrap_err().is_invalid_argument());
        assert!(ServiceInstance::<Value>::new("api")
            .unwrap()
            .with_ssl_port(100_000)
            .unwrap_err()
            .is_invalid_argument());
        let mut bad = instance("ok", 1);
        bad.name = "a/b".into();
        assert!(discovery.register(&bad).await.unwrap_err().is_invalid_argument());
        bad.name = String::new();
        assert!(discovery.register(&bad).await.unwrap_err().is_invalid_argument());
        assert!(discovery.query_for_instances("a/b").await.unwrap_err().is_invalid_argument());
        // A payload that is not valid JSON (a map with non-string keys) is refused before any write.
        let discovery_map: ServiceDiscovery<std::collections::HashMap<Vec<u8>, u8>> =
            ServiceDiscovery::new(&fw, &base, serializer()).unwrap();
        let map_instance =
            ServiceInstance::new("api").unwrap().with_payload(std::iter::once((vec![1u8], 1u8)).collect());
        assert!(discovery_map.register(&map_instance).await.unwrap_err().is_invalid_argument());
        // A node whose data is not JSON reads as no instance.
        fw.create(&format!("{base}/api/garbage")).data(b"{not json").await.unwrap();
        assert_eq!(discovery.query_for_instances("api").await.unwrap(), vec![]);
        fw.delete(&format!("{base}/api/garbage")).await.unwrap();
        assert!(children(&fw, &format!("{base}/api")).await.is_empty(), "nothing registered");
        fw.close().await;
    })
    .await;
}

/// A framework through `connect` whose retry policy gives up at once, so that a lost answer
/// or a cut-off connection reaches the registry as the error it is.
async fn framework_without_retries(connect: &str, session_timeout: Duration) -> Framework {
    Framework::builder(connect)
        .session_timeout(session_timeout)
        .retry_policy(RetryNTimes::new(0, Duration::from_millis(50)))
        .start()
        .await
        .expect("starting a framework")
}

/// A dynamic registration that finds a persistent node at its path (left by a static
/// registration of the same id whose process crashed) replaces it with its ephemeral node, as
/// Curator's `registerService` deletes the node there and creates its own.
#[tokio::test]
async fn a_dynamic_registration_replaces_a_persistent_node_left_at_its_path() {
    init_tracing();
    bounded(LIMIT, async {
        let connect = shared_connect().await;
        let fw = framework(&connect, SESSION).await;
        let other = framework(&connect, SESSION).await;
        let base = unique_path("discovery", "left");
        let path = format!("{base}/api/one");
        let left = serializer().serialize(&instance("one", 1).with_service_type(ServiceType::Static)).unwrap();
        other.create(&path).data(&left).parents(Parents::Persistent).await.unwrap();

        let discovery = ServiceDiscovery::new(&fw, &base, serializer()).unwrap();
        let one = instance("one", 8080);
        within(EVENT, "the registration", discovery.register(&one)).await.unwrap();
        let (data, stat) = other.get_data(&path).await.unwrap();
        assert_eq!(stat.ephemeral_owner, fw.snapshot().session_id, "ephemeral, ours");
        assert_eq!(data, serializer().serialize(&one).unwrap());
        discovery.close().await.unwrap();
        assert!(children(&other, &format!("{base}/api")).await.is_empty());
        fw.close().await;
        other.close().await;
    })
    .await;
}

/// A dynamic sequential registration whose create's answer is lost, and whose first search
/// for the node it may have made fails too: the search is made again before any new create,
/// so the registration has one node.
#[tokio::test]
async fn a_lost_dynamic_sequential_create_is_searched_for_until_found() {
    init_tracing();
    bounded(LIMIT, async {
        let connect = shared_connect().await;
        let proxy = CountingProxy::start(&connect).await.unwrap();
        let fw = framework_without_retries(&proxy.connect_string(), SESSION).await;
        let observer = framework(&connect, SESSION).await;
        let base = unique_path("discovery", "lost-search");
        let dir = format!("{base}/api");
        // The service's node first, so that the lost answer is the instance's create's.
        observer.create(&dir).parents(Parents::Persistent).await.unwrap();
        let discovery = ServiceDiscovery::new(&fw, &base, serializer()).unwrap();

        let before = proxy.counts();
        proxy.lose_reply_to("create2");
        // The search's listing answered with `Throttled`: without retries, the search fails.
        proxy.refuse_next("getChildren", -127);
        let mine = instance("seq", 1).with_service_type(ServiceType::DynamicSequential);
        within(EVENT, "the registration", discovery.register(&mine)).await.unwrap();
        let sent = proxy.counts().since(&before);
        assert_eq!(sent.get("getChildren"), 2, "the failed search made again: {sent:?}");
        assert_eq!(sent.get("create2"), 1, "found by its name, not created again: {sent:?}");
        let nodes: Vec<String> = children(&observer, &dir).await;
        assert_eq!(nodes.len(), 1, "exactly one node: {nodes:?}");
        assert_eq!(discovery.registered_path("api", "seq"), Some(format!("{dir}/{}", nodes[0])));

        discovery.close().await.unwrap();
        assert!(children(&observer, &dir).await.is_empty());
        fw.close().await;
        observer.close().await;
    })
    .await;
}

/// Registering an id again while the connection is cut off fails, and the registration stays
/// in place (its node is not deleted), as Curator keeps its entry: it takes updates once the
/// connection is back.
#[tokio::test]
async fn registering_again_through_an_outage_keeps_the_registration() {
    init_tracing();
    bounded(LIMIT, async {
        let servers = FaultyServer::start().await;
        let fw = framework_without_retries(&servers.proxied(), SESSION).await;
        let observer = framework(&servers.direct(), SESSION).await;
        let base = unique_path("discovery", "again");
        let path = format!("{base}/api/one");
        let discovery = ServiceDiscovery::new(&fw, &base, serializer()).unwrap();
        let one = instance("one", 1);
        discovery.register(&one).await.unwrap();

        // Shorter than the session timeout: the session survives, each request fails.
        servers.proxy.set_mode(ProxyMode::BlackHole);
        let again = instance("one", 2);
        let registered = within(EVENT, "registering again", discovery.register(&again)).await;
        assert!(registered.unwrap_err().is_retryable(), "a connection error");
        servers.proxy.set_mode(ProxyMode::Pass);
        servers.proxy.drop_connections();

        assert_eq!(discovery.registered_path("api", "one"), Some(path.clone()), "still registered");
        let updated = instance("one", 3);
        within(EVENT, "an update", async {
            loop {
                match discovery.update(&updated).await {
                    Ok(()) => return,
                    Err(e) if e.is_retryable() => fw.wait_until_connected(EVENT).await.map(drop).unwrap(),
                    Err(e) => panic!("update: {e}"),
                }
            }
        })
        .await;
        eventually(EVENT, "no delete pending", || async {
            match fw.pending_deletes() {
                0 => Ok(()),
                n => Err(n.to_string()),
            }
        })
        .await;
        let (data, stat) = observer.get_data(&path).await.unwrap();
        assert_eq!(data, serializer().serialize(&updated).unwrap());
        assert_eq!(stat.ephemeral_owner, fw.snapshot().session_id);
        discovery.close().await.unwrap();
        fw.close().await;
        observer.close().await;
    })
    .await;
}

/// Registering an id again as another service type makes its node of that type: a dynamic
/// registration's ephemeral node becomes persistent, and back.
#[tokio::test]
async fn registering_again_as_another_type_changes_the_node() {
    init_tracing();
    bounded(LIMIT, async {
        let fw = framework(&shared_connect().await, SESSION).await;
        let base = unique_path("discovery", "retype");
        let path = format!("{base}/api/one");
        let discovery = ServiceDiscovery::new(&fw, &base, serializer()).unwrap();
        let session = fw.snapshot().session_id;
        for (service_type, owner) in
            [(ServiceType::Dynamic, session), (ServiceType::Static, 0), (ServiceType::Dynamic, session)]
        {
            let one = instance("one", 1).with_service_type(service_type);
            within(EVENT, "registering", discovery.register(&one)).await.unwrap();
            eventually(EVENT, "the node of the type", || async {
                match fw.get_data(&path).await {
                    Ok((data, stat))
                        if stat.ephemeral_owner == owner && data == serializer().serialize(&one).unwrap() =>
                    {
                        Ok(())
                    }
                    read => Err(format!("{read:?}")),
                }
            })
            .await;
        }
        discovery.close().await.unwrap();
        assert!(children(&fw, &format!("{base}/api")).await.is_empty());
        fw.close().await;
    })
    .await;
}

/// A service cache whose framework closes keeps the instances it held (its events end with
/// the cache's task); `close()` empties it.
#[tokio::test]
async fn a_service_cache_keeps_its_instances_when_its_framework_closes() {
    init_tracing();
    bounded(LIMIT, async {
        let connect = shared_connect().await;
        let fw = framework(&connect, SESSION).await;
        let base = unique_path("discovery", "framework-closes");
        let discovery: ServiceDiscovery = ServiceDiscovery::new(&fw, &base, JsonInstanceSerializer::new()).unwrap();
        let one = ServiceInstance::builder("api").id("one").port(1).build().unwrap();
        discovery.register(&one).await.unwrap();
        let cache = discovery.service_cache("api").unwrap();
        cache.start().await.unwrap();
        assert_eq!(cache.instances().len(), 1);
        fw.close().await;
        // The cache's task ends with the framework (no event tells when it has): what the
        // cache held is still handed out for a second after the close.
        for _ in 0..20 {
            assert_eq!(cache.instances().len(), 1, "the instances held are kept");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        cache.close().await;
        assert!(cache.instances().is_empty());
        // The base path holds containers only, which the server may have removed already.
        let cleanup = framework(&connect, SESSION).await;
        if let Err(e) = cleanup.delete(&base).recursive().await {
            assert!(e.is_no_node(), "{e:?}");
        }
        cleanup.close().await;
    })
    .await;
}
