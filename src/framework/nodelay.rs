//! `TCP_NODELAY` on the client's connections.
//!
//! zookeeper-client writes each request with a write of its own and leaves Nagle's algorithm
//! on (the Java client turns it off). With it on, a small write made while an earlier one is
//! not yet acknowledged waits in the kernel for that acknowledgement, which the server's side
//! sends with its reply (a delayed ACK): requests sent back to back (a create with the listing
//! behind it, a lease's create with the lock's delete, a directory's create with the node's)
//! go one round trip apart instead of together.
//!
//! zookeeper-client gives no access to its socket, so after each connection of a session the
//! process's open sockets are looked over (`/proc/self/fd`) on a short-lived thread, and the
//! connected ones whose peer port is a server port of a session get `TCP_NODELAY`, set
//! through a duplicate of the descriptor (`pidfd_getfd`, Linux 5.6+), so no descriptor of the
//! client's is borrowed. Sockets already looked at are remembered by inode, so a look costs a
//! `readlink` per open descriptor and more only for new sockets; connections made while a look
//! runs are covered by one more look after it. Where a look is not possible (another OS, an
//! older kernel, a seccomp profile that refuses `pidfd_getfd`), the connections keep Nagle's
//! algorithm: requests meant to go together take a round trip more, nothing else changes.

use std::collections::{BTreeSet, HashSet};

use crate::sync::Mutex;

/// What the looks share, process-wide.
#[derive(Default)]
struct Looks {
    /// Server ports of every session seen connected in this process.
    ports: BTreeSet<u16>,
    /// Inodes of the connected sockets already looked at (their peer never changes).
    done: HashSet<u64>,
    /// A look is running (on its thread).
    running: bool,
    /// A connection came while a look ran: look once more after it.
    again: bool,
    /// Looks are not possible here: none is started again.
    unavailable: bool,
}

static LOOKS: Mutex<Option<Looks>> = Mutex::new(None);

/// Sets `TCP_NODELAY` on the connections to the servers of `hosts` (a connect string) made by
/// now, soon, on a thread of its own. Call after a session's client connected (or
/// reconnected).
pub(crate) fn after_connect(hosts: &str) {
    let mut looks = LOOKS.lock();
    let looks = looks.get_or_insert_with(Looks::default);
    if looks.unavailable {
        return;
    }
    looks.ports.extend(server_ports(hosts));
    if looks.running {
        looks.again = true;
        return;
    }
    looks.running = true;
    // A thread of its own, not a runtime's blocking pool: a runtime shutting down drops the
    // tasks it has not started, which would leave `running` set for good.
    if std::thread::Builder::new().name("zk-nodelay".into()).spawn(look_while_asked).is_err() {
        looks.running = false;
    }
}

/// Looks until no connection came during the last look.
fn look_while_asked() {
    loop {
        let (ports, mut done) = {
            let mut looks = LOOKS.lock();
            let Some(looks) = looks.as_mut() else { return };
            looks.again = false;
            (looks.ports.clone(), std::mem::take(&mut looks.done))
        };
        let outcome = look(&ports, &mut done);
        let mut looks = LOOKS.lock();
        let Some(looks) = looks.as_mut() else { return };
        looks.done = done;
        match outcome {
            Ok(set) if set > 0 => tracing::trace!(connections = set, "TCP_NODELAY set"),
            Ok(_) => {}
            Err(error) => {
                tracing::debug!(%error, "cannot set TCP_NODELAY on the client's connections; requests sent back to back may go a round trip apart");
                looks.unavailable = true;
            }
        }
        if !looks.again || looks.unavailable {
            looks.running = false;
            return;
        }
    }
}

/// The ports of a connect string's servers (`host:port,...[/chroot]`, hosts maybe with a
/// `tcp://` or `tcp+tls://` scheme, IPv6 addresses in brackets); 2181 where a host names none.
fn server_ports(hosts: &str) -> Vec<u16> {
    let without_scheme = |s: &'_ str| -> String {
        let s = s.trim();
        let s = s.split_once("://").map_or(s, |(_, rest)| rest);
        // The chroot follows the last server.
        s.split_once('/').map_or(s, |(server, _)| server).to_owned()
    };
    hosts
        .split(',')
        .map(without_scheme)
        .filter(|server| !server.is_empty())
        .map(|server| match server.rsplit_once(':') {
            Some((host, port)) if !host.ends_with(':') && !port.contains(']') => port.parse().unwrap_or(2181),
            _ => 2181,
        })
        .collect()
}

/// The inode of a descriptor's link target when it is a socket (`socket:[12345]`).
fn socket_inode(link: &std::path::Path) -> Option<u64> {
    link.to_str()?.strip_prefix("socket:[")?.strip_suffix(']')?.parse().ok()
}

