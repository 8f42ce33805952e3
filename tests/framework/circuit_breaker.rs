//! The circuit-breaking listener and stream: a flapping connection reaches them as one
//! `Suspended` and, when the circuit closes, the state it ended in.

use crate::common;

use std::sync::{Arc, Mutex};

use common::fixtures::{bounded, init_tracing, wait_for_event, within};
use common::timing::{EVENT, FAULT_SESSION, LIMIT};
use futures::StreamExt;
use zk_recipes::retry::RetryNTimes;
use zk_recipes::testing::{shared_server, FaultProxy};
use zk_recipes::{CircuitBreakingStream, ConnectionState, Framework, StateSnapshot};

const FLAPS: usize = 8;

#[tokio::test]
async fn a_flapping_connection_reaches_the_circuit_breaking_listener_as_one_suspended_and_one_reconnected() {
    bounded(LIMIT, async {
        init_tracing();
        let server = shared_server().await.unwrap();
        let proxy = FaultProxy::start(&server.connect_string()).await.unwrap();
        let fw = Framework::builder(&proxy.connect_string()).session_timeout(FAULT_SESSION).start().await.unwrap();
        let mut raw = fw.state_changes();
        // One period, far longer than the flapping below takes (each cut is answered by a
        // reconnect within milliseconds on loopback); the test waits for its end.
        let period = FAULT_SESSION * 3;
        let seen: Arc<Mutex<Vec<StateSnapshot>>> = Arc::default();
        let _listener =
            fw.add_circuit_breaking_listener(Arc::new(Recorder(seen.clone())), RetryNTimes::new(1, period)).unwrap();
        let mut breaking = CircuitBreakingStream::new(fw.state_changes(), RetryNTimes::new(1, period));

        let mut raw_events = Vec::new();
        for _ in 0..FLAPS {
            proxy.drop_connections();
            let (back, skipped) = wait_for_event(&mut raw, ConnectionState::Reconnected, EVENT).await;
            raw_events.extend(skipped);
            raw_events.push(back);
        }
        let suspended = raw_events.iter().filter(|s| s.state == ConnectionState::Suspended).count();
        assert!(suspended >= FLAPS, "each cut is a Suspended on the raw stream: {raw_events:?}");

        // The breaking stream: the first Suspended at once, then nothing until the period
        // ends, then the state the connection is in.
        let first = within(EVENT, "the first Suspended", breaking.next()).await.unwrap();
        assert_eq!(first.state, ConnectionState::Suspended);
        assert!(breaking.is_open());
        let last = within(period + EVENT, "the circuit closing", breaking.next()).await.unwrap();
        assert_eq!(last.state, ConnectionState::Reconnected);
        assert_eq!(last, fw.snapshot(), "the circuit closes on the current state");
        assert!(!breaking.is_open());

        // The listener heard the same: two events for 2 x FLAPS transitions.
        let heard = seen.lock().unwrap().clone();
        assert_eq!(
            heard.iter().map(|s| s.state).collect::<Vec<_>>(),
            [ConnectionState::Suspended, ConnectionState::Reconnected],
            "raw: {} events, the listener: {heard:?}",
            raw_events.len()
        );
        assert!(raw_events.len() >= heard.len() * FLAPS);

        // Closed again: the next cut goes through at once.
        proxy.drop_connections();
        let again = within(EVENT, "the next Suspended", breaking.next()).await.unwrap();
        assert_eq!(again.state, ConnectionState::Suspended);
        fw.close().await;
    })
    .await;
}

struct Recorder(Arc<Mutex<Vec<StateSnapshot>>>);

#[zk_recipes::async_trait]
impl zk_recipes::ConnectionStateListener for Recorder {
    async fn state_changed(&self, _framework: &Framework, snapshot: StateSnapshot) {
        self.0.lock().unwrap().push(snapshot);
    }
}
