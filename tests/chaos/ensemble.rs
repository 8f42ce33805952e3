//! Seeded chaos on a 3-server ensemble: several clients (each its own session, some behind
//! fault proxies) loop acquire / critical section / release on a mutex, a 2-lease semaphore
//! and a read-write lock (readers and writers on one path) while a schedule kills, pauses and
//! isolates servers, replaces a member by dynamic reconfiguration, and cuts, resets,
//! black-holes and expires clients. A checker (`common/history.rs`) then judges the recorded history:
//! (a) no overlap of holds never told of a loss beyond what the lock admits (one mutex holder,
//! two leases, any readers or one writer), (b) every lost hold told before anyone took
//! its place, (c) fencing tokens increasing in enter order, (d) every task progressing once the
//! faults end; and (e) no orphaned nodes, checked while the sessions live (after a leader kill,
//! with the workload quiesced) and after every client closed (no nodes, no watches left on any
//! member).
//!
//! Beside the locks, a cache workload: one `CuratorCache` per client over one subtree, which
//! two writer tasks (one direct client, one proxied) mutate through the faults (create,
//! set-data, delete at two depths). When the faults end and the writers stop, every cache must
//! equal a fresh read of the server (path, data, version) within a bound derived from the
//! session timeout, and in each cache's events the `mzxid` of every path must never go back.
//!
//! Counter workloads: one task per client increments a `DistributedAtomicLong`, and one per
//! client a `SharedCount` through `try_set` loops, through the faults, recording each increment
//! as succeeded, failed or of unknown outcome (a lost reply is a typed `OutcomeUnknown`; an
//! increment given up on counts as unknown too). When the faults end every task must increment
//! again; once they stop, each counter must hold every increment reported as succeeded and at
//! most the unknown ones besides, no two successes having written the same value
//! (`history::check_counter`).
//!
//! A persistent node workload: `PersistentNode` registrations (protected ephemeral-sequential on
//! a direct and on a proxied client, protected ephemeral on another proxied one), each alone in
//! its own directory, their data changed through the faults. An observer never sees two nodes
//! in one directory; when the faults end each registration must be back within a bound derived
//! from the session timeout: exactly one node, at the registration's name, owned by its
//! client's current session, holding the data last set; after every client closed, none is left.
//!
//! The member replacement: the ensemble runs with dynamic reconfiguration (and quorum proxies
//! in front of each member, so that isolating works on any member); a new server is added as
//! a participant, and once it follows, one old member that is not the leader (a follower:
//! the leader kill already covers a change of leader, so the step stays about membership) is
//! removed and stopped. From then on the faults pick among the current members. The direct
//! clients follow the new member list (ensemble tracking); a proxied client keeps its connect
//! string, one client-side proxy per original member, so it loses the removed member and never
//! reaches the added one: it still has two members of three, which the faults then hit as
//! before.
//!
//! `ZKR_CHAOS_SECS` (default 30) is how long the random part of the schedule runs, after one
//! step of each kind of fault; `ZKR_CHAOS_SEED` replays a schedule (the seed and the schedule
//! are printed first). Run with `-- --nocapture` to watch it.

use crate::common;
use crate::common::history;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::fixtures::{framework, framework_waiting, init_tracing, unique_path};
use common::timing::FAULT_SESSION as SESSION;
use futures::future::BoxFuture;
use futures::FutureExt;
use futures::StreamExt;
use history::{Hold, Increments, Report, Resource};
use tokio::sync::watch;
use tokio::time::Instant;
use zk_recipes::retry::RetryNTimes;
use zk_recipes::testing::{expire_session, four_letter_word, FaultProxy, MemberRole, ProxyMode, TestingCluster};
use zk_recipes::{
    CacheEvent, CreateMode, CuratorCache, DistributedAtomicLong, Error, Framework, InterProcessMutex,
    InterProcessReadWriteLock, InterProcessSemaphore, MutexGuard, PersistentNode, ReadLock, ReadLockGuard,
    SemaphoreLease, SharedCount, WaitStrategy, WriteLock, WriteLockGuard,
};

/// Clients: the first `DIRECT` connect to the ensemble directly, the rest through one fault
/// proxy per member.
const CLIENTS: usize = 4;
const DIRECT: usize = 2;
/// Longest ordinary critical section.
const MAX_HOLD: Duration = Duration::from_millis(300);
/// One hold in this many is long (see `task_loop`).
const LONG_HOLD_ONE_IN: u64 = 40;
const DEFAULT_SECS: u64 = 30;

// ---------------------------------------------------------------------------------------------
// The recipes under test. Adding one is one `Workload` in `workloads()` plus its two small
// trait impls.

/// A lock handle of one client, as the workload loop uses it.
trait ChaosLock: Send + Sync {
    fn acquire(&self) -> BoxFuture<'_, zk_recipes::Result<Box<dyn ChaosGuard>>>;
}

/// A hold, as the workload loop uses it.
trait ChaosGuard: Send + Sync {
    fn token(&self) -> i64;
    fn lost(&self) -> BoxFuture<'_, ()>;
    fn release(self: Box<Self>) -> BoxFuture<'static, zk_recipes::Result<()>>;
}

/// The guard impls of the recipes whose guards have the usual `fencing_token`, `lost` and
/// `release`.
macro_rules! chaos_lock {
    ($($lock:ty => $guard:ty),* $(,)?) => {$(
        impl ChaosLock for $lock {
            fn acquire(&self) -> BoxFuture<'_, zk_recipes::Result<Box<dyn ChaosGuard>>> {
                async move { Ok(Box::new(<$lock>::acquire(self).await?) as Box<dyn ChaosGuard>) }.boxed()
            }
        }

        impl ChaosGuard for $guard {
            fn token(&self) -> i64 {
                self.fencing_token()
            }
            fn lost(&self) -> BoxFuture<'_, ()> {
                <$guard>::lost(self).boxed()
            }
            fn release(self: Box<Self>) -> BoxFuture<'static, zk_recipes::Result<()>> {
                <$guard>::release(*self).boxed()
            }
        }
    )*};
}

chaos_lock!(
    InterProcessMutex => MutexGuard,
    InterProcessSemaphore => SemaphoreLease,
    ReadLock => ReadLockGuard,
    WriteLock => WriteLockGuard,
);

/// The read-write lock's capacity in the checker: a reader weighs 1, a writer all of it, so a
/// writer must be alone and readers may share (far more than the workload's readers).
const RW_CAPACITY: u64 = 1000;

/// One kind of task of the workload.
struct Workload {
    /// Task names start with it.
    name: &'static str,
    /// The resource (lock path) its holds count against; entries may share one.
    resource: Resource,
    /// What one hold weighs against the resource's capacity.
    weight: u64,
    tasks_per_client: usize,
    /// The client's handle on `path`.
    make: fn(&Framework, &str) -> Arc<dyn ChaosLock>,
    /// The directories its nodes live in, under the path (for the orphan checks).
    node_dirs: &'static [&'static str],
}

fn workloads() -> Vec<Workload> {
    vec![
        Workload {
            name: "mutex",
            resource: Resource { name: "mutex".into(), capacity: 1, ordered_tokens: true },
            weight: 1,
            tasks_per_client: 3,
            make: |fw, path| Arc::new(InterProcessMutex::new(fw, path).unwrap()),
            node_dirs: &[""],
        },
        Workload {
            name: "semaphore",
            resource: Resource { name: "semaphore".into(), capacity: 2, ordered_tokens: true },
            weight: 1,
            tasks_per_client: 3,
            make: |fw, path| Arc::new(InterProcessSemaphore::new(fw, path, 2).unwrap()),
            node_dirs: &["/locks", "/leases"],
        },
        // Readers share their fencing tokens' order with writers in no fixed way, so tokens are
        // not checked for order here (the mutex and the semaphore check them).
        Workload {
            name: "rw-read",
            resource: Resource { name: "rw".into(), capacity: RW_CAPACITY, ordered_tokens: false },
            weight: 1,
            tasks_per_client: 2,
            make: |fw, path| Arc::new(InterProcessReadWriteLock::new(fw, path).unwrap().read_lock()),
            node_dirs: &[""],
        },
        Workload {
            name: "rw-write",
            resource: Resource { name: "rw".into(), capacity: RW_CAPACITY, ordered_tokens: false },
            weight: RW_CAPACITY,
            tasks_per_client: 1,
            make: |fw, path| Arc::new(InterProcessReadWriteLock::new(fw, path).unwrap().write_lock()),
            node_dirs: &[""],
        },
    ]
}

