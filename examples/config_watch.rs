//! A service that reads its configuration from ZooKeeper and keeps it current with a persistent
//! watch: one node per setting under a root, the watch set before the first read (so no change
//! falls between them), each change applied as it comes, and everything read again on
//! `Resync` (changes made while the connection was down are not reported).
//!
//! `cargo run --features testing --example config_watch [-- --connect host:port]` (without
//! `--connect` it starts an embedded ZooKeeper server). An "operator" framework writes the
//! settings; the service connects through a fault proxy from the `testing` feature and cuts
//! its own connection once, to show the `Resync`.

use std::collections::BTreeMap;
use std::time::Duration;

use futures::StreamExt;
use zk_recipes::testing::FaultProxy;
use zk_recipes::{Framework, NodeEventKind, PersistentWatch, WatchEvent, WatchMode};

mod common;
use common::{server_or_connect, Error};

/// How long each step may take before the example gives up.
const STEP: Duration = Duration::from_secs(30);

/// The service's view of its configuration: setting name -> value.
type Settings = BTreeMap<String, String>;

/// Reads every setting under `root`.
async fn load(framework: &Framework, root: &str) -> Result<Settings, Error> {
    let mut settings = Settings::new();
    for name in framework.get_children(root).await? {
        // A setting deleted between the listing and the read is simply not there.
        if let Some(value) = read(framework, &format!("{root}/{name}")).await? {
            settings.insert(name, value);
        }
    }
    Ok(settings)
}

/// One setting's value, or `None` when the node is gone.
async fn read(framework: &Framework, path: &str) -> Result<Option<String>, Error> {
    match framework.get_data(path).await {
        Ok((data, _)) => Ok(Some(String::from_utf8_lossy(&data).into_owned())),
        Err(e) if matches!(e.zk(), Some(zk_recipes::zk::Error::NoNode)) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// Applies the watch's items to `settings` until `done` says the settings are as expected.
async fn follow(
    framework: &Framework,
    watch: &mut PersistentWatch,
    root: &str,
    settings: &mut Settings,
    done: impl Fn(&Settings) -> bool,
) -> Result<(), Error> {
    while !done(settings) {
        let item = tokio::time::timeout(STEP, watch.next()).await?.ok_or("the watch ended")??;
        match item {
            WatchEvent::Node(event) => {
                let Some(name) = event.path.strip_prefix(root).and_then(|rest| rest.strip_prefix('/')) else {
                    continue; // the root itself
                };
                match event.kind {
                    NodeEventKind::Deleted => {
                        settings.remove(name);
                        println!("  removed {name}");
                    }
                    _ => match read(framework, &event.path).await? {
                        Some(value) => {
                            println!("  {name} = {value}");
                            settings.insert(name.to_owned(), value);
                        }
                        None => {
                            settings.remove(name);
                        }
                    },
                }
            }
            WatchEvent::Resync { reason } => {
                // Changes may have been missed: read everything again. The watch is already
                // registered again, so nothing after this read is missed either.
                *settings = load(framework, root).await?;
                println!("  resync ({reason:?}): read everything again: {settings:?}");
            }
            _ => {}
        }
    }
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    let (_server, connect) = server_or_connect().await?;
    // The proxy forwards to the first server; a chroot stays on the client's connect string.
    let (hosts, chroot) = connect.split_at(connect.find('/').unwrap_or(connect.len()));
    let first_host = hosts.split(',').next().unwrap_or(hosts);
    let proxy = FaultProxy::start(first_host).await?;

    let operator = Framework::builder(&connect).namespace("examples").start().await?;
    let service = Framework::builder(&format!("{}{chroot}", proxy.connect_string()))
        .namespace("examples")
        .session_timeout(Duration::from_secs(6))
        .start()
        .await?;

    let root = format!("/config-watch-{}", std::process::id());
    operator.create(&root).data(b"").await?;
    operator.create(&format!("{root}/log_level")).data(b"info").await?;
    operator.create(&format!("{root}/pool_size")).data(b"8").await?;

    // Watch first, then read: a change between the two shows up as an event.
    let mut watch = service.watch(&root, WatchMode::PersistentRecursive).await?;
    let mut settings = load(&service, &root).await?;
    println!("configuration at start: {settings:?}");

    println!("the operator raises the log level:");
    operator.set_data(&format!("{root}/log_level"), b"debug").await?;
    follow(&service, &mut watch, &root, &mut settings, |s| s.get("log_level").is_some_and(|v| v == "debug")).await?;

    println!("the service's connection drops, and the operator adds a setting meanwhile:");
    proxy.drop_connections();
    operator.create(&format!("{root}/feature_x")).data(b"on").await?;
    follow(&service, &mut watch, &root, &mut settings, |s| s.contains_key("feature_x")).await?;

    println!("the operator removes a setting:");
    operator.delete(&format!("{root}/pool_size")).await?;
    follow(&service, &mut watch, &root, &mut settings, |s| !s.contains_key("pool_size")).await?;
    println!("configuration now: {settings:?}");

    // Dropping the watch removes it from the server.
    drop(watch);
    for name in operator.get_children(&root).await? {
        operator.delete(&format!("{root}/{name}")).await?;
    }
    operator.delete(&root).await?;
    service.close().await;
    operator.close().await;
    Ok(())
}
