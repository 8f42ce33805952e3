//! Protected creation (Curator's protected mode): a lock node is created under a fresh
//! `_c_<uuid>-` prefix, and after a connection error it is looked for by that prefix before
//! anything is created again, so a create whose reply was lost never leaves a second node.
//!
//! [`NodeDir`] is a directory of such nodes, checked once; [`NodeSpec`] is what one create
//! needs; the node's life once sent is `node.rs`.

use std::future::Future;

use futures::future::OptionFuture;

use zookeeper_client::{Acl, Acls, CreateMode, CreateSequence, Stat};

use super::node::{retry_request, CreatedNode, Failure, PendingCreate};
use super::{Framework, ReaperCmd, Session};
use crate::error::{is_zk_connection_error, is_zk_session_lost, Error, Result, ZkError};
use crate::framework::metrics::Op;
use crate::path;

/// A directory of protected nodes: where they are created, under which name marker and
/// with which data. A lock engine adds its ordering rule; the semaphore's lease directory is
/// one of these alone.
#[derive(Debug, Clone)]
pub(crate) struct NodeDir {
    framework: Framework,
    /// The path as the user gave it.
    path: String,
    /// Full server path of the directory.
    dir: String,
    marker: &'static str,
    data: Vec<u8>,
    /// The recipe whose nodes these are (`lock` unless told), for background errors.
    recipe: &'static str,
}

impl NodeDir {
    /// The directory `path` (a user path) of nodes named `_c_<uuid>-<marker><sequence>`.
    ///
    /// # Errors
    /// [`Error::InvalidPath`] for a bad path; [`Error::TooLarge`] when a node's create request
    /// would not fit the servers' limit; [`Error::InvalidArgument`] for an empty ACL.
    pub(crate) fn new(framework: &Framework, path: &str, marker: &'static str, data: Vec<u8>) -> Result<Self> {
        path::validate_recipe_path(path)?;
        let dir = framework.fix_path(path);
        // A node's name adds the protected prefix and the 10-digit sequence to the marker.
        let name_len = path::PROTECTED_PREFIX_LEN + marker.len() + 10;
        framework.check_create(&path::join(&dir, marker), name_len, &data)?;
        Ok(Self { framework: framework.clone(), path: path.to_owned(), dir, marker, data, recipe: "lock" })
    }

    /// Names `recipe` as the owner of these nodes in background errors.
    pub(crate) fn owned_by(mut self, recipe: &'static str) -> Self {
        self.recipe = recipe;
        self
    }

    pub(crate) fn framework(&self) -> &Framework {
        &self.framework
    }

    /// The path as the user gave it.
    pub(crate) fn path(&self) -> &str {
        &self.path
    }

    /// Full server path of the directory.
    pub(crate) fn dir(&self) -> &str {
        &self.dir
    }

    /// What this directory's nodes are created as.
    pub(crate) fn spec(&self) -> NodeSpec<'_> {
        NodeSpec {
            framework: &self.framework,
            dir: &self.dir,
            marker: self.marker,
            data: &self.data,
            recipe: self.recipe,
        }
    }

    /// Full paths of all children (namespace stripped), in the order `sort` puts them; empty
    /// when the directory does not exist.
    pub(crate) async fn participant_nodes(&self, sort: impl FnOnce(&mut Vec<String>)) -> Result<Vec<String>> {
        let listed = self.framework.with_read_retry(|s| {
            let dir = &self.dir;
            async move {
                s.sent(Op::GetChildren);
                s.client.list_children(dir).await
            }
        });
        let mut children = match listed.await {
            Err(Error::ZooKeeper(ZkError::NoNode)) => Vec::new(),
            other => other?,
        };
        sort(&mut children);
        Ok(children.iter().map(|c| self.framework.unfix_path(&path::join(&self.dir, c)).to_owned()).collect())
    }
}

/// Where and what to create: a directory's full path, the name marker after the protected
/// prefix (`lock-`, `lease-`), and the node's data.
#[derive(Debug, Clone, Copy)]
pub(crate) struct NodeSpec<'a> {
    pub(crate) framework: &'a Framework,
    pub(crate) dir: &'a str,
    pub(crate) marker: &'static str,
    pub(crate) data: &'a [u8],
    pub(crate) recipe: &'static str,
}

/// A fresh protected name to create a node under: `<dir>/_c_<uuid>-<marker>`, and its ACL.
pub(crate) struct ProtectedName {
    prefix: String,
    base: String,
    acl: Vec<Acl>,
}

