//! Namespaced, retried ZooKeeper operations on the framework (the slice of Curator's
//! `CuratorFramework` operations that recipes and users need).

use std::future::Future;

use zookeeper_client::{Acl, Acls, Client, CreateMode};

use super::{Framework, Session};
use crate::error::{is_zk_session_lost, Error, Result, ZkError};
use crate::framework::metrics::Op;
use crate::path;
use crate::retry::RetryLoop;

impl Framework {
    /// The full server path of a user path: the namespace prepended (`/locks/a` → `/app/locks/a`).
    ///
    /// # Errors
    /// [`Error::InvalidPath`] when `path` is not a valid absolute path; [`Error::TooLarge`]
    /// when the full path alone does not fit in a request under the
    /// [`max_request_bytes`](crate::FrameworkBuilder::max_request_bytes) (a server closes the
    /// connection of a request over its `jute.maxbuffer`).
    pub fn full_path(&self, path: &str) -> Result<String> {
        path::validate(path)?;
        let full = self.fix_path(path);
        // A request's own fields around the path: xid, type, path length and a few more.
        let limit = self.config().max_request_bytes.saturating_sub(24);
        if full.len() > limit {
            return Err(Error::TooLarge { name: "path", size: full.len(), limit });
        }
        Ok(full)
    }

    /// `full_path` for a path already validated.
    pub(crate) fn fix_path(&self, path: &str) -> String {
        match self.namespace() {
            None => path.to_owned(),
            Some(ns) if path == "/" => ns.to_owned(),
            Some(ns) => format!("{ns}{path}"),
        }
    }

