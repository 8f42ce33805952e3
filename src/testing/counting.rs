//! A pass-through proxy that counts the requests crossing it, by kind, and the error codes of
//! the replies; it can also lose one chosen reply, answer one request with an error, and shift
//! the sequence numbers of one kind of node.

use std::collections::{BTreeMap, HashSet};
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;

use super::TestingError;
use crate::sync::Mutex;

/// A loopback TCP proxy in front of one ZooKeeper server that reads the protocol's frames and
/// counts the requests going up (by opcode), and the watch events and error replies coming
/// down. Put clients behind it to assert how many server requests an operation costs (a count
/// can be asserted in a test where a duration cannot), or which errors the server answered
/// with (`error:throttled`, ...).
///
/// Because it knows where each reply begins, it can also lose exactly one reply
/// ([`lose_reply_to`](Self::lose_reply_to)): the server has acted, and the client never hears
/// of it, as when a network fails at the worst moment.
///
/// It adds a hop, so runs through it are for counting, not for timing. It runs on a thread of
/// its own (so that it sees frames as they arrive, whatever the caller's runtime is doing, and
/// counts round trips as the client made them), and stops when dropped.
#[derive(Debug)]
pub struct CountingProxy {
    address: String,
    counts: Arc<Mutex<BTreeMap<&'static str, u64>>>,
    /// The kind of request whose reply is to be lost, when armed.
    lose: Arc<Mutex<Option<&'static str>>>,
    /// The kind of request whose reply is to be an error, and the error's code, when armed.
    refuse: Arc<Mutex<Option<(&'static str, i32)>>>,
    /// The sequence shift, when on.
    shift: Arc<Mutex<Option<Shift>>>,
    /// How long each request is held before it goes on to the server.
    delay: Arc<Mutex<Duration>>,
    /// Whether the next reply to a request is to be held (see [`CountingProxy::hold_next_reply`]).
    hold: Arc<Mutex<bool>>,
    /// Whether the next watch event is to be held (see [`CountingProxy::hold_next_event`]).
    hold_event: Arc<Mutex<bool>>,
    /// The kind of request whose next reply is to be held (see [`CountingProxy::hold_reply_to`]).
    hold_kind: Arc<Mutex<Option<&'static str>>>,
    /// Dropping it stops the proxy's thread.
    _stop: tokio::sync::oneshot::Sender<()>,
}

impl CountingProxy {
    /// Starts a proxy to `target` (`host:port`, for example a server's connect string).
    ///
    /// # Errors
    /// [`TestingError::Io`] if no loopback port can be bound or the thread cannot start.
    ///
    /// # Cancel safety
    /// Cancel-safe: nothing is left running unless it returned.
    pub async fn start(target: &str) -> Result<CountingProxy, TestingError> {
        let listener = std::net::TcpListener::bind("127.0.0.1:0")
            .map_err(|e| TestingError::io("binding the counting proxy to 127.0.0.1:0", e))?;
        listener.set_nonblocking(true).map_err(|e| TestingError::io("configuring the counting proxy", e))?;
        let address =
            listener.local_addr().map_err(|e| TestingError::io("reading the counting proxy's address", e))?.to_string();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .enable_time()
            .build()
            .map_err(|e| TestingError::io("starting the counting proxy's runtime", e))?;
        let counts = Arc::new(Mutex::default());
        let lose = Arc::new(Mutex::default());
        let refuse = Arc::new(Mutex::default());
        let shift = Arc::new(Mutex::default());
        let delay = Arc::new(Mutex::default());
        let hold = Arc::new(Mutex::default());
        let hold_event = Arc::new(Mutex::default());
        let hold_kind = Arc::new(Mutex::default());
        let shared = Shared {
            target: target.to_owned(),
            counts: counts.clone(),
            lose: Arc::clone(&lose),
            refuse: Arc::clone(&refuse),
            shift: Arc::clone(&shift),
            delay: Arc::clone(&delay),
            hold: Arc::clone(&hold),
            hold_event: Arc::clone(&hold_event),
            hold_kind: Arc::clone(&hold_kind),
        };
        let shared = Arc::new(shared);
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let accept = async move {
            let listener = TcpListener::from_std(listener)?;
            while let Ok((client, _)) = listener.accept().await {
                tokio::spawn(forward(client, shared.clone()));
            }
            Ok::<(), std::io::Error>(())
        };
        std::thread::Builder::new()
            .name("counting-proxy".into())
            .spawn(move || {
                runtime.block_on(async move {
                    tokio::select! {
                        _ = stopped => {}
                        _ = accept => {}
                    }
                })
            })
            .map_err(|e| TestingError::io("starting the counting proxy's thread", e))?;
        Ok(CountingProxy { address, counts, lose, refuse, shift, delay, hold, hold_event, hold_kind, _stop: stop })
    }

