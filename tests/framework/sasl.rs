//! SASL DIGEST-MD5 logins (feature `sasl`) against a real ZooKeeper server with a JAAS digest
//! login: identities, a creator-only ACL enforced between two users, a lock taken over SASL,
//! and a wrong password refused.

#![cfg(feature = "sasl")]

use std::time::{Duration, Instant};

use futures::StreamExt;
use tokio::sync::OnceCell;
use tokio::time::timeout;
use zk_recipes::testing::{expire_session, FaultProxy, TestingServer};
use zk_recipes::zk::{self, Acls};
use zk_recipes::{ConnectionState, Error, FixedAclProvider, Framework, FrameworkBuilder, InterProcessMutex};

const LIMIT: Duration = Duration::from_secs(60);

/// One SASL server for the tests of this file (none stops or restarts it).
static SERVER: OnceCell<TestingServer> = OnceCell::const_new();

async fn server() -> &'static TestingServer {
    SERVER
        .get_or_init(|| async {
            TestingServer::builder()
                .sasl_digest_user("alice", "alice-secret")
                .sasl_digest_user("bob", "bob-secret")
                .start()
                .await
                .expect("a SASL testing server")
        })
        .await
}

/// A path under a root of its own: parents a creator-only provider makes are closed to others.
fn unique_path(name: &str) -> String {
    format!("/sasl-tests-{name}/{}", uuid::Uuid::new_v4().simple())
}

fn login(server: &TestingServer, user: &str, password: &str) -> FrameworkBuilder {
    Framework::builder(&server.connect_string())
        .session_timeout(Duration::from_secs(10))
        .connection_timeout(Duration::from_secs(10))
        .sasl_digest(user, password)
}

#[tokio::test]
async fn a_creator_only_acl_keeps_another_sasl_user_out() {
    timeout(LIMIT, async {
        let server = server().await;
        let alice = login(server, "alice", "alice-secret")
            .acl_provider(FixedAclProvider::new(Acls::creator_all().to_vec()))
            .start()
            .await
            .unwrap();
        let bob = login(server, "bob", "bob-secret").start().await.unwrap();

        let users = alice.zk_client().unwrap().list_auth_users().await.unwrap();
        assert!(users.iter().any(|u| (u.scheme(), u.user()) == ("sasl", "alice")), "{users:?}");

        let path = unique_path("private");
        alice.create(&path).data(b"alice's").await.unwrap();
        let (acl, _) = alice.zk_client().unwrap().get_acl(&path).await.unwrap();
        assert_eq!(acl.len(), 1, "{acl:?}");
        assert_eq!((acl[0].scheme(), acl[0].id()), ("sasl", "alice"), "{acl:?}");

        assert_eq!(alice.get_data(&path).await.unwrap().0, b"alice's");
        let refused = bob.get_data(&path).await.unwrap_err();
        assert!(matches!(refused, Error::ZooKeeper(zk::Error::NoAuth)), "{refused:?}");
        let refused = bob.set_data(&path, b"bob's").await.unwrap_err();
        assert!(matches!(refused, Error::ZooKeeper(zk::Error::NoAuth)), "{refused:?}");

        alice.delete(&path).await.unwrap();
        bob.close().await;
        alice.close().await;
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn a_lock_over_sasl_excludes_the_other_user() {
    timeout(LIMIT, async {
        let server = server().await;
        let alice = login(server, "alice", "alice-secret").start().await.unwrap();
        let bob = login(server, "bob", "bob-secret").start().await.unwrap();
        let path = unique_path("lock");
        let alice_mutex = InterProcessMutex::new(&alice, &path).unwrap();
        let bob_mutex = InterProcessMutex::new(&bob, &path).unwrap();

        let guard = alice_mutex.acquire().await.unwrap();
        assert!(bob_mutex.acquire_timeout(Duration::from_millis(300)).await.unwrap().is_none());
        guard.release().await.unwrap();
        let bob_guard =
            bob_mutex.acquire_timeout(Duration::from_secs(10)).await.unwrap().expect("the lock after release");
        bob_guard.release().await.unwrap();

        bob.close().await;
        alice.close().await;
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn the_session_after_an_expiry_logs_in_again() {
    timeout(LIMIT, async {
        let server = server().await;
        let proxy = FaultProxy::start(&server.connect_string()).await.unwrap();
        let alice = Framework::builder(&proxy.connect_string())
            .session_timeout(Duration::from_secs(10))
            .sasl_digest("alice", "alice-secret")
            .acl_provider(FixedAclProvider::new(Acls::creator_all().to_vec()))
            .build()
            .unwrap();
        let mut events = alice.state_changes();
        alice.start().await.unwrap();
        let path = unique_path("after-expiry");
        alice.create(&path).data(b"kept").await.unwrap();

        let info = alice.zk_client().unwrap().session().clone();
        expire_session(&proxy, &server.connect_string(), info).await.unwrap();
        timeout(Duration::from_secs(30), async {
            while let Some(event) = events.next().await {
                if event.state == ConnectionState::Reconnected && event.epoch > 1 {
                    return;
                }
            }
        })
        .await
        .expect("a new session");

        // The new session is alice again: her creator-only node is still hers.
        assert_eq!(alice.get_data(&path).await.unwrap().0, b"kept");
        alice.delete(&path).await.unwrap();
        alice.close().await;
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn a_wrong_password_fails_start_at_once() {
    timeout(LIMIT, async {
        let server = server().await;
        let connection_timeout = Duration::from_secs(10);
        let started = Instant::now();
        let result = login(server, "alice", "not-her-password").connection_timeout(connection_timeout).start().await;
        assert!(matches!(&result, Err(e) if e.zk() == Some(&zk::Error::AuthFailed)), "{result:?}");
        assert!(started.elapsed() < connection_timeout, "refused after {:?}", started.elapsed());
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn a_server_requiring_sasl_ends_sessions_without_it() {
    timeout(LIMIT, async {
        let server = TestingServer::builder()
            .sasl_digest_user("alice", "alice-secret")
            .config("sessionRequireClientSASLAuth", "true")
            .start()
            .await
            .unwrap();
        let alice = login(&server, "alice", "alice-secret").start().await.unwrap();
        alice.create(&unique_path("required")).data(b"").await.unwrap();
        alice.close().await;

        // Without a login the server closes the session ("SASL required"), which the client
        // reports as AuthFailed: from start(), or at the latest from the first request.
        let anonymous = Framework::builder(&server.connect_string())
            .session_timeout(Duration::from_secs(10))
            .connection_timeout(Duration::from_secs(10))
            .build()
            .unwrap();
        let result = match anonymous.start().await {
            Ok(()) => anonymous.get_data("/").await.map(drop),
            Err(e) => Err(e),
        };
        assert!(matches!(&result, Err(e) if e.zk() == Some(&zk::Error::AuthFailed)), "{result:?}");
        anonymous.close().await;
    })
    .await
    .unwrap();
}
