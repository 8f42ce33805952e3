//! The run loop, the environment of a run, and each workload's lines.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::Barrier;
use zk_recipes::discovery::{JsonInstanceSerializer, ServiceDiscovery};
use zk_recipes::retry::RetryNTimes;
use zk_recipes::testing::CountingProxy;
use zk_recipes::zk::{self, Acls, CreateMode};
use zk_recipes::{
    CachedAtomicLong, DistributedAtomicLong, Framework, InterProcessMutex, InterProcessReadWriteLock,
    InterProcessSemaphore, ModelSpec, ModeledFramework, SharedCount, WaitStrategy, ZPath,
};

use crate::contenders::{Contender, Cycle, HalfCounter, Mix, ReleaseStyle};
use crate::options::{Options, Workload, WAITERS_PER_SESSION};
use crate::raw::{RawMutex, RawReadWrite, RawSemaphore};
use crate::report::{BenchError, BenchResult, CountersAt, Exclusion, Halves, Measured, ServerCounters, Tally};
use crate::values::{self, Attempts, ValueContender};
use crate::{caches, curator, queues};

/// Every run works under `BENCH_ROOT/<pid>-<millis>`, deleted at the end.
pub(crate) const BENCH_ROOT: &str = "/zk-recipes-bench";

/// Which latency a workload reports.
#[derive(Debug, Clone, Copy)]
enum Latency {
    Cycle,
    Acquire,
}

struct Plan {
    workload: Workload,
    implementation: &'static str,
    warmup: usize,
    cycles: usize,
    hold: Duration,
    latency: Latency,
    max_holders: usize,
    /// Sessions behind the contenders (the `clients` field); contenders may share one.
    sessions: usize,
}

impl Plan {
    /// One session's sequential ops with no critical section (the value, typed-node and
    /// discovery lines): each cycle's latency is the op's.
    fn single_session(workload: Workload, implementation: &'static str, warmup: usize, cycles: usize) -> Plan {
        Plan {
            workload,
            implementation,
            warmup,
            cycles,
            hold: Duration::ZERO,
            latency: Latency::Cycle,
            max_holders: usize::MAX,
            sessions: 1,
        }
    }
}

/// Runs `contenders` (one task each) through `plan.warmup` unmeasured cycles, then, from a
/// common start, through `plan.cycles` measured cycles each.
async fn run<C: Cycle>(env: &Env, plan: Plan, contenders: Vec<C>) -> BenchResult<Measured> {
    // A line left out by `--only` still runs (its setup is the others'), for two cycles.
    let plan = match env.options.measures(plan.implementation) {
        true => plan,
        false => Plan { warmup: 0, cycles: 2, ..plan },
    };
    let tasks_count = contenders.len();
    let exclusion = Exclusion::new(plan.max_holders);
    // Everyone warms up, then waits at `warm` while the server's counters are read, then
    // starts at `go`, even after a failure, so that no one is left waiting.
    let warm = Arc::new(Barrier::new(tasks_count + 1));
    let go = Arc::new(Barrier::new(tasks_count + 1));
    let mut tasks = Vec::with_capacity(tasks_count);
    for mut contender in contenders {
        let (exclusion, warm, go) = (exclusion.clone(), warm.clone(), go.clone());
        let (warmup, cycles, hold, latency) = (plan.warmup, plan.cycles, plan.hold, plan.latency);
        tasks.push(tokio::spawn(async move {
            let mut outcome: BenchResult<Vec<(Duration, Option<bool>)>> = Ok(Vec::with_capacity(cycles));
            for _ in 0..warmup {
                if let Err(e) = contender.cycle(&exclusion, hold).await {
                    outcome = Err(e);
                    break;
                }
            }
            warm.wait().await;
            go.wait().await;
            if let Ok(samples) = &mut outcome {
                for _ in 0..cycles {
                    match contender.cycle(&exclusion, hold).await {
                        Ok(times) => samples.push((
                            match latency {
                                Latency::Cycle => times.cycle,
                                Latency::Acquire => times.acquire,
                            },
                            times.write,
                        )),
                        Err(e) => {
                            outcome = Err(e);
                            break;
                        }
                    }
                }
            }
            (outcome.map(|samples| (samples, Instant::now())), contender)
        }));
    }
    warm.wait().await;
    let counters_before = ServerCounters::read(&env.server);
    let counts_before = env.proxy.as_ref().map(|p| p.counts());
    let cpu_before = crate::report::process_cpu();
    go.wait().await;
    let started = Instant::now();
    let mut samples = Vec::with_capacity(tasks_count * plan.cycles);
    let mut halves: Option<Halves> = None;
    let mut last_end = started;
    let mut failure = None;
    let mut finished = Vec::with_capacity(tasks_count);
    for task in tasks {
        match task.await {
            Ok((outcome, contender)) => {
                finished.push(contender);
                match outcome {
                    Ok((client_samples, ended)) => {
                        for (sample, write) in client_samples {
                            samples.push(sample);
                            if let Some(write) = write {
                                let halves = halves.get_or_insert_with(Halves::default);
                                if write { &mut halves.write_samples } else { &mut halves.read_samples }.push(sample);
                            }
                        }
                        last_end = last_end.max(ended);
                    }
                    Err(e) => {
                        if failure.is_none() || matches!(e, BenchError::Violation(_)) {
                            failure = Some(e);
                        }
                    }
                }
            }
            Err(e) => failure = failure.or(Some(BenchError::Failed(format!("contender task failed: {e}")))),
        }
    }
    let secs = (last_end - started).as_secs_f64();
    let cpu = cpu_before.zip(crate::report::process_cpu()).map(|(before, after)| after.saturating_sub(before));
    let counters_after = ServerCounters::read(&env.server);
    let counts_after = env.proxy.as_ref().map(|p| p.counts());
    for contender in finished {
        if let (Some(halves), Some((reads, writes))) = (halves.as_mut(), contender.halves()) {
            halves.read_requests.merge(reads);
            halves.write_requests.merge(writes);
        }
        if let Err(e) = contender.close().await {
            failure = failure.or(Some(e));
        }
    }
    if exclusion.violated.load(Ordering::SeqCst) {
        return Err(failure.unwrap_or_else(|| BenchError::Violation("exclusion counter".into())));
    }
    if let Some(e) = failure {
        return Err(e);
    }
    let ops = samples.len();
    let (requests_per_op, fsyncs_per_op) = match (counters_before, counters_after) {
        (Some(before), Some(after)) if ops > 0 && before.servers == after.servers => {
            let fsyncs = after.fsyncs.saturating_sub(before.fsyncs) as f64 / (after.servers * ops as u64) as f64;
            (
                Some(after.received.saturating_sub(before.received) as f64 / ops as f64),
                Some(fsyncs).filter(|&f| f > 0.0),
            )
        }
        _ => (None, None),
    };
    let mut breakdown = counts_before.zip(counts_after).map(|(before, after)| after.since(&before).per_op(ops));
    if let Some(halves) = halves.as_ref().filter(|h| h.read_requests.ops + h.write_requests.ops > 0) {
        // The read-write contenders counted through proxies of their own, not the shared one.
        let mut both = Tally::default();
        both.merge(&halves.read_requests);
        both.merge(&halves.write_requests);
        breakdown = Some(both.per_op());
    }
    Ok(Measured {
        implementation: plan.implementation,
        workload: plan.workload,
        clients: plan.sessions,
        secs,
        samples,
        requests_per_op,
        fsyncs_per_op,
        breakdown,
        halves,
        ops: None,
        // The bench's own CPU while the contenders ran: the client's cost of an op.
        extra: match cpu {
            Some(cpu) if ops > 0 => format!(",\"client_cpu_us_per_op\":{:.1}", cpu.as_secs_f64() * 1e6 / ops as f64),
            _ => String::new(),
        },
    })
}

