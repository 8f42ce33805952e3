//! The cache workloads: `cache-load` (the initial load of a large two-level tree) and
//! `cache-events` (a writer applying set-data at full speed under a cache), through the raw
//! client (a floor) and `CuratorCache`. Each line checks its result against the server.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use zk_recipes::zk::{self, Acls, CreateMode};
use zk_recipes::{CacheEvent, CacheEventStream, CuratorCache, Framework};

use crate::options::{Options, Workload, STALL};
use crate::report::{BenchError, BenchResult, Measured};

/// Reads (or writes) the raw lines keep in flight: the cache's default for its load.
const READS_IN_FLIGHT: usize = 64;

/// cache-events: set-data requests the writer keeps in flight.
pub(crate) const WRITES_IN_FLIGHT: usize = 32;

/// Requests in flight while the trees are created (not measured).
const SETUP_IN_FLIGHT: usize = 256;

/// Bytes of data per node in `cache-load`.
pub(crate) const LOAD_DATA_BYTES: usize = 100;

/// What a line read of a node: its version and data.
type Nodes = BTreeMap<String, (i32, Vec<u8>)>;

/// The shape of cache-load's tree: `parents` children of the root, each with `children`
/// children of its own (`parents * (1 + children)` nodes below the root, about `nodes`).
pub(crate) fn load_shape(nodes: usize) -> (usize, usize) {
    let parents = ((nodes as f64).sqrt().round() as usize).max(1);
    (parents, (nodes.saturating_sub(parents) / parents).max(1))
}

/// The data of node `index`: its number, then filler up to [`LOAD_DATA_BYTES`].
fn load_data(index: usize) -> Vec<u8> {
    let mut data = format!("{index:08}").into_bytes();
    data.resize(LOAD_DATA_BYTES, b'x');
    data
}

fn persistent() -> zk::CreateOptions<'static> {
    CreateMode::Persistent.with_acls(Acls::anyone_all())
}

/// Creates `paths` with their data, [`SETUP_IN_FLIGHT`] at a time; existing nodes are kept.
async fn create_all(client: &zk::Client, paths: Vec<(String, Vec<u8>)>) -> BenchResult<()> {
    futures::stream::iter(paths)
        .map(|(path, data)| {
            let client = client.clone();
            async move {
                match client.create(&path, &data, &persistent()).await {
                    Ok(_) | Err(zk::Error::NodeExists) => Ok(()),
                    Err(e) => Err(BenchError::from(e)),
                }
            }
        })
        .buffer_unordered(SETUP_IN_FLIGHT)
        .try_collect::<()>()
        .await
}

/// cache-load's tree under `dir` (created once per run, kept for every line and round).
pub(crate) async fn ensure_load_tree(client: &zk::Client, dir: &str, nodes: usize) -> BenchResult<()> {
    let (parents, children) = load_shape(nodes);
    if let Ok(listed) = client.list_children(dir).await {
        if listed.len() == parents {
            return Ok(());
        }
    }
    client.mkdir(dir, &persistent()).await.or_else(|e| if e == zk::Error::NodeExists { Ok(()) } else { Err(e) })?;
    let parent_paths: Vec<_> = (0..parents).map(|p| (format!("{dir}/p{p:04}"), load_data(p))).collect();
    create_all(client, parent_paths).await?;
    let child_paths = (0..parents)
        .flat_map(|p| (0..children).map(move |c| (p, c)))
        .map(|(p, c)| (format!("{dir}/p{p:04}/c{c:04}"), load_data(parents + p * children + c)))
        .collect();
    create_all(client, child_paths).await
}

