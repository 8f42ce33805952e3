//! A TCP proxy that injects network faults between a client and a server.

use std::collections::BTreeSet;
use std::io::ErrorKind;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{broadcast, watch};
use tokio::task::JoinSet;
use tokio::time::Instant;

use super::TestingError;

/// How long a FIN-closed connection may take to be closed by its peers before it is dropped.
const FIN_DRAIN: Duration = Duration::from_secs(2);
const BUFFER_SIZE: usize = 16 * 1024;
/// How long [`ProxyMode::HandshakeThenRefuse`] waits for the client to show it read the answer.
const HANDSHAKE_READ: Duration = Duration::from_secs(2);
/// The first bytes a ZooKeeper learner writes to its leader's quorum port: a `QuorumPacket`
/// (jute, no length prefix: int type, long zxid, int data length) whose data starts with a
/// `LearnerInfo` (long server id, ...). See [`learner_id`].
const LEARNER_HEADER: usize = 24;
/// How long a learner connection may take to send [`LEARNER_HEADER`] before it is forwarded
/// as coming from an unknown source.
const LEARNER_HEADER_READ: Duration = Duration::from_secs(5);
/// `Leader.FOLLOWERINFO` and `Leader.OBSERVERINFO`: the types of a learner's first packet.
const LEARNER_INFO_TYPES: [i32; 2] = [11, 16];

/// What the proxy does with the bytes of its connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ProxyMode {
    /// Forward everything in both directions.
    Pass,
    /// Keep every connection open and accept new ones, but forward nothing in either
    /// direction: bytes read are discarded (a partitioned network, or a hung peer whose
    /// kernel still ACKs). Bytes discarded are gone for good; going back to [`Pass`]
    /// resumes forwarding on a stream that has lost data, which a ZooKeeper client answers
    /// by timing the connection out. A peer's own close (FIN or RST) is still passed on, so
    /// a client that gives up on a connection does not leave it open.
    ///
    /// [`Pass`]: ProxyMode::Pass
    BlackHole,
    /// The "stale connected" fault: existing connections are black-holed (as
    /// [`BlackHole`]); the next new connection is forwarded only until the server's first
    /// answer (for a ZooKeeper client, the answer to its session handshake) has been passed
    /// to the client, and then reset on both sides; from then on the proxy refuses
    /// connections outright (it stops listening: connect fails with "connection refused")
    /// until the mode changes, when it listens on the same address again.
    ///
    /// The client has heard its session being accepted but nothing after it: a client that
    /// reports "connected" on the handshake alone reports it over a dead network.
    /// [`FaultProxy::handshake_passed`] tells when the answer went through.
    ///
    /// [`BlackHole`]: ProxyMode::BlackHole
    HandshakeThenRefuse,
    /// Keep every connection open and read both ways, but hold the bytes back instead of
    /// forwarding them: nothing is lost, and when the mode changes back to [`Pass`] each
    /// connection forwards what it held, in order, before anything newer (a stalled link).
    /// Going to [`BlackHole`] instead discards what was held.
    /// [`FaultProxy::held_from_clients`] tells how many bytes from clients wait.
    ///
    /// [`Pass`]: ProxyMode::Pass
    /// [`BlackHole`]: ProxyMode::BlackHole
    Hold,
}

/// How to close connections.
#[derive(Debug, Clone, Copy)]
enum Close {
    /// FIN on both sides, then wait (bounded) for both peers to close.
    Fin,
    /// RST on both sides.
    Reset,
}

#[derive(Debug)]
struct Shared {
    target: String,
    mode: watch::Sender<ProxyMode>,
    refuse: AtomicBool,
    connections: AtomicUsize,
    /// A close command, for every connection (`None`) or those from one learner.
    close: broadcast::Sender<(Close, Option<u64>)>,
    /// Whether connections are a ZooKeeper learner's to its leader's quorum port, whose first
    /// packet names the learner's server id (see [`learner_id`]).
    learners: bool,
    /// With `learners`: the server ids whose connections are black-holed whatever the mode.
    silenced: watch::Sender<BTreeSet<u64>>,
    /// [`ProxyMode::HandshakeThenRefuse`]: `Armed` while the mode waits for its connection,
    /// `Passed(at)` once the first answer went through (the proxy then stops listening).
    handshake: watch::Sender<Handshake>,
    /// [`ProxyMode::Hold`]: bytes from clients held back, all connections.
    held_from_clients: AtomicUsize,
}