/// Where one benchmark run keeps its nodes, and how to reach the server.
pub(crate) struct Env {
    /// The server (for `srvr`).
    pub(crate) server: String,
    /// What clients connect to: the server, or the counting proxy in front of it.
    pub(crate) connect: String,
    pub(crate) proxy: Option<CountingProxy>,
    /// A fresh root per run, so runs against a shared server do not meet.
    pub(crate) root: String,
    pub(crate) options: Options,
}

impl Env {
    pub(crate) fn dir(&self, workload: Workload, implementation: &str) -> String {
        format!("{}/{}/{}", self.root, workload.name(), implementation)
    }

    /// cache-load's tree, created once per run and loaded by every line.
    pub(crate) fn load_tree(&self) -> String {
        format!("{}/{}/tree", self.root, Workload::CacheLoad.name())
    }

    /// Where `workload`'s Curator run goes: this run's server, proxy and directory.
    pub(crate) fn curator_target(&self, workload: Workload) -> curator::Target<'_> {
        curator::Target {
            connect: &self.connect,
            server: &self.server,
            // cache-load: every line loads the same tree.
            dir: if workload == Workload::CacheLoad { self.load_tree() } else { self.dir(workload, "curator") },
            proxy: self.proxy.as_ref(),
        }
    }

    async fn framework(&self) -> BenchResult<Framework> {
        Ok(Framework::connect(&self.connect).await?)
    }

    /// `n` frameworks whose lock waiters each watch the node ahead of them (the
    /// `zk-recipes` lines of the lock workloads; the default, the mirror, has its own).
    async fn frameworks(&self, n: usize) -> BenchResult<Vec<Framework>> {
        let start = || async {
            Ok(Framework::builder(&self.connect).wait_strategy(WaitStrategy::PerWaiterWatch).start().await?)
        };
        futures::future::try_join_all((0..n).map(|_| start())).await
    }

    /// `n` frameworks for a lock line: `zk-recipes-mirror` (and its variants,
    /// `zk-recipes-mirror-*`) waits on the mirror, any other the per-waiter watch.
    async fn frameworks_for(&self, implementation: &str, n: usize) -> BenchResult<Vec<Framework>> {
        if implementation.starts_with("zk-recipes-mirror") {
            self.mirror_frameworks(n).await
        } else {
            self.frameworks(n).await
        }
    }

    /// `n` frameworks whose lock waits go through their session's mirror of the directory.
    async fn mirror_frameworks(&self, n: usize) -> BenchResult<Vec<Framework>> {
        let start =
            || async { Ok(Framework::builder(&self.connect).wait_strategy(WaitStrategy::Mirror).start().await?) };
        futures::future::try_join_all((0..n).map(|_| start())).await
    }

    pub(crate) async fn raw_client(&self) -> BenchResult<zk::Client> {
        Ok(zk::Client::connect(&self.connect).await?)
    }

    /// A raw client per contender, and `dirs` created as persistent nodes (parents included).
    async fn raw_clients(&self, n: usize, dirs: &[&str]) -> BenchResult<Vec<zk::Client>> {
        let clients = futures::future::try_join_all((0..n).map(|_| self.raw_client())).await?;
        let options = CreateMode::Persistent.with_acls(Acls::anyone_all());
        for dir in dirs {
            clients[0].mkdir(dir, &options).await?;
        }
        Ok(clients)
    }

    async fn mutex_contenders(&self, n: usize, dir: &str, release: ReleaseStyle) -> BenchResult<Vec<Contender>> {
        let mut contenders = Vec::with_capacity(n);
        for framework in self.frameworks(n).await? {
            let mutex = InterProcessMutex::new(&framework, dir)?;
            contenders.push(Contender::Mutex { framework, mutex, release });
        }
        Ok(contenders)
    }

    /// Mutex contenders whose sessions wait on their mirror of the lock directory.
    async fn mirror_mutex_contenders(&self, n: usize, dir: &str) -> BenchResult<Vec<Contender>> {
        let mut contenders = Vec::with_capacity(n);
        for framework in self.mirror_frameworks(n).await? {
            let mutex = InterProcessMutex::new(&framework, dir)?;
            contenders.push(Contender::Mutex { framework, mutex, release: ReleaseStyle::Await });
        }
        Ok(contenders)
    }

    async fn raw_mutexes(&self, n: usize, dir: &str) -> BenchResult<Vec<RawMutex>> {
        let clients = self.raw_clients(n, &[dir]).await?;
        Ok(clients.into_iter().map(|client| RawMutex { client, dir: dir.to_owned() }).collect())
    }

    /// With `--count-ops`, a proxy of its own for one read-write contender's session (so its
    /// requests can be told apart per half); `None` otherwise.
    async fn half_counter(&self) -> BenchResult<Option<HalfCounter>> {
        if self.proxy.is_none() {
            return Ok(None);
        }
        let upstream = self.server.split(',').next().unwrap_or_default().split('/').next().unwrap_or_default();
        let proxy = CountingProxy::start(upstream).await.map_err(|e| BenchError::Failed(e.to_string()))?;
        Ok(Some(HalfCounter::new(proxy)))
    }

    /// Where a read-write contender connects: its own counting proxy, or the run's address.
    fn connect_for(&self, counter: &Option<HalfCounter>) -> String {
        match counter {
            Some(counter) => counter.proxy.connect_string(),
            None => self.connect.clone(),
        }
    }

    /// Deletes a raw floor's persistent directories (children first), best effort.
    pub(crate) async fn remove_tree(&self, dir: &str) {
        let Ok(client) = self.raw_client().await else { return };
        let mut stack = vec![(dir.to_owned(), false)];
        while let Some((node, expanded)) = stack.pop() {
            if expanded {
                let _ = client.delete(&node, None).await;
                continue;
            }
            stack.push((node.clone(), true));
            if let Ok(children) = client.list_children(&node).await {
                stack.extend(children.into_iter().map(|c| (format!("{node}/{c}"), false)));
            }
        }
    }
}

