//! Expiring a session on the server (Curator's `KillSession`).

use std::time::Duration;

use zookeeper_client::{Client, SessionInfo, SessionState};

use super::process;
use super::proxy::{FaultProxy, ProxyMode};
use super::TestingError;

/// Bound on attaching to the session and closing it.
const ATTACH_TIMEOUT: Duration = Duration::from_secs(15);
/// Bound on the server forgetting the session after it was closed.
const FORGET_TIMEOUT: Duration = Duration::from_secs(10);

/// Expires `session` on the server, like Curator's `KillSession`: the client that owns the
/// session sits behind `proxy`, and `direct_connect` reaches the server(s) without it.
///
/// Steps: black-hole `proxy` and drop its connections (the owner is cut off and cannot get
/// back in), attach a second client to the session directly with
/// `Connector::with_session` and drop it (CloseSession: the server deletes the session's
/// ephemeral nodes), wait until no server's `dump` lists the session any more, then put the
/// proxy back to [`ProxyMode::Pass`] and drop its connections once more so the owner
/// reconnects at once. The owner then learns that its session is gone:
/// `SessionState::Expired`, and its operations fail with `SessionExpired`.
///
/// Attaching while the owner is still connected does not work with ZooKeeper 3.8 and
/// zookeeper-client 0.11 (the two connections take the session from each other), which is why
/// the owner must be behind a proxy. A session that has already expired counts as success.
///
/// # Errors
/// [`TestingError::ZooKeeper`] if the session cannot be attached for another reason,
/// [`TestingError::Timeout`] if attaching or the server forgetting the session takes too long.
/// The proxy is back in [`ProxyMode::Pass`] in every case.
///
/// # Panics
/// Outside a tokio runtime.
///
/// # Cancel safety
/// Not cancel-safe: cancelling may leave the proxy black-holed (set it back with
/// [`FaultProxy::set_mode`]) and the session closed or not.
pub async fn expire_session(
    proxy: &FaultProxy,
    direct_connect: &str,
    session: SessionInfo,
) -> Result<(), TestingError> {
    let session_id = session.id();
    proxy.set_mode(ProxyMode::BlackHole);
    proxy.drop_connections();
    let result = close_session(direct_connect, session).await;
    let result = match result {
        Ok(()) => wait_until_forgotten(direct_connect, &session_id.to_string()).await,
        Err(err) => Err(err),
    };
    proxy.set_mode(ProxyMode::Pass);
    proxy.drop_connections();
    tracing::debug!(session = %session_id, ok = result.is_ok(), "expire_session done");
    result
}

/// Attaches to the session and closes it; `Ok` also when the server says it already expired.
async fn close_session(direct_connect: &str, session: SessionInfo) -> Result<(), TestingError> {
    let session_id = session.id();
    let connect = Client::connector().with_session(session).with_fail_eagerly().connect(direct_connect);
    let client = match tokio::time::timeout(ATTACH_TIMEOUT, connect).await {
        Err(_) => return Err(TestingError::timeout(format!("attaching to session {session_id}"), ATTACH_TIMEOUT)),
        Ok(Err(zookeeper_client::Error::SessionExpired)) => return Ok(()),
        Ok(Err(err)) => return Err(TestingError::zk(format!("attaching to session {session_id}"), err)),
        Ok(Ok(client)) => client,
    };
    let mut state = client.state_watcher();
    // Dropping the last handle sends CloseSession; the state turns Closed once it is answered.
    drop(client);
    let closed = async {
        loop {
            let now = state.changed().await;
            if now.is_terminated() {
                return now;
            }
        }
    };
    match tokio::time::timeout(ATTACH_TIMEOUT, closed).await {
        Ok(SessionState::Closed | SessionState::Expired) => Ok(()),
        Ok(other) => Err(TestingError::zk(
            format!("closing session {session_id} (ended {other})"),
            zookeeper_client::Error::UnexpectedError(format!("session ended in state {other}")),
        )),
        Err(_) => Err(TestingError::timeout(format!("closing session {session_id}"), ATTACH_TIMEOUT)),
    }
}

/// Polls `dump` on every server of the connect string until no session tracker lists
/// `session_hex` any more (the standalone server's or leader's `Session Sets`, a follower's
/// `Global Sessions`). Servers that do not answer are skipped.
async fn wait_until_forgotten(direct_connect: &str, session_hex: &str) -> Result<(), TestingError> {
    let hosts: Vec<&str> = direct_connect
        .split('/')
        .next()
        .unwrap_or_default()
        .split(',')
        .map(|host| host.trim().trim_start_matches("tcp://"))
        .filter(|host| !host.is_empty())
        .collect();
    let deadline = tokio::time::Instant::now() + FORGET_TIMEOUT;
    loop {
        let mut known_by = None;
        for host in &hosts {
            let Ok(dump) = process::four_letter_word_with_timeout(host, "dump", Duration::from_secs(2)).await else {
                continue;
            };
            if tracked_sessions(&dump).any(|session| session == session_hex) {
                known_by = Some((*host, dump));
            }
        }
        let Some((host, dump)) = known_by else {
            return Ok(());
        };
        if tokio::time::Instant::now() >= deadline {
            tracing::debug!(session = session_hex, host, dump, "session still tracked");
            let operation = format!("the server forgetting session {session_hex} (still tracked by {host})");
            return Err(TestingError::timeout(operation, FORGET_TIMEOUT));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The session ids in the session-tracker part of a `dump` answer (before
/// `ephemeral nodes dump:`), for example `0x100001ec04e0000`.
fn tracked_sessions(dump: &str) -> impl Iterator<Item = &str> {
    dump.lines()
        .take_while(|line| !line.starts_with("ephemeral nodes dump"))
        .filter_map(|line| line.split_whitespace().next())
        .filter(|token| token.starts_with("0x"))
}

#[cfg(test)]
mod tests {
    use super::tracked_sessions;

    #[test]
    fn parses_the_session_tracker_part_of_dump() {
        let leader = "SessionTracker dump:\nSession Sets (1)/(1):\n1 expire at Sun Nov 29 23:01:35 UTC 2026:\n\t0x100001ec04e0000\nephemeral nodes dump:\nSessions with Ephemerals (1):\n0x200001ec04e0000:\n\t/e\nConnections dump:\nConnections Sets (1)/(2):\n2 expire at Sun Nov 29 23:01:44 UTC 2026:\n\tip: /127.0.0.1:49804 sessionId: 0x300001ec04e0000\n";
        assert_eq!(tracked_sessions(leader).collect::<Vec<_>>(), ["0x100001ec04e0000"]);
        let follower = "SessionTracker dump:\nGlobal Sessions(1):\n0x100001ec5f80000\t6000ms\nephemeral nodes dump:\n";
        assert_eq!(tracked_sessions(follower).collect::<Vec<_>>(), ["0x100001ec5f80000"]);
    }
}
