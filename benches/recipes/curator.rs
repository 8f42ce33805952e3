//! The same workloads through Apache Curator 5.x (`interop/CuratorBench.java`, in a JVM).

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Instant;

use zk_recipes::testing::CountingProxy;

use crate::classpath::{curator_classpath, find_jdk_tool};
use crate::javac;
use crate::options::{CuratorMode, Options, Workload, WAITERS_PER_SESSION};
use crate::report::{json_number, json_str, BenchError, BenchResult};

const CURATOR_SOURCE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/interop/CuratorBench.java");
const CURATOR_MAIN: &str = "CuratorBench";
/// Whether this run has Curator lines.
pub(crate) enum Curator {
    Off,
    /// Not installed (`--curator auto`): every workload gets a skipped line with this reason.
    Missing(String),
    Ready(CuratorBench),
}

/// `interop/CuratorBench.java`, compiled for this run.
pub(crate) struct CuratorBench {
    java: PathBuf,
    /// The class directory, then the Curator classpath.
    classpath: String,
    /// Removed when the run ends.
    _classes: tempfile::TempDir,
}

impl Curator {
    /// Finds java, javac and the Curator jars and compiles `CuratorBench.java` into a temporary
    /// directory. `Err` when `--curator require` finds something missing, and whenever the
    /// source does not compile.
    pub(crate) fn prepare(mode: CuratorMode) -> Result<Curator, String> {
        if mode == CuratorMode::Off {
            return Ok(Curator::Off);
        }
        let found = find_jdk_tool("java").and_then(|java| Ok((java, find_jdk_tool("javac")?, curator_classpath()?)));
        let (java, javac, curator_classpath) = match found {
            Ok(found) => found,
            Err(why) if mode == CuratorMode::Require => return Err(format!("--curator require: {why}")),
            Err(why) => {
                eprintln!("[locks] no Curator lines: {why}");
                return Ok(Curator::Missing(why));
            }
        };
        let started = Instant::now();
        let classes = javac::compile(&javac, &curator_classpath, CURATOR_SOURCE, "zk-recipes-curator-bench-")?;
        eprintln!("[locks] compiled {CURATOR_MAIN}.java in {:.1} s", started.elapsed().as_secs_f64());
        let classpath = format!("{}:{curator_classpath}", classes.path().display());
        Ok(Curator::Ready(CuratorBench { java, classpath, _classes: classes }))
    }
}

/// Where a Curator run goes, and what it is counted through.
pub(crate) struct Target<'a> {
    /// What the JVM connects to: the server, or the counting proxy in front of it.
    pub(crate) connect: &'a str,
    /// The server itself (for `srvr`).
    pub(crate) server: &'a str,
    /// The workload's directory for Curator's nodes.
    pub(crate) dir: String,
    /// The counting proxy, when requests are counted.
    pub(crate) proxy: Option<&'a CountingProxy>,
}

/// A JSON line of one Curator run (`curator`, or `curator-<variant>` when a workload has
/// several Curator lines).
pub(crate) struct CuratorLine {
    pub(crate) implementation: String,
    pub(crate) json: String,
    pub(crate) ops_per_sec: Option<f64>,
}

