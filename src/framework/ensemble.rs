//! The ensemble's membership as the framework tracks it (Curator's `EnsembleTracker`): the
//! configuration node `/zookeeper/config`, parsed; the hosts the next connection uses; the
//! task that keeps watching the node; and reconfiguration ([`Reconfig`], Curator's
//! `reconfig()`).

use std::sync::Weak;

use futures::FutureExt;
use tokio::sync::watch;
use zookeeper_client::{EnsembleUpdate, EventType, OneshotWatcher};

use super::inner::Inner;
use super::metrics::Op;
use super::reaper::Sessions;
use super::Framework;
use crate::error::{is_zk_retryable, is_zk_session_lost, Error, ReconfigRefusal, Result, ZkError};
use crate::retry::{Doubling, RetryLoop};

/// The pause between reads of the configuration that failed: 100 ms doubling up to 5 s.
const REREAD: Doubling =
    Doubling { first: std::time::Duration::from_millis(100), max: std::time::Duration::from_secs(5) };

/// A member's role in the ensemble.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ServerRole {
    /// A voting member (`participant`).
    Participant,
    /// A non-voting member that serves clients (`observer`).
    Observer,
}

/// One member of the ensemble, from a `server.<id>=...` line of its configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnsembleMember {
    id: u64,
    role: ServerRole,
    client_address: Option<String>,
    line: String,
}

impl EnsembleMember {
    /// The server id (`myid`).
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Participant or observer.
    pub fn role(&self) -> ServerRole {
        self.role
    }

    /// Where clients reach it, `host:port`: the client address of its line, or its quorum
    /// host when the client address is a wildcard (`0.0.0.0`, `[::]`) or absent (as Curator
    /// does). `None` when the line gives no client port.
    pub fn client_address(&self) -> Option<&str> {
        self.client_address.as_deref()
    }

    /// The member's line as the ensemble states it (`server.1=host:2888:3888:participant;host:2181`
    /// less the `server.1=` key is [`spec`](Self::spec)).
    pub fn line(&self) -> &str {
        &self.line
    }

    /// The member's specification, the value of its line: what a reconfiguration that adds
    /// it again takes after `server.<id>=`.
    pub fn spec(&self) -> &str {
        self.line.split_once('=').map_or("", |(_, spec)| spec)
    }
}

/// The ensemble's configuration as the configuration node `/zookeeper/config` holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ensemble {
    version: i64,
    members: Vec<EnsembleMember>,
}

impl Ensemble {
    /// The configuration's version (the zxid that committed it; `version=` in hex on the
    /// node), for [`Reconfig::from_config`].
    pub fn version(&self) -> i64 {
        self.version
    }

    /// Every member, participants and observers, in the order the node lists them.
    pub fn members(&self) -> &[EnsembleMember] {
        &self.members
    }

    /// The member with server id `id`.
    pub fn member(&self, id: u64) -> Option<&EnsembleMember> {
        self.members.iter().find(|m| m.id == id)
    }

    /// The client addresses of every member that has one, comma separated: the hosts part of
    /// a connect string. Empty when no member gives a client port.
    pub fn connect_string(&self) -> String {
        self.members.iter().filter_map(EnsembleMember::client_address).collect::<Vec<_>>().join(",")
    }

    /// Parses the node's data (`server.N=...` lines and a `version=<hex>` line; other lines
    /// are ignored). `None` when it lists no member (a standalone server's empty node).
    pub fn parse(data: &[u8]) -> Option<Ensemble> {
        let text = std::str::from_utf8(data).ok()?;
        let mut version = 0;
        let mut members = Vec::new();
        for line in text.lines().map(str::trim) {
            if let Some(hex) = line.strip_prefix("version=") {
                version = i64::from_str_radix(hex.trim(), 16).unwrap_or(0);
            } else if let Some(member) = parse_member(line) {
                members.push(member);
            }
        }
        (!members.is_empty()).then_some(Ensemble { version, members })
    }
}

