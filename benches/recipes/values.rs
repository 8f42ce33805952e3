//! The contenders of the recipes that are not locks: a `DistributedAtomicLong` incremented,
//! a `CachedAtomicLong`'s values taken, a `SharedCount` compare-and-set, a typed node's JSON
//! record read and compared-and-set, a service instance registered and unregistered, a service's
//! instances queried (with and without a `ServiceCache`), each beside its raw floor.

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use zk_recipes::discovery::{ServiceCache, ServiceDiscovery, ServiceInstance};
use zk_recipes::protocol::values::{decode_atomic_long, decode_count, encode_count, encode_long};
use zk_recipes::zk::{self, Acls, CreateMode};
use zk_recipes::{CachedAtomicLong, Codec, DistributedAtomicLong, Framework, JsonCodec, ModeledFramework, SharedCount};

use crate::contenders::{stall_guard, Cycle, CycleTimes};
use crate::report::{BenchError, BenchResult, Exclusion};

/// The service every discovery contender registers or queries.
pub(crate) const SERVICE: &str = "bench";

/// typed-cas's record: a small configuration, the fields of the Java `Config` of
/// `interop/CuratorBench.java` in the same order, so both sides write the same JSON (a default
/// Jackson `ObjectMapper`'s, which `JsonCodec` writes byte for byte).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub(crate) struct Config {
    pub(crate) name: String,
    /// Raised by one at every write applied: at the end, the number of writes.
    pub(crate) revision: i64,
    pub(crate) replicas: i32,
    pub(crate) ratio: f64,
    pub(crate) enabled: bool,
    pub(crate) regions: Vec<String>,
    pub(crate) owner: Option<String>,
}

impl Config {
    /// The record every typed-cas line starts from (revision 0).
    pub(crate) fn seed() -> Config {
        Config {
            name: "checkout".to_owned(),
            revision: 0,
            replicas: 3,
            ratio: 0.75,
            enabled: true,
            regions: vec!["eu-west".to_owned(), "us-east".to_owned()],
            owner: None,
        }
    }
}

/// The tries of a counter line's contenders, shared (warmup included).
#[derive(Debug, Default)]
pub(crate) struct Attempts {
    /// Every write tried (a versioned set or create).
    pub(crate) tries: AtomicU64,
    /// Ops that ended applied.
    pub(crate) succeeded: AtomicU64,
    /// `increment()` calls whose retry policy gave up (the contender called it again).
    pub(crate) gave_up: AtomicU64,
}

impl Attempts {
    /// `tries/op 1.23, gave up 4` over every op of the line.
    pub(crate) fn summary(&self) -> String {
        let succeeded = self.succeeded.load(Ordering::Relaxed);
        format!(
            "tries per applied op {:.2} (warmup included), retry policy gave up {} times",
            self.tries.load(Ordering::Relaxed) as f64 / succeeded.max(1) as f64,
            self.gave_up.load(Ordering::Relaxed)
        )
    }

    /// The line's JSON fields for `applied` ops: `,"tries_per_op":..,"gave_up":..`.
    pub(crate) fn json_fields(&self, applied: u64) -> String {
        format!(
            ",\"tries_per_op\":{:.3},\"gave_up\":{}",
            self.tries.load(Ordering::Relaxed) as f64 / applied.max(1) as f64,
            self.gave_up.load(Ordering::Relaxed)
        )
    }
}

/// The values a cached-counter line's contenders were handed (warmup included): a value
/// handed out twice fails the run.
#[derive(Debug, Default)]
pub(crate) struct Handed {
    values: Mutex<HashSet<i64>>,
}

impl Handed {
    fn record(&self, value: i64) -> BenchResult<()> {
        let mut values = self.values.lock().unwrap_or_else(|e| e.into_inner());
        if values.insert(value) {
            return Ok(());
        }
        Err(BenchError::Miscounted(format!("cached-counter: value {value} handed out twice")))
    }

    /// (how many values, the largest).
    pub(crate) fn summary(&self) -> (usize, Option<i64>) {
        let values = self.values.lock().unwrap_or_else(|e| e.into_inner());
        (values.len(), values.iter().copied().max())
    }
}

/// A raw floor's block of a cached counter: its first value and how many were handed out.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RawBlock {
    start: i64,
    used: u32,
}

