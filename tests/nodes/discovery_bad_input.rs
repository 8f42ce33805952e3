//! Service discovery refusing bad input with typed errors and registering nothing: names and
//! ids that are not one node name (with `/`, empty, `.`, `..`) on every entry point, ports out
//! of range (set, and read from a foreign writer's JSON), data that is not an instance's JSON,
//! and base paths that would leave the framework's namespace or use reserved nodes.
#![cfg(feature = "discovery")]

use crate::common;

use common::fixtures::{bounded, children, framework, init_tracing, shared_connect, unique_path};
use common::timing::{LIMIT, SESSION};
use serde_json::{json, Value};
use zk_recipes::discovery::{JsonInstanceSerializer, ServiceDiscovery, ServiceInstance, ServiceType};
use zk_recipes::{Error, Framework};

fn serializer() -> JsonInstanceSerializer {
    JsonInstanceSerializer::new().payload_class("java.util.LinkedHashMap")
}

fn instance() -> ServiceInstance {
    ServiceInstance::new("api").unwrap().with_id("one").unwrap().with_address("10.0.0.1").with_port(80).unwrap()
}

/// Names and ids that are not one node name.
const BAD_NAMES: [&str; 6] = ["", "a/b", "/a", "a/", ".", ".."];

#[tokio::test]
async fn names_and_ids_that_are_not_one_node_name_are_refused_everywhere() {
    init_tracing();
    bounded(LIMIT, async {
        let fw = framework(&shared_connect().await, SESSION).await;
        let base = unique_path("discovery-bad", "names");
        let discovery: ServiceDiscovery = ServiceDiscovery::new(&fw, &base, serializer()).unwrap();
        for bad in BAD_NAMES {
            assert!(ServiceInstance::<Value>::new(bad).unwrap_err().is_invalid_argument(), "name {bad:?}");
            assert!(instance().with_id(bad).unwrap_err().is_invalid_argument(), "id {bad:?}");
            for service_type in [ServiceType::Dynamic, ServiceType::DynamicSequential, ServiceType::Static] {
                let mut by_name = instance().with_service_type(service_type);
                by_name.name = bad.to_owned();
                assert!(discovery.register(&by_name).await.unwrap_err().is_invalid_argument(), "name {bad:?}");
                assert!(discovery.update(&by_name).await.unwrap_err().is_invalid_argument(), "name {bad:?}");
                let mut by_id = instance().with_service_type(service_type);
                by_id.id = bad.to_owned();
                assert!(discovery.register(&by_id).await.unwrap_err().is_invalid_argument(), "id {bad:?}");
                assert!(discovery.update(&by_id).await.unwrap_err().is_invalid_argument(), "id {bad:?}");
            }
            assert!(discovery.query_for_instances(bad).await.unwrap_err().is_invalid_argument(), "{bad:?}");
            assert!(discovery.query_for_instance(bad, "one").await.unwrap_err().is_invalid_argument(), "{bad:?}");
            assert!(discovery.query_for_instance("api", bad).await.unwrap_err().is_invalid_argument(), "{bad:?}");
            assert!(discovery.service_cache(bad).unwrap_err().is_invalid_argument(), "{bad:?}");
        }
        // An update of an instance never registered here is refused, not written.
        assert!(discovery.update(&instance()).await.unwrap_err().is_invalid_argument());
        assert!(fw.exists(&base).await.unwrap().is_none(), "nothing registered: {:?}", children(&fw, &base).await);
        fw.close().await;
    })
    .await;
}

/// A payload over the request size is refused at `register`, and a registration of the same
/// instance made before stays (before, the earlier one was removed first, then the new one
/// refused, leaving the instance unregistered).
#[tokio::test]
async fn a_payload_over_the_request_size_is_refused_and_keeps_the_registration() {
    init_tracing();
    bounded(LIMIT, async {
        let fw = framework(&shared_connect().await, SESSION).await;
        let base = unique_path("discovery-bad", "too-large");
        let discovery: ServiceDiscovery = ServiceDiscovery::new(&fw, &base, serializer()).unwrap();
        discovery.register(&instance()).await.unwrap();
        let huge = instance().with_payload(json!({"blob": "x".repeat(2 << 20)}));
        let refused = discovery.register(&huge).await;
        assert!(matches!(refused, Err(Error::TooLarge { .. })), "{refused:?}");
        let kept = discovery.query_for_instance("api", "one").await.unwrap().expect("still registered");
        assert_eq!(kept.payload, None);
        discovery.close().await.unwrap();
        fw.close().await;
    })
    .await;
}

