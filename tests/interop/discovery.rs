//! Service discovery against Curator 5.4's curator-x-discovery (the Java peer,
//! `interop/CuratorPeer.java`): instances Curator registers read in Rust field for field and
//! picked by a provider; instances Rust registers read by Curator's `queryForInstances` with
//! every field equal, also after the Rust session expired.
#![cfg(feature = "discovery")]

use crate::common;

use std::time::Duration;

use common::curator::CuratorPeer;
use common::fixtures::{bounded, framework, init_tracing, unique_path, FaultyServer};
use common::timing::{FAULT_SESSION, INTEROP_EVENT, INTEROP_SESSION, SLOW_LIMIT};
use serde_json::json;
use zk_recipes::discovery::{
    DownInstancePolicy, JsonInstanceSerializer, ProviderStrategy, ServiceDiscovery, ServiceInstance, ServiceProvider,
    ServiceType, UriSpec,
};

/// Curator's reader is `ServiceDiscoveryBuilder.builder(Map.class)`: its payload class.
fn serializer() -> JsonInstanceSerializer {
    JsonInstanceSerializer::new().payload_class("java.util.LinkedHashMap")
}

/// What the peer's `disc_query` prints for an instance.
fn java_line(i: &ServiceInstance) -> String {
    let opt = |p: Option<u16>| p.map_or("null".to_string(), |p| p.to_string());
    let description = i.payload.as_ref().and_then(|p| p.get("description")).and_then(|d| d.as_str()).unwrap_or("null");
    format!(
        "{}|{}|{}|{}|{}|{}|{}|{}|http://{}:{}/api",
        i.id,
        i.address.as_deref().unwrap_or("null"),
        opt(i.port),
        opt(i.ssl_port),
        description,
        i.registration_time_utc,
        i.service_type.as_str(),
        i.enabled,
        i.address.as_deref().unwrap_or(""),
        opt(i.port),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn curator_and_rust_see_each_others_instances_field_for_field() {
    init_tracing();
    bounded(SLOW_LIMIT, async {
        let servers = FaultyServer::start().await;
        let Some(mut java) = CuratorPeer::start(&servers.direct(), INTEROP_SESSION).await.expect("the Curator peer")
        else {
            return;
        };
        let fw = framework(&servers.proxied(), FAULT_SESSION).await;
        let base = unique_path("discovery-interop", "both");
        let discovery: ServiceDiscovery = ServiceDiscovery::new(&fw, &base, serializer()).unwrap();

        // Curator registers; Rust reads every field.
        for (id, port) in [("j1", 7001), ("j2", 7002)] {
            let reply =
                java.command(&format!("disc_register {base} jsvc {id} 10.1.1.1 {port} from-java-{id}")).await.unwrap();
            assert_eq!(reply, format!("disc_register {base} {id} ok"));
        }
        let read = discovery.query_for_instances("jsvc").await.unwrap();
        assert_eq!(read.len(), 2, "{read:?}");
        for (i, (id, port)) in read.iter().zip([("j1", 7001u16), ("j2", 7002)]) {
            assert_eq!(i.name, "jsvc");
            assert_eq!(i.id, id);
            assert_eq!(i.address.as_deref(), Some("10.1.1.1"));
            assert_eq!(i.port, Some(port));
            assert_eq!(i.ssl_port, None);
            assert_eq!(i.payload, Some(json!({"description": format!("from-java-{id}")})));
            assert_eq!(i.service_type, ServiceType::Dynamic);
            assert!(i.enabled);
            assert_eq!(i.uri_spec, Some(UriSpec::new("{scheme}://{address}:{port}/api")));
            assert!(i.registration_time_utc > 1_600_000_000_000);
        }
        let reply = java.command(&format!("disc_query {base} jsvc")).await.unwrap();
        let curator_lines: Vec<&str> = reply.split(' ').skip(3).collect();
        let rust_lines: Vec<String> = read.iter().map(java_line).collect();
        assert_eq!(curator_lines, rust_lines, "Curator's own view equals Rust's");
        let cache = discovery.service_cache("jsvc").unwrap();
        cache.start().await.unwrap();
        let provider = ServiceProvider::new(cache, ProviderStrategy::RoundRobin, DownInstancePolicy::default());
        let picks: Vec<String> = (0..4).map(|_| provider.instance().unwrap().id).collect();
        assert_eq!(picks, ["j1", "j2", "j1", "j2"]);
        provider.cache().close().await;

        // Rust registers; Curator reads every field.
        let mine: Vec<ServiceInstance> = [("r1", 8001), ("r2", 8002)]
            .into_iter()
            .map(|(id, port)| {
                ServiceInstance::new("rsvc")
                    .unwrap()
                    .with_id(id)
                    .unwrap()
                    .with_address("10.2.2.2")
                    .with_port(port)
                    .unwrap()
                    .with_payload(json!({"description": format!("from-rust-{id}")}))
                    .with_uri_spec(UriSpec::new("{scheme}://{address}:{port}/api"))
            })
            .collect();
        for i in &mine {
            discovery.register(i).await.unwrap();
        }
        let want = format!("disc_query {base} 2 {}", mine.iter().map(java_line).collect::<Vec<_>>().join(" "));
        assert_eq!(java.command(&format!("disc_query {base} rsvc")).await.unwrap(), want);

        // The Rust session expires: Curator sees the instances back, every field equal.
        servers.expire(&fw, FAULT_SESSION * 3).await;
        let deadline = tokio::time::Instant::now() + FAULT_SESSION * 3 + INTEROP_EVENT;
        loop {
            let got = java.command(&format!("disc_query {base} rsvc")).await.unwrap();
            if got == want {
                break;
            }
            assert!(tokio::time::Instant::now() < deadline, "not back in Curator's view: {got}");
            // Polling the Java side's view (it has no event to await here).
            tokio::time::sleep(Duration::from_millis(100)).await;
        }

        discovery.close().await.unwrap();
        assert_eq!(java.command(&format!("disc_query {base} rsvc")).await.unwrap(), format!("disc_query {base} 0"));
        java.command(&format!("disc_close {base}")).await.unwrap();
        java.quit().await.unwrap();
        fw.close().await;
    })
    .await;
}

/// Payloads that are not JSON objects, both ways: Jackson writes Curator's `String`,
/// `Integer`, `Double` and `Boolean` payloads bare and every other one (a `Long`, a list)
/// as `["<class>", value]`; a serializer given that class reads and writes the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn payloads_that_are_not_objects_cross_both_ways() {
    init_tracing();
    bounded(SLOW_LIMIT, async {
        let servers = FaultyServer::start().await;
        let Some(mut java) = CuratorPeer::start(&servers.direct(), INTEROP_SESSION).await.expect("the Curator peer")
        else {
            return;
        };
        let fw = framework(&servers.proxied(), FAULT_SESSION).await;
        let base = unique_path("discovery-interop", "payloads");
        for (kind, value) in [
            ("long", "5"),
            ("int", "6"),
            ("double", "2.5"),
            ("string", "text"),
            ("bool", "true"),
            ("list", "a,b"),
            ("map", "x"),
        ] {
            let reply =
                java.command(&format!("disc_register_payload {base} p{kind} j-{kind} {kind} {value}")).await.unwrap();
            assert_eq!(reply, format!("disc_register_payload {base} j-{kind} ok"));
        }

        /// Reads Curator's instance of `kind` as a `T`, registers `mine`, and returns what
        /// Curator reads of both.
        async fn both_ways<T>(
            fw: &zk_recipes::Framework,
            java: &mut CuratorPeer,
            base: &str,
            kind: &str,
            class: &str,
            mine: T,
        ) -> (Option<T>, String)
        where
            T: serde::Serialize + serde::de::DeserializeOwned + Clone + Send + Sync + 'static,
        {
            let serializer = JsonInstanceSerializer::new().payload_class(class);
            let discovery: ServiceDiscovery<T> = ServiceDiscovery::new(fw, base, serializer).unwrap();
            let name = format!("p{kind}");
            let read =
                discovery.query_for_instance(&name, &format!("j-{kind}")).await.unwrap().expect("Curator's instance");
            let instance = ServiceInstance::builder(&name).id(&format!("r-{kind}")).payload(mine).build().unwrap();
            discovery.register(&instance).await.unwrap();
            let seen = java.command(&format!("disc_payloads {base} {name}")).await.unwrap();
            (read.payload, seen)
        }

        let (read, seen) = both_ways(&fw, &mut java, &base, "long", "java.lang.Long", 7i64).await;
        assert_eq!(read, Some(5));
        assert_eq!(seen, format!("disc_payloads {base} 2 j-long|java.lang.Long|5 r-long|java.lang.Long|7"));
        let (read, seen) = both_ways(&fw, &mut java, &base, "int", "java.lang.Integer", 8i32).await;
        assert_eq!(read, Some(6));
        assert_eq!(seen, format!("disc_payloads {base} 2 j-int|java.lang.Integer|6 r-int|java.lang.Integer|8"));
        let (read, seen) = both_ways(&fw, &mut java, &base, "double", "java.lang.Double", 3.5f64).await;
        assert_eq!(read, Some(2.5));
        assert_eq!(seen, format!("disc_payloads {base} 2 j-double|java.lang.Double|2.5 r-double|java.lang.Double|3.5"));
        let (read, seen) = both_ways(&fw, &mut java, &base, "string", "java.lang.String", "hi".to_owned()).await;
        assert_eq!(read.as_deref(), Some("text"));
        assert_eq!(seen, format!("disc_payloads {base} 2 j-string|java.lang.String|text r-string|java.lang.String|hi"));
        let (read, seen) = both_ways(&fw, &mut java, &base, "bool", "java.lang.Boolean", false).await;
        assert_eq!(read, Some(true));
        assert_eq!(
            seen,
            format!("disc_payloads {base} 2 j-bool|java.lang.Boolean|true r-bool|java.lang.Boolean|false")
        );
        let list = vec!["c".to_owned(), "d".to_owned()];
        let (read, seen) = both_ways(&fw, &mut java, &base, "list", "java.util.ArrayList", list).await;
        assert_eq!(read, Some(vec!["a".to_owned(), "b".to_owned()]));
        assert_eq!(
            seen,
            format!("disc_payloads {base} 2 j-list|java.util.ArrayList|[a, b] r-list|java.util.ArrayList|[c, d]")
        );
        let (read, seen) = both_ways(&fw, &mut java, &base, "map", "java.util.LinkedHashMap", json!({"v": "y"})).await;
        assert_eq!(read, Some(json!({"v": "x"})));
        assert_eq!(
            seen,
            format!(
                "disc_payloads {base} 2 j-map|java.util.LinkedHashMap|{{v=x}} r-map|java.util.LinkedHashMap|{{v=y}}"
            )
        );

        java.command(&format!("disc_close {base}")).await.unwrap();
        java.quit().await.unwrap();
        fw.close().await;
    })
    .await;
}
