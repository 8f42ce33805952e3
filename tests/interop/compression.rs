//! Compression against Curator 5.4's `GzipCompressionProvider` (the Java peer's
//! `create().compressed()` and `getData().decompressed()`): what Rust writes compressed, per
//! call or by a framework's default, Curator reads decompressed, and the other way round;
//! Curator's header bytes are the ones Rust writes.

use crate::common;

use common::curator::CuratorPeer;
use common::fixtures::{bounded, framework, init_tracing, shared_connect, unique_path};
use common::timing::{INTEROP_SESSION, SLOW_LIMIT};
use zk_recipes::protocol::gzip;
use zk_recipes::{CuratorCache, Framework};

fn hex(data: &[u8]) -> String {
    if data.is_empty() {
        return "-".to_owned();
    }
    data.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(text: &str) -> Vec<u8> {
    if text == "-" {
        return Vec::new();
    }
    (0..text.len()).step_by(2).map(|i| u8::from_str_radix(&text[i..i + 2], 16).unwrap()).collect()
}

/// The payloads: empty, short text, and a long compressible run with binary bytes.
fn payloads() -> Vec<Vec<u8>> {
    let mut long: Vec<u8> = b"config=".repeat(500);
    long.extend((0..=255u8).collect::<Vec<_>>());
    vec![Vec::new(), b"hello, curator".to_vec(), long]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rust_and_curator_read_each_others_compressed_data() {
    init_tracing();
    bounded(SLOW_LIMIT, async {
        let connect = shared_connect().await;
        let Some(mut java) = CuratorPeer::start(&connect, INTEROP_SESSION).await.expect("the Curator peer") else {
            return;
        };
        let fw = framework(&connect, INTEROP_SESSION).await;
        let root = unique_path("gzip-interop", "both-ways");
        for (i, data) in payloads().into_iter().enumerate() {
            // Rust writes per call, Curator reads with decompressed().
            let path = format!("{root}/rust-{i}");
            fw.create(&path).compressed().data(&data).await.unwrap();
            assert_eq!(
                java.command(&format!("gzip_get {path}")).await.unwrap(),
                format!("gzip_get {path} {}", hex(&data))
            );
            let changed = [&data[..], b"+"].concat();
            fw.set_data(&path, &changed).compressed().await.unwrap();
            assert_eq!(
                java.command(&format!("gzip_get {path}")).await.unwrap(),
                format!("gzip_get {path} {}", hex(&changed))
            );

            // Curator writes with compressed(), Rust reads with decompressed().
            let path = format!("{root}/java-{i}");
            assert_eq!(
                java.command(&format!("gzip_create {path} {}", hex(&data))).await.unwrap(),
                format!("gzip_create {path} ok")
            );
            assert_eq!(fw.get_data(&path).decompressed().await.unwrap().0, data);
            let stored = fw.get_data(&path).await.unwrap().0;
            // Curator 5.4's header on this JDK: no flags, no time, OS byte 0, as Rust writes it.
            assert_eq!(stored[..10], gzip::HEADER, "Curator's header: {}", hex(&stored[..10]));
            assert_eq!(gzip::decompress(&stored).unwrap(), data);
            if data.is_empty() {
                assert_eq!(stored, gzip::compress(b""), "the empty input's 20 bytes");
            }
            // Curator's raw read sees the same bytes Rust's does.
            assert_eq!(
                java.command(&format!("raw_get {path}")).await.unwrap(),
                format!("raw_get {path} {}", hex(&stored))
            );
        }

        // A cache reading them decompressed (Curator's `CuratorCache.Options.COMPRESSED_DATA`):
        // both sides' nodes as plain bytes; the root, created without data, empty; a node not
        // in gzip kept with its stat only.
        let plain_node = format!("{root}/plain");
        fw.create(&plain_node).uncompressed().data(b"not gzip").await.unwrap();
        let cache = CuratorCache::builder(&fw, &root).decompressed().build().unwrap();
        cache.start().await.unwrap();
        cache.initialized().await.unwrap();
        for (i, data) in payloads().into_iter().enumerate() {
            let changed = [&data[..], b"+"].concat();
            let rust = cache.get(&format!("{root}/rust-{i}")).expect("cached");
            assert_eq!(rust.data().map(Vec::as_slice), Some(&changed[..]), "rust-{i}");
            let java_node = cache.get(&format!("{root}/java-{i}")).expect("cached");
            assert_eq!(java_node.data().map(Vec::as_slice), Some(&data[..]), "java-{i}");
        }
        assert_eq!(cache.get(&root).expect("the root").data().map(Vec::len), Some(0));
        let plain = cache.get(&plain_node).expect("cached with its stat");
        assert!(plain.data().is_none(), "not gzip: no data");
        cache.close().await;
        fw.delete(&root).recursive().await.unwrap();
        fw.close().await;
        java.quit().await.unwrap();
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_compressing_framework_shares_nodes_with_curators_compressed_calls() {
    init_tracing();
    bounded(SLOW_LIMIT, async {
        let connect = shared_connect().await;
        let Some(mut java) = CuratorPeer::start(&connect, INTEROP_SESSION).await.expect("the Curator peer") else {
            return;
        };
        let fw =
            Framework::builder(&connect).session_timeout(INTEROP_SESSION).enable_compression().start().await.unwrap();
        let root = unique_path("gzip-interop", "default");
        let ours = format!("{root}/rust");
        fw.create(&ours).data(b"from rust").await.unwrap();
        assert_eq!(
            java.command(&format!("gzip_get {ours}")).await.unwrap(),
            format!("gzip_get {ours} {}", hex(b"from rust"))
        );
        let theirs = format!("{root}/java");
        java.command(&format!("gzip_create {theirs} {}", hex(b"from java"))).await.unwrap();
        assert_eq!(fw.get_data(&theirs).await.unwrap().0, b"from java");
        // A node Curator wrote uncompressed is a typed error, as Curator's own
        // decompressed() read of it fails ("Not in GZip format").
        fw.create(&format!("{root}/raw")).uncompressed().data(b"plain").await.unwrap();
        let reply = java.command(&format!("gzip_get {root}/raw")).await.unwrap();
        assert!(reply.starts_with(&format!("error {root}/raw")), "{reply}");
        assert!(fw.get_data(&format!("{root}/raw")).await.is_err());
        let raw = java.command(&format!("raw_get {root}/raw")).await.unwrap();
        assert_eq!(unhex(raw.rsplit(' ').next().unwrap()), b"plain");
        fw.delete(&root).recursive().await.unwrap();
        fw.close().await;
        java.quit().await.unwrap();
    })
    .await;
}