/// One contender of a non-lock workload; one op each cycle.
pub(crate) enum ValueContender {
    /// `counter.increment()` until it reports success.
    Atomic { framework: Framework, counter: DistributedAtomicLong, attempts: Arc<Attempts> },
    /// The atomic's algorithm with plain calls: getData, setData at the version read (a create
    /// when missing), the same fixed sleep and number of retries between tries.
    RawAtomic { client: zk::Client, path: String, retries: u32, sleep: Duration, attempts: Arc<Attempts> },
    /// `cached.next()` until it reports success; every value recorded.
    Cached { framework: Framework, cached: CachedAtomicLong, attempts: Arc<Attempts>, handed: Arc<Handed> },
    /// The cached counter's algorithm with plain calls: the raw atomic's add of `factor` when
    /// the block is used up, the values of the block handed out one by one.
    RawCached {
        client: zk::Client,
        path: String,
        factor: u32,
        block: Option<RawBlock>,
        retries: u32,
        sleep: Duration,
        attempts: Arc<Attempts>,
        handed: Arc<Handed>,
    },
    /// `count.try_set(&count.versioned_count()?, n + 1)` until it returns true.
    SharedCount { framework: Framework, count: SharedCount, attempts: Arc<Attempts> },
    /// The shared count's algorithm with plain calls: setData at the version last seen;
    /// getData after a conflict. No watch (the library's copy follows the node with one).
    RawSharedCount { client: zk::Client, path: String, seen: Option<(i32, i32)>, attempts: Arc<Attempts> },
    /// `config.read()`, the record with its revision + 1 written by
    /// `config.compare_and_set(&next, read.stat.version)`; read again after a `BadVersion`.
    Typed { framework: Framework, config: ModeledFramework<Config>, attempts: Arc<Attempts> },
    /// The typed line's cycle with plain calls and the same codec: getData, decode, revision +
    /// 1, encode, setData at the version read.
    RawTyped { client: zk::Client, path: String, attempts: Arc<Attempts> },
    /// `register(&instance)`, then `unregister(name, id)`.
    Register { framework: Framework, discovery: ServiceDiscovery, instance: ServiceInstance },
    /// An ephemeral create of the instance's JSON, then its delete.
    RawRegister { client: zk::Client, path: String, data: Vec<u8> },
    /// `query_for_instances(SERVICE)`, which must find `expected` instances.
    Query { framework: Framework, discovery: ServiceDiscovery, expected: usize },
    /// `cache.instances()` of a started `ServiceCache`.
    CachedQuery { framework: Framework, cache: ServiceCache, expected: usize },
    /// getChildren of the service, then getData of each child, awaited one after another (the
    /// JSON is not parsed).
    RawQuery { client: zk::Client, dir: String, expected: usize },
}

fn persistent() -> zk::CreateOptions<'static> {
    CreateMode::Persistent.with_acls(Acls::anyone_all())
}

fn ephemeral() -> zk::CreateOptions<'static> {
    CreateMode::Ephemeral.with_acls(Acls::anyone_all())
}

fn found(what: &str, found: usize, expected: usize) -> BenchResult<()> {
    if found == expected {
        return Ok(());
    }
    Err(BenchError::Failed(format!("{what} found {found} instances, expected {expected}")))
}