/// `server.<id>=<quorum host>:<quorum port>:<election port>[:<role>][;[<client host>:]<client port>]`.
fn parse_member(line: &str) -> Option<EnsembleMember> {
    let (key, spec) = line.split_once('=')?;
    let id = key.trim().strip_prefix("server.")?.parse().ok()?;
    let (server, client) = match spec.split_once(';') {
        Some((server, client)) => (server.trim(), Some(client.trim())),
        None => (spec.trim(), None),
    };
    let (quorum_host, rest) = split_host(server)?;
    let role = match rest.rsplit(':').next() {
        Some("observer") => ServerRole::Observer,
        _ => ServerRole::Participant,
    };
    let client_address = client.filter(|c| !c.is_empty()).and_then(|client| {
        let (host, port) = match client.rsplit_once(':') {
            Some((host, port)) => (host, port),
            None => ("", client),
        };
        let port: u16 = port.parse().ok()?;
        let wildcard = matches!(host, "" | "0.0.0.0" | "[::]" | "[0:0:0:0:0:0:0:0]");
        let host = if wildcard { quorum_host } else { host };
        Some(format!("{host}:{port}"))
    });
    Some(EnsembleMember { id, role, client_address, line: line.to_owned() })
}

/// Splits `host:rest` where host may be `[ipv6]`.
fn split_host(server: &str) -> Option<(&str, &str)> {
    if server.starts_with('[') {
        let end = server.find(']')?;
        let rest = server[end + 1..].strip_prefix(':')?;
        Some((&server[..=end], rest))
    } else {
        server.split_once(':')
    }
}

/// What the framework knows of the ensemble.
#[derive(Debug)]
pub(crate) struct Tracked {
    tx: watch::Sender<Option<Ensemble>>,
    /// Some configuration seen named one of the configured hosts as a member's client
    /// address: the client was given the members' own addresses, and follows them.
    followed: std::sync::atomic::AtomicBool,
}

impl Default for Tracked {
    fn default() -> Self {
        Tracked { tx: watch::channel(None).0, followed: std::sync::atomic::AtomicBool::new(false) }
    }
}

impl Tracked {
    /// The last configuration seen.
    pub(crate) fn current(&self) -> Option<Ensemble> {
        self.tx.borrow().clone()
    }

    pub(crate) fn subscribe(&self) -> watch::Receiver<Option<Ensemble>> {
        self.tx.subscribe()
    }

    /// Whether the framework follows the tracked members (see [`Tracked::offer`]).
    pub(crate) fn followed(&self) -> bool {
        self.followed.load(std::sync::atomic::Ordering::Acquire)
    }

    /// Records `ensemble` unless a newer configuration is known already. A configuration that
    /// names one of the `configured` hosts (the connect string the framework was given) as a
    /// member's client address makes the framework follow the members from then on; a client
    /// given only other addresses (a proxy, a load balancer, NAT, DNS names of its own) keeps
    /// them, since the members' own addresses may not be reachable from it.
    pub(crate) fn offer(&self, ensemble: Ensemble, configured: &str) {
        let addressed = ensemble.members.iter().any(|m| m.client_address().is_some());
        if addressed && !has_left(configured, &ensemble) {
            self.followed.store(true, std::sync::atomic::Ordering::Release);
        } else if addressed && !self.followed() && !configured.contains("tcp+tls://") {
            // Compared as written: `localhost:2181` is not the member `127.0.0.1:2181`.
            tracing::info!(
                configured,
                members = %ensemble.connect_string(),
                "ensemble tracking: no configured host is a member's client address as the configuration writes it; \
                 new connections keep the configured hosts"
            );
        }
        self.tx.send_if_modified(|known| {
            let newer = !known.as_ref().is_some_and(|k| ensemble.version < k.version || (ensemble.version == k.version && *k == ensemble));
            if newer {
                tracing::info!(version = format_args!("{:#x}", ensemble.version), members = %ensemble.connect_string(), "ensemble configuration");
                *known = Some(ensemble);
            }
            newer
        });
    }
}

