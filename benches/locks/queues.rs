//! queue-throughput: one producer session puts items into a `DistributedQueue`, one consumer
//! session takes them; ops/s = items delivered per second from the first put to the last take.

use std::time::Instant;

use zk_recipes::{DistributedQueue, Framework};

use crate::contenders::stall_guard;
use crate::options::{Options, Workload};
use crate::report::{BenchError, BenchResult, CountersAt, Measured};

/// When each of `n` items (numbered from `base`) was put and taken.
struct Pass {
    started: Instant,
    put: Vec<Instant>,
    taken: Vec<Option<Instant>>,
}

/// Puts items `base..base + n` one after another (each put awaited: its reply says the item
/// is in the queue) while a consumer task takes them; fails unless every item arrived exactly
/// once.
async fn pass(producer: &DistributedQueue, consumer: &DistributedQueue, base: usize, n: usize) -> BenchResult<Pass> {
    let taker = consumer.clone();
    let consumer = tokio::spawn(async move {
        let mut taken: Vec<Option<Instant>> = vec![None; n];
        let mut remaining = n;
        while remaining > 0 {
            for item in stall_guard(taker.take()).await?? {
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

/// queue-throughput through zk-recipes: `--warmup` items unmeasured, then `--queue-items`
/// measured. Latency per item = from the start of its put to its take. Returns the line and
/// the request counters read right before the measured pass.
pub(crate) async fn queue_throughput(
    o: &Options,
    connect: &str,
    dir: &str,
    counters: impl Fn() -> CountersAt,
) -> BenchResult<(Measured, CountersAt)> {
    let (producing, consuming) = (Framework::connect(connect).await?, Framework::connect(connect).await?);
    let producer = DistributedQueue::new(&producing, dir)?;
    let consumer = DistributedQueue::new(&consuming, dir)?;
    if o.warmup > 0 {
        pass(&producer, &consumer, 0, o.warmup).await?;
    }
    let before = counters();
    let measured = pass(&producer, &consumer, o.warmup, o.queue_items).await?;
    let mut samples = Vec::with_capacity(o.queue_items);
    let mut last = measured.started;
    for (put, taken) in measured.put.iter().zip(&measured.taken) {
        let taken = taken.ok_or_else(|| BenchError::Miscounted("queue-throughput: an item never arrived".into()))?;
        last = last.max(taken);
        samples.push(taken.saturating_duration_since(*put));
    }
    producing.close().await;
    consuming.close().await;
    let line = Measured {
        implementation: "zk-recipes",
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
    Ok((line, before))
}
