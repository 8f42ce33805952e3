//! A TCP proxy that injects network faults between a client and a server.

use std::io::ErrorKind;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{broadcast, watch};
use tokio::task::JoinSet;

use super::TestingError;

/// How long a FIN-closed connection may take to be closed by its peers before it is dropped.
const FIN_DRAIN: Duration = Duration::from_secs(2);
const BUFFER_SIZE: usize = 16 * 1024;

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
    close: broadcast::Sender<Close>,
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
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(|e| TestingError::io("binding the fault proxy to 127.0.0.1:0", e))?;
        let address = listener.local_addr().map_err(|e| TestingError::io("reading the fault proxy's address", e))?;
        let shared = Arc::new(Shared {
            target: target.to_owned(),
            mode: watch::Sender::new(ProxyMode::Pass),
            refuse: AtomicBool::new(false),
            connections: AtomicUsize::new(0),
            close: broadcast::channel(16).0,
        });
        let accept_task = tokio::spawn(accept_loop(listener, shared.clone()));
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

    /// Switches between forwarding and black-holing, for existing and new connections.
    pub fn set_mode(&self, mode: ProxyMode) {
        tracing::debug!(address = %self.address, ?mode, "fault proxy mode");
        self.shared.mode.send_replace(mode);
    }

    /// Closes every current connection with FIN on both sides (the client reads end of
    /// stream: zookeeper-client reports `ConnectionLoss` and reconnects). New connections are
    /// accepted as usual.
    pub fn drop_connections(&self) {
        tracing::debug!(address = %self.address, "fault proxy: dropping connections");
        let _ = self.shared.close.send(Close::Fin);
    }

    /// Closes every current connection with RST on both sides (`SO_LINGER` 0; the client sees
    /// "connection reset").
    pub fn reset_connections(&self) {
        tracing::debug!(address = %self.address, "fault proxy: resetting connections");
        let _ = self.shared.close.send(Close::Reset);
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

async fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((client, _)) => {
                    if shared.refuse.load(Ordering::SeqCst) {
                        reset(client);
                        continue;
                    }
                    // Subscribe now: a close issued from here on applies to this connection.
                    let close = shared.close.subscribe();
                    connections.spawn(proxy_connection(client, shared.clone(), close));
                }
                Err(err) => {
                    tracing::debug!(error = %err, "fault proxy accept failed");
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
}

/// Decrements the connection count when a connection task ends, however it ends.
struct CountGuard(Arc<Shared>);

impl Drop for CountGuard {
    fn drop(&mut self) {
        self.0.connections.fetch_sub(1, Ordering::SeqCst);
    }
}

async fn proxy_connection(mut client: TcpStream, shared: Arc<Shared>, mut close: broadcast::Receiver<Close>) {
    let mut upstream = tokio::select! {
        connected = TcpStream::connect(shared.target.as_str()) => match connected {
            Ok(upstream) => upstream,
            Err(err) => {
                tracing::debug!(target = %shared.target, error = %err, "fault proxy cannot reach target");
                reset(client);
                return;
            }
        },
        _ = close.recv() => {
            reset(client);
            return;
        }
    };
    let _ = client.set_nodelay(true);
    let _ = upstream.set_nodelay(true);
    shared.connections.fetch_add(1, Ordering::SeqCst);
    let _guard = CountGuard(shared.clone());
    let mode = shared.mode.subscribe();
    let mut from_client = vec![0u8; BUFFER_SIZE];
    let mut from_upstream = vec![0u8; BUFFER_SIZE];
    let how = loop {
        tokio::select! {
            read = client.read(&mut from_client) => {
                if let Some(how) = forward(read, &from_client, &mut upstream, &mode, &mut close).await {
                    break how;
                }
            }
            read = upstream.read(&mut from_upstream) => {
                if let Some(how) = forward(read, &from_upstream, &mut client, &mode, &mut close).await {
                    break how;
                }
            }
            command = close.recv() => match command {
                Ok(how) => break how,
                Err(broadcast::error::RecvError::Lagged(_)) => break Close::Reset,
                // The proxy is gone.
                Err(broadcast::error::RecvError::Closed) => break Close::Fin,
            },
        }
    };
    match how {
        Close::Reset => {
            reset(client);
            reset(upstream);
        }
        Close::Fin => close_gracefully(client, upstream).await,
    }
}

/// Handles one read result: forwards the bytes (or discards them when black-holing).
/// Returns how to close the connection when it is over.
async fn forward(
    read: std::io::Result<usize>,
    bytes: &[u8],
    to: &mut TcpStream,
    mode: &watch::Receiver<ProxyMode>,
    close: &mut broadcast::Receiver<Close>,
) -> Option<Close> {
    let n = match read {
        // One side closed: close the other side the same way.
        Ok(0) => return Some(Close::Fin),
        Ok(n) => n,
        Err(err) if err.kind() == ErrorKind::ConnectionReset => return Some(Close::Reset),
        Err(_) => return Some(Close::Reset),
    };
    if *mode.borrow() == ProxyMode::BlackHole {
        return None;
    }
    tokio::select! {
        written = to.write_all(&bytes[..n]) => written.err().map(|_| Close::Reset),
        command = close.recv() => Some(command.unwrap_or(Close::Reset)),
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