// ---------------------------------------------------------------------------------------------
// The seeded schedule.

/// SplitMix64: small, seedable, and the same on every platform.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    fn between(&mut self, lo: Duration, hi: Duration) -> Duration {
        let span = hi.saturating_sub(lo).as_millis() as u64;
        lo + Duration::from_millis(self.below(span + 1))
    }

    fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            items.swap(i, self.below(i as u64 + 1) as usize);
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum ServerFault {
    KillFollower,
    KillLeader,
    PauseMember,
    PauseEnsemble,
    IsolateFollower,
    /// A server added by reconfiguration, then an old follower removed and stopped.
    ReplaceMember,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum ClientFault {
    /// FIN both ways, reconnects refused for the duration.
    Cut,
    /// RST both ways, reconnects refused for the duration.
    Reset,
    /// Silence both ways.
    BlackHole,
    /// Silence, then a reconnect handshake answered and reset, then refusals.
    StaleHandshake,
    /// The session expired on the server (after the client went silent).
    Expire,
}

#[derive(Debug, Clone)]
struct Step {
    server: Option<(ServerFault, u64)>,
    client: Option<(ClientFault, usize)>,
    length: Duration,
    gap: Duration,
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let side = if self.length > SESSION { "longer" } else { "shorter" };
        let mut parts = Vec::new();
        if let Some((fault, pick)) = self.server {
            parts.push(format!("{fault:?} (pick {})", pick % 1000));
        }
        if let Some((fault, client)) = self.client {
            parts.push(format!("{fault:?} client c{client}"));
        }
        write!(
            f,
            "{} for {:.1}s ({side} than the session), then {:.1}s quiet",
            parts.join(" + "),
            self.length.as_secs_f64(),
            self.gap.as_secs_f64()
        )
    }
}

fn short(rng: &mut Rng) -> Duration {
    rng.between(SESSION / 4, SESSION * 3 / 4)
}

fn long(rng: &mut Rng) -> Duration {
    rng.between(SESSION * 5 / 4, SESSION * 2)
}

/// One step of every kind first (server faults paired with client faults, each length side
/// covered), then random steps for `random` in total.
fn schedule(seed: u64, random: Duration) -> Vec<Step> {
    let mut rng = Rng(seed);
    let proxied = |rng: &mut Rng| DIRECT + rng.below((CLIENTS - DIRECT) as u64) as usize;
    let mut servers = vec![
        (ServerFault::KillLeader, false),
        (ServerFault::KillFollower, false),
        (ServerFault::PauseMember, false),
        (ServerFault::PauseMember, true),
        (ServerFault::PauseEnsemble, false),
        (ServerFault::PauseEnsemble, true),
        (ServerFault::IsolateFollower, true),
        (ServerFault::ReplaceMember, false),
    ];
    let mut clients = vec![
        ClientFault::Cut,
        ClientFault::Reset,
        ClientFault::BlackHole,
        ClientFault::BlackHole,
        ClientFault::StaleHandshake,
        ClientFault::Expire,
        ClientFault::Cut,
        ClientFault::Reset,
    ];
    // The leader kill comes first: the audit of orphans with live sessions follows it.
    rng.shuffle(&mut servers[1..]);
    rng.shuffle(&mut clients);
    let mut steps = Vec::new();
    for ((server, is_long), client) in servers.into_iter().zip(clients) {
        let length = if is_long { long(&mut rng) } else { short(&mut rng) };
        let pick = rng.next();
        let gap = rng.between(Duration::from_secs(1), Duration::from_secs(3));
        steps.push(Step { server: Some((server, pick)), client: Some((client, proxied(&mut rng))), length, gap });
    }
    let mut planned = Duration::ZERO;
    while planned < random {
        let server = match rng.below(10) {
            0..=5 => Some((
                [
                    ServerFault::KillFollower,
                    ServerFault::KillLeader,
                    ServerFault::PauseMember,
                    ServerFault::PauseEnsemble,
                    ServerFault::IsolateFollower,
                ][rng.below(5) as usize],
                rng.next(),
            )),
            _ => None,
        };
        let client = match (server.is_some(), rng.below(10)) {
            (true, 0..=6) => None,
            _ => Some((
                [
                    ClientFault::Cut,
                    ClientFault::Reset,
                    ClientFault::BlackHole,
                    ClientFault::StaleHandshake,
                    ClientFault::Expire,
                ][rng.below(5) as usize],
                proxied(&mut rng),
            )),
        };
        let length = if rng.below(2) == 0 { short(&mut rng) } else { long(&mut rng) };
        let gap = rng.between(Duration::from_millis(500), Duration::from_secs(3));
        planned += length + gap;
        steps.push(Step { server, client, length, gap });
    }
    steps
}

// ---------------------------------------------------------------------------------------------
// Clients and the workload.

struct Client {
    name: String,
    fw: Framework,
    /// One proxy per member for a proxied client.
    proxies: Vec<FaultProxy>,
}