/// Everything below and at `dir`, read with plain calls: the root, then each parent's data
/// and children, then every child's data, [`READS_IN_FLIGHT`] at a time. Also returns when
/// each node's read returned, from `started`.
async fn read_tree(client: &zk::Client, dir: &str, started: Instant) -> BenchResult<(Nodes, Vec<Duration>)> {
    let mut nodes = Nodes::new();
    let mut times = Vec::new();
    let (data, stat) = client.get_data(dir).await?;
    nodes.insert(dir.to_owned(), (stat.version, data));
    times.push(started.elapsed());
    let parents = client.list_children(dir).await?;
    let read = |path: String, list: bool| {
        let client = client.clone();
        async move {
            let (data, stat) = client.get_data(&path).await?;
            let children = if list { client.list_children(&path).await? } else { Vec::new() };
            Ok::<_, BenchError>((path, stat.version, data, children, started.elapsed()))
        }
    };
    let levels: Vec<_> = futures::stream::iter(parents.into_iter().map(|p| read(format!("{dir}/{p}"), true)))
        .buffer_unordered(READS_IN_FLIGHT)
        .try_collect()
        .await?;
    let mut below = Vec::new();
    for (path, version, data, children, at) in levels {
        below.extend(children.into_iter().map(|c| format!("{path}/{c}")));
        nodes.insert(path, (version, data));
        times.push(at);
    }
    let leaves: Vec<_> = futures::stream::iter(below.into_iter().map(|p| read(p, false)))
        .buffer_unordered(READS_IN_FLIGHT)
        .try_collect()
        .await?;
    for (path, version, data, _, at) in leaves {
        nodes.insert(path, (version, data));
        times.push(at);
    }
    Ok((nodes, times))
}

/// The cache's nodes as `(version, data)` by path.
fn cached(cache: &CuratorCache) -> Nodes {
    cache
        .nodes()
        .into_iter()
        .map(|n| (n.path().to_owned(), (n.stat().version, n.data().cloned().unwrap_or_default())))
        .collect()
}

/// `Err(Diverged)` unless `cache` holds exactly what `server` says.
fn compare(what: &str, cache: &Nodes, server: &Nodes) -> BenchResult<()> {
    if cache == server {
        return Ok(());
    }
    let missing = server.keys().find(|p| !cache.contains_key(*p));
    let extra = cache.keys().find(|p| !server.contains_key(*p));
    let different = server.iter().find(|(p, v)| cache.get(*p).is_some_and(|c| c != *v)).map(|(p, _)| p);
    Err(BenchError::Diverged(format!(
        "{what}: the cache holds {} nodes, the server {}; first missing {missing:?}, first extra {extra:?}, \
         first different {different:?}",
        cache.len(),
        server.len()
    )))
}

/// The process's resident memory in bytes (`VmRSS`), `None` off Linux.
fn rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let kib: u64 =
        status.lines().find_map(|l| l.strip_prefix("VmRSS:"))?.trim().trim_end_matches("kB").trim().parse().ok()?;
    Some(kib * 1024)
}

pub(crate) fn line(workload: Workload, implementation: &'static str, secs: f64, samples: Vec<Duration>) -> Measured {
    Measured {
        implementation,
        workload,
        clients: 1,
        secs,
        samples,
        requests_per_op: None,
        fsyncs_per_op: None,
        breakdown: None,
        halves: None,
        ops: None,
        extra: String::new(),
    }
}