/// Runs zk-recipes mutex and semaphore contention (`--clients` sessions each, no hold) for
/// `duration`, unmeasured, so that a freshly started server's JIT has compiled its hot paths
/// before the first line: otherwise the first lines of a run see a slower server than the later
/// ones (a quarter to a third fewer ops/s in `mutex-uncontended`).
pub(crate) async fn warm_up_server(env: &Env, duration: Duration) -> BenchResult<()> {
    let o = &env.options;
    let dir = format!("{}/server-warmup", env.root);
    let deadline = Instant::now() + duration;
    let mut contenders = env.mutex_contenders(o.clients, &format!("{dir}/mutex"), ReleaseStyle::Await).await?;
    for framework in env.frameworks(o.clients).await? {
        let semaphore = InterProcessSemaphore::new(&framework, &format!("{dir}/semaphore"), o.max_leases)?;
        contenders.push(Contender::Semaphore { framework, semaphore });
    }
    let (mutex, semaphore) = (Exclusion::new(1), Exclusion::new(o.max_leases));
    let tasks: Vec<_> = contenders
        .into_iter()
        .map(|mut contender| {
            let exclusion = if matches!(contender, Contender::Semaphore { .. }) { &semaphore } else { &mutex }.clone();
            tokio::spawn(async move {
                while Instant::now() < deadline {
                    if let Err(e) = contender.cycle(&exclusion, Duration::ZERO).await {
                        return (Err(e), contender);
                    }
                }
                (Ok(()), contender)
            })
        })
        .collect();
    let mut failure = None;
    for task in tasks {
        match task.await {
            Ok((outcome, contender)) => {
                if let Err(e) = outcome.and(contender.close().await) {
                    if failure.is_none() || matches!(e, BenchError::Violation(_)) {
                        failure = Some(e);
                    }
                }
            }
            Err(e) => failure = failure.or(Some(BenchError::Failed(format!("warm-up task failed: {e}")))),
        }
    }
    failure.map_or(Ok(()), Err)
}