    /// The connect string for clients, `127.0.0.1:PORT`.
    pub fn connect_string(&self) -> String {
        self.address.clone()
    }

    /// What has crossed the proxy so far.
    pub fn counts(&self) -> RequestCounts {
        RequestCounts(self.counts.lock().clone())
    }

    /// Loses the reply to the next request of `kind` (as [`RequestCounts`] names kinds, for
    /// example `"create2"`), on whichever connection sends it: the request reaches the server,
    /// and when its reply comes back the proxy closes that connection (FIN to the client)
    /// instead of passing the reply on, dropping whatever the server sends after it. The
    /// client sees a connection loss with the request's outcome unknown, and reconnects
    /// through the proxy as usual. One reply is lost per call; a later call replaces an
    /// unused one.
    pub fn lose_reply_to(&self, kind: &'static str) {
        *self.lose.lock() = Some(kind);
    }

    /// Answers the next request of `kind` (as [`RequestCounts`] names kinds, for example
    /// `"getChildren"`), on whichever connection sends it, with the error `code` (ZooKeeper's
    /// code: `-127` is `Throttled`, `-118` `SessionMoved`): the server serves the request as
    /// usual, and its reply is replaced by one that carries only the error. One reply per
    /// call; a later call replaces an unused one.
    pub fn refuse_next(&self, kind: &'static str, code: i32) {
        *self.refuse.lock() = Some((kind, code));
    }

    /// From now on, holds every request for `delay` before passing it on to the server, in
    /// the order they came: a slow link on the way up. Requests a client sends back to back
    /// then still share one round trip, and a request sent only after a reply is seen as a
    /// round trip of its own even where the server answers faster than the client makes its
    /// next write, so round trips can be counted exactly (with a delay well above the time
    /// between two writes of one client; the proxy acknowledges each request at once, so a
    /// client's Nagle's algorithm does not hold its second write back for the first one's
    /// reply). `Duration::ZERO` passes requests on at once again.
    pub fn delay_requests(&self, delay: Duration) {
        *self.delay.lock() = delay;
    }

    /// Holds the next reply to a request (on whichever connection it comes) until that
    /// connection sends another request; whatever the server sends after it waits behind it.
    /// This is what a member of a ZooKeeper 3.6.0 to 3.8.0 ensemble sometimes does
    /// (ZOOKEEPER-4537: its commit processor misses the wake-up for a request or commit that
    /// comes as it goes to sleep, and answers only when another request reaches it): a client
    /// that waits without sending anything waits until its next ping. One reply per call; a
    /// later call before it is used changes nothing.
    pub fn hold_next_reply(&self) {
        *self.hold.lock() = true;
    }

    /// [`hold_next_reply`](Self::hold_next_reply) for the reply to the next request of `kind`
    /// (as [`RequestCounts`] names kinds, for example `"create2"`), on whichever connection
    /// sends it: a reply to another request in flight meanwhile (a client's own `sync`, say)
    /// passes. One reply per call; a later call replaces an unused one.
    pub fn hold_reply_to(&self, kind: &'static str) {
        *self.hold_kind.lock() = Some(kind);
    }

