//! Opening a ZooKeeper session from the configuration.

use zookeeper_client::{Client, SessionState};

use super::Config;
use crate::error::{Error, Result};

/// One ZooKeeper session of the framework: its client and which session it is (the epoch).
#[derive(Clone, Debug)]
pub(crate) struct Session {
    pub(crate) client: Client,
    pub(crate) epoch: u64,
}

/// Opens a new session, bounded by the configured connection timeout. Authentication is sent
/// with it (and re-sent by the client on every reconnect of this session).
pub(crate) async fn connect(config: &Config) -> Result<Client> {
    let mut connector =
        Client::connector().with_session_timeout(config.session_timeout).with_readonly(config.can_be_read_only);
    for auth in &config.auth {
        connector = connector.with_auth(&auth.scheme, &auth.data);
    }
    let connecting = connector.connect(&config.connect_string);
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
