//! `GroupMember` and discovery's `ServiceCache` on a server without persistent watches (a 3.8
//! server whose watch manager is `WatchManagerOptimized`, which refuses `addWatch` as
//! ZooKeeper 3.5 does): their caches run on one-shot watches, so members see each other join,
//! change and leave (also after a member's session expired), and a service cache sees
//! registrations, updates and unregistrations.

use crate::common;

use std::collections::BTreeMap;

use common::fixtures::{bounded, eventually, framework, init_tracing, server_without_persistent_watches, unique_path};
use common::timing::{EVENT, FAULT_SESSION, LIMIT, SESSION};
use futures::StreamExt;
use zk_recipes::testing::{self, FaultProxy};
use zk_recipes::{GroupMember, MembershipEvent};

fn want(pairs: &[(&str, &[u8])]) -> BTreeMap<String, Vec<u8>> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_vec())).collect()
}

async fn members_become(member: &GroupMember, expected: &BTreeMap<String, Vec<u8>>) {
    eventually(EVENT, "the members", || async {
        let got = member.current_members();
        if got == *expected {
            Ok(())
        } else {
            Err(format!("{got:?}"))
        }
    })
    .await;
}

async fn next_event(events: &mut zk_recipes::MembershipEvents, wanted: &MembershipEvent) {
    let found = tokio::time::timeout(EVENT, async {
        while let Some(event) = events.next().await {
            if event == *wanted {
                return true;
            }
        }
        false
    })
    .await;
    assert_eq!(found, Ok(true), "no {wanted:?} within {EVENT:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn group_members_see_joins_changes_and_leaves_with_one_shot_watches() {
    init_tracing();
    bounded(LIMIT * 2, async {
        let server = server_without_persistent_watches().await;
        let proxy = FaultProxy::start(&server.connect_string()).await.expect("a proxy");
        let fw_a = framework(&server.connect_string(), SESSION).await;
        // b's session is the one to expire: through the proxy, with a short timeout.
        let fw_b = framework(&proxy.connect_string(), FAULT_SESSION).await;
        let group = unique_path("group", "oneshot");
        let a = GroupMember::new(&fw_a, &group, "a", b"pa".to_vec()).unwrap();
        a.start().await.unwrap();
        assert!(a.wait_for_initial_create(EVENT).await.unwrap());
        assert!(!fw_a.server_info().await.unwrap().persistent_watches, "the server refused addWatch");
        let mut events = a.events();
        let b = GroupMember::new(&fw_b, &group, "b", b"pb".to_vec()).unwrap();
        b.start().await.unwrap();
        assert!(b.wait_for_initial_create(EVENT).await.unwrap());
        next_event(&mut events, &MembershipEvent::Joined("b".into(), b"pb".to_vec())).await;
        members_become(&a, &want(&[("a", b"pa"), ("b", b"pb")])).await;
        members_become(&b, &want(&[("a", b"pa"), ("b", b"pb")])).await;

        a.set_this_data(b"pa2".to_vec()).await.unwrap();
        members_become(&b, &want(&[("a", b"pa2"), ("b", b"pb")])).await;

        // b's session expires: a sees b leave and come back (its node is ephemeral), and b
        // (on its new session, its watches set again) still sees a's changes.
        let session = fw_b.zk_client().unwrap().session().clone();
        testing::expire_session(&proxy, &server.connect_string(), session).await.expect("expiring");
        next_event(&mut events, &MembershipEvent::Left("b".into())).await;
        next_event(&mut events, &MembershipEvent::Joined("b".into(), b"pb".to_vec())).await;
        assert!(fw_b.snapshot().epoch >= 2, "b has a new session");
        a.set_this_data(b"pa3".to_vec()).await.unwrap();
        members_become(&b, &want(&[("a", b"pa3"), ("b", b"pb")])).await;

        b.close().await.unwrap();
        next_event(&mut events, &MembershipEvent::Left("b".into())).await;
        members_become(&a, &want(&[("a", b"pa3")])).await;
        a.close().await.unwrap();
        fw_a.close().await;
        fw_b.close().await;
    })
    .await;
}

#[cfg(feature = "discovery")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_cache_sees_registrations_with_one_shot_watches() {
    use std::sync::Arc;
    use zk_recipes::discovery::{JsonInstanceSerializer, ServiceDiscovery, ServiceInstance};

    init_tracing();
    bounded(LIMIT, async {
        let server = server_without_persistent_watches().await;
        let fw = framework(&server.connect_string(), SESSION).await;
        let reader_fw = framework(&server.connect_string(), SESSION).await;
        let base = unique_path("discovery", "oneshot");
        let discovery = ServiceDiscovery::new(&fw, &base, JsonInstanceSerializer::new()).unwrap();
        let reader: ServiceDiscovery = ServiceDiscovery::new(&reader_fw, &base, JsonInstanceSerializer::new()).unwrap();
        let instance = |id: &str, port: u32| {
            ServiceInstance::new("api").unwrap().with_id(id).unwrap().with_address("10.0.0.7").with_port(port).unwrap()
        };
        let one = instance("one", 8080);
        discovery.register(&one).await.unwrap();

        let cache = reader.service_cache("api").unwrap();
        cache.start().await.unwrap();
        assert!(!reader_fw.server_info().await.unwrap().persistent_watches, "the server refused addWatch");
        assert_eq!(*cache.instances(), [Arc::new(one.clone())]);

        let ports = |cache: &zk_recipes::discovery::ServiceCache| -> Vec<(String, Option<u16>)> {
            cache.instances().iter().map(|i| (i.id.clone(), i.port)).collect()
        };
        let two = instance("two", 8081);
        discovery.register(&two).await.unwrap();
        eventually(EVENT, "the registration in the cache", || async {
            let got = ports(&cache);
            if got == [("one".to_owned(), Some(8080)), ("two".to_owned(), Some(8081))] {
                Ok(())
            } else {
                Err(format!("{got:?}"))
            }
        })
        .await;
        discovery.update(&one.clone().with_port(9090).unwrap()).await.unwrap();
        discovery.unregister("api", "two").await.unwrap();
        eventually(EVENT, "the update and the unregistration in the cache", || async {
            let got = ports(&cache);
            if got == [("one".to_owned(), Some(9090))] {
                Ok(())
            } else {
                Err(format!("{got:?}"))
            }
        })
        .await;
        cache.close().await;
        discovery.close().await.unwrap();
        reader.close().await.unwrap();
        fw.close().await;
        reader_fw.close().await;
    })
    .await;
}