/// The connect string the next connection uses: the tracked members' client addresses with
/// the configured chroot, or the configured connect string while no configuration with
/// client addresses is known, when tracking is off, when the configured hosts were never
/// members' own addresses (`followed` false: see [`Tracked::offer`]), or when the configured
/// hosts use TLS (`tcp+tls://`: the configuration names only plain client ports).
pub(crate) fn connect_string(configured: &str, tracking: bool, followed: bool, ensemble: Option<&Ensemble>) -> String {
    if !tracking || !followed || configured.contains("tcp+tls://") {
        return configured.to_owned();
    }
    let hosts = ensemble.map(Ensemble::connect_string).unwrap_or_default();
    if hosts.is_empty() {
        return configured.to_owned();
    }
    let chroot = &configured[super::builder::chroot_start(configured)..];
    format!("{hosts}{chroot}")
}

/// Whether none of the servers in `hosts` (a connect string) is a member of `ensemble` any
/// more (while the ensemble names members' client addresses): a client made with `hosts`
/// cannot reach the session's ensemble again.
pub(crate) fn has_left(hosts: &str, ensemble: &Ensemble) -> bool {
    let members: Vec<&str> = ensemble.members.iter().filter_map(EnsembleMember::client_address).collect();
    if members.is_empty() {
        return false;
    }
    let hosts = &hosts[..super::builder::chroot_start(hosts)];
    !hosts.split(',').map(|host| host.strip_prefix("tcp://").unwrap_or(host)).any(|host| members.contains(&host))
}

/// Whether `ensemble` names a member (by client address) that `hosts` (a connect string) does
/// not: a client made with `hosts` cannot reach that member, which may be the only one left
/// that still serves the session.
pub(crate) fn has_others(hosts: &str, ensemble: &Ensemble) -> bool {
    let hosts = &hosts[..super::builder::chroot_start(hosts)];
    let hosts: Vec<&str> = hosts.split(',').map(|host| host.strip_prefix("tcp://").unwrap_or(host)).collect();
    ensemble.members.iter().filter_map(EnsembleMember::client_address).any(|member| !hosts.contains(&member))
}

/// The first read of the configuration, with its watch, on the first session's `client`
/// (`start()` makes it before it reports `Connected`, so that no request of the tracker comes
/// after the framework is started and idle); `None` when it failed (the tracking task reads
/// again).
pub(crate) async fn first_read(inner: &Inner, client: &zookeeper_client::Client) -> Option<OneshotWatcher> {
    inner.observer.request(Op::GetConfig);
    let read = tokio::time::timeout(inner.config.connection_timeout, client.get_and_watch_config()).await;
    match read {
        Ok(Ok((data, _, watcher))) => {
            if let Some(ensemble) = Ensemble::parse(&data) {
                inner.ensemble.offer(ensemble, &inner.config.connect_string);
            }
            Some(watcher)
        }
        Ok(Err(error)) => {
            tracing::debug!(%error, "ensemble configuration not read at start");
            None
        }
        Err(_) => None,
    }
}