impl Client {
    fn set_mode(&self, mode: ProxyMode) {
        self.proxies.iter().for_each(|p| p.set_mode(mode));
    }
    fn refuse_new(&self, refuse: bool) {
        self.proxies.iter().for_each(|p| p.refuse_new(refuse));
    }
    fn drop_connections(&self) {
        self.proxies.iter().for_each(FaultProxy::drop_connections);
    }
    fn reset_connections(&self) {
        self.proxies.iter().for_each(FaultProxy::reset_connections);
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Run,
    Quiesce,
    Stop,
}

/// What the workload shares.
#[derive(Clone)]
struct Shared {
    holds: Arc<Mutex<Vec<Hold>>>,
    phase: watch::Receiver<Phase>,
    /// Tasks currently acquiring or holding.
    busy: Arc<AtomicUsize>,
    errors: Arc<Mutex<BTreeMap<String, usize>>>,
}

/// Decrements `busy` however the activity ends.
struct Busy(Arc<AtomicUsize>);

impl Busy {
    fn enter(busy: &Arc<AtomicUsize>) -> Busy {
        busy.fetch_add(1, Ordering::SeqCst);
        Busy(busy.clone())
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

#[allow(clippy::too_many_arguments)]
async fn task_loop(
    name: String,
    resource: String,
    weight: u64,
    fw: Framework,
    lock: Arc<dyn ChaosLock>,
    seed: u64,
    shared: Shared,
) {
    let mut rng = Rng(seed);
    let mut phase = shared.phase.clone();
    loop {
        let now = *phase.borrow_and_update();
        match now {
            Phase::Stop => return,
            Phase::Quiesce => {
                if phase.changed().await.is_err() {
                    return;
                }
                continue;
            }
            Phase::Run => {}
        }
        let busy = Busy::enter(&shared.busy);
        let began = Instant::now();
        // A phase change cancels a waiting acquire (dropping it is cancel-safe).
        let acquired = tokio::select! {
            acquired = lock.acquire() => acquired,
            _ = phase.changed() => continue,
        };
        let guard = match acquired {
            Ok(guard) => guard,
            Err(error) => {
                *shared.errors.lock().unwrap().entry(format!("{error}")).or_default() += 1;
                drop(busy);
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let entered = Instant::now();
        let epoch = fw.snapshot().epoch;
        let token = guard.token();
        // Mostly a few hundred ms; one hold in LONG_HOLD_ONE_IN lasts up to twice the session
        // timeout, so that silent faults (noticed only after 2/5 of it) find holders inside.
        let hold_for = match rng.below(LONG_HOLD_ONE_IN) {
            0 => rng.between(SESSION / 2, SESSION * 2),
            _ => Duration::from_millis(rng.below(MAX_HOLD.as_millis() as u64 + 1)),
        };
        let told = tokio::select! {
            () = tokio::time::sleep(hold_for) => None,
            () = guard.lost() => Some(Instant::now()),
        };
        let exited = Instant::now();
        // A release that outlasts an outage goes on in the background (cancel-safe).
        let released = match tokio::time::timeout(SESSION * 2, guard.release()).await {
            Ok(Ok(())) => Some(Instant::now()),
            _ => None,
        };
        // A release also "succeeds" when the node went with its session: then the server took
        // the node, and another holder may have taken its place.
        let session_ended = fw.snapshot().epoch != epoch;
        let released = released.filter(|_| !session_ended);
        shared.holds.lock().unwrap().push(Hold {
            resource: resource.clone(),
            holder: name.clone(),
            weight,
            token,
            began,
            entered,
            told,
            exited,
            released,
            session_ended,
        });
        drop(busy);
    }
}

// ---------------------------------------------------------------------------------------------
// Faults.

#[derive(Default)]
struct FaultLog {
    server: BTreeMap<String, usize>,
    client: BTreeMap<String, usize>,
    /// Each step's time span (start, end of its healing) and what it did.
    windows: Vec<(Instant, Instant, String)>,
}

impl FaultLog {
    /// What was going on at `t`: the steps whose window (extended by one session timeout,
    /// the longest a session outlives its last contact) contains it.
    fn cause(&self, t: Instant) -> String {
        let causes: Vec<&str> = self
            .windows
            .iter()
            .filter(|(start, end, _)| *start <= t && t <= *end + SESSION)
            .map(|(_, _, what)| what.as_str())
            .collect();
        if causes.is_empty() {
            "no fault".to_owned()
        } else {
            causes.join(" / ")
        }
    }
}

async fn leader(cluster: &TestingCluster, limit: Duration) -> Option<usize> {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(leader) = cluster.leader().await {
            return Some(leader);
        }
        if Instant::now() >= deadline {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn follower(cluster: &TestingCluster, pick: u64) -> Option<usize> {
    let leader = leader(cluster, SESSION * 2).await?;
    let followers: Vec<usize> =
        cluster.members().into_iter().filter(|&i| i != leader && cluster.is_running(i)).collect();
    (!followers.is_empty()).then(|| followers[pick as usize % followers.len()])
}

/// The connect string of the current members.
fn members_connect_string(cluster: &TestingCluster) -> String {
    cluster.members().into_iter().map(|i| cluster.server_connect_string(i)).collect::<Vec<_>>().join(",")
}

/// Adds a server as a participant and waits until it follows; then removes an old follower
/// (picked by `pick`) and stops it. Returns what it did.
async fn replace_member(cluster: &mut TestingCluster, pick: u64) -> String {
    // A fault just before (a pause of the whole ensemble) may have it electing a leader still;
    // the member is added once it serves (adding gives up after the cluster's start timeout).
    if let Err(e) = cluster.settle(Duration::from_secs(90)).await {
        return format!("ReplaceMember: skipped (the ensemble did not settle: {e})");
    }
    let added = cluster.add_server(MemberRole::Participant).await.unwrap_or_else(|e| panic!("adding a member: {e}"));
    // It syncs with the leader before the reconfiguration is sent; following is a moment away.
    let serving = eventually(SESSION * 4, || async {
        match cluster.mode(added).await.as_deref() {
            Some("follower" | "leader") => Ok(()),
            mode => Err(format!("mode {mode:?}")),
        }
    })
    .await;
    if let Err(e) = serving {
        panic!("the added member {added} does not serve: {e}");
    }
    let Some(leader) = leader(cluster, SESSION * 2).await else {
        return format!("ReplaceMember: member {added} added; none removed (no leader)");
    };
    let old: Vec<usize> =
        cluster.members().into_iter().filter(|&i| i != added && i != leader && cluster.is_running(i)).collect();
    let Some(&leaving) = old.get(pick as usize % old.len().max(1)) else {
        return format!("ReplaceMember: member {added} added; none removed (no old follower)");
    };
    cluster.remove_server(leaving).await.unwrap_or_else(|e| panic!("removing member {leaving}: {e}"));
    format!("ReplaceMember: member {added} added, member {leaving} removed")
}

/// Starts again every member whose JVM exited by itself (every fault of the schedule ends
/// with its members running), printing the end of its log: the server's own failure, which
/// the run reports and heals rather than stopping on, since the library cannot prevent it.
/// Returns what it did.
async fn revive_exited(cluster: &mut TestingCluster) -> Option<String> {
    let exited: Vec<usize> = cluster.members().into_iter().filter(|&i| !cluster.is_running(i)).collect();
    for &i in &exited {
        let log = cluster.log_file(i).ok().and_then(|file| std::fs::read_to_string(file).ok()).unwrap_or_default();
        let tail: Vec<&str> = log.lines().rev().take(30).collect();
        eprintln!("member {i} exited by itself; the end of its log:");
        for line in tail.iter().rev() {
            eprintln!("  | {line}");
        }
        cluster.restart(i).await.unwrap_or_else(|e| panic!("restarting member {i}, which had exited: {e}"));
    }
    (!exited.is_empty()).then(|| format!("member(s) {exited:?} had exited by themselves: restarted"))
}

/// Runs a server fault for `length`, then heals it. Returns what it did.
async fn server_fault(cluster: &mut TestingCluster, fault: ServerFault, pick: u64, length: Duration) -> String {
    if let Some(revived) = revive_exited(cluster).await {
        return format!("{fault:?}: skipped ({revived})");
    }
    match fault {
        ServerFault::KillFollower | ServerFault::KillLeader => {
            // A kill waits until the ensemble serves with every member and has written through
            // each. ZooKeeper 3.8.0 can lose committed transactions when a member that has
            // just synced with a leader is killed before it has logged what the sync sent it
            // (ZOOKEEPER-4646, ZOOKEEPER-4643, ZOOKEEPER-4785). That is the servers' own
            // history going back, which no client can prevent, and it would hide what this run
            // checks: the library. The elections, re-syncs and kills themselves are unchanged.
            if let Err(e) = cluster.settle(Duration::from_secs(90)).await {
                return format!("{fault:?}: skipped (the ensemble did not settle: {e})");
            }
            let member = match fault {
                ServerFault::KillLeader => leader(cluster, SESSION * 2).await,
                _ => follower(cluster, pick).await,
            };
            let Some(member) = member else { return format!("{fault:?}: skipped (no leader)") };
            cluster.kill(member).await.unwrap();
            tokio::time::sleep(length).await;
            cluster.restart(member).await.unwrap_or_else(|e| panic!("restarting member {member}: {e}"));
            format!("{fault:?}: member {member}")
        }
        ServerFault::PauseMember => {
            let members = cluster.members();
            let member = members[pick as usize % members.len()];
            cluster.pause(member).unwrap();
            tokio::time::sleep(length).await;
            cluster.resume(member).unwrap();
            format!("{fault:?}: member {member}")
        }
        ServerFault::PauseEnsemble => {
            let members = cluster.members();
            for &i in &members {
                cluster.pause(i).unwrap();
            }
            tokio::time::sleep(length).await;
            for &i in &members {
                cluster.resume(i).unwrap();
            }
            format!("{fault:?}")
        }
        ServerFault::IsolateFollower => {
            let Some(member) = follower(cluster, pick).await else { return format!("{fault:?}: skipped") };
            cluster.isolate(member).unwrap();
            tokio::time::sleep(length).await;
            cluster.heal(member).unwrap();
            format!("{fault:?}: member {member}")
        }
        ServerFault::ReplaceMember => {
            let started = Instant::now();
            let did = replace_member(cluster, pick).await;
            tokio::time::sleep(length.saturating_sub(started.elapsed())).await;
            did
        }
    }
}

/// Runs a client fault for `length`, then heals it.
async fn client_fault(client: &Client, direct: &str, fault: ClientFault, length: Duration) -> String {
    match fault {
        ClientFault::Cut | ClientFault::Reset => {
            client.refuse_new(true);
            match fault {
                ClientFault::Cut => client.drop_connections(),
                _ => client.reset_connections(),
            }
            tokio::time::sleep(length).await;
            client.refuse_new(false);
        }
        ClientFault::BlackHole | ClientFault::StaleHandshake => {
            client.set_mode(match fault {
                ClientFault::BlackHole => ProxyMode::BlackHole,
                _ => ProxyMode::HandshakeThenRefuse,
            });
            tokio::time::sleep(length).await;
            client.set_mode(ProxyMode::Pass);
            client.drop_connections();
        }
        ClientFault::Expire => {
            // Silent first, as a session the ensemble expires has been: the holder hears of it
            // (Suspended) before the session is closed.
            client.set_mode(ProxyMode::BlackHole);
            let mut state = client.fw.state_watch();
            let _ = tokio::time::timeout(SESSION, state.wait_for(|s| !s.state.is_connected())).await;
            if let Ok(zk) = client.fw.zk_client() {
                let session = zk.session().clone();
                drop(zk);
                if let Err(e) = expire_session(&client.proxies[0], direct, session).await {
                    eprintln!("expire_session on {}: {e}", client.name);
                }
            }
            client.set_mode(ProxyMode::Pass);
            client.drop_connections();
        }
    }
    format!("{fault:?}: {}", client.name)
}

// ---------------------------------------------------------------------------------------------
// Orphans.

/// The nodes under every workload path, with their owning session, read through `fw`.
async fn nodes(fw: &Framework, paths: &[(String, &'static [&'static str])]) -> Vec<(String, i64, i64)> {
    let mut found = Vec::new();
    for (path, dirs) in paths {
        for dir in dirs.iter() {
            let dir = format!("{path}{dir}");
            let Ok(children) = fw.get_children(&dir).await else { continue };
            for child in children {
                if dir == *path && (child == "locks" || child == "leases") {
                    continue;
                }
                let node = format!("{dir}/{child}");
                if let Ok(Some(stat)) = fw.exists(&node).await {
                    found.push((node, stat.ephemeral_owner, stat.ctime));
                }
            }
        }
    }
    found
}

/// Polls until `probe` is `Ok`, for at most `limit`; the last error otherwise.
async fn eventually<F, Fut>(limit: Duration, mut probe: F) -> Result<(), String>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<(), String>>,
{
    let deadline = Instant::now() + limit;
    loop {
        match probe().await {
            Ok(()) => return Ok(()),
            Err(last) if Instant::now() >= deadline => return Err(last),
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}

/// (e), while the sessions live: with the workload quiesced and the background deletes done,
/// no node under the lock paths belongs to a live session, and the nodes of abandoned
/// sessions go with them.
async fn audit_live<'a>(
    clients: impl Iterator<Item = &'a Client> + Clone,
    observer: &Framework,
    paths: &[(String, &'static [&'static str])],
) -> Vec<String> {
    let mut problems = Vec::new();
    for client in clients.clone() {
        let pending = eventually(SESSION * 3, || async {
            match client.fw.pending_deletes() {
                0 if client.fw.state().is_connected() => Ok(()),
                n => Err(format!("{} pending deletes, state {:?}", n, client.fw.state())),
            }
        })
        .await;
        if let Err(e) = pending {
            problems.push(format!("{}: {e}", client.name));
        }
    }
    let live: BTreeSet<i64> = clients.map(|c| c.fw.snapshot().session_id).collect();
    let owned_by_live = eventually(SESSION / 2, || async {
        let orphans: Vec<_> = nodes(observer, paths).await.into_iter().filter(|(_, o, _)| live.contains(o)).collect();
        if orphans.is_empty() {
            Ok(())
        } else {
            Err(format!("{orphans:?}"))
        }
    })
    .await;
    if let Err(orphans) = owned_by_live {
        problems.push(format!("nodes of live sessions that no guard or waiter owns: {orphans}"));
    }
    let all_gone = eventually(SESSION * 3, || async {
        let left = nodes(observer, paths).await;
        if left.is_empty() {
            Ok(())
        } else {
            Err(format!("{left:?}"))
        }
    })
    .await;
    if let Err(left) = all_gone {
        problems.push(format!("nodes of abandoned sessions outlived them: {left}"));
    }
    problems
}

/// `Total watches:N` of a `wchs` answer.
fn total_watches(wchs: &str) -> Option<u64> {
    wchs.lines().find_map(|l| l.strip_prefix("Total watches:")).and_then(|n| n.trim().parse().ok())
}

/// (e), after every client closed: no nodes under the lock paths and no watches, on every member.
async fn audit_closed(cluster: &TestingCluster, paths: &[(String, &'static [&'static str])]) -> Vec<String> {
    let mut problems = Vec::new();
    for i in cluster.members() {
        let address = cluster.server_connect_string(i);
        let fw = framework(&address, SESSION).await;
        let _ = fw.zk_client().unwrap().sync("/").await;
        if let Err(left) = eventually(SESSION * 3, || async {
            let left = nodes(&fw, paths).await;
            if left.is_empty() {
                Ok(())
            } else {
                Err(format!("{left:?}"))
            }
        })
        .await
        {
            problems.push(format!("member {i}: nodes left after every client closed: {left}"));
        }
        fw.close().await;
    }
    for i in cluster.members() {
        let address = cluster.server_connect_string(i);
        let watches = eventually(SESSION * 2, || async {
            let wchs = four_letter_word(&address, "wchs", Duration::from_secs(5)).await.map_err(|e| e.to_string())?;
            let wchc = four_letter_word(&address, "wchc", Duration::from_secs(5)).await.map_err(|e| e.to_string())?;
            match total_watches(&wchs) {
                Some(0) if !wchc.lines().any(|l| l.starts_with("0x")) => Ok(()),
                _ => Err(format!("wchs: {wchs:?}; wchc: {wchc:?}")),
            }
        })
        .await;
        if let Err(left) = watches {
            problems.push(format!("member {i}: watches left after every client closed: {left}"));
        }
    }
    problems
}

// ---------------------------------------------------------------------------------------------

/// The cache workload's writer: create, set-data or delete a node at depth 1 or 2 under
/// `root`, chosen from `seed`, until `stop`; errors (a fault, a missing parent, a node in the
/// way) only skip the op. Returns the writes that succeeded.
async fn cache_writer(fw: Framework, root: String, stop: watch::Receiver<bool>, seed: u64) -> u64 {
    let mut rng = Rng(seed | 1);
    let names = ["a", "b", "c", "d"];
    let mut writes = 0;
    while !*stop.borrow() {
        let x = rng.next();
        let mut path = root.clone();
        for level in 0..1 + (x % 2) as usize {
            path.push('/');
            path.push_str(names[((x >> (8 * level + 3)) % 4) as usize]);
        }
        let data = format!("{seed:x}-{writes}");
        let op = async {
            match (x >> 40) % 3 {
                0 => fw.create(&path).data(data.as_bytes()).await.map(drop),
                1 => fw.set_data(&path, data.as_bytes()).await.map(drop),
                _ => fw.delete(&path).await,
            }
        };
        // Bounded, so that a writer blocked by a fault still sees `stop`.
        if let Ok(Ok(())) = tokio::time::timeout(SESSION, op).await {
            writes += 1;
        }
        // A pace, so that the writers leave the two cores to the lock tasks too.
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    writes
}

/// Reads a cache's events until its stream ends; returns a problem for each path whose
/// `mzxid` went back from one event to the next.
async fn event_order(name: String, mut events: zk_recipes::CacheEventStream) -> Vec<String> {
    let mut last: BTreeMap<String, i64> = BTreeMap::new();
    let mut problems = Vec::new();
    while let Some(event) = events.next().await {
        let node = match &event {
            CacheEvent::Created(node) | CacheEvent::Changed(_, node) | CacheEvent::Deleted(node) => node,
            _ => continue,
        };
        let mzxid = node.stat().mzxid;
        if let Some(previous) = last.insert(node.path().to_owned(), mzxid) {
            if mzxid < previous {
                problems
                    .push(format!("cache of {name}: {} went back from mzxid {previous:#x} to {mzxid:#x}", node.path()));
            }
        }
    }
    problems
}

/// Path -> (data, version) of `root` and everything below it, read fresh from the server.
async fn server_tree(fw: &Framework, root: &str) -> BTreeMap<String, (Vec<u8>, i32)> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_owned()];
    while let Some(path) = stack.pop() {
        let Ok((data, stat)) = fw.get_data(&path).await else { continue };
        out.insert(path.clone(), (data, stat.version));
        let children = fw.get_children(&path).await.unwrap_or_default();
        stack.extend(children.into_iter().map(|c| format!("{path}/{c}")));
    }
    out
}

fn cache_tree(cache: &CuratorCache) -> BTreeMap<String, (Vec<u8>, i32)> {
    cache
        .nodes()
        .into_iter()
        .map(|n| (n.path().to_owned(), (n.data().cloned().unwrap_or_default(), n.stat().version)))
        .collect()
}

// ---------------------------------------------------------------------------------------------
// The counter workloads.

/// The pause between two increments of one counter task.
const COUNTER_PACE: Duration = Duration::from_millis(100);

/// The two counters: a `DistributedAtomicLong` (optimistic versioned tries) and a
/// `SharedCount` incremented by `try_set` loops (Curator's compare-and-set on the version).
#[derive(Debug, Clone, Copy)]
enum CounterKind {
    AtomicLong,
    SharedCount,
}

impl CounterKind {
    const ALL: [CounterKind; 2] = [CounterKind::AtomicLong, CounterKind::SharedCount];

    fn name(self) -> &'static str {
        match self {
            CounterKind::AtomicLong => "atomic-long",
            CounterKind::SharedCount => "shared-count",
        }
    }

    /// The node's bytes for `value`.
    fn encode(self, value: i64) -> Vec<u8> {
        match self {
            CounterKind::AtomicLong => value.to_be_bytes().to_vec(),
            CounterKind::SharedCount => (value as i32).to_be_bytes().to_vec(),
        }
    }

    /// The node's value, `None` when it does not hold the layout's bytes.
    fn decode(self, bytes: &[u8]) -> Option<i64> {
        match self {
            CounterKind::AtomicLong => <[u8; 8]>::try_from(bytes).ok().map(i64::from_be_bytes),
            CounterKind::SharedCount => <[u8; 4]>::try_from(bytes).ok().map(|b| i32::from_be_bytes(b).into()),
        }
    }
}

/// One client's handle on a counter.
enum Incrementer {
    Long(DistributedAtomicLong),
    Count(SharedCount),
}

impl Incrementer {
    async fn new(kind: CounterKind, fw: &Framework, path: &str) -> Incrementer {
        match kind {
            // Optimistic tries only: among four contending tasks an increment may lose every
            // race, which is a failure, not an error.
            CounterKind::AtomicLong => Incrementer::Long(
                DistributedAtomicLong::new(fw, path, RetryNTimes::new(10, Duration::from_millis(10))).unwrap(),
            ),
            CounterKind::SharedCount => {
                let count = SharedCount::new(fw, path, 0).unwrap();
                count.start().await.unwrap();
                Incrementer::Count(count)
            }
        }
    }

    /// One increment by one: the value written when it was applied, `None` when it was not.
    async fn increment(&self) -> zk_recipes::Result<Option<i64>> {
        match self {
            Incrementer::Long(long) => long.increment().await.map(|v| v.succeeded().then(|| *v.post_value())),
            Incrementer::Count(count) => {
                let seen = count.versioned_count()?;
                let next = seen.value().wrapping_add(1);
                Ok(count.try_set(&seen, next).await?.then_some(next.into()))
            }
        }
    }

    fn close(&self) {
        if let Incrementer::Count(count) = self {
            count.close();
        }
    }
}

/// What one counter task did: its increments and the errors other than `OutcomeUnknown`.
struct CounterRun {
    increments: Increments,
    errors: BTreeMap<String, usize>,
}

/// Increments the counter by one until `stop`, recording each outcome;
/// `last_success` holds when an increment last reported it was applied.
async fn counter_loop(
    counter: Incrementer,
    stop: watch::Receiver<bool>,
    last_success: Arc<Mutex<Option<Instant>>>,
) -> CounterRun {
    let mut run = CounterRun { increments: Increments::default(), errors: BTreeMap::new() };
    while !*stop.borrow() {
        // Bounded, so that a task held up by a fault still sees `stop`. An increment dropped
        // here may still be applied on the server: its outcome is unknown.
        match tokio::time::timeout(SESSION * 2, counter.increment()).await {
            Ok(Ok(Some(written))) => {
                run.increments.succeeded.push(written);
                *last_success.lock().unwrap() = Some(Instant::now());
            }
            Ok(Ok(None)) => run.increments.failed += 1,
            Ok(Err(Error::OutcomeUnknown { .. })) => run.increments.unknown += 1,
            Err(_) => {
                run.increments.unknown += 1;
                *run.errors.entry("given up after twice the session timeout".to_owned()).or_default() += 1;
            }
            Ok(Err(error)) => {
                run.increments.failed += 1;
                *run.errors.entry(error.to_string()).or_default() += 1;
            }
        }
        tokio::time::sleep(COUNTER_PACE).await;
    }
    counter.close();
    run
}

/// One counter of the workload: its node and its tasks (one per client).
struct CounterWorkload {
    kind: CounterKind,
    path: String,
    stop: watch::Sender<bool>,
    tasks: Vec<CounterTask>,
}

/// One client's incrementing task.
struct CounterTask {
    client: String,
    task: tokio::task::JoinHandle<CounterRun>,
    /// When it last reported an applied increment.
    last_success: Arc<Mutex<Option<Instant>>>,
}

/// Waits until every task of `counter` reported an applied increment after `faults_ended`,
/// stops them, reads the final value and judges it. Returns the problems found.
async fn judge_counter(counter: CounterWorkload, observer: &Framework, faults_ended: Instant) -> Vec<String> {
    let name = counter.kind.name();
    let mut problems = Vec::new();
    let counting = eventually(Duration::from_secs(60), || async {
        let idle: Vec<&str> = counter
            .tasks
            .iter()
            .filter(|t| !t.last_success.lock().unwrap().is_some_and(|t| t >= faults_ended))
            .map(|t| t.client.as_str())
            .collect();
        if idle.is_empty() {
            Ok(())
        } else {
            Err(format!("{idle:?}"))
        }
    })
    .await;
    if let Err(idle) = counting {
        problems.push(format!("{name}: tasks that made no increment after the faults: {idle}"));
    }
    counter.stop.send_replace(true);
    let mut increments = Increments::default();
    let mut errors: BTreeMap<String, usize> = BTreeMap::new();
    for CounterTask { client, task, .. } in counter.tasks {
        match tokio::time::timeout(SESSION * 4, task).await {
            Ok(joined) => {
                let run = joined.expect("a counter task panicked");
                increments.merge(run.increments);
                for (error, n) in run.errors {
                    *errors.entry(error).or_default() += n;
                }
            }
            Err(_) => problems.push(format!("{name}: the task of {client} did not stop")),
        }
    }
    let _ = observer.zk_client().unwrap().sync(&counter.path).await;
    match observer.get_data(&counter.path).await {
        Ok((data, _)) => match counter.kind.decode(&data) {
            Some(final_value) => {
                eprintln!(
                    "{name}: {} increments succeeded, {} failed, {} unknown; final value {final_value}; errors {errors:?}",
                    increments.succeeded.len(),
                    increments.failed,
                    increments.unknown
                );
                problems.extend(history::check_counter(name, 0, final_value, &increments));
            }
            None => problems.push(format!("{name}: {} bytes in the node", data.len())),
        },
        Err(e) => problems.push(format!("{name}: reading the final value: {e}")),
    }
    let _ = observer.delete(&counter.path).await;
    problems
}

// ---------------------------------------------------------------------------------------------
// The persistent node workload.

/// The registrations: the client (by index) and the node's mode. One direct client (server
/// faults only) and two proxied ones (client faults as well).
const REGISTRATIONS: [(usize, CreateMode); 3] = [
    (0, CreateMode::EphemeralSequential),
    (DIRECT, CreateMode::EphemeralSequential),
    (DIRECT + 1, CreateMode::Ephemeral),
];

/// The registrations' directories under the workload's root, in `REGISTRATIONS` order.
const REGISTRATION_DIRS: &[&str] = &["/r0", "/r1", "/r2"];

/// How long after the faults end a registration must be back: the expiry of a session that
/// went silent just before (the server's tick slack included), then the framework's reconnect
/// and one create.
fn back_within() -> Duration {
    SESSION * 3 + Duration::from_secs(5)
}

struct Registration {
    /// `c2/r1`: the client and the directory.
    name: String,
    client: usize,
    /// The registration's directory (its node the only child).
    dir: String,
    node: Arc<PersistentNode>,
    /// The node's path after the first create: every re-create must reuse it.
    first_path: String,
    /// The data last handed to `set_data`.
    last_data: Arc<Mutex<Vec<u8>>>,
}

/// Sets the node's data every few hundred ms until `stop`. The node takes the data at once
/// (a later re-create writes it), so the last data handed over is the data it must end with.
/// Returns how many times it set the data.
async fn node_updater(
    node: Arc<PersistentNode>,
    label: String,
    last: Arc<Mutex<Vec<u8>>>,
    stop: watch::Receiver<bool>,
    seed: u64,
) -> u64 {
    let mut rng = Rng(seed | 1);
    let mut sets = 0;
    loop {
        tokio::time::sleep(rng.between(Duration::from_millis(200), Duration::from_millis(800))).await;
        if *stop.borrow() {
            return sets;
        }
        sets += 1;
        let data = format!("{label}-{sets}").into_bytes();
        *last.lock().unwrap() = data.clone();
        // The write itself may wait out a fault; the data is taken before that.
        let _ = tokio::time::timeout(SESSION, node.set_data(data)).await;
    }
}

/// Lists every registration directory until `stop`; returns a problem for each listing that
/// held more than one node (a registration is one node at all times, re-created at one name).
async fn node_sampler(fw: Framework, dirs: Vec<String>, stop: watch::Receiver<bool>) -> Vec<String> {
    let mut problems = Vec::new();
    while !*stop.borrow() {
        for dir in &dirs {
            if let Ok(Ok(children)) = tokio::time::timeout(SESSION, fw.get_children(dir)).await {
                if children.len() > 1 && problems.len() < 10 {
                    problems.push(format!("{dir} held {} nodes at once: {children:?}", children.len()));
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    problems
}

/// Whether the registration is in place: the only node of its directory, at its first name,
/// owned by its client's current session, holding the data last set, and its handle says so.
async fn registration_in_place(
    observer: &Framework,
    client: &Client,
    registration: &Registration,
) -> Result<(), String> {
    let expected = registration.last_data.lock().unwrap().clone();
    let actual = registration.node.actual_path().ok_or("no actual path")?;
    if actual != registration.first_path {
        return Err(format!("at {actual}, first created at {}", registration.first_path));
    }
    let name = actual.rsplit('/').next().unwrap_or_default();
    let children = observer.get_children(&registration.dir).await.map_err(|e| format!("listing: {e}"))?;
    if children != [name] {
        return Err(format!("children {children:?}, expected {name} alone"));
    }
    let (data, stat) = observer.get_data(&actual).await.map_err(|e| format!("reading {actual}: {e}"))?;
    let session = client.fw.snapshot().session_id;
    if stat.ephemeral_owner != session {
        return Err(format!("owned by session {:#x}, the client's is {session:#x}", stat.ephemeral_owner));
    }
    if data != expected {
        return Err(format!(
            "data {:?}, last set {:?}",
            String::from_utf8_lossy(&data),
            String::from_utf8_lossy(&expected)
        ));
    }
    if !registration.node.is_registered() {
        return Err("the handle does not report the node registered".to_owned());
    }
    Ok(())
}

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().map(|v| v.trim().parse().unwrap_or_else(|_| panic!("{name}={v:?} is not a number")))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chaos() {
    chaos_with(WaitStrategy::PerWaiterWatch).await;
}

/// The same schedule's kind, with every client's locks waiting on its session's mirror of
/// each lock directory (`WaitStrategy::Mirror`, the default; `chaos` above runs Curator's
/// per-waiter watch): the history checker's verdicts must hold just the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chaos_with_mirror_waits() {
    chaos_with(WaitStrategy::Mirror).await;
}

/// The default wait with 32 sessions on the mutex: the four clients of the run and 28 more
/// direct sessions that only loop on the mutex (recorded in the same history, judged by the
/// same checks), so that each session finds the mutex's directory crowded and waits on the
/// node ahead of it instead of its mirror, through the same faults. `ZKR_CHAOS_CROWD` sets the
/// extra sessions (default 28).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chaos_with_a_crowded_mutex() {
    let crowd = env_u64("ZKR_CHAOS_CROWD").map_or(28, |n| n as usize);
    chaos_crowded(WaitStrategy::Mirror, crowd).await;
}

async fn chaos_with(strategy: WaitStrategy) {
    chaos_crowded(strategy, 0).await;
}

async fn chaos_crowded(strategy: WaitStrategy, crowd: usize) {
    init_tracing();
    // One chaos run at a time: two 3-server ensembles under faults at once on a small machine
    // would judge the machine, not the recipes.
    static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    let _turn = ONE_AT_A_TIME.lock().await;
    let secs = env_u64("ZKR_CHAOS_SECS").unwrap_or(DEFAULT_SECS);
    let seed = env_u64("ZKR_CHAOS_SEED").unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(1, |d| d.as_nanos() as u64)
    });
    let steps = schedule(seed, Duration::from_secs(secs));
    eprintln!(
        "chaos ({strategy:?}, {crowd} more sessions on the mutex): seed {seed} (replay with ZKR_CHAOS_SEED={seed} ZKR_CHAOS_SECS={secs}); {} steps:",
        steps.len()
    );
    for (i, step) in steps.iter().enumerate() {
        eprintln!("  step {i:>3}: {step}");
    }
    // Generous: the steps, restarts of killed members, the audits and the drain.
    let planned: Duration = steps.iter().map(|s| s.length + s.gap + Duration::from_secs(8)).sum();
    let limit = planned + Duration::from_secs(300);
    match tokio::time::timeout(limit, run(seed, steps, strategy, crowd)).await {
        Ok(()) => {}
        Err(_) => panic!("chaos (seed {seed}) exceeded its time limit of {limit:?}"),
    }
}

async fn run(seed: u64, steps: Vec<Step>, strategy: WaitStrategy, crowd: usize) {
    let origin = Instant::now();
    let origin_ms =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64);
    let mut cluster = TestingCluster::builder().dynamic_reconfig(true).quorum_proxies(true).start().await.unwrap();
    cluster.settle(Duration::from_secs(90)).await.unwrap();
    assert!(SESSION > cluster.sync_timeout(), "the safety rule: session timeout above syncLimit x tickTime");
    // The current members' client ports: it follows a member replacement (for the session
    // attach of an expiry); the direct clients follow it by ensemble tracking.
    let mut direct = cluster.connect_string();

    let mut clients = Vec::new();
    for c in 0..CLIENTS {
        let mut proxies = Vec::new();
        let connect = if c < DIRECT {
            direct.clone()
        } else {
            for i in 0..cluster.len() {
                proxies.push(FaultProxy::start(&cluster.server_connect_string(i)).await.unwrap());
            }
            proxies.iter().map(FaultProxy::connect_string).collect::<Vec<_>>().join(",")
        };
        let fw = framework_waiting(&connect, SESSION, strategy).await;
        clients.push(Client { name: format!("c{c}"), fw, proxies });
    }
    // Sessions that only take the mutex (no fault of their own: they meet the servers').
    let mut crowders = Vec::new();
    for c in 0..crowd {
        let fw = framework_waiting(&direct, SESSION, strategy).await;
        crowders.push(Client { name: format!("m{c}"), fw, proxies: Vec::new() });
    }
    let observer = framework(&direct, SESSION).await;

    // The cache workload: a cache per client, two writers (a direct client, a proxied one).
    let cache_root = unique_path("chaos", "cache");
    observer.create(&cache_root).data(b"root").await.unwrap();
    let mut caches = Vec::new();
    let mut cache_orders = Vec::new();
    for client in &clients {
        let cache = CuratorCache::builder(&client.fw, &cache_root).build().unwrap();
        cache_orders.push(tokio::spawn(event_order(client.name.clone(), cache.events())));
        cache.start().await.unwrap();
        caches.push(cache);
    }
    let (writers_stop, writers_stopped) = watch::channel(false);
    let writers: Vec<_> = [0, DIRECT]
        .into_iter()
        .map(|c| {
            tokio::spawn(cache_writer(
                clients[c].fw.clone(),
                cache_root.clone(),
                writers_stopped.clone(),
                seed ^ c as u64,
            ))
        })
        .collect();

    // The counter workloads: per counter one incrementing task per client.
    let mut counters = Vec::new();
    for kind in CounterKind::ALL {
        let (stop, stopped) = watch::channel(false);
        let path = unique_path("chaos", kind.name());
        observer.create(&path).data(&kind.encode(0)).await.unwrap();
        let mut tasks = Vec::new();
        for client in &clients {
            // Made (a shared count started) before the faults.
            let counter = Incrementer::new(kind, &client.fw, &path).await;
            let last_success = Arc::new(Mutex::new(None));
            let task = tokio::spawn(counter_loop(counter, stopped.clone(), last_success.clone()));
            tasks.push(CounterTask { client: client.name.clone(), task, last_success });
        }
        counters.push(CounterWorkload { kind, path, stop, tasks });
    }

    // The persistent node workload: each registration alone in its directory, its data changed
    // through the faults, an observer listing the directories.
    let nodes_root = unique_path("chaos", "nodes");
    let mut registrations = Vec::new();
    for ((c, mode), dir) in REGISTRATIONS.into_iter().zip(REGISTRATION_DIRS) {
        let dir = format!("{nodes_root}{dir}");
        let name = format!("{}/{}", clients[c].name, dir.rsplit('/').next().unwrap_or_default());
        let node = PersistentNode::builder(&clients[c].fw, &format!("{dir}/member-"))
            .mode(mode)
            .data(name.clone().into_bytes())
            .start()
            .unwrap();
        assert!(node.wait_for_initial_create(SESSION * 2).await.unwrap(), "{name}: no first create");
        let first_path = node.actual_path().unwrap();
        registrations.push(Registration {
            last_data: Arc::new(Mutex::new(name.clone().into_bytes())),
            name,
            client: c,
            dir,
            node: Arc::new(node),
            first_path,
        });
    }
    let (nodes_stop, nodes_stopped) = watch::channel(false);
    let updaters: Vec<_> = registrations
        .iter()
        .enumerate()
        .map(|(i, r)| {
            tokio::spawn(node_updater(
                r.node.clone(),
                r.name.clone(),
                r.last_data.clone(),
                nodes_stopped.clone(),
                seed ^ (0x40de + i as u64),
            ))
        })
        .collect();
    let (sampler_stop, sampler_stopped) = watch::channel(false);
    let sampler = tokio::spawn(node_sampler(
        observer.clone(),
        registrations.iter().map(|r| r.dir.clone()).collect(),
        sampler_stopped,
    ));

    let workloads = workloads();
    let mut resources: Vec<Resource> = Vec::new();
    let mut paths: BTreeMap<String, (String, &'static [&'static str])> = BTreeMap::new();
    for w in &workloads {
        if !resources.iter().any(|r| r.name == w.resource.name) {
            resources.push(w.resource.clone());
        }
        paths.entry(w.resource.name.clone()).or_insert_with(|| (unique_path("chaos", &w.resource.name), w.node_dirs));
    }
    let paths_list: Vec<(String, &'static [&'static str])> = paths.values().cloned().collect();

