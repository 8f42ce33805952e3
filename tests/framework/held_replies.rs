//! Replies a server holds back. A member of a ZooKeeper 3.6.0-3.8.0 ensemble sometimes answers
//! a request only when another request reaches it (its commit processor misses a wake-up);
//! the proxy does the same with `hold_next_reply`. Every operation of the framework, and so
//! every recipe built on them, sends one `exists` once it has waited a second with nothing
//! sent, which lets the reply go; without it the caller waited for the client's ping, 9 s or
//! more without a request at this session timeout.

use crate::common;

use std::future::{Future, IntoFuture};
use std::time::Duration;

use common::fixtures::*;
use common::timing::{COUNTING_SESSION as SESSION, LIMIT};
use zk_recipes::retry::RetryNTimes;
use zk_recipes::testing::CountingProxy;
use zk_recipes::{DistributedAtomicLong, Framework};

/// Well inside the 9 s the client stays silent before it pings, and more than the second a
/// wait lasts before its nudge.
const BEFORE_A_PING: Duration = Duration::from_secs(3);

/// Runs `op` with its first reply held back: it must finish before a ping, after exactly one
/// nudge (one `exists`) and no ping. The nudge's own reply, right behind the one it let go,
/// has passed the proxy when `fw`'s next read is answered: only then is the next reply held.
async fn held<T>(proxy: &CountingProxy, fw: &Framework, what: &str, op: impl Future<Output = T>) -> T {
    let before = proxy.counts();
    proxy.hold_next_reply();
    let out = within(BEFORE_A_PING, what, op).await;
    let during = proxy.counts().since(&before);
    assert_eq!((during.get("exists"), during.get("ping")), (1, 0), "{what}: {during}");
    fw.exists("/").await.expect("a read behind the nudge's");
    out
}

async fn counted() -> (CountingProxy, Framework) {
    let proxy = CountingProxy::start(&shared_connect().await).await.expect("counting proxy");
    let fw = plain_framework(&proxy.connect_string(), SESSION).await;
    (proxy, fw)
}

#[tokio::test]
async fn an_operation_whose_reply_is_held_back_sends_one_read() {
    init_tracing();
    bounded(LIMIT, async {
        let (proxy, fw) = counted().await;
        let path = unique_path("framework", "held-reply");
        held(&proxy, &fw, "a create", fw.create(&path).data(b"1").into_future()).await.unwrap();
        let (data, _) = held(&proxy, &fw, "a read", fw.get_data(&path).into_future()).await.unwrap();
        assert_eq!(data, b"1");
        held(&proxy, &fw, "a write", fw.set_data(&path, b"2").into_future()).await.unwrap();
        let children = held(&proxy, &fw, "a listing", fw.get_children(&path).into_future()).await.unwrap();
        assert!(children.is_empty(), "{children:?}");
        let tx = fw.transaction().set_data(&path, b"3");
        held(&proxy, &fw, "a transaction", tx.commit()).await.unwrap();
        held(&proxy, &fw, "a delete", fw.delete(&path).into_future()).await.unwrap();
        fw.close().await;
    })
    .await;
}

/// A recipe on the framework's operations: a counter's increment (a read, then a versioned
/// write) with its read's reply held back.
#[tokio::test]
async fn a_counter_whose_read_is_held_back_sends_one_read() {
    init_tracing();
    bounded(LIMIT, async {
        let (proxy, fw) = counted().await;
        let path = unique_path("framework", "held-counter");
        let counter = DistributedAtomicLong::new(&fw, &path, RetryNTimes::new(3, Duration::from_millis(10))).unwrap();
        counter.increment().await.unwrap();
        let value = held(&proxy, &fw, "an increment", counter.increment()).await.unwrap();
        assert!(value.succeeded(), "{value:?}");
        assert_eq!(*value.post_value(), 2);
        fw.close().await;
    })
    .await;
}