/// Runs one workload through every implementation; returns the lines' data.
pub(crate) async fn run_workload(env: &Env, workload: Workload) -> BenchResult<Vec<Measured>> {
    let o = &env.options;
    let mut results = Vec::new();
    match workload {
        Workload::ManyLocks => return many_locks(env).await,
        Workload::CacheLoad => results = caches::cache_load(o, &env.connect, &env.load_tree()).await?,
        Workload::CacheEvents => {
            // A fresh set of nodes per line and round (the writer counts versions from 0).
            let stamp = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
            let dir = format!("{}-{}", env.dir(workload, "zk-recipes"), stamp.as_millis());
            results = caches::cache_events(o, &env.connect, &dir).await?;
            env.remove_tree(&dir).await;
        }
        Workload::MutexUncontended => {
            let plan = |implementation| Plan {
                workload,
                implementation,
                warmup: o.warmup,
                cycles: o.iters,
                hold: o.hold,
                latency: Latency::Cycle,
                max_holders: 1,
                sessions: 1,
            };
            for (implementation, listed) in [("raw-floor", false), ("raw-floor-listed", true)] {
                let dir = env.dir(workload, implementation);
                let raw = env.raw_mutexes(1, &dir).await?;
                let contenders = raw.into_iter().map(|raw| Contender::RawCreateDelete { raw, listed }).collect();
                results.push(run(env, plan(implementation), contenders).await?);
                env.remove_tree(&dir).await;
            }

            let dir = env.dir(workload, "raw-pipelined");
            let raw = env.raw_mutexes(1, &dir).await?;
            let contenders = raw.into_iter().map(|raw| Contender::RawMutexPipelined { raw, pending_delete: None });
            results.push(run(env, plan("raw-floor-pipelined"), contenders.collect()).await?);
            env.remove_tree(&dir).await;

            let dir = env.dir(workload, "zk-recipes");
            let contenders = env.mutex_contenders(1, &dir, ReleaseStyle::Await).await?;
            results.push(run(env, plan("zk-recipes"), contenders).await?);

            let dir = env.dir(workload, "zk-recipes-drop");
            let contenders = env.mutex_contenders(1, &dir, ReleaseStyle::Drop).await?;
            results.push(run(env, plan("zk-recipes-drop"), contenders).await?);
        }
        Workload::MutexContended => {
            let plan = |implementation| Plan {
                workload,
                implementation,
                warmup: o.warmup_cycles,
                cycles: o.cycles,
                hold: o.hold,
                latency: Latency::Acquire,
                max_holders: 1,
                sessions: o.clients,
            };
            let dir = env.dir(workload, "raw");
            let raw = env.raw_mutexes(o.clients, &dir).await?;
            results.push(run(env, plan("raw-floor"), raw.into_iter().map(Contender::RawMutex).collect()).await?);
            env.remove_tree(&dir).await;

            // No lock at all: every session creates its node and deletes it at once, without
            // waiting for anyone. Each acquisition of a lock on Curator's layout costs these
            // two writes, and a release cannot wait for the next acquisition to share a
            // request with it, so no lock on this server runs faster than this line.
            let dir = env.dir(workload, "write-ceiling");
            let raw = env.raw_mutexes(o.clients, &dir).await?;
            let contenders = raw.into_iter().map(|raw| Contender::RawCreateDelete { raw, listed: false }).collect();
            let ceiling = Plan { max_holders: usize::MAX, ..plan("write-ceiling") };
            results.push(run(env, ceiling, contenders).await?);
            env.remove_tree(&dir).await;

            let dir = env.dir(workload, "raw-two-ahead");
            let raw = env.raw_mutexes(o.clients, &dir).await?;
            results.push(run(env, plan("raw-two-ahead"), raw.into_iter().map(Contender::RawTwoAhead).collect()).await?);
            env.remove_tree(&dir).await;

            let dir = env.dir(workload, "zk-recipes");
            let contenders = env.mutex_contenders(o.clients, &dir, ReleaseStyle::Await).await?;
            results.push(run(env, plan("zk-recipes"), contenders).await?);

            let dir = env.dir(workload, "zk-recipes-mirror");
            let contenders = env.mirror_mutex_contenders(o.clients, &dir).await?;
            results.push(run(env, plan("zk-recipes-mirror"), contenders).await?);
        }
        Workload::Semaphore => {
            let plan = |implementation| Plan {
                workload,
                implementation,
                warmup: o.warmup_cycles,
                cycles: o.cycles,
                hold: o.sem_hold,
                latency: Latency::Acquire,
                max_holders: o.max_leases,
                sessions: o.clients,
            };
            let dir = env.dir(workload, "raw");
            let (locks, leases) = (format!("{dir}/locks"), format!("{dir}/leases"));
            let clients = env.raw_clients(o.clients, &[&locks, &leases]).await?;
            let contenders = clients.into_iter().map(|client| {
                let locks = RawMutex { client: client.clone(), dir: locks.clone() };
                Contender::RawSemaphore(RawSemaphore { client, locks, leases: leases.clone(), max: o.max_leases })
            });
            results.push(run(env, plan("raw-floor"), contenders.collect()).await?);
            env.remove_tree(&dir).await;

            // `zk-recipes-mirror-pipelined`: the mirror, with the internal lock's delete sent
            // right behind the lease's create when the mirror shows room.
            for implementation in ["zk-recipes", "zk-recipes-mirror", "zk-recipes-mirror-pipelined"] {
                let dir = env.dir(workload, implementation);
                let pipelined = implementation == "zk-recipes-mirror-pipelined";
                let frameworks = env.frameworks_for(implementation, o.clients).await?;
                let mut contenders = Vec::with_capacity(o.clients);
                for framework in frameworks {
                    let semaphore =
                        InterProcessSemaphore::new(&framework, &dir, o.max_leases)?.pipelined_admission(pipelined);
                    contenders.push(Contender::Semaphore { framework, semaphore });
                }
                results.push(run(env, plan(implementation), contenders).await?);
            }
        }
        Workload::ManyWaiters => {
            // WAITERS_PER_SESSION tasks per session share the session's budget of cycles, so
            // the run is as long as mutex-contended but the queue is that many times deeper.
            let per_task = |n: usize| n.div_ceil(WAITERS_PER_SESSION);
            let plan = |implementation| Plan {
                workload,
                implementation,
                warmup: per_task(o.warmup_cycles),
                cycles: per_task(o.cycles),
                hold: o.hold,
                latency: Latency::Acquire,
                max_holders: 1,
                sessions: o.clients,
            };
            let dir = env.dir(workload, "raw");
            let raw = env.raw_mutexes(o.clients, &dir).await?;
            let contenders = raw.iter().flat_map(|raw| {
                (0..WAITERS_PER_SESSION)
                    .map(|_| Contender::RawMutex(RawMutex { client: raw.client.clone(), dir: raw.dir.clone() }))
            });
            results.push(run(env, plan("raw-floor"), contenders.collect()).await?);
            env.remove_tree(&dir).await;

            for implementation in ["zk-recipes", "zk-recipes-mirror"] {
                let dir = env.dir(workload, implementation);
                let sessions = if implementation == "zk-recipes" {
                    env.mutex_contenders(o.clients, &dir, ReleaseStyle::Await).await?
                } else {
                    env.mirror_mutex_contenders(o.clients, &dir).await?
                };
                let mut contenders = Vec::with_capacity(o.clients * WAITERS_PER_SESSION);
                for session in sessions {
                    if let Contender::Mutex { framework, mutex, release } = session {
                        for _ in 0..WAITERS_PER_SESSION {
                            contenders.push(Contender::Mutex {
                                framework: framework.clone(),
                                mutex: mutex.clone(),
                                release,
                            });
                        }
                    }
                }
                results.push(run(env, plan(implementation), contenders).await?);
            }
        }
        Workload::RwLock => {
            let plan = |implementation| Plan {
                workload,
                implementation,
                warmup: o.warmup_cycles,
                cycles: o.cycles,
                hold: o.rw_hold,
                latency: Latency::Acquire,
                max_holders: usize::MAX, // the read-write section checks instead
                sessions: o.clients,
            };
            let dir = env.dir(workload, "raw");
            let mut contenders = Vec::with_capacity(o.clients);
            for i in 0..o.clients {
                let counter = env.half_counter().await?;
                let client = zk::Client::connect(&env.connect_for(&counter)).await?;
                if i == 0 {
                    client.mkdir(&dir, &CreateMode::Persistent.with_acls(Acls::anyone_all())).await?;
                }
                let raw = RawReadWrite { client, dir: dir.clone() };
                contenders.push(Contender::RawReadWrite { raw, mix: Mix::new(o.seed, i, o.read_pct), counter });
            }
            results.push(run(env, plan("raw-floor"), contenders).await?);
            env.remove_tree(&dir).await;

            for (implementation, strategy) in
                [("zk-recipes", WaitStrategy::PerWaiterWatch), ("zk-recipes-mirror", WaitStrategy::Mirror)]
            {
                let dir = env.dir(workload, implementation);
                let mut contenders = Vec::with_capacity(o.clients);
                for i in 0..o.clients {
                    let counter = env.half_counter().await?;
                    let framework =
                        Framework::builder(&env.connect_for(&counter)).wait_strategy(strategy).start().await?;
                    let lock = InterProcessReadWriteLock::new(&framework, &dir)?;
                    contenders.push(Contender::ReadWrite {
                        framework,
                        lock,
                        mix: Mix::new(o.seed, i, o.read_pct),
                        counter,
                    });
                }
                results.push(run(env, plan(implementation), contenders).await?);
            }
        }
        Workload::LeaderHandoff => {
            // Each op is one term: the leader resigns as soon as it leads, and the next
            // candidate in the queue takes over; a candidate joins again at the end.
            let plan = |implementation| Plan {
                workload,
                implementation,
                warmup: o.warmup_cycles,
                cycles: o.cycles,
                hold: o.hold,
                latency: Latency::Acquire,
                max_holders: 1,
                sessions: o.clients,
            };
            // The latch algorithm is the mutex's (create, list, watch the predecessor; resign
            // = delete), so the raw floor is the raw mutex.
            let dir = env.dir(workload, "raw");
            let raw = env.raw_mutexes(o.clients, &dir).await?;
            results.push(run(env, plan("raw-floor"), raw.into_iter().map(Contender::RawMutex).collect()).await?);
            env.remove_tree(&dir).await;

            for implementation in ["zk-recipes", "zk-recipes-mirror"] {
                let path = env.dir(workload, implementation);
                let frameworks = env.frameworks_for(implementation, o.clients).await?;
                let contenders = frameworks
                    .into_iter()
                    .enumerate()
                    .map(|(i, framework)| Contender::Latch { framework, path: path.clone(), id: format!("c{i}") })
                    .collect();
                results.push(run(env, plan(implementation), contenders).await?);
            }
        }
        Workload::CounterIncrement | Workload::SharedCountCas => results = counters(env, workload).await?,
        Workload::CachedCounter => results = cached_counters(env).await?,
        Workload::QueueThroughput => {
            let dir = env.dir(workload, "zk-recipes");
            let before = || CountersAt::read(&env.server, env.proxy.as_ref());
            let fill = |before: &CountersAt, line: &mut Measured| before.fill(&env.server, env.proxy.as_ref(), line);
            results.extend(queues::queue_throughput(o, &env.connect, &dir, before, fill).await?);
            env.remove_tree(&dir).await;
            env.remove_tree(&format!("{dir}-raw")).await;
        }
        Workload::QueueSharded => {
            let dir = env.dir(workload, "zk-recipes");
            let before = || CountersAt::read(&env.server, env.proxy.as_ref());
            let fill = |before: &CountersAt, line: &mut Measured| before.fill(&env.server, env.proxy.as_ref(), line);
            let lines = queues::queue_sharded(o, &env.connect, &dir, before, fill).await;
            for tree in [dir.clone(), format!("{dir}-raw"), format!("{dir}-leader")] {
                env.remove_tree(&tree).await;
            }
            results.extend(lines?);
        }
        Workload::DiscoveryRegister | Workload::DiscoveryQuery => results = discovery(env, workload).await?,
        Workload::TypedCas => results = typed_cas(env).await?,
    }
    Ok(results)
}

