//! Typed nodes against Curator's `JacksonModelSerializer` JSON (the Java peer writes and reads
//! a Java `Order` with a default Jackson `ObjectMapper`, unknown properties ignored, as
//! curator-x-async's serializer is configured): the bytes Rust writes for the same record are
//! the bytes Jackson writes, and each side reads the other's nodes field for field.
#![cfg(feature = "serde")]

use crate::common;

use common::curator::CuratorPeer;
use common::fixtures::{bounded, framework, init_tracing, shared_connect, unique_path};
use common::timing::{INTEROP_SESSION, SLOW_LIMIT};
use serde::{Deserialize, Serialize};
use zk_recipes::{Codec, JsonCodec, ModelSpec, ModeledFramework, Parents, ZPath};

/// The Java peer's `Order`, fields in the same order.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
struct Order {
    id: i64,
    item: String,
    quantity: i32,
    price: f64,
    express: bool,
    tags: Vec<String>,
    note: Option<String>,
}

fn hex(data: &[u8]) -> String {
    if data.is_empty() {
        return "-".to_owned();
    }
    data.iter().map(|b| format!("{b:02x}")).collect()
}

/// The peer's `jackson_write` arguments for `order`.
fn java_args(order: &Order) -> String {
    let tags = if order.tags.is_empty() { "-".to_owned() } else { order.tags.join(",") };
    let note = order.note.as_deref().map_or("-".to_owned(), |n| hex(n.as_bytes()));
    format!(
        "{} {} {} {:?} {} {tags} {note}",
        order.id,
        hex(order.item.as_bytes()),
        order.quantity,
        order.price,
        order.express
    )
}

fn records() -> Vec<Order> {
    vec![
        Order {
            id: 42,
            item: "tea é\u{1}\n\"q\"".to_owned(),
            quantity: 3,
            price: 12_345_678.5,
            express: true,
            tags: vec!["a".to_owned(), "b".to_owned()],
            note: None,
        },
        Order {
            id: -7,
            item: "x".to_owned(),
            quantity: 0,
            price: 0.0001,
            express: false,
            tags: Vec::new(),
            note: Some("ünï".to_owned()),
        },
        Order {
            id: 1,
            item: "plain".to_owned(),
            quantity: 9,
            price: 2.5,
            express: false,
            tags: vec!["t".to_owned()],
            note: None,
        },
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_json_matches_jackson_and_each_side_reads_the_other() {
    init_tracing();
    bounded(SLOW_LIMIT, async {
        let connect = shared_connect().await;
        let Some(mut java) = CuratorPeer::start(&connect, INTEROP_SESSION).await.expect("the Curator peer") else {
            return;
        };
        let fw = framework(&connect, INTEROP_SESSION).await;
        let root = unique_path("typed-interop", "jackson");
        let spec = ModelSpec::new(ZPath::parse_with_ids(&format!("{root}/{{side}}/{{id}}")).unwrap())
            .parents(Parents::Containers);
        let orders: ModeledFramework<Order> = ModeledFramework::new(&fw, spec);
        for (i, order) in records().into_iter().enumerate() {
            // Java writes: the bytes are Rust's for the same record, and Rust reads them.
            let path = format!("{root}/java/{i}");
            let reply = java.command(&format!("jackson_write {path} {}", java_args(&order))).await.unwrap();
            let jackson = reply.rsplit(' ').next().unwrap().to_owned();
            let ours = JsonCodec.encode(&order).unwrap();
            assert_eq!(hex(&ours), jackson, "Rust: {}", String::from_utf8_lossy(&ours));
            assert_eq!(orders.resolved(["java".to_owned(), i.to_string()]).unwrap().read().await.unwrap().value, order);

            // Rust writes: Jackson reads every field.
            let path = format!("{root}/rust/{i}");
            orders.resolved(["rust".to_owned(), i.to_string()]).unwrap().create(&order).await.unwrap();
            let want = format!(
                "jackson_read {path} {}|{}|{}|{:?}|{}|{}|{}",
                order.id,
                hex(order.item.as_bytes()),
                order.quantity,
                order.price,
                order.express,
                if order.tags.is_empty() { "-".to_owned() } else { order.tags.join(",") },
                order.note.as_deref().map_or("-".to_owned(), |n| hex(n.as_bytes()))
            );
            let got = java.command(&format!("jackson_read {path}")).await.unwrap();
            // Java prints doubles in its own notation.
            let java_price = |line: &str| line.split('|').nth(3).map(|p| p.parse::<f64>().unwrap());
            assert_eq!(java_price(&got), java_price(&want), "{got}");
            let strip = |line: &str| {
                line.split('|').enumerate().filter(|(i, _)| *i != 3).map(|(_, s)| s.to_owned()).collect::<Vec<_>>()
            };
            assert_eq!(strip(&got), strip(&want));
        }
        let ids: Vec<u32> = orders.resolved(["java"]).unwrap().ids().await.unwrap();
        assert_eq!(ids, [0, 1, 2]);
        fw.delete(&root).recursive().await.unwrap();
        fw.close().await;
        java.quit().await.unwrap();
    })
    .await;
}
