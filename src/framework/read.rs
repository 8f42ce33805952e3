//! Reads: data, existence and children, each with its stat and, on request, a one-shot watch
//! ([`OneshotWatch`]).
//!
//! A read is retried under the framework's retry policy (a read changes nothing, so sending it
//! again is always safe); one waiting on a client its session has moved away from (after a
//! reconfiguration) is sent again through the new client at the move. A watched read sets its watch on the session that answered; the watch
//! completes with the node's next event, or with an error when that session ends first.

use std::future::IntoFuture;

use futures::future::BoxFuture;
use zookeeper_client::{EventType, OneshotWatcher, SessionState, Stat};

use super::session::ClientKey;
use super::watch_table::{NodeEvent, NodeEventKind, Registered};
use super::{Framework, SchemaOp};
use crate::error::{Error, Result, ZkError};
use crate::framework::metrics::Op;
use crate::watch::{SessionWatch, WatchItem};
use crate::ResyncReason;

/// A one-shot watch set by a watched read (Curator's `usingWatcher`): it completes once, with
/// the first change of the node after the read, or with an error when the session ends before
/// that. Dropping it removes the watch (the client sends `RemoveWatches` when it was the last
/// watch of its kind on the path).
///
/// The watch belongs to the session that answered the read. It survives disconnections of that
/// session (the client sets it again on reconnecting, and the server reports what changed
/// meanwhile), not the session's end, nor a move of the session to another client (after a
/// reconfiguration): read again (and watch again) after the error.
///
/// On a path this framework already watches persistently (a [`Framework::watch`], a cache,
/// a lock's mirror), a one-shot watch of the same session would silence the persistent one on
/// ZooKeeper 3.6-3.8 (ZOOKEEPER-4466, -4472). There the watched read shares the persistent
/// watch instead (one `addWatch` in that watch's mode, sent before the read): the watch
/// completes with the path's next change as that watch reports it, and a resync of it (events
/// may have been missed) completes it as a data or children change.
#[must_use = "a watch does nothing unless awaited"]
#[derive(Debug)]
pub struct OneshotWatch {
    framework: Framework,
    armed: Armed,
}

#[derive(Debug)]
enum Armed {
    /// A one-shot watch of the client.
    Client {
        watcher: OneshotWatcher,
        /// Its place in the framework's watch table while it is armed.
        entry: Registered,
        /// The session and client it was set through.
        client: ClientKey,
    },
    /// The framework's persistent watch on the path, shared.
    Shared { watch: Box<SessionWatch>, full_path: String, children: bool },
}

/// Where a watched read's watch comes from.
pub(crate) enum Arming {
    /// A one-shot watch set with the read, entered in the table.
    Client(Registered),
    /// A persistent watch in place before the read (the read sets none).
    Shared(Box<SessionWatch>),
}

impl OneshotWatch {
    /// The watch of a read armed by [`Framework::arm_full`]: the client's one-shot `watcher`
    /// (set by the read) with its table entry, or the persistent watch shared (`children`: it
    /// reports what a children watch would). `None` when the table let a one-shot watch and
    /// the read set none.
    pub(crate) fn of(
        framework: &Framework,
        arming: Arming,
        watcher: Option<(OneshotWatcher, ClientKey)>,
        children: bool,
    ) -> Option<Self> {
        match (arming, watcher) {
            (Arming::Client(entry), Some(watcher)) => Some(Self::new(framework, watcher, entry)),
            (Arming::Shared(watch), _) => Some(Self::shared(framework, watch, children)),
            (Arming::Client(_), None) => None,
        }
    }

    fn new(framework: &Framework, (watcher, client): (OneshotWatcher, ClientKey), entry: Registered) -> Self {
        OneshotWatch { framework: framework.clone(), armed: Armed::Client { watcher, entry, client } }
    }

    /// True when it shares the framework's persistent watch of its path (it set none of its
    /// own): dropping it unfired costs no request, and kept unpolled, every event of the path
    /// queues in it.
    pub(crate) fn is_shared(&self) -> bool {
        matches!(self.armed, Armed::Shared { .. })
    }

