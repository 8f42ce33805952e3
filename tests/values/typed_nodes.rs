//! Typed nodes (feature `serde`) against a real server: a `ZPath` template's nodes created,
//! read with their stat, compared-and-set, listed as typed ids and deleted through
//! `ModeledFramework`; the JSON is what Curator's `JacksonModelSerializer` writes for the same
//! record (a fixture of Jackson 2.14's output); a `ModeledCache` keeps each node's last value
//! that decoded and reports every one that did not; compressed specs and a compressing
//! framework store gzip while the recipes stay uncompressed; a `TypedSharedValue`; typed
//! transaction operations (`create_op`, `update_op`, ...) committed with untyped ones, all or
//! nothing, with the bytes the typed calls write.
#![cfg(feature = "serde")]

use crate::common;

use common::fixtures::*;
use common::timing::{EVENT, LIMIT, SESSION};
use futures::StreamExt;
use serde::{Deserialize, Serialize};
use zk_recipes::protocol::gzip;
use zk_recipes::zk::{CreateMode, Error as ZkError};
use zk_recipes::{
    Codec, CodecError, Error, Framework, JsonCodec, ModelSpec, ModeledCacheEvent, ModeledCacheEvents, ModeledFramework,
    OpResult, Parents, SharedCount, TypedSharedValue, ZPath,
};

/// The record of the fixtures: the fields of the Java `Order` in `interop/CuratorPeer.java`,
/// in the same order.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
struct Order {
    id: u64,
    item: String,
    quantity: i32,
    price: f64,
    express: bool,
    tags: Vec<String>,
    note: Option<String>,
}

fn order(id: u64, item: &str) -> Order {
    Order { id, item: item.to_owned(), quantity: 1, price: 2.5, express: false, tags: Vec::new(), note: None }
}

fn orders_at(fw: &Framework, root: &str) -> ModeledFramework<Order> {
    let spec = ModelSpec::new(ZPath::parse(root).unwrap().child_parameter("id").unwrap()).parents(Parents::Containers);
    ModeledFramework::new(fw, spec)
}

/// A fixture: the JSON and the record it holds.
type Fixture = (&'static str, fn() -> Order);

/// What Jackson 2.14's default `ObjectMapper` (Curator's `JacksonModelSerializer`) writes for
/// the Java `Order` with these values, captured from `writeValueAsBytes`.
const JACKSON_FIXTURES: &[Fixture] = &[
    (
        r#"{"id":42,"item":"tea é\u0001\n\"q\"","quantity":3,"price":1.23456785E7,"express":true,"tags":["a","b"],"note":null}"#,
        || Order {
            id: 42,
            item: "tea é\u{1}\n\"q\"".to_owned(),
            quantity: 3,
            price: 12_345_678.5,
            express: true,
            tags: vec!["a".to_owned(), "b".to_owned()],
            note: None,
        },
    ),
    (r#"{"id":42,"item":"x","quantity":3,"price":1.0E-4,"express":false,"tags":[],"note":"n"}"#, || Order {
        id: 42,
        item: "x".to_owned(),
        quantity: 3,
        price: 0.0001,
        express: false,
        tags: Vec::new(),
        note: Some("n".to_owned()),
    }),
    (r#"{"id":42,"item":"x","quantity":3,"price":2.5,"express":false,"tags":[],"note":"n"}"#, || Order {
        id: 42,
        item: "x".to_owned(),
        quantity: 3,
        price: 2.5,
        express: false,
        tags: Vec::new(),
        note: Some("n".to_owned()),
    }),
];

#[test]
fn the_json_is_byte_for_byte_what_jackson_writes() {
    for (json, record) in JACKSON_FIXTURES {
        let record = record();
        assert_eq!(String::from_utf8(JsonCodec.encode(&record).unwrap()).unwrap(), *json);
        let read: Order = JsonCodec.decode(json.as_bytes()).unwrap();
        assert_eq!(read, record);
    }
    // Jackson's reader ignores unknown fields (JacksonModelSerializer turns the failure off);
    // so does the codec.
    let newer = br#"{"id":1,"item":"x","quantity":1,"price":2.5,"express":false,"tags":[],"note":null,"added":7}"#;
    assert_eq!(<JsonCodec as Codec<Order>>::decode(&JsonCodec, newer).unwrap(), order(1, "x"));
}

