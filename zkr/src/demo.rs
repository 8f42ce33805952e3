//! `zkr demo`: the two classic scenarios, run and checked.
//!
//! 1. Workers take turns on one `InterProcessMutex`; each prints `worker N start` when it gets
//!    the lock and `worker N end` before it lets go, so the lines must come in strict pairs.
//! 2. Workers share an `InterProcessSemaphore` with a few leases; never more than that many run
//!    at once, and every worker runs.
//!
//! Every worker has its own framework, so its own ZooKeeper session: they contend as separate
//! processes would. What each saw is logged in order and checked afterwards.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use futures::future::join_all;
use tokio::time::Instant;
use zk_recipes::testing::TestingServer;
use zk_recipes::{Framework, InterProcessMutex, InterProcessSemaphore};

use crate::connect::{with_progress, Options};
use crate::exit::{Code, Failure};

/// How long a mutex worker keeps the lock.
const MUTEX_HOLD: Duration = Duration::from_millis(50);
/// How long a semaphore worker keeps its lease.
const LEASE_HOLD: Duration = Duration::from_millis(100);

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Workers contending for the mutex
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=200))]
    workers: u32,

    /// Times each mutex worker takes the lock
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..=100))]
    rounds: u32,

    /// Workers sharing the semaphore
    #[arg(long, default_value_t = 15, value_parser = clap::value_parser!(u32).range(1..=200))]
    semaphore_workers: u32,

    /// The semaphore's leases (at most this many workers at once)
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=200))]
    leases: u32,

    /// Where the demo's locks live: <PATH>/mutex and <PATH>/semaphore (watch them from another
    /// terminal with `zkr locks <PATH>/mutex --watch`)
    #[arg(long, default_value = "/zk-recipes-demo")]
    path: String,

    /// Print the library's metrics at the end (Prometheus text format: lock waits, holds,
    /// requests by operation, connection states), summed over the demo's sessions
    #[arg(long)]
    metrics: bool,
}

pub async fn run(options: &Options, args: Args) -> Result<(), Failure> {
    let started = Instant::now();
    let (workers, rounds, semaphore_workers, leases) =
        (args.workers as usize, args.rounds as usize, args.semaphore_workers as usize, args.leases as usize);
    let mutex_path = zk_recipes::path::join(&args.path, "mutex");
    let semaphore_path = zk_recipes::path::join(&args.path, "semaphore");
    zk_recipes::path::validate_recipe_path(&args.path)
        .map_err(|e| Failure::from_error(e, "checking --path", options.connect_string()))?;

    // Stays alive (and the server with it) until the demo ends.
    let (_server, connect) = match &options.connect {
        Some(connect) => (None, connect.clone()),
        None => {
            let server =
                with_progress("starting an embedded ZooKeeper server", TestingServer::start()).await.map_err(|e| {
                    Failure::other(format!(
                        "cannot start an embedded ZooKeeper server: {e}\n(install Debian's `zookeeper` package, \
                         e.g. with scripts/setup.sh, or set ZOOKEEPER_HOME; or use --connect host:port)"
                    ))
                })?;
            let connect = server.connect_string();
            println!("embedded ZooKeeper server at {connect}");
            (Some(server), connect)
        }
    };

    // The recorder goes in before the frameworks are built: handles made before it record nothing.
    let recorder = match args.metrics {
        true => Some(
            metrics_exporter_prometheus::PrometheusBuilder::new()
                .install_recorder()
                .map_err(|e| Failure::other(format!("cannot install the metrics recorder: {e}")))?,
        ),
        false => None,
    };
    let sessions = workers + semaphore_workers;
    // Two paths only: a series per path is affordable.
    let counted = |builder: zk_recipes::FrameworkBuilder| builder.metrics_name("zkr-demo").metrics_path_labels(true);
    let frameworks = (0..sessions).map(|_| options.build_with(&connect, counted)).collect::<Result<Vec<_>, _>>()?;
    let starts = join_all(frameworks.iter().map(Framework::start));
    let what = format!("opening {sessions} sessions on {connect}");
    for result in with_progress(&what, starts).await {
        if let Err(e) = result {
            close_all(&frameworks).await;
            return Err(Failure::from_error(e, "connecting", &connect));
        }
    }
    let (mutex_frameworks, semaphore_frameworks) = frameworks.split_at(workers);

    println!("\n== {workers} workers, one InterProcessMutex at {mutex_path}, {rounds} turns each ==");
    let mutex_log = Log::default();
    let mutex_run = run_mutex(mutex_frameworks, &mutex_path, rounds, &mutex_log).await;
    let mutex_events = mutex_log.events();
    let semaphore_log = Log::default();
    let semaphore_run = match mutex_run {
        Ok(()) => {
            println!("\n== {semaphore_workers} workers, one InterProcessSemaphore at {semaphore_path} with {leases} leases ==");
            run_semaphore(semaphore_frameworks, &semaphore_path, leases, &semaphore_log).await
        }
        Err(e) => Err(e),
    };
    close_all(&frameworks).await;
    semaphore_run.map_err(|(worker, e)| Failure::from_error(e, &format!("worker {worker}"), &connect))?;

    let mutex_check = check_mutex(&mutex_events, workers, rounds);
    let semaphore_check = check_semaphore(&semaphore_log.events(), semaphore_workers, leases);
    println!("\n== summary ==");
    println!(
        "mutex:     {} turns by {workers} workers, {}",
        workers * rounds,
        verdict(&mutex_check.violations, "strictly paired, never two at once, fencing tokens always increasing")
    );
    println!(
        "semaphore: {semaphore_workers} workers, {leases} leases: {}",
        verdict(&semaphore_check.violations, &format!("every worker ran, at most {} at once", semaphore_check.peak))
    );
    if let Some(recorder) = recorder {
        println!("\n== metrics ==");
        print_metrics(&recorder.render());
    }
    let violations = mutex_check.violations.len() + semaphore_check.violations.len();
    for violation in mutex_check.violations.iter().chain(&semaphore_check.violations) {
        println!("VIOLATION: {violation}");
    }
    if violations > 0 {
        return Err(Failure::new(Code::Violation, format!("demo failed its checks ({violations} violations)")));
    }
    println!("demo passed in {:.1?}", started.elapsed());
    Ok(())
}