    /// Holds the next watch event (on whichever connection it comes) until that connection
    /// sends another request, as [`hold_next_reply`](Self::hold_next_reply) does a reply: the
    /// same server holds back a commit it missed, and with it the events the commit would
    /// send to its sessions. One event per call.
    pub fn hold_next_event(&self) {
        *self.hold_event.lock() = true;
    }

    /// From now on, shows the client every sequence number that follows `marker` in a node
    /// name (`"lock-"` for a lock's nodes: `..lock-0000000003`) `offset` higher than the
    /// server has it, and every `getChildren2` reply's `cversion` as the server would report
    /// it with `offset` more child creates (`cversion + 2 * offset`, wrapping as the server's
    /// Java `int` does); the client's requests are shifted back. A directory that has had a
    /// few creates then looks to the client like one that has had `offset` more: with
    /// `offset` 2^30, like a lock used for about twelve days at 1,000 acquires a second.
    /// Suffixes keep their ten digits (the shifted number must stay below 10^10).
    pub fn shift_sequences(&self, marker: &str, offset: u32) {
        *self.shift.lock() = Some(Shift { marker: marker.as_bytes().to_vec(), offset });
    }
}

/// A shift of sequence numbers (see [`CountingProxy::shift_sequences`]).
#[derive(Debug, Clone)]
struct Shift {
    marker: Vec<u8>,
    offset: u32,
}

impl Shift {
    /// Rewrites, in place, each run of ten digits after the marker: `up` for what goes to the
    /// client (plus), not `up` for what goes to the server (minus). Same length, so frames keep
    /// their sizes.
    fn rewrite(&self, bytes: &mut [u8], up: bool) {
        let (m, digits) = (self.marker.len(), 10);
        let mut at = 0;
        while at + m + digits <= bytes.len() {
            let run = at + m..at + m + digits;
            if bytes[at..at + m] == self.marker[..] && bytes[run.clone()].iter().all(u8::is_ascii_digit) {
                let value: u64 =
                    std::str::from_utf8(&bytes[run.clone()]).ok().and_then(|d| d.parse().ok()).unwrap_or(0);
                let shifted =
                    if up { value + u64::from(self.offset) } else { value.saturating_sub(u64::from(self.offset)) };
                if shifted < 10_000_000_000 {
                    bytes[run].copy_from_slice(format!("{shifted:010}").as_bytes());
                }
                at += m + digits;
            } else {
                at += 1;
            }
        }
    }

    /// A `getChildren2` reply's body ends in the parent's stat; its `cversion` is at offset 36
    /// of the stat's 68 bytes.
    fn shift_cversion(&self, frame: &mut [u8]) {
        let Some(at) = frame.len().checked_sub(68 - 36) else { return };
        if frame.len() < 16 + 68 {
            return;
        }
        let cversion = i32::from_be_bytes([frame[at], frame[at + 1], frame[at + 2], frame[at + 3]]);
        let shifted = cversion.wrapping_add((self.offset as i32).wrapping_mul(2));
        frame[at..at + 4].copy_from_slice(&shifted.to_be_bytes());
    }
}

/// What the proxy's connections share.
struct Shared {
    target: String,
    counts: Arc<Mutex<BTreeMap<&'static str, u64>>>,
    lose: Arc<Mutex<Option<&'static str>>>,
    refuse: Arc<Mutex<Option<(&'static str, i32)>>>,
    shift: Arc<Mutex<Option<Shift>>>,
    delay: Arc<Mutex<Duration>>,
    hold: Arc<Mutex<bool>>,
    hold_event: Arc<Mutex<bool>>,
    hold_kind: Arc<Mutex<Option<&'static str>>>,
}

/// Counts by kind: requests by opcode (`create`, `delete`, `getData+watch`, `getChildren`,
/// `removeWatches`, `ping`, ...), `watch-event` for the server's notifications, `round-trip`
/// for each request sent while the connection had no other request waiting for its reply
/// (requests sent back to back share one round trip), and `error:<code>` for each reply that
/// carried an error (`error:no-node`, `error:node-exists`, `error:no-auth`,
/// `error:session-moved`, `error:throttled`, ...; `error:other` for a code not listed here).
/// Session handshakes are not counted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RequestCounts(BTreeMap<&'static str, u64>);

impl RequestCounts {
    /// How many of `kind` crossed.
    pub fn get(&self, kind: &str) -> u64 {
        self.0.get(kind).copied().unwrap_or(0)
    }