    fn shared(framework: &Framework, watch: Box<SessionWatch>, children: bool) -> Self {
        let full_path = watch.full_path().to_owned();
        OneshotWatch { framework: framework.clone(), armed: Armed::Shared { watch, full_path, children } }
    }

    /// Waits for the event.
    ///
    /// # Errors
    /// When the watch's session ended before the event: `SessionExpired` (the server expired
    /// it), [`Error::Closed`] (the framework was closed), `ClientClosed` (the framework gave the
    /// session up and opened another one), `AuthFailed`. `ConnectionLoss` when the session
    /// lives on but moved to another client (after a reconfiguration, when the servers the
    /// framework was given are no longer the ensemble's members): the watch was set through
    /// the client the session left, which the server no longer serves. Read (and watch) again
    /// in each case.
    ///
    /// # Cancel safety
    /// Cancel-safe in the sense that nothing is lost on the server, but the watch is consumed:
    /// a cancelled wait removes it.
    pub async fn changed(self) -> Result<NodeEvent> {
        let OneshotWatch { framework, armed } = self;
        let (watcher, mut entry, client) = match armed {
            Armed::Client { watcher, entry, client } => (watcher, entry, client),
            Armed::Shared { mut watch, full_path, children } => {
                return shared_change(&framework, &mut watch, &full_path, children).await;
            }
        };
        let event = tokio::select! {
            biased;
            event = crate::watch::fired(watcher) => event,
            () = framework.client_left(&client) => {
                entry.fired();
                return Err(ZkError::ConnectionLoss.into());
            }
        };
        // Fired (or its session ended): nothing of it is removed from the server any more.
        entry.fired();
        if event.event_type != EventType::Session {
            return Ok(NodeEvent::of(&framework, event.event_type, &event));
        }
        if !framework.session_gone(client.epoch()) {
            // The client ended before the move was confirmed; the session lives on.
            return Err(ZkError::ConnectionLoss.into());
        }
        Err(match event.session_state {
            SessionState::Expired => ZkError::SessionExpired.into(),
            SessionState::AuthFailed => ZkError::AuthFailed.into(),
            _ if framework.is_closed() => Error::Closed,
            _ => ZkError::ClientClosed.into(),
        })
    }
}

/// The next change of `full_path` that a one-shot watch of its kind (`children`, or data and
/// existence) would report, as the shared persistent `watch` reports it.
async fn shared_change(
    framework: &Framework,
    watch: &mut SessionWatch,
    full_path: &str,
    children: bool,
) -> Result<NodeEvent> {
    let path = framework.unfix_path(full_path).to_owned();
    let event = |kind| NodeEvent { kind, path: path.clone(), zxid: None };
    loop {
        match watch.next().await {
            Some(WatchItem::Event(e)) if e.path == full_path => {
                let kind = match e.event_type {
                    EventType::NodeDeleted => NodeEventKind::Deleted,
                    EventType::NodeChildrenChanged if children => NodeEventKind::ChildrenChanged,
                    EventType::NodeCreated | EventType::NodeDataChanged if !children => {
                        return Ok(NodeEvent::of(framework, e.event_type, &e));
                    }
                    _ => continue,
                };
                return Ok(NodeEvent { zxid: (e.zxid >= 0).then_some(e.zxid), ..event(kind) });
            }
            // A child came or went, as a recursive watch reports it.
            Some(WatchItem::Event(e))
                if children
                    && matches!(e.event_type, EventType::NodeCreated | EventType::NodeDeleted)
                    && crate::path::parent(&e.path) == Some(full_path) =>
            {
                return Ok(event(NodeEventKind::ChildrenChanged));
            }
            Some(WatchItem::Event(_) | WatchItem::Interrupted | WatchItem::Adding | WatchItem::Resync(None)) => {}
            // Changes may have been missed: the session's, as a one-shot watch ends with it.
            Some(WatchItem::Resync(Some(ResyncReason::NewSession))) => return Err(ZkError::SessionExpired.into()),
            Some(WatchItem::Resync(Some(_))) => {
                let kind = if children { NodeEventKind::ChildrenChanged } else { NodeEventKind::DataChanged };
                return Ok(event(kind));
            }
            Some(WatchItem::Refused(e)) => return Err(e),
            None => return Err(Error::Closed),
        }
    }
}