/// The library's samples of a Prometheus text page, without the comment lines and the series
/// that stayed at zero.
fn print_metrics(page: &str) {
    for line in page.lines().filter(|line| line.starts_with("zk_recipes_")) {
        if line.rsplit_once(' ').is_some_and(|(_, value)| value != "0") {
            println!("{line}");
        }
    }
}

fn verdict(violations: &[String], ok: &str) -> String {
    if violations.is_empty() {
        format!("{ok}: ok")
    } else {
        format!("FAILED ({} violations)", violations.len())
    }
}

async fn close_all(frameworks: &[Framework]) {
    join_all(frameworks.iter().map(Framework::close)).await;
}

/// Each worker takes the mutex `rounds` times.
async fn run_mutex(
    frameworks: &[Framework],
    path: &str,
    rounds: usize,
    log: &Log,
) -> Result<(), (usize, zk_recipes::Error)> {
    let workers = frameworks.iter().enumerate().map(|(worker, framework)| async move {
        let data = format!("zkr demo worker {worker}").into_bytes();
        let mutex = InterProcessMutex::with_data(framework, path, data).map_err(|e| (worker, e))?;
        for _ in 0..rounds {
            let guard = mutex.acquire().await.map_err(|e| (worker, e))?;
            let token = guard.fencing_token();
            log.start(worker, token, &format!("(fencing token {token:#x})"));
            // The critical section, stopped if the lock is lost (a lost lock fails the worker).
            let held = guard.run(tokio::time::sleep(MUTEX_HOLD)).await;
            log.end(worker);
            held.map_err(|lost| (worker, lost.into()))?;
            guard.release().await.map_err(|e| (worker, e))?;
        }
        Ok(())
    });
    join_all(workers).await.into_iter().collect()
}

/// Each worker takes one lease of a semaphore with `leases` leases.
async fn run_semaphore(
    frameworks: &[Framework],
    path: &str,
    leases: usize,
    log: &Log,
) -> Result<(), (usize, zk_recipes::Error)> {
    let workers = frameworks.iter().enumerate().map(|(worker, framework)| async move {
        let data = format!("zkr demo worker {worker}").into_bytes();
        let semaphore = InterProcessSemaphore::with_data(framework, path, leases, data).map_err(|e| (worker, e))?;
        let lease = semaphore.acquire().await.map_err(|e| (worker, e))?;
        log.start(worker, lease.fencing_token(), "");
        let held = lease.run(tokio::time::sleep(LEASE_HOLD)).await;
        log.end(worker);
        held.map_err(|lost| (worker, lost.into()))?;
        lease.release().await.map_err(|e| (worker, e))
    });
    join_all(workers).await.into_iter().collect()
}

/// What a worker did, in the order it happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Event {
    /// Got the lock or lease; `holders` counts the workers inside at that moment, itself included.
    Start { worker: usize, holders: usize, token: i64 },
    /// About to let go.
    End { worker: usize },
}

/// The ordered log of events, printed as it grows: a line is printed and recorded under one
/// lock, so the printed order is the recorded order.
#[derive(Debug, Default)]
struct Log {
    events: Mutex<Vec<Event>>,
    inside: AtomicUsize,
}

impl Log {
    fn start(&self, worker: usize, token: i64, detail: &str) {
        let mut events = self.events.lock().unwrap_or_else(|e| e.into_inner());
        let holders = self.inside.fetch_add(1, Ordering::SeqCst) + 1;
        if detail.is_empty() {
            println!("worker {worker} start ({holders} inside)");
        } else {
            println!("worker {worker} start {detail}");
        }
        events.push(Event::Start { worker, holders, token });
    }

    fn end(&self, worker: usize) {
        let mut events = self.events.lock().unwrap_or_else(|e| e.into_inner());
        self.inside.fetch_sub(1, Ordering::SeqCst);
        println!("worker {worker} end");
        events.push(Event::End { worker });
    }