#[tokio::test]
async fn typed_create_read_compare_and_set_ids_and_delete() {
    init_tracing();
    bounded(LIMIT, async {
        let fw = plain_framework(&shared_connect().await, SESSION).await;
        let root = unique_path("typed", "crud");
        let orders = orders_at(&fw, &root);
        assert!(matches!(orders.read().await, Err(Error::InvalidPath { .. })), "an unresolved path is refused");
        assert_eq!(orders.ids::<u64>().await.unwrap(), Vec::<u64>::new(), "no parent, no ids");

        for id in [3u64, 1, 20] {
            let created = orders.resolved([id]).unwrap().create(&order(id, "tea")).await.unwrap();
            assert_eq!(created.path, format!("{root}/{id}"));
        }
        let one = orders.resolved([1]).unwrap();
        assert!(one.create(&order(1, "again")).await.unwrap_err().is_node_exists());

        let read = one.read().await.unwrap();
        assert_eq!(read.value, order(1, "tea"));
        assert_eq!(read.path.full_path().unwrap(), format!("{root}/1"));
        assert_eq!(read.stat.version, 0);
        let raw = fw.get_data(&format!("{root}/1")).await.unwrap().0;
        assert_eq!(raw, JsonCodec.encode(&order(1, "tea")).unwrap(), "plain JSON on the node");

        // Compare-and-set: the version read wins once; the stale one is refused and writes nothing.
        let stat = one.compare_and_set(&order(1, "coffee"), read.stat.version).await.unwrap();
        assert_eq!(stat.version, 1);
        let stale = one.compare_and_set(&order(1, "juice"), read.stat.version).await.unwrap_err();
        assert!(matches!(stale, Error::BadVersion { expected: 0, .. }), "{stale:?}");
        assert_eq!(one.read().await.unwrap().value.item, "coffee");
        one.set(&order(1, "water")).await.unwrap();

        // Children as typed ids, sorted by name; the children of a node as paths.
        assert_eq!(orders.ids::<u64>().await.unwrap(), vec![1, 20, 3]);
        assert_eq!(orders.ids::<String>().await.unwrap(), ["1", "20", "3"]);
        let parent = ModeledFramework::<Order>::new(&fw, ModelSpec::new(ZPath::parse(&root).unwrap()));
        let children: Vec<String> = parent.children().await.unwrap().iter().map(ToString::to_string).collect();
        assert_eq!(children, [format!("{root}/1"), format!("{root}/20"), format!("{root}/3")]);
        fw.create(&format!("{root}/not-a-number")).await.unwrap();
        let err = orders.ids::<u64>().await.unwrap_err();
        assert!(matches!(&err, Error::CorruptData { path, .. } if path.ends_with("/not-a-number")), "{err:?}");

        // Bytes that are not the model: a typed error naming the codec, never a panic.
        fw.set_data(&format!("{root}/20"), b"{\"id\":\"twenty\"}").await.unwrap();
        let err = orders.resolved([20]).unwrap().read().await.unwrap_err();
        assert!(matches!(&err, Error::CorruptData { expected: "JSON value", .. }), "{err:?}");

        // Deletes, with and without a version.
        let three = orders.resolved([3]).unwrap();
        let err = three.compare_and_delete(5).await.unwrap_err();
        assert!(err.is_bad_version(), "{err:?}");
        three.compare_and_delete(0).await.unwrap();
        assert_eq!(three.exists().await.unwrap(), None);
        one.delete().await.unwrap();
        fw.delete(&root).recursive().await.unwrap();
        fw.close().await;
    })
    .await;
}

/// The next event of `events` that is not `Initialized`.
async fn next_change(events: &mut ModeledCacheEvents<Order>) -> ModeledCacheEvent<Order> {
    within(EVENT, "a modeled cache event", async {
        loop {
            match events.next().await.expect("the cache's events end only when it closes") {
                ModeledCacheEvent::Initialized => continue,
                other => return other,
            }
        }
    })
    .await
}