/// One look over the process's descriptors: sets `TCP_NODELAY` on each connected TCP socket
/// not in `done` whose peer port is in `ports`; returns how many. `done` is left holding the
/// connected sockets that are open now. An error means looks are not possible here.
#[cfg(target_os = "linux")]
fn look(ports: &BTreeSet<u16>, done: &mut HashSet<u64>) -> std::io::Result<usize> {
    use rustix::net::sockopt::{set_tcp_nodelay, tcp_nodelay};
    use rustix::process::{getpid, pidfd_getfd, pidfd_open, PidfdFlags, PidfdGetfdFlags};

    let this_process = pidfd_open(getpid(), PidfdFlags::empty())?;
    let (mut open, mut set, mut refused) = (HashSet::new(), 0, None);
    for entry in std::fs::read_dir("/proc/self/fd")?.flatten() {
        let Some(fd) = entry.file_name().to_str().and_then(|name| name.parse::<i32>().ok()) else { continue };
        let Some(inode) = std::fs::read_link(entry.path()).ok().as_deref().and_then(socket_inode) else { continue };
        open.insert(inode);
        if done.contains(&inode) {
            continue;
        }
        let socket = match pidfd_getfd(&this_process, fd, PidfdGetfdFlags::empty()) {
            Ok(socket) => socket,
            // Closed since it was listed.
            Err(rustix::io::Errno::BADF) => continue,
            Err(error) => {
                refused.get_or_insert(error);
                continue;
            }
        };
        // Not connected (yet), or not a socket with an address: looked at again next time.
        let Ok(Some(peer)) = rustix::net::getpeername(&socket) else { continue };
        done.insert(inode);
        let Ok(peer) = std::net::SocketAddr::try_from(peer) else { continue };
        if ports.contains(&peer.port()) && tcp_nodelay(&socket) == Ok(false) && set_tcp_nodelay(&socket, true).is_ok() {
            set += 1;
        }
    }
    done.retain(|inode| open.contains(inode));
    match refused {
        // Not one socket could be duplicated: the process may not do it at all.
        Some(error) if done.is_empty() => Err(error.into()),
        _ => Ok(set),
    }
}

#[cfg(not(target_os = "linux"))]
fn look(_ports: &BTreeSet<u16>, _done: &mut HashSet<u64>) -> std::io::Result<usize> {
    Err(std::io::Error::new(std::io::ErrorKind::Unsupported, "looking over the process's sockets needs Linux"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_ports_of_connect_strings() {
        assert_eq!(server_ports("127.0.0.1:2181"), [2181]);
        assert_eq!(server_ports("a:1,b:2, c:3/chroot/x"), [1, 2, 3]);
        assert_eq!(server_ports("zk1,zk2:2182"), [2181, 2182]);
        assert_eq!(server_ports("tcp+tls://zk1:2281,tcp://zk2:2182"), [2281, 2182]);
        assert_eq!(server_ports("[::1]:2185,[::1]"), [2185, 2181]);
        assert_eq!(server_ports(""), Vec::<u16>::new());
    }

    /// A look sets `TCP_NODELAY` on a connected socket to one of the ports, and only there;
    /// where the process may not duplicate its descriptors (a seccomp profile that refuses
    /// `pidfd_getfd`), the look says so and changes nothing.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_look_sets_nodelay_on_connections_to_the_server_ports() {
        let server = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let other = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let to_server = std::net::TcpStream::connect(server.local_addr().unwrap()).unwrap();
        let to_other = std::net::TcpStream::connect(other.local_addr().unwrap()).unwrap();
        assert!(!to_server.nodelay().unwrap() && !to_other.nodelay().unwrap());
        let ports = BTreeSet::from([server.local_addr().unwrap().port()]);
        let mut done = HashSet::new();
        match look(&ports, &mut done) {
            Ok(set) => {
                assert!(set >= 1, "the connection to the server port");
                assert!(to_server.nodelay().unwrap());
                assert!(!to_other.nodelay().unwrap(), "a connection to another port is left alone");
                // Looked at once: a second look does not touch them again.
                to_server.set_nodelay(false).unwrap();
                assert_eq!(look(&ports, &mut done).unwrap(), 0);
                assert!(!to_server.nodelay().unwrap());
            }
            Err(error) => {
                println!("pidfd_getfd refused here ({error}): connections keep Nagle's algorithm");
                assert!(matches!(error.raw_os_error(), Some(1 | 38)), "EPERM or ENOSYS, not {error}");
                assert!(!to_server.nodelay().unwrap());
            }
        }
    }

    #[test]
    fn socket_inodes_from_descriptor_links() {
        use std::path::Path;
        assert_eq!(socket_inode(Path::new("socket:[12345]")), Some(12345));
        assert_eq!(socket_inode(Path::new("anon_inode:[pidfd]")), None);
        assert_eq!(socket_inode(Path::new("/dev/null")), None);
        assert_eq!(socket_inode(Path::new("socket:[x]")), None);
    }
}
