//! Rust-registered instances as Curator 5.4's own readers see them (the Java peer,
//! `interop/CuratorPeer.java`): `queryForInstances`, a `ServiceCache` and a `ServiceProvider`
//! with each strategy, every field equal, through an update and an unregister; and
//! `DYNAMIC_SEQUENTIAL` instances stored as curator-x-discovery stores them (`<id><sequence>`),
//! back under the same name after a new session, never two nodes for one registration.
#![cfg(feature = "discovery")]

use crate::common;

use std::time::Duration;

use common::curator::CuratorPeer;
use common::fixtures::{bounded, children, eventually, framework, init_tracing, unique_path, FaultyServer};
use common::timing::{EVENT, FAULT_SESSION, INTEROP_EVENT, INTEROP_SESSION, SLOW_LIMIT};
use serde_json::json;
use zk_recipes::discovery::{JsonInstanceSerializer, ServiceDiscovery, ServiceInstance, ServiceType, UriSpec};
use zk_recipes::testing::CountingProxy;
use zk_recipes::Framework;

/// Curator's reader is `ServiceDiscoveryBuilder.builder(Map.class)`: its payload class.
fn serializer() -> JsonInstanceSerializer {
    JsonInstanceSerializer::new().payload_class("java.util.LinkedHashMap")
}

