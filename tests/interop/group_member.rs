//! GroupMember against Curator 5.4's `GroupMember` (the Java peer): a Rust member and a
//! Curator member of one group see the same membership, payloads included, and both see the
//! other leave.

use crate::common;

use std::time::Duration;

use common::curator::CuratorPeer;
use common::fixtures::{bounded, framework, init_tracing, shared_connect, unique_path};
use common::timing::{INTEROP_EVENT, INTEROP_SESSION, SLOW_LIMIT};
use zk_recipes::GroupMember;

/// Polls the Java member's view until it is `want` (the peer has no event to await).
async fn java_members_become(java: &mut CuratorPeer, want: &str) {
    let deadline = tokio::time::Instant::now() + INTEROP_EVENT;
    loop {
        let got = java.command("group_members J").await.unwrap();
        if got == want {
            return;
        }
        assert!(tokio::time::Instant::now() < deadline, "Curator's members: {got}, want {want}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Polls the Rust member's view until it has exactly `want`.
async fn rust_members_become(member: &GroupMember, want: &[(&str, &str)]) {
    let want: std::collections::BTreeMap<String, Vec<u8>> =
        want.iter().map(|(k, v)| (k.to_string(), v.as_bytes().to_vec())).collect();
    let deadline = tokio::time::Instant::now() + INTEROP_EVENT;
    loop {
        let got = member.current_members();
        if got == want {
            return;
        }
        assert!(tokio::time::Instant::now() < deadline, "Rust's members: {got:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rust_and_curator_members_see_the_same_group() {
    init_tracing();
    bounded(SLOW_LIMIT, async {
        let connect = shared_connect().await;
        let Some(mut java) = CuratorPeer::start(&connect, INTEROP_SESSION).await.expect("the Curator peer") else {
            return;
        };
        let fw = framework(&connect, INTEROP_SESSION).await;
        let group = unique_path("group-interop", "two");
        let rust = GroupMember::new(&fw, &group, "rust", b"from-rust".to_vec()).unwrap();
        rust.start().await.unwrap();
        assert!(rust.wait_for_initial_create(INTEROP_EVENT).await.unwrap());
        assert_eq!(java.command(&format!("group J {group} java from-java")).await.unwrap(), "group J ok");

        java_members_become(&mut java, "group_members J 2 java=from-java rust=from-rust").await;
        rust_members_become(&rust, &[("java", "from-java"), ("rust", "from-rust")]).await;

        rust.set_this_data(b"changed".to_vec()).await.unwrap();
        java_members_become(&mut java, "group_members J 2 java=from-java rust=changed").await;

        assert_eq!(java.command("group_close J").await.unwrap(), "group_close J ok");
        rust_members_become(&rust, &[("rust", "changed")]).await;
        rust.close().await.unwrap();
        java.quit().await.unwrap();
        fw.close().await;
    })
    .await;
}
