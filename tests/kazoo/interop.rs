//! kazoo's recipes against real kazoo (the Python client, through `tests/common/kazoo.rs`):
//! a lease held by either side refuses the other until it ends, on a fixed clock and on the
//! real one; two leases of a `MultiNonBlockingLease` shared by kazoo and Rust refuse a third
//! from either; and kazoo and Rust `SetPartitioner` members in one party divide the items
//! between them, each item owned once, through a kazoo and a Rust member leaving.
//!
//! Skipped (with a message) when python3 or kazoo is missing, unless `ZKR_REQUIRE_KAZOO=1`.

use crate::common;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::fixtures::*;
use common::kazoo::{self, KazooPeer};
use common::timing::{INTEROP_EVENT, INTEROP_SESSION as SESSION, LIMIT, SLOW_LIMIT};
use tokio::sync::Mutex;
use zk_recipes::protocol::kazoo::{decode_lease_record, encode_lease_record, parse_utc};
use zk_recipes::{Framework, MultiNonBlockingLease, NonBlockingLease, PartitionState};

use super::set_partitioner::{items, join, Member};

const T0: u64 = 1_800_000_000; // 2027-01-15T08:00:00
const HOUR: Duration = Duration::from_secs(3600);

fn at(secs: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(secs)
}

/// The holder and end of the record at `<path>/lease_holder`.
async fn record(fw: &Framework, path: &str) -> (String, String) {
    let data = fw.get_data(&format!("{path}/lease_holder")).await.unwrap().0;
    let record = decode_lease_record(&data).unwrap();
    (record.holder, record.end)
}

#[tokio::test]
async fn kazoo_and_rust_leases_refuse_each_other_until_the_end() {
    bounded(LIMIT, async {
        let connect = shared_connect().await;
        let Some(mut py) = kazoo::peer(&connect).await else { return };
        let fw = plain_framework(&connect, SESSION).await;
        let path = unique_path("kazoo-interop", "lease");

        assert!(py.lease(&path, HOUR, "py-host", Some(at(T0))).await.unwrap());
        let data = fw.get_data(&format!("{path}/lease_holder")).await.unwrap().0;
        assert_eq!(
            data,
            encode_lease_record("py-host", at(T0 + 3600)),
            "kazoo's record is this crate's, byte for byte"
        );
        for t in [T0, T0 + 60, T0 + 3599] {
            let rust = NonBlockingLease::obtain_at(&fw, &path, HOUR, "rs-host", at(t)).await.unwrap();
            assert!(!rust.obtained(), "kazoo's lease lasts at {t}");
        }
        let rust = NonBlockingLease::obtain_at(&fw, &path, HOUR, "rs-host", at(T0 + 3600)).await.unwrap();
        assert_eq!(rust.end(), Some(at(T0 + 7200)), "at kazoo's end the lease is free for Rust");

        // The other way round.
        for t in [T0 + 3600, T0 + 5000, T0 + 7199] {
            assert!(!py.lease(&path, HOUR, "py-host", Some(at(t))).await.unwrap(), "Rust's lease lasts at {t}");
        }
        assert!(py.lease(&path, HOUR, "py-host", Some(at(T0 + 7200))).await.unwrap(), "at Rust's end kazoo gets it");
        assert_eq!(record(&fw, &path).await, ("py-host".to_owned(), "2027-01-15T11:00:00".to_owned()));

        // A lease is the identifier's, whichever client renews it.
        let renewed = NonBlockingLease::obtain_at(&fw, &path, HOUR, "py-host", at(T0 + 7300)).await.unwrap();
        assert_eq!(renewed.end(), Some(at(T0 + 10_900)), "Rust renews kazoo's lease of the same identifier");
        assert!(!py.lease(&path, HOUR, "rs-host", Some(at(T0 + 7400))).await.unwrap(), "and kazoo refuses another");
        assert_eq!(children(&fw, &path).await, ["lease_holder"], "neither side left a lock node");

        // Python's JSON escapes what is not ASCII (a character beyond the BMP as a surrogate
        // pair), and so does this crate: the same identifier is the same record.
        let unicode = unique_path("kazoo-interop", "lease-unicode");
        let identifier = "hôst-\u{1f600}-\"q\"";
        assert!(py.lease(&unicode, HOUR, identifier, Some(at(T0))).await.unwrap());
        let data = fw.get_data(&format!("{unicode}/lease_holder")).await.unwrap().0;
        assert_eq!(data, encode_lease_record(identifier, at(T0 + 3600)), "{}", String::from_utf8_lossy(&data));
        let renewed = NonBlockingLease::obtain_at(&fw, &unicode, HOUR, identifier, at(T0 + 60)).await.unwrap();
        assert!(renewed.obtained(), "Rust reads kazoo's escaped identifier as its own");

        py.quit().await.unwrap();
        fw.delete(&unicode).recursive().await.unwrap();
        fw.delete(&path).recursive().await.unwrap();
        fw.close().await;
    })
    .await;
}