    /// Requests of every kind except pings (which depend on idle time, not on the work).
    pub fn requests(&self) -> u64 {
        let request =
            |kind: &str| !matches!(kind, "ping" | "watch-event" | "round-trip") && !kind.starts_with("error:");
        self.0.iter().filter(|(kind, _)| request(kind)).map(|(_, n)| n).sum()
    }

    /// Replies that carried an error, of every code.
    pub fn errors(&self) -> u64 {
        self.0.iter().filter(|(kind, _)| kind.starts_with("error:")).map(|(_, n)| n).sum()
    }

    /// Round trips: requests that found no other request of their connection in flight.
    pub fn round_trips(&self) -> u64 {
        self.get("round-trip")
    }

    /// What crossed since `earlier` (a snapshot of the same proxy).
    pub fn since(&self, earlier: &RequestCounts) -> RequestCounts {
        let delta = self
            .0
            .iter()
            .map(|(kind, n)| (*kind, n.saturating_sub(earlier.get(kind))))
            .filter(|(_, n)| *n > 0)
            .collect();
        RequestCounts(delta)
    }

    /// Every kind with its count.
    pub fn iter(&self) -> impl Iterator<Item = (&'static str, u64)> + '_ {
        self.0.iter().map(|(kind, n)| (*kind, *n))
    }

    /// `kind n.nn` pairs, per one of `ops` operations.
    pub fn per_op(&self, ops: usize) -> String {
        let ops = ops.max(1) as f64;
        let pairs: Vec<String> = self.iter().map(|(kind, n)| format!("{kind} {:.2}", n as f64 / ops)).collect();
        pairs.join(", ")
    }
}

impl fmt::Display for RequestCounts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.per_op(1))
    }
}

async fn forward(client: TcpStream, shared: Arc<Shared>) {
    let Ok(server) = TcpStream::connect(&shared.target).await else { return };
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let (client_read, client_write) = client.into_split();
    let (server_read, server_write) = server.into_split();
    let connection = Connection {
        shared: &shared,
        in_flight: AtomicI64::new(0),
        doomed: AtomicI64::new(NO_XID),
        held: AtomicI64::new(NO_XID),
        refused: Mutex::new(None),
        listings: Mutex::default(),
        requests: AtomicU64::new(0),
        requested: Notify::new(),
        caught_up: AtomicBool::new(false),
        caught_up_signal: Notify::new(),
    };
    let (queue, queued) = tokio::sync::mpsc::unbounded_channel();
    let up = pump(client_read, Outlet::Queued(queue), &connection, Direction::Requests);
    let down = pump(server_read, Outlet::Direct(client_write), &connection, Direction::Replies);
    let _ = tokio::join!(up, down, pass_on(queued, server_write));
}

/// A request held until its time to go on (see [`CountingProxy::delay_requests`]).
type Held = (tokio::time::Instant, Vec<u8>);

/// Where a pump's frames go: the socket, or (requests) a queue that holds each until its time.
enum Outlet {
    Direct(OwnedWriteHalf),
    Queued(tokio::sync::mpsc::UnboundedSender<Held>),
}

