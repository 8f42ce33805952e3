//! A ZooKeeper ensemble on loopback.

use crate::sync::Mutex;
use std::path::Path;
use std::time::Duration;

use zookeeper_client::{Client, CreateMode};

use super::member_proxies::{self, MemberProxies};
use super::options::LaunchOptions;
use super::process::{self, LaunchSpec, ProcessSlot};
use super::proxy::{FaultProxy, ProxyMode};
use super::reconfig::{self, MemberRole};
use super::TestingError;

/// The class that runs an ensemble member.
const QUORUM_MAIN: &str = "org.apache.zookeeper.server.quorum.QuorumPeerMain";
const PORT_ATTEMPTS: usize = 4;
/// Modes in which a member serves reads and writes.
const QUORUM_MODES: &[&str] = &["leader", "follower"];
/// Modes in which a member that joined an ensemble serves.
const MEMBER_MODES: &[&str] = &["leader", "follower", "observer"];

#[derive(Debug)]
struct Node {
    // Killed before the cluster's directory is removed (the cluster's `nodes` come first).
    process: ProcessSlot,
    spec: LaunchSpec,
    client_port: u16,
    /// Quorum and election ports (as the member itself binds them).
    quorum_port: u16,
    election_port: u16,
    /// With dynamic reconfiguration and quorum proxies: the proxies in front of this member.
    proxies: Option<MemberProxies>,
    /// Removed from the ensemble by [`TestingCluster::remove_server`].
    removed: bool,
}

/// A ZooKeeper ensemble (3 members by default) of separate JVMs on `127.0.0.1`, each with
/// its own client, quorum and election port and data directory under one temporary
/// directory (Curator's `TestingCluster`).
///
/// Servers are addressed by index `0..len()`. Defaults: `tickTime` 200 ms, `initLimit` 20
/// and `syncLimit` 10 ticks, maximum session timeout 60 s, elections retried at least every
/// 2 s, no fsync, container nodes checked every 100 ms, four-letter words enabled. Each
/// member's output goes to `nodeN/zookeeper.log`.
///
/// Dropping it SIGKILLs every member and removes the directory (see the
/// [module docs](super) for what happens when the test process dies).
#[derive(Debug)]
pub struct TestingCluster {
    nodes: Vec<Node>,
    /// With [`quorum_proxies`](TestingClusterBuilder::quorum_proxies) and a static
    /// configuration: the proxy member `from` uses to reach member `to`'s quorum port, as
    /// `(from, to, proxy)`. (With dynamic reconfiguration each node holds its own proxies.)
    quorum_proxies: Vec<(usize, usize, FaultProxy)>,
    /// With both quorum proxies and dynamic reconfiguration: member lines name hosts that
    /// resolve to the members' proxies (see `member_proxies`).
    member_proxies: bool,
    tick_time: Duration,
    sync_limit: u32,
    start_timeout: Duration,
    read_only: bool,
    /// With [`dynamic_reconfig`](TestingClusterBuilder::dynamic_reconfig): the `zoo.cfg`
    /// entries every member shares (all but `dataDir` and `dynamicConfigFile`), for members
    /// added later.
    dynamic: Option<Vec<(String, String)>>,
    dir: tempfile::TempDir,
}

impl TestingCluster {
    /// Starts a 3-member ensemble with the defaults and waits until every member serves as
    /// leader or follower.
    ///
    /// # Errors
    /// As for [`TestingServer::start`](super::TestingServer::start).
    ///
    /// # Cancel safety
    /// Cancelling drops the half-started ensemble: every JVM is killed and the directory
    /// removed.
    pub async fn start() -> Result<TestingCluster, TestingError> {
        TestingCluster::builder().start().await
    }

    /// A builder for an ensemble with non-default settings.
    pub fn builder() -> TestingClusterBuilder {
        TestingClusterBuilder::default()
    }

    /// The connect string with every member's client port, comma separated.
    pub fn connect_string(&self) -> String {
        self.nodes.iter().map(|node| process::loopback(node.client_port)).collect::<Vec<_>>().join(",")
    }

    /// The connect string of member `i` alone, `127.0.0.1:PORT`.
    ///
    /// # Panics
    /// If `i >= len()`.
    pub fn server_connect_string(&self, i: usize) -> String {
        process::loopback(self.nodes[i].client_port)
    }

    /// The auth of the superuser of an ensemble started with
    /// [`dynamic_reconfig`](TestingClusterBuilder::dynamic_reconfig), as `(scheme, auth)`:
    /// `("digest", b"super:<password>")`, for `FrameworkBuilder::auth` or a raw client's
    /// `with_auth`. ZooKeeper refuses reconfiguration to anyone else. `None` for other
    /// ensembles.
    pub fn superuser_auth(&self) -> Option<(String, Vec<u8>)> {
        self.dynamic.as_ref().map(|_| {
            let (scheme, auth) = reconfig::super_auth();
            (scheme.to_owned(), auth)
        })
    }

    /// Member `i`'s server id (`myid`): `i + 1`.
    pub fn server_id(&self, i: usize) -> usize {
        i + 1
    }