    /// The user path of a full server path (the namespace stripped).
    pub fn unfix_path<'a>(&self, full_path: &'a str) -> &'a str {
        match self.namespace() {
            Some(ns) => match full_path.strip_prefix(ns) {
                Some("") => "/",
                Some(rest) if rest.starts_with('/') => rest,
                _ => full_path,
            },
            None => full_path,
        }
    }

    /// Runs `op` on the current session, retrying the failures the retry policy allows
    /// ([`RetryPolicy::allow_retry`](crate::retry::RetryPolicy::allow_retry); by default
    /// connection loss, session moved or expired, throttling) under the retry policy. A retry after `Lost` runs
    /// on the new session, unless the session failure policy says to fail with
    /// `SessionExpired` instead.
    ///
    /// A session-lost error (`SessionExpired`, `ClientClosed`) from a client the session has
    /// moved away from counts as a connection loss: the session lives on through its new
    /// client (see [`session_gone`](Self::session_gone)), where the retry goes.
    pub(crate) async fn with_retry<T, F, Fut>(&self, mut op: F) -> Result<T>
    where
        F: FnMut(Session) -> Fut,
        Fut: Future<Output = Result<T, ZkError>>,
    {
        let policy = self.inner.config.session_failure_policy;
        let mut first_epoch = None;
        let on_session = || {
            let session = self.session().and_then(|s| policy.keep_session(&mut first_epoch, s));
            let epoch = session.as_ref().map_or(0, |s| s.epoch);
            let reply = session.map(&mut op);
            async move {
                // A server may hold the reply back (see `stall`).
                let replied = super::stall::framework_unstalled(self, reply?).await;
                Ok(replied.map_err(|e| match e {
                    e if is_zk_session_lost(&e) && !self.session_gone(epoch) => ZkError::ConnectionLoss,
                    e => e,
                })?)
            }
        };
        let retry_policy = &*self.config().retry_policy;
        let result =
            self.retry_loop().run(on_session, |e: &Error| retry_policy.allow_retry(e) && policy.allows_retry(e)).await;
        result.map_err(|e| self.closed_or(e))
    }

    /// `error`, or [`Error::Closed`] when it is how a closing framework's session ended a
    /// request in flight: `close()` ends the session's client, which answers what it still
    /// had with a connection or session error, or an error of its own.
    pub(crate) fn closed_or(&self, error: Error) -> Error {
        let ended_by_close = matches!(
            &error,
            Error::ZooKeeper(
                ZkError::ConnectionLoss
                    | ZkError::ClientClosed
                    | ZkError::SessionExpired
                    | ZkError::UnexpectedError(_)
                    | ZkError::Custom(_)
            )
        );
        if ended_by_close && self.is_closed() {
            Error::Closed
        } else {
            error
        }
    }

    /// [`with_retry`](Self::with_retry) for an operation that changes nothing (a read): a try
    /// whose session moves to another client is given up at the move, as a connection loss,
    /// and sent again through the new client. (The client the session left answers only once
    /// it gives the session up, 7/5 of the session timeout after it lost its connection; a
    /// write is left to that answer, since that client may still reconnect and send it.)
    pub(crate) async fn with_read_retry<T, F, Fut>(&self, mut op: F) -> Result<T>
    where
        F: FnMut(Session) -> Fut,
        Fut: Future<Output = Result<T, ZkError>>,
    {
        self.with_retry(|session: Session| {
            let client = session.client_key();
            let reply = op(session);
            async move {
                tokio::select! {
                    biased;
                    replied = reply => replied,
                    () = self.client_left(&client) => Err(ZkError::ConnectionLoss),
                }
            }
        })
        .await
    }

    /// A retry loop under the framework's policy that gives up once the framework closes.
    pub(crate) fn retry_loop(&self) -> RetryLoop<'_> {
        RetryLoop::new(&*self.config().retry_policy).stop_when(self)
    }

    /// The ACL the provider gives a node at `full_path`.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when the provider returns an empty list: the node must not
    /// be created with an ACL the user did not choose.
    pub(crate) fn acl_for(&self, full_path: &str) -> Result<Vec<Acl>> {
        let acl = self.config().acl_provider.acl_for_path(full_path);
        if acl.is_empty() {
            return Err(Error::invalid_argument(
                "acl_provider",
                format!("returned an empty ACL for {full_path}; every node needs at least one entry"),
            ));
        }
        Ok(acl)
    }

    /// Checks that a create of `data` at `full_path` (plus `extra_path` bytes the server or a
    /// recipe appends: a protected prefix, a sequence number) fits the servers' request limit.
    ///
    /// # Errors
    /// [`Error::TooLarge`] naming the ACL, the path or the data; [`Error::InvalidArgument`]
    /// for an empty ACL.
    pub(crate) fn check_create(&self, full_path: &str, extra_path: usize, data: &[u8]) -> Result<()> {
        let acl = self.acl_for(full_path)?;
        self.check_create_with(full_path, extra_path, data, &acl)
    }

    /// [`check_create`](Self::check_create) for a create with `acl`.
    ///
    /// # Errors
    /// [`Error::TooLarge`] naming the ACL, the path or the data.
    pub(crate) fn check_create_with(&self, full_path: &str, extra_path: usize, data: &[u8], acl: &[Acl]) -> Result<()> {
        // xid, type, path length, data length, ACL count, flags: six 4-byte fields.
        let framing = 24 + self.check_acl_size(acl)?;
        let limit = self.config().max_request_bytes.saturating_sub(framing);
        let path_len = full_path.len() + extra_path;
        if path_len > limit {
            return Err(Error::TooLarge { name: "path", size: path_len, limit });
        }
        let limit = limit - path_len;
        if data.len() > limit {
            return Err(Error::TooLarge { name: "data", size: data.len(), limit });
        }
        Ok(())
    }

    /// The bytes `acl` takes in a request (permissions and two string lengths per entry, then
    /// its strings).
    ///
    /// # Errors
    /// [`Error::TooLarge`] naming the ACL when it alone leaves no room in a request (a server
    /// closes the connection of a request over its buffer).
    pub(crate) fn check_acl_size(&self, acl: &[Acl]) -> Result<usize> {
        let size: usize = acl.iter().map(|a| 12 + a.auth_id().scheme().len() + a.auth_id().id().len()).sum();
        // The rest of the request: xid, type, a path and its length, a version.
        let limit = self.config().max_request_bytes.saturating_sub(64);
        if size > limit {
            return Err(Error::TooLarge { name: "acl", size, limit });
        }
        Ok(size)
    }

    /// Creates every missing ancestor of `full_path` and, with `include_self`, the node itself,
    /// as empty container nodes with the provider's ACL (Curator's
    /// `creatingParentContainersIfNeeded`). Existing nodes are left alone. Where only the
    /// deepest level is missing (a new lock directory under an existing root, the usual case)
    /// this is one create and one round trip; see [`create_levels`] for the rest.
    pub(crate) async fn ensure_containers(&self, full_path: &str, include_self: bool) -> Result<()> {
        self.ensure_levels(full_path, include_self, CreateMode::Container).await
    }

    /// Sends the create of the container `full_path` now (its parent must exist) and returns
    /// its reply, an existing node counted as made: for a caller that sends its own create
    /// into the directory right behind it, so that both cost one round trip (a session's
    /// requests are applied in the order sent). `NoNode` means a level above is missing too:
    /// [`ensure_containers`](Self::ensure_containers) makes them all.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for an empty ACL from the provider.
    pub(crate) fn send_container_create<'a>(
        &self,
        session: &'a Session,
        full_path: &'a str,
    ) -> Result<impl Future<Output = Result<(), ZkError>> + Send + 'a> {
        let acl = self.acl_for(full_path)?;
        session.sent(Op::Create);
        let reply = session.client.create(full_path, &[], &CreateMode::Container.with_acls(Acls::new(&acl)));
        Ok(async move {
            match reply.await {
                Ok(_) | Err(ZkError::NodeExists) => Ok(()),
                Err(e) => Err(e),
            }
        })
    }

    /// [`ensure_containers`](Self::ensure_containers) with persistent nodes instead (Curator's
    /// `creatingParentsIfNeeded`).
    pub(crate) async fn ensure_persistent(&self, full_path: &str, include_self: bool) -> Result<()> {
        self.ensure_levels(full_path, include_self, CreateMode::Persistent).await
    }

    async fn ensure_levels(&self, full_path: &str, include_self: bool, mode: CreateMode) -> Result<()> {
        let mut levels: Vec<&str> = Vec::new();
        let mut at = if include_self { Some(full_path) } else { path::parent(full_path) };
        while let Some(level) = at.filter(|p| *p != "/") {
            levels.push(level);
            at = path::parent(level);
        }
        levels.reverse();
        let acls: Vec<_> = levels.iter().map(|level| self.acl_for(level)).collect::<Result<_>>()?;
        let levels: Vec<_> = levels.into_iter().zip(&acls).collect();
        let no_root = std::sync::atomic::AtomicBool::new(false);
        let on_session = || {
            let (session, levels, no_root) = (self.session(), &levels, &no_root);
            async move {
                let session = session?;
                match create_levels(&session, mode, levels).await {
                    Err(Missing::Root) => {
                        no_root.store(true, std::sync::atomic::Ordering::Relaxed);
                        Err(ZkError::NoNode.into())
                    }
                    Err(Missing::Zk(e)) => Err(e.into()),
                    Ok(()) => Ok(()),
                }
            }
        };
        // A level that exists when its create is sent can be gone by the time the next
        // level's create arrives (the server removes an empty container at any moment, and
        // its delete can land between two of our creates): `NoNode` then sends every level
        // again, under the retry policy, like a connection loss. Not when the root itself is
        // missing (a chroot of the connect string that does not exist): that stays so.
        let retry_policy = &*self.config().retry_policy;
        let parent_vanished = |e: &Error| {
            (matches!(e, Error::ZooKeeper(ZkError::NoNode)) && !no_root.load(std::sync::atomic::Ordering::Relaxed))
                || retry_policy.allow_retry(e)
        };
        self.retry_loop().run(on_session, parent_vanished).await
    }

    /// Creates `path` and its missing ancestors as container nodes (no-op when it exists).
    ///
    /// # Errors
    /// [`Error::InvalidPath`] or the server's refusal.
    ///
    /// # Cancel safety
    /// Cancel-safe: creating containers is idempotent.
    pub async fn ensure_path(&self, path: &str) -> Result<()> {
        let full = self.full_path(path)?;
        self.ensure_containers(&full, true).await
    }
}

