//! The task that keeps a mirror current: it applies the source's items, sends the reads the
//! mirror asks for on the framework's session (at most [`Config::concurrency`] in flight),
//! and applies their replies, each only after every event that arrived before it.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use futures::stream::FuturesUnordered;
use futures::{FutureExt, Stream, StreamExt};
use tokio::sync::watch;
use tokio::time::Instant;
use zookeeper_client::{Client, Error as ZkError};

use super::source::SourceItem;
use super::state::{Mirror, Op, Reads, Reply, Request, Status};
use crate::framework::Framework;

/// Turns a node's bytes into what the mirror keeps (`None`: keep the stat only).
pub(crate) type Decode<T> = Arc<dyn Fn(&str, Vec<u8>) -> Option<T> + Send + Sync>;

/// Who holds the mirror: the driver changes it only through [`Host::update`], which applies
/// the change under the host's lock and then publishes what changed.
pub(crate) trait Host<T>: Send + Sync + 'static {
    fn update(&self, f: &mut dyn FnMut(&mut Mirror<T>));
}

pub(crate) struct Config<T> {
    /// The root's full server path (namespace included).
    pub(crate) root: String,
    pub(crate) reads: Reads,
    pub(crate) decode: Decode<T>,
    /// Reads in flight at most.
    pub(crate) concurrency: usize,
}

impl<T> Config<T> {
    fn full_path(&self, rel: &str) -> String {
        match (self.root.as_str(), rel) {
            (root, "") => root.to_owned(),
            ("/", rel) => format!("/{rel}"),
            (root, rel) => format!("{root}/{rel}"),
        }
    }

    /// The path relative to the root, if `full` is the root or below it.
    pub(crate) fn relative<'a>(&self, full: &'a str) -> Option<&'a str> {
        if full == self.root {
            return Some("");
        }
        let rest = if self.root == "/" {
            full.strip_prefix('/')
        } else {
            full.strip_prefix(self.root.as_str())?.strip_prefix('/')
        };
        rest.filter(|r| !r.is_empty())
    }
}

type InFlight<T> = Pin<Box<dyn Future<Output = (Request, Reply<T>)> + Send>>;

/// Pauses before a resync the source did not ask for (after a failed read).
const FIRST_PAUSE: Duration = Duration::from_millis(100);
const MAX_PAUSE: Duration = Duration::from_secs(5);

/// Runs until the source ends (the framework closed) or `stop` turns true.
pub(crate) async fn run<T, H, S>(
    framework: Framework,
    host: Arc<H>,
    mut source: S,
    config: Config<T>,
    mut stop: watch::Receiver<bool>,
) where
    T: Send + Sync + 'static,
    H: Host<T>,
    S: Stream<Item = SourceItem> + Send + Unpin,
{
    let config = Arc::new(config);
    let mut queue: VecDeque<Request> = VecDeque::new();
    let mut in_flight: FuturesUnordered<InFlight<T>> = FuturesUnordered::new();
    let mut state = framework.state_watch();
    let mut pause = FIRST_PAUSE;
    // The source said `Interrupted` and has not said `Resync` since: it will.
    let mut source_gap = false;
    // When to resync without the source asking: a read failed, or the framework was
    // suspended and is back while the source saw no gap (the watch held).
    let mut resync_at: Option<Instant> = None;
    loop {
        while in_flight.len() < config.concurrency {
            let Some(request) = queue.pop_front() else { break };
            in_flight.push(Box::pin(read(&framework, &config, request)));
        }
        let connected = state.borrow().state.is_connected();
        let wake = resync_at.unwrap_or_else(Instant::now);
        tokio::select! {
            biased;
            changed = stop.changed() => {
                if changed.is_err() || *stop.borrow() {
                    return;
                }
            }
            item = source.next() => {
                let Some(item) = item else {
                    host.update(&mut |m| m.interrupt());
                    return;
                };
                note(&item, &mut source_gap, &mut pause);
                apply(&*host, &config, item, &mut queue);
            }
            Some((request, reply)) = in_flight.next(), if !in_flight.is_empty() => {
                // Every event the server sent before this reply is in the source's queue now:
                // apply them first.
                while let Some(item) = source.next().now_or_never() {
                    let Some(item) = item else {
                        host.update(&mut |m| m.interrupt());
                        return;
                    };
                    note(&item, &mut source_gap, &mut pause);
                    apply(&*host, &config, item, &mut queue);
                }
                let mut reply = Some(reply);
                host.update(&mut |m| {
                    if let Some(reply) = reply.take() {
                        m.reply(&request, reply);
                    }
                    queue.extend(m.take_requests());
                });
            }
            changed = state.changed() => {
                if changed.is_err() {
                    return;
                }
                if !state.borrow().state.is_connected() {
                    host.update(&mut |m| m.interrupt());
                }
            }
            _ = tokio::time::sleep_until(wake), if resync_at.is_some() && connected && in_flight.is_empty() => {
                tracing::debug!(root = %config.root, "mirror: reading the subtree again (a read failed, or the framework was suspended)");
                pause = (pause * 2).min(MAX_PAUSE);
                resync_at = None;
                host.update(&mut |m| {
                    m.resync();
                    queue.extend(m.take_requests());
                });
            }
        }
        let mut wants = false;
        host.update(&mut |m| wants = m.needs_resync() || (m.status() == Status::Incomplete && !source_gap));
        match (wants, resync_at) {
            (true, None) => resync_at = Some(Instant::now() + pause),
            (false, Some(_)) => resync_at = None,
            _ => {}
        }
    }
}

