//! [`SetPartitioner`]: the public handle, its builder, and the engine task behind it.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use futures::{FutureExt, StreamExt};
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::AbortHandle;

use crate::deadline;
use crate::error::{Error, Result};
use crate::framework::node::{CreatedNode, PendingCreate};
use crate::framework::{ConnectionStateStream, Framework};
use crate::locks::kazoo::{KazooHold, KazooLock};
use crate::path;
use crate::protocol::kazoo::{party_member, PARTITION_LOCKS, PARTITION_PARTY};
use zookeeper_client::CreateMode;

/// Where a [`SetPartitioner`] is (kazoo's `PartitionState`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum PartitionState {
    /// Waiting for the party to be stable, then taking the locks of this member's items.
    Allocating,
    /// This member holds the lock of every item of its [`partition`](SetPartitioner::partition).
    Acquired,
    /// The party changed, or the connection did: the items are still locked by this member,
    /// which should stop working on them and call [`release_set`](SetPartitioner::release_set).
    Release,
    /// The partitioner is done (finished, the session was lost, or an error it could not get
    /// past): it left the party and holds nothing. Start a new one to take part again.
    Failure,
}

/// Which items a member takes: `(identifier, members, items)` to the member's share. Every
/// member must compute the same division from the same inputs.
pub type PartitionFunc = Arc<dyn Fn(&str, &[String], &[String]) -> Vec<String> + Send + Sync>;

/// Drops the repeats of an item, keeping the first of each in its place.
fn dedup_in_order(items: &mut Vec<String>) {
    let mut seen = std::collections::HashSet::new();
    items.retain(|item| seen.insert(item.clone()));
}

/// kazoo's division: the items sorted, the members sorted, and this member's share the items
/// at positions `i`, `i + n`, `i + 2n`, ... where `i` is its place among the `n` members.
fn kazoo_partition(identifier: &str, members: &[String], items: &[String]) -> Vec<String> {
    let mut items = items.to_vec();
    items.sort();
    let mut members = members.to_vec();
    members.sort();
    let Some(i) = members.iter().position(|m| m == identifier) else { return Vec::new() };
    items.into_iter().skip(i).step_by(members.len()).collect()
}

#[derive(Debug, Clone)]
struct Status {
    state: PartitionState,
    partition: Arc<Vec<String>>,
    /// Bumped on every transition, so two states of the same name differ.
    state_id: u64,
    error: Option<Arc<Error>>,
}

enum Command {
    ReleaseSet(oneshot::Sender<()>),
    Finish(oneshot::Sender<()>),
}

/// The options of a [`SetPartitioner`], kazoo's constructor arguments; [`start`](Self::start)
/// joins the party.
pub struct SetPartitionerBuilder {
    framework: Framework,
    path: String,
    items: Vec<String>,
    identifier: Option<String>,
    time_boundary: Duration,
    max_reaction_time: Duration,
    partition_func: PartitionFunc,
}

impl fmt::Debug for SetPartitionerBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SetPartitionerBuilder")
            .field("path", &self.path)
            .field("items", &self.items.len())
            .field("identifier", &self.identifier)
            .field("time_boundary", &self.time_boundary)
            .field("max_reaction_time", &self.max_reaction_time)
            .finish_non_exhaustive()
    }
}

impl SetPartitionerBuilder {
    /// This member's identifier in the party (kazoo's default is the host name and the
    /// process id; this one is a random UUID). Members sort by it.
    pub fn identifier(mut self, identifier: &str) -> Self {
        self.identifier = Some(identifier.to_owned());
        self
    }

    /// How long the party must not change before the items are divided (kazoo's
    /// `time_boundary`, default 30 s).
    pub fn time_boundary(mut self, time_boundary: Duration) -> Self {
        self.time_boundary = time_boundary;
        self
    }

    /// How long one try at an item's lock waits before looking whether the party changed
    /// (kazoo's `max_reaction_time`, default 1 s).
    pub fn max_reaction_time(mut self, max_reaction_time: Duration) -> Self {
        self.max_reaction_time = max_reaction_time;
        self
    }