/// Makes the missing `levels` (top-down, each with its ACL) as nodes of `mode` (container or
/// persistent); levels that exist already are fine.
///
/// The deepest level's create goes first, alone: where only it was missing, that one create
/// makes it; where it exists, that one create is refused. Only when a level above it is
/// missing too (`NoNode`) are the levels above read, back to back, and the missing ones
/// created, back to back, from the top. A create refused with `NodeExists` is a write to the
/// ensemble all the same (the leader logs and replicates an error transaction for it), where a
/// read is answered by the server at hand: sending every level's create each time cost a lock
/// on a new directory five refused writes at a depth of six.
///
/// A top level refused with `NoNode` has no parent but the root: the root is read then (one
/// more request, on that failure only), and a missing root (a connect string's chroot that
/// does not exist) is [`Missing::Root`], which no create can mend.
async fn create_levels(session: &Session, mode: CreateMode, levels: &[(&str, &Vec<Acl>)]) -> Result<(), Missing> {
    let Some((deepest, above)) = levels.split_last() else { return Ok(()) };
    session.sent(Op::Create);
    match create_all(&session.client, mode, std::slice::from_ref(deepest)).await {
        Err(ZkError::NoNode) if above.is_empty() => return Err(root_checked(session).await),
        Err(ZkError::NoNode) => {}
        done => return Ok(done?),
    }
    above.iter().for_each(|_| session.sent(Op::Exists));
    let reads = above.iter().map(|(level, _)| session.client.check_stat(level));
    let mut missing = Vec::with_capacity(levels.len());
    for (level, stat) in above.iter().zip(futures::future::join_all(reads).await) {
        if stat?.is_none() {
            missing.push(*level);
        }
    }
    let top_missing = missing.first().is_some_and(|(level, _)| *level == levels[0].0);
    missing.push(*deepest);
    missing.iter().for_each(|_| session.sent(Op::Create));
    match create_all(&session.client, mode, &missing).await {
        Err(ZkError::NoNode) if top_missing => Err(root_checked(session).await),
        done => Ok(done?),
    }
}