/// A read of a node's data and stat (Curator's `getData()`), sent when awaited.
#[must_use = "a read does nothing until it is awaited"]
#[derive(Debug)]
pub struct GetData<'a> {
    framework: &'a Framework,
    path: &'a str,
    /// Gunzip the data: `None` follows the framework's `enable_compression`.
    decompress: Option<bool>,
}

/// [`GetData`] with a one-shot watch.
#[must_use = "a read does nothing until it is awaited"]
#[derive(Debug)]
pub struct GetDataWatched<'a> {
    framework: &'a Framework,
    path: &'a str,
    decompress: Option<bool>,
}

/// A node's stat, or `None` when it does not exist (Curator's `checkExists()`), sent when
/// awaited.
#[must_use = "a read does nothing until it is awaited"]
#[derive(Debug)]
pub struct Exists<'a> {
    framework: &'a Framework,
    path: &'a str,
}

/// [`Exists`] with a one-shot watch (it fires on the node's creation when it does not exist).
#[must_use = "a read does nothing until it is awaited"]
#[derive(Debug)]
pub struct ExistsWatched<'a> {
    framework: &'a Framework,
    path: &'a str,
}

/// A node's children, names only and unsorted (Curator's `getChildren()`), sent when awaited.
#[must_use = "a read does nothing until it is awaited"]
#[derive(Debug)]
pub struct GetChildren<'a> {
    framework: &'a Framework,
    path: &'a str,
}

/// [`GetChildren`] with the parent's stat.
#[must_use = "a read does nothing until it is awaited"]
#[derive(Debug)]
pub struct GetChildrenWithStat<'a> {
    framework: &'a Framework,
    path: &'a str,
}

/// [`GetChildren`] with the parent's stat and a one-shot watch (it fires when a child is
/// added or removed, or the node is deleted).
#[must_use = "a read does nothing until it is awaited"]
#[derive(Debug)]
pub struct GetChildrenWatched<'a> {
    framework: &'a Framework,
    path: &'a str,
}

impl Framework {
    /// The watch of a watched read of `path`: a one-shot watch entered in the framework's
    /// watch table, or, where the framework watches the path persistently (a
    /// [`Framework::watch`], a cache, a lock's mirror), that watch shared, added before the
    /// read in its mode: on ZooKeeper 3.6 to 3.8 a one-shot watch of the same session on the
    /// same path silences the persistent watch's creations below it, and removing the one-shot
    /// before it fired removes half of the persistent one (ZOOKEEPER-4466, -4472).
    ///
    /// # Errors
    /// [`Error::InvalidPath`]; the shared watch's add failing (the retry policy gave up).
    async fn arm(&self, path: &str) -> Result<(String, Arming)> {
        let full = self.full_path(path)?;
        let arming = self.arm_full(&full).await?;
        Ok((full, arming))
    }

    /// [`arm`](Self::arm) for a full path (recipe code that sets a one-shot watch with the
    /// raw client, such as the semaphore's listing of its leases).
    pub(crate) async fn arm_full(&self, full: &str) -> Result<Arming> {
        match self.enter_oneshot_watch(full) {
            Ok(entry) => Ok(Arming::Client(entry)),
            Err(refused) => match self.persistent_watch_mode(full) {
                Some(mode) => {
                    let watch = SessionWatch::add(self, full, mode).await?;
                    Ok(Arming::Shared(Box::new(watch)))
                }
                // The persistent watch went meanwhile: the path takes a one-shot watch again.
                None => match self.enter_oneshot_watch(full) {
                    Ok(entry) => Ok(Arming::Client(entry)),
                    Err(_) => Err(refused),
                },
            },
        }
    }

