//! CuratorCache: keep a local copy of a subtree, react to its changes, read it without a
//! request.
//!
//! `cargo run --features testing --example cache [-- --connect host:port]` (without
//! `--connect` it starts an embedded ZooKeeper server).

use std::time::Duration;

use futures::StreamExt;
use zk_recipes::{CacheEvent, CacheEventStream, CuratorCache, Framework};

mod common;
use common::{server_or_connect, Error};

#[tokio::main]
async fn main() -> Result<(), Error> {
    let (_server, connect) = server_or_connect().await?;
    let framework = Framework::builder(&connect).session_timeout(Duration::from_secs(10)).start().await?;
    let root = "/examples/cache";
    // Start from an empty subtree (an earlier run may have left nodes behind).
    for service in framework.get_children(root).await.unwrap_or_default() {
        framework.delete(&format!("{root}/{service}")).await?;
    }
    framework.create(&format!("{root}/orders")).data(b"v1").or_set().await?;

    let cache = CuratorCache::builder(&framework, root).build()?;
    let mut events = cache.events();
    cache.start().await?;

    // The initial load: a Created for each node, then Initialized.
    loop {
        match tokio::time::timeout(Duration::from_secs(20), events.next()).await? {
            Some(CacheEvent::Created(node)) => println!("loaded {} = {:?}", node.path(), text(node.data())),
            Some(CacheEvent::Initialized) => break,
            other => println!("{other:?}"),
        }
    }
    println!("initialized with {} nodes", cache.len());

    // Some changes, made by anyone (here: the same framework), each followed by its event.
    // A change undone before the cache has read it may collapse (a node created and deleted
    // at once can bring no event at all, as in Curator), so this waits for each one.
    framework.create("/examples/cache/billing").data(b"v1").await?;
    print_event(next_event(&mut events).await?);
    framework.set_data("/examples/cache/orders", b"v2").await?;
    print_event(next_event(&mut events).await?);
    framework.delete("/examples/cache/billing").await?;
    print_event(next_event(&mut events).await?);

    // Reads come from memory.
    let orders = cache.get("/examples/cache/orders").expect("cached");
    println!(
        "orders is {:?} (version {}); {} children cached",
        text(orders.data()),
        orders.stat().version,
        cache.children(root).len()
    );
    cache.close().await;
    framework.close().await;
    Ok(())
}

async fn next_event(events: &mut CacheEventStream) -> Result<CacheEvent, Error> {
    match tokio::time::timeout(Duration::from_secs(20), events.next()).await {
        Ok(Some(event)) => Ok(event),
        Ok(None) => Err("the cache closed".into()),
        Err(_) => Err("no cache event in 20 s".into()),
    }
}

fn print_event(event: CacheEvent) {
    match &event {
        CacheEvent::Created(node) => println!("created {} = {:?}", node.path(), text(node.data())),
        CacheEvent::Changed(old, new) => {
            println!("changed {}: {:?} -> {:?}", new.path(), text(old.data()), text(new.data()));
        }
        CacheEvent::Deleted(node) => println!("deleted {}", node.path()),
        other => println!("{other:?}"),
    }
}

fn text(data: Option<&Vec<u8>>) -> String {
    data.map(|d| String::from_utf8_lossy(d).into_owned()).unwrap_or_default()
}