/// On the real clocks: a lease of a few seconds taken by one side refuses the other at once,
/// and the other obtains it once it has run out.
#[tokio::test]
async fn a_short_lease_runs_out_for_the_other_client() {
    bounded(LIMIT, async {
        const SHORT: Duration = Duration::from_secs(3);
        let connect = shared_connect().await;
        let Some(py) = kazoo::peer(&connect).await else { return };
        let py = Mutex::new(py);
        let fw = plain_framework(&connect, SESSION).await;

        // kazoo holds first. The end is written in whole seconds: at least 2 s away.
        let path = unique_path("kazoo-interop", "lease-kazoo-first");
        assert!(py.lock().await.lease(&path, SHORT, "py-host", None).await.unwrap());
        assert!(!NonBlockingLease::obtain(&fw, &path, HOUR, "rs-host").await.unwrap().obtained());
        let end = parse_utc(&record(&fw, &path).await.1).unwrap();
        eventually(SHORT + INTEROP_EVENT, "Rust obtaining kazoo's lease once it ran out", || async {
            let lease = NonBlockingLease::obtain(&fw, &path, HOUR, "rs-host").await.map_err(|e| e.to_string())?;
            if lease.obtained() {
                Ok(())
            } else {
                Err(format!("refused; the record: {:?}", record(&fw, &path).await))
            }
        })
        .await;
        assert!(SystemTime::now() >= end, "obtained only once kazoo's lease ended");
        assert_eq!(record(&fw, &path).await.0, "rs-host");
        assert!(!py.lock().await.lease(&path, HOUR, "py-host", None).await.unwrap(), "Rust's hour lasts");
        let kazoo_first = path;

        // Rust holds first.
        let path = unique_path("kazoo-interop", "lease-rust-first");
        assert!(NonBlockingLease::obtain(&fw, &path, SHORT, "rs-host").await.unwrap().obtained());
        assert!(!py.lock().await.lease(&path, HOUR, "py-host", None).await.unwrap());
        let end = parse_utc(&record(&fw, &path).await.1).unwrap();
        eventually(SHORT + INTEROP_EVENT, "kazoo obtaining Rust's lease once it ran out", || async {
            if py.lock().await.lease(&path, HOUR, "py-host", None).await? {
                Ok(())
            } else {
                Err(format!("refused; the record: {:?}", record(&fw, &path).await))
            }
        })
        .await;
        assert!(SystemTime::now() >= end, "obtained only once Rust's lease ended");
        assert_eq!(record(&fw, &path).await.0, "py-host");
        assert!(!NonBlockingLease::obtain(&fw, &path, HOUR, "rs-host").await.unwrap().obtained(), "kazoo's hour lasts");

        py.into_inner().quit().await.unwrap();
        for path in [kazoo_first, path] {
            fw.delete(&path).recursive().await.unwrap();
        }
        fw.close().await;
    })
    .await;
}

#[tokio::test]
async fn a_multi_lease_of_two_shared_by_kazoo_and_rust_refuses_a_third() {
    bounded(LIMIT, async {
        let connect = shared_connect().await;
        let Some(mut py) = kazoo::peer(&connect).await else { return };
        let fw = plain_framework(&connect, SESSION).await;
        let path = unique_path("kazoo-interop", "multi");

        assert!(py.multi_lease(2, &path, HOUR, "py-1", Some(at(T0))).await.unwrap());
        let rust = MultiNonBlockingLease::obtain_at(&fw, 2, &path, HOUR, "rs-1", at(T0)).await.unwrap();
        assert_eq!(rust.slot(), Some(1), "kazoo took slot 0");
        assert_eq!(record(&fw, &format!("{path}/0")).await.0, "py-1");
        assert_eq!(record(&fw, &format!("{path}/1")).await.0, "rs-1");

        assert!(!py.multi_lease(2, &path, HOUR, "py-2", Some(at(T0 + 10))).await.unwrap(), "a third from kazoo");
        let third = MultiNonBlockingLease::obtain_at(&fw, 2, &path, HOUR, "rs-2", at(T0 + 10)).await.unwrap();
        assert_eq!(third.slot(), None, "a third from Rust");

        // Each renews its own slot; once both have ended, the others get them.
        assert!(py.multi_lease(2, &path, HOUR, "py-1", Some(at(T0 + 20))).await.unwrap());
        assert_eq!(record(&fw, &format!("{path}/0")).await, ("py-1".to_owned(), "2027-01-15T09:00:20".to_owned()));
        let renewed = MultiNonBlockingLease::obtain_at(&fw, 2, &path, HOUR, "rs-1", at(T0 + 20)).await.unwrap();
        assert_eq!(renewed.slot(), Some(1));
        assert!(!py.multi_lease(2, &path, HOUR, "py-2", Some(at(T0 + 3619))).await.unwrap());
        assert!(py.multi_lease(2, &path, HOUR, "py-2", Some(at(T0 + 3620))).await.unwrap());
        let later = MultiNonBlockingLease::obtain_at(&fw, 2, &path, HOUR, "rs-2", at(T0 + 3620)).await.unwrap();
        assert_eq!(later.slot(), Some(1));
        assert_eq!(record(&fw, &format!("{path}/0")).await.0, "py-2");
        assert_eq!(record(&fw, &format!("{path}/1")).await.0, "rs-2");

        py.quit().await.unwrap();
        fw.delete(&path).recursive().await.unwrap();
        fw.close().await;
    })
    .await;
}