    let (phase_tx, phase_rx) = watch::channel(Phase::Run);
    let shared = Shared { holds: Arc::default(), phase: phase_rx, busy: Arc::default(), errors: Arc::default() };
    let mut tasks = Vec::new();
    let mut task_names = Vec::new();
    let mut task_seed = Rng(seed ^ 0x5eed);
    let mutex_only = workloads.iter().filter(|w| w.resource.name == "mutex").collect::<Vec<_>>();
    let everyone = clients.iter().map(|c| (c, workloads.iter().collect::<Vec<_>>()));
    for (client, loads) in everyone.chain(crowders.iter().map(|c| (c, mutex_only.clone()))) {
        for w in loads {
            let lock = (w.make)(&client.fw, &paths[&w.resource.name].0);
            for t in 0..w.tasks_per_client {
                let name = format!("{}/{}/t{t}", client.name, w.name);
                task_names.push(name.clone());
                tasks.push(tokio::spawn(task_loop(
                    name,
                    w.resource.name.clone(),
                    w.weight,
                    client.fw.clone(),
                    lock.clone(),
                    task_seed.next(),
                    shared.clone(),
                )));
            }
        }
    }

    let count = |shared: &Shared| shared.holds.lock().unwrap().len();
    tokio::time::sleep(Duration::from_secs(2)).await;
    eprintln!("warm-up: {} acquisitions", count(&shared));
    let mut faults = FaultLog::default();
    let mut problems: Vec<String> = Vec::new();
    let mut audited = false;
    for (i, step) in steps.iter().enumerate() {
        let started = Instant::now();
        let server = async {
            match step.server {
                Some((fault, pick)) => Some(server_fault(&mut cluster, fault, pick, step.length).await),
                None => None,
            }
        };
        let client = async {
            match step.client {
                Some((fault, c)) => Some(client_fault(&clients[c], &direct, fault, step.length).await),
                None => None,
            }
        };
        let (server, client) = futures::join!(server, client);
        let did = [server.clone(), client.clone()].into_iter().flatten().collect::<Vec<_>>().join(" + ");
        faults.windows.push((started, Instant::now(), format!("step {i}: {did}")));
        if let Some(did) = &server {
            *faults.server.entry(did.split(':').next().unwrap_or_default().to_owned()).or_default() += 1;
        }
        if let Some(did) = &client {
            *faults.client.entry(did.split(':').next().unwrap_or_default().to_owned()).or_default() += 1;
        }
        eprintln!(
            "step {i:>3} at +{:.1}s: {did} ({:.1}s); {} acquisitions so far",
            (started - origin).as_secs_f64(),
            started.elapsed().as_secs_f64(),
            count(&shared)
        );
        if !audited && matches!(step.server, Some((ServerFault::KillLeader, _))) {
            audited = true;
            cluster.settle(Duration::from_secs(60)).await.unwrap();
            phase_tx.send_replace(Phase::Quiesce);
            let idle = eventually(SESSION * 4, || async {
                match shared.busy.load(Ordering::SeqCst) {
                    0 => Ok(()),
                    n => Err(format!("{n} tasks busy")),
                }
            })
            .await;
            if let Err(e) = idle {
                problems.push(format!("quiescing after the leader kill: {e}"));
            }
            let found = audit_live(clients.iter().chain(&crowders), &observer, &paths_list).await;
            eprintln!(
                "audit with live sessions after the leader kill: {}",
                if found.is_empty() { "clean" } else { "PROBLEMS" }
            );
            problems.extend(found);
            phase_tx.send_replace(Phase::Run);
        }
        direct = members_connect_string(&cluster);
        tokio::time::sleep(step.gap).await;
    }

