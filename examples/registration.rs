//! PersistentNode and GroupMember: a registration that outlives deletes and new sessions, and
//! a group whose members see each other.
//!
//! `cargo run --features testing --example registration [-- --connect host:port]` (without
//! `--connect` it starts an embedded ZooKeeper server).

use std::time::Duration;

use futures::StreamExt;
use zk_recipes::{CreateMode, Framework, GroupMember, MembershipEvent, PersistentNode};

mod common;
use common::{server_or_connect, Error};

#[tokio::main]
async fn main() -> Result<(), Error> {
    let (_server, connect) = server_or_connect().await?;
    let framework = Framework::builder(&connect).session_timeout(Duration::from_secs(10)).start().await?;
    let other = Framework::builder(&connect).session_timeout(Duration::from_secs(10)).start().await?;

    // A protected ephemeral-sequential registration, kept in existence by the framework.
    let node = PersistentNode::builder(&framework, "/examples/registration/instance-")
        .mode(CreateMode::EphemeralSequential)
        .data(b"10.0.0.7:8080".to_vec())
        .start()?;
    if !node.wait_for_initial_create(Duration::from_secs(20)).await? {
        return Err("the node was not created in time".into());
    }
    let path = node.actual_path().expect("created");
    println!("registered as {path}");

    // Someone deletes it: it comes back under the same name. The other client watches for it
    // (the registration may be back before this task looks at `registered()`, which holds the
    // latest state, not each change).
    other.delete(&path).await?;
    let (back, watch) = other.exists(&path).watch().await?;
    if back.is_none() {
        tokio::time::timeout(Duration::from_secs(20), watch.changed()).await??;
    }
    let mut registered = node.registered();
    tokio::time::timeout(Duration::from_secs(20), registered.wait_for(|r| *r)).await??;
    println!("deleted by another client and back as {}", node.actual_path().expect("created"));
    node.set_data(b"10.0.0.7:9090".to_vec()).await?;
    println!("data now {:?}", String::from_utf8_lossy(&other.get_data(&path).await?.0));
    node.close().await?;
    println!("closed: exists = {}", other.exists(&path).await?.is_some());

    // A group of two members.
    let a = GroupMember::new(&framework, "/examples/registration/group", "a", b"member a".to_vec())?;
    let b = GroupMember::new(&other, "/examples/registration/group", "b", b"member b".to_vec())?;
    a.start().await?;
    let mut events = a.events();
    b.start().await?;
    // a's cache tells when b's node arrives.
    tokio::time::timeout(Duration::from_secs(20), async {
        while let Some(event) = events.next().await {
            println!("a sees {event:?}");
            if matches!(&event, MembershipEvent::Joined(id, _) if id == "b") {
                break;
            }
        }
    })
    .await?;
    for (id, payload) in a.current_members() {
        println!("member {id}: {}", String::from_utf8_lossy(&payload));
    }
    a.close().await?;
    b.close().await?;
    framework.close().await;
    other.close().await;
    Ok(())
}
