//! The run's phases: bringing the fleet up, configuration changes, the leader's death, and
//! taking the fleet down. Each is bounded in time; a phase that runs out of time says what is
//! missing.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use tokio::time::{timeout_at, Instant};
use zk_recipes::discovery::ServiceDiscovery;
use zk_recipes::testing::TestingCluster;
use zk_recipes::Framework;

use crate::curator::Jvm;
use crate::instance::{complete_generation, generation_data, instance_id, lock, Fleet, Instance, Seen, SERVICE};
use crate::options::Options;
use crate::report::{median, member_load, nearest_rank, rss_kib, Line};

/// Why a run failed.
#[derive(Debug)]
pub(crate) enum Failure {
    /// A phase did not finish in time or an operation failed (exit code 1).
    Phase(String),
    /// Something was lost or doubled: two lock holders at once, a registration missing or
    /// twice (exit code 3). The run goes on to measure the rest.
    Violation(String),
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Phase(what) => write!(f, "{what}"),
            Failure::Violation(what) => write!(f, "lost or doubled: {what}"),
        }
    }
}

/// The run's state between phases.
pub(crate) struct Run<'a> {
    pub(crate) options: &'a Options,
    pub(crate) fleet: Arc<Fleet>,
    pub(crate) admin: Framework,
    pub(crate) admin_discovery: ServiceDiscovery,
    pub(crate) instances: Vec<Instance>,
    /// The last configuration generation written.
    pub(crate) generation: u64,
    /// Turns true at the end: the background lock loops stop.
    pub(crate) stop: tokio::sync::watch::Sender<bool>,
    pub(crate) violations: Vec<String>,
}

