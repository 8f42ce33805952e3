//! queue-throughput: one producer session puts items into a `DistributedQueue`, one consumer
//! session takes them (and the same through the raw floor); queue-sharded: the same over
//! `--queue-shards` shards of a `QueueSharder`, the consumer taking from every shard at once.
//! ops/s = items delivered per second from the first put to the last take.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use zk_recipes::protocol::queue_names::SHARD_PREFIX;
use zk_recipes::protocol::values::{decode_queue_items, encode_queue_items};
use zk_recipes::protocol::QUEUE_ITEM_NAME;
use zk_recipes::zk::{self, Acls, CreateMode};
use zk_recipes::{DistributedQueue, Framework, QueueSharder, QueueSharderPolicies};

use crate::contenders::stall_guard;
use crate::options::{Options, Workload};
use crate::report::{BenchError, BenchResult, CountersAt, Measured};

/// One side of the queue: the recipe, or the raw floor (Curator's consumer algorithm with plain
/// calls: list the queue without a watch, take every listed item in name order with a getData
/// and a delete at the version read, list again; a listing with a watch only when the queue
/// is empty, then wait for the watch). A raw put is a create of the same framed bytes.
#[derive(Clone)]
enum Queue {
    Recipe(DistributedQueue),
    Raw { client: zk::Client, dir: String },
}

impl Queue {
    async fn put(&self, item: &[u8]) -> BenchResult<()> {
        match self {
            Queue::Recipe(queue) => drop(queue.put(item).await?),
            Queue::Raw { client, dir } => {
                let options = CreateMode::PersistentSequential.with_acls(Acls::anyone_all());
                client.create(&format!("{dir}/{QUEUE_ITEM_NAME}"), &encode_queue_items(&[item]), &options).await?;
            }
        }
        Ok(())
    }
}

/// A consumer: the recipe's `take()`, or the raw floor's batches.
struct Taker {
    queue: Queue,
    /// The raw floor: the names of the last listing not taken yet.
    listed: VecDeque<String>,
}

impl Taker {
    async fn next(&mut self) -> BenchResult<Vec<Vec<u8>>> {
        let Taker { queue, listed } = self;
        let (client, dir) = match queue {
            Queue::Recipe(queue) => return Ok(queue.take().await?),
            Queue::Raw { client, dir } => (client, dir),
        };
        loop {
            if let Some(name) = listed.pop_front() {
                let path = format!("{dir}/{name}");
                let (data, stat) = match client.get_data(&path).await {
                    Ok(read) => read,
                    Err(zk::Error::NoNode) => continue,
                    Err(e) => return Err(e.into()),
                };
                match client.delete(&path, Some(stat.version)).await {
                    Ok(()) => {}
                    Err(zk::Error::NoNode | zk::Error::BadVersion) => continue,
                    Err(e) => return Err(e.into()),
                }
                return decode_queue_items(&data)
                    .map_err(|e| BenchError::Failed(format!("raw floor: {path}: {}", e.found)));
            }
            let mut names = client.list_children(dir).await?;
            if names.is_empty() {
                let (again, watcher) = client.list_and_watch_children(dir).await?;
                if again.is_empty() {
                    watcher.changed().await;
                    continue;
                }
                names = again;
            }
            names.retain(|n| n.starts_with(QUEUE_ITEM_NAME));
            names.sort();
            *listed = names.into();
        }
    }
}

/// Where a pass's puts go: one queue, the shard a sharder picks, or (the raw floor of the
/// sharded queue) a shard drawn at random, uniformly, as the sharder draws among its shards
/// under the threshold.
enum Producer {
    One(Queue),
    Sharder(QueueSharder),
    Shards { shards: Vec<Queue>, draw: AtomicU64 },
}

impl Producer {
    async fn put(&self, item: &[u8]) -> BenchResult<()> {
        match self {
            Producer::One(queue) => queue.put(item).await,
            Producer::Sharder(sharder) => {
                sharder.queue()?.put(item).await?;
                Ok(())
            }
            Producer::Shards { shards, draw } => {
                // splitmix64: enough for a uniform pick, no dependency.
                let mut z =
                    draw.fetch_add(0x9E37_79B9_7F4A_7C15, Ordering::Relaxed).wrapping_add(0x9E37_79B9_7F4A_7C15);
                z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
                z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
                let pick = (z ^ (z >> 31)) % shards.len() as u64;
                shards[pick as usize].put(item).await
            }
        }
    }
}

/// When each of `n` items (numbered from `base`) was put and taken.
struct Pass {
    started: Instant,
    put: Vec<Instant>,
    taken: Vec<Option<Instant>>,
}