impl ValueContender {
    async fn op(&mut self) -> BenchResult<()> {
        match self {
            ValueContender::Atomic { counter, attempts, .. } => loop {
                let result = stall_guard(counter.increment()).await??;
                attempts.tries.fetch_add(u64::from(result.stats().optimistic_tries), Ordering::Relaxed);
                if result.succeeded() {
                    attempts.succeeded.fetch_add(1, Ordering::Relaxed);
                    return Ok(());
                }
                attempts.gave_up.fetch_add(1, Ordering::Relaxed);
            },
            ValueContender::RawAtomic { client, path, retries, sleep, attempts } => loop {
                if raw_add(client, path, 1, *retries, *sleep, attempts).await?.is_some() {
                    attempts.succeeded.fetch_add(1, Ordering::Relaxed);
                    return Ok(());
                }
                attempts.gave_up.fetch_add(1, Ordering::Relaxed);
            },
            ValueContender::Cached { cached, attempts, handed, .. } => loop {
                let result = stall_guard(cached.next()).await??;
                attempts.tries.fetch_add(u64::from(result.stats().optimistic_tries), Ordering::Relaxed);
                if result.succeeded() {
                    attempts.succeeded.fetch_add(1, Ordering::Relaxed);
                    return handed.record(*result.pre_value());
                }
                attempts.gave_up.fetch_add(1, Ordering::Relaxed);
            },
            ValueContender::RawCached { client, path, factor, block, retries, sleep, attempts, handed } => {
                let current = match *block {
                    Some(current) if current.used < *factor => current,
                    _ => loop {
                        let delta = i64::from(*factor);
                        if let Some(pre) = raw_add(client, path, delta, *retries, *sleep, attempts).await? {
                            break RawBlock { start: pre, used: 0 };
                        }
                        attempts.gave_up.fetch_add(1, Ordering::Relaxed);
                    },
                };
                *block = Some(RawBlock { start: current.start, used: current.used + 1 });
                attempts.succeeded.fetch_add(1, Ordering::Relaxed);
                handed.record(current.start.wrapping_add(i64::from(current.used)))
            }
            ValueContender::SharedCount { count, attempts, .. } => loop {
                let seen = count.versioned_count()?;
                attempts.tries.fetch_add(1, Ordering::Relaxed);
                if stall_guard(count.try_set(&seen, seen.value().wrapping_add(1))).await?? {
                    attempts.succeeded.fetch_add(1, Ordering::Relaxed);
                    return Ok(());
                }
            },
            ValueContender::RawSharedCount { client, path, seen, attempts } => loop {
                let (value, version) = match *seen {
                    Some(seen) => seen,
                    None => {
                        let (data, stat) = client.get_data(path).await?;
                        let value = decode_count(&data)
                            .map_err(|e| BenchError::Failed(format!("raw floor: {path}: {}", e.found)))?;
                        (value, stat.version)
                    }
                };
                attempts.tries.fetch_add(1, Ordering::Relaxed);
                let next = value.wrapping_add(1);
                match client.set_data(path, &encode_count(next), Some(version)).await {
                    Ok(stat) => {
                        *seen = Some((next, stat.version));
                        attempts.succeeded.fetch_add(1, Ordering::Relaxed);
                        return Ok(());
                    }
                    Err(zk::Error::BadVersion) => *seen = None,
                    Err(e) => return Err(e.into()),
                }
            },
            ValueContender::Typed { config, attempts, .. } => loop {
                let read = stall_guard(config.read()).await??;
                let mut next = read.value;
                next.revision += 1;
                attempts.tries.fetch_add(1, Ordering::Relaxed);
                match stall_guard(config.compare_and_set(&next, read.stat.version)).await? {
                    Ok(_) => {
                        attempts.succeeded.fetch_add(1, Ordering::Relaxed);
                        return Ok(());
                    }
                    Err(zk_recipes::Error::BadVersion { .. }) => {}
                    Err(e) => return Err(e.into()),
                }
            },
            ValueContender::RawTyped { client, path, attempts } => loop {
                let (data, stat) = client.get_data(path).await?;
                let mut next = decode_config(path, &data)?;
                next.revision += 1;
                attempts.tries.fetch_add(1, Ordering::Relaxed);
                match client.set_data(path, &encode_config(&next)?, Some(stat.version)).await {
                    Ok(_) => {
                        attempts.succeeded.fetch_add(1, Ordering::Relaxed);
                        return Ok(());
                    }
                    Err(zk::Error::BadVersion) => {}
                    Err(e) => return Err(e.into()),
                }
            },
            ValueContender::Register { discovery, instance, .. } => {
                stall_guard(discovery.register(instance)).await??;
                discovery.unregister(&instance.name, &instance.id).await?;
                Ok(())
            }
            ValueContender::RawRegister { client, path, data } => {
                client.create(path, data, &ephemeral()).await?;
                client.delete(path, None).await?;
                Ok(())
            }
            ValueContender::Query { discovery, expected, .. } => {
                let instances = stall_guard(discovery.query_for_instances(SERVICE)).await??;
                found("query_for_instances", instances.len(), *expected)
            }
            ValueContender::CachedQuery { cache, expected, .. } => {
                found("ServiceCache::instances", cache.instances().len(), *expected)
            }
            ValueContender::RawQuery { client, dir, expected } => {
                let mut ids = client.list_children(dir).await?;
                ids.sort_unstable();
                let mut read = 0;
                for id in ids {
                    match client.get_data(&format!("{dir}/{id}")).await {
                        Ok(_) => read += 1,
                        Err(zk::Error::NoNode) => {}
                        Err(e) => return Err(e.into()),
                    }
                }
                found("raw floor", read, *expected)
            }
        }
    }
}