/// Where [`ProxyMode::HandshakeThenRefuse`] stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Handshake {
    /// Not in that mode.
    Off,
    /// In that mode; the next new connection carries the handshake.
    Armed,
    /// A connection took the handshake and has not answered yet.
    Taken,
    /// The answer went through at this time; connections are refused.
    Passed(Instant),
}

/// A TCP proxy on `127.0.0.1` and a free port, forwarding to a target address, that can
/// drop (FIN), reset (RST) or black-hole connections and refuse new ones. Put a client
/// behind it (connect to [`connect_string`](FaultProxy::connect_string)) to give it
/// connection loss while the server itself stays healthy.
///
/// Each accepted connection opens its own connection to the target; when the target cannot
/// be reached, the accepted connection is reset. Methods that change behaviour act at once
/// for new connections and within a scheduling round for existing ones.
///
/// The proxy runs as tasks on the tokio runtime it was started on and stops (closing every
/// connection) when dropped or when that runtime shuts down.
#[derive(Debug)]
pub struct FaultProxy {
    address: SocketAddr,
    shared: Arc<Shared>,
    accept_task: tokio::task::JoinHandle<()>,
}

impl FaultProxy {
    /// Starts a proxy to `target` (`host:port`, for example a server's
    /// [`connect_string`](super::TestingServer::connect_string)), in
    /// [`ProxyMode::Pass`].
    ///
    /// # Errors
    /// [`TestingError::Io`] if no loopback port can be bound.
    ///
    /// # Panics
    /// Outside a tokio runtime.
    ///
    /// # Cancel safety
    /// Cancel-safe: nothing is left running unless it returned.
    pub async fn start(target: &str) -> Result<FaultProxy, TestingError> {
        FaultProxy::start_on(SocketAddr::from(([127, 0, 0, 1], 0)), target, false).await
    }

    /// Starts a proxy listening on `listen` (port 0 for a free one). With `learners`, every
    /// connection is taken for a ZooKeeper learner's connection to its leader's quorum port:
    /// the proxy reads the learner's server id from its first packet before forwarding it,
    /// so that [`silence_learner`](Self::silence_learner) and
    /// [`reset_learner`](Self::reset_learner) act on one learner's connections.
    pub(crate) async fn start_on(listen: SocketAddr, target: &str, learners: bool) -> Result<FaultProxy, TestingError> {
        let listener = TcpListener::bind(listen)
            .await
            .map_err(|e| TestingError::io(format!("binding the fault proxy to {listen}"), e))?;
        let address = listener.local_addr().map_err(|e| TestingError::io("reading the fault proxy's address", e))?;
        let shared = Arc::new(Shared {
            target: target.to_owned(),
            mode: watch::Sender::new(ProxyMode::Pass),
            refuse: AtomicBool::new(false),
            connections: AtomicUsize::new(0),
            close: broadcast::channel(16).0,
            learners,
            silenced: watch::Sender::new(BTreeSet::new()),
            handshake: watch::Sender::new(Handshake::Off),
            held_from_clients: AtomicUsize::new(0),
        });
        let accept_task = tokio::spawn(accept_loop(listener, address, shared.clone()));
        tracing::debug!(%address, target, "fault proxy started");
        Ok(FaultProxy { address, shared, accept_task })
    }

    /// The connect string for clients, `127.0.0.1:PORT`.
    pub fn connect_string(&self) -> String {
        self.address.to_string()
    }

    /// The proxy's listening address.
    pub fn local_addr(&self) -> SocketAddr {
        self.address
    }