/// Puts items `base..base + n` one after another (each put awaited: its reply says the item
/// is in the queue) while a consumer task per queue of `consumers` takes them (each item
/// timed as its take returns); fails unless every item arrived exactly once. The consumer that
/// takes the last item stops there; the others are waiting on empty queues and are stopped
/// then (nothing is left to lose).
async fn pass(
    workload: Workload,
    producer: &Producer,
    consumers: &[Queue],
    base: usize,
    n: usize,
) -> BenchResult<Pass> {
    let name = workload.name();
    let (sender, mut received) = tokio::sync::mpsc::unbounded_channel::<BenchResult<(Vec<u8>, Instant)>>();
    let (finished, done) = tokio::sync::watch::channel(false);
    let remaining = Arc::new(AtomicUsize::new(n));
    let mut tasks = Vec::with_capacity(consumers.len());
    for consumer in consumers {
        let mut taker = Taker { queue: consumer.clone(), listed: VecDeque::new() };
        let (sender, mut done, remaining) = (sender.clone(), done.clone(), remaining.clone());
        tasks.push(tokio::spawn(async move {
            loop {
                let taken = tokio::select! {
                    taken = taker.next() => taken,
                    _ = done.wait_for(|done| *done) => return,
                };
                let at = Instant::now();
                let items = match taken {
                    Ok(items) => items,
                    Err(e) => {
                        let _ = sender.send(Err(e));
                        return;
                    }
                };
                let count = items.len();
                for item in items {
                    let _ = sender.send(Ok((item, at)));
                }
                let before =
                    remaining.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |r| Some(r.saturating_sub(count)));
                if before.unwrap_or_else(|r| r) <= count {
                    return; // the pass's last item: no take left waiting
                }
            }
        }));
    }
    drop(sender);
    let started = Instant::now();
    let mut put = Vec::with_capacity(n);
    let mut outcome = Ok(());
    for i in base..base + n {
        put.push(Instant::now());
        if let Err(e) = producer.put(i.to_string().as_bytes()).await {
            outcome = Err(e);
            break;
        }
    }
    let mut taken: Vec<Option<Instant>> = vec![None; n];
    let mut arrived = 0;
    while outcome.is_ok() && arrived < n {
        outcome = match stall_guard(received.recv()).await {
            Err(e) | Ok(Some(Err(e))) => Err(e),
            Ok(None) => Err(BenchError::Failed(format!("{name}: the consumers stopped"))),
            Ok(Some(Ok((item, at)))) => {
                let index = std::str::from_utf8(&item)
                    .ok()
                    .and_then(|s| s.parse::<usize>().ok())
                    .and_then(|i| i.checked_sub(base))
                    .filter(|&i| i < n);
                match index {
                    None => Err(BenchError::Miscounted(format!("{name}: an item not put in this pass: {item:?}"))),
                    Some(index) if taken[index].replace(at).is_some() => {
                        Err(BenchError::Miscounted(format!("{name}: item {} delivered twice", base + index)))
                    }
                    Some(_) => {
                        arrived += 1;
                        Ok(())
                    }
                }
            }
        };
    }
    finished.send_replace(true);
    for task in tasks {
        if let Err(e) = task.await {
            outcome = outcome.and(Err(BenchError::Failed(format!("{name}: a consumer failed: {e}"))));
        }
    }
    outcome.map(|()| Pass { started, put, taken })
}

/// queue-throughput: the raw floor (under `dir`-raw), then zk-recipes (under `dir`), each
/// `--warmup` items unmeasured, then `--queue-items` measured. Latency per item = from the
/// start of its put to its take. `counters` reads the request counters right before a measured
/// pass, `fill` puts what was counted since into its line right after it.
pub(crate) async fn queue_throughput(
    o: &Options,
    connect: &str,
    dir: &str,
    counters: impl Fn() -> CountersAt,
    fill: impl Fn(&CountersAt, &mut Measured),
) -> BenchResult<Vec<Measured>> {
    let workload = Workload::QueueThroughput;
    let mut lines = Vec::new();
    let raw_dir = format!("{dir}-raw");
    let (producing, consuming) = (zk::Client::connect(connect).await?, zk::Client::connect(connect).await?);
    producing.mkdir(&raw_dir, &CreateMode::Persistent.with_acls(Acls::anyone_all())).await?;
    let producer = Producer::One(Queue::Raw { client: producing, dir: raw_dir.clone() });
    let consumer = Queue::Raw { client: consuming, dir: raw_dir };
    lines.push(line(o, workload, "raw-floor", &producer, &[consumer], &counters, &fill).await?);

    let (producing, consuming) = (Framework::connect(connect).await?, Framework::connect(connect).await?);
    let producer = Producer::One(Queue::Recipe(DistributedQueue::new(&producing, dir)?));
    let consumer = Queue::Recipe(DistributedQueue::new(&consuming, dir)?);
    lines.push(line(o, workload, "zk-recipes", &producer, &[consumer], &counters, &fill).await?);
    producing.close().await;
    consuming.close().await;
    Ok(lines)
}