    // The faults are over: every member up and settled, then every task must get through.
    for i in cluster.members() {
        if !cluster.is_running(i) {
            cluster.restart(i).await.unwrap();
        }
    }
    cluster.settle(Duration::from_secs(90)).await.unwrap();
    let faults_ended = Instant::now();

    // The registrations: updates stopped, each back in place within the bound.
    nodes_stop.send_replace(true);
    let mut node_sets = 0;
    for updater in updaters {
        match tokio::time::timeout(SESSION * 2, updater).await {
            Ok(joined) => node_sets += joined.expect("a node updater panicked"),
            Err(_) => problems.push("a persistent node's updater did not stop".to_owned()),
        }
    }
    for registration in &registrations {
        let client = &clients[registration.client];
        let limit = (faults_ended + back_within()).saturating_duration_since(Instant::now());
        if let Err(e) = eventually(limit, || registration_in_place(&observer, client, registration)).await {
            problems.push(format!(
                "persistent node {}: not back in place within {:?} of the faults' end: {e}",
                registration.name,
                back_within()
            ));
        }
    }
    eprintln!(
        "persistent nodes: {} registrations, {node_sets} data updates through the faults; checked {:.1}s after the faults ended",
        registrations.len(),
        faults_ended.elapsed().as_secs_f64()
    );
    sampler_stop.send_replace(true);
    match tokio::time::timeout(SESSION * 2, sampler).await {
        Ok(joined) => problems.extend(joined.expect("the node sampler panicked")),
        Err(_) => problems.push("the node sampler did not stop".to_owned()),
    }

