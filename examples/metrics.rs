//! Metrics: the recipes' counters, gauges and lock wait histogram in the Prometheus text
//! format on `http://127.0.0.1:<port>/metrics`, and the framework's background errors.
//!
//! `cargo run --features testing --example metrics [-- --connect host:port] [--serve-for SECS]`
//! (without `--connect` it starts an embedded ZooKeeper server). It makes some traffic (a
//! contended lock, a cache), serves `/metrics`, reads it once itself and prints the
//! `zk_recipes_` lines; with `--serve-for` it keeps serving that long, for `curl` or a
//! Prometheus server. The metrics and their labels are listed in the observability guide.

use std::time::Duration;

use futures::StreamExt;
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use zk_recipes::{BackgroundEvent, CacheEvent, CuratorCache, Framework, InterProcessMutex};

mod common;
use common::{server_or_connect, Error};

#[tokio::main]
async fn main() -> Result<(), Error> {
    // The recorder goes in first: handles made before it stay no-ops.
    let prometheus = PrometheusBuilder::new().install_recorder()?;
    let (_server, connect) = server_or_connect().await?;
    let framework = Framework::builder(&connect)
        .session_timeout(Duration::from_secs(10))
        .metrics_name("example")
        // Few paths here: one series per lock path is affordable.
        .metrics_path_labels(true)
        .start()
        .await?;
    // Background errors (a refused delete, a node a cache may not read, ...) besides the log.
    let mut errors = framework.errors();
    tokio::spawn(async move {
        while let Some(event) = errors.next().await {
            match event {
                BackgroundEvent::Error(error) => eprintln!("background error: {error}"),
                BackgroundEvent::Lagged(missed) => eprintln!("missed {missed} background errors"),
                _ => {}
            }
        }
    });

    make_traffic(&framework).await?;

    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let address = listener.local_addr()?;
    tokio::spawn(serve(listener, prometheus.clone()));
    println!("serving http://{address}/metrics");

    let page = get(&address.to_string(), "/metrics").await?;
    let ours: Vec<&str> = page.lines().filter(|line| line.starts_with("zk_recipes_")).collect();
    for line in &ours {
        println!("{line}");
    }
    if !page.contains("zk_recipes_lock_acquire_wait_seconds") {
        return Err("no lock wait histogram on /metrics".into());
    }
    if let Some(secs) = serve_for() {
        println!("serving for {secs} s more");
        tokio::time::sleep(Duration::from_secs(secs)).await;
    }
    framework.close().await;
    Ok(())
}

/// A lock taken while another handle holds it (one wait in the histogram) and a cache.
async fn make_traffic(framework: &Framework) -> Result<(), Error> {
    let holder = InterProcessMutex::new(framework, "/examples/metrics/lock")?;
    let guard = holder.acquire().await?;
    let waiter = InterProcessMutex::new(framework, "/examples/metrics/lock")?;
    let waiting = tokio::spawn(async move { waiter.acquire().await.map(drop) });
    tokio::time::sleep(Duration::from_millis(100)).await;
    guard.release().await?;
    waiting.await??;

    framework.create("/examples/metrics/config").or_set().await?;
    let cache = CuratorCache::builder(framework, "/examples/metrics/config").build()?;
    cache.start().await?;
    cache.initialized().await?;
    let mut events = cache.events();
    framework.set_data("/examples/metrics/config", b"v2").await?;
    while let Some(event) = tokio::time::timeout(Duration::from_secs(10), events.next()).await? {
        if matches!(event, CacheEvent::Changed(..)) {
            break;
        }
    }
    cache.close().await;
    Ok(())
}

/// Serves `/metrics` (HTTP/1.0, one request per connection) until the program ends.
async fn serve(listener: TcpListener, prometheus: PrometheusHandle) {
    loop {
        let Ok((stream, _)) = listener.accept().await else { continue };
        let prometheus = prometheus.clone();
        tokio::spawn(async move {
            let mut stream = BufReader::new(stream);
            let mut request_line = String::new();
            if stream.read_line(&mut request_line).await.is_err() {
                return;
            }
            let response = match request_line.split_whitespace().nth(1) {
                Some("/metrics") => {
                    let body = prometheus.render();
                    format!(
                        "HTTP/1.0 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\n\r\n{body}",
                        body.len()
                    )
                }
                _ => "HTTP/1.0 404 Not Found\r\nContent-Length: 0\r\n\r\n".to_owned(),
            };
            let _ = stream.get_mut().write_all(response.as_bytes()).await;
        });
    }
}

/// The body of `GET path` from `address`.
async fn get(address: &str, path: &str) -> Result<String, Error> {
    let mut stream = TcpStream::connect(address).await?;
    stream.write_all(format!("GET {path} HTTP/1.0\r\nHost: {address}\r\n\r\n").as_bytes()).await?;
    let mut response = String::new();
    stream.read_to_string(&mut response).await?;
    match response.split_once("\r\n\r\n") {
        Some((head, body)) if head.starts_with("HTTP/1.0 200") => Ok(body.to_owned()),
        _ => Err(format!("unexpected answer: {response}").into()),
    }
}

/// `--serve-for SECS` from the command line.
fn serve_for() -> Option<u64> {
    let args: Vec<String> = std::env::args().collect();
    args.iter().position(|a| a == "--serve-for").and_then(|i| args.get(i + 1)).and_then(|s| s.parse().ok())
}