/// The raw atomic's add of `delta`: getData, setData at the version read (a create when
/// missing), up to `retries` more tries after a conflict with `sleep` between; the value
/// before the add, `None` when every try lost.
async fn raw_add(
    client: &zk::Client,
    path: &str,
    delta: i64,
    retries: u32,
    sleep: Duration,
    attempts: &Attempts,
) -> BenchResult<Option<i64>> {
    for retry in 0..=retries {
        attempts.tries.fetch_add(1, Ordering::Relaxed);
        let written = match client.get_data(path).await {
            Ok((data, stat)) => {
                let value = decode_atomic_long(&data)
                    .map_err(|e| BenchError::Failed(format!("raw floor: {path}: {}", e.found)))?;
                let next = encode_long(value.wrapping_add(delta));
                match client.set_data(path, &next, Some(stat.version)).await {
                    Ok(_) => Some(value),
                    Err(zk::Error::BadVersion) => None,
                    Err(e) => return Err(e.into()),
                }
            }
            Err(zk::Error::NoNode) => match client.create(path, &encode_long(delta), &persistent()).await {
                Ok(_) => Some(0),
                Err(zk::Error::NodeExists) => None,
                Err(e) => return Err(e.into()),
            },
            Err(e) => return Err(e.into()),
        };
        if written.is_some() {
            return Ok(written);
        }
        if retry < retries {
            tokio::time::sleep(sleep).await;
        }
    }
    Ok(None)
}

impl Cycle for ValueContender {
    /// One op; the latency sample is the whole op (the exclusion check does not apply).
    async fn cycle(&mut self, _exclusion: &Exclusion, _hold: Duration) -> BenchResult<CycleTimes> {
        let started = Instant::now();
        self.op().await?;
        let took = started.elapsed();
        Ok(CycleTimes { acquire: took, cycle: took, write: None })
    }

    async fn close(self) -> BenchResult<()> {
        match self {
            ValueContender::Atomic { framework, .. }
            | ValueContender::Cached { framework, .. }
            | ValueContender::SharedCount { framework, .. }
            | ValueContender::Typed { framework, .. }
            | ValueContender::Query { framework, .. } => framework.close().await,
            ValueContender::Register { framework, discovery, .. } => {
                discovery.close().await?;
                framework.close().await;
            }
            ValueContender::CachedQuery { framework, cache, .. } => {
                cache.close().await;
                framework.close().await;
            }
            ValueContender::RawAtomic { .. }
            | ValueContender::RawCached { .. }
            | ValueContender::RawSharedCount { .. }
            | ValueContender::RawTyped { .. }
            | ValueContender::RawRegister { .. }
            | ValueContender::RawQuery { .. } => {}
        }
        Ok(())
    }
}

/// The counter at `path` as 8 big-endian bytes (0 when missing).
pub(crate) async fn read_long(client: &zk::Client, path: &str) -> BenchResult<i64> {
    match client.get_data(path).await {
        Ok((data, _)) => decode_atomic_long(&data).map_err(|e| BenchError::Failed(format!("{path}: {}", e.found))),
        Err(zk::Error::NoNode) => Ok(0),
        Err(e) => Err(e.into()),
    }
}

/// The count at `path` as 4 big-endian bytes.
pub(crate) async fn read_count(client: &zk::Client, path: &str) -> BenchResult<i32> {
    let (data, _) = client.get_data(path).await?;
    decode_count(&data).map_err(|e| BenchError::Failed(format!("{path}: {}", e.found)))
}

/// `config`'s JSON ([`JsonCodec`], as the typed line writes it).
pub(crate) fn encode_config(config: &Config) -> BenchResult<Vec<u8>> {
    JsonCodec.encode(config).map_err(|e| BenchError::Failed(format!("encoding the typed-cas record: {e}")))
}

/// The record in the JSON at `path`.
pub(crate) fn decode_config(path: &str, data: &[u8]) -> BenchResult<Config> {
    JsonCodec.decode(data).map_err(|e| BenchError::Failed(format!("{path}: not the typed-cas record: {e}")))
}

/// Instance `i` of [`SERVICE`], as every discovery line registers it.
pub(crate) fn instance(i: usize) -> BenchResult<ServiceInstance> {
    Ok(ServiceInstance::new(SERVICE)?
        .with_id(&format!("instance-{i:05}"))?
        .with_address("127.0.0.1")
        .with_port(8080)?)
}

/// `n` instances of [`SERVICE`] registered through `discovery`, 32 at a time (not measured).
pub(crate) async fn register_all(discovery: &ServiceDiscovery, n: usize) -> BenchResult<()> {
    use futures::{StreamExt, TryStreamExt};
    let instances = (0..n).map(instance).collect::<BenchResult<Vec<_>>>()?;
    futures::stream::iter(
        instances.iter().map(|i| async move { discovery.register(i).await.map_err(BenchError::from) }),
    )
    .buffer_unordered(32)
    .try_collect::<()>()
    .await
}