    /// Another division of the items than kazoo's (every member must use the same).
    pub fn partition_func(
        mut self,
        func: impl Fn(&str, &[String], &[String]) -> Vec<String> + Send + Sync + 'static,
    ) -> Self {
        self.partition_func = Arc::new(func);
        self
    }

    /// Creates the partitioner's nodes (persistent), joins the party and starts allocating in
    /// a task of its own.
    ///
    /// # Errors
    /// [`Error::InvalidPath`] (the root and `/zookeeper` too); [`Error::InvalidArgument`] for
    /// an item that is not a node name (empty, `.`, `..`, containing `/`), an identifier that
    /// cannot end a node name (empty, containing `/` or a character ZooKeeper refuses), or a
    /// zero `max_reaction_time`; nothing is written then; a connection error the retry
    /// policy gave up on; the server's refusal.
    ///
    /// # Cancel safety
    /// A cancelled start leaves no party node behind (it is deleted in the background).
    pub async fn start(self) -> Result<SetPartitioner> {
        let fw = self.framework;
        path::validate_recipe_path(&self.path)?;
        let full = fw.full_path(&self.path)?;
        let mut items = self.items;
        dedup_in_order(&mut items);
        for item in &items {
            if item.is_empty() || item == "." || item == ".." || item.contains('/') {
                return Err(Error::InvalidArgument { name: "items", reason: format!("{item:?} is not a node name") });
            }
            fw.full_path(&path::join(&self.path, item))?;
        }
        let identifier = self.identifier.unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
        // It ends the party node's name (`<uuid>-<identifier>`): refused here, before anything
        // is written, when that name is not one.
        let name = format!("{}-{identifier}", uuid::Uuid::new_v4().simple());
        if identifier.is_empty() || identifier.contains('/') || path::validate(&format!("/{name}")).is_err() {
            return Err(Error::invalid_argument("identifier", format!("{identifier:?} cannot end a node name")));
        }
        if self.max_reaction_time.is_zero() {
            return Err(Error::InvalidArgument { name: "max_reaction_time", reason: "zero".into() });
        }
        let party = path::join(&self.path, PARTITION_PARTY);
        let locks = path::join(&self.path, PARTITION_LOCKS);
        let full_party = fw.full_path(&party)?;
        fw.ensure_persistent(&full, true).await?;
        fw.ensure_persistent(&fw.full_path(&locks)?, true).await?;
        fw.ensure_persistent(&full_party, true).await?;
        // Taken before the party node is made: a transition from then on reaches the engine.
        let connection = fw.state_changes();
        let epoch = fw.epoch();
        let pending = PendingCreate::new(&fw, epoch, &full_party, name.clone(), "", "set_partitioner");
        let created = fw
            .create(&path::join(&party, &name))
            .mode(CreateMode::Ephemeral)
            .data(identifier.as_bytes())
            .idempotent()
            .await?;
        let member = pending.named_for_owner(name, created.stat.czxid, created.stat.ephemeral_owner);
        let epoch = member.epoch();

        let status = Status { state: PartitionState::Allocating, partition: Arc::default(), state_id: 0, error: None };
        let (status_tx, status_rx) = watch::channel(status);
        let (commands, command_rx) = mpsc::unbounded_channel();
        let engine = Engine {
            framework: fw.clone(),
            party,
            locks,
            items,
            identifier: identifier.clone(),
            time_boundary: self.time_boundary,
            max_reaction_time: self.max_reaction_time,
            partition_func: self.partition_func,
            status: status_tx,
            member: Some(member),
            holds: Vec::new(),
            epoch,
        };
        let task = tokio::spawn(engine.run(command_rx, connection)).abort_handle();
        Ok(SetPartitioner { identifier, path: self.path, status: status_rx, commands, task })
    }
}