/// The tracking task: reads `/zookeeper/config` with a watch on every session (the first
/// session's `initial` watch comes from [`first_read`]), records each version, and reads it
/// again on every change and new session (a reconnect re-arms the watch). Ends with the
/// framework.
pub(crate) async fn track(weak: Weak<Inner>, initial: Option<OneshotWatcher>) {
    let mut states = match weak.upgrade() {
        Some(inner) => inner.subscribe_state(),
        None => return,
    };
    let mut pause = RetryLoop::new(&REREAD);
    let first_key = weak.upgrade().and_then(|inner| inner.session().ok()).map(|s| s.client_key());
    let mut pending = initial.zip(first_key).map(|(watcher, key)| (1, watcher, key));
    loop {
        let (epoch, watcher, key) = match pending.take() {
            Some(first) => first,
            None => {
                // Connected on some session.
                let Ok(snapshot) = states.wait_for(|s| s.epoch > 0 && s.state.is_connected()).await.map(|s| *s) else {
                    return;
                };
                let epoch = snapshot.epoch;
                let read = {
                    let Some(inner) = weak.upgrade() else { return };
                    if inner.is_closed() {
                        return;
                    }
                    let Some(session) = inner.session().ok().filter(|s| s.epoch == epoch) else { continue };
                    let key = session.client_key();
                    inner.observer.request(Op::GetConfig);
                    let read = session.client.get_and_watch_config();
                    async move { read.await.map(|read| (read, key)) }
                };
                match read.await {
                    Ok(((data, _, watcher), key)) => {
                        pause = RetryLoop::new(&REREAD);
                        let Some(inner) = weak.upgrade() else { return };
                        if let Some(ensemble) = Ensemble::parse(&data) {
                            inner.ensemble.offer(ensemble, &inner.config.connect_string);
                        }
                        (epoch, watcher, key)
                    }
                    Err(error) => {
                        tracing::debug!(%error, "ensemble configuration not read; reading it again");
                        // A session-lost error from a client the session moved away from says
                        // nothing of the session: read again through the one serving it.
                        let gone = weak.upgrade().map_or(true, |inner| inner.session_gone(epoch));
                        let lost = is_zk_session_lost(&error);
                        if lost && gone || !lost && !is_zk_retryable(&error) {
                            // Read again on the next session (a server without the node, or
                            // that refuses it, refuses it for the whole session).
                            let _ = states.wait_for(|s| s.epoch != epoch).await;
                        }
                        pause.backoff().await;
                        // Read again once connected (on this session or the next).
                        let _ = states.wait_for(|s| s.epoch != epoch || s.state.is_connected()).await;
                        continue;
                    }
                }
            }
        };
        // Until the node changes or the session is over. A watcher of a client whose task is
        // gone must not be polled (zookeeper-client panics then): the session's end is
        // looked at first, and a panic is caught all the same.
        let mut moves = states.clone();
        let over = states.wait_for(|s| s.session_over(epoch));
        // The session moved to another client: this watch is the old one's, which hears nothing.
        let moved = moves.wait_for(|s| weak.upgrade().is_some_and(|inner| inner.left(s, &key)));
        let changed = std::panic::AssertUnwindSafe(watcher.changed()).catch_unwind();
        let session_event = tokio::select! {
            biased;
            _ = over => false,
            _ = moved => false,
            event = changed => event.is_ok_and(|event| event.event_type == EventType::Session),
        };
        let gone = weak.upgrade().map_or(true, |inner| inner.session_gone(epoch));
        if session_event && gone {
            // The session ended (or its client did): the next one is read.
            let _ = states.wait_for(|s| s.epoch != epoch || !s.state.is_connected()).await;
        }
    }
}

/// A reconfiguration of the ensemble (Curator's `reconfig()`), from
/// [`Framework::reconfig`]: either incremental ([`joining`](Self::joining) and
/// [`leaving`](Self::leaving)) or a whole new membership ([`members`](Self::members)),
/// optionally only from a given configuration version ([`from_config`](Self::from_config)).
///
/// ZooKeeper accepts reconfigurations only when `reconfigEnabled=true`, and only from the
/// superuser (a `digest` auth matching the servers' `superDigest`) or on servers with
/// `skipACL=yes`.
///
/// ```no_run
/// # async fn example(framework: zk_recipes::Framework) -> zk_recipes::Result<()> {
/// let ensemble = framework
///     .reconfig()
///     .joining(["server.4=10.0.0.4:2888:3888:participant;2181"])
///     .leaving(["1"])
///     .send()
///     .await?;
/// println!("now at version {:#x}: {}", ensemble.version(), ensemble.connect_string());
/// # Ok(()) }
/// ```
#[derive(Debug)]
#[must_use = "a reconfiguration does nothing until `send().await`"]
pub struct Reconfig {
    framework: Framework,
    joining: Vec<String>,
    leaving: Vec<String>,
    members: Option<Vec<String>>,
    from_config: Option<i64>,
}

impl Reconfig {
    pub(crate) fn new(framework: Framework) -> Self {
        Reconfig { framework, joining: Vec::new(), leaving: Vec::new(), members: None, from_config: None }
    }

