//! Quorum proxies for an ensemble with dynamic reconfiguration: one in front of each member's
//! quorum port, so that every member reaches member `j` through proxy `j`.
//!
//! A dynamic configuration is one member list that every member shares (and that a
//! reconfiguration rewrites on all of them), and a member binds the address its own line
//! names: the line cannot name a proxy's port for the others and the member's port for
//! itself. It names a host instead, `zk-testing-member-<id>:<quorum>:<election>`, which each
//! member's JVM resolves through its own hosts file (`-Djdk.net.hosts.file`): to `127.0.0.1`
//! for itself (it binds its ports there), to `127.0.1.<id>` for the others, where member
//! `id`'s proxies listen on the same two port numbers. The quorum proxy reads each learner's
//! server id from its first packet, so that isolating member `i` can black-hole, on the other
//! members' proxies, only the connections coming from `i`; the election proxy always forwards.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::Path;

use super::process;
use super::proxy::{FaultProxy, ProxyMode};
use super::TestingError;

/// The system property that points a JVM at its own hosts file.
pub(crate) const HOSTS_FILE_PROPERTY: &str = "jdk.net.hosts.file";

/// The highest server id a member can have with proxies: its proxies' address is
/// `127.0.1.<id>`.
pub(crate) const MAX_ID: usize = 255;

/// The host name of the member with server id `id` in the member lines.
pub(crate) fn host_name(id: usize) -> String {
    format!("zk-testing-member-{id}")
}

/// Where the proxies of the member with server id `id` listen.
fn proxy_ip(id: usize) -> Result<Ipv4Addr, TestingError> {
    match u8::try_from(id) {
        Ok(last @ 1..) => Ok(Ipv4Addr::new(127, 0, 1, last)),
        _ => Err(TestingError::InvalidConfig(format!(
            "server id {id}: quorum proxies with dynamic reconfiguration take ids 1..={MAX_ID}"
        ))),
    }
}

/// Writes the hosts file of the member with server id `own`: its own name on `127.0.0.1`,
/// every other member's (every id a member can have, so that members added later resolve
/// too) on its proxies' address, and `localhost` and this machine's name on `127.0.0.1` (a
/// JVM given a hosts file resolves nothing else).
pub(crate) fn write_hosts_file(path: &Path, own: usize) -> Result<(), TestingError> {
    let mut text = String::from("127.0.0.1 localhost\n");
    if let Ok(machine) = std::fs::read_to_string("/proc/sys/kernel/hostname") {
        let machine = machine.trim();
        if !machine.is_empty() && machine != "localhost" {
            text.push_str(&format!("127.0.0.1 {machine}\n"));
        }
    }
    for id in 1..=MAX_ID {
        let address = if id == own { Ipv4Addr::LOCALHOST } else { proxy_ip(id)? };
        text.push_str(&format!("{address} {}\n", host_name(id)));
    }
    std::fs::write(path, text).map_err(|e| TestingError::io(format!("writing {}", path.display()), e))
}

/// The two proxies in front of one member.
#[derive(Debug)]
pub(crate) struct MemberProxies {
    /// In front of the quorum port, reading each learner's server id.
    quorum: FaultProxy,
    /// In front of the election port, always forwarding (elections are not cut).
    _election: FaultProxy,
}

impl MemberProxies {
    /// Starts the proxies of the member with server id `id`, listening on `127.0.1.<id>` with
    /// the member's own quorum and election port numbers, forwarding to the member's ports on
    /// `127.0.0.1`.
    pub(crate) async fn start(id: usize, quorum_port: u16, election_port: u16) -> Result<MemberProxies, TestingError> {
        let ip = proxy_ip(id)?;
        let quorum =
            FaultProxy::start_on(SocketAddr::from((ip, quorum_port)), &process::loopback(quorum_port), true).await?;
        let election =
            FaultProxy::start_on(SocketAddr::from((ip, election_port)), &process::loopback(election_port), false)
                .await?;
        Ok(MemberProxies { quorum, _election: election })
    }

    /// Cuts (`true`) or restores the member's own quorum traffic: every connection to it.
    /// Restoring also resets the connections that lost bytes.
    pub(crate) fn cut_all(&self, cut: bool) {
        if cut {
            self.quorum.set_mode(ProxyMode::BlackHole);
        } else {
            self.quorum.set_mode(ProxyMode::Pass);
            self.quorum.reset_connections();
        }
    }

    /// Cuts (`true`) or restores the connections to this member that come from the member with
    /// server id `learner`. Restoring also resets them (they lost bytes).
    pub(crate) fn cut_learner(&self, learner: usize, cut: bool) {
        let learner = learner as u64;
        self.quorum.silence_learner(learner, cut);
        if !cut {
            self.quorum.reset_learner(learner);
        }
    }
}