/// A member of a group that divides a set of items among its members (kazoo's
/// `SetPartitioner`), on kazoo's layout: the party at `<path>/party`, one kazoo lock per
/// item at `<path>/locks/<item>`.
///
/// Once the party has not changed for the time boundary, each member takes the locks of
/// its share of the items ([`PartitionState::Allocating`]), and reports them as its
/// [`partition`](Self::partition) once it holds them all ([`PartitionState::Acquired`]).
/// When the party changes (a member joins or leaves, a session ends) or the connection does
/// (suspended, reconnected), the state becomes [`PartitionState::Release`]: the member still
/// holds its locks, should stop working on its items, and then calls
/// [`release_set`](Self::release_set), which releases them and allocates again. An item is
/// thereby never in two members' acquired partitions at once: a member only reports an item
/// whose lock it holds. A lost session, [`finish`](Self::finish) or an error ends the
/// partitioner ([`PartitionState::Failure`]): it leaves the party and releases everything.
///
/// Dropping the partitioner ends its task, releases its locks and leaves the party (the
/// deletes are sent at once and seen through in the background).
///
/// ```no_run
/// # async fn example(fw: zk_recipes::Framework) -> zk_recipes::Result<()> {
/// use std::time::Duration;
/// use zk_recipes::{PartitionState, SetPartitioner};
///
/// let items = (0..100).map(|i| format!("shard-{i:03}"));
/// let partitioner = SetPartitioner::builder(&fw, "/work/shards", items).time_boundary(Duration::from_secs(5)).start().await?;
/// loop {
///     let state = partitioner.state();
///     match state {
///         PartitionState::Acquired => println!("working on {:?}", partitioner.partition()),
///         PartitionState::Release => {
///             // stop working on the items, then:
///             partitioner.release_set().await;
///             continue;
///         }
///         PartitionState::Failure => break,
///         _ => {}
///     }
///     partitioner.wait_while(state).await;
/// }
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct SetPartitioner {
    identifier: String,
    path: String,
    status: watch::Receiver<Status>,
    commands: mpsc::UnboundedSender<Command>,
    task: AbortHandle,
}

impl Drop for SetPartitioner {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl SetPartitioner {
    /// A partitioner of `items` at `path`, with kazoo's defaults (time boundary 30 s, max
    /// reaction time 1 s, kazoo's division, a random identifier); does no I/O. The items are a
    /// set, as kazoo's are: an item given twice counts once.
    pub fn builder<I, S>(framework: &Framework, path: &str, items: I) -> SetPartitionerBuilder
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        SetPartitionerBuilder {
            framework: framework.clone(),
            path: path.to_owned(),
            items: items.into_iter().map(Into::into).collect(),
            identifier: None,
            time_boundary: Duration::from_secs(30),
            max_reaction_time: Duration::from_secs(1),
            partition_func: Arc::new(kazoo_partition),
        }
    }

    /// The current state.
    pub fn state(&self) -> PartitionState {
        self.status.borrow().state
    }

    /// The items this member holds, sorted as the division gave them; empty unless
    /// [`Acquired`](PartitionState::Acquired) or [`Release`](PartitionState::Release).
    pub fn partition(&self) -> Vec<String> {
        self.status.borrow().partition.as_ref().clone()
    }

    /// This member's identifier.
    pub fn identifier(&self) -> &str {
        &self.identifier
    }

    /// The partitioner's path.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The error that ended the partitioner in [`Failure`](PartitionState::Failure), if one
    /// did.
    pub fn error(&self) -> Option<Arc<Error>> {
        self.status.borrow().error.clone()
    }

    /// Waits while the state is `state` and returns the state it changed to (at once when it
    /// is another already).
    ///
    /// # Cancel safety
    /// Cancel-safe: a wait changes nothing.
    pub async fn wait_while(&self, state: PartitionState) -> PartitionState {
        let mut status = self.status.clone();
        let changed = match status.wait_for(|s| s.state != state).await {
            Ok(s) => s.state,
            Err(_) => PartitionState::Failure,
        };
        changed
    }