/// A wait for a load that cannot come ends with the reason, as `CuratorCache::initialized`
/// does: a cache never started, and one whose framework closed before its start.
#[tokio::test]
async fn waiting_for_a_load_that_cannot_come_is_refused() {
    init_tracing();
    bounded(LIMIT, async {
        let fw = plain_framework(&shared_connect().await, SESSION).await;
        let orders = orders_at(&fw, &unique_path("typed", "never-loaded"));
        let unstarted = orders.cached().unwrap();
        let waited = within(EVENT, "an unstarted cache's wait", unstarted.initialized()).await;
        assert!(matches!(waited, Err(Error::NotStarted)), "{waited:?}");

        let closing = orders.cached().unwrap();
        fw.close().await;
        assert!(closing.start().await.is_err(), "a start on a closed framework fails");
        let waited = within(EVENT, "the wait after a failed start", closing.initialized()).await;
        assert!(matches!(waited, Err(Error::NotStarted)), "a failed start leaves it unstarted: {waited:?}");
        closing.close().await;
        let waited = within(EVENT, "the wait after close", closing.initialized()).await;
        assert!(matches!(waited, Err(Error::Closed)), "{waited:?}");
    })
    .await;
}

#[tokio::test]
async fn the_cache_keeps_the_last_good_value_and_reports_every_bad_one() {
    init_tracing();
    bounded(LIMIT, async {
        let fw = plain_framework(&shared_connect().await, SESSION).await;
        let root = unique_path("typed", "cache");
        let orders = orders_at(&fw, &root);
        orders.resolved(["a"]).unwrap().create(&order(1, "tea")).await.unwrap();
        orders.resolved(["b"]).unwrap().create(&order(2, "milk")).await.unwrap();

        let cache = orders.cached().unwrap();
        let mut events = cache.events();
        cache.start().await.unwrap();
        within(EVENT, "the initial load", cache.initialized()).await.unwrap();
        let models = cache.models();
        assert_eq!(
            models.iter().map(|m| (m.ids.clone(), m.value.item.clone())).collect::<Vec<_>>(),
            [(vec!["a".to_owned()], "tea".to_owned()), (vec!["b".to_owned()], "milk".to_owned())]
        );
        for _ in 0..2 {
            assert!(matches!(next_change(&mut events).await, ModeledCacheEvent::Added(_)));
        }

        // A bad write: told once, with path and version; the last good value stays.
        let a = format!("{root}/a");
        let stat = fw.set_data(&a, b"not json").await.unwrap();
        match next_change(&mut events).await {
            ModeledCacheEvent::DecodeFailed(failure) => {
                assert_eq!((failure.path.as_str(), failure.version), (a.as_str(), stat.version));
                assert!(!failure.error.is_empty());
            }
            other => panic!("{other:?}"),
        }
        let kept = cache.get(["a"]).expect("the last good value is kept");
        assert_eq!((kept.value.item.as_str(), kept.stat.version), ("tea", 0));
        assert_eq!(cache.failures().len(), 1);

        // A second bad version is told again.
        let stat = fw.set_data(&a, b"[1,2]").await.unwrap();
        assert!(
            matches!(next_change(&mut events).await, ModeledCacheEvent::DecodeFailed(f) if f.version == stat.version)
        );

        // A good write replaces it and clears the failure.
        orders.resolved(["a"]).unwrap().set(&order(1, "coffee")).await.unwrap();
        match next_change(&mut events).await {
            ModeledCacheEvent::Updated(model) => assert_eq!(model.value.item, "coffee"),
            other => panic!("{other:?}"),
        }
        assert!(cache.failures().is_empty());

        // A node created with bad data has no value, only the failure.
        fw.create(&format!("{root}/c")).data(b"\x00").await.unwrap();
        assert!(matches!(next_change(&mut events).await, ModeledCacheEvent::DecodeFailed(f) if f.path.ends_with("/c")));
        assert!(cache.get(["c"]).is_none());

        orders.resolved(["b"]).unwrap().delete().await.unwrap();
        match next_change(&mut events).await {
            ModeledCacheEvent::Removed(model) => assert_eq!(model.value.item, "milk"),
            other => panic!("{other:?}"),
        }
        assert_eq!(cache.models().len(), 1);

        cache.close().await;
        assert!(within(EVENT, "the stream's end", events.next()).await.is_none(), "closing ends the stream");
        fw.delete(&root).recursive().await.unwrap();
        fw.close().await;
    })
    .await;
}