impl Outlet {
    async fn send(&mut self, frame: &[u8], delay: Duration) -> std::io::Result<()> {
        match self {
            Outlet::Direct(to) => to.write_all(frame).await,
            Outlet::Queued(queue) => queue
                .send((crate::deadline::after(delay), frame.to_vec()))
                .map_err(|_| std::io::Error::from(std::io::ErrorKind::BrokenPipe)),
        }
    }

    /// Closes the way on; a queue is closed by its pump's return (dropping the sender), after
    /// which [`pass_on`] sends what it holds and shuts the socket down.
    async fn shutdown(&mut self) -> std::io::Result<()> {
        match self {
            Outlet::Direct(to) => to.shutdown().await,
            Outlet::Queued(_) => Ok(()),
        }
    }
}

/// Writes the queued requests to the server, each at its time, in order; shuts the socket
/// down when the queue closes.
async fn pass_on(mut queued: tokio::sync::mpsc::UnboundedReceiver<Held>, mut to: OwnedWriteHalf) {
    while let Some((due, frame)) = queued.recv().await {
        // Only a held request sleeps: a timer rounds up to its next tick (a millisecond).
        if due > tokio::time::Instant::now() {
            tokio::time::sleep_until(due).await;
        }
        if to.write_all(&frame).await.is_err() {
            return;
        }
    }
    let _ = to.shutdown().await;
}

/// No request's xid (xids are 32-bit).
const NO_XID: i64 = i64::MIN;

/// One proxied connection's state, shared by its two directions.
struct Connection<'a> {
    shared: &'a Shared,
    /// Requests sent and not answered yet.
    in_flight: AtomicI64,
    /// The xid of the request whose reply is to be lost, or [`NO_XID`].
    doomed: AtomicI64,
    /// The xid of the request whose reply is to be held, or [`NO_XID`].
    held: AtomicI64,
    /// The xid of the request whose reply is to be an error, and the error's code.
    refused: Mutex<Option<(i64, i32)>>,
    /// The xids of `getChildren2` requests not answered yet (while a shift is on).
    listings: Mutex<HashSet<i64>>,
    /// Requests (pings too) the client has sent so far, and their signal.
    requests: AtomicU64,
    requested: Notify,
    /// The requests' side has read every byte the client had sent when it last looked (it
    /// waits for more), and its signal.
    caught_up: AtomicBool,
    caught_up_signal: Notify,
}

impl Connection<'_> {
    /// Returns once the client has sent more than `seen` requests.
    async fn request_after(&self, seen: u64) {
        until(&self.requested, || self.requests.load(Ordering::SeqCst) > seen).await;
    }

    /// Returns once the requests' side has read all the client had sent: a request the client
    /// wrote before now (one it sent together with the request whose reply is held, say) is
    /// counted by then, however late that side was scheduled.
    async fn requests_caught_up(&self) {
        until(&self.caught_up_signal, || self.caught_up.load(Ordering::SeqCst)).await;
    }
}