    /// Member `i`'s line for a reconfiguration that adds it with `role`:
    /// `server.<id>=127.0.0.1:<quorum>:<election>:<role>;127.0.0.1:<client>`.
    ///
    /// # Errors
    /// [`TestingError::NoSuchServer`].
    ///
    /// With [`quorum_proxies`](TestingClusterBuilder::quorum_proxies) the host is
    /// `zk-testing-member-<id>` instead of `127.0.0.1`: each member resolves it through its own
    /// hosts file, to `127.0.0.1` for itself and to the member's proxies for the others.
    pub fn member_line(&self, i: usize, role: MemberRole) -> Result<String, TestingError> {
        let node = self.node(i)?;
        Ok(self.line(self.server_id(i), node.quorum_port, node.election_port, role, node.client_port))
    }

    /// A member line, with the member's host name when its quorum traffic is proxied.
    fn line(&self, id: usize, quorum: u16, election: u16, role: MemberRole, client: u16) -> String {
        if self.member_proxies {
            reconfig::member_line_on(&member_proxies::host_name(id), id, quorum, election, role, client)
        } else {
            reconfig::member_line(id, quorum, election, role, client)
        }
    }

    /// The indices of the current members: every server the ensemble started with or
    /// [`add_server`](Self::add_server) added, less those
    /// [`remove_server`](Self::remove_server) removed (running or not).
    pub fn members(&self) -> Vec<usize> {
        (0..self.len()).filter(|&i| !self.nodes[i].removed).collect()
    }

    /// Starts one more server and adds it to the ensemble with `role` (a reconfiguration sent
    /// as the superuser): it is started with the ensemble's current configuration plus its
    /// own line, syncs with the leader, and becomes a member once the reconfiguration commits.
    /// Returns its index. Needs [`dynamic_reconfig`](TestingClusterBuilder::dynamic_reconfig).
    ///
    /// [`connect_string`](Self::connect_string) includes it from now on. With
    /// [`quorum_proxies`](TestingClusterBuilder::quorum_proxies) its proxies are started
    /// first, and [`isolate`](Self::isolate) works on it as on the others.
    ///
    /// # Errors
    /// [`TestingError::InvalidConfig`] without dynamic reconfiguration, or with quorum proxies
    /// beyond server id 255; as for
    /// [`TestingServer::start`](super::TestingServer::start); [`TestingError::ZooKeeper`] or
    /// [`TestingError::Timeout`] when the reconfiguration fails.
    ///
    /// # Cancel safety
    /// Cancelling leaves the server running, owned by the cluster, and perhaps not yet a
    /// member.
    pub async fn add_server(&mut self, role: MemberRole) -> Result<usize, TestingError> {
        let Some(shared) = self.dynamic.clone() else {
            return Err(TestingError::InvalidConfig(
                "adding a server needs TestingClusterBuilder::dynamic_reconfig(true)".to_owned(),
            ));
        };
        let client = reconfig::super_client(&self.running_connect_string(), self.start_timeout).await?;
        let mut members = reconfig::current_members(&client).await?;
        let index = self.nodes.len();
        let id = self.server_id(index);
        if self.member_proxies && id > member_proxies::MAX_ID {
            return Err(TestingError::InvalidConfig(format!(
                "quorum proxies with dynamic reconfiguration take server ids 1..={}",
                member_proxies::MAX_ID
            )));
        }
        let (client_port, quorum_port, election_port) =
            (process::free_port()?, process::free_port()?, process::free_port()?);
        let template =
            self.nodes.first().map(|node| node.spec.clone()).ok_or(TestingError::NoSuchServer { index: 0, len: 0 })?;
        let node_dir = self.dir.path().join(format!("node{index}"));
        std::fs::create_dir_all(node_dir.join("data"))
            .map_err(|e| TestingError::io(format!("creating {}", node_dir.display()), e))?;
        std::fs::write(node_dir.join("data").join("myid"), format!("{id}\n"))
            .map_err(|e| TestingError::io("writing myid", e))?;
        let mut spec = LaunchSpec {
            name: format!("node{index}"),
            config_file: node_dir.join("zoo.cfg"),
            log_file: node_dir.join("zookeeper.log"),
            ..template
        };
        let proxies = if self.member_proxies {
            let hosts = node_dir.join("hosts");
            member_proxies::write_hosts_file(&hosts, id)?;
            let property = member_proxies::HOSTS_FILE_PROPERTY;
            process::set_entry(&mut spec.system_properties, property, hosts.display().to_string());
            Some(MemberProxies::start(id, quorum_port, election_port).await?)
        } else {
            None
        };
        let line = self.line(id, quorum_port, election_port, role, client_port);
        members.push(line.clone());
        let mut config = vec![("dataDir".to_owned(), node_dir.join("data").display().to_string())];
        config.extend(shared);
        write_dynamic(&spec.config_file, config, &members)?;
        std::fs::write(&spec.log_file, b"").map_err(|e| TestingError::io("creating a server log", e))?;
        self.nodes.push(Node {
            process: Mutex::new(None),
            spec,
            client_port,
            quorum_port,
            election_port,
            proxies,
            removed: false,
        });
        let timeout = self.start_timeout;
        let started = async {
            let node = self.node_mut(index)?;
            let address = process::loopback(node.client_port);
            let slot = node.process.get_mut();
            *slot = Some(node.spec.spawn()?);
            process::wait_for_srvr(slot, &node.spec, &address, timeout, process::mode_in(MEMBER_MODES)).await?;
            reconfig::reconfigure(&client, &[line], &[], timeout).await
        };
        if let Err(e) = started.await {
            // Not a member: it leaves the cluster's list (its process, if any, is stopped) and
            // its directory goes, so that the next member added takes the place afresh.
            self.nodes.truncate(index);
            let _ = std::fs::remove_dir_all(&node_dir);
            return Err(e);
        }
        tracing::debug!(server = index, ?role, "cluster member added");
        Ok(index)
    }

