//! The command line.

use std::time::Duration;

#[path = "../common/args.rs"]
mod args;
use args::{number, split_flag};

pub(crate) const USAGE: &str = "\
usage: fleet [options]
  --instances N             service instances, one Framework (session) each (default 1000)
  --ensemble N              servers of the TestingCluster started for the run (default 3)
  --entities N              per-entity lock paths the instances pick from (default 100)
  --session-timeout-ms MS   every instance's session timeout; each phase's time bound is
                            derived from it (default 15000)
  --lock-every-ms MS        each instance takes an entity lock on average this often, at
                            random (uniform in 0..2*MS); 0 for none outside the leader-kill
                            check (default 10000)
  --hold-ms MS              how long an entity lock is held (default 10)
  --steady-ms MS            after bring-up, the fleet runs this long with only its background
                            locks before the measured phases (default 10000)
  --changes N               measured configuration changes (default 5)
  --warmup-changes N        unmeasured configuration changes before them (default 3)
  --concurrency N           instances connected, registered and closed at a time (default 50)
  --server-heap-mb MB       each server's JVM heap, -Xmx (default 512)
  --seed N                  seed of the instances' lock timing and entity choice (default 1)
  --no-leader-kill          skip the leader-kill phase
  --curator MODE            then the same fleet through Apache Curator in one JVM, on the same
                            ensemble: auto (default: when java, javac and the Curator and
                            curator-x-discovery jars are installed), off, require
  --curator-heap-mb MB      the Curator fleet's JVM heap, -Xmx (default 2048)
  --label TEXT              copied into every JSON line (default \"\")";

/// `--curator`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CuratorMode {
    /// A Curator fleet when java, javac and the jars are there; none otherwise.
    Auto,
    Off,
    /// Missing java, javac or jars fail the run.
    Require,
}

#[derive(Debug, Clone)]
pub(crate) struct Options {
    pub(crate) instances: usize,
    pub(crate) ensemble: usize,
    pub(crate) entities: usize,
    pub(crate) session_timeout: Duration,
    /// Zero: no background locks.
    pub(crate) lock_every: Duration,
    pub(crate) hold: Duration,
    pub(crate) steady: Duration,
    pub(crate) changes: usize,
    pub(crate) warmup_changes: usize,
    pub(crate) concurrency: usize,
    pub(crate) server_heap_mb: usize,
    pub(crate) seed: u64,
    pub(crate) leader_kill: bool,
    pub(crate) curator: CuratorMode,
    pub(crate) curator_heap_mb: usize,
    pub(crate) label: String,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            instances: 1000,
            ensemble: 3,
            entities: 100,
            session_timeout: Duration::from_secs(15),
            lock_every: Duration::from_secs(10),
            hold: Duration::from_millis(10),
            steady: Duration::from_secs(10),
            changes: 5,
            warmup_changes: 3,
            concurrency: 50,
            server_heap_mb: 512,
            seed: 1,
            leader_kill: true,
            curator: CuratorMode::Auto,
            curator_heap_mb: 2048,
            label: String::new(),
        }
    }
}

/// The options, or `None` for `--help`.
pub(crate) fn parse_args(args: impl IntoIterator<Item = String>) -> Result<Option<Options>, String> {
    let mut options = Options::default();
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        let (flag, inline) = split_flag(&arg);
        match flag.as_str() {
            // `cargo bench` appends `--bench` to a harness-less benchmark's arguments.
            "--bench" => continue,
            "-h" | "--help" => return Ok(None),
            "--no-leader-kill" => {
                options.leader_kill = false;
                continue;
            }
            _ => {}
        }
        let mut value = || inline.clone().or_else(|| args.next()).ok_or_else(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--instances" => options.instances = number(&flag, &value()?)?,
            "--ensemble" => options.ensemble = number(&flag, &value()?)?,
            "--entities" => options.entities = number(&flag, &value()?)?,
            "--session-timeout-ms" => options.session_timeout = Duration::from_millis(number(&flag, &value()?)?),
            "--lock-every-ms" => options.lock_every = Duration::from_millis(number(&flag, &value()?)?),
            "--hold-ms" => options.hold = Duration::from_millis(number(&flag, &value()?)?),
            "--steady-ms" => options.steady = Duration::from_millis(number(&flag, &value()?)?),
            "--changes" => options.changes = number(&flag, &value()?)?,
            "--warmup-changes" => options.warmup_changes = number(&flag, &value()?)?,
            "--curator" => {
                options.curator = match value()?.as_str() {
                    "auto" => CuratorMode::Auto,
                    "off" => CuratorMode::Off,
                    "require" => CuratorMode::Require,
                    other => return Err(format!("--curator: expected auto, off or require, got {other:?}")),
                }
            }
            "--curator-heap-mb" => options.curator_heap_mb = number(&flag, &value()?)?,
            "--concurrency" => options.concurrency = number(&flag, &value()?)?,
            "--server-heap-mb" => options.server_heap_mb = number(&flag, &value()?)?,
            "--seed" => options.seed = number(&flag, &value()?)?,
            "--label" => options.label = value()?,
            _ => return Err(format!("unknown option {flag:?}")),
        }
    }
    for (name, n) in [
        ("--instances", options.instances),
        ("--ensemble", options.ensemble),
        ("--entities", options.entities),
        ("--concurrency", options.concurrency),
        ("--server-heap-mb", options.server_heap_mb),
        ("--curator-heap-mb", options.curator_heap_mb),
    ] {
        if n == 0 {
            return Err(format!("{name} must be at least 1"));
        }
    }
    if options.session_timeout < Duration::from_millis(400) {
        return Err("--session-timeout-ms must be at least 400 (two ticks of the servers)".to_owned());
    }
    Ok(Some(options))
}