/// What each member of a mixed party holds, seen by the member itself.
async fn shares(
    rust: &[&Member],
    kazoo: &Mutex<Vec<(String, KazooPeer)>>,
) -> Result<Vec<(String, Vec<String>)>, String> {
    let mut shares = Vec::new();
    for m in rust {
        let state = m.partitioner.state();
        if state != PartitionState::Acquired {
            return Err(format!("{} (Rust) is {state:?}", m.partitioner.identifier()));
        }
        shares.push((m.partitioner.identifier().to_owned(), m.partitioner.partition()));
    }
    for (id, peer) in kazoo.lock().await.iter_mut() {
        let (state, items) = peer.partition_state().await?;
        if state != "acquired" {
            return Err(format!("{id} (kazoo) is {state}"));
        }
        shares.push((id.clone(), items));
    }
    shares.sort();
    Ok(shares)
}

/// Waits until every member, kazoo's and Rust's, is acquired with a share of its own, the
/// shares together are `items` with none twice, and every item's lock directory holds one
/// node; then checks each share is kazoo's division of the sorted items by the sorted members.
async fn divided(
    rust: &[&Member],
    kazoo: &Mutex<Vec<(String, KazooPeer)>>,
    items: &[String],
    checker: &Framework,
    path: &str,
    what: &str,
) {
    let shares = eventually(INTEROP_EVENT, what, || async {
        let shares = shares(rust, kazoo).await?;
        let mut owned: Vec<String> = shares.iter().flat_map(|(_, share)| share.clone()).collect();
        owned.sort();
        if owned != items {
            return Err(format!("the shares {shares:?} are not the items once each"));
        }
        for item in items {
            let nodes = children(checker, &format!("{path}/locks/{item}")).await;
            if nodes.len() != 1 {
                return Err(format!("{item} has lock nodes {nodes:?}"));
            }
        }
        Ok(shares)
    })
    .await;
    for (i, (id, share)) in shares.iter().enumerate() {
        let expected: Vec<String> = items.iter().skip(i).step_by(shares.len()).cloned().collect();
        assert_eq!(share, &expected, "{what}: {id}'s share");
    }
}

/// Two kazoo members and two Rust members in one party over twelve items: each ends up with
/// kazoo's share, the shares disjoint and together all items; again after a kazoo member and
/// then a Rust member leave.
#[tokio::test]
async fn kazoo_and_rust_members_divide_one_set() {
    bounded(SLOW_LIMIT, async {
        let connect = shared_connect().await;
        let Some(first) = kazoo::peer(&connect).await else { return };
        let Some(second) = kazoo::peer(&connect).await else { return };
        let checker = plain_framework(&connect, SESSION).await;
        let path = unique_path("kazoo-interop", "partition");
        let items = items(12);

        // Members sort as a-py, b-rs, c-py, d-rs: the division interleaves the two clients.
        let kazoo = Mutex::new(vec![("a-py".to_owned(), first), ("c-py".to_owned(), second)]);
        for (id, peer) in kazoo.lock().await.iter_mut() {
            peer.partition_join(&path, id, super::set_partitioner::BOUNDARY, super::set_partitioner::REACTION, &items)
                .await
                .unwrap();
        }
        let mut rust = Vec::new();
        for id in ["b-rs", "d-rs"] {
            rust.push(join(plain_framework(&connect, SESSION).await, &path, id, &items).await);
        }
        let refs: Vec<&Member> = rust.iter().collect();
        divided(&refs, &kazoo, &items, &checker, &path, "two kazoo and two Rust members").await;

        // A kazoo member leaves.
        let (_, mut a) = kazoo.lock().await.remove(0);
        a.partition_finish().await.unwrap();
        assert_eq!(a.partition_state().await.unwrap().0, "failure");
        a.quit().await.unwrap();
        divided(&refs, &kazoo, &items, &checker, &path, "after a-py left").await;

        // A Rust member leaves.
        let Member { fw, partitioner, driver, .. } = rust.remove(0);
        partitioner.finish().await;
        within(INTEROP_EVENT, "b-rs's driver", driver).await.unwrap();
        fw.close().await;
        let refs: Vec<&Member> = rust.iter().collect();
        divided(&refs, &kazoo, &items, &checker, &path, "after b-rs left").await;

        for (_, mut peer) in kazoo.into_inner() {
            peer.partition_finish().await.unwrap();
            peer.quit().await.unwrap();
        }
        for Member { fw, partitioner, driver, .. } in rust {
            partitioner.finish().await;
            within(INTEROP_EVENT, "the driver", driver).await.unwrap();
            fw.close().await;
        }
        checker.delete(&path).recursive().await.unwrap();
        checker.close().await;
    })
    .await;
}