/// Nothing sent behind a create (a waiter that decides from its session's mirror): pass the
/// function itself as the create's [`Behind`].
pub(crate) fn nothing_behind() -> std::future::Ready<Result<(), ZkError>> {
    std::future::ready(Ok(()))
}

/// A request sent right behind a create, in the same round trip (a listing of the
/// directory): called once for each send of the create.
pub(crate) trait Behind<T>: Fn() -> Self::Reply {
    type Reply: Future<Output = Result<T, ZkError>>;
}

impl<T, F, Fut> Behind<T> for F
where
    F: Fn() -> Fut,
    Fut: Future<Output = Result<T, ZkError>>,
{
    type Reply = Fut;
}

impl NodeSpec<'_> {
    /// A fresh protected name (a new uuid) in this directory, with the provider's ACL.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for an empty ACL.
    pub(crate) fn protected_name(&self) -> Result<ProtectedName> {
        let prefix = path::new_protected_prefix();
        let base = format!("{}/{}{}", self.dir, prefix, self.marker);
        let acl = self.framework.acl_for(&base)?;
        Ok(ProtectedName { prefix, base, acl })
    }

    fn pending(&self, session: &Session, name: &ProtectedName) -> PendingCreate {
        PendingCreate::new(self.framework, session.epoch, self.dir, name.prefix.clone(), self.marker, self.recipe)
    }

    /// Sends one create of `name` now, with no listing and no retry, and returns its cleanup
    /// (armed from this moment) and its reply.
    pub(crate) fn send_create<'a>(
        &self,
        session: &'a Session,
        name: &'a ProtectedName,
    ) -> (PendingCreate, impl Future<Output = Result<(Stat, CreateSequence), ZkError>> + Send + 'a) {
        let options = CreateMode::EphemeralSequential.with_acls(Acls::new(&name.acl));
        session.sent(Op::Create);
        let reply = session.client.create(&name.base, self.data, &options);
        (self.pending(session, name), reply)
    }

    /// Creates a protected ephemeral-sequential node on `session`, with `list` (a listing of
    /// the directory) sent right behind the create so that both cost one round trip. Missing
    /// parents are created as containers: when the create is refused for want of its
    /// directory, the directory's create goes again with it and the listing, all three in one
    /// round trip (a lock used once per entity pays one round trip for its new directory, not
    /// two). After a connection error the node is recovered by its prefix before the create
    /// is sent again.
    ///
    /// With `sequence`, the node is plain ephemeral, named `<prefix><marker><sequence>`: a
    /// sequence chosen by the caller instead of one the server appends (the read-write
    /// lock's downgrade node, which takes its write node's sequence so that it sorts at the
    /// write node's place in the queue, as in Curator 5.5+).
    ///
    /// Returns the node and the listing when it succeeded on the first send. Cancel-safe: from
    /// the moment the create is sent, a dropped call leaves no node behind.
    pub(crate) async fn create<T>(
        &self,
        session: &Session,
        sequence: Option<&str>,
        list: impl Behind<T>,
    ) -> Result<(CreatedNode, Option<T>), Failure> {
        let name = self.protected_name()?;
        let (base, acl, mode) = match sequence {
            // The whole name is ours: the provider is asked for it, as Curator asks for the
            // path it creates.
            Some(sequence) => {
                let base = format!("{}{sequence}", name.base);
                let acl = self.framework.acl_for(&base)?;
                (base, acl, CreateMode::Ephemeral)
            }
            None => (name.base.clone(), name.acl.clone(), CreateMode::EphemeralSequential),
        };
        let options = mode.with_acls(Acls::new(&acl));
        let pending = self.pending(session, &name);
        let mut retry = self.framework.retry_loop();
        let mut parents = Parents::Assumed;
        loop {
            let dir_create = match parents {
                Parents::SentAhead | Parents::AncestorsMade => {
                    Some(self.framework.send_container_create(session, self.dir)?)
                }
                Parents::Assumed | Parents::Made => None,
            };
            session.sent(Op::Create);
            let (dir_made, created, listed) = futures::join!(
                OptionFuture::from(dir_create),
                session.client.create(&base, self.data, &options),
                list()
            );
            let error = match created {
                Ok((stat, assigned)) => {
                    session.learn_id(stat.ephemeral_owner);
                    self.framework.note_session_id(session);
                    let node = match sequence {
                        Some(sequence) => pending.with_sequence(sequence, stat.czxid),
                        None => pending.created(assigned, stat.czxid),
                    };
                    return Ok((node, listed.ok()));
                }
                // No directory: its create goes again with ours, in one round trip.
                Err(ZkError::NoNode) if parents == Parents::Assumed => {
                    parents = Parents::SentAhead;
                    continue;
                }
                Err(ZkError::NoNode) => match dir_made {
                    // A level above the directory is missing too: those levels, then the
                    // directory's create with ours again.
                    Some(Err(ZkError::NoNode)) if parents == Parents::SentAhead => {
                        parents = Parents::AncestorsMade;
                        self.framework.ensure_containers(self.dir, false).await?;
                        continue;
                    }
                    Some(Err(e)) if !is_zk_connection_error(&e) => return Err(Error::from(e).into()),
                    // The directory went again (an empty container is reaped at any time):
                    // start a fresh attempt, as Curator does on NoNode, under the retry policy.
                    _ => return Err(Failure::NodeMissing),
                },
                Err(e) if is_zk_session_lost(&e) => return Err(Failure::NodeMissing),
                Err(e) if retry.allows_zk(&e) => e,
                Err(e) => return Err(e.into()),
            };
            // The create may have happened: look for our prefix before creating again.
            if !retry.backoff().await {
                return Err(error.into());
            }
            if let Some((name, czxid)) = pending.recover(session, false).await? {
                return Ok((pending.named(name, czxid), None));
            }
            // A server that throttles or drops requests refuses the ones queued behind another:
            // sent together again, the node's create would meet the same fate behind the
            // directory's each time. The directory is made on its own first, and the node's
            // create goes alone (with its listing) from then on.
            if matches!(parents, Parents::SentAhead | Parents::AncestorsMade) {
                if !matches!(dir_made, Some(Ok(()))) {
                    self.framework.ensure_containers(self.dir, true).await?;
                }
                parents = Parents::Made;
            }
        }
    }

    /// [`create`](Self::create) with a sequence chosen by the caller; `after` is sent right
    /// behind the create.
    pub(crate) async fn create_with_sequence<T>(
        &self,
        session: &Session,
        sequence: &str,
        after: impl Behind<T>,
    ) -> Result<(CreatedNode, Option<T>), Failure> {
        self.create(session, Some(sequence), after).await
    }
}

