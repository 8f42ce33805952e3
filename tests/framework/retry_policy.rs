//! `RetryPolicy::allow_retry`: a policy decides which errors are worth another try.

use crate::common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::fixtures::{bounded, init_tracing, unique_path, within};
use common::timing::{EVENT, FAULT_SESSION, LIMIT, QUIET};
use zk_recipes::retry::{RetryForever, RetryPolicy};
use zk_recipes::testing::{shared_server, FaultProxy, ProxyMode};
use zk_recipes::{zk, Error, Framework};

/// Retries forever, except after a `ConnectionLoss`; counts what it was asked.
#[derive(Debug, Clone, Default)]
struct NoRetryOnConnectionLoss {
    asked: Arc<AtomicUsize>,
    delays: Arc<AtomicUsize>,
}

impl RetryPolicy for NoRetryOnConnectionLoss {
    fn next_delay(&self, attempt: u32, elapsed: Duration) -> Option<Duration> {
        self.delays.fetch_add(1, Ordering::SeqCst);
        RetryForever::new(Duration::from_millis(50)).next_delay(attempt, elapsed)
    }

    fn allow_retry(&self, error: &Error) -> bool {
        self.asked.fetch_add(1, Ordering::SeqCst);
        // `ConnectionLoss`, or a transport failure the client reports in its place.
        !error.is_connection_loss() && error.is_retryable()
    }
}

#[tokio::test]
async fn a_policy_that_refuses_connection_loss_fails_at_the_first_cut_while_the_default_waits() {
    bounded(LIMIT, async {
        init_tracing();
        let server = shared_server().await.unwrap();
        let proxy = FaultProxy::start(&server.connect_string()).await.unwrap();
        let path = unique_path("fw", "allow-retry");
        let refusing_policy = NoRetryOnConnectionLoss::default();
        let refusing = Framework::builder(&proxy.connect_string())
            .session_timeout(FAULT_SESSION)
            .retry_policy(refusing_policy.clone())
            .start()
            .await
            .unwrap();
        let patient = Framework::builder(&proxy.connect_string())
            .session_timeout(FAULT_SESSION)
            .retry_policy(RetryForever::new(Duration::from_millis(50)))
            .start()
            .await
            .unwrap();
        refusing.create(&path).data(b"x").await.unwrap();
        assert_eq!(refusing_policy.delays.load(Ordering::SeqCst), 0);

        // A partition: requests sent now get no answer; the client concludes the connection
        // is lost after its connection timeout (a fraction of the session timeout) and fails
        // them with ConnectionLoss.
        proxy.set_mode(ProxyMode::BlackHole);
        let refused = tokio::spawn({
            let (fw, path) = (refusing.clone(), path.clone());
            async move { fw.get_data(&path).await }
        });
        let waiting = tokio::spawn({
            let (fw, path) = (patient.clone(), path.clone());
            async move { fw.get_data(&path).await }
        });
        let refused = within(FAULT_SESSION * 2, "the refusing policy's read fails", refused).await.unwrap();
        assert!(matches!(&refused, Err(e) if e.is_connection_loss()), "{refused:?}");
        assert!(refusing_policy.asked.load(Ordering::SeqCst) >= 1, "the policy was asked");
        assert_eq!(refusing_policy.delays.load(Ordering::SeqCst), 0, "no retry was even scheduled");

        // The default rule retries the same error: the other read is still waiting ...
        tokio::time::sleep(QUIET).await;
        assert!(!waiting.is_finished(), "the patient read gave up: {:?}", waiting.await);
        // ... and succeeds once the network is back.
        proxy.set_mode(ProxyMode::Pass);
        proxy.drop_connections();
        let (data, _) = within(EVENT, "the patient read", waiting).await.unwrap().unwrap();
        assert_eq!(data, b"x");

        // Other errors are still retried or refused by the policy's own rule.
        let missing = refusing.get_data(&format!("{path}/missing")).await;
        assert!(matches!(missing, Err(Error::ZooKeeper(zk::Error::NoNode))), "{missing:?}");
        refusing.delete(&path).await.unwrap();
        refusing.close().await;
        patient.close().await;
    })
    .await;
}