    /// Waits until the state is [`Acquired`](PartitionState::Acquired) (true) or
    /// [`Failure`](PartitionState::Failure) (false), for at most `timeout` (false).
    ///
    /// # Cancel safety
    /// Cancel-safe: a wait changes nothing.
    pub async fn wait_for_acquire(&self, timeout: Duration) -> bool {
        let mut status = self.status.clone();
        let settled = status.wait_for(|s| matches!(s.state, PartitionState::Acquired | PartitionState::Failure));
        let acquired = match tokio::time::timeout(timeout, settled).await {
            Ok(Ok(s)) => s.state == PartitionState::Acquired,
            _ => false,
        };
        acquired
    }

    /// Releases the items' locks and allocates again (kazoo's `release_set`): what a member
    /// does once it stopped working on its items after [`Release`](PartitionState::Release)
    /// (or at any time, to give them up). Returns once the locks are released. Nothing
    /// happens in [`Failure`](PartitionState::Failure).
    ///
    /// # Cancel safety
    /// The release is asked for on the first poll and happens even if the call is cancelled.
    pub async fn release_set(&self) {
        let (done, released) = oneshot::channel();
        if self.commands.send(Command::ReleaseSet(done)).is_ok() {
            let _ = released.await;
        }
    }

    /// Releases the items' locks and leaves the party (kazoo's `finish`): the state becomes
    /// [`Failure`](PartitionState::Failure).
    ///
    /// # Cancel safety
    /// The finish is asked for on the first poll and happens even if the call is cancelled
    /// (dropping the partitioner does the same).
    pub async fn finish(&self) {
        let (done, finished) = oneshot::channel();
        if self.commands.send(Command::Finish(done)).is_ok() {
            let _ = finished.await;
        }
    }
}

/// The partitioner's task: the party member, the locks held, and the state.
struct Engine {
    framework: Framework,
    party: String,
    locks: String,
    items: Vec<String>,
    identifier: String,
    time_boundary: Duration,
    max_reaction_time: Duration,
    partition_func: PartitionFunc,
    status: watch::Sender<Status>,
    member: Option<CreatedNode>,
    holds: Vec<KazooHold>,
    /// The session the member joined on.
    epoch: u64,
}

/// A party change, still to happen or happened.
type PartyChange = BoxFuture<'static, ()>;

/// What interrupted a phase.
enum Interrupt {
    Command(Command),
    /// The connection changed: true when the session is gone.
    Connection(bool),
    Closed,
}

impl Engine {
    fn set(&self, state: PartitionState, partition: Option<Vec<String>>) {
        self.status.send_modify(|s| {
            s.state = state;
            s.state_id += 1;
            if let Some(p) = partition {
                s.partition = Arc::new(p);
            }
        });
    }

