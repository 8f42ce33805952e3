//! Service discovery on real servers: registration at `<base>/<name>/<id>` with Curator's
//! JSON, queries field for field, the service cache and provider strategies, a dynamic
//! instance back after its session expired, bad input registering nothing.
#![cfg(feature = "discovery")]

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use common::fixtures::{
    bounded, children, eventually, framework, init_tracing, shared_connect, unique_path, FaultyServer,
};
use common::timing::{EVENT, FAULT_SESSION, LIMIT, SESSION};
use serde_json::{json, Value};
use zk_recipes::discovery::{
    DownInstancePolicy, JsonInstanceSerializer, ProviderStrategy, ServiceDiscovery, ServiceInstance, ServiceProvider,
    ServiceType, UriSpec,
};

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