/// typed-cas: one session reads a small JSON record (`values::Config`) and writes it back with
/// its revision + 1 at the version read, `--warmup` + `--iters` times; at the end the record's
/// revision must be the number of writes applied.
async fn typed_cas(env: &Env) -> BenchResult<Vec<Measured>> {
    let o = &env.options;
    let workload = Workload::TypedCas;
    let plan = |implementation| Plan::single_session(workload, implementation, o.warmup, o.iters);
    let mut results = Vec::new();
    for implementation in ["raw-floor", "zk-recipes"] {
        let dir = env.dir(workload, implementation);
        let path = format!("{dir}/config");
        let attempts = Arc::new(Attempts::default());
        let checker = env.raw_client().await?;
        let persistent = CreateMode::Persistent.with_acls(Acls::anyone_all());
        checker.mkdir(&dir, &persistent).await?;
        checker.create(&path, &values::encode_config(&values::Config::seed())?, &persistent).await?;
        let contender = if implementation == "raw-floor" {
            let client = env.raw_client().await?;
            ValueContender::RawTyped { client, path: path.clone(), attempts: attempts.clone() }
        } else {
            let framework = env.framework().await?;
            let config = ModeledFramework::new(&framework, ModelSpec::new(ZPath::parse(&path)?));
            ValueContender::Typed { framework, config, attempts: attempts.clone() }
        };
        let mut line = run(env, plan(implementation), vec![contender]).await?;
        let applied = attempts.succeeded.load(Ordering::Relaxed);
        let revision = values::decode_config(&path, &checker.get_data(&path).await?.0)?.revision;
        if revision != applied as i64 {
            return Err(BenchError::Miscounted(format!(
                "typed-cas {implementation}: the record's revision is {revision} after {applied} writes reported applied"
            )));
        }
        eprintln!("[locks]   {implementation:<20} {}; final revision {revision} = writes applied", attempts.summary());
        // As the counter lines' (a typed write has no retry policy: `gave_up` stays 0).
        line.extra.push_str(&attempts.json_fields(applied));
        results.push(line);
        drop(checker);
        env.remove_tree(&dir).await;
    }
    Ok(results)
}