    /// Removes member `i` from the ensemble (a reconfiguration sent as the superuser through
    /// the other running members), then stops it (and its quorum proxies, with
    /// [`quorum_proxies`](TestingClusterBuilder::quorum_proxies)). It keeps its index, no
    /// longer among [`members`](Self::members). Needs
    /// [`dynamic_reconfig`](TestingClusterBuilder::dynamic_reconfig).
    ///
    /// # Errors
    /// [`TestingError::InvalidConfig`] without dynamic reconfiguration;
    /// [`TestingError::NoSuchServer`]; [`TestingError::ZooKeeper`] or
    /// [`TestingError::Timeout`] when the reconfiguration fails.
    ///
    /// # Cancel safety
    /// Cancelling may leave the member removed but running.
    pub async fn remove_server(&mut self, i: usize) -> Result<(), TestingError> {
        if self.dynamic.is_none() {
            return Err(TestingError::InvalidConfig(
                "removing a server needs TestingClusterBuilder::dynamic_reconfig(true)".to_owned(),
            ));
        }
        self.node(i)?;
        let others: Vec<String> =
            (0..self.len()).filter(|&j| j != i && self.is_running(j)).map(|j| self.server_connect_string(j)).collect();
        let client = reconfig::super_client(&others.join(","), self.start_timeout).await?;
        reconfig::reconfigure(&client, &[], &[self.server_id(i).to_string()], self.start_timeout).await?;
        self.stop(i).await?;
        let node = self.node_mut(i)?;
        node.removed = true;
        node.proxies = None;
        tracing::debug!(server = i, "cluster member removed");
        Ok(())
    }

