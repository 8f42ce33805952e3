//! queue-throughput: one producer session puts items into a `DistributedQueue`, one consumer
//! session takes them (and the same through the raw floor); ops/s = items delivered per second
//! from the first put to the last take.

use std::collections::VecDeque;
use std::time::Instant;

use zk_recipes::protocol::values::{decode_queue_items, encode_queue_items};
use zk_recipes::protocol::QUEUE_ITEM_NAME;
use zk_recipes::zk::{self, Acls, CreateMode};
use zk_recipes::{DistributedQueue, Framework};

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

/// When each of `n` items (numbered from `base`) was put and taken.
struct Pass {
    started: Instant,
    put: Vec<Instant>,
    taken: Vec<Option<Instant>>,
}

/// Puts items `base..base + n` one after another (each put awaited: its reply says the item
/// is in the queue) while a consumer task takes them; fails unless every item arrived exactly
/// once.
async fn pass(producer: &Queue, consumer: &Queue, base: usize, n: usize) -> BenchResult<Pass> {
    let mut taker = Taker { queue: consumer.clone(), listed: VecDeque::new() };
    let consumer = tokio::spawn(async move {
        let mut taken: Vec<Option<Instant>> = vec![None; n];
        let mut remaining = n;
        while remaining > 0 {
            for item in stall_guard(taker.next()).await?? {
                let at = Instant::now();
                let index = std::str::from_utf8(&item)
                    .ok()
                    .and_then(|s| s.parse::<usize>().ok())
                    .and_then(|i| i.checked_sub(base))
                    .filter(|&i| i < n)
                    .ok_or_else(|| {
                        BenchError::Miscounted(format!("queue-throughput: an item not put in this pass: {item:?}"))
                    })?;
                if taken[index].replace(at).is_some() {
                    return Err(BenchError::Miscounted(format!(
                        "queue-throughput: item {} delivered twice",
                        base + index
                    )));
                }
                remaining -= 1;
            }
        }
        Ok::<_, BenchError>(taken)
    });
    let started = Instant::now();
    let mut put = Vec::with_capacity(n);
    for i in base..base + n {
        put.push(Instant::now());
        producer.put(i.to_string().as_bytes()).await?;
    }
    let taken =
        consumer.await.map_err(|e| BenchError::Failed(format!("queue-throughput: the consumer failed: {e}")))??;
    Ok(Pass { started, put, taken })
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
    let mut lines = Vec::new();
    let raw_dir = format!("{dir}-raw");
    let (producing, consuming) = (zk::Client::connect(connect).await?, zk::Client::connect(connect).await?);
    producing.mkdir(&raw_dir, &CreateMode::Persistent.with_acls(Acls::anyone_all())).await?;
    let producer = Queue::Raw { client: producing, dir: raw_dir.clone() };
    let consumer = Queue::Raw { client: consuming, dir: raw_dir };
    lines.push(line(o, "raw-floor", &producer, &consumer, &counters, &fill).await?);

    let (producing, consuming) = (Framework::connect(connect).await?, Framework::connect(connect).await?);
    let producer = Queue::Recipe(DistributedQueue::new(&producing, dir)?);
    let consumer = Queue::Recipe(DistributedQueue::new(&consuming, dir)?);
    lines.push(line(o, "zk-recipes", &producer, &consumer, &counters, &fill).await?);
    producing.close().await;
    consuming.close().await;
    Ok(lines)
}

async fn line(
    o: &Options,
    implementation: &'static str,
    producer: &Queue,
    consumer: &Queue,
    counters: &impl Fn() -> CountersAt,
    fill: &impl Fn(&CountersAt, &mut Measured),
) -> BenchResult<Measured> {
    if o.warmup > 0 {
        pass(producer, consumer, 0, o.warmup).await?;
    }
    let before = counters();
    let measured = pass(producer, consumer, o.warmup, o.queue_items).await?;
    let mut samples = Vec::with_capacity(o.queue_items);
    let mut last = measured.started;
    for (put, taken) in measured.put.iter().zip(&measured.taken) {
        let taken = taken.ok_or_else(|| BenchError::Miscounted("queue-throughput: an item never arrived".into()))?;
        last = last.max(taken);
        samples.push(taken.saturating_duration_since(*put));
    }
    let mut line = Measured {
        implementation,
        workload: Workload::QueueThroughput,
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
