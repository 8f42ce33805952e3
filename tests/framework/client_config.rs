//! `FrameworkBuilder::configure_client`: the raw client's connector, adjusted per session.

use crate::common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use common::fixtures::{bounded, init_tracing, unique_path, wait_connected};
use common::timing::{back_within, FAULT_SESSION, LIMIT};
use zk_recipes::testing::{expire_session, shared_server, FaultProxy};
use zk_recipes::zk::{Acls, CreateMode};
use zk_recipes::Framework;

#[tokio::test]
async fn the_hook_shapes_every_session_and_the_framework_keeps_its_own_settings() {
    bounded(LIMIT, async {
        init_tracing();
        let server = shared_server().await.unwrap();
        let proxy = FaultProxy::start(&server.connect_string()).await.unwrap();
        let calls = Arc::new(AtomicUsize::new(0));
        let fw = Framework::builder(&proxy.connect_string())
            .session_timeout(FAULT_SESSION)
            .configure_client({
                let calls = calls.clone();
                move |connector| {
                    calls.fetch_add(1, Ordering::SeqCst);
                    // A 3.4 server's protocol: `create` answers without a stat.
                    connector.with_server_version(3, 4, 0)
                }
            })
            .start()
            .await
            .unwrap();
        assert_eq!(calls.load(Ordering::SeqCst), 1, "called for the first session");

        let path = unique_path("fw", "client-hook");
        let client = fw.zk_client().unwrap();
        let options = CreateMode::Persistent.with_acls(Acls::anyone_all());
        let (stat, _) = client.create(&path, b"", &options).await.unwrap();
        assert!(stat.is_invalid(), "the hook's server version reached the client: {stat:?}");
        let plain = Framework::connect(&server.connect_string()).await.unwrap();
        let (stat, _) = plain.zk_client().unwrap().create(&format!("{path}/x"), b"", &options).await.unwrap();
        assert!(!stat.is_invalid(), "without the hook the client asks for the stat");
        drop(client);

        // A new session after expiry is opened through the hook again.
        let info = fw.zk_client().unwrap().session().clone();
        expire_session(&proxy, &server.connect_string(), info).await.unwrap();
        wait_connected(&fw, back_within(FAULT_SESSION), 2).await;
        assert_eq!(calls.load(Ordering::SeqCst), 2, "called once per session");
        let client = fw.zk_client().unwrap();
        let (stat, _) = client.create(&format!("{path}/y"), b"", &options).await.unwrap();
        assert!(stat.is_invalid());
        drop(client);

        plain.delete(&path).recursive().await.unwrap();
        fw.close().await;
        plain.close().await;
    })
    .await;
}