    /// Reads a node's data and stat when awaited; `.watch()` adds a one-shot watch.
    ///
    /// ```no_run
    /// # async fn example(fw: zk_recipes::Framework) -> zk_recipes::Result<()> {
    /// let (config, stat) = fw.get_data("/config/app").await?;
    /// let (config, stat, watch) = fw.get_data("/config/app").watch().await?;
    /// let event = watch.changed().await?; // the next change, or the session's end
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// When awaited: [`Error::InvalidPath`] or the server's refusal (`NoNode`, `NoAuth`). A
    /// watched read of a missing node sets no watch (watch for its creation with
    /// [`exists`](Self::exists)).
    ///
    /// # Cancel safety
    /// Cancel-safe: a read changes nothing, and a cancelled watched read's watch is removed.
    pub fn get_data<'a>(&'a self, path: &'a str) -> GetData<'a> {
        GetData { framework: self, path, decompress: None }
    }

    /// A node's stat, or `None` when it does not exist, when awaited; `.watch()` adds a
    /// one-shot watch.
    ///
    /// # Errors
    /// When awaited: [`Error::InvalidPath`] or the server's refusal.
    ///
    /// # Cancel safety
    /// Cancel-safe: a read changes nothing, and a cancelled watched read's watch is removed.
    pub fn exists<'a>(&'a self, path: &'a str) -> Exists<'a> {
        Exists { framework: self, path }
    }

    /// A node's children (names, unsorted) when awaited; `.with_stat()` adds the node's stat,
    /// `.watch()` the stat and a one-shot watch.
    ///
    /// # Errors
    /// When awaited: [`Error::InvalidPath`] or the server's refusal (`NoNode`, `NoAuth`).
    ///
    /// # Cancel safety
    /// Cancel-safe: a read changes nothing, and a cancelled watched read's watch is removed.
    pub fn get_children<'a>(&'a self, path: &'a str) -> GetChildren<'a> {
        GetChildren { framework: self, path }
    }
}

impl<'a> GetData<'a> {
    /// Sets a one-shot watch on the node with the read.
    pub fn watch(self) -> GetDataWatched<'a> {
        GetDataWatched { framework: self.framework, path: self.path, decompress: self.decompress }
    }

    /// Decompresses the data, which must be one gzip member (Curator's
    /// `getData().decompressed()`, its `GzipCompressionProvider`): what
    /// [`create().compressed()`](crate::CreateBuilder::compressed) and Curator's
    /// `create().compressed()` write. Data that is not gzip is [`Error::CorruptData`].
    pub fn decompressed(mut self) -> Self {
        self.decompress = Some(true);
        self
    }

    /// Returns the data as stored even when the framework compresses by default
    /// ([`enable_compression`](crate::FrameworkBuilder::enable_compression); Curator 5.8's
    /// `undecompressed()`).
    pub fn undecompressed(mut self) -> Self {
        self.decompress = Some(false);
        self
    }

    /// The recipes' own nodes keep Curator's uncompressed layouts whatever the framework's
    /// default.
    pub(crate) fn plain(self) -> Self {
        self.undecompressed()
    }
}

impl Framework {
    /// `data` as the reader asked for it: decompressed when `decompress` (or, unset, the
    /// framework's default) says so.
    pub(crate) fn unpack(&self, path: &str, decompress: Option<bool>, data: Vec<u8>) -> Result<Vec<u8>> {
        if !decompress.unwrap_or(self.config().compression) {
            return Ok(data);
        }
        crate::protocol::gzip::decompress(&data).map_err(|e| Error::CorruptData {
            path: path.to_owned(),
            expected: e.expected,
            reason: e.found,
        })
    }
}

impl<'a> Exists<'a> {
    /// Sets a one-shot watch on the node with the read.
    pub fn watch(self) -> ExistsWatched<'a> {
        ExistsWatched { framework: self.framework, path: self.path }
    }
}