#[tokio::test]
async fn ports_out_of_range_are_refused_set_and_read() {
    init_tracing();
    bounded(LIMIT, async {
        let fw = framework(&shared_connect().await, SESSION).await;
        let base = unique_path("discovery-bad", "ports");
        for port in [65_536, 100_000, u32::MAX] {
            assert!(instance().with_port(port).unwrap_err().is_invalid_argument(), "{port}");
            assert!(instance().with_ssl_port(port).unwrap_err().is_invalid_argument(), "{port}");
        }
        // A foreign writer's JSON with a port that is not one: a typed error from the
        // serializer, no instance from a query.
        let s = serializer();
        for field in ["port", "sslPort"] {
            for bad in [json!(65_536), json!(-1), json!("80"), json!(8.5)] {
                let mut written: Value = serde_json::from_slice(&s.serialize(&instance()).unwrap()).unwrap();
                written[field] = bad.clone();
                let bytes = written.to_string().into_bytes();
                let read = s.deserialize::<Value>(&bytes);
                assert!(matches!(read, Err(Error::InvalidArgument { .. })), "{field}={bad}: {read:?}");
                fw.create(&format!("{base}/api/foreign")).data(&bytes).await.unwrap();
                let discovery: ServiceDiscovery = ServiceDiscovery::new(&fw, &base, serializer()).unwrap();
                assert_eq!(discovery.query_for_instances("api").await.unwrap(), vec![], "{field}={bad}");
                assert_eq!(discovery.query_for_instance("api", "foreign").await.unwrap(), None);
                fw.delete(&format!("{base}/api/foreign")).await.unwrap();
            }
        }
        // The base and the service node are containers, reaped once empty: they may be gone.
        match fw.delete(&base).recursive().await {
            Ok(()) => {}
            Err(e) if e.is_no_node() => {}
            Err(e) => panic!("cleaning up {base}: {e:?}"),
        }
        fw.close().await;
    })
    .await;
}

#[tokio::test]
async fn data_that_is_not_an_instances_json_is_a_typed_error() {
    init_tracing();
    let s = serializer();
    for bad in [
        &b""[..],
        b"{not json",
        b"{\"name\":\"api\"",
        b"[1,2,3]",
        b"\"text\"",
        b"null",
        b"\xff\xfe",
        b"{\"name\":\"api\",\"serviceType\":\"SOMETIMES\"}",
        b"{\"name\":\"api\",\"uriSpec\":{\"parts\":\"x\"}}",
    ] {
        let read = s.deserialize::<Value>(bad);
        assert!(matches!(read, Err(Error::InvalidArgument { .. })), "{:?}: {read:?}", String::from_utf8_lossy(bad));
    }
    // A payload the reader's type cannot hold.
    let written = s.serialize(&instance().with_payload(json!({"description": "x"}))).unwrap();
    let read = s.deserialize::<u32>(&written);
    assert!(matches!(read, Err(Error::InvalidArgument { name: "payload", .. })), "{read:?}");
}

/// Paths that leave the namespace (`.`/`..` segments), the root, reserved or malformed paths.
const BAD_BASES: [&str; 9] = ["", "relative", "/", "/a/../b", "/..", "/a/./b", "/a//b", "/a/", "/zookeeper/x"];

#[tokio::test]
async fn base_paths_outside_the_namespace_are_refused() {
    init_tracing();
    bounded(LIMIT, async {
        let connect = shared_connect().await;
        let namespace = unique_path("discovery-bad", "ns");
        let ns = Framework::builder(&connect).namespace(&namespace).session_timeout(SESSION).start().await.unwrap();
        let plain = framework(&connect, SESSION).await;
        for fw in [&ns, &plain] {
            for bad in BAD_BASES {
                let refused = ServiceDiscovery::<Value>::new(fw, bad, serializer()).unwrap_err();
                assert!(matches!(refused, Error::InvalidPath { .. }), "{bad:?}: {refused:?}");
            }
        }
        // A good base in the namespace stays in it.
        let discovery: ServiceDiscovery = ServiceDiscovery::new(&ns, "/services", serializer()).unwrap();
        discovery.register(&instance()).await.unwrap();
        assert_eq!(children(&plain, &format!("{namespace}/services/api")).await, ["one"]);
        assert!(plain.exists("/services/api/one").await.unwrap().is_none(), "not outside the namespace");
        discovery.close().await.unwrap();
        assert!(children(&plain, &format!("{namespace}/services/api")).await.is_empty());
        ns.close().await;
        plain.delete(&namespace).recursive().await.ok();
        plain.close().await;
    })
    .await;
}