/// counter-increment and shared-count-cas: `--clients` sessions on one node, each op one
/// applied increment; at the end the node must hold the number of increments applied.
async fn counters(env: &Env, workload: Workload) -> BenchResult<Vec<Measured>> {
    let o = &env.options;
    let plan = |implementation| Plan {
        workload,
        implementation,
        warmup: o.warmup_cycles,
        cycles: o.cycles,
        hold: Duration::ZERO,
        latency: Latency::Cycle,
        max_holders: usize::MAX,
        sessions: o.clients,
    };
    let atomic = workload == Workload::CounterIncrement;
    let mut results = Vec::new();
    for implementation in ["raw-floor", "zk-recipes"] {
        let dir = env.dir(workload, implementation);
        let path = format!("{dir}/counter");
        let attempts = Arc::new(Attempts::default());
        let checker = env.raw_client().await?;
        checker.mkdir(&dir, &CreateMode::Persistent.with_acls(Acls::anyone_all())).await?;
        if !atomic {
            // The count's node with its seed (0), as `SharedCount::start` makes it.
            let seed = zk_recipes::protocol::values::encode_count(0);
            checker.create(&path, &seed, &CreateMode::Persistent.with_acls(Acls::anyone_all())).await?;
        }
        let mut contenders = Vec::with_capacity(o.clients);
        if implementation == "raw-floor" {
            for client in env.raw_clients(o.clients, &[]).await? {
                let attempts = attempts.clone();
                contenders.push(if atomic {
                    let (retries, sleep) = (o.retries, o.retry_sleep);
                    ValueContender::RawAtomic { client, path: path.clone(), retries, sleep, attempts }
                } else {
                    ValueContender::RawSharedCount { client, path: path.clone(), seen: None, attempts }
                });
            }
        } else {
            for framework in env.frameworks(o.clients).await? {
                let attempts = attempts.clone();
                contenders.push(if atomic {
                    let retry = RetryNTimes::new(o.retries, o.retry_sleep);
                    let counter = DistributedAtomicLong::new(&framework, &path, retry)?;
                    ValueContender::Atomic { framework, counter, attempts }
                } else {
                    let count = SharedCount::new(&framework, &path, 0)?;
                    count.start().await?;
                    ValueContender::SharedCount { framework, count, attempts }
                });
            }
        }
        let mut line = run(env, plan(implementation), contenders).await?;
        let applied = attempts.succeeded.load(Ordering::Relaxed);
        let value = if atomic {
            values::read_long(&checker, &path).await?
        } else {
            i64::from(values::read_count(&checker, &path).await?)
        };
        if value != applied as i64 {
            return Err(BenchError::Miscounted(format!(
                "{} {implementation}: the counter holds {value} after {applied} increments reported applied",
                workload.name()
            )));
        }
        eprintln!("[locks]   {implementation:<20} {}; final value {value} = increments applied", attempts.summary());
        line.extra.push_str(&attempts.json_fields(applied));
        results.push(line);
        drop(checker);
        env.remove_tree(&dir).await;
    }
    Ok(results)
}