/// Returns once `ready` holds, looking again at each of `signal`'s notifications (taken
/// before each look, so none between the look and the wait is missed).
async fn until(signal: &Notify, ready: impl Fn() -> bool) {
    loop {
        let next = signal.notified();
        let mut next = std::pin::pin!(next);
        next.as_mut().enable();
        if ready() {
            return;
        }
        next.await;
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Direction {
    Requests,
    Replies,
}

/// The longest frame the proxy passes on: ZooKeeper refuses any over its `jute.maxbuffer`
/// (1 MB unless raised), so more than 64 MiB is no ZooKeeper frame.
const MAX_FRAME: usize = 64 << 20;

/// Copies length-prefixed frames from `from` to `to`, counting them. The first frame in each
/// direction is the session handshake. The connection's `in_flight` counts its requests (those
/// with a non-negative xid; pings and the like have negative ones) not answered yet; a
/// request is counted before it is forwarded and a reply before it is, so a request caused by
/// a reply always sees that reply counted. The reply to a doomed request is not forwarded:
/// the client's side is closed instead.
async fn pump(
    mut from: OwnedReadHalf,
    mut to: Outlet,
    connection: &Connection<'_>,
    direction: Direction,
) -> std::io::Result<()> {
    let (counts, in_flight) = (&*connection.shared.counts, &connection.in_flight);
    let mut first = true;
    let mut buffer = Vec::new();
    loop {
        let mut length = [0u8; 4];
        if direction == Direction::Requests {
            let mut byte = [0u8; 1];
            if !matches!(from.peek(&mut byte).now_or_never(), Some(Ok(n)) if n > 0) {
                connection.caught_up.store(true, Ordering::SeqCst);
                connection.caught_up_signal.notify_waiters();
            }
        }
        if from.read_exact(&mut length).await.is_err() {
            return to.shutdown().await;
        }
        if direction == Direction::Requests {
            connection.caught_up.store(false, Ordering::SeqCst);
        }
        let n = usize::try_from(i32::from_be_bytes(length)).unwrap_or(0);
        if n > MAX_FRAME {
            // Not ZooKeeper's framing (a TLS handshake reads as a ~370 MB frame): the
            // connection is dropped rather than the announced length allocated.
            let _ = to.shutdown().await;
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("a frame of {n} bytes: not a ZooKeeper connection (TLS?), not counted"),
            ));
        }
        buffer.clear();
        buffer.extend_from_slice(&length);
        buffer.resize(4 + n, 0);
        from.read_exact(&mut buffer[4..]).await?;
        if direction == Direction::Requests {
            // Acknowledge the client's segment at once (the kernel leaves quick-ack mode
            // again by itself): a client that leaves Nagle's algorithm on then writes its next
            // request right away instead of after our reply, so round trips count what the
            // client sent together, whatever its socket options.
            #[cfg(target_os = "linux")]
            let _ = from.as_ref().set_quickack(true);
        }
        let frame = &buffer[4..];
        let kind: Option<&'static str> = match direction {
            _ if first => None,
            Direction::Requests => Some(request_kind(frame)),
            Direction::Replies => reply_kind(frame),
        };
        let xid = frame.get(..4).map(|b| i64::from(i32::from_be_bytes([b[0], b[1], b[2], b[3]])));
        let answered = xid.is_some_and(|xid| xid >= 0);
        if !first && direction == Direction::Requests {
            connection.requests.fetch_add(1, Ordering::SeqCst);
            connection.requested.notify_waiters();
        }
        if !first && answered && direction == Direction::Requests {
            let mut hold_kind = connection.shared.hold_kind.lock();
            if hold_kind.is_some() && *hold_kind == kind {
                *hold_kind = None;
                connection.held.store(xid.unwrap_or(NO_XID), Ordering::SeqCst);
            }
        }
        let held = match direction {
            Direction::Replies if !first && answered && xid == Some(connection.held.load(Ordering::SeqCst)) => {
                connection.held.store(NO_XID, Ordering::SeqCst);
                true
            }
            Direction::Replies if !first && answered => std::mem::take(&mut *connection.shared.hold.lock()),
            Direction::Replies if !first && xid == Some(-1) => {
                std::mem::take(&mut *connection.shared.hold_event.lock())
            }
            _ => false,
        };
        if held {
            // Every request sent so far came before this frame: wait for one more.
            connection.requests_caught_up().await;
            connection.request_after(connection.requests.load(Ordering::SeqCst)).await;
        }
        if !first && answered {
            match direction {
                Direction::Requests => {
                    let mut lose = connection.shared.lose.lock();
                    if lose.is_some() && *lose == kind {
                        *lose = None;
                        connection.doomed.store(xid.unwrap_or(NO_XID), Ordering::SeqCst);
                    }
                    let mut refuse = connection.shared.refuse.lock();
                    if let Some((refused_kind, code)) = *refuse {
                        if kind == Some(refused_kind) {
                            *refuse = None;
                            *connection.refused.lock() = Some((xid.unwrap_or(NO_XID), code));
                        }
                    }
                }
                Direction::Replies if xid == Some(connection.doomed.load(Ordering::SeqCst)) => {
                    return to.shutdown().await;
                }
                Direction::Replies => {
                    let mut refused = connection.refused.lock();
                    if let Some((refused_xid, code)) = *refused {
                        if xid == Some(refused_xid) {
                            *refused = None;
                            // The reply header only (xid, zxid), with the error code.
                            buffer.truncate(4 + 12);
                            buffer.extend_from_slice(&code.to_be_bytes());
                            let length = (buffer.len() - 4) as i32;
                            buffer[..4].copy_from_slice(&length.to_be_bytes());
                        }
                    }
                }
            }
        }
        let shift = connection.shared.shift.lock().clone();
        if let (false, Some(shift)) = (first, shift) {
            let listing = match direction {
                Direction::Requests => {
                    let opcode = buffer.get(8..12).map(|b| i32::from_be_bytes([b[0], b[1], b[2], b[3]]));
                    if opcode == Some(12) {
                        connection.listings.lock().insert(xid.unwrap_or(NO_XID));
                    }
                    false
                }
                Direction::Replies => xid.is_some_and(|xid| connection.listings.lock().remove(&xid)),
            };
            shift.rewrite(&mut buffer[4..], direction == Direction::Replies);
            let ok = buffer.get(16..20) == Some(&0i32.to_be_bytes()[..]);
            if listing && ok {
                shift.shift_cversion(&mut buffer[4..]);
            }
        }
        {
            let mut counts = counts.lock();
            if !first && answered {
                let before = match direction {
                    Direction::Requests => in_flight.fetch_add(1, Ordering::SeqCst),
                    Direction::Replies => in_flight.fetch_sub(1, Ordering::SeqCst),
                };
                if direction == Direction::Requests && before == 0 {
                    *counts.entry("round-trip").or_default() += 1;
                }
            }
            if let Some(kind) = kind {
                *counts.entry(kind).or_default() += 1;
            }
        }
        first = false;
        let delay = match direction {
            Direction::Requests => *connection.shared.delay.lock(),
            Direction::Replies => Duration::ZERO,
        };
        to.send(&buffer, delay).await?;
    }
}