impl<'a> GetChildren<'a> {
    /// Returns the node's stat too.
    pub fn with_stat(self) -> GetChildrenWithStat<'a> {
        GetChildrenWithStat { framework: self.framework, path: self.path }
    }

    /// Returns the node's stat and sets a one-shot watch on its children.
    pub fn watch(self) -> GetChildrenWatched<'a> {
        GetChildrenWatched { framework: self.framework, path: self.path }
    }
}

// Every read below: errors are `InvalidPath`, the server's refusal (`NoNode`, `NoAuth`), or
// the retry policy giving up; cancel-safe (a read changes nothing; a cancelled watched read
// sets no watch that outlives it).

impl<'a> IntoFuture for GetData<'a> {
    type Output = Result<(Vec<u8>, Stat)>;
    type IntoFuture = BoxFuture<'a, Self::Output>;

    /// # Errors
    /// [`Error::InvalidPath`] or the server's refusal (`NoNode`, `NoAuth`);
    /// [`Error::CorruptData`] when decompressing data that is not gzip.
    ///
    /// # Cancel safety
    /// Cancel-safe: a read changes nothing.
    fn into_future(self) -> Self::IntoFuture {
        Box::pin(async move {
            let full = self.framework.full_path(self.path)?;
            self.framework.check_schema(self.path, SchemaOp::Read { watched: false })?;
            let full = &full;
            let (data, stat) = self
                .framework
                .with_read_retry(|s| async move {
                    s.sent(Op::GetData);
                    s.client.get_data(full).await
                })
                .await?;
            Ok((self.framework.unpack(self.path, self.decompress, data)?, stat))
        })
    }
}

impl<'a> IntoFuture for GetDataWatched<'a> {
    type Output = Result<(Vec<u8>, Stat, OneshotWatch)>;
    type IntoFuture = BoxFuture<'a, Self::Output>;

    /// # Errors
    /// [`Error::InvalidPath`] or the server's refusal (`NoNode`: no watch is set then; watch
    /// for the creation with [`Framework::exists`]).
    ///
    /// # Cancel safety
    /// Cancel-safe: a read changes nothing, and a cancelled read's watch is removed.
    fn into_future(self) -> Self::IntoFuture {
        Box::pin(async move {
            let fw = self.framework;
            fw.full_path(self.path)?;
            fw.check_schema(self.path, SchemaOp::Read { watched: true })?;
            let (full, arming) = fw.arm(self.path).await?;
            let full = &full;
            let (data, stat, watch) = match arming {
                Arming::Client(entry) => {
                    let (data, stat, watcher) = fw
                        .with_read_retry(|s| async move {
                            s.sent(Op::GetData);
                            let (data, stat, watcher) = s.client.get_and_watch_data(full).await?;
                            Ok((data, stat, (watcher, s.client_key())))
                        })
                        .await?;
                    (data, stat, OneshotWatch::new(fw, watcher, entry))
                }
                Arming::Shared(watch) => {
                    let (data, stat) = fw
                        .with_read_retry(|s| async move {
                            s.sent(Op::GetData);
                            s.client.get_data(full).await
                        })
                        .await?;
                    (data, stat, OneshotWatch::shared(fw, watch, false))
                }
            };
            Ok((fw.unpack(self.path, self.decompress, data)?, stat, watch))
        })
    }
}

impl<'a> IntoFuture for Exists<'a> {
    type Output = Result<Option<Stat>>;
    type IntoFuture = BoxFuture<'a, Self::Output>;

    /// # Errors
    /// [`Error::InvalidPath`] or the server's refusal.
    ///
    /// # Cancel safety
    /// Cancel-safe: a read changes nothing.
    fn into_future(self) -> Self::IntoFuture {
        Box::pin(async move {
            let full = self.framework.full_path(self.path)?;
            self.framework.check_schema(self.path, SchemaOp::Read { watched: false })?;
            let full = &full;
            self.framework
                .with_read_retry(|s| async move {
                    s.sent(Op::Exists);
                    s.client.check_stat(full).await
                })
                .await
        })
    }
}