/// cache-load: the raw floor (plain reads of the tree), then `CuratorCache` (a load to
/// `Initialized`, after one unmeasured load). ops = nodes loaded; the samples are when each
/// node arrived, from the start.
pub(crate) async fn cache_load(o: &Options, connect: &str, dir: &str) -> BenchResult<Vec<Measured>> {
    let client = zk::Client::connect(connect).await?;
    ensure_load_tree(&client, dir, o.cache_nodes).await?;

    let started = Instant::now();
    let (server, times) = read_tree(&client, dir, started).await?;
    let raw = line(Workload::CacheLoad, "raw-floor", started.elapsed().as_secs_f64(), times);
    let (parents, children) = load_shape(o.cache_nodes);
    if server.len() != 1 + parents * (1 + children) {
        return Err(BenchError::Diverged(format!(
            "raw floor: read {} nodes of {}",
            server.len(),
            1 + parents * (1 + children)
        )));
    }

    let framework = Framework::connect(connect).await?;
    // One unmeasured load, as Curator gets its warm-up loads.
    {
        let cache = CuratorCache::builder(&framework, dir).build()?;
        cache.start().await?;
        tokio::time::timeout(STALL, cache.initialized())
            .await
            .map_err(|_| BenchError::Failed("cache-load: no Initialized within 60 s".into()))??;
        cache.close().await;
    }
    let rss_before = rss_bytes();
    let started = Instant::now();
    let cache = CuratorCache::builder(&framework, dir).build()?;
    let mut events = cache.events();
    cache.start().await?;
    let mut samples = Vec::with_capacity(server.len());
    loop {
        match tokio::time::timeout(STALL, events.next()).await {
            Ok(Some(CacheEvent::Created(_))) => samples.push(started.elapsed()),
            Ok(Some(CacheEvent::Initialized)) => break,
            Ok(Some(_)) => {}
            Ok(None) => return Err(BenchError::Failed("cache-load: the cache closed during the load".into())),
            Err(_) => return Err(BenchError::Failed("cache-load: no Initialized within 60 s".into())),
        }
    }
    let secs = started.elapsed().as_secs_f64();
    drop(events);
    let rss_after = rss_bytes();
    let mut ours = line(Workload::CacheLoad, "zk-recipes", secs, samples);
    // The cache (with its node data) is held while the memory is read.
    if let (Some(before), Some(after)) = (rss_before, rss_after) {
        let per_node = after.saturating_sub(before) as f64 / cache.len().max(1) as f64;
        ours.extra = format!(",\"rss_bytes_per_node\":{per_node:.0}");
    }
    // The tree does not change during the run: the raw floor's read of this round is the
    // server's state.
    compare("cache-load", &cached(&cache), &server)?;
    cache.close().await;
    framework.close().await;
    Ok(vec![raw, ours])
}

/// cache-events' nodes under `dir`: `n` children with data `0`, version 0 (a fresh `dir` per
/// line).
pub(crate) async fn create_event_nodes(client: &zk::Client, dir: &str, n: usize) -> BenchResult<Vec<String>> {
    client.mkdir(dir, &persistent()).await.or_else(|e| if e == zk::Error::NodeExists { Ok(()) } else { Err(e) })?;
    let paths: Vec<String> = (0..n).map(|i| format!("{dir}/n{i:05}")).collect();
    create_all(client, paths.iter().map(|p| (p.clone(), b"0".to_vec())).collect()).await?;
    Ok(paths)
}

/// cache-events' writer (the zk-recipes line's, and Curator's measured round's): sets the data
/// of every node of `paths` to versions `base + 1` ..= `base + passes` in turn, pass after pass,
/// [`WRITES_IN_FLIGHT`] requests at a time, each request a multi of `batch` set-data of
/// consecutive nodes of one pass (a plain set-data when `batch` is 1). Returns each write as
/// (node, version - base, its request's reply).
pub(crate) async fn write_passes(
    writer: &zk::Client,
    paths: &[String],
    base: i32,
    passes: i32,
    batch: usize,
) -> BenchResult<Vec<(usize, i32, Instant)>> {
    let requests = (1..=passes)
        .flat_map(|v| (0..paths.len()).step_by(batch).map(move |first| (first..(first + batch).min(paths.len()), v)));
    let replies: Vec<Vec<(usize, i32, Instant)>> = futures::stream::iter(requests)
        .map(|(nodes, v)| {
            let writer = writer.clone();
            let data = (base + v).to_string();
            async move {
                let versions: Vec<i32> = if nodes.len() == 1 {
                    vec![writer.set_data(&paths[nodes.start], data.as_bytes(), None).await?.version]
                } else {
                    let mut multi = writer.new_multi_writer();
                    for i in nodes.clone() {
                        multi.add_set_data(&paths[i], data.as_bytes(), None)?;
                    }
                    let results = multi.commit().await.map_err(|e| BenchError::Failed(format!("cache-events: {e}")))?;
                    results
                        .into_iter()
                        .map(|r| match r {
                            zk::MultiWriteResult::SetData { stat } => Ok(stat.version),
                            other => Err(BenchError::Failed(format!("cache-events: a set-data answered {other:?}"))),
                        })
                        .collect::<BenchResult<_>>()?
                };
                let replied = Instant::now();
                nodes
                    .zip(versions)
                    .map(|(i, version)| {
                        if version != base + v {
                            return Err(BenchError::Failed(format!(
                                "cache-events: {} has version {version} after write {}: is the path in use?",
                                paths[i],
                                base + v
                            )));
                        }
                        Ok((i, v, replied))
                    })
                    .collect::<BenchResult<Vec<_>>>()
            }
        })
        .buffered(WRITES_IN_FLIGHT)
        .try_collect()
        .await?;
    Ok(replies.into_iter().flatten().collect())
}