    fn events(&self) -> Vec<Event> {
        self.events.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// What a check found.
#[derive(Debug, Default, PartialEq, Eq)]
struct Check {
    violations: Vec<String>,
    /// Most workers inside at once.
    peak: usize,
}

/// The mutex: strict `start N`/`end N` pairs, one worker inside at a time, every worker
/// `rounds` times, and each holder's fencing token above the previous holder's.
fn check_mutex(events: &[Event], workers: usize, rounds: usize) -> Check {
    let mut check = Check::default();
    let mut turns = vec![0usize; workers];
    let mut last_token: Option<i64> = None;
    for (i, pair) in events.chunks(2).enumerate() {
        match *pair {
            [Event::Start { worker, holders, token }, Event::End { worker: ended }] if ended == worker => {
                check.peak = check.peak.max(holders);
                if holders > 1 {
                    check
                        .violations
                        .push(format!("worker {worker} started while {} others held the mutex", holders - 1));
                }
                if let Some(last) = last_token.filter(|last| token <= *last) {
                    check.violations.push(format!("worker {worker}'s fencing token {token:#x} is not above {last:#x}"));
                }
                last_token = Some(token);
                if let Some(count) = turns.get_mut(worker) {
                    *count += 1;
                }
            }
            _ => check.violations.push(format!("turn {}: lines not a start/end pair of one worker: {pair:?}", i + 1)),
        }
    }
    for (worker, count) in turns.iter().enumerate() {
        if *count != rounds {
            check.violations.push(format!("worker {worker} had {count} turns, not {rounds}"));
        }
    }
    check
}

/// The semaphore: never more than `leases` inside, every worker starts once and ends after
/// it started.
fn check_semaphore(events: &[Event], workers: usize, leases: usize) -> Check {
    let mut check = Check::default();
    let mut started = vec![0usize; workers];
    let mut ended = vec![0usize; workers];
    for event in events {
        match *event {
            Event::Start { worker, holders, .. } => {
                check.peak = check.peak.max(holders);
                if holders > leases {
                    check.violations.push(format!("worker {worker} started with {holders} inside (limit {leases})"));
                }
                if let Some(count) = started.get_mut(worker) {
                    *count += 1;
                }
            }
            Event::End { worker } => {
                if started.get(worker).copied().unwrap_or(0) <= ended.get(worker).copied().unwrap_or(0) {
                    check.violations.push(format!("worker {worker} ended without having started"));
                }
                if let Some(count) = ended.get_mut(worker) {
                    *count += 1;
                }
            }
        }
    }
    for worker in 0..workers {
        if started[worker] != 1 || ended[worker] != 1 {
            check.violations.push(format!(
                "worker {worker} started {} and ended {} times, not once",
                started[worker], ended[worker]
            ));
        }
    }
    check
}

#[cfg(test)]
mod tests {
    use super::*;

    fn start(worker: usize, holders: usize, token: i64) -> Event {
        Event::Start { worker, holders, token }
    }

    fn end(worker: usize) -> Event {
        Event::End { worker }
    }

    #[test]
    fn mutex_check_accepts_strict_pairs() {
        let events =
            [start(1, 1, 10), end(1), start(0, 1, 12), end(0), start(1, 1, 15), end(1), start(0, 1, 20), end(0)];
        assert_eq!(check_mutex(&events, 2, 2), Check { violations: vec![], peak: 1 });
    }

    #[test]
    fn mutex_check_finds_each_violation() {
        // interleaved lines
        let events = [start(0, 1, 10), start(1, 2, 11), end(0), end(1)];
        let check = check_mutex(&events, 2, 1);
        assert!(check.violations.iter().any(|v| v.contains("not a start/end pair")), "{check:?}");
        // two inside at once, even when the lines pair up
        assert!(!check_mutex(&[start(0, 2, 10), end(0)], 1, 1).violations.is_empty());
        // a token that went backwards
        let check = check_mutex(&[start(0, 1, 10), end(0), start(1, 1, 9), end(1)], 2, 1);
        assert!(check.violations.iter().any(|v| v.contains("fencing token")), "{check:?}");
        // a worker that did not get its turns
        let check = check_mutex(&[start(0, 1, 10), end(0)], 2, 1);
        assert!(check.violations.iter().any(|v| v.contains("worker 1 had 0 turns")), "{check:?}");
        // a missing end
        assert!(!check_mutex(&[start(0, 1, 10)], 1, 1).violations.is_empty());
    }

    #[test]
    fn semaphore_check() {
        let ok = [start(0, 1, 1), start(1, 2, 2), end(0), start(2, 2, 3), end(1), end(2)];
        assert_eq!(check_semaphore(&ok, 3, 2), Check { violations: vec![], peak: 2 });
        let over = [start(0, 1, 1), start(1, 2, 2), start(2, 3, 3), end(0), end(1), end(2)];
        assert_eq!(check_semaphore(&over, 3, 2).violations.len(), 1);
        let missing = [start(0, 1, 1), end(0)];
        assert_eq!(check_semaphore(&missing, 2, 2).violations.len(), 1);
        let end_first = [end(0), start(0, 1, 1)];
        assert!(!check_semaphore(&end_first, 1, 1).violations.is_empty());
    }
}