impl Run<'_> {
    fn n(&self) -> usize {
        self.options.instances
    }

    /// The bound of a phase that brings up or takes down every instance: four session
    /// timeouts, and 50 ms per instance on top (the phase goes `--concurrency` at a time).
    fn fleet_bound(&self) -> Duration {
        self.fleet.session_timeout * 4 + Duration::from_millis(50) * self.n() as u32
    }

    /// Opens every instance's session, then registers each and starts its cache, then starts
    /// the background locks; prints the memory line.
    pub(crate) async fn bring_up(&mut self) -> Result<(), Failure> {
        let n = self.n();
        let before = rss_kib();
        let started = Instant::now();
        let deadline = started + self.fleet_bound();
        {
            let (fleet, seed) = (&self.fleet, self.options.seed);
            let mut opening = futures::stream::iter(0..n)
                .map(|i| async move { (i, Instance::connect(fleet, i, seed).await) })
                .buffer_unordered(self.options.concurrency);
            loop {
                match timeout_at(deadline, opening.next()).await {
                    Ok(Some((_, Ok(instance)))) => {
                        self.instances.push(instance);
                        if self.instances.len() % 200 == 0 {
                            eprintln!("[fleet] {} of {n} sessions open", self.instances.len());
                        }
                    }
                    Ok(Some((i, Err(e)))) => {
                        return Err(Failure::Phase(format!("instance {}: opening its session: {e}", instance_id(i))))
                    }
                    Ok(None) => break,
                    Err(_) => {
                        return Err(Failure::Phase(format!(
                            "{} of {n} sessions open after {:?}",
                            self.instances.len(),
                            self.fleet_bound()
                        )))
                    }
                }
            }
        }
        let connected = started.elapsed();
        let sessions = rss_kib();
        eprintln!("[fleet] {n} sessions open in {connected:.1?}; registering and starting caches ...");
        let attach_started = Instant::now();
        let bound = self.fleet_bound();
        let deadline = attach_started + bound;
        {
            let fleet = &self.fleet;
            let mut attaching = futures::stream::iter(self.instances.iter_mut())
                .map(
                    |instance| async move { instance.attach(fleet).await.map_err(|e| format!("{}: {e}", instance.id)) },
                )
                .buffer_unordered(self.options.concurrency);
            let mut attached = 0;
            loop {
                match timeout_at(deadline, attaching.next()).await {
                    Ok(Some(Ok(()))) => attached += 1,
                    Ok(Some(Err(e))) => return Err(Failure::Phase(format!("registering and caching: {e}"))),
                    Ok(None) => break,
                    Err(_) => {
                        return Err(Failure::Phase(format!(
                            "{attached} of {n} instances registered with their caches loaded after {bound:?}"
                        )))
                    }
                }
            }
        }
        let stop = self.stop.subscribe();
        for instance in &mut self.instances {
            instance.start_locking(&self.fleet, self.options.lock_every, self.options.hold, stop.clone());
        }
        let attach = attach_started.elapsed();
        let full = rss_kib();
        eprintln!("[fleet] {n} instances registered, caches loaded, in {attach:.1?}");
        let mut line = Line::new("memory")
            .count("instances", n)
            .float("connect_secs", connected.as_secs_f64())
            .float("attach_secs", attach.as_secs_f64());
        if let (Some(before), Some(sessions), Some(full)) = (before, sessions, full) {
            line = line
                .int("rss_before_kib", before)
                .int("rss_sessions_kib", sessions)
                .int("rss_fleet_kib", full)
                .float("kib_per_idle_framework", sessions.saturating_sub(before) as f64 / n as f64)
                .float("kib_per_instance", full.saturating_sub(before) as f64 / n as f64);
        }
        line.print(&self.options.label);
        Ok(())
    }

    /// Checks the fleet after bring-up: every registration present once, every cache complete
    /// on generation 0; prints the registration line and each member's load.
    pub(crate) async fn check_setup(&mut self, cluster: &TestingCluster) -> Result<(), Failure> {
        let deadline = Instant::now() + self.fleet.session_timeout * 2;
        self.check_registrations("setup", deadline).await?;
        let incomplete = self.instances.iter().filter(|i| i.complete_generation(&self.fleet) != Some(0)).count();
        if incomplete > 0 {
            return Err(Failure::Phase(format!("{incomplete} caches not complete on the first configuration")));
        }
        print_member_loads(cluster, "zk-recipes", &self.options.label).await;
        Ok(())
    }

    /// Sets the configuration `--warmup-changes` times unmeasured, then `--changes` times,
    /// each time waiting until every instance's cache shows it; a line per measured change and
    /// one with the medians.
    pub(crate) async fn propagate(&mut self) -> Result<(), Failure> {
        let n = self.n();
        let mut p50s = Vec::new();
        let mut p99s = Vec::new();
        let mut maxes = Vec::new();
        let first = 1 - self.options.warmup_changes as i64;
        for change in first..=self.options.changes as i64 {
            self.generation += 1;
            let generation = self.generation;
            let bound = self.fleet.session_timeout * 2;
            let written = Instant::now();
            self.admin
                .set_data(&self.fleet.config, &generation_data(generation))
                .await
                .map_err(|e| Failure::Phase(format!("writing configuration {generation}: {e}")))?;
            let shown = self.wait_for_generation(generation, written + bound).await;
            let missing: Vec<&Instance> =
                shown.iter().zip(&self.instances).filter(|(s, _)| s.is_none()).map(|(_, i)| i).collect();
            if !missing.is_empty() {
                return Err(Failure::Phase(format!(
                    "configuration {generation}: {} of {n} caches did not show it within {bound:?} ({}; first: {:?})",
                    missing.len(),
                    self.describe(&missing, generation),
                    missing.iter().take(5).map(|i| i.id.as_str()).collect::<Vec<_>>()
                )));
            }
            if change < 1 {
                continue;
            }
            let mut latencies: Vec<Duration> =
                shown.iter().flatten().map(|at| at.saturating_duration_since(written)).collect();
            latencies.sort();
            let (p50, p99, max) =
                (nearest_rank(&latencies, 50.0), nearest_rank(&latencies, 99.0), nearest_rank(&latencies, 100.0));
            Line::new("config-propagation")
                .int("change", change as u64)
                .count("instances", n)
                .millis("p50_ms", p50)
                .millis("p99_ms", p99)
                .millis("max_ms", max)
                .print(&self.options.label);
            p50s.push(p50);
            p99s.push(p99);
            maxes.push(max);
        }
        if !p50s.is_empty() {
            Line::new("config-propagation-median")
                .count("changes", p50s.len())
                .count("instances", n)
                .millis("p50_ms", median(p50s))
                .millis("p99_ms", median(p99s))
                .millis("max_ms", median(maxes))
                .print(&self.options.label);
        }
        Ok(())
    }

    /// When each instance's cache first showed `generation` (or a later one), `None` for
    /// those that did not by `deadline`.
    async fn wait_for_generation(&self, generation: u64, deadline: Instant) -> Vec<Option<Instant>> {
        let waits = self.instances.iter().map(|instance| {
            let mut seen = instance.seen.clone();
            async move {
                match timeout_at(deadline, seen.wait_for(|s: &Seen| s.generation >= generation)).await {
                    Ok(Ok(seen)) => Some(seen.at),
                    _ => None,
                }
            }
        });
        futures::future::join_all(waits).await
    }

    /// What the `missing` instances were doing, for a phase's failure: how many were not
    /// connected, on a later session, with their cache incomplete, or with a complete cache
    /// on `generation` that their node view had not yielded.
    fn describe(&self, missing: &[&Instance], generation: u64) -> String {
        let disconnected = missing.iter().filter(|i| !i.framework.state().is_connected()).count();
        let replaced = missing.iter().filter(|i| i.framework.snapshot().epoch > 1).count();
        let cached: Vec<Option<u64>> = missing.iter().map(|i| i.complete_generation(&self.fleet)).collect();
        let incomplete = cached.iter().filter(|g| g.is_none()).count();
        let unseen = cached.iter().filter(|g| g.is_some_and(|g| g >= generation)).count();
        format!(
            "of them {disconnected} not connected, {replaced} on a later session, {incomplete} with their cache \
             incomplete, {unseen} with a complete cache on it that their node view had not yielded"
        )
    }

    /// How many instances' sessions ended (were replaced by new ones) so far.
    pub(crate) fn sessions_replaced(&self) -> usize {
        self.instances.iter().filter(|i| i.framework.snapshot().epoch > 1).count()
    }

    /// Kills the ensemble's leader, writes the configuration once more as soon as the new
    /// leader takes writes, and waits until every instance is back: its cache complete on
    /// that configuration, an entity lock taken and given back, its registration present once.
    /// Restarts the killed member at the end.
    pub(crate) async fn kill_leader(&mut self, cluster: &mut TestingCluster) -> Result<(), Failure> {
        let n = self.n();
        let leader = cluster.leader().await.ok_or_else(|| Failure::Phase("no member reports itself leader".into()))?;
        let bound = self.fleet.session_timeout * 4;
        let replaced = self.sessions_replaced();
        if replaced > 0 {
            eprintln!("[fleet] {replaced} sessions ended and were replaced before the leader's kill");
        }
        eprintln!("[fleet] killing the leader, member {leader} ...");
        let killed = Instant::now();
        let deadline = killed + bound;
        cluster.kill(leader).await.map_err(|e| Failure::Phase(format!("killing member {leader}: {e}")))?;

        self.generation += 1;
        let generation = self.generation;
        let written = loop {
            let data = generation_data(generation);
            match timeout_at(deadline, self.admin.set_data(&self.fleet.config, &data)).await {
                Ok(Ok(_)) => break Instant::now(),
                Ok(Err(e)) => {
                    eprintln!("[fleet] configuration write after the kill: {e}; retrying once connected");
                    let remaining = deadline.saturating_duration_since(Instant::now()).max(Duration::from_millis(1));
                    let _ = self.admin.wait_until_connected(remaining).await;
                    // Not connected yet, or connected to a member still electing: try again shortly.
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                Err(_) => {
                    return Err(Failure::Phase(format!(
                        "the configuration write after the leader's kill did not succeed within {bound:?}"
                    )))
                }
            }
        };
        eprintln!("[fleet] configuration {generation} written {:.1?} after the kill", written - killed);

        let recoveries: Vec<_> = self
            .instances
            .iter_mut()
            .map(|instance| {
                let k = instance.random_entity(self.fleet.held.len());
                let probe = Probe {
                    framework: instance.framework.clone(),
                    cache: instance.cache.clone(),
                    seen: instance.seen.clone(),
                    fleet: self.fleet.clone(),
                };
                tokio::spawn(probe.recover(generation, k, self.options.hold, deadline))
            })
            .collect();
        let mut back = Vec::with_capacity(n);
        let mut missing: Vec<(String, &'static str)> = Vec::new();
        for (instance, recovery) in self.instances.iter().zip(recoveries) {
            match recovery.await {
                Ok(Ok(at)) => back.push(at - killed),
                Ok(Err(why)) => missing.push((instance.id.clone(), why)),
                Err(e) => {
                    missing.push((instance.id.clone(), if e.is_panic() { "its check panicked" } else { "cancelled" }))
                }
            }
        }
        let registered = self.check_registrations("after-leader-kill", deadline).await;
        // When the read that found them exact began (or now, when none did).
        let registrations_at = registered.as_ref().map_or_else(|_| Instant::now(), |began| *began) - killed;
        let sessions_lost = self.sessions_replaced();
        back.sort();
        let all_back = nearest_rank(&back, 100.0).max(registrations_at);
        Line::new("leader-kill")
            .count("instances", n)
            .count("member", leader)
            .millis("write_ms", written - killed)
            .count("instances_back", back.len())
            .millis("back_p50_ms", nearest_rank(&back, 50.0))
            .millis("back_p99_ms", nearest_rank(&back, 99.0))
            .millis("back_max_ms", nearest_rank(&back, 100.0))
            .millis("registrations_ms", registrations_at)
            .millis("all_back_ms", all_back)
            .count("sessions_lost", sessions_lost)
            .print(&self.options.label);
        eprintln!("[fleet] restarting member {leader} ...");
        let restart =
            cluster.restart(leader).await.map_err(|e| Failure::Phase(format!("restarting member {leader}: {e}")));
        if !missing.is_empty() {
            let mut reasons: Vec<&str> = missing.iter().map(|(_, why)| *why).collect();
            reasons.sort();
            reasons.dedup();
            return Err(Failure::Phase(format!(
                "{} of {n} instances not back within {bound:?} of the leader's kill (first: {:?}; reasons: {reasons:?})",
                missing.len(),
                &missing[..missing.len().min(5)]
            )));
        }
        registered?;
        restart
    }

    /// Reads the service's registrations afresh until they are exactly the fleet's ids, each
    /// once (or `deadline`); prints the registration line. Returns when the read that found
    /// them exact began.
    pub(crate) async fn check_registrations(&mut self, phase: &str, deadline: Instant) -> Result<Instant, Failure> {
        let expected: HashSet<String> = (0..self.n()).map(instance_id).collect();
        loop {
            let began = Instant::now();
            let read = self.admin_discovery.query_for_instances(SERVICE).await;
            let last = Instant::now() >= deadline;
            match read {
                Ok(found) => {
                    let ids: HashSet<&str> = found.iter().map(|i| i.id.as_str()).collect();
                    let duplicates = found.len() - ids.len();
                    let missing = expected.iter().filter(|id| !ids.contains(id.as_str())).count();
                    let unexpected = ids.iter().filter(|id| !expected.contains(**id)).count();
                    let exact = duplicates == 0 && missing == 0 && unexpected == 0;
                    if exact || last {
                        Line::new("registrations")
                            .text("phase", phase)
                            .count("expected", expected.len())
                            .count("found", found.len())
                            .count("distinct", ids.len())
                            .count("missing", missing)
                            .count("duplicates", duplicates)
                            .count("unexpected", unexpected)
                            .print(&self.options.label);
                    }
                    if exact {
                        return Ok(began);
                    }
                    if !last {
                        eprintln!(
                            "[fleet] registrations {phase}: {} found, {missing} missing, {duplicates} doubled, \
                             {unexpected} unexpected; reading again",
                            found.len()
                        );
                    }
                    if last {
                        let what = format!(
                            "{phase}: {} registrations, {missing} missing, {duplicates} doubled, {unexpected} unexpected",
                            found.len()
                        );
                        self.violations.push(what.clone());
                        return Err(Failure::Violation(what));
                    }
                }
                Err(e) if last => return Err(Failure::Phase(format!("{phase}: reading the registrations: {e}"))),
                Err(_) => {
                    let _ = self.admin.wait_until_connected(deadline.saturating_duration_since(Instant::now())).await;
                }
            }
            // The registrations are re-made in the background; look again shortly.
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Stops the lock loops, unregisters every instance, closes its cache and session.
    pub(crate) async fn take_down(&mut self) {
        let _ = self.stop.send(true);
        let n = self.instances.len();
        let bound = self.fleet_bound();
        let deadline = Instant::now() + bound;
        let mut closing = futures::stream::iter(self.instances.drain(..))
            .map(Instance::close)
            .buffer_unordered(self.options.concurrency);
        let (mut closed, mut unclean) = (0, 0);
        loop {
            match timeout_at(deadline, closing.next()).await {
                Ok(Some(clean)) => {
                    closed += 1;
                    unclean += usize::from(!clean);
                }
                Ok(None) => break,
                Err(_) => {
                    eprintln!("[fleet] {closed} of {n} instances closed after {bound:?}; the rest are dropped");
                    break;
                }
            }
        }
        if unclean > 0 {
            eprintln!("[fleet] {unclean} instances could not unregister (their nodes went with their sessions)");
        }
        let _ = self.admin_discovery.close().await;
        self.admin.close().await;
    }

    /// Stops the background locks (an acquire in flight is cancelled, uncounted) and prints
    /// the lock line; an overlap is a violation.
    pub(crate) fn report_locks(&mut self) {
        use std::sync::atomic::Ordering::Relaxed;
        let _ = self.stop.send(true);
        let counts = &self.fleet.locks;
        let suspects = std::mem::take(&mut *lock(&counts.overlaps));
        let ended = suspects.iter().filter(|holder| holder.session_ended()).count();
        let overlaps = suspects.len() - ended;
        Line::new("locks")
            .count("entities", self.fleet.held.len())
            .int("acquired", counts.acquired.load(Relaxed))
            .int("timed_out", counts.timed_out.load(Relaxed))
            .int("failed", counts.failed.load(Relaxed))
            .count("overlaps", overlaps)
            .count("overlaps_after_session_end", ended)
            .print(&self.options.label);
        if overlaps > 0 {
            self.violations
                .push(format!("{overlaps} entity lock acquisitions overlapped another holder whose session went on"));
        }
    }
}

/// What the leader-kill check needs of one instance, owned, for a task of its own.
struct Probe {
    framework: Framework,
    cache: Option<Arc<zk_recipes::CuratorCache>>,
    seen: tokio::sync::watch::Receiver<Seen>,
    fleet: Arc<Fleet>,
}

impl Probe {
    /// When the instance was back: its cache complete on `generation` (or later), and entity
    /// `k`'s lock taken and given back. `Err` names what was still missing at `deadline`.
    async fn recover(
        mut self,
        generation: u64,
        k: usize,
        hold: Duration,
        deadline: Instant,
    ) -> Result<Instant, &'static str> {
        match timeout_at(deadline, self.seen.wait_for(|s| s.generation >= generation)).await {
            Ok(Ok(_)) => {}
            Ok(Err(_)) => return Err("its cache's listener ended"),
            Err(_) => return Err("its cache never showed the new configuration"),
        }
        // The event came with the cache's load or resync; the cache says when that is done.
        loop {
            let shown = self.cache.as_deref().and_then(|cache| complete_generation(cache, &self.fleet.config));
            if shown.is_some_and(|g| g >= generation) {
                break;
            }
            if Instant::now() >= deadline {
                return Err("its cache is not complete");
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        loop {
            let remaining = deadline.saturating_duration_since(Instant::now());
            if remaining.is_zero() {
                return Err("it could not take an entity lock");
            }
            match self.fleet.take_entity(&self.framework, k, hold, remaining).await {
                Ok(true) => return Ok(Instant::now()),
                Ok(false) => return Err("it could not take an entity lock"),
                Err(_) => {
                    let _ = self.framework.wait_until_connected(remaining).await;
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            }
        }
    }
}

/// Each running member's connections, watches and JVM memory, as `implementation`'s lines.
pub(crate) async fn print_member_loads(cluster: &TestingCluster, implementation: &str, label: &str) {
    for i in 0..cluster.len() {
        match member_load(cluster, i).await {
            Some(load) => {
                let mut line = Line::of(implementation, "server")
                    .count("member", i)
                    .text("mode", &load.mode)
                    .count("connections", load.connections)
                    .int("watches", load.watches)
                    .int("watched_paths", load.watched_paths);
                if let Some(rss) = load.rss_kib {
                    line = line.int("jvm_rss_kib", rss);
                }
                line.print(label);
            }
            None => eprintln!("[fleet] member {i} did not answer cons/wchs"),
        }
    }
}

/// The same phases through Curator's fleet in `jvm` (its lines are printed as they come): up,
/// the members' load, the steady time, the configuration changes, the leader's kill (the
/// killed member restarted after) and the end.
pub(crate) async fn curator_phases(
    options: &Options,
    cluster: &mut TestingCluster,
    jvm: &mut Jvm,
    violations: &mut Vec<String>,
) -> Result<(), Failure> {
    let st = options.session_timeout;
    let fleet_bound = st * 4 + Duration::from_millis(50) * options.instances as u32;
    eprintln!("[fleet] curator: opening {} sessions, registering, starting caches ...", options.instances);
    jvm.command("up", fleet_bound * 2 + st * 2, violations).await?;
    print_member_loads(cluster, "curator", &options.label).await;
    if !options.steady.is_zero() {
        eprintln!("[fleet] curator: the fleet runs for {:?} (background locks only) ...", options.steady);
        tokio::time::sleep(options.steady).await;
    }
    let changes = options.warmup_changes + options.changes;
    eprintln!(
        "[fleet] curator: changing the configuration {} times unmeasured, {} times measured ...",
        options.warmup_changes, options.changes
    );
    let command = format!("changes {} {}", options.warmup_changes, options.changes);
    jvm.command(&command, st * 2 * (changes as u32 + 1), violations).await?;
    if options.leader_kill {
        let leader = cluster.leader().await.ok_or_else(|| Failure::Phase("no member reports itself leader".into()))?;
        eprintln!("[fleet] curator: killing the leader, member {leader} ...");
        let killed = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        cluster.kill(leader).await.map_err(|e| Failure::Phase(format!("killing member {leader}: {e}")))?;
        let recovered = jvm.command(&format!("recover {} {leader}", killed.as_micros()), st * 5, violations).await;
        eprintln!("[fleet] restarting member {leader} ...");
        let restarted =
            cluster.restart(leader).await.map_err(|e| Failure::Phase(format!("restarting member {leader}: {e}")));
        recovered?;
        restarted?;
    }
    jvm.command("end", fleet_bound + st * 4, violations).await
}