/// The kind of a server reply frame (the bytes after the length prefix: xid, zxid, error code,
/// body), when it is counted: `watch-event` for a notification (xid -1), `error:<code>` for a
/// reply with an error.
fn reply_kind(frame: &[u8]) -> Option<&'static str> {
    if frame.get(..4) == Some(&(-1i32).to_be_bytes()[..]) {
        return Some("watch-event");
    }
    let code = frame.get(12..16).map(|b| i32::from_be_bytes([b[0], b[1], b[2], b[3]]))?;
    let kind = match code {
        0 => return None,
        -1 => "error:system-error",
        -2 => "error:runtime-inconsistency",
        -3 => "error:data-inconsistency",
        -4 => "error:connection-loss",
        -5 => "error:marshalling-error",
        -6 => "error:unimplemented",
        -7 => "error:operation-timeout",
        -8 => "error:bad-arguments",
        -12 => "error:unknown-session",
        -13 => "error:new-config-no-quorum",
        -14 => "error:reconfig-in-progress",
        -100 => "error:api-error",
        -101 => "error:no-node",
        -102 => "error:no-auth",
        -103 => "error:bad-version",
        -108 => "error:no-children-for-ephemerals",
        -110 => "error:node-exists",
        -111 => "error:not-empty",
        -112 => "error:session-expired",
        -113 => "error:invalid-callback",
        -114 => "error:invalid-acl",
        -115 => "error:auth-failed",
        -118 => "error:session-moved",
        -119 => "error:not-read-only",
        -120 => "error:ephemeral-on-local-session",
        -121 => "error:no-watcher",
        -122 => "error:request-timeout",
        -123 => "error:reconfig-disabled",
        -124 => "error:session-closed-require-sasl",
        -125 => "error:quota-exceeded",
        -127 => "error:throttled",
        _ => "error:other",
    };
    Some(kind)
}