/// The first argument that makes the bench binary cache-events' writer process.
pub(crate) const WRITER_PROCESS: &str = "--cache-events-writer";

/// cache-events' writer as a process of its own, so that in neither line it shares a process
/// (and zookeeper-client's process-wide I/O reactor thread) with the cache it feeds: this
/// binary again with [`WRITER_PROCESS`], which connects, prints `START <wall µs>`, makes
/// [`write_passes`]'s writes (`batch` per request), printing `W <node> <version - base> <wall µs>` per reply, then
/// `DONE`. Returns when the writes began and ended and each write's reply, in this clock.
pub(crate) async fn write_passes_apart(
    connect: &str,
    paths: &[String],
    base: i32,
    passes: i32,
    batch: usize,
) -> BenchResult<(Instant, Instant, Vec<(usize, i32, Instant)>)> {
    use tokio::io::AsyncBufReadExt;

    let failed =
        |what: &str, e: &dyn std::fmt::Display| BenchError::Failed(format!("cache-events writer: {what}: {e}"));
    let exe = std::env::current_exe().map_err(|e| failed("finding the bench binary", &e))?;
    let mut child = tokio::process::Command::new(exe)
        .arg(WRITER_PROCESS)
        .arg(connect)
        .arg(base.to_string())
        .arg(passes.to_string())
        .arg(batch.to_string())
        .args(paths)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| failed("starting", &e))?;
    let stdout = child.stdout.take().ok_or_else(|| BenchError::Failed("cache-events writer: no stdout".into()))?;
    let mut lines = tokio::io::BufReader::new(stdout).lines();
    let clock = WallClock::now();
    let (mut started, mut writes, mut done) = (None, Vec::with_capacity(paths.len() * passes.max(0) as usize), false);
    while let Some(line) = lines.next_line().await.map_err(|e| failed("reading", &e))? {
        let mut fields = line.split(' ');
        match (fields.next(), fields.map(str::parse::<i64>).collect::<Result<Vec<_>, _>>()) {
            (Some("START"), Ok(f)) if f.len() == 1 => started = Some(clock.at(f[0])),
            (Some("W"), Ok(f)) if f.len() == 3 => writes.push((f[0] as usize, f[1] as i32, clock.at(f[2]))),
            (Some("DONE"), _) => done = true,
            _ => return Err(BenchError::Failed(format!("cache-events writer: {line:?}"))),
        }
    }
    let status = child.wait().await.map_err(|e| failed("waiting", &e))?;
    let started = started.filter(|_| done && status.success());
    let started = started.ok_or_else(|| BenchError::Failed(format!("cache-events writer failed ({status})")))?;
    let written = writes.iter().map(|(_, _, at)| *at).max().unwrap_or(started);
    Ok((started, written, writes))
}