    let progress = eventually(Duration::from_secs(120), || async {
        let holds = shared.holds.lock().unwrap();
        let done: BTreeSet<&str> =
            holds.iter().filter(|h| h.entered >= faults_ended).map(|h| h.holder.as_str()).collect();
        let missing: Vec<&String> = task_names.iter().filter(|t| !done.contains(t.as_str())).collect();
        if missing.is_empty() {
            Ok(())
        } else {
            Err(format!("{missing:?}"))
        }
    })
    .await;
    eprintln!("after the faults: every task progressed: {}", progress.as_ref().map_or_else(|e| e.as_str(), |()| "yes"));
    if progress.is_err() {
        // For the reader of a failure: who is queued, and which sessions the clients are on.
        let sessions: Vec<String> = clients
            .iter()
            .map(|c| format!("{} {:#x} {:?}", c.name, c.fw.snapshot().session_id, c.fw.state()))
            .collect();
        eprintln!("  clients: {sessions:?}");
        for (node, owner, ctime) in nodes(&observer, &paths_list).await {
            let at = (ctime - origin_ms) as f64 / 1000.0;
            eprintln!("  queued: {node} (session {owner:#x}, created at +{at:.1}s)");
        }
    }

    // The counters: every task increments again after the faults, then all stop and each
    // value is judged against what its tasks were told.
    for counter in counters {
        problems.extend(judge_counter(counter, &observer, faults_ended).await);
    }