/// The kind of a client request frame (the bytes after the length prefix: xid, opcode, body).
fn request_kind(frame: &[u8]) -> &'static str {
    let Some(opcode) = frame.get(4..8).map(|b| i32::from_be_bytes([b[0], b[1], b[2], b[3]])) else {
        return "short-frame";
    };
    // getData, exists and getChildren end in a `watch` flag.
    let watch = frame.last() == Some(&1);
    match opcode {
        1 => "create",
        2 => "delete",
        3 if watch => "exists+watch",
        3 => "exists",
        4 if watch => "getData+watch",
        4 => "getData",
        5 => "setData",
        8 | 12 if watch => "getChildren+watch",
        8 | 12 => "getChildren",
        9 => "sync",
        11 => "ping",
        13 => "check",
        14 => "multi",
        15 => "create2",
        17 => "checkWatches",
        18 => "removeWatches",
        19 => "createContainer",
        21 => "createTtl",
        22 => "multiRead",
        101 | 105 => "setWatches",
        103 => "getEphemerals",
        106 => "addWatch",
        -11 => "closeSession",
        _ => "other",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_subtract_and_exclude_pings() {
        let before = RequestCounts(BTreeMap::from([("create", 2), ("ping", 1)]));
        let after = RequestCounts(BTreeMap::from([("create", 5), ("ping", 4), ("delete", 3), ("watch-event", 1)]));
        let delta = after.since(&before);
        assert_eq!(delta.get("create"), 3);
        assert_eq!(delta.get("delete"), 3);
        assert_eq!(delta.requests(), 6);
        assert_eq!(RequestCounts(BTreeMap::from([("round-trip", 2), ("create", 3)])).round_trips(), 2);
        assert_eq!(delta.per_op(3), "create 1.00, delete 1.00, ping 1.00, watch-event 0.33");
    }

    #[test]
    fn request_kinds_by_opcode_and_watch_flag() {
        let frame = |opcode: i32, tail: &[u8]| {
            let mut f = 7i32.to_be_bytes().to_vec();
            f.extend_from_slice(&opcode.to_be_bytes());
            f.extend_from_slice(tail);
            f
        };
        assert_eq!(request_kind(&frame(15, &[0, 0])), "create2");
        assert_eq!(request_kind(&frame(4, &[0, 1])), "getData+watch");
        assert_eq!(request_kind(&frame(8, &[0, 0])), "getChildren");
        assert_eq!(request_kind(&frame(22, &[0, 0])), "multiRead");
        assert_eq!(request_kind(&[0, 0]), "short-frame");
    }

    #[test]
    fn reply_kinds_by_xid_and_error_code() {
        let reply = |xid: i32, err: i32| {
            let mut f = xid.to_be_bytes().to_vec();
            f.extend_from_slice(&7i64.to_be_bytes());
            f.extend_from_slice(&err.to_be_bytes());
            f
        };
        assert_eq!(reply_kind(&reply(-1, 0)), Some("watch-event"));
        assert_eq!(reply_kind(&reply(5, 0)), None);
        assert_eq!(reply_kind(&reply(5, -127)), Some("error:throttled"));
        assert_eq!(reply_kind(&reply(5, -118)), Some("error:session-moved"));
        assert_eq!(reply_kind(&reply(5, -102)), Some("error:no-auth"));
        assert_eq!(reply_kind(&reply(5, -9999)), Some("error:other"));
        assert_eq!(reply_kind(&[0, 0, 0, 5]), None);
        let counts = RequestCounts(BTreeMap::from([("delete", 2), ("error:throttled", 1), ("error:no-node", 1)]));
        assert_eq!((counts.requests(), counts.errors()), (2, 2));
    }
}