/// Tracks the source's gaps: between `Interrupted` and `Resync` the source will resync.
fn note(item: &SourceItem, source_gap: &mut bool, pause: &mut Duration) {
    match item {
        SourceItem::Interrupted => *source_gap = true,
        SourceItem::Resync { .. } => {
            *source_gap = false;
            *pause = FIRST_PAUSE;
        }
        SourceItem::Event { .. } => {}
    }
}

/// Applies one source item.
fn apply<T, H: Host<T>>(host: &H, config: &Config<T>, item: SourceItem, queue: &mut VecDeque<Request>) {
    host.update(&mut |m| {
        match &item {
            SourceItem::Event { kind, path, .. } => {
                if let Some(rel) = config.relative(path) {
                    m.event(*kind, rel);
                }
            }
            SourceItem::Interrupted => m.interrupt(),
            SourceItem::Resync { reason } => {
                tracing::debug!(root = %config.root, ?reason, "mirror: resync");
                queue.clear();
                m.resync();
            }
        }
        queue.extend(m.take_requests());
    });
}

/// Sends one read on the current session and maps its outcome.
fn read<T: Send + Sync + 'static>(
    framework: &Framework,
    config: &Arc<Config<T>>,
    request: Request,
) -> impl Future<Output = (Request, Reply<T>)> + Send + 'static {
    let session = framework.session();
    let config = Arc::clone(config);
    async move {
        let Ok(session) = session else { return (request, Reply::Failed) };
        let full = config.full_path(&request.path);
        let reply = read_on(&session.client, &config, &full, request.op).await;
        (request, reply)
    }
}

async fn read_on<T>(client: &Client, config: &Config<T>, full: &str, op: Op) -> Reply<T> {
    match (op, config.reads) {
        (Op::Read, Reads::Data) => match client.get_data(full).await {
            Ok((data, stat)) => Reply::Found { stat, data: (config.decode)(full, data).map(Arc::new), children: None },
            Err(e) => failure(e),
        },
        (Op::Read, Reads::Stat | Reads::Presence) => match client.check_stat(full).await {
            Ok(Some(stat)) => Reply::Found { stat, data: None, children: None },
            Ok(None) => Reply::Missing,
            Err(e) => failure(e),
        },
        (Op::Load, Reads::Data) => {
            let (data, children) = futures::join!(client.get_data(full), client.get_children(full));
            match (data, children) {
                (Ok((data, stat)), Ok((children, _))) => {
                    Reply::Found { stat, data: (config.decode)(full, data).map(Arc::new), children: Some(children) }
                }
                // Deleted between the two reads: its event is on the way.
                (Ok((data, stat)), Err(ZkError::NoNode)) => {
                    Reply::Found { stat, data: (config.decode)(full, data).map(Arc::new), children: Some(Vec::new()) }
                }
                (Err(e), _) | (_, Err(e)) => failure(e),
            }
        }
        (Op::Load | Op::List, _) => match client.get_children(full).await {
            Ok((children, stat)) => Reply::Found { stat, data: None, children: Some(children) },
            Err(e) => failure(e),
        },
    }
}

fn failure<T>(e: ZkError) -> Reply<T> {
    match e {
        ZkError::NoNode => Reply::Missing,
        ZkError::NoAuth => Reply::Denied,
        e => {
            tracing::debug!(error = %e, "mirror: a read failed");
            Reply::Failed
        }
    }
}