    /// The connect string of the running members.
    fn running_connect_string(&self) -> String {
        (0..self.len())
            .filter(|&i| self.is_running(i))
            .map(|i| self.server_connect_string(i))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// The number of members.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Whether the ensemble has no members (never true for a started cluster).
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// The configured `tickTime`.
    pub fn tick_time(&self) -> Duration {
        self.tick_time
    }

    /// The configured `syncLimit` in ticks.
    pub fn sync_limit(&self) -> u32 {
        self.sync_limit
    }

    /// How long a follower cut off from its leader keeps serving its clients:
    /// `syncLimit × tickTime`. A session whose timeout is shorter can be expired by the leader
    /// while the follower still answers the session's pings.
    pub fn sync_timeout(&self) -> Duration {
        self.tick_time * self.sync_limit
    }

    /// Cuts member `i` off from the other members' quorum traffic (leader–follower
    /// replication, in both directions), silently: the [`FaultProxy`]s carrying it black-hole
    /// every byte and keep the connections open, like a network partition. Needs
    /// [`quorum_proxies`](TestingClusterBuilder::quorum_proxies).
    ///
    /// With [`dynamic_reconfig`](TestingClusterBuilder::dynamic_reconfig) the proxies are one
    /// per member, in front of its quorum port: member `i`'s proxy black-holes every
    /// connection, and every other member's proxy the connections that come from `i` (a
    /// learner names itself in its first packet). A member that
    /// [`add_server`](Self::add_server) adds has its proxy too and can be isolated like the
    /// others; one added while `i` is isolated does not cut `i` off from itself.
    ///
    /// Clients of the member are not touched. A follower keeps serving them until it has
    /// heard nothing from its leader for `syncLimit × tickTime`
    /// ([`sync_timeout`](Self::sync_timeout)); then it drops them and looks for a leader,
    /// which it cannot reach. Leader-election messages are not cut (they use the election
    /// port), so the member learns who leads but cannot follow it; isolating the leader
    /// itself makes the others elect a new one.
    ///
    /// # Errors
    /// [`TestingError::NoSuchServer`]; [`TestingError::InvalidConfig`] without quorum proxies
    /// (a member of a 1-member ensemble has no one to be cut off from: nothing to do).
    pub fn isolate(&self, i: usize) -> Result<(), TestingError> {
        self.cut(i, true)?;
        tracing::debug!(server = i, "cluster member isolated");
        Ok(())
    }

    /// Ends [`isolate`](Self::isolate): forwards member `i`'s quorum traffic again and closes
    /// the connections that lost bytes in the black hole, so the members reconnect.
    ///
    /// # Errors
    /// [`TestingError::NoSuchServer`]; [`TestingError::InvalidConfig`] without quorum proxies
    /// (but for a 1-member ensemble, as [`isolate`](Self::isolate)).
    pub fn heal(&self, i: usize) -> Result<(), TestingError> {
        self.cut(i, false)?;
        tracing::debug!(server = i, "cluster member healed");
        Ok(())
    }

    /// Cuts (`true`) or restores member `i`'s quorum traffic, either way.
    fn cut(&self, i: usize, cut: bool) -> Result<(), TestingError> {
        self.node(i)?;
        if self.member_proxies {
            let id = self.server_id(i);
            for (j, node) in self.nodes.iter().enumerate() {
                match &node.proxies {
                    Some(proxies) if j == i => proxies.cut_all(cut),
                    Some(proxies) => proxies.cut_learner(id, cut),
                    None => {}
                }
            }
            return Ok(());
        }
        if self.quorum_proxies.is_empty() && self.len() > 1 {
            return Err(TestingError::InvalidConfig(
                "isolating a member needs TestingClusterBuilder::quorum_proxies(true)".to_owned(),
            ));
        }
        for (_, _, proxy) in self.quorum_proxies.iter().filter(|(from, to, _)| *from == i || *to == i) {
            if cut {
                proxy.set_mode(ProxyMode::BlackHole);
            } else {
                proxy.set_mode(ProxyMode::Pass);
                proxy.reset_connections();
            }
        }
        Ok(())
    }

    /// The directory holding every member's configuration, data and log.
    pub fn data_dir(&self) -> &Path {
        self.dir.path()
    }

    /// Member `i`'s log file.
    ///
    /// # Errors
    /// [`TestingError::NoSuchServer`].
    pub fn log_file(&self, i: usize) -> Result<&Path, TestingError> {
        Ok(&self.node(i)?.spec.log_file)
    }

    /// Member `i`'s JVM process id, `None` when it is not running.
    ///
    /// # Errors
    /// [`TestingError::NoSuchServer`].
    pub fn pid(&self, i: usize) -> Result<Option<u32>, TestingError> {
        let mut slot = self.node(i)?.process.lock();
        Ok(slot.as_mut().and_then(|process| process.is_running().then(|| process.pid())))
    }

    /// Whether member `i`'s JVM runs (a paused member counts as running; an out-of-range
    /// index as not running).
    pub fn is_running(&self, i: usize) -> bool {
        matches!(self.pid(i), Ok(Some(_)))
    }

    /// Stops member `i` gracefully (SIGTERM, SIGKILL after 10 s) and waits for its exit.
    ///
    /// # Errors
    /// [`TestingError::NoSuchServer`]; [`TestingError::Timeout`] if it does not die.
    ///
    /// # Cancel safety
    /// Cancelling after the signal was sent leaves the member shutting down.
    pub async fn stop(&mut self, i: usize) -> Result<(), TestingError> {
        let node = self.node_mut(i)?;
        if let Some(process) = node.process.get_mut().as_mut() {
            process.terminate(Duration::from_secs(10)).await?;
        }
        tracing::debug!(server = i, "cluster member stopped");
        Ok(())
    }

    /// Kills member `i` (SIGKILL) and waits for its exit.
    ///
    /// # Errors
    /// [`TestingError::NoSuchServer`]; [`TestingError::Timeout`] if it does not die.
    ///
    /// # Cancel safety
    /// The signal is sent before the first await; cancelling only skips waiting.
    pub async fn kill(&mut self, i: usize) -> Result<(), TestingError> {
        let node = self.node_mut(i)?;
        if let Some(process) = node.process.get_mut().as_mut() {
            process.kill_and_wait().await?;
        }
        tracing::debug!(server = i, "cluster member killed");
        Ok(())
    }

    /// Starts member `i` again with its ports and data (stopping it first if it runs).
    ///
    /// Waits until it serves as leader or follower when enough members run for a quorum;
    /// otherwise until it serves read-only (with [`read_only`](TestingClusterBuilder::read_only))
    /// or, without read-only mode, only until it answers on its client port.
    ///
    /// # Errors
    /// [`TestingError::NoSuchServer`], and as for [`TestingServer::start`](super::TestingServer::start).
    ///
    /// # Cancel safety
    /// Cancelling while waiting leaves the member starting; it is owned and cleaned up as
    /// usual.
    pub async fn restart(&mut self, i: usize) -> Result<(), TestingError> {
        self.stop(i).await?;
        let members = self.members();
        let running_others = members.iter().filter(|&&j| j != i && self.is_running(j)).count();
        let quorum = running_others + 1 > members.len() / 2;
        let (read_only, timeout) = (self.read_only, self.start_timeout);
        let node = self.node_mut(i)?;
        let address = process::loopback(node.client_port);
        let slot = node.process.get_mut();
        *slot = None;
        *slot = Some(node.spec.spawn()?);
        if quorum {
            process::wait_for_srvr(slot, &node.spec, &address, timeout, process::mode_in(QUORUM_MODES)).await?;
        } else if read_only {
            process::wait_for_srvr(slot, &node.spec, &address, timeout, process::mode_in(&["read-only"])).await?;
        } else {
            process::wait_for_srvr(slot, &node.spec, &address, timeout, |_| true).await?;
        }
        tracing::debug!(server = i, quorum, "cluster member restarted");
        Ok(())
    }

    /// Pauses member `i` (SIGSTOP): it keeps its connections but answers nothing, neither
    /// clients nor the other members. Returns once every thread of the JVM has stopped
    /// (checked through `/proc` on Linux).
    ///
    /// # Errors
    /// [`TestingError::NoSuchServer`], [`TestingError::NotRunning`],
    /// [`TestingError::Signal`], or [`TestingError::Timeout`] if the threads have not all
    /// stopped within 5 s.
    pub fn pause(&self, i: usize) -> Result<(), TestingError> {
        self.signal(i, "STOP")
    }

    /// Resumes member `i` (SIGCONT).
    ///
    /// # Errors
    /// [`TestingError::NoSuchServer`], [`TestingError::NotRunning`] or
    /// [`TestingError::Signal`].
    pub fn resume(&self, i: usize) -> Result<(), TestingError> {
        self.signal(i, "CONT")
    }

    /// Member `i`'s mode as `srvr` reports it: `"leader"`, `"follower"`, `"observer"` or `"read-only"`
    /// (members run in quorum mode even in a 1-member ensemble, which reports `"leader"`);
    /// `None` when it is not running, does not answer within 2 s (paused) or does not serve
    /// (no quorum, election in progress).
    ///
    /// # Cancel safety
    /// Cancel-safe: only a four-letter-word connection is involved.
    pub async fn mode(&self, i: usize) -> Option<String> {
        if !self.is_running(i) {
            return None;
        }
        process::server_mode(&self.server_connect_string(i)).await
    }

    /// The index of the member that reports itself leader, if any.
    ///
    /// # Cancel safety
    /// Cancel-safe: only four-letter-word connections are involved.
    pub async fn leader(&self) -> Option<usize> {
        for i in 0..self.len() {
            if self.mode(i).await.as_deref() == Some("leader") {
                return Some(i);
            }
        }
        None
    }

    /// Waits until the running members form a settled ensemble: one leader, every other
    /// running member a follower, and a few writes (create, set, delete of a scratch node)
    /// answered through every running member by a fresh client.
    ///
    /// A freshly started ZooKeeper 3.8 ensemble can leave a write sent through a follower
    /// unanswered for seconds; this absorbs that before a test measures anything.
    ///
    /// # Errors
    /// [`TestingError::Timeout`] (naming what was not ready) after `timeout`.
    ///
    /// # Cancel safety
    /// Cancel-safe apart from a scratch node (`/zk-testing-settle-…`) that may be left
    /// behind.
    pub async fn settle(&self, timeout: Duration) -> Result<(), TestingError> {
        let started = tokio::time::Instant::now();
        let deadline = crate::deadline::after(timeout);
        let running: Vec<usize> = (0..self.len()).filter(|&i| self.is_running(i)).collect();
        // 1. One leader, the rest followers.
        loop {
            let mut modes = Vec::with_capacity(running.len());
            for &i in &running {
                modes.push(self.mode(i).await);
            }
            let leaders = modes.iter().filter(|mode| mode.as_deref() == Some("leader")).count();
            let followers =
                modes.iter().filter(|mode| matches!(mode.as_deref(), Some("follower" | "observer"))).count();
            if leaders == 1 && leaders + followers == running.len() {
                break;
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(TestingError::timeout(format!("settling the ensemble (modes {modes:?})"), timeout));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        // 2. Writes through every member.
        for &i in &running {
            let address = self.server_connect_string(i);
            loop {
                let remaining = deadline.saturating_duration_since(tokio::time::Instant::now());
                let attempt = tokio::time::Instant::now();
                match tokio::time::timeout(remaining, write_through(&address, i)).await {
                    Ok(Ok(())) => {
                        tracing::debug!(server = i, elapsed = ?attempt.elapsed(), "settle writes answered");
                        break;
                    }
                    Ok(Err(err)) => {
                        tracing::debug!(server = i, error = %err, "settle writes failed; retrying");
                        if tokio::time::Instant::now() >= deadline {
                            return Err(err);
                        }
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                    Err(_) => {
                        return Err(TestingError::timeout(format!("settling writes through server {i}"), timeout));
                    }
                }
            }
        }
        tracing::debug!(elapsed = ?started.elapsed(), "ensemble settled");
        Ok(())
    }

    fn node(&self, i: usize) -> Result<&Node, TestingError> {
        let len = self.nodes.len();
        self.nodes.get(i).ok_or(TestingError::NoSuchServer { index: i, len })
    }

    fn node_mut(&mut self, i: usize) -> Result<&mut Node, TestingError> {
        let len = self.nodes.len();
        self.nodes.get_mut(i).ok_or(TestingError::NoSuchServer { index: i, len })
    }

    fn signal(&self, i: usize, signal: &'static str) -> Result<(), TestingError> {
        let node = self.node(i)?;
        match node.process.lock().as_mut() {
            Some(process) => process.signal(signal),
            None => Err(TestingError::NotRunning { name: node.spec.name.clone() }),
        }
    }
}

/// Writes `config` with a `dynamicConfigFile` beside it that lists `members`.
fn write_dynamic(
    config_file: &Path,
    mut config: Vec<(String, String)>,
    members: &[String],
) -> Result<(), TestingError> {
    let dynamic_file = config_file.with_file_name("zoo.cfg.dynamic");
    let mut text = members.join("\n");
    text.push('\n');
    std::fs::write(&dynamic_file, text)
        .map_err(|e| TestingError::io(format!("writing {}", dynamic_file.display()), e))?;
    config.push(("dynamicConfigFile".to_owned(), dynamic_file.display().to_string()));
    process::write_config(config_file, &config)
}

/// A few writes through the member at `address` with a fresh client.
async fn write_through(address: &str, i: usize) -> Result<(), TestingError> {
    let client = Client::connector()
        .with_session_timeout(Duration::from_secs(10))
        .connect(address)
        .await
        .map_err(|e| TestingError::zk(format!("connecting to server {i} to settle"), e))?;
    let path = format!("/zk-testing-settle-{}-{i}", std::process::id());
    let options = CreateMode::Ephemeral.with_acls(zookeeper_client::Acls::anyone_all());
    for round in 0..3u8 {
        match client.create(&path, &[round], &options).await {
            Ok(_) | Err(zookeeper_client::Error::NodeExists) => {}
            Err(e) => return Err(TestingError::zk(format!("creating {path} through server {i}"), e)),
        }
        client
            .set_data(&path, &[round, round], None)
            .await
            .map_err(|e| TestingError::zk(format!("writing {path} through server {i}"), e))?;
        client
            .delete(&path, None)
            .await
            .map_err(|e| TestingError::zk(format!("deleting {path} through server {i}"), e))?;
    }
    Ok(())
}

/// Settings for a [`TestingCluster`]; by value, nothing happens until
/// [`start`](TestingClusterBuilder::start).
#[derive(Debug, Clone)]
#[must_use = "a builder does nothing until `start().await`"]
pub struct TestingClusterBuilder {
    options: LaunchOptions,
    size: usize,
    init_limit: u32,
    sync_limit: u32,
    read_only: bool,
    quorum_proxies: bool,
    dynamic_reconfig: bool,
}

impl Default for TestingClusterBuilder {
    fn default() -> Self {
        TestingClusterBuilder {
            options: LaunchOptions::with_system_properties(vec![
                ("znode.container.checkIntervalMs".to_owned(), "100".to_owned()),
                // Elections that cannot finish retry at least this often (default 60 s).
                ("zookeeper.fastleader.maxNotificationInterval".to_owned(), "2000".to_owned()),
            ]),
            size: 3,
            init_limit: 20,
            sync_limit: 10,
            read_only: false,
            quorum_proxies: false,
            dynamic_reconfig: false,
        }
    }
}

impl TestingClusterBuilder {
    /// The `tickTime` of every member (default 200 ms). A server grants session timeouts from 2
    /// ticks up to `maxSessionTimeout`, and expires sessions with tick granularity.
    pub fn tick_time(mut self, tick_time: Duration) -> Self {
        self.options.tick_time = tick_time;
        self
    }

    /// `maxSessionTimeout` of every member (default 60 s).
    pub fn max_session_timeout(mut self, timeout: Duration) -> Self {
        self.options.max_session_timeout = timeout;
        self
    }

    /// How long [`start`](Self::start) and restarts wait for serving (default 30 s).
    pub fn start_timeout(mut self, timeout: Duration) -> Self {
        self.options.start_timeout = timeout;
        self
    }

    /// Uses this installation instead of [`Installation::find`](super::Installation::find).
    pub fn installation(mut self, installation: super::Installation) -> Self {
        self.options.installation = Some(installation);
        self
    }

    /// Sets a `zoo.cfg` entry of every member (overrides the defaults), for example
    /// `.config("forceSync", "yes")` to fsync the transaction log as ZooKeeper does by
    /// default, or `.config("extendedTypesEnabled", "true")` for TTL nodes.
    pub fn config(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.options.set_config(key, value);
        self
    }

    /// Sets a JVM system property (`-Dkey=value`) of every member, for example
    /// `.system_property("znode.container.maxNeverUsedIntervalMs", "500")`.
    pub fn system_property(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.options.set_system_property(key, value);
        self
    }

    /// Appends a JVM option of every member after the defaults, which it can override. The defaults
    /// favour start-up time (`-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -Xmx256m`); a benchmark
    /// that wants the server's peak speed can pass `-XX:TieredStopAtLevel=4`.
    pub fn jvm_arg(mut self, arg: impl Into<String>) -> Self {
        self.options.jvm_args.push(arg.into());
        self
    }

    /// The number of members (default 3).
    pub fn size(mut self, size: usize) -> Self {
        self.size = size;
        self
    }

    /// `initLimit` in ticks (default 20): how long a follower may take to sync with a leader.
    pub fn init_limit(mut self, ticks: u32) -> Self {
        self.init_limit = ticks;
        self
    }

    /// `syncLimit` in ticks (default 10): how far a follower may fall behind (or stay silent,
    /// for example paused) before the leader drops it.
    pub fn sync_limit(mut self, ticks: u32) -> Self {
        self.sync_limit = ticks;
        self
    }

    /// Read-only mode (`-Dreadonlymode.enabled=true`): a member cut off from the quorum keeps
    /// serving reads to clients that allow read-only servers, reporting mode `read-only`.
    ///
    /// It also turns on `localSessionsEnabled` (and their upgrading): read-only sessions are
    /// local sessions, and without it a ZooKeeper 3.8 read-only member answers a connect
    /// request with a bare error header that clients cannot parse.
    pub fn read_only(mut self, read_only: bool) -> Self {
        self.read_only = read_only;
        if read_only {
            self = self.config("localSessionsEnabled", "true").config("localSessionsUpgradingEnabled", "true");
        }
        self
    }

    /// Routes each member's connections to the other members' quorum ports through a
    /// [`FaultProxy`] (one per ordered pair of members), so that
    /// [`TestingCluster::isolate`] can cut a member off (default off).
    ///
    /// With [`dynamic_reconfig`](Self::dynamic_reconfig) there is instead one proxy in front
    /// of each member's quorum port (and one, always forwarding, in front of its election
    /// port), listening on `127.0.1.<id>` with the member's own port numbers: the shared
    /// member lines name hosts, `zk-testing-member-<id>`, that each member's JVM resolves
    /// through its own hosts file (`-Djdk.net.hosts.file`), to itself on `127.0.0.1` and to the
    /// others' proxies. Server ids then go up to 255. Clients still use `127.0.0.1`.
    ///
    /// The proxies run on the tokio runtime that starts the cluster: such a cluster must be
    /// used, and dropped, while that runtime runs.
    pub fn quorum_proxies(mut self, on: bool) -> Self {
        self.quorum_proxies = on;
        self
    }

    /// Dynamic reconfiguration (default off): the members are listed in a dynamic
    /// configuration file (`server.N=127.0.0.1:Q:E:participant;127.0.0.1:C`), with
    /// `reconfigEnabled=true` and `standaloneEnabled=false`, so that the ensemble's membership
    /// can change while it runs: [`TestingCluster::add_server`] starts a member and adds it,
    /// [`TestingCluster::remove_server`] removes one and stops it, and any client logged in
    /// as the superuser ([`TestingCluster::superuser_auth`]; reconfiguration is refused to
    /// everyone else) can send its own reconfigurations.
    ///
    /// With [`quorum_proxies`](Self::quorum_proxies), see there how the members' lines name
    /// their proxies; a member line of one's own must then use the same host names
    /// ([`TestingCluster::member_line`]).
    pub fn dynamic_reconfig(mut self, on: bool) -> Self {
        self.dynamic_reconfig = on;
        self
    }

    /// Starts every member and waits until each serves as leader or follower.
    ///
    /// # Errors
    /// As for [`TestingServer::start`](super::TestingServer::start);
    /// [`TestingError::InvalidConfig`] for size 0 or more than 255, or a tick time under a
    /// millisecond.
    ///
    /// # Cancel safety
    /// Cancelling drops the half-started ensemble: every JVM is killed and the directory
    /// removed.
    pub async fn start(self) -> Result<TestingCluster, TestingError> {
        if self.size == 0 || self.size > 255 {
            return Err(TestingError::InvalidConfig(format!("cluster size {} (must be 1..=255)", self.size)));
        }
        self.options.check_tick_time()?;
        let installation = self.options.installation()?;
        let dir = LaunchOptions::temp_dir("zk-testing-cluster-")?;
        let mut system_properties = self.options.system_properties.clone();
        if self.read_only {
            process::set_entry(&mut system_properties, "readonlymode.enabled", "true".to_owned());
        }
        if self.dynamic_reconfig {
            let (key, value) = reconfig::super_digest_property();
            process::set_entry(&mut system_properties, &key, value);
        }
        let mut cluster = TestingCluster {
            nodes: Vec::with_capacity(self.size),
            quorum_proxies: Vec::new(),
            member_proxies: self.dynamic_reconfig && self.quorum_proxies,
            tick_time: self.options.tick_time,
            sync_limit: self.sync_limit,
            start_timeout: self.options.start_timeout,
            read_only: self.read_only,
            dynamic: None,
            dir,
        };
        for i in 0..self.size {
            let node_dir = cluster.dir.path().join(format!("node{i}"));
            std::fs::create_dir_all(node_dir.join("data"))
                .map_err(|e| TestingError::io(format!("creating {}", node_dir.display()), e))?;
            std::fs::write(node_dir.join("data").join("myid"), format!("{}\n", i + 1))
                .map_err(|e| TestingError::io("writing myid", e))?;
            let mut system_properties = system_properties.clone();
            if cluster.member_proxies {
                let hosts = node_dir.join("hosts");
                member_proxies::write_hosts_file(&hosts, i + 1)?;
                let property = member_proxies::HOSTS_FILE_PROPERTY;
                process::set_entry(&mut system_properties, property, hosts.display().to_string());
            }
            cluster.nodes.push(Node {
                process: Mutex::new(None),
                spec: LaunchSpec {
                    name: format!("node{i}"),
                    installation: installation.clone(),
                    main_class: QUORUM_MAIN,
                    config_file: node_dir.join("zoo.cfg"),
                    log_file: node_dir.join("zookeeper.log"),
                    cleanup_dir: cluster.dir.path().to_path_buf(),
                    system_properties,
                    jvm_args: self.options.jvm_args.clone(),
                },
                client_port: 0,
                quorum_port: 0,
                election_port: 0,
                proxies: None,
                removed: false,
            });
        }
        let mut attempt = 0;
        loop {
            attempt += 1;
            match self.try_start(&mut cluster).await {
                Ok(()) => break,
                Err(err) if err.is_address_in_use() && attempt < PORT_ATTEMPTS => {
                    tracing::debug!("a cluster port was taken before its server bound it; retrying");
                    // Reap them before dropping, so their watchdogs are released, not triggered
                    // (a triggered watchdog would remove the directory we keep using).
                    for node in &mut cluster.nodes {
                        if let Some(mut old) = node.process.get_mut().take() {
                            old.kill_and_wait().await?;
                        }
                    }
                }
                Err(err) => return Err(err),
            }
        }
        tracing::debug!(connect = %cluster.connect_string(), "testing cluster started");
        Ok(cluster)
    }

    /// The timing entries every member's `zoo.cfg` starts with.
    fn shared_config(&self) -> Vec<(String, String)> {
        vec![
            ("tickTime".to_owned(), self.options.tick_time.as_millis().to_string()),
            ("initLimit".to_owned(), self.init_limit.to_string()),
            ("syncLimit".to_owned(), self.sync_limit.to_string()),
        ]
    }

    /// Picks ports, writes every member's configuration, starts them all, waits for all.
    async fn try_start(&self, cluster: &mut TestingCluster) -> Result<(), TestingError> {
        let mut ports = Vec::with_capacity(cluster.nodes.len());
        for _ in 0..cluster.nodes.len() {
            ports.push((process::free_port()?, process::free_port()?, process::free_port()?));
        }
        cluster.quorum_proxies.clear();
        for node in &mut cluster.nodes {
            node.proxies = None;
        }
        if cluster.member_proxies {
            for (i, (node, (_, quorum, election))) in cluster.nodes.iter_mut().zip(&ports).enumerate() {
                node.proxies = Some(MemberProxies::start(i + 1, *quorum, *election).await?);
            }
        } else if self.quorum_proxies {
            for from in 0..ports.len() {
                for (to, (_, quorum, _)) in ports.iter().enumerate().filter(|(to, _)| *to != from) {
                    let proxy = FaultProxy::start(&process::loopback(*quorum)).await?;
                    cluster.quorum_proxies.push((from, to, proxy));
                }
            }
        }
        // Member `from` sees member `to` at these addresses: its own ports for itself, the
        // proxy's port in place of the quorum port for the others when proxied.
        let servers_seen_by = |from: usize| -> Vec<(String, String)> {
            ports
                .iter()
                .enumerate()
                .map(|(to, (_, quorum, election))| {
                    let quorum = cluster
                        .quorum_proxies
                        .iter()
                        .find(|(f, t, _)| (*f, *t) == (from, to))
                        .map_or(*quorum, |(_, _, proxy)| proxy.local_addr().port());
                    (format!("server.{}", to + 1), format!("127.0.0.1:{quorum}:{election}"))
                })
                .collect()
        };
        let servers: Vec<Vec<(String, String)>> = (0..ports.len()).map(servers_seen_by).collect();
        let member_lines: Vec<String> = ports
            .iter()
            .enumerate()
            .map(|(i, (client, quorum, election))| {
                cluster.line(i + 1, *quorum, *election, MemberRole::Participant, *client)
            })
            .collect();
        cluster.dynamic = None;
        for ((node, (client, quorum, election)), servers) in cluster.nodes.iter_mut().zip(&ports).zip(servers) {
            node.client_port = *client;
            node.quorum_port = *quorum;
            node.election_port = *election;
            let data_dir = node.spec.config_file.with_file_name("data");
            let mut config = self.shared_config();
            config.extend(self.options.server_config(&data_dir, *client));
            config.push(("standaloneEnabled".to_owned(), "false".to_owned()));
            if self.dynamic_reconfig {
                // The client port is in the member lines; the static file must not repeat it.
                config.retain(|(key, _)| key != "clientPort" && key != "clientPortAddress");
                config.push(("reconfigEnabled".to_owned(), "true".to_owned()));
                self.options.apply_config(&mut config);
                let shared: Vec<(String, String)> =
                    config.iter().filter(|(key, _)| key != "dataDir").cloned().collect();
                cluster.dynamic = Some(shared);
                write_dynamic(&node.spec.config_file, config, &member_lines)?;
            } else {
                config.extend(servers);
                self.options.apply_config(&mut config);
                process::write_config(&node.spec.config_file, &config)?;
            }
            std::fs::write(&node.spec.log_file, b"").map_err(|e| TestingError::io("creating a server log", e))?;
        }
        for node in &mut cluster.nodes {
            let process = node.spec.spawn()?;
            *node.process.get_mut() = Some(process);
        }
        for node in &mut cluster.nodes {
            let address = process::loopback(node.client_port);
            let slot = node.process.get_mut();
            let serving = process::mode_in(QUORUM_MODES);
            process::wait_for_srvr(slot, &node.spec, &address, self.options.start_timeout, serving).await?;
        }
        Ok(())
    }
}
