//! [`GroupMember`]: Curator's group membership. Each member keeps one ephemeral node,
//! `<membership path>/<member id>`, with its payload as data (a [`PersistentNode`] without
//! protection), and reads the group from a [`CuratorCache`] of the membership path.

use std::collections::BTreeMap;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use futures::Stream;
use zookeeper_client::CreateMode;

use super::persistent::PersistentNode;
use crate::cache::{CacheMode, CuratorCache, PathChildrenEvent, PathChildrenStream};
use crate::error::{Error, Result};
use crate::framework::Framework;
use crate::path;

/// A change of the group's membership, from [`GroupMember::events`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum MembershipEvent {
    /// A member joined (or was found by the initial load): its id and payload.
    Joined(String, Vec<u8>),
    /// A member's payload changed.
    Changed(String, Vec<u8>),
    /// A member left (its node is gone).
    Left(String),
    /// The initial load is done: the members told so far are the group.
    Initialized,
    /// The stream fell further behind than the cache's event capacity and missed events:
    /// these are the members now (id and payload); replace what was built from earlier events.
    Lagged(std::collections::BTreeMap<String, Vec<u8>>),
}

/// Membership events of one group (a `Stream` of [`MembershipEvent`]).
#[must_use = "a stream does nothing unless polled"]
pub struct MembershipEvents {
    inner: PathChildrenStream<Vec<u8>>,
}

impl std::fmt::Debug for MembershipEvents {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MembershipEvents").finish_non_exhaustive()
    }
}

impl Stream for MembershipEvents {
    type Item = MembershipEvent;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<MembershipEvent>> {
        let Some(event) = futures::ready!(Pin::new(&mut self.inner).poll_next(cx)) else {
            return Poll::Ready(None);
        };
        let data = |node: &crate::cache::ChildData<Vec<u8>>| node.data().cloned().unwrap_or_default();
        Poll::Ready(Some(match event {
            PathChildrenEvent::ChildAdded(node) => MembershipEvent::Joined(node.name().to_owned(), data(&node)),
            PathChildrenEvent::ChildUpdated(node) => MembershipEvent::Changed(node.name().to_owned(), data(&node)),
            PathChildrenEvent::ChildRemoved(node) => MembershipEvent::Left(node.name().to_owned()),
            PathChildrenEvent::Lagged { children, .. } => {
                MembershipEvent::Lagged(children.iter().map(|node| (node.name().to_owned(), data(node))).collect())
            }
            _ => MembershipEvent::Initialized,
        }))
    }
}

/// One member of a group (Curator's `GroupMember`): this process's node
/// `<membership path>/<id>` is kept in existence (ephemeral, created again after a new
/// session), and the group's members are read from a cache of the membership path.
///
/// Two members with the same id share one node, as in Curator (the one whose session made it
/// keeps it; the other waits until it goes).
///
/// ```no_run
/// # async fn example(fw: zk_recipes::Framework) -> zk_recipes::Result<()> {
/// use zk_recipes::GroupMember;
///
/// let member = GroupMember::new(&fw, "/groups/workers", "worker-7", b"10.0.0.7".to_vec())?;
/// member.start().await?;
/// for (id, payload) in member.current_members() {
///     println!("{id}: {}", String::from_utf8_lossy(&payload));
/// }
/// member.close().await?;
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct GroupMember {
    id: String,
    membership_path: String,
    node: PersistentNode,
    cache: CuratorCache,
    payload: std::sync::Mutex<Vec<u8>>,
}