/// The writer process's body (see [`write_passes_apart`]); `args` after [`WRITER_PROCESS`]:
/// connect string, base, passes, writes per request, then the paths.
pub(crate) fn writer_process(mut args: impl Iterator<Item = String>) -> Result<(), String> {
    let connect = args.next().ok_or("no connect string")?;
    let base: i32 = args.next().ok_or("no base")?.parse().map_err(|e| format!("base: {e}"))?;
    let passes: i32 = args.next().ok_or("no passes")?.parse().map_err(|e| format!("passes: {e}"))?;
    let batch: usize = args.next().ok_or("no batch")?.parse().map_err(|e| format!("batch: {e}"))?;
    let paths: Vec<String> = args.collect();
    let runtime = tokio::runtime::Runtime::new().map_err(|e| e.to_string())?;
    runtime.block_on(async {
        let writer = zk::Client::connect(&connect).await.map_err(|e| e.to_string())?;
        let start = wall_micros();
        let writes = write_passes(&writer, &paths, base, passes, batch).await.map_err(|e| e.to_string())?;
        // Reply times turned to wall-clock through one anchor.
        let (anchor, anchor_micros) = (Instant::now(), wall_micros());
        let mut out = format!("START {start}\n");
        for (i, v, at) in writes {
            let micros = anchor_micros - anchor.saturating_duration_since(at).as_micros() as i64;
            out.push_str(&format!("W {i} {v} {micros}\n"));
        }
        out.push_str("DONE\n");
        use std::io::Write;
        std::io::stdout().write_all(out.as_bytes()).map_err(|e| e.to_string())
    })
}

/// Microseconds since the epoch, now.
pub(crate) fn wall_micros() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_micros() as i64
}

/// Turns another process's wall-clock microseconds into this process's `Instant`s.
pub(crate) struct WallClock {
    anchor: Instant,
    anchor_micros: i64,
}

impl WallClock {
    pub(crate) fn now() -> WallClock {
        WallClock { anchor: Instant::now(), anchor_micros: wall_micros() }
    }

    pub(crate) fn at(&self, micros: i64) -> Instant {
        let delta = micros - self.anchor_micros;
        if delta >= 0 {
            self.anchor + Duration::from_micros(delta as u64)
        } else {
            self.anchor.checked_sub(Duration::from_micros(delta.unsigned_abs())).unwrap_or(self.anchor)
        }
    }
}

/// cache-events' latency per write: from its reply to the first event of its version or a later
/// one (`ended` when there was none; 0 when the event came first). `seen` holds each node's
/// events as (version, when).
pub(crate) fn latencies(
    writes: &[(usize, i32, Instant)],
    seen: &[Vec<(i32, Instant)>],
    ended: Instant,
) -> Vec<Duration> {
    writes
        .iter()
        .map(|(i, v, replied)| {
            let at = seen[*i].iter().find(|(version, _)| version >= v).map_or(ended, |(_, at)| *at);
            at.saturating_duration_since(*replied)
        })
        .collect()
}

/// cache-events' consumer: takes `Changed` events until every node of `index` shows version
/// `base + passes`. Returns each node's events as (version - base, when), how many were
/// delivered, when the last came, and the stream.
async fn consume(
    mut events: CacheEventStream<Vec<u8>>,
    index: BTreeMap<String, usize>,
    base: i32,
    passes: i32,
) -> BenchResult<(Vec<Vec<(i32, Instant)>>, usize, Instant, CacheEventStream<Vec<u8>>)> {
    let mut seen: Vec<Vec<(i32, Instant)>> = vec![Vec::new(); index.len()];
    let mut remaining = index.len();
    let mut delivered = 0usize;
    while remaining > 0 {
        match tokio::time::timeout(STALL, events.next()).await {
            Ok(Some(CacheEvent::Changed(_, node))) => {
                let Some(&i) = index.get(node.path()) else { continue };
                let version = node.stat().version - base;
                if seen[i].last().is_some_and(|(last, _)| *last >= version) {
                    return Err(BenchError::Diverged(format!(
                        "cache-events: {} went from version {} to {}",
                        node.path(),
                        seen[i].last().map_or(0, |(v, _)| *v) + base,
                        version + base
                    )));
                }
                seen[i].push((version, Instant::now()));
                delivered += 1;
                if version == passes {
                    remaining -= 1;
                }
            }
            Ok(Some(_)) => {}
            Ok(None) => return Err(BenchError::Failed("cache-events: the cache closed".into())),
            Err(_) => {
                return Err(BenchError::Failed(format!(
                    "cache-events: {remaining} nodes short of their last version after 60 s without an event"
                )))
            }
        }
    }
    Ok((seen, delivered, Instant::now(), events))
}