    /// The target address.
    pub fn target(&self) -> &str {
        &self.shared.target
    }

    /// The current mode.
    pub fn mode(&self) -> ProxyMode {
        *self.shared.mode.borrow()
    }

    /// Switches modes, for existing and new connections. Entering
    /// [`ProxyMode::HandshakeThenRefuse`] (again) arms it for the next new connection.
    pub fn set_mode(&self, mode: ProxyMode) {
        tracing::debug!(address = %self.address, ?mode, "fault proxy mode");
        // The handshake state first: the accept loop reads it when it sees the mode change.
        let handshake = match mode {
            ProxyMode::HandshakeThenRefuse => Handshake::Armed,
            _ => Handshake::Off,
        };
        self.shared.handshake.send_replace(handshake);
        self.shared.mode.send_replace(mode);
    }

    /// In [`ProxyMode::Hold`]: how many bytes from clients the proxy holds back (a request
    /// that a client sent meanwhile is among them); 0 in the other modes.
    pub fn held_from_clients(&self) -> usize {
        self.shared.held_from_clients.load(Ordering::SeqCst)
    }

    /// In [`ProxyMode::HandshakeThenRefuse`]: completes when the server's first answer on a
    /// new connection has been passed to the client (and that connection reset), with the
    /// time it went through. Pending in the other modes.
    ///
    /// # Cancel safety
    /// Cancel-safe: it only observes.
    pub async fn handshake_passed(&self) -> Instant {
        let mut handshake = self.shared.handshake.subscribe();
        let passed = handshake.wait_for(|h| matches!(h, Handshake::Passed(_))).await.map(|h| *h);
        match passed {
            Ok(Handshake::Passed(at)) => at,
            // The sender lives in `shared`, which we hold: the channel cannot close.
            _ => std::future::pending().await,
        }
    }

    /// Closes every current connection with FIN on both sides (the client reads end of
    /// stream: zookeeper-client reports `ConnectionLoss` and reconnects). New connections are
    /// accepted as usual.
    pub fn drop_connections(&self) {
        tracing::debug!(address = %self.address, "fault proxy: dropping connections");
        let _ = self.shared.close.send((Close::Fin, None));
    }

    /// Closes every current connection with RST on both sides (`SO_LINGER` 0; the client sees
    /// "connection reset").
    pub fn reset_connections(&self) {
        tracing::debug!(address = %self.address, "fault proxy: resetting connections");
        let _ = self.shared.close.send((Close::Reset, None));
    }

    /// For a proxy started with `learners`: while `silenced`, the connections of the learner
    /// with server id `id` are black-holed (as [`ProxyMode::BlackHole`]), existing and new,
    /// whatever the mode; the others are not touched.
    pub(crate) fn silence_learner(&self, id: u64, silenced: bool) {
        tracing::debug!(address = %self.address, learner = id, silenced, "fault proxy: learner silenced");
        self.shared.silenced.send_modify(|ids| {
            if silenced {
                ids.insert(id);
            } else {
                ids.remove(&id);
            }
        });
    }

    /// For a proxy started with `learners`: closes the connections of the learner with server
    /// id `id` with RST on both sides.
    pub(crate) fn reset_learner(&self, id: u64) {
        tracing::debug!(address = %self.address, learner = id, "fault proxy: resetting a learner's connections");
        let _ = self.shared.close.send((Close::Reset, Some(id)));
    }

    /// While `true`, new connections are accepted and reset at once (as a crashed server
    /// host would answer); existing connections are untouched.
    pub fn refuse_new(&self, refuse: bool) {
        tracing::debug!(address = %self.address, refuse, "fault proxy: refuse new connections");
        self.shared.refuse.store(refuse, Ordering::SeqCst);
    }

    /// How many proxied connections are open.
    pub fn connection_count(&self) -> usize {
        self.shared.connections.load(Ordering::SeqCst)
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        // Aborting the accept task drops its JoinSet, which aborts every connection task.
        self.accept_task.abort();
    }
}