#[tokio::test]
async fn compressed_specs_and_a_compressing_framework_store_gzip_and_recipes_stay_plain() {
    init_tracing();
    bounded(LIMIT, async {
        let connect = shared_connect().await;
        let fw = plain_framework(&connect, SESSION).await;
        let root = unique_path("typed", "gzip");

        // A compressed spec on a plain framework.
        let spec =
            ModelSpec::new(ZPath::parse(&format!("{root}/one")).unwrap()).parents(Parents::Containers).compressed();
        let one: ModeledFramework<Order> = ModeledFramework::new(&fw, spec);
        one.create(&order(7, "tea")).await.unwrap();
        let (stored, _) = fw.get_data(&format!("{root}/one")).await.unwrap();
        assert_eq!(stored[..10], gzip::HEADER);
        assert_eq!(gzip::decompress(&stored).unwrap(), JsonCodec.encode(&order(7, "tea")).unwrap());
        assert_eq!(one.read().await.unwrap().value, order(7, "tea"));
        assert_eq!(
            fw.get_data(&format!("{root}/one")).decompressed().await.unwrap().0,
            JsonCodec.encode(&order(7, "tea")).unwrap()
        );
        let cache = one.cached().unwrap();
        cache.start().await.unwrap();
        within(EVENT, "the load", cache.initialized()).await.unwrap();
        assert_eq!(cache.get(Vec::<String>::new()).map(|m| m.value.id), Some(7), "the cache decompresses");
        cache.close().await;

        // A framework that compresses by default: the data plane compresses, recipes do not.
        let zipping = Framework::builder(&connect).session_timeout(SESSION).enable_compression().start().await.unwrap();
        let plain_path = format!("{root}/data");
        zipping.create(&plain_path).data(b"hello").await.unwrap();
        assert_eq!(gzip::decompress(&fw.get_data(&plain_path).await.unwrap().0).unwrap(), b"hello");
        assert_eq!(zipping.get_data(&plain_path).await.unwrap().0, b"hello");
        assert!(gzip::is_gzip(&zipping.get_data(&plain_path).undecompressed().await.unwrap().0));
        zipping.set_data(&plain_path, b"world").uncompressed().await.unwrap();
        assert_eq!(fw.get_data(&plain_path).await.unwrap().0, b"world");
        let err = zipping.get_data(&plain_path).await.unwrap_err();
        assert!(matches!(err, Error::CorruptData { .. }), "plain data read as gzip: {err:?}");
        let count = SharedCount::new(&zipping, &format!("{root}/count"), 5).unwrap();
        count.start().await.unwrap();
        assert_eq!(fw.get_data(&format!("{root}/count")).await.unwrap().0, [0, 0, 0, 5], "the recipe's layout");
        count.set(6).await.unwrap();
        assert_eq!(count.count().unwrap(), 6);
        drop(count);

        // Data that would decompress to more than any reader here takes is not written.
        let huge = vec![0u8; gzip::MAX_DECOMPRESSED + 1];
        let too_large = |r: Result<(), Error>| matches!(r, Err(Error::TooLarge { name: "data", .. }));
        assert!(too_large(zipping.create(&format!("{root}/huge")).data(&huge).await.map(drop)));
        assert!(too_large(fw.set_data(&plain_path, &huge).compressed().await.map(drop)));
        assert!(fw.exists(&format!("{root}/huge")).await.unwrap().is_none());

        zipping.close().await;
        fw.delete(&root).recursive().await.unwrap();
        fw.close().await;
    })
    .await;
}