    // The caches: writers stopped, every cache equals a fresh read of the server within the
    // bound (a reconnect or a new session, then the resync's listing and reads).
    writers_stop.send_replace(true);
    let mut writes = 0;
    for writer in writers {
        match tokio::time::timeout(SESSION * 4, writer).await {
            Ok(joined) => writes += joined.expect("a cache writer panicked"),
            Err(_) => problems.push("a cache writer did not stop".to_owned()),
        }
    }
    let converge_bound = SESSION * 5;
    let writers_ended = Instant::now();
    for (client, cache) in clients.iter().zip(&caches) {
        let converged = eventually(converge_bound, || async {
            // Read again each time: a write whose reply the writer gave up on may land late.
            let truth = server_tree(&observer, &cache_root).await;
            let held = cache_tree(cache);
            if cache.is_complete() && held == truth {
                return Ok(());
            }
            let differ: Vec<&String> = truth
                .iter()
                .filter(|(k, v)| held.get(*k) != Some(*v))
                .map(|(k, _)| k)
                .chain(held.keys().filter(|k| !truth.contains_key(*k)))
                .collect();
            Err(format!(
                "complete {}, {} nodes held of {}, differing {differ:?}",
                cache.is_complete(),
                held.len(),
                truth.len()
            ))
        })
        .await;
        match converged {
            Ok(()) => {}
            Err(e) => problems
                .push(format!("cache of {}: not equal to the server within {converge_bound:?}: {e}", client.name)),
        }
    }
    eprintln!(
        "caches: {writes} writes through the faults; {} caches checked against the server, {:.1}s after the writers stopped",
        caches.len(),
        writers_ended.elapsed().as_secs_f64()
    );
    for cache in &caches {
        cache.close().await;
    }
    for order in cache_orders {
        match tokio::time::timeout(SESSION, order).await {
            Ok(joined) => problems.extend(joined.expect("a cache event checker panicked")),
            Err(_) => problems.push("a cache's event stream did not end after close()".to_owned()),
        }
    }
    let truth = server_tree(&observer, &cache_root).await;
    for path in truth.keys().rev() {
        let _ = observer.delete(path).await;
    }

