//! What an ensemble with dynamic reconfiguration needs: its superuser (reconfiguration is
//! refused to anyone else), member lines in the dynamic configuration's format, and the
//! reconfiguration requests the cluster sends itself to add and remove members.

use std::time::Duration;

use zookeeper_client::{Client, EnsembleUpdate};

use super::TestingError;

/// The superuser of an ensemble started with dynamic reconfiguration: `digest` scheme,
/// `super:<password>`.
const SUPER_USER: &str = "super";
const SUPER_PASSWORD: &str = "zk-testing-super";

/// A member's role in the ensemble.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum MemberRole {
    /// A voting member (`participant`).
    Participant,
    /// A non-voting member that serves clients (`observer`).
    Observer,
}

impl MemberRole {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            MemberRole::Participant => "participant",
            MemberRole::Observer => "observer",
        }
    }
}

/// The `digest` auth of the superuser: `("digest", b"super:<password>")`.
pub(crate) fn super_auth() -> (&'static str, Vec<u8>) {
    ("digest", format!("{SUPER_USER}:{SUPER_PASSWORD}").into_bytes())
}

/// The system property that makes the server know the superuser
/// (`zookeeper.DigestAuthenticationProvider.superDigest=super:<base64(sha1("super:<password>"))>`).
pub(crate) fn super_digest_property() -> (String, String) {
    let id = format!("{SUPER_USER}:{SUPER_PASSWORD}");
    (
        "zookeeper.DigestAuthenticationProvider.superDigest".to_owned(),
        format!("{SUPER_USER}:{}", base64(&sha1(id.as_bytes()))),
    )
}

/// A member line: `server.<id>=127.0.0.1:<quorum>:<election>:<role>;127.0.0.1:<client>`.
pub(crate) fn member_line(id: usize, quorum: u16, election: u16, role: MemberRole, client: u16) -> String {
    member_line_on("127.0.0.1", id, quorum, election, role, client)
}

/// A member line whose quorum and election ports are on `host` (the client port stays on
/// `127.0.0.1`): `server.<id>=<host>:<quorum>:<election>:<role>;127.0.0.1:<client>`.
pub(crate) fn member_line_on(
    host: &str,
    id: usize,
    quorum: u16,
    election: u16,
    role: MemberRole,
    client: u16,
) -> String {
    format!("server.{id}={host}:{quorum}:{election}:{};127.0.0.1:{client}", role.as_str())
}

