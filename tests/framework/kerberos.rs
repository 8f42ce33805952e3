//! SASL GSSAPI (Kerberos) logins (feature `sasl-gssapi`) against a real MIT Kerberos KDC
//! (Debian's `krb5-kdc`, started by the testing module) and a ZooKeeper server that logs in as
//! `zookeeper/localhost`: a mutex and a cache over a Kerberos session, and a stale keytab
//! refused with a typed error within the connection timeout.
//!
//! The client's Kerberos settings are the process environment's (`KRB5_CONFIG`,
//! `KRB5_CLIENT_KTNAME`, `KRB5CCNAME`), so every scenario is in one test, in sequence.

#![cfg(feature = "sasl-gssapi")]

use std::time::{Duration, Instant};

use crate::common::fixtures::{bounded, eventually, init_tracing, unique_path};
use crate::common::timing::{EVENT, LIMIT, SESSION};
use zk_recipes::testing::{TestingKdc, TestingServer};
use zk_recipes::zk;
use zk_recipes::{CuratorCache, Framework, FrameworkBuilder, InterProcessMutex};

fn kerberos(server: &TestingServer) -> FrameworkBuilder {
    Framework::builder(&server.connect_string()).session_timeout(SESSION).sasl_gssapi("zookeeper", Some("localhost"))
}

/// Points the process's Kerberos library at `keytab`, with a credential cache of its own (so
/// that no ticket of an earlier login is reused).
fn use_keytab(kdc: &TestingKdc, keytab: &std::path::Path, cache: &str) {
    std::env::set_var("KRB5_CONFIG", kdc.krb5_conf());
    std::env::set_var("KRB5_CLIENT_KTNAME", keytab);
    std::env::set_var("KRB5CCNAME", format!("MEMORY:zk-recipes-{cache}-{}", std::process::id()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kerberos_session_holds_a_mutex_and_a_cache_and_a_stale_keytab_is_refused() {
    init_tracing();
    bounded(LIMIT, async {
        let kdc = TestingKdc::start().await.expect("a KDC (Debian's krb5-kdc and krb5-admin-server)");
        let server = TestingServer::builder()
            .config("sessionRequireClientSASLAuth", "true")
            .kerberos(&kdc)
            .await
            .unwrap()
            .start()
            .await
            .expect("a Kerberos testing server");
        let keytab = kdc.add_principal("client").await.unwrap();
        use_keytab(&kdc, &keytab, "good");
        let fw = kerberos(&server).start().await.unwrap();
        let users = fw.zk_client().unwrap().list_auth_users().await.unwrap();
        assert!(
            users.iter().any(|u| u.scheme() == "sasl" && u.user() == format!("client@{}", TestingKdc::REALM)),
            "{users:?}"
        );

        // A mutex and a cache over the Kerberos session.
        let lock = unique_path("kerberos", "mutex");
        let mutex = InterProcessMutex::new(&fw, &lock).unwrap();
        let guard = mutex.acquire().await.unwrap();
        assert!(guard.is_held());
        guard.release().await.unwrap();
        let root = unique_path("kerberos", "cache");
        let cache = CuratorCache::builder(&fw, &root).build().unwrap();
        cache.start().await.unwrap();
        cache.initialized().await.unwrap();
        fw.create(&format!("{root}/a")).data(b"x").await.unwrap();
        eventually(EVENT, "the cache sees the node", || async {
            match cache.get(&format!("{root}/a")) {
                Some(node) if node.data().map(Vec::as_slice) == Some(&b"x"[..]) => Ok(()),
                other => Err(format!("{other:?}")),
            }
        })
        .await;
        cache.close().await;
        fw.close().await;

        // New keys for the client: the keytab written before is stale.
        kdc.add_principal("client").await.unwrap();
        use_keytab(&kdc, &keytab, "stale");
        let connection_timeout = Duration::from_secs(5);
        let started = Instant::now();
        let result = kerberos(&server).connection_timeout(connection_timeout).start().await;
        assert!(matches!(&result, Err(e) if e.zk() == Some(&zk::Error::AuthFailed)), "{result:?}");
        assert!(started.elapsed() < connection_timeout, "refused after {:?}", started.elapsed());
    })
    .await;
}