impl GroupMember {
    /// A member `id` of the group at `membership_path` with `payload` as its node's data.
    /// Its node is created at once (in the background); [`start`](Self::start) starts the cache.
    ///
    /// # Errors
    /// [`Error::InvalidPath`] for an invalid membership path, [`Error::InvalidArgument`] for an
    /// empty id or one that is not a node name (`/`, `.`, `..`, control characters), or a call
    /// outside a Tokio runtime (the node is kept by a task); [`Error::TooLarge`] for a payload
    /// over the request size. Nothing is created then.
    pub fn new(framework: &Framework, membership_path: &str, id: &str, payload: Vec<u8>) -> Result<GroupMember> {
        path::validate_recipe_path(membership_path)?;
        validate_name("id", id)?;
        let cache = CuratorCache::builder(framework, membership_path).mode(CacheMode::Children).build()?;
        let node = PersistentNode::builder(framework, &path::join(membership_path, id))
            .mode(CreateMode::Ephemeral)
            .protected(false)
            .data(payload.clone())
            .start()?;
        Ok(GroupMember {
            id: id.to_owned(),
            membership_path: membership_path.to_owned(),
            node,
            cache,
            payload: std::sync::Mutex::new(payload),
        })
    }

    /// Starts the membership cache and waits for its first load.
    ///
    /// # Errors
    /// The cache's errors ([`CuratorCache::start`]).
    ///
    /// # Cancel safety
    /// Cancel-safe: a cancelled start leaves the cache unstarted (start it again).
    pub async fn start(&self) -> Result<()> {
        self.cache.start().await?;
        self.cache.initialized().await
    }

    /// This member's id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The membership path.
    pub fn membership_path(&self) -> &str {
        &self.membership_path
    }

    /// This member's node (its registration state: [`PersistentNode::registered`]).
    pub fn node(&self) -> &PersistentNode {
        &self.node
    }

    /// Waits until this member's node exists the first time.
    ///
    /// # Errors
    /// As [`PersistentNode::wait_for_initial_create`].
    ///
    /// # Cancel safety
    /// Cancel-safe: it only waits.
    pub async fn wait_for_initial_create(&self, timeout: Duration) -> Result<bool> {
        self.node.wait_for_initial_create(timeout).await
    }

    /// The members (id → payload) as the cache holds them, with this member always included
    /// with its own payload (Curator's `getCurrentMembers`).
    pub fn current_members(&self) -> BTreeMap<String, Vec<u8>> {
        let mut members: BTreeMap<String, Vec<u8>> = self
            .cache
            .children(&self.membership_path)
            .into_iter()
            .map(|node| (node.name().to_owned(), node.data().cloned().unwrap_or_default()))
            .collect();
        members.insert(self.id.clone(), self.payload.lock().unwrap_or_else(|e| e.into_inner()).clone());
        members
    }

    /// Membership changes: the members held now first (as `Joined`), then `Initialized`
    /// once the first load is done, then every change.
    pub fn events(&self) -> MembershipEvents {
        MembershipEvents {
            inner: self.cache.path_children_events(&self.membership_path).expect("the membership path was validated"),
        }
    }

    /// Sets this member's payload (Curator's `setThisData`).
    ///
    /// # Errors
    /// As [`PersistentNode::set_data`]: a payload refused with [`Error::TooLarge`] is not
    /// taken (the member keeps the payload of before).
    ///
    /// # Cancel safety
    /// As [`PersistentNode::set_data`].
    pub async fn set_this_data(&self, payload: Vec<u8>) -> Result<()> {
        self.node.check_data(&payload)?;
        *self.payload.lock().unwrap_or_else(|e| e.into_inner()) = payload.clone();
        self.node.set_data(payload).await
    }

    /// Leaves the group: deletes this member's node (guaranteed) and closes the cache.
    ///
    /// # Errors
    /// As [`PersistentNode::close`].
    ///
    /// # Cancel safety
    /// As [`PersistentNode::close`]; the cache may stay open when cancelled.
    pub async fn close(&self) -> Result<()> {
        let closed = self.node.close().await;
        self.cache.close().await;
        closed
    }
}

/// Checks one node name (an id, a service name): not empty, no `/`, a valid path segment.
pub(crate) fn validate_name(what: &'static str, name: &str) -> Result<()> {
    if name.is_empty() {
        return Err(Error::invalid_argument(what, "must not be empty"));
    }
    if name.contains('/') {
        return Err(Error::invalid_argument(what, format!("{name:?} contains '/'")));
    }
    if path::validate(&format!("/{name}")).is_err() {
        return Err(Error::invalid_argument(what, format!("{name:?} is not a node name")));
    }
    Ok(())
}
