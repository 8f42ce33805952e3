//! CuratorCache against Curator 5.4's `CuratorCache`: a Curator process mutates a subtree at
//! random while a Rust cache and a Curator cache watch it; when it stops, both caches and a
//! fresh read of the server agree on every node's path, version and data.

use crate::common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::curator::CuratorPeer;
use tokio::time::Instant;
use zk_recipes::retry::RetryForever;
use zk_recipes::{CuratorCache, Error, Framework};

const SESSION: Duration = Duration::from_secs(10);

/// `path:version:hexdata`, by path.
type Dump = BTreeMap<String, String>;

fn hex(data: &[u8]) -> String {
    data.iter().map(|b| format!("{b:02x}")).collect()
}

async fn server_dump(fw: &Framework, root: &str) -> Dump {
    let mut out = Dump::new();
    let mut stack = vec![root.to_owned()];
    while let Some(path) = stack.pop() {
        let (data, stat) = match fw.get_data(&path).await {
            Ok(found) => found,
            Err(Error::ZooKeeper(zk_recipes::zk::Error::NoNode)) => continue,
            Err(e) => panic!("reading {path}: {e}"),
        };
        out.insert(path.clone(), format!("{}:{}", stat.version, hex(&data)));
        match fw.get_children(&path).await {
            Ok(children) => stack.extend(children.into_iter().map(|c| format!("{path}/{c}"))),
            Err(Error::ZooKeeper(zk_recipes::zk::Error::NoNode)) => {}
            Err(e) => panic!("listing {path}: {e}"),
        }
    }
    out
}

fn rust_dump(cache: &CuratorCache) -> Dump {
    cache
        .nodes()
        .into_iter()
        .map(|n| (n.path().to_owned(), format!("{}:{}", n.stat().version, hex(n.data().map_or(&[][..], |d| d)))))
        .collect()
}

async fn java_dump(java: &mut CuratorPeer, id: &str) -> Dump {
    let reply = java.command(&format!("cache_dump {id}")).await.expect("cache_dump");
    let mut words = reply.split_whitespace().skip(3);
    let mut out = Dump::new();
    for entry in words.by_ref() {
        // path:version:hex, the path holding no ':'
        let (path, rest) = entry.split_once(':').unwrap_or_else(|| panic!("bad dump entry {entry:?} in {reply}"));
        out.insert(path.to_owned(), rest.to_owned());
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rust_and_a_curator_cache_agree_with_the_server() {
    let test = async {
        let connect = zk_recipes::testing::shared_server().await.expect("the shared server").connect_string();
        let Some(mut java) = CuratorPeer::start(&connect, SESSION).await.expect("starting the Curator peer") else {
            return;
        };
        let fw = Framework::builder(&connect)
            .session_timeout(SESSION)
            .retry_policy(RetryForever::new(Duration::from_millis(50)))
            .start()
            .await
            .expect("a framework");
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
        let root = format!("/cache-interop-{}-{nanos}", std::process::id());
        fw.create(&root).data(b"root").await.unwrap();
        let cache = CuratorCache::builder(&fw, &root).build().unwrap();
        cache.start().await.unwrap();
        let reply = java.command(&format!("cache J {root}")).await.unwrap();
        assert_eq!(reply, "cache J initialized");
        cache.initialized().await.unwrap();

        let reply = java.command_within(&format!("tree_write {root} 400 42"), Duration::from_secs(120)).await.unwrap();
        assert!(reply.starts_with(&format!("tree_write {root} ")), "{reply}");

        let deadline = Instant::now() + SESSION * 2;
        loop {
            let truth = server_dump(&fw, &root).await;
            let rust = rust_dump(&cache);
            let curator = java_dump(&mut java, "J").await;
            if cache.is_complete() && rust == truth && curator == truth {
                assert!(truth.len() > 1, "the writer left nodes: {truth:?}");
                break;
            }
            assert!(
                Instant::now() < deadline,
                "no agreement within {:?}:\nserver {truth:?}\nrust {rust:?}\ncurator {curator:?}",
                SESSION * 2
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        java.command("cache_close J").await.unwrap();
        cache.close().await;
        for path in server_dump(&fw, &root).await.keys().rev() {
            let _ = fw.delete(path).await;
        }
        java.quit().await.unwrap();
        fw.close().await;
    };
    tokio::time::timeout(Duration::from_secs(240), test).await.expect("test finished in time");
}