    phase_tx.send_replace(Phase::Stop);
    for task in tasks {
        match tokio::time::timeout(SESSION * 4, task).await {
            Ok(joined) => joined.expect("a workload task panicked"),
            Err(_) => problems.push("a workload task did not stop".to_owned()),
        }
    }
    for registration in &registrations {
        match tokio::time::timeout(SESSION * 2, registration.node.close()).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => problems.push(format!("persistent node {}: close: {e}", registration.name)),
            Err(_) => problems.push(format!("persistent node {}: close did not return", registration.name)),
        }
    }
    observer.close().await;
    for client in clients.iter().chain(&crowders) {
        client.fw.close().await;
    }
    // After every client closed, the registrations' nodes are gone too.
    let mut closed_paths = paths_list.clone();
    closed_paths.push((nodes_root.clone(), REGISTRATION_DIRS));
    problems.extend(audit_closed(&cluster, &closed_paths).await);

    let holds = shared.holds.lock().unwrap().clone();
    let report: Report = history::check(&resources, &holds, Some((faults_ended, &task_names)), origin);
    let errors = shared.errors.lock().unwrap().clone();
    eprintln!(
        "chaos seed {seed}: faults injected: server {:?}, client {:?}; {} acquisitions ({} per resource), \
         {} lost signals, {} steals, smallest signal-before-steal margin {}; acquire errors {:?}; \
         {} returns out of token order among overlapping acquires; {} violations",
        faults.server,
        faults.client,
        report.acquisitions,
        per_resource(&holds),
        report.lost_signals,
        report.steals,
        report.min_signal_margin.map_or("n/a".into(), |m| format!("{:.3}s", m.as_secs_f64())),
        errors,
        report.reordered_returns,
        report.violations.len(),
    );
    for steal in &report.steal_list {
        eprintln!(
            "  steal: {} told at +{:.3}s, {} entered {:.3}s later, during {}",
            steal.lost,
            (steal.told - origin).as_secs_f64(),
            steal.thief,
            steal.margin().as_secs_f64(),
            faults.cause(steal.entered)
        );
    }
    for violation in &report.violations {
        eprintln!("  {violation}");
    }
    for problem in &problems {
        eprintln!("  {problem}");
    }
    if !(report.is_ok() && problems.is_empty()) {
        keep_member_logs(&cluster, seed);
    }
    // The verdicts again in the panic's message: a CI log that keeps only the head and the
    // tail of a long output still shows why.
    let verdicts: Vec<String> =
        report.violations.iter().map(ToString::to_string).chain(problems.iter().cloned()).take(8).collect();
    assert!(
        report.is_ok() && problems.is_empty(),
        "chaos seed {seed} failed (replay with ZKR_CHAOS_SEED={seed}): {} violations, {} problems, first: {verdicts:#?}",
        report.violations.len(),
        problems.len()
    );
}

/// Copies every member's server log (removed members' too) out of the cluster's directory,
/// which goes with the cluster: what the ensemble did (elections, syncs, truncations) is
/// the first thing to read when a run fails on what the servers kept.
fn keep_member_logs(cluster: &TestingCluster, seed: u64) {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("chaos-logs-{seed}"));
    if let Err(e) = std::fs::create_dir_all(&dir) {
        eprintln!("keeping the members' logs: {e}");
        return;
    }
    for i in 0..cluster.len() {
        if let Ok(log) = cluster.log_file(i) {
            let _ = std::fs::copy(log, dir.join(format!("member{i}.log")));
        }
    }
    eprintln!("the members' logs are in {}", dir.display());
}

fn per_resource(holds: &[Hold]) -> String {
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for hold in holds {
        *counts.entry(hold.resource.as_str()).or_default() += 1;
    }
    counts.iter().map(|(r, n)| format!("{r} {n}")).collect::<Vec<_>>().join(", ")
}

#[test]
fn schedules_are_reproducible_and_cover_every_fault() {
    let a: Vec<String> = schedule(42, Duration::from_secs(60)).iter().map(ToString::to_string).collect();
    let b: Vec<String> = schedule(42, Duration::from_secs(60)).iter().map(ToString::to_string).collect();
    assert_eq!(a, b);
    let steps = schedule(7, Duration::ZERO);
    let servers: BTreeSet<ServerFault> = steps.iter().filter_map(|s| s.server.map(|(f, _)| f)).collect();
    let clients: BTreeSet<ClientFault> = steps.iter().filter_map(|s| s.client.map(|(f, _)| f)).collect();
    assert_eq!(servers.len(), 6);
    assert_eq!(clients.len(), 5);
    assert!(steps.iter().any(|s| s.length > SESSION) && steps.iter().any(|s| s.length < SESSION));
    assert_eq!(steps[0].server.map(|(f, _)| f), Some(ServerFault::KillLeader));
    assert!(steps.iter().all(|s| s.client.map_or(true, |(_, c)| c >= DIRECT)), "client faults hit proxied clients");
}

#[test]
fn parses_wchs() {
    assert_eq!(total_watches("0 connections watching 0 paths\nTotal watches:0\n"), Some(0));
    assert_eq!(total_watches("2 connections watching 3 paths\nTotal watches:4\n"), Some(4));
    assert_eq!(total_watches("garbage"), None);
}