/// cached-counter: `--clients` sessions, each with a `CachedAtomicLong` of `--cache-factor` on
/// one counter node, each op one value handed out; at the end no value was handed out twice
/// and the node holds the end of the blocks reserved (whole blocks, every value below it).
async fn cached_counters(env: &Env) -> BenchResult<Vec<Measured>> {
    let o = &env.options;
    let workload = Workload::CachedCounter;
    let warmup = o.warmup_cycles * o.cache_factor as usize;
    let plan = |implementation| Plan {
        workload,
        implementation,
        warmup,
        cycles: o.cached_values,
        hold: Duration::ZERO,
        latency: Latency::Cycle,
        max_holders: usize::MAX,
        sessions: o.clients,
    };
    let mut results = Vec::new();
    for implementation in ["raw-floor", "zk-recipes"] {
        let dir = env.dir(workload, implementation);
        let path = format!("{dir}/counter");
        let attempts = Arc::new(Attempts::default());
        let handed = Arc::new(values::Handed::default());
        let checker = env.raw_client().await?;
        checker.mkdir(&dir, &CreateMode::Persistent.with_acls(Acls::anyone_all())).await?;
        let mut contenders = Vec::with_capacity(o.clients);
        if implementation == "raw-floor" {
            for client in env.raw_clients(o.clients, &[]).await? {
                contenders.push(ValueContender::RawCached {
                    client,
                    path: path.clone(),
                    factor: o.cache_factor,
                    block: None,
                    retries: o.retries,
                    sleep: o.retry_sleep,
                    attempts: attempts.clone(),
                    handed: handed.clone(),
                });
            }
        } else {
            for framework in env.frameworks(o.clients).await? {
                let retry = RetryNTimes::new(o.retries, o.retry_sleep);
                let counter = DistributedAtomicLong::new(&framework, &path, retry)?;
                let cached = CachedAtomicLong::new(counter, o.cache_factor)?;
                contenders.push(ValueContender::Cached {
                    framework,
                    cached,
                    attempts: attempts.clone(),
                    handed: handed.clone(),
                });
            }
        }
        let mut line = run(env, plan(implementation), contenders).await?;
        let value = values::read_long(&checker, &path).await?;
        let (count, max) = handed.summary();
        let factor = i64::from(o.cache_factor);
        if value % factor != 0 || (count as i64) > value || max.is_some_and(|max| max >= value) {
            return Err(BenchError::Miscounted(format!(
                "cached-counter {implementation}: the counter holds {value} after {count} values handed out \
                 (largest {max:?}) in blocks of {factor}"
            )));
        }
        eprintln!(
            "[locks]   {implementation:<20} {}; {count} distinct values handed out, {} blocks reserved",
            attempts.summary(),
            value / factor
        );
        line.extra.push_str(&format!(",\"cache_factor\":{},\"blocks\":{}", o.cache_factor, value / factor));
        results.push(line);
        drop(checker);
        env.remove_tree(&dir).await;
    }
    Ok(results)
}

/// discovery-register (one session: register, unregister, repeat) and discovery-query
/// (`--instances` registered by another session, then queried by one: directly, through a
/// `ServiceCache`, and the raw floor).
async fn discovery(env: &Env, workload: Workload) -> BenchResult<Vec<Measured>> {
    let o = &env.options;
    let mut results = Vec::new();
    let serializer = JsonInstanceSerializer::new;
    if workload == Workload::DiscoveryRegister {
        let plan = |implementation| Plan::single_session(workload, implementation, o.warmup, o.iters);
        let instance = values::instance(0)?;
        let data = serializer().serialize(&instance)?;
        let base = env.dir(workload, "raw");
        let client = env.raw_client().await?;
        let dir = format!("{base}/{}", values::SERVICE);
        client.mkdir(&dir, &CreateMode::Persistent.with_acls(Acls::anyone_all())).await?;
        let path = format!("{dir}/{}", instance.id);
        let raw = ValueContender::RawRegister { client, path, data };
        results.push(run(env, plan("raw-floor"), vec![raw]).await?);
        env.remove_tree(&base).await;

        // The service's node persistent, as for the raw floor and Curator: the TestingServer
        // reaps an empty container within 100 ms, between an unregister and the next register.
        let base = env.dir(workload, "zk-recipes");
        let client = env.raw_client().await?;
        client
            .mkdir(&format!("{base}/{}", values::SERVICE), &CreateMode::Persistent.with_acls(Acls::anyone_all()))
            .await?;
        drop(client);
        let framework = env.framework().await?;
        let discovery = ServiceDiscovery::new(&framework, &base, serializer())?;
        let ours = ValueContender::Register { framework, discovery, instance };
        results.push(run(env, plan("zk-recipes"), vec![ours]).await?);
        env.remove_tree(&base).await;
        return Ok(results);
    }
    let plan = |implementation, cycles| Plan::single_session(workload, implementation, o.query_warmup, cycles);
    let base = env.dir(workload, "zk-recipes");
    let registrar = env.framework().await?;
    let registry = ServiceDiscovery::new(&registrar, &base, serializer())?;
    values::register_all(&registry, o.instances).await?;
    let expected = o.instances;

    let client = env.raw_client().await?;
    let raw = ValueContender::RawQuery { client, dir: format!("{base}/{}", values::SERVICE), expected };
    results.push(run(env, plan("raw-floor", o.queries), vec![raw]).await?);

    let framework = env.framework().await?;
    let discovery = ServiceDiscovery::new(&framework, &base, serializer())?;
    let query = ValueContender::Query { framework, discovery, expected };
    results.push(run(env, plan("zk-recipes", o.queries), vec![query]).await?);

    let framework = env.framework().await?;
    let discovery = ServiceDiscovery::new(&framework, &base, serializer())?;
    let cache = discovery.service_cache(values::SERVICE)?;
    cache.start().await?;
    let cached = ValueContender::CachedQuery { framework, cache, expected };
    results.push(run(env, plan("zk-recipes-cache", o.cache_queries), vec![cached]).await?);

    registry.close().await?;
    registrar.close().await;
    Ok(results)
}