/// A client logged in as the superuser, connected through `connect_string`, tried again until
/// `within` has passed: a connect gives up once every server was tried, and while members are
/// paused or electing a leader every one of them can refuse or stay silent for a while.
pub(crate) async fn super_client(connect_string: &str, within: Duration) -> Result<Client, TestingError> {
    let (scheme, auth) = super_auth();
    let deadline = crate::deadline::after(within);
    loop {
        let connecting = Client::connector()
            .with_session_timeout(Duration::from_secs(10))
            .with_auth(scheme, &auth)
            .connect(connect_string)
            .await;
        match connecting {
            Ok(client) => return Ok(client),
            Err(e) if tokio::time::Instant::now() >= deadline => {
                return Err(TestingError::zk(format!("connecting to {connect_string} as the superuser"), e))
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
}

/// The member lines of the ensemble's current configuration (`/zookeeper/config`, without its
/// `version=` line), read once the client's server has caught up with the leader: a member
/// serves reads from what it has applied, which can lag a reconfiguration just committed.
pub(crate) async fn current_members(client: &Client) -> Result<Vec<String>, TestingError> {
    client.sync("/").await.map_err(|e| TestingError::zk("syncing before reading /zookeeper/config", e))?;
    let (data, _) = client.get_config().await.map_err(|e| TestingError::zk("reading /zookeeper/config", e))?;
    let text = String::from_utf8_lossy(&data);
    Ok(text.lines().filter(|line| line.starts_with("server.")).map(str::to_owned).collect())
}

/// Sends an incremental reconfiguration (`joining` member lines, `leaving` member ids),
/// retried while the ensemble answers that another one is in progress, for at most `timeout`.
pub(crate) async fn reconfigure(
    client: &Client,
    joining: &[String],
    leaving: &[String],
    timeout: Duration,
) -> Result<(), TestingError> {
    let deadline = crate::deadline::after(timeout);
    loop {
        let update = EnsembleUpdate::Incremental {
            joinings: joining.iter().map(String::as_str),
            leavings: leaving.iter().map(String::as_str),
        };
        let remaining = deadline.saturating_duration_since(tokio::time::Instant::now());
        let what = || format!("reconfiguring the ensemble (joining {joining:?}, leaving {leaving:?})");
        match tokio::time::timeout(remaining, client.update_ensemble(update, None)).await {
            Err(_) => return Err(TestingError::timeout(what(), timeout)),
            Ok(Ok(_)) => return Ok(()),
            // ReconfigInProgress (-14), or the connection broke: try again.
            Ok(Err(zookeeper_client::Error::UnexpectedErrorCode(-14) | zookeeper_client::Error::ConnectionLoss)) => {}
            Ok(Err(e)) => return Err(TestingError::zk(what(), e)),
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(TestingError::timeout(what(), timeout));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// SHA-1 (FIPS 180-1) of `data`: ZooKeeper's digest scheme hashes `user:password` with it.
fn sha1(data: &[u8]) -> [u8; 20] {
    let mut h: [u32; 5] = [0x6745_2301, 0xEFCD_AB89, 0x98BA_DCFE, 0x1032_5476, 0xC3D2_E1F0];
    let mut message = data.to_vec();
    let bit_len = (data.len() as u64).wrapping_mul(8);
    message.push(0x80);
    while message.len() % 64 != 56 {
        message.push(0);
    }
    message.extend_from_slice(&bit_len.to_be_bytes());
    for block in message.chunks_exact(64) {
        let mut w = [0u32; 80];
        for (i, word) in block.chunks_exact(4).enumerate() {
            w[i] = u32::from_be_bytes([word[0], word[1], word[2], word[3]]);
        }
        for i in 16..80 {
            w[i] = (w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16]).rotate_left(1);
        }
        let [mut a, mut b, mut c, mut d, mut e] = h;
        for (i, word) in w.iter().enumerate() {
            let (f, k) = match i {
                0..=19 => ((b & c) | (!b & d), 0x5A82_7999),
                20..=39 => (b ^ c ^ d, 0x6ED9_EBA1),
                40..=59 => ((b & c) | (b & d) | (c & d), 0x8F1B_BCDC),
                _ => (b ^ c ^ d, 0xCA62_C1D6),
            };
            let t = a.rotate_left(5).wrapping_add(f).wrapping_add(e).wrapping_add(k).wrapping_add(*word);
            e = d;
            d = c;
            c = b.rotate_left(30);
            b = a;
            a = t;
        }
        for (state, value) in h.iter_mut().zip([a, b, c, d, e]) {
            *state = state.wrapping_add(value);
        }
    }
    let mut out = [0u8; 20];
    for (chunk, word) in out.chunks_exact_mut(4).zip(h) {
        chunk.copy_from_slice(&word.to_be_bytes());
    }
    out
}

/// Standard base64 with padding.
fn base64(data: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let b = [chunk[0], *chunk.get(1).unwrap_or(&0), *chunk.get(2).unwrap_or(&0)];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sha1_and_base64_match_known_values() {
        let hex: String = sha1(b"abc").iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(hex, "a9993e364706816aba3e25717850c26c9cd0d89d");
        let long = sha1(&[b'a'; 1000]);
        assert_eq!(long.len(), 20);
        assert_eq!(base64(b"Man"), "TWFu");
        assert_eq!(base64(b"Ma"), "TWE=");
        assert_eq!(base64(b"M"), "TQ==");
    }

    #[test]
    fn member_lines_use_the_dynamic_format() {
        assert_eq!(member_line(4, 1, 2, MemberRole::Observer, 3), "server.4=127.0.0.1:1:2:observer;127.0.0.1:3");
    }
}