/// How far [`NodeSpec::create`] has gone about a missing directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Parents {
    /// The directory is assumed to exist (it does, but for a lock's first use).
    Assumed,
    /// The node's create was refused for want of its directory: the directory's create is
    /// sent right ahead of it.
    SentAhead,
    /// A level above the directory was missing too: those levels were made, and the
    /// directory's create is sent ahead of the node's once more.
    AncestorsMade,
    /// The node's create sent with the directory's failed for another reason (throttled, a
    /// connection lost): the directory was made on its own, the node's create goes alone.
    Made,
}

impl PendingCreate {
    /// Looks for the node after a create whose reply was lost. A `sync` goes first, so that a
    /// create this session sent through another member has landed (or been refused) before
    /// the listing. Adopts the first child with our prefix that our session owns (with
    /// `any_owner`, for a persistent node, which has no owner: the first child with the
    /// prefix); deletes any others with the prefix (a create that was sent twice).
    pub(crate) async fn recover(&self, session: &Session, any_owner: bool) -> Result<Option<(String, i64)>, Failure> {
        let dir = self.dir();
        let listing = || async {
            session.sent(Op::Sync);
            session.sent(Op::GetChildren);
            let (synced, children) = futures::join!(session.client.sync(dir), session.client.list_children(dir));
            synced?;
            children
        };
        let framework = self.framework();
        let mut ours: Vec<String> = retry_request(framework, listing).await?;
        ours.retain(|c| c.starts_with(self.prefix()));
        ours.sort_by_key(|name| self.sequence_of(name));
        let mut adopted = None;
        for name in ours {
            let full = path::join(dir, &name);
            if adopted.is_none() {
                let stat = retry_request(framework, || {
                    session.sent(Op::Exists);
                    session.client.check_stat(&full)
                })
                .await?;
                if let Some(stat) = stat.filter(|s| any_owner || session.owns(s.ephemeral_owner)) {
                    framework.note_session_id(session);
                    tracing::debug!(node = %full, "adopted our node after a lost create reply");
                    adopted = Some((name, stat.czxid));
                    continue;
                }
            }
            // Another create under our prefix (or a stale session's): never a second node of ours.
            framework.reap(ReaperCmd::Delete { path: full, epoch: session.epoch, recipe: self.cleanup_recipe() });
        }
        Ok(adopted)
    }
}
