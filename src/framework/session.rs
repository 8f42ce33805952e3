//! Opening a ZooKeeper session from the configuration.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

use zookeeper_client::{Client, SessionState};

use super::listings::Listings;
use super::Config;
use crate::error::{Error, Result};

/// One ZooKeeper session of the framework: its client and which session it is (the epoch).
#[derive(Clone, Debug)]
pub(crate) struct Session {
    pub(crate) client: Client,
    pub(crate) epoch: u64,
    /// The server's id for the session, 0 while unknown; shared by every clone.
    id: Arc<AtomicI64>,
    /// Listings shared by concurrent callers (see [`Listings`]).
    pub(crate) listings: Arc<Listings>,
}

impl Session {
    pub(crate) fn new(client: Client, epoch: u64) -> Self {
        let read_only = client.state() == SessionState::ConnectedReadOnly;
        let id = if read_only { 0 } else { client.session_id().0 };
        Self { client, epoch, id: Arc::new(AtomicI64::new(id)), listings: Arc::default() }
    }

    /// The session id as the server knows it (the `ephemeralOwner` of our nodes), or 0 while
    /// unknown.
    ///
    /// A session that starts on a read-only server is replaced by a new one, with a new id,
    /// at its first read-write connection; zookeeper-client keeps reporting the read-only id.
    /// The framework then forgets the id ([`forget_id`](Self::forget_id)) and learns the real
    /// one from the first node it creates ([`learn_id`](Self::learn_id)).
    pub(crate) fn id(&self) -> i64 {
        self.id.load(Ordering::SeqCst)
    }

    /// Records the owner of an ephemeral node this session created.
    pub(crate) fn learn_id(&self, owner: i64) {
        if owner != 0 {
            self.id.store(owner, Ordering::SeqCst);
        }
    }

    /// The client moved from a read-only session to a read-write one: its id is not known.
    pub(crate) fn forget_id(&self) {
        self.id.store(0, Ordering::SeqCst);
    }

    /// Whether an ephemeral node owned by `owner`, found under a protected prefix this
    /// session's client generated, is ours. A fresh prefix is only ever sent on one client,
    /// and a client has at most one session that can create nodes (its read-only session
    /// cannot), so while the id is unknown any ephemeral owner is that session, and is learned.
    pub(crate) fn owns(&self, owner: i64) -> bool {
        match self.id() {
            0 if owner != 0 => {
                self.learn_id(owner);
                true
            }
            id => id == owner,
        }
    }
}

/// Opens a new session, bounded by the configured connection timeout. Authentication is sent
/// with it (and re-sent by the client on every reconnect of this session).
pub(crate) async fn connect(config: &Config) -> Result<Client> {
    let mut connector =
        Client::connector().with_session_timeout(config.session_timeout).with_readonly(config.can_be_read_only);
    for auth in &config.auth {
        connector = connector.with_auth(&auth.scheme, &auth.data);
    }
    let connecting = config.security.connect(connector, &config.connect_string);
    let client = match tokio::time::timeout(config.connection_timeout, connecting).await {
        Err(_) => return Err(Error::ConnectionTimeout(config.connection_timeout)),
        Ok(Err(zookeeper_client::Error::Timeout | zookeeper_client::Error::NoHosts)) => {
            return Err(Error::ConnectionTimeout(config.connection_timeout))
        }
        Ok(Err(e)) => return Err(e.into()),
        Ok(Ok(client)) => client,
    };
    if client.state() == SessionState::AuthFailed {
        return Err(zookeeper_client::Error::AuthFailed.into());
    }
    tracing::debug!(session = format_args!("{:#x}", client.session_id().0), timeout = ?client.session_timeout(), "session opened");
    Ok(client)
}