impl CuratorBench {
    /// Runs `workload` through Curator in a JVM (default flags: full JIT), with this run's
    /// options, against `target`. Its stderr goes to ours.
    pub(crate) async fn run(
        &self,
        o: &Options,
        target: Target<'_>,
        workload: Workload,
    ) -> BenchResult<Vec<CuratorLine>> {
        // The same counting as the Rust lines': mutex-uncontended in total, the others per
        // session (many-waiters divides them among the session's threads, rounded up).
        let (cycles, warmup, hold) = match workload {
            Workload::MutexUncontended => (o.iters, o.warmup, o.hold),
            Workload::Semaphore => (o.cycles, o.warmup_cycles, o.sem_hold),
            Workload::RwLock => (o.cycles, o.warmup_cycles, o.rw_hold),
            Workload::DiscoveryRegister | Workload::TypedCas => (o.iters, o.warmup, o.hold),
            Workload::QueueThroughput | Workload::QueueSharded => (o.queue_items, o.warmup, o.hold),
            Workload::DiscoveryQuery => (o.queries, o.query_warmup, o.hold),
            Workload::ManyLocks => (o.lock_paths.div_ceil(o.clients), o.warmup_cycles, o.hold),
            Workload::CachedCounter => (o.cached_values, o.warmup_cycles * o.cache_factor as usize, o.hold),
            _ => (o.cycles, o.warmup_cycles, o.hold),
        };
        let counts_before = target.proxy.map(|p| p.counts());
        let counted = target.proxy.is_some();
        let mut command = tokio::process::Command::new(&self.java);
        command
            .arg("-cp")
            .arg(&self.classpath)
            .arg(CURATOR_MAIN)
            .arg(target.connect)
            .arg(workload.name())
            .args([cycles, warmup, o.clients, o.max_leases].map(|n| n.to_string()))
            .arg(&target.dir)
            .arg(format!("hold-ms={}", hold.as_millis()))
            // The JIT warm-up (CuratorBench.java's header says why it is shaped so). With
            // --count-ops the op count must be known (and timing does not matter anyway).
            .arg(format!("warm-solo={}", if counted { 0 } else { o.curator_warmup_solo }))
            .arg(format!("warm-contended={}", if counted { 0 } else { o.curator_warmup_contended }))
            .arg(format!("jit-warmup-ms={}", if counted { 0 } else { o.curator_warmup.as_millis() }))
            .arg(format!("label={}", o.label))
            .arg(format!("read-pct={}", o.read_pct))
            .arg(format!("seed={}", o.seed))
            .arg(format!("srvr={}", target.server))
            .arg(format!("cache-nodes={}", o.cache_nodes))
            .arg(format!("event-nodes={}", o.event_nodes))
            .arg(format!("event-passes={}", o.event_passes))
            .arg(format!("event-batch={}", o.event_batch))
            .arg(format!("writes-in-flight={}", crate::caches::WRITES_IN_FLIGHT))
            .arg(format!("retries={}", o.retries))
            .arg(format!("retry-sleep-ms={}", o.retry_sleep.as_millis()))
            .arg(format!("cache-factor={}", o.cache_factor))
            .arg(format!("instances={}", o.instances))
            .arg(format!("cache-queries={}", o.cache_queries))
            .arg(format!("queue-shards={}", o.queue_shards))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true);
        if workload == Workload::CacheEvents && !counted {
            // The measured round's writes come from this process's writer, as in the zk-recipes
            // line: the rate follows the writer, and the two clients' writers differ.
            command.arg("external-writer=1");
            return self.cache_events_with_our_writer(command, o, target).await;
        }
        // Not `output()`: that would capture stderr too.
        let output = command
            .spawn()
            .map_err(|e| BenchError::Failed(format!("starting {}: {e}", self.java.display())))?
            .wait_with_output()
            .await
            .map_err(|e| BenchError::Failed(format!("waiting for {CURATOR_MAIN}: {e}")))?;
        let stdout = String::from_utf8_lossy(&output.stdout);
        let mut lines = Vec::new();
        for line in stdout.lines() {
            if line.starts_with('{') {
                lines.push(CuratorLine {
                    implementation: json_str(line, "impl").unwrap_or("curator").to_owned(),
                    ops_per_sec: json_number(line, "ops_per_sec"),
                    json: line.to_owned(),
                });
            } else if !line.trim().is_empty() {
                eprintln!("[locks] {CURATOR_MAIN}: {line}");
            }
        }
        if output.status.code() != Some(0) {
            return Err(exit_error(workload, output.status));
        }
        if lines.is_empty() {
            return Err(BenchError::Failed(format!("{CURATOR_MAIN} printed no JSON line")));
        }
        if let (Some(before), Some(proxy)) = (counts_before, target.proxy) {
            // The JVM's whole run went through the proxy: per op of the warmup and the measured
            // part together (the JIT warm-up's cycles are not counted: it is off with
            // --count-ops), session set-up and close included.
            let per_task = |n: usize| n.div_ceil(WAITERS_PER_SESSION);
            let total_ops = match workload {
                Workload::MutexUncontended | Workload::DiscoveryRegister | Workload::TypedCas => o.warmup + o.iters,
                // Both of Curator's producers (awaited and background puts), together.
                Workload::QueueThroughput => 2 * (o.warmup + o.queue_items),
                Workload::QueueSharded => o.warmup + o.queue_items,
                // The registration of the instances and the cache's load are in the count.
                Workload::DiscoveryQuery => o.query_warmup + o.queries,
                Workload::CachedCounter => o.clients * (o.warmup_cycles * o.cache_factor as usize + o.cached_values),
                Workload::ManyWaiters => {
                    o.clients * WAITERS_PER_SESSION * (per_task(o.warmup_cycles) + per_task(o.cycles))
                }
                Workload::ManyLocks => o.clients * (o.warmup_cycles + o.lock_paths.div_ceil(o.clients)),
                _ => o.clients * (o.warmup_cycles + o.cycles),
            };
            let breakdown = proxy.counts().since(&before).per_op(total_ops);
            eprintln!("[locks]   {:<20} per op (warmup, session set-up and close included): {breakdown}", "");
        }
        Ok(lines)
    }

    /// cache-events through Curator with this process's writer: the JVM warms up with its own
    /// writer, then says `READY <base>`; [`write_passes`](crate::caches::write_passes) makes
    /// the measured round's writes, and the JVM reports every event it delivered with its
    /// wall-clock time, from which the line is timed as the zk-recipes line is.
    async fn cache_events_with_our_writer(
        &self,
        mut command: tokio::process::Command,
        o: &Options,
        target: Target<'_>,
    ) -> BenchResult<Vec<CuratorLine>> {
        use tokio::io::AsyncBufReadExt;

        let failed = |what: &str, e: &dyn std::fmt::Display| BenchError::Failed(format!("{CURATOR_MAIN}: {what}: {e}"));
        let mut child = command.spawn().map_err(|e| failed("starting", &e))?;
        let stdout = child.stdout.take().ok_or_else(|| BenchError::Failed(format!("{CURATOR_MAIN}: no stdout")))?;
        let mut lines = tokio::io::BufReader::new(stdout).lines();
        let base: i32 = loop {
            match lines.next_line().await.map_err(|e| failed("reading", &e))? {
                Some(line) => match line.strip_prefix("READY ") {
                    Some(base) => break base.trim().parse().map_err(|e| failed("READY", &e))?,
                    None if !line.trim().is_empty() => eprintln!("[locks] {CURATOR_MAIN}: {line}"),
                    None => {}
                },
                None => {
                    let status = child.wait().await.map_err(|e| failed("waiting", &e))?;
                    return Err(exit_error(Workload::CacheEvents, status));
                }
            }
        };
        let paths: Vec<String> = (0..o.event_nodes).map(|i| format!("{}/n{i:05}", target.dir)).collect();
        // The JVM's event times are wall-clock: one anchor turns them into this clock.
        let clock = crate::caches::WallClock::now();
        let (started, written, writes) =
            crate::caches::write_passes_apart(target.connect, &paths, base, o.event_passes as i32, o.event_batch)
                .await?;

        let mut seen: Vec<Vec<(i32, Instant)>> = vec![Vec::new(); paths.len()];
        let mut json = None;
        while let Some(line) = lines.next_line().await.map_err(|e| failed("reading", &e))? {
            if let Some(event) = line.strip_prefix("E ") {
                let mut fields = event.split(' ').map(str::parse::<i64>);
                let (Some(Ok(i)), Some(Ok(version)), Some(Ok(micros))) = (fields.next(), fields.next(), fields.next())
                else {
                    return Err(BenchError::Failed(format!("{CURATOR_MAIN}: bad event line {line:?}")));
                };
                let at = clock.at(micros);
                let node =
                    seen.get_mut(i as usize).ok_or_else(|| BenchError::Failed(format!("{CURATOR_MAIN}: {line:?}")))?;
                node.push((version as i32, at));
            } else if line.starts_with('{') {
                json = Some(line);
            } else if !line.trim().is_empty() {
                eprintln!("[locks] {CURATOR_MAIN}: {line}");
            }
        }
        let status = child.wait().await.map_err(|e| failed("waiting", &e))?;
        if status.code() != Some(0) {
            return Err(exit_error(Workload::CacheEvents, status));
        }
        let json = json.ok_or_else(|| BenchError::Failed(format!("{CURATOR_MAIN} printed no JSON line")))?;
        let delivered = json_number(&json, "ops").unwrap_or_default() as usize;
        let ended = seen.iter().flatten().map(|(_, at)| *at).max().unwrap_or(written);
        let samples = crate::caches::latencies(&writes, &seen, ended);
        let mut line = crate::caches::line(Workload::CacheEvents, "curator", (ended - started).as_secs_f64(), samples);
        line.ops = Some(delivered);
        line.extra = format!(
            ",\"writes\":{},\"writes_per_sec\":{:.1},\"batch\":{},\"absorbed_per_sec\":{:.1},\"writer\":\"zk-recipes bench\"",
            writes.len(),
            writes.len() as f64 / (written - started).as_secs_f64(),
            o.event_batch,
            writes.len() as f64 / (ended - started).as_secs_f64()
        );
        let ops_per_sec = Some(line.ops_per_sec());
        Ok(vec![CuratorLine { implementation: "curator".to_owned(), json: line.json(&o.label), ops_per_sec }])
    }
}

/// The error for a JVM that exited with `status` (not 0): code 3 is a failed check of the
/// workload's result.
fn exit_error(workload: Workload, status: std::process::ExitStatus) -> BenchError {
    let checked = format!("{CURATOR_MAIN} (Curator) exited with code 3");
    match status.code() {
        Some(3) if matches!(workload, Workload::CacheLoad | Workload::CacheEvents) => BenchError::Diverged(checked),
        Some(3)
            if matches!(
                workload,
                Workload::CounterIncrement
                    | Workload::SharedCountCas
                    | Workload::QueueThroughput
                    | Workload::QueueSharded
                    | Workload::CachedCounter
                    | Workload::TypedCas
            ) =>
        {
            BenchError::Miscounted(checked)
        }
        Some(3) => BenchError::Violation(checked),
        _ => BenchError::Failed(format!("{CURATOR_MAIN} failed ({status})")),
    }
}