/// What the peer prints for an instance (`disc_query`, `disc_cache`, `disc_provider`).
fn java_line(i: &ServiceInstance) -> String {
    let opt = |p: Option<u16>| p.map_or("null".to_string(), |p| p.to_string());
    let description = i.payload.as_ref().and_then(|p| p.get("description")).and_then(|d| d.as_str()).unwrap_or("null");
    let scheme = if i.ssl_port.is_some() { "https" } else { "http" };
    format!(
        "{}|{}|{}|{}|{}|{}|{}|{}|{scheme}://{}:{}/api",
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

/// The peer's `<n> <line>...` for these instances (sorted by line, as the peer sorts).
fn java_lines(instances: &[&ServiceInstance]) -> String {
    let mut lines: Vec<String> = instances.iter().map(|i| java_line(i)).collect();
    lines.sort();
    let mut out = lines.len().to_string();
    for l in lines {
        out.push(' ');
        out.push_str(&l);
    }
    out
}

fn instance(id: &str, port: u32, service_type: ServiceType) -> ServiceInstance {
    ServiceInstance::new("rsvc")
        .unwrap()
        .with_id(id)
        .unwrap()
        .with_address("10.3.3.3")
        .with_port(port)
        .unwrap()
        .with_payload(json!({"description": format!("from-rust-{id}")}))
        .with_service_type(service_type)
        .with_uri_spec(UriSpec::new("{scheme}://{address}:{port}/api"))
}

/// Asks the peer until its answer to `command` is `want` (the Java side's cache and provider
/// follow the server in their own time, with no event this side can await).
async fn java_sees(java: &mut CuratorPeer, command: &str, want: &str) {
    let deadline = tokio::time::Instant::now() + INTEROP_EVENT;
    loop {
        let got = java.command(command).await.unwrap();
        if got == want {
            return;
        }
        assert!(tokio::time::Instant::now() < deadline, "{command}: {got}\nwant {want}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The children of `dir` named `<id>` + 10 digits.
async fn sequential_nodes(fw: &Framework, dir: &str, id: &str) -> Vec<String> {
    children(fw, dir)
        .await
        .into_iter()
        .filter(|n| n.strip_prefix(id).is_some_and(|s| s.len() == 10 && s.bytes().all(|b| b.is_ascii_digit())))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn curators_query_cache_and_provider_read_rust_instances_field_for_field() {
    init_tracing();
    bounded(SLOW_LIMIT, async {
        let servers = FaultyServer::start().await;
        let Some(mut java) = CuratorPeer::start(&servers.direct(), INTEROP_SESSION).await.expect("the Curator peer")
        else {
            return;
        };
        let fw = framework(&servers.direct(), INTEROP_SESSION).await;
        let base = unique_path("discovery-views", "readers");
        let discovery: ServiceDiscovery = ServiceDiscovery::new(&fw, &base, serializer()).unwrap();
        let dynamic = instance("r1", 8001, ServiceType::Dynamic).with_ssl_port(8443).unwrap();
        let fixed = instance("r2", 8002, ServiceType::Static);
        let sequential = instance("r3", 8003, ServiceType::DynamicSequential);
        for i in [&dynamic, &fixed, &sequential] {
            discovery.register(i).await.unwrap();
        }
        let dir = format!("{base}/rsvc");
        let seq = sequential_nodes(&fw, &dir, "r3").await;
        assert_eq!(seq.len(), 1, "one node <id><sequence>: {:?}", children(&fw, &dir).await);
        assert_eq!(discovery.registered_path("rsvc", "r3"), Some(format!("{dir}/{}", seq[0])));

        let all = java_lines(&[&dynamic, &fixed, &sequential]);
        assert_eq!(java.command(&format!("disc_query {base} rsvc")).await.unwrap(), format!("disc_query {base} {all}"));
        java_sees(&mut java, &format!("disc_cache {base} rsvc"), &format!("disc_cache {base} {all}")).await;

        // Each strategy over the three: round robin visits each in turn, sticky keeps one,
        // random picks among them.
        let picked = |reply: &str| -> Vec<String> {
            let (lines, picks) = reply.rsplit_once(" picked ").expect("a provider reply");
            assert_eq!(lines, format!("disc_provider {base} {all}"), "the provider's instances");
            picks.split(',').map(str::to_owned).collect()
        };
        let provider = |strategy: &str| format!("disc_provider {base} rsvc {strategy} 6");
        // The provider's cache starts with the provider: asked until it has all three.
        java_sees(&mut java, &format!("disc_cache {base} rsvc"), &format!("disc_cache {base} {all}")).await;
        let deadline = tokio::time::Instant::now() + INTEROP_EVENT;
        let round = loop {
            let reply = java.command(&provider("round_robin")).await.unwrap();
            if reply.starts_with(&format!("disc_provider {base} 3 ")) {
                break picked(&reply);
            }
            assert!(tokio::time::Instant::now() < deadline, "the provider's instances: {reply}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        let mut counted = round.clone();
        counted.sort();
        assert_eq!(counted, ["r1", "r1", "r2", "r2", "r3", "r3"], "round robin: {round:?}");
        assert_eq!(round[..3], round[3..], "round robin repeats its order: {round:?}");
        let sticky = picked(&java.command(&provider("sticky")).await.unwrap());
        assert!(sticky.iter().all(|id| *id == sticky[0]), "sticky: {sticky:?}");
        let random = picked(&java.command(&provider("random")).await.unwrap());
        assert!(random.iter().all(|id| ["r1", "r2", "r3"].contains(&id.as_str())), "random: {random:?}");

        // An update reaches every reader; so does an unregister of the sequential instance.
        let moved = sequential.clone().with_port(9003).unwrap();
        discovery.update(&moved).await.unwrap();
        let all = java_lines(&[&dynamic, &fixed, &moved]);
        assert_eq!(java.command(&format!("disc_query {base} rsvc")).await.unwrap(), format!("disc_query {base} {all}"));
        java_sees(&mut java, &format!("disc_cache {base} rsvc"), &format!("disc_cache {base} {all}")).await;
        discovery.unregister("rsvc", "r3").await.unwrap();
        assert!(sequential_nodes(&fw, &dir, "r3").await.is_empty(), "unregister deleted the sequential node");
        let two = java_lines(&[&dynamic, &fixed]);
        java_sees(&mut java, &format!("disc_cache {base} rsvc"), &format!("disc_cache {base} {two}")).await;
        let reply = java.command(&provider("round_robin")).await.unwrap();
        assert!(reply.starts_with(&format!("disc_provider {base} {two} picked ")), "{reply}");

        discovery.close().await.unwrap();
        java_sees(&mut java, &format!("disc_cache {base} rsvc"), &format!("disc_cache {base} 0")).await;
        java.command(&format!("disc_close {base}")).await.unwrap();
        java.quit().await.unwrap();
        fw.close().await;
    })
    .await;
}

#[tokio::test]
async fn a_dynamic_sequential_instance_is_back_under_its_name_after_a_new_session() {
    init_tracing();
    bounded(SLOW_LIMIT, async {
        let servers = FaultyServer::start().await;
        let fw = framework(&servers.proxied(), FAULT_SESSION).await;
        let observer = framework(&servers.direct(), FAULT_SESSION).await;
        let base = unique_path("discovery-views", "sequential");
        let discovery: ServiceDiscovery = ServiceDiscovery::new(&fw, &base, serializer()).unwrap();
        let mine = instance("s1", 8101, ServiceType::DynamicSequential);
        discovery.register(&mine).await.unwrap();
        let dir = format!("{base}/rsvc");
        let first = sequential_nodes(&observer, &dir, "s1").await;
        assert_eq!(first.len(), 1, "{:?}", children(&observer, &dir).await);
        let read = discovery.query_for_instances("rsvc").await.unwrap();
        assert_eq!(read, vec![mine.clone()], "read back field for field");
        assert_eq!(discovery.query_for_instance("rsvc", "s1").await.unwrap(), None, "looked up by node name");

        for round in 0..2 {
            let new_session = servers.expire(&fw, FAULT_SESSION * 3).await;
            eventually(FAULT_SESSION * 3 + EVENT, "back under its name, once", || async {
                let now = sequential_nodes(&observer, &dir, "s1").await;
                let owner = match now.first() {
                    Some(name) => observer.exists(&format!("{dir}/{name}")).await.unwrap().map(|s| s.ephemeral_owner),
                    None => None,
                };
                if now == first && owner == Some(new_session.session_id) {
                    Ok(())
                } else {
                    Err(format!("round {round}: {now:?} owned by {owner:?}"))
                }
            })
            .await;
            assert_eq!(children(&observer, &dir).await, first, "no other node");
            assert_eq!(discovery.query_for_instances("rsvc").await.unwrap(), vec![mine.clone()]);
        }
        discovery.close().await.unwrap();
        assert!(children(&observer, &dir).await.is_empty());
        fw.close().await;
        observer.close().await;
    })
    .await;
}

#[tokio::test]
async fn a_dynamic_sequential_registration_whose_reply_is_lost_makes_one_node() {
    init_tracing();
    bounded(SLOW_LIMIT, async {
        let server = zk_recipes::testing::shared_server().await.unwrap();
        let proxy = CountingProxy::start(&server.connect_string()).await.unwrap();
        let fw = framework(&proxy.connect_string(), FAULT_SESSION).await;
        let observer = framework(&server.connect_string(), FAULT_SESSION).await;
        let base = unique_path("discovery-views", "lost-reply");
        let discovery: ServiceDiscovery = ServiceDiscovery::new(&fw, &base, serializer()).unwrap();
        // The service's node first, so that the lost reply is the instance's create.
        discovery.register(&instance("plain", 8200, ServiceType::Dynamic)).await.unwrap();
        let dir = format!("{base}/rsvc");

        let before = proxy.counts();
        proxy.lose_reply_to("create2");
        let mine = instance("l1", 8201, ServiceType::DynamicSequential);
        discovery.register(&mine).await.unwrap();
        let sent = proxy.counts().since(&before);
        assert_eq!(sent.get("create2"), 1, "found by its name, not sent again: {sent:?}");
        let nodes = sequential_nodes(&observer, &dir, "l1").await;
        assert_eq!(nodes.len(), 1, "exactly one node: {:?}", children(&observer, &dir).await);
        assert_eq!(discovery.registered_path("rsvc", "l1"), Some(format!("{dir}/{}", nodes[0])));
        assert_eq!(discovery.query_for_instances("rsvc").await.unwrap().len(), 2);

        discovery.close().await.unwrap();
        assert!(children(&observer, &dir).await.is_empty());
        fw.close().await;
        observer.close().await;
    })
    .await;
}