/// cache-events: a raw writer session sets the data of `--event-nodes` nodes, `--event-passes`
/// times each, [`WRITES_IN_FLIGHT`] writes in flight; a `CuratorCache` on another session
/// receives the changes, after one unmeasured pass of the same writes. ops = `Changed` events delivered (quick writes of one node may
/// collapse into one); secs = from the first write to the event of the last version of
/// every node; latency per write = from its reply to the first event showing its version or
/// a later one (0 when the event came first).
pub(crate) async fn cache_events(o: &Options, connect: &str, dir: &str) -> BenchResult<Vec<Measured>> {
    let writer = zk::Client::connect(connect).await?;
    let paths = create_event_nodes(&writer, dir, o.event_nodes).await?;
    let index: BTreeMap<String, usize> = paths.iter().enumerate().map(|(i, p)| (p.clone(), i)).collect();
    let passes = o.event_passes as i32;

    let framework = Framework::connect(connect).await?;
    let cache = CuratorCache::builder(&framework, dir).build()?;
    let events = cache.events();
    cache.start().await?;
    tokio::time::timeout(STALL, cache.initialized())
        .await
        .map_err(|_| BenchError::Failed("cache-events: no Initialized within 60 s".into()))??;

    // One unmeasured pass of the same writer first, as the Curator line's JVM writes its
    // warm-up rounds right before its measured one: the server is as warm for both lines.
    let warm = tokio::spawn(consume(events, index.clone(), 0, passes));
    write_passes_apart(connect, &paths, 0, passes, o.event_batch).await?;
    let (_, _, _, events) =
        warm.await.map_err(|e| BenchError::Failed(format!("cache-events: the consumer failed: {e}")))??;
    let consumer = tokio::spawn(consume(events, index, passes, passes));
    let (started, written, writes) = write_passes_apart(connect, &paths, passes, passes, o.event_batch).await?;
    let (seen, delivered, ended, _) =
        consumer.await.map_err(|e| BenchError::Failed(format!("cache-events: the consumer failed: {e}")))??;
    let samples = latencies(&writes, &seen, ended);
    // The end: the cache equals a fresh read of the server.
    let mut server = Nodes::new();
    let (data, stat) = writer.get_data(dir).await?;
    server.insert(dir.to_owned(), (stat.version, data));
    for path in &paths {
        let (data, stat) = writer.get_data(path).await?;
        server.insert(path.clone(), (stat.version, data));
    }
    compare("cache-events", &cached(&cache), &server)?;
    cache.close().await;
    framework.close().await;

    let secs = (ended - started).as_secs_f64();
    let mut ours = line(Workload::CacheEvents, "zk-recipes", secs, samples);
    ours.ops = Some(delivered);
    ours.extra = format!(
        ",\"writes\":{},\"writes_per_sec\":{:.1},\"batch\":{},\"absorbed_per_sec\":{:.1}",
        writes.len(),
        writes.len() as f64 / (written - started).as_secs_f64(),
        o.event_batch,
        writes.len() as f64 / secs
    );
    Ok(vec![ours])
}