    /// Servers to add (or whose specification changes), each `server.<id>=<spec>`.
    pub fn joining<S: Into<String>>(mut self, servers: impl IntoIterator<Item = S>) -> Self {
        self.joining.extend(servers.into_iter().map(Into::into));
        self
    }

    /// Servers to remove, by id.
    pub fn leaving<S: Into<String>>(mut self, ids: impl IntoIterator<Item = S>) -> Self {
        self.leaving.extend(ids.into_iter().map(Into::into));
        self
    }

    /// The whole new membership (a non-incremental reconfiguration), each `server.<id>=<spec>`.
    /// Not together with `joining` or `leaving`.
    pub fn members<S: Into<String>>(mut self, servers: impl IntoIterator<Item = S>) -> Self {
        self.members.get_or_insert_with(Vec::new).extend(servers.into_iter().map(Into::into));
        self
    }

    /// Applies the change only if the current configuration is still at `version` (see
    /// [`Ensemble::version`]); otherwise it fails with [`ReconfigRefusal::ConfigChanged`].
    pub fn from_config(mut self, version: i64) -> Self {
        self.from_config = Some(version);
        self
    }

    /// Sends the reconfiguration and returns the configuration it committed (which the
    /// framework also records as the tracked membership).
    ///
    /// It is sent once on the current session, never again after a connection loss (sent
    /// twice, an incremental change could apply on top of itself): a connection error means
    /// its outcome is unknown; read [`Framework::ensemble`] or the node to find out.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when it changes nothing, or mixes `members` with
    /// `joining`/`leaving`, or a server entry is empty; [`Error::ReconfigRefused`] when the
    /// ensemble refuses it (see [`ReconfigRefusal`]); [`Error::NotStarted`],
    /// [`Error::Closed`]; connection errors (outcome unknown).
    ///
    /// # Cancel safety
    /// Not cancel-safe in its effect: once the first poll has sent the request, cancelling does
    /// not withdraw it, and the ensemble may apply it. Nothing is left on the client.
    pub async fn send(self) -> Result<Ensemble> {
        let incremental = !self.joining.is_empty() || !self.leaving.is_empty();
        if incremental && self.members.is_some() {
            return Err(Error::invalid_argument(
                "reconfig",
                "members() replaces the membership; not with joining() or leaving()",
            ));
        }
        if !incremental && !self.members.as_ref().is_some_and(|m| !m.is_empty()) {
            return Err(Error::invalid_argument("reconfig", "no server joins, leaves, or makes up the new membership"));
        }
        let all = self.joining.iter().chain(&self.leaving).chain(self.members.iter().flatten());
        if all.clone().any(|s| s.trim().is_empty()) {
            return Err(Error::invalid_argument("reconfig", "an empty server entry"));
        }
        let session = self.framework.session()?;
        self.framework.observer().request(Op::Reconfig);
        let sent = match &self.members {
            Some(members) => {
                let update = EnsembleUpdate::New { ensemble: members.iter().map(String::as_str) };
                session.client.update_ensemble(update, self.from_config).await
            }
            None => {
                let update = EnsembleUpdate::Incremental {
                    joinings: self.joining.iter().map(String::as_str),
                    leavings: self.leaving.iter().map(String::as_str),
                };
                session.client.update_ensemble(update, self.from_config).await
            }
        };
        let (data, _) = sent.map_err(|e| match refusal(&e, self.from_config) {
            Some(refusal) => Error::ReconfigRefused { refusal },
            None => e.into(),
        })?;
        let ensemble = Ensemble::parse(&data).ok_or_else(|| {
            Error::ZooKeeper(ZkError::UnexpectedError(format!(
                "the reconfiguration's answer lists no member: {:?}",
                String::from_utf8_lossy(&data)
            )))
        })?;
        self.framework.inner.ensemble.offer(ensemble.clone(), &self.framework.inner.config.connect_string);
        Ok(ensemble)
    }
}