    async fn run(mut self, mut commands: mpsc::UnboundedReceiver<Command>, mut connection: ConnectionStateStream) {
        let mut party_change: Option<PartyChange> = None;
        let mut done: Vec<oneshot::Sender<()>> = Vec::new();
        let mut failure: Option<Error> = None;
        loop {
            let state = self.status.borrow().state;
            let interrupt = match state {
                PartitionState::Allocating => {
                    let allocation = self.allocate();
                    tokio::select! {
                        result = allocation => match result {
                            Ok(Some((partition, holds, change))) => {
                                self.holds = holds;
                                party_change = Some(change);
                                self.set(PartitionState::Acquired, Some(partition));
                                continue;
                            }
                            // The party changed while the locks were being taken: again.
                            Ok(None) => continue,
                            Err(e) => {
                                failure = Some(e);
                                Interrupt::Closed
                            }
                        },
                        command = commands.recv() => command.map_or(Interrupt::Closed, Interrupt::Command),
                        event = connection.next() => match self.connection_interrupt(event) {
                            Some(interrupt) => interrupt,
                            None => continue,
                        },
                    }
                }
                PartitionState::Acquired | PartitionState::Release => {
                    let change = async {
                        match party_change.as_mut() {
                            Some(change) if state == PartitionState::Acquired => change.await,
                            _ => std::future::pending().await,
                        }
                    };
                    tokio::select! {
                        () = change => {
                            party_change = None;
                            self.set(PartitionState::Release, None);
                            continue;
                        }
                        command = commands.recv() => command.map_or(Interrupt::Closed, Interrupt::Command),
                        event = connection.next() => match self.connection_interrupt(event) {
                            Some(interrupt) => interrupt,
                            None => continue,
                        },
                    }
                }
                PartitionState::Failure => break,
            };
            match interrupt {
                Interrupt::Command(Command::ReleaseSet(reply)) => {
                    self.holds.clear();
                    party_change = None;
                    self.set(PartitionState::Allocating, Some(Vec::new()));
                    let _ = reply.send(());
                }
                Interrupt::Command(Command::Finish(reply)) => {
                    done.push(reply);
                    break;
                }
                Interrupt::Connection(false) => {
                    if state != PartitionState::Release {
                        self.set(PartitionState::Release, None);
                    }
                }
                Interrupt::Connection(true) | Interrupt::Closed => break,
            }
        }
        // Failure: release everything and leave the party (the deletes are sent now).
        self.holds.clear();
        drop(self.member.take());
        if let Some(e) = &failure {
            tracing::warn!(path = %self.party, error = %e, "set partitioner failed");
        }
        let error = failure.map(Arc::new);
        self.status.send_modify(|s| {
            s.state = PartitionState::Failure;
            s.state_id += 1;
            s.partition = Arc::default();
            s.error = error;
        });
        for reply in done {
            let _ = reply.send(());
        }
        // Answer commands that arrive later at once.
        while let Some(command) = commands.recv().await {
            match command {
                Command::ReleaseSet(reply) | Command::Finish(reply) => drop(reply.send(())),
            }
        }
    }

    /// What a connection transition means for the engine; `None` for one of a session before
    /// the member's (the stream is taken before the member's create, which may have gone on
    /// to a new session).
    fn connection_interrupt(&self, event: Option<crate::framework::StateSnapshot>) -> Option<Interrupt> {
        match event {
            None => Some(Interrupt::Closed),
            Some(s) if s.epoch < self.epoch => None,
            Some(s) => Some(Interrupt::Connection(s.session_over(self.epoch))),
        }
    }

    /// Waits for a stable party, divides the items, and takes their locks. `None` when the
    /// party changed while the locks were being taken (they are released).
    async fn allocate(&self) -> Result<Option<(Vec<String>, Vec<KazooHold>, PartyChange)>> {
        let (members, mut change) = self.stable_party().await?;
        let mut partition = (self.partition_func)(&self.identifier, &members, &self.items);
        // A member cannot take one item's lock twice (it would wait on itself).
        dedup_in_order(&mut partition);
        let mut holds = Vec::with_capacity(partition.len());
        for item in &partition {
            let lock = KazooLock::new(&self.framework, &path::join(&self.locks, item))?;
            loop {
                let deadline = deadline::after(self.max_reaction_time);
                if let Some(hold) = lock.acquire(&[], Some(deadline)).await? {
                    holds.push(hold);
                    break;
                }
                if (&mut change).now_or_never().is_some() {
                    return Ok(None);
                }
            }
            if (&mut change).now_or_never().is_some() {
                return Ok(None);
            }
        }
        Ok(Some((partition, holds, change)))
    }

    /// The party's members once its children have not changed for the time boundary
    /// (kazoo's `PatientChildrenWatch`), and the next change after that.
    async fn stable_party(&self) -> Result<(Vec<String>, PartyChange)> {
        loop {
            let (children, _, watch) = self.framework.get_children(&self.party).watch().await?;
            let mut change: PartyChange = async move {
                // A watch whose session ended counts as a change.
                let _ = watch.changed().await;
            }
            .boxed();
            tokio::select! {
                () = tokio::time::sleep(self.time_boundary) => {}
                () = &mut change => continue,
            }
            let members = children.iter().map(|c| party_member(c).to_owned()).collect();
            return Ok((members, change));
        }
    }
}