/// Makes `dir` (persistent, parents included) and `shards` shards under it, each a persistent
/// `queue-<uuid>` node as a `QueueSharder` (Rust's or Curator's) names them; returns their
/// paths. A sharder started on `dir` then takes them all up and, with a maximum of `shards`,
/// never adds one: every line spreads its items over the same number of shards.
async fn make_shards(client: &zk::Client, dir: &str, shards: usize) -> BenchResult<Vec<String>> {
    let persistent = CreateMode::Persistent.with_acls(Acls::anyone_all());
    client.mkdir(dir, &persistent).await?;
    let mut paths = Vec::with_capacity(shards);
    for _ in 0..shards {
        let path = format!("{dir}/{SHARD_PREFIX}{}", uuid::Uuid::new_v4());
        client.create(&path, &[], &persistent).await?;
        paths.push(path);
    }
    Ok(paths)
}

/// queue-sharded: as queue-throughput, over `--queue-shards` shards made before each line. The
/// raw floor puts each item into a shard drawn at random and takes from every shard with a
/// task per shard (under `dir`-raw); zk-recipes puts through a producer session's
/// `QueueSharder` (`queue()` per put) and takes with a task per shard from a
/// `DistributedQueue` of each of the consumer session's sharder's `queue_paths()`, as Curator's
/// consumer is a sharder whose queues each run their consumer.
pub(crate) async fn queue_sharded(
    o: &Options,
    connect: &str,
    dir: &str,
    counters: impl Fn() -> CountersAt,
    fill: impl Fn(&CountersAt, &mut Measured),
) -> BenchResult<Vec<Measured>> {
    let workload = Workload::QueueSharded;
    let extra = format!(",\"shards\":{}", o.queue_shards);
    let mut lines = Vec::new();
    let (producing, consuming) = (zk::Client::connect(connect).await?, zk::Client::connect(connect).await?);
    let paths = make_shards(&producing, &format!("{dir}-raw"), o.queue_shards).await?;
    let raw = |client: &zk::Client| -> Vec<Queue> {
        paths.iter().map(|dir| Queue::Raw { client: client.clone(), dir: dir.clone() }).collect()
    };
    let producer = Producer::Shards { shards: raw(&producing), draw: AtomicU64::new(o.seed) };
    let mut measured = line(o, workload, "raw-floor", &producer, &raw(&consuming), &counters, &fill).await?;
    measured.extra.clone_from(&extra);
    lines.push(measured);

    make_shards(&producing, dir, o.queue_shards).await?;
    let (producing, consuming) = (Framework::connect(connect).await?, Framework::connect(connect).await?);
    let leader = format!("{dir}-leader");
    // Curator's defaults (a shard added past 10,000 items, counted every 30 s), at most the
    // shards there are.
    let policies = QueueSharderPolicies::default().max_queues(o.queue_shards);
    let producer = QueueSharder::new(&producing, dir, &leader, policies)?;
    let consumer = QueueSharder::new(&consuming, dir, &leader, policies)?;
    producer.start().await?;
    consumer.start().await?;
    for sharder in [&producer, &consumer] {
        if sharder.shard_count() != o.queue_shards {
            return Err(BenchError::Failed(format!(
                "{}: a sharder took up {} shards, not {}",
                workload.name(),
                sharder.shard_count(),
                o.queue_shards
            )));
        }
    }
    let shards = consumer
        .queue_paths()
        .iter()
        .map(|path| Ok(Queue::Recipe(DistributedQueue::new(&consuming, path)?)))
        .collect::<BenchResult<Vec<Queue>>>()?;
    let producer = Producer::Sharder(producer);
    let mut measured = line(o, workload, "zk-recipes", &producer, &shards, &counters, &fill).await?;
    measured.extra = extra;
    lines.push(measured);
    if let Producer::Sharder(producer) = producer {
        producer.close().await?;
    }
    consumer.close().await?;
    producing.close().await;
    consuming.close().await;
    Ok(lines)
}

async fn line(
    o: &Options,
    workload: Workload,
    implementation: &'static str,
    producer: &Producer,
    consumers: &[Queue],
    counters: &impl Fn() -> CountersAt,
    fill: &impl Fn(&CountersAt, &mut Measured),
) -> BenchResult<Measured> {
    if o.warmup > 0 {
        pass(workload, producer, consumers, 0, o.warmup).await?;
    }
    let before = counters();
    let measured = pass(workload, producer, consumers, o.warmup, o.queue_items).await?;
    let mut samples = Vec::with_capacity(o.queue_items);
    let mut last = measured.started;
    for (put, taken) in measured.put.iter().zip(&measured.taken) {
        let taken =
            taken.ok_or_else(|| BenchError::Miscounted(format!("{}: an item never arrived", workload.name())))?;
        last = last.max(taken);
        samples.push(taken.saturating_duration_since(*put));
    }
    let mut line = Measured {
        implementation,
        workload,
        clients: 2,
        secs: (last - measured.started).as_secs_f64(),
        samples,
        requests_per_op: None,
        fsyncs_per_op: None,
        breakdown: None,
        halves: None,
        ops: None,
        extra: String::new(),
    };
    fill(&before, &mut line);
    Ok(line)
}