#[tokio::test]
async fn a_typed_shared_value_is_json_and_reports_bad_bytes_without_ending() {
    init_tracing();
    bounded(LIMIT, async {
        let fw = plain_framework(&shared_connect().await, SESSION).await;
        let path = format!("{}/limits", unique_path("typed", "shared"));
        let value = TypedSharedValue::new(&fw, &path, order(1, "seed")).unwrap();
        value.start().await.unwrap();
        assert_eq!(fw.get_data(&path).await.unwrap().0, JsonCodec.encode(&order(1, "seed")).unwrap());
        let seen = value.versioned_value().unwrap();
        assert!(value.try_set(&seen, &order(1, "first")).await.unwrap());
        assert!(!value.try_set(&seen, &order(1, "stale")).await.unwrap(), "a stale version");
        assert_eq!(value.value().unwrap().item, "first");

        let mut changes = value.changes();
        fw.set_data(&path, b"garbage").await.unwrap();
        let failure = within(EVENT, "the bad value", changes.next()).await.expect("open").unwrap_err();
        assert_eq!((failure.path.as_str(), failure.version), (path.as_str(), 2));
        assert!(matches!(value.value(), Err(Error::CorruptData { .. })));
        fw.set_data(&path, &JsonCodec.encode(&order(1, "good")).unwrap()).await.unwrap();
        let next = within(EVENT, "the good value", changes.next()).await.expect("open").unwrap();
        assert_eq!(next.value().item, "good");
        value.close();
        fw.delete(&path).await.unwrap();
        fw.close().await;
    })
    .await;
}