/// What a server's answer to a reconfiguration means.
fn refusal(error: &ZkError, from_config: Option<i64>) -> Option<ReconfigRefusal> {
    Some(match error {
        ZkError::ReconfigDisabled => ReconfigRefusal::Disabled,
        ZkError::NoAuth => ReconfigRefusal::NotAuthorized,
        ZkError::BadVersion if from_config.is_some() => ReconfigRefusal::ConfigChanged,
        ZkError::UnexpectedErrorCode(-13) => ReconfigRefusal::NoQuorum,
        ZkError::UnexpectedErrorCode(-14) => ReconfigRefusal::InProgress,
        ZkError::BadArguments(_) => ReconfigRefusal::InvalidMembers,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_configuration_node() {
        let data = b"server.1=127.0.0.1:2888:3888:participant;127.0.0.1:2181\n\
            server.2=zk2:2888:3888:observer;0.0.0.0:2182\n\
            server.3=[::1]:2888:3888;2183\n\
            server.4=zk4:2888:3888:participant\n\
            version=1000000a3\n";
        let ensemble = Ensemble::parse(data).expect("members");
        assert_eq!(ensemble.version(), 0x1_0000_00a3);
        let ids: Vec<u64> = ensemble.members().iter().map(EnsembleMember::id).collect();
        assert_eq!(ids, [1, 2, 3, 4]);
        assert_eq!(ensemble.member(2).map(EnsembleMember::role), Some(ServerRole::Observer));
        assert_eq!(ensemble.member(3).map(EnsembleMember::role), Some(ServerRole::Participant));
        assert_eq!(ensemble.connect_string(), "127.0.0.1:2181,zk2:2182,[::1]:2183");
        assert_eq!(ensemble.member(4).and_then(EnsembleMember::client_address), None);
        assert_eq!(
            ensemble.member(1).map(EnsembleMember::spec),
            Some("127.0.0.1:2888:3888:participant;127.0.0.1:2181")
        );
        assert_eq!(Ensemble::parse(b""), None);
        assert_eq!(Ensemble::parse(b"version=0\n"), None);
    }

    #[test]
    fn the_next_connection_uses_the_tracked_members() {
        let ensemble = Ensemble::parse(b"server.5=h5:1:2;h5:2185\nversion=7\n");
        let tracked = connect_string("h1:2181,h2:2181/app", true, true, ensemble.as_ref());
        assert_eq!(tracked, "h5:2185/app");
        assert_eq!(connect_string("h1:2181", false, true, ensemble.as_ref()), "h1:2181");
        assert_eq!(connect_string("h1:2181", true, false, ensemble.as_ref()), "h1:2181");
        assert_eq!(connect_string("h1:2181", true, true, None), "h1:2181");
        assert_eq!(connect_string("tcp+tls://h1:2281", true, true, ensemble.as_ref()), "tcp+tls://h1:2281");
        let ensemble = ensemble.expect("members");
        assert!(has_left("h1:2181,h2:2181/app", &ensemble));
        assert!(!has_left("h1:2181,tcp://h5:2185/app", &ensemble));
        assert!(has_others("h1:2181,h2:2181/app", &ensemble));
        assert!(!has_others("h1:2181,tcp://h5:2185/app", &ensemble));
        assert!(!has_others(&ensemble.connect_string(), &ensemble));
    }

    #[test]
    fn only_a_client_given_a_members_own_address_follows_the_members() {
        let first = Ensemble::parse(b"server.1=h1:1:2;h1:2181\nserver.2=h2:1:2;h2:2181\nversion=1\n").unwrap();
        let tracked = Tracked::default();
        // Through a proxy (or NAT, or a DNS name of its own): never follows.
        tracked.offer(first.clone(), "proxy:9000,proxy:9001/app");
        assert!(!tracked.followed());
        // Given one member's own address: follows from then on, also once that member left.
        let tracked = Tracked::default();
        tracked.offer(first, "h2:2181,proxy:9000/app");
        assert!(tracked.followed());
        tracked.offer(Ensemble::parse(b"server.5=h5:1:2;h5:2185\nversion=2\n").unwrap(), "h2:2181,proxy:9000/app");
        assert!(tracked.followed());
    }
}