impl<'a> IntoFuture for ExistsWatched<'a> {
    type Output = Result<(Option<Stat>, OneshotWatch)>;
    type IntoFuture = BoxFuture<'a, Self::Output>;

    /// # Errors
    /// [`Error::InvalidPath`] or the server's refusal.
    ///
    /// # Cancel safety
    /// Cancel-safe: a read changes nothing, and a cancelled read's watch is removed.
    fn into_future(self) -> Self::IntoFuture {
        Box::pin(async move {
            let fw = self.framework;
            fw.full_path(self.path)?;
            fw.check_schema(self.path, SchemaOp::Read { watched: true })?;
            let (full, arming) = fw.arm(self.path).await?;
            let full = &full;
            match arming {
                Arming::Client(entry) => {
                    let (stat, watcher) = fw
                        .with_read_retry(|s| async move {
                            s.sent(Op::Exists);
                            let (stat, watcher) = s.client.check_and_watch_stat(full).await?;
                            Ok((stat, (watcher, s.client_key())))
                        })
                        .await?;
                    Ok((stat, OneshotWatch::new(fw, watcher, entry)))
                }
                Arming::Shared(watch) => {
                    let stat = fw
                        .with_read_retry(|s| async move {
                            s.sent(Op::Exists);
                            s.client.check_stat(full).await
                        })
                        .await?;
                    Ok((stat, OneshotWatch::shared(fw, watch, false)))
                }
            }
        })
    }
}

impl<'a> IntoFuture for GetChildren<'a> {
    type Output = Result<Vec<String>>;
    type IntoFuture = BoxFuture<'a, Self::Output>;

    /// # Errors
    /// [`Error::InvalidPath`] or the server's refusal (`NoNode`).
    ///
    /// # Cancel safety
    /// Cancel-safe: a read changes nothing.
    fn into_future(self) -> Self::IntoFuture {
        Box::pin(async move {
            let full = self.framework.full_path(self.path)?;
            self.framework.check_schema(self.path, SchemaOp::Read { watched: false })?;
            let full = &full;
            self.framework
                .with_read_retry(|s| async move {
                    s.sent(Op::GetChildren);
                    s.client.list_children(full).await
                })
                .await
        })
    }
}

impl<'a> IntoFuture for GetChildrenWithStat<'a> {
    type Output = Result<(Vec<String>, Stat)>;
    type IntoFuture = BoxFuture<'a, Self::Output>;

    /// # Errors
    /// [`Error::InvalidPath`] or the server's refusal (`NoNode`).
    ///
    /// # Cancel safety
    /// Cancel-safe: a read changes nothing.
    fn into_future(self) -> Self::IntoFuture {
        Box::pin(async move {
            let full = self.framework.full_path(self.path)?;
            self.framework.check_schema(self.path, SchemaOp::Read { watched: false })?;
            let full = &full;
            self.framework
                .with_read_retry(|s| async move {
                    s.sent(Op::GetChildren);
                    s.client.get_children(full).await
                })
                .await
        })
    }
}

impl<'a> IntoFuture for GetChildrenWatched<'a> {
    type Output = Result<(Vec<String>, Stat, OneshotWatch)>;
    type IntoFuture = BoxFuture<'a, Self::Output>;

    /// # Errors
    /// [`Error::InvalidPath`] or the server's refusal (`NoNode`).
    ///
    /// # Cancel safety
    /// Cancel-safe: a read changes nothing, and a cancelled read's watch is removed.
    fn into_future(self) -> Self::IntoFuture {
        Box::pin(async move {
            let fw = self.framework;
            fw.full_path(self.path)?;
            fw.check_schema(self.path, SchemaOp::Read { watched: true })?;
            let (full, arming) = fw.arm(self.path).await?;
            let full = &full;
            match arming {
                Arming::Client(entry) => {
                    let (children, stat, watcher) = fw
                        .with_read_retry(|s| async move {
                            s.sent(Op::GetChildren);
                            let (children, stat, watcher) = s.client.get_and_watch_children(full).await?;
                            Ok((children, stat, (watcher, s.client_key())))
                        })
                        .await?;
                    Ok((children, stat, OneshotWatch::new(fw, watcher, entry)))
                }
                Arming::Shared(watch) => {
                    let (children, stat) = fw
                        .with_read_retry(|s| async move {
                            s.sent(Op::GetChildren);
                            s.client.get_children(full).await
                        })
                        .await?;
                    Ok((children, stat, OneshotWatch::shared(fw, watch, true)))
                }
            }
        })
    }
}