#[tokio::test]
async fn a_nested_template_is_cached_from_its_fixed_part_under_a_namespace() {
    init_tracing();
    bounded(LIMIT, async {
        let namespace = unique_path("typed", "ns");
        let fw = Framework::builder(&shared_connect().await)
            .session_timeout(SESSION)
            .namespace(&namespace)
            .start()
            .await
            .unwrap();
        let spec = ModelSpec::new(ZPath::parse_with_ids("/tenants/{tenant}/orders/{id}").unwrap())
            .parents(Parents::Containers);
        let orders: ModeledFramework<Order> = ModeledFramework::new(&fw, spec);
        orders.resolved(["acme", "1"]).unwrap().create(&order(1, "tea")).await.unwrap();
        // A node beside the template's shape: in the cached subtree, not a model.
        fw.create("/tenants/acme/invoices").await.unwrap();

        let cache = orders.cached().unwrap();
        let mut events = cache.events();
        cache.start().await.unwrap();
        within(EVENT, "the load", cache.initialized()).await.unwrap();
        assert_eq!(cache.models().iter().map(|m| m.ids.clone()).collect::<Vec<_>>(), [vec!["acme", "1"]]);
        assert!(matches!(next_change(&mut events).await, ModeledCacheEvent::Added(_)));

        orders.resolved(["globex", "7"]).unwrap().create(&order(7, "coffee")).await.unwrap();
        match next_change(&mut events).await {
            ModeledCacheEvent::Added(model) => {
                assert_eq!(model.path, "/tenants/globex/orders/7", "namespace stripped");
                assert_eq!(model.ids, ["globex", "7"]);
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(cache.get(["globex", "7"]).map(|m| m.value.item.clone()).as_deref(), Some("coffee"));
        assert_eq!(orders.resolved(["acme"]).unwrap().ids::<u32>().await.unwrap(), [1]);
        let raw = fw.get_data("/tenants/globex/orders/7").await.unwrap().0;
        assert_eq!(raw, JsonCodec.encode(&order(7, "coffee")).unwrap());
        cache.close().await;
        fw.delete("/tenants").recursive().await.unwrap();
        fw.close().await;
    })
    .await;
}

#[tokio::test]
async fn the_specs_create_options_apply() {
    init_tracing();
    bounded(LIMIT, async {
        let fw = plain_framework(&shared_connect().await, SESSION).await;
        let root = unique_path("typed", "options");
        // Curator's default: no parents.
        let strict: ModeledFramework<Order> =
            ModeledFramework::new(&fw, ModelSpec::new(ZPath::parse(&format!("{root}/a/b")).unwrap()));
        assert!(strict.create(&order(1, "x")).await.unwrap_err().is_no_node());

        let spec = ModelSpec::new(ZPath::parse(&format!("{root}/member")).unwrap())
            .parents(Parents::Persistent)
            .mode(zk_recipes::CreateMode::Ephemeral)
            .protected()
            .acl(zk_recipes::zk::Acls::anyone_all().to_vec());
        let member: ModeledFramework<Order> = ModeledFramework::new(&fw, spec);
        let created = member.create(&order(2, "y")).await.unwrap();
        let name = created.path.rsplit('/').next().unwrap();
        assert!(zk_recipes::protocol::is_protected(name) && name.ends_with("member"), "{name}");
        assert_ne!(created.stat.ephemeral_owner, 0, "ephemeral");
        assert_eq!(fw.exists(&root).await.unwrap().map(|s| s.ephemeral_owner), Some(0), "a persistent parent");
        let at_created =
            ModeledFramework::<Order>::new(&fw, member.spec().with_path(ZPath::parse(&created.path).unwrap()));
        assert_eq!(at_created.read().await.unwrap().value, order(2, "y"));
        fw.delete(&root).recursive().await.unwrap();
        fw.close().await;
    })
    .await;
}

#[tokio::test]
async fn typed_ops_commit_together_with_untyped_ones_and_write_what_the_typed_calls_write() {
    init_tracing();
    bounded(LIMIT, async {
        let fw = plain_framework(&shared_connect().await, SESSION).await;
        let root = unique_path("typed", "tx");
        // A transaction creates no parents (nor does Curator's createOp).
        fw.create(&root).await.unwrap();
        let orders = orders_at(&fw, &root);
        let three = orders.resolved([3]).unwrap();
        three.create(&order(3, "tea")).await.unwrap();
        let seen = three.read().await.unwrap();

        let results = fw
            .transaction()
            .add_op(orders.resolved([1]).unwrap().create_op(&order(1, "milk")).unwrap())
            .add_op(orders.resolved([2]).unwrap().create_op(&order(2, "juice")).unwrap())
            .add_op(three.update_op_with_version(&order(3, "coffee"), seen.stat.version).unwrap())
            .set_data(&root, b"untyped")
            .commit()
            .await
            .unwrap();
        assert_eq!(results.len(), 4);
        assert!(matches!(&results[0], OpResult::Created { path, .. } if *path == format!("{root}/1")), "{results:?}");
        assert!(matches!(&results[1], OpResult::Created { path, .. } if *path == format!("{root}/2")), "{results:?}");
        assert!(matches!(&results[2], OpResult::DataSet { stat } if stat.version == 1), "{results:?}");
        assert_eq!(orders.resolved([1]).unwrap().read().await.unwrap().value, order(1, "milk"));
        assert_eq!(orders.resolved([2]).unwrap().read().await.unwrap().value, order(2, "juice"));
        assert_eq!(three.read().await.unwrap().value, order(3, "coffee"));
        assert_eq!(fw.get_data(&root).await.unwrap().0, b"untyped");
        let raw = fw.get_data(&format!("{root}/1")).await.unwrap().0;
        assert_eq!(raw, JsonCodec.encode(&order(1, "milk")).unwrap(), "the bytes create writes");

        // A compressed spec: the op's bytes are those the typed create stores.
        let spec = ModelSpec::new(ZPath::parse(&root).unwrap().child_parameter("name").unwrap()).compressed();
        let zipped: ModeledFramework<Order> = ModeledFramework::new(&fw, spec);
        zipped.resolved(["by-create"]).unwrap().create(&order(7, "tea")).await.unwrap();
        let op = zipped.resolved(["by-op"]).unwrap().create_op(&order(7, "tea")).unwrap();
        assert_eq!(op.path(), format!("{root}/by-op"));
        zipped.in_transaction([op]).await.unwrap();
        let (by_create, by_op) = (
            fw.get_data(&format!("{root}/by-create")).await.unwrap().0,
            fw.get_data(&format!("{root}/by-op")).await.unwrap().0,
        );
        assert_eq!(by_op, by_create);
        assert_eq!(gzip::decompress(&by_op).unwrap(), JsonCodec.encode(&order(7, "tea")).unwrap());
        assert_eq!(zipped.resolved(["by-op"]).unwrap().read().await.unwrap().value, order(7, "tea"));

        // in_transaction: deletes and checks, with and without versions.
        let one = orders.resolved([1]).unwrap();
        let results = orders
            .in_transaction([
                one.check_exists_op_with_version(0).unwrap(),
                one.delete_op_with_version(0).unwrap(),
                three.check_exists_op().unwrap(),
                orders.resolved([2]).unwrap().delete_op().unwrap(),
                three.update_op(&order(3, "water")).unwrap(),
            ])
            .await
            .unwrap();
        assert_eq!(results[..4], [OpResult::Checked, OpResult::Deleted, OpResult::Checked, OpResult::Deleted]);
        assert_eq!(one.exists().await.unwrap(), None);
        assert_eq!(three.read().await.unwrap().value.item, "water");
        fw.delete(&root).recursive().await.unwrap();
        fw.close().await;
    })
    .await;
}

#[tokio::test]
async fn a_stale_typed_version_commits_nothing_and_fails_as_the_untyped_transaction() {
    init_tracing();
    bounded(LIMIT, async {
        let fw = plain_framework(&shared_connect().await, SESSION).await;
        let root = unique_path("typed", "tx-stale");
        fw.create(&root).await.unwrap();
        let orders = orders_at(&fw, &root);
        let three = orders.resolved([3]).unwrap();
        three.create(&order(3, "tea")).await.unwrap();
        let seen = three.read().await.unwrap();
        three.set(&order(3, "moved on")).await.unwrap();
        let three_path = format!("{root}/3");

        let typed = fw
            .transaction()
            .add_op(orders.resolved([1]).unwrap().create_op(&order(1, "milk")).unwrap())
            .add_op(orders.resolved([2]).unwrap().create_op(&order(2, "juice")).unwrap())
            .add_op(three.update_op_with_version(&order(3, "coffee"), seen.stat.version).unwrap())
            .commit()
            .await
            .unwrap_err();
        let untyped = fw
            .transaction()
            .create(&format!("{root}/1"), &JsonCodec.encode(&order(1, "milk")).unwrap(), CreateMode::Persistent)
            .create(&format!("{root}/2"), &JsonCodec.encode(&order(2, "juice")).unwrap(), CreateMode::Persistent)
            .set_data(&three_path, &JsonCodec.encode(&order(3, "coffee")).unwrap())
            .version(seen.stat.version)
            .commit()
            .await
            .unwrap_err();
        for err in [&typed, &untyped] {
            assert!(
                matches!(err, Error::TransactionFailed { index: 2, path, error: ZkError::BadVersion } if *path == three_path),
                "{err:?}"
            );
        }
        let stale = orders
            .in_transaction([
                orders.resolved([1]).unwrap().create_op(&order(1, "milk")).unwrap(),
                three.check_exists_op_with_version(seen.stat.version).unwrap(),
            ])
            .await
            .unwrap_err();
        assert!(matches!(stale, Error::TransactionFailed { index: 1, error: ZkError::BadVersion, .. }), "{stale:?}");

        assert_eq!(children(&fw, &root).await, ["3"], "no create was applied");
        assert_eq!(three.read().await.unwrap().value.item, "moved on");
        fw.delete(&root).recursive().await.unwrap();
        fw.close().await;
    })
    .await;
}

/// A codec that refuses every value.
struct Refusing;

impl Codec<Order> for Refusing {
    fn encode(&self, _: &Order) -> Result<Vec<u8>, CodecError> {
        Err("refused".into())
    }
    fn decode(&self, _: &[u8]) -> Result<Order, CodecError> {
        Err("refused".into())
    }
    fn name(&self) -> &'static str {
        "nothing"
    }
}

#[tokio::test]
async fn bad_typed_ops_are_typed_errors() {
    init_tracing();
    bounded(LIMIT, async {
        let fw = plain_framework(&shared_connect().await, SESSION).await;
        let root = unique_path("typed", "tx-bad");
        let orders = orders_at(&fw, &root);
        // An unresolved template names no node.
        assert!(matches!(orders.create_op(&order(1, "x")), Err(Error::InvalidPath { .. })));
        assert!(matches!(orders.update_op(&order(1, "x")), Err(Error::InvalidPath { .. })));
        assert!(matches!(orders.update_op_with_version(&order(1, "x"), 0), Err(Error::InvalidPath { .. })));
        assert!(matches!(orders.delete_op(), Err(Error::InvalidPath { .. })));
        assert!(matches!(orders.delete_op_with_version(0), Err(Error::InvalidPath { .. })));
        assert!(matches!(orders.check_exists_op(), Err(Error::InvalidPath { .. })));
        assert!(matches!(orders.check_exists_op_with_version(0), Err(Error::InvalidPath { .. })));

        // A value the codec refuses; a protected spec.
        let node = ZPath::parse(&format!("{root}/n")).unwrap();
        let refusing = ModeledFramework::new(&fw, ModelSpec::with_codec(node.clone(), Refusing));
        assert!(matches!(refusing.create_op(&order(1, "x")), Err(Error::InvalidArgument { name: "value", .. })));
        assert!(matches!(refusing.update_op(&order(1, "x")), Err(Error::InvalidArgument { name: "value", .. })));
        let protected: ModeledFramework<Order> = ModeledFramework::new(&fw, ModelSpec::new(node.clone()).protected());
        assert!(matches!(protected.create_op(&order(1, "x")), Err(Error::InvalidArgument { name: "spec", .. })));

        // Refused by the commit, before anything is sent: no ops, a TTL on an ephemeral node.
        let none = orders.in_transaction([]).await;
        assert!(matches!(none, Err(Error::InvalidArgument { name: "transaction", .. })), "{none:?}");
        let spec = ModelSpec::new(node).mode(CreateMode::Ephemeral).ttl(std::time::Duration::from_secs(5));
        let ttl: ModeledFramework<Order> = ModeledFramework::new(&fw, spec);
        let refused = ttl.in_transaction([ttl.create_op(&order(1, "x")).unwrap()]).await;
        assert!(matches!(refused, Err(Error::InvalidArgument { name: "ttl", .. })), "{refused:?}");
        assert_eq!(fw.exists(&root).await.unwrap(), None, "nothing was written");
        fw.close().await;
    })
    .await;
}

/// When its framework closes, a `ModeledCache`'s streams end (after what was queued) and it
/// keeps the values it held.
#[tokio::test]
async fn a_modeled_caches_streams_end_when_its_framework_closes() {
    init_tracing();
    bounded(LIMIT, async {
        let fw = plain_framework(&shared_connect().await, SESSION).await;
        let root = unique_path("typed", "cache-framework-closes");
        let orders = orders_at(&fw, &root);
        orders.resolved(["a"]).unwrap().create(&order(1, "tea")).await.unwrap();
        let cache = orders.cached().unwrap();
        let mut events = cache.events();
        cache.start().await.unwrap();
        within(EVENT, "the initial load", cache.initialized()).await.unwrap();
        fw.close().await;
        let ended = within(EVENT, "the stream's end", async {
            let mut taken = 0;
            while events.next().await.is_some() {
                taken += 1;
            }
            taken
        })
        .await;
        assert!(ended >= 1, "the queued events come first");
        assert_eq!(cache.models().len(), 1, "the values held stay");
        let later = within(EVENT, "a later stream's end", cache.events().collect::<Vec<_>>()).await;
        assert!(later.is_empty(), "{}", later.len());
        cache.close().await;
        let cleanup = plain_framework(&shared_connect().await, SESSION).await;
        cleanup.delete(&root).recursive().await.unwrap();
        cleanup.close().await;
    })
    .await;
}