/// What a top level's `NoNode` means: [`Missing::Root`] when the client's root does not
/// exist, else the `NoNode` (a level made meanwhile went again).
async fn root_checked(session: &Session) -> Missing {
    session.sent(Op::Exists);
    match session.client.check_stat("/").await {
        Ok(None) => Missing::Root,
        Ok(Some(_)) => Missing::Zk(ZkError::NoNode),
        Err(e) => Missing::Zk(e),
    }
}

/// Why [`create_levels`] made nothing.
enum Missing {
    /// The client's root: its chroot does not exist.
    Root,
    /// The server's refusal.
    Zk(ZkError),
}

impl From<ZkError> for Missing {
    fn from(e: ZkError) -> Missing {
        Missing::Zk(e)
    }
}

/// Sends one create of `mode` per level (with its ACL), back to back, and waits for all of
/// them; levels that exist already are fine.
async fn create_all(client: &Client, mode: CreateMode, levels: &[(&str, &Vec<Acl>)]) -> Result<(), ZkError> {
    let options: Vec<_> = levels.iter().map(|(_, acl)| mode.with_acls(Acls::new(acl))).collect();
    let creates: Vec<_> =
        levels.iter().zip(&options).map(|((level, _), opts)| client.create(level, &[], opts)).collect();
    for result in futures::future::join_all(creates).await {
        match result {
            Ok(_) | Err(ZkError::NodeExists) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}