/// many-locks: `--clients` sessions (the default wait) take `--lock-paths` distinct locks
/// between them, each acquired and released once; then the memory a lock path costs the
/// client, while held and after release, and the server's watches once the session's mirrors
/// are gone (a mirror outlives its last use by two seconds).
async fn many_locks(env: &Env) -> BenchResult<Vec<Measured>> {
    let o = &env.options;
    let per_client = o.lock_paths.div_ceil(o.clients);
    let plan = Plan {
        workload: Workload::ManyLocks,
        implementation: "zk-recipes",
        warmup: o.warmup_cycles,
        cycles: per_client,
        hold: Duration::ZERO,
        latency: Latency::Cycle,
        max_holders: usize::MAX,
        sessions: o.clients,
    };
    let dir = env.dir(Workload::ManyLocks, "zk-recipes");
    let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let contenders = env
        .mirror_frameworks(o.clients)
        .await?
        .into_iter()
        .map(|framework| Contender::ManyLocks { framework, dir: dir.clone(), next: next.clone() })
        .collect();
    let measured = run(env, plan, contenders).await?;

    // Memory per lock path: one session holds a share of the paths at once, then lets them go;
    // twice, on new paths each time. A structure kept per path grows the second batch's
    // figures as much as the first's; memory the allocator keeps for reuse does not.
    let held_paths = o.lock_paths.min(2_000);
    let framework = env.mirror_frameworks(1).await?.remove(0);
    let idle = rss_kib();
    let per_path = |kib: Option<u64>| {
        kib.zip(idle)
            .map_or("n/a".to_owned(), |(k, i)| format!("{:.0} B", (k as f64 - i as f64) * 1024.0 / held_paths as f64))
    };
    for batch in 1..=2 {
        let mut guards = Vec::with_capacity(held_paths);
        for n in 0..held_paths {
            let mutex = InterProcessMutex::new(&framework, &format!("{dir}/held-{batch}-{n}"))?;
            guards.push(mutex.acquire().await?);
        }
        let held = rss_kib();
        for guard in guards {
            guard.release().await?;
        }
        let released = rss_kib();
        // The mirrors let go: the server holds no watch on the run's lock paths.
        let started = Instant::now();
        let watches = loop {
            let watches = server_watches_under(&env.server, &dir);
            if watches == Some(0) || started.elapsed() > Duration::from_secs(30) {
                break watches;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        };
        let lingered = rss_kib();
        eprintln!(
            "[locks] many-locks memory per lock path (batch {batch} of {held_paths} new paths, one session, growth over the idle session): held {}, released {}, after the linger {}; server watches after the linger: {} ({:.1}s)",
            per_path(held),
            per_path(released),
            per_path(lingered),
            watches.map_or("n/a".to_owned(), |w| w.to_string()),
            started.elapsed().as_secs_f64()
        );
    }
    // An idle framework (one session) and its share of the process.
    let before = rss_kib();
    let idle_frameworks = env.mirror_frameworks(50).await?;
    let after = rss_kib();
    if let (Some(b), Some(a)) = (before, after) {
        eprintln!(
            "[locks] an idle framework (one session) costs {:.0} KiB of the client's memory (50 started)",
            (a as f64 - b as f64) / 50.0
        );
    }
    for framework in idle_frameworks {
        framework.close().await;
    }
    framework.close().await;
    env.remove_tree(&dir).await;
    Ok(vec![measured])
}

/// The process's resident memory (`VmRSS`), in KiB; `None` off Linux.
fn rss_kib() -> Option<u64> {
    std::fs::read_to_string("/proc/self/status")
        .ok()?
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
}

/// The watches the servers of `connect` hold on `dir` and below (from `wchp`), summed. Each
/// session also keeps a watch on `/zookeeper/config` while its framework tracks the ensemble
/// (as Curator's ensemble tracker does); that one is not a lock's, so it is not counted.
fn server_watches_under(connect: &str, dir: &str) -> Option<u64> {
    let (hosts, chroot) = connect.split_once('/').map_or((connect, ""), |(hosts, root)| (hosts, root));
    let prefix = if chroot.is_empty() { dir.to_owned() } else { format!("/{}{dir}", chroot.trim_end_matches('/')) };
    let mut total = 0;
    for host in hosts.split(',') {
        let text = crate::report::four_letter_word(host, b"wchp")?;
        total += watches_under(&text, &prefix);
    }
    Some(total)
}

/// The sessions listed under the paths of `wchp`'s answer (a path line, then one indented line
/// per session watching it) that are `prefix` or below it.
fn watches_under(wchp: &str, prefix: &str) -> u64 {
    let mut inside = false;
    let mut total = 0;
    for line in wchp.lines() {
        if line.starts_with(char::is_whitespace) {
            total += u64::from(inside && !line.trim().is_empty());
        } else {
            let path = line.trim();
            inside = path == prefix || path.strip_prefix(prefix).is_some_and(|rest| rest.starts_with('/'));
        }
    }
    total
}