async fn accept_loop(listener: TcpListener, address: SocketAddr, shared: Arc<Shared>) {
    let mut connections = JoinSet::new();
    let mut listener = Some(listener);
    let mut handshake = shared.handshake.subscribe();
    loop {
        let refusing = matches!(*handshake.borrow_and_update(), Handshake::Passed(_));
        if refusing && listener.is_some() {
            // Stop listening: connects are refused by the kernel from now on.
            listener = None;
            tracing::debug!(%address, "fault proxy: refusing connections (not listening)");
        } else if !refusing && listener.is_none() {
            listener = rebind(address).await;
        }
        tokio::select! {
            accepted = accept(listener.as_ref()) => match accepted {
                Ok((client, _)) => {
                    if shared.refuse.load(Ordering::SeqCst) {
                        reset(client);
                        continue;
                    }
                    let mut carries_handshake = false;
                    shared.handshake.send_if_modified(|h| match h {
                        Handshake::Armed => {
                            *h = Handshake::Taken;
                            carries_handshake = true;
                            true
                        }
                        _ => false,
                    });
                    // Subscribe now: a close issued from here on applies to this connection.
                    let close = shared.close.subscribe();
                    connections.spawn(proxy_connection(client, shared.clone(), close, carries_handshake));
                }
                Err(err) => {
                    tracing::debug!(error = %err, "fault proxy accept failed");
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            },
            _ = handshake.changed() => {}
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
}

/// Accepts on `listener`; pending forever without one.
async fn accept(listener: Option<&TcpListener>) -> std::io::Result<(TcpStream, SocketAddr)> {
    match listener {
        Some(listener) => listener.accept().await,
        None => std::future::pending().await,
    }
}

/// Listens on `address` again after a refusal, retrying for a while if the port is busy.
async fn rebind(address: SocketAddr) -> Option<TcpListener> {
    for _ in 0..100 {
        match TcpListener::bind(address).await {
            Ok(listener) => {
                tracing::debug!(%address, "fault proxy: listening again");
                return Some(listener);
            }
            Err(err) => {
                tracing::debug!(%address, error = %err, "fault proxy: cannot listen again yet");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
    tracing::warn!(%address, "fault proxy: could not listen on its address again");
    None
}

/// Decrements the connection count when a connection task ends, however it ends.
struct CountGuard(Arc<Shared>);

impl Drop for CountGuard {
    fn drop(&mut self) {
        self.0.connections.fetch_sub(1, Ordering::SeqCst);
    }
}

async fn proxy_connection(
    mut client: TcpStream,
    shared: Arc<Shared>,
    mut close: broadcast::Receiver<(Close, Option<u64>)>,
    carries_handshake: bool,
) {
    // A learner names itself in its first packet: read that much before anything is forwarded.
    let mut header = Vec::new();
    let mut source = None;
    if shared.learners {
        tokio::select! {
            () = read_learner_header(&mut client, &mut header) => source = learner_id(&header),
            how = next_close(&mut close, None) => {
                if matches!(how, Close::Reset) {
                    reset(client);
                }
                return;
            }
        }
        tracing::trace!(learner = ?source, "fault proxy: learner connection");
    }
    let mut upstream = tokio::select! {
        connected = TcpStream::connect(shared.target.as_str()) => match connected {
            Ok(upstream) => upstream,
            Err(err) => {
                tracing::debug!(target = %shared.target, error = %err, "fault proxy cannot reach target");
                reset(client);
                return;
            }
        },
        _ = next_close(&mut close, source) => {
            reset(client);
            return;
        }
    };
    let _ = client.set_nodelay(true);
    let _ = upstream.set_nodelay(true);
    shared.connections.fetch_add(1, Ordering::SeqCst);
    let _guard = CountGuard(shared.clone());
    let route = Route { mode: shared.mode.subscribe(), silenced: shared.silenced.subscribe(), source };
    let mut from_client = vec![0u8; BUFFER_SIZE];
    let mut from_upstream = vec![0u8; BUFFER_SIZE];
    if carries_handshake {
        pass_handshake_then_reset(client, upstream, &shared, &mut close).await;
        return;
    }
    if !header.is_empty() {
        let n = header.len();
        if let Some(how) = forward(Ok(n), &header, &mut upstream, &route, &mut close).await {
            finish(how, client, upstream).await;
            return;
        }
    }
    let mut modes = shared.mode.subscribe();
    let mut held = Held { shared: &shared, up: Vec::new(), down: Vec::new() };
    let how = loop {
        let mode = *modes.borrow_and_update();
        let holding = mode == ProxyMode::Hold;
        if !holding {
            if let Some(how) = held.release(mode, &mut upstream, &mut client).await {
                break how;
            }
        }
        tokio::select! {
            read = client.read(&mut from_client) => {
                if holding && held.keep_up(&read, &from_client) {
                    continue;
                }
                if let Some(how) = forward(read, &from_client, &mut upstream, &route, &mut close).await {
                    break how;
                }
            }
            read = upstream.read(&mut from_upstream) => {
                if holding && held.keep_down(&read, &from_upstream) {
                    continue;
                }
                if let Some(how) = forward(read, &from_upstream, &mut client, &route, &mut close).await {
                    break how;
                }
            }
            changed = modes.changed() => {
                if changed.is_err() {
                    break Close::Fin; // the proxy is gone
                }
            }
            how = next_close(&mut close, source) => break how,
        }
    };
    drop(held);
    finish(how, client, upstream).await;
}

/// A connection's bytes held back in [`ProxyMode::Hold`], each way.
struct Held<'a> {
    shared: &'a Shared,
    /// From the client, for the server.
    up: Vec<u8>,
    /// From the server, for the client.
    down: Vec<u8>,
}

impl Held<'_> {
    /// Keeps what the client sent; false for an end of stream or an error (forwarded as usual).
    fn keep_up(&mut self, read: &std::io::Result<usize>, bytes: &[u8]) -> bool {
        let Ok(n @ 1..) = *read else { return false };
        self.up.extend_from_slice(&bytes[..n]);
        self.shared.held_from_clients.fetch_add(n, Ordering::SeqCst);
        true
    }

    /// Keeps what the server sent; false for an end of stream or an error.
    fn keep_down(&mut self, read: &std::io::Result<usize>, bytes: &[u8]) -> bool {
        let Ok(n @ 1..) = *read else { return false };
        self.down.extend_from_slice(&bytes[..n]);
        true
    }

    /// Out of [`ProxyMode::Hold`]: forwards what was held in `Pass` (discards it otherwise).
    async fn release(&mut self, mode: ProxyMode, upstream: &mut TcpStream, client: &mut TcpStream) -> Option<Close> {
        if self.up.is_empty() && self.down.is_empty() {
            return None;
        }
        self.shared.held_from_clients.fetch_sub(self.up.len(), Ordering::SeqCst);
        let (up, down) = (std::mem::take(&mut self.up), std::mem::take(&mut self.down));
        if mode != ProxyMode::Pass {
            return None;
        }
        if upstream.write_all(&up).await.is_err() || client.write_all(&down).await.is_err() {
            return Some(Close::Reset);
        }
        None
    }
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        self.shared.held_from_clients.fetch_sub(self.up.len(), Ordering::SeqCst);
    }
}

/// Closes a connection's two sides the way `how` says.
async fn finish(how: Close, client: TcpStream, upstream: TcpStream) {
    match how {
        Close::Reset => {
            reset(client);
            reset(upstream);
        }
        Close::Fin => close_gracefully(client, upstream).await,
    }
}

/// The next close command for a connection from learner `source` (`None`: not a learner, or
/// not known): commands for every connection, and those for that learner.
async fn next_close(close: &mut broadcast::Receiver<(Close, Option<u64>)>, source: Option<u64>) -> Close {
    loop {
        match close.recv().await {
            Ok((how, None)) => return how,
            Ok((how, Some(id))) if Some(id) == source => return how,
            Ok(_) => {}
            Err(broadcast::error::RecvError::Lagged(_)) => return Close::Reset,
            // The proxy is gone.
            Err(broadcast::error::RecvError::Closed) => return Close::Fin,
        }
    }
}

/// Whether a connection forwards its bytes: the proxy's mode, and for a learner's
/// connection whether that learner is silenced.
struct Route {
    mode: watch::Receiver<ProxyMode>,
    silenced: watch::Receiver<BTreeSet<u64>>,
    source: Option<u64>,
}

impl Route {
    fn silent(&self) -> bool {
        matches!(*self.mode.borrow(), ProxyMode::BlackHole | ProxyMode::HandshakeThenRefuse)
            || self.source.is_some_and(|id| self.silenced.borrow().contains(&id))
    }
}

/// Reads up to [`LEARNER_HEADER`] bytes into `header`: less at end of stream, on an error, or
/// when the peer has sent nothing more for [`LEARNER_HEADER_READ`].
async fn read_learner_header(client: &mut TcpStream, header: &mut Vec<u8>) {
    let mut buffer = [0u8; LEARNER_HEADER];
    let deadline = Instant::now() + LEARNER_HEADER_READ;
    while header.len() < LEARNER_HEADER {
        let wanted = LEARNER_HEADER - header.len();
        match tokio::time::timeout_at(deadline, client.read(&mut buffer[..wanted])).await {
            Ok(Ok(n @ 1..)) => header.extend_from_slice(&buffer[..n]),
            _ => return,
        }
    }
}

/// The server id in a learner's first packet to its leader, as ZooKeeper 3.5–3.8 write it
/// (`Learner.registerWithLeader`, jute's `BinaryOutputArchive`): int type (`FOLLOWERINFO` 11
/// or `OBSERVERINFO` 16), long zxid, int data length, then the data, a `LearnerInfo` that
/// starts with the long server id. `None` for anything else (quorum SASL, which would come
/// first, is not used by the testing servers).
fn learner_id(header: &[u8]) -> Option<u64> {
    let header: &[u8; LEARNER_HEADER] = header.try_into().ok()?;
    let kind = i32::from_be_bytes([header[0], header[1], header[2], header[3]]);
    let length = i32::from_be_bytes([header[12], header[13], header[14], header[15]]);
    if !LEARNER_INFO_TYPES.contains(&kind) || length < 8 {
        return None;
    }
    let mut id = [0u8; 8];
    id.copy_from_slice(&header[16..24]);
    u64::try_from(i64::from_be_bytes(id)).ok()
}

/// [`ProxyMode::HandshakeThenRefuse`]'s connection: forwards the client's bytes until the
/// server's first answer, passes that answer on, then resets both sides and marks the
/// handshake passed (the accept loop then stops listening). A close command or the mode
/// changing first just ends the connection.
async fn pass_handshake_then_reset(
    mut client: TcpStream,
    mut upstream: TcpStream,
    shared: &Shared,
    close: &mut broadcast::Receiver<(Close, Option<u64>)>,
) {
    let mut handshake = shared.handshake.subscribe();
    let mut from_client = vec![0u8; BUFFER_SIZE];
    let mut from_upstream = vec![0u8; BUFFER_SIZE];
    loop {
        tokio::select! {
            read = client.read(&mut from_client) => match read {
                Ok(n) if n > 0 => {
                    if upstream.write_all(&from_client[..n]).await.is_err() {
                        break;
                    }
                }
                _ => break,
            },
            read = upstream.read(&mut from_upstream) => {
                if let Ok(n @ 1..) = read {
                    if client.write_all(&from_upstream[..n]).await.is_ok() {
                        let _ = client.flush().await;
                        // Mark it passed only if the mode is still the one that armed us.
                        shared.handshake.send_if_modified(|h| match h {
                            Handshake::Taken => {
                                *h = Handshake::Passed(Instant::now());
                                true
                            }
                            _ => false,
                        });
                        tracing::debug!(bytes = n, "fault proxy: passed the handshake answer");
                        // Reset once the client has read it: its next bytes (a ZooKeeper
                        // client pings right after the handshake) are the proof, and are
                        // dropped. A reset while the answer is still unread could discard it.
                        let _ = tokio::time::timeout(HANDSHAKE_READ, client.read(&mut from_client)).await;
                    }
                }
                break;
            }
            _ = next_close(close, None) => break,
            () = async { drop(handshake.wait_for(|h| *h != Handshake::Taken).await) } => break,
        }
    }
    reset(client);
    reset(upstream);
}

/// Handles one read result: forwards the bytes (or discards them when black-holing).
/// Returns how to close the connection when it is over.
async fn forward(
    read: std::io::Result<usize>,
    bytes: &[u8],
    to: &mut TcpStream,
    route: &Route,
    close: &mut broadcast::Receiver<(Close, Option<u64>)>,
) -> Option<Close> {
    let n = match read {
        // One side closed: close the other side the same way.
        Ok(0) => return Some(Close::Fin),
        Ok(n) => n,
        Err(err) if err.kind() == ErrorKind::ConnectionReset => return Some(Close::Reset),
        Err(_) => return Some(Close::Reset),
    };
    if route.silent() {
        return None;
    }
    tokio::select! {
        written = to.write_all(&bytes[..n]) => written.err().map(|_| Close::Reset),
        how = next_close(close, route.source) => Some(how),
    }
}

/// FIN both ways, then read and discard until both peers have closed (so no unread data
/// turns our close into an RST), bounded by [`FIN_DRAIN`].
async fn close_gracefully(mut a: TcpStream, mut b: TcpStream) {
    let _ = a.shutdown().await;
    let _ = b.shutdown().await;
    let drain = async {
        let (mut a_buf, mut b_buf) = (vec![0u8; BUFFER_SIZE], vec![0u8; BUFFER_SIZE]);
        let (mut a_open, mut b_open) = (true, true);
        while a_open || b_open {
            tokio::select! {
                read = a.read(&mut a_buf), if a_open => a_open = matches!(read, Ok(n) if n > 0),
                read = b.read(&mut b_buf), if b_open => b_open = matches!(read, Ok(n) if n > 0),
            }
        }
    };
    let _ = tokio::time::timeout(FIN_DRAIN, drain).await;
}

/// Closes with RST: `SO_LINGER` 0, then drop.
fn reset(stream: TcpStream) {
    // `set_linger` is deprecated in newer tokio because a non-zero linger blocks the dropping
    // thread; a zero linger does not block. `set_zero_linger` is not in every tokio 1.x this
    // crate allows.
    #[allow(deprecated)]
    let _ = stream.set_linger(Some(Duration::ZERO));
    drop(stream);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn learner_packet(kind: i32, id: i64) -> Vec<u8> {
        let mut packet = Vec::new();
        packet.extend_from_slice(&kind.to_be_bytes());
        packet.extend_from_slice(&0x1_0000_0002_i64.to_be_bytes());
        packet.extend_from_slice(&20_i32.to_be_bytes());
        packet.extend_from_slice(&id.to_be_bytes());
        packet.extend_from_slice(&0x10000_i32.to_be_bytes());
        packet.extend_from_slice(&0x1_0000_0000_i64.to_be_bytes());
        packet
    }

    #[test]
    fn reads_the_learner_id_of_followers_and_observers() {
        assert_eq!(learner_id(&learner_packet(11, 3)[..LEARNER_HEADER]), Some(3));
        assert_eq!(learner_id(&learner_packet(16, 255)[..LEARNER_HEADER]), Some(255));
        assert_eq!(learner_id(&learner_packet(5, 3)[..LEARNER_HEADER]), None, "not a learner's first packet");
        assert_eq!(learner_id(&learner_packet(11, -1)[..LEARNER_HEADER]), None);
        assert_eq!(learner_id(&learner_packet(11, 3)[..LEARNER_HEADER - 1]), None, "too short");
    }
}