/// Reads per `multiRead` request of [`Framework::get_data_many`], and such requests in flight
/// at once: a server spends less per node on one request of many reads than on many requests,
/// and a few requests in flight keep the connection busy.
#[cfg_attr(not(feature = "discovery"), allow(dead_code))]
const MANY_BATCH: usize = 64;
#[cfg_attr(not(feature = "discovery"), allow(dead_code))]
const MANY_IN_FLIGHT: usize = 4;

/// A node's data and stat, `None` when it does not exist.
type Found = Option<(Vec<u8>, Stat)>;

// Used by discovery's queries.
#[cfg_attr(not(feature = "discovery"), allow(dead_code))]
impl Framework {
    /// The data and stat of every node of `paths` (user paths), in order: `None` for a node
    /// that does not exist. Sent as pipelined `multiRead` requests of up to 64 reads (each
    /// answered at one point between writes), up to four in flight; on a server without
    /// `multiRead` (ZooKeeper 3.5), as pipelined `getData`s. Each request is retried under
    /// the framework's policy.
    ///
    /// # Errors
    /// [`Error::InvalidPath`]; a read's refusal other than `NoNode` (`NoAuth`, ...); the
    /// framework's errors.
    pub(crate) async fn get_data_many(&self, paths: &[String]) -> Result<Vec<Found>> {
        use futures::stream::{self, StreamExt, TryStreamExt};
        use zookeeper_client::MultiReadResult;

        let fulls = paths.iter().map(|path| self.full_path(path)).collect::<Result<Vec<_>>>()?;
        let batch = |fulls: &[String]| {
            let fulls = fulls.to_vec();
            async move {
                let fulls = &fulls;
                let multi = self
                    .with_read_retry(|s| async move {
                        s.sent(Op::MultiRead);
                        let mut reader = s.client.new_multi_reader();
                        for full in fulls {
                            reader.add_get_data(full)?;
                        }
                        reader.commit().await
                    })
                    .await;
                let results = match multi {
                    Err(Error::ZooKeeper(ZkError::Unimplemented)) => {
                        // No multiRead: the reads one by one, pipelined.
                        let reads = fulls.iter().map(|full| async move {
                            match self
                                .with_read_retry(|s| async move {
                                    s.sent(Op::GetData);
                                    s.client.get_data(full).await
                                })
                                .await
                            {
                                Ok((data, stat)) => Ok(Some((data, stat))),
                                Err(Error::ZooKeeper(ZkError::NoNode)) => Ok(None),
                                Err(e) => Err(e),
                            }
                        });
                        return futures::future::try_join_all(reads).await;
                    }
                    other => other?,
                };
                results
                    .into_iter()
                    .map(|result| match result {
                        MultiReadResult::Data { data, stat } => Ok(Some((data, stat))),
                        MultiReadResult::Error { err: ZkError::NoNode } => Ok(None),
                        MultiReadResult::Error { err } => Err(err.into()),
                        _ => {
                            Err(ZkError::UnexpectedError("a multiRead answered a getData with no data".to_owned())
                                .into())
                        }
                    })
                    .collect::<Result<Vec<Found>>>()
            }
        };
        let batches: Vec<Vec<Found>> =
            stream::iter(fulls.chunks(MANY_BATCH).map(batch)).buffered(MANY_IN_FLIGHT).try_collect().await?;
        Ok(batches.into_iter().flatten().collect())
    }
}
