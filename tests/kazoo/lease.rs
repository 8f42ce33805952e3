//! `NonBlockingLease` and `MultiNonBlockingLease` against real servers: kazoo's record byte for
//! byte, exclusion while a lease lasts, renewal by the same identifier, expiry, giving a lease
//! up by renewing it for no time, a duration under a second refused, another format's record
//! left alone, bad input, and attempts through a connection that keeps breaking (one
//! identifier ever holds the lease, no lock node left behind).

use crate::common;

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::fixtures::*;
use common::timing::{EVENT, LIMIT, SESSION};
use zk_recipes::protocol::kazoo;
use zk_recipes::{Error, MultiNonBlockingLease, NonBlockingLease};

fn at(secs: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(secs)
}

const T0: u64 = 1_800_000_000; // 2027-01-15T08:00:00
const HOUR: Duration = Duration::from_secs(3600);

#[tokio::test]
async fn a_lease_is_one_identifiers_until_it_ends_and_renews() {
    init_tracing();
    bounded(LIMIT, async {
        let fw = plain_framework(&shared_connect().await, SESSION).await;
        let path = unique_path("lease", "basic");
        let a = NonBlockingLease::obtain_at(&fw, &path, HOUR, "host-a", at(T0)).await.unwrap();
        assert!(a.obtained());
        assert_eq!(a.end(), Some(at(T0 + 3600)));
        let (data, _) = fw.get_data(&format!("{path}/lease_holder")).await.unwrap();
        assert_eq!(data, br#"{"version": 1, "holder": "host-a", "end": "2027-01-15T09:00:00"}"#);
        assert_eq!(children(&fw, &path).await, ["lease_holder"], "the lock node is gone");

        let b = NonBlockingLease::obtain_at(&fw, &path, HOUR, "host-b", at(T0 + 60)).await.unwrap();
        assert!(!b.obtained() && b.end().is_none(), "host-a's lease lasts");
        let renewed = NonBlockingLease::obtain_at(&fw, &path, HOUR, "host-a", at(T0 + 1800)).await.unwrap();
        assert_eq!(renewed.end(), Some(at(T0 + 5400)), "renewed from now");
        let late = NonBlockingLease::obtain_at(&fw, &path, HOUR, "host-b", at(T0 + 5399)).await.unwrap();
        assert!(!late.obtained(), "one second before the end");
        let b = NonBlockingLease::obtain_at(&fw, &path, HOUR, "host-b", at(T0 + 5400)).await.unwrap();
        assert!(b.obtained(), "at the end the lease is free");
        let record =
            kazoo::decode_lease_record(&fw.get_data(&format!("{path}/lease_holder")).await.unwrap().0).unwrap();
        assert_eq!((record.holder.as_str(), record.end.as_str()), ("host-b", "2027-01-15T10:30:00"));

        // The real clock: an end an hour from now, in whole seconds.
        let fresh = format!("{path}-now");
        let before = SystemTime::now();
        let now = NonBlockingLease::obtain(&fw, &fresh, HOUR, "host-c").await.unwrap();
        let end = now.end().expect("obtained");
        assert!(end + Duration::from_secs(1) > before + HOUR && end <= SystemTime::now() + HOUR, "{end:?}");
        assert!(!NonBlockingLease::obtain(&fw, &fresh, HOUR, "host-d").await.unwrap().obtained());
        fw.delete(&fresh).recursive().await.unwrap();
        fw.delete(&path).recursive().await.unwrap();
        fw.close().await;
    })
    .await;
}

/// A renewal replaces the record as kazoo's does, in one transaction (the old record's delete
/// and the new one's create): no reader, and no attempt cancelled half-way, ever finds the
/// lease without a record.
#[tokio::test]
async fn a_renewal_replaces_the_record_in_one_transaction() {
    init_tracing();
    bounded(LIMIT, async {
        let proxy = zk_recipes::testing::CountingProxy::start(&shared_connect().await).await.unwrap();
        let fw = plain_framework(&proxy.connect_string(), SESSION).await;
        let path = unique_path("lease", "one-transaction");
        assert!(NonBlockingLease::obtain_at(&fw, &path, HOUR, "host-a", at(T0)).await.unwrap().obtained());
        let before = proxy.counts();
        let renewed = NonBlockingLease::obtain_at(&fw, &path, HOUR, "host-a", at(T0 + 60)).await.unwrap();
        assert_eq!(renewed.end(), Some(at(T0 + 3660)));
        let sent = proxy.counts().since(&before);
        assert_eq!(
            (sent.get("multi"), sent.get("delete")),
            (1, 1),
            "the record in one multi, the lock node's delete: {sent:?}"
        );
        fw.delete(&path).recursive().await.unwrap();
        fw.close().await;
    })
    .await;
}

/// Neither kazoo nor this crate has a release: the holder renews for no time, and the lease
/// ends at once (an end of now is not after now), for another identifier in the same second.
#[tokio::test]
async fn a_renewal_for_no_time_gives_the_lease_up() {
    init_tracing();
    bounded(LIMIT, async {
        let fw = plain_framework(&shared_connect().await, SESSION).await;
        let path = unique_path("lease", "give-up");
        assert!(NonBlockingLease::obtain_at(&fw, &path, HOUR, "host-a", at(T0)).await.unwrap().obtained());
        let refused = NonBlockingLease::obtain_at(&fw, &path, HOUR, "host-b", at(T0 + 10)).await.unwrap();
        assert!(!refused.obtained());
        let given_up = NonBlockingLease::obtain_at(&fw, &path, Duration::ZERO, "host-a", at(T0 + 10)).await.unwrap();
        assert_eq!(given_up.end(), Some(at(T0 + 10)), "renewed to end now");
        let b = NonBlockingLease::obtain_at(&fw, &path, HOUR, "host-b", at(T0 + 10)).await.unwrap();
        assert_eq!(b.end(), Some(at(T0 + 3610)), "free in the same second");
        fw.delete(&path).recursive().await.unwrap();
        fw.close().await;
    })
    .await;
}

/// Ends are written in whole seconds, so a lease for less than a second could be written to
/// end in the very second it was obtained: obtained, yet free for another identifier at once.
/// Such a duration is refused before anything is written (zero, which gives a lease up, is
/// not); with one second the lease is held at least until the next second begins.
#[tokio::test]
async fn a_lease_for_less_than_a_second_is_refused() {
    init_tracing();
    bounded(LIMIT, async {
        let fw = plain_framework(&shared_connect().await, SESSION).await;
        let path = unique_path("lease", "sub-second");
        let now = at(T0) + Duration::from_millis(600);
        for short in [Duration::from_nanos(1), Duration::from_millis(500), Duration::from_millis(999)] {
            let refused = NonBlockingLease::obtain_at(&fw, &path, short, "host-a", now).await;
            assert!(matches!(refused, Err(Error::InvalidArgument { name: "duration", .. })), "{short:?}: {refused:?}");
            let refused = MultiNonBlockingLease::obtain_at(&fw, 2, &path, short, "host-a", now).await;
            assert!(matches!(refused, Err(Error::InvalidArgument { name: "duration", .. })), "{short:?}: {refused:?}");
        }
        assert!(fw.exists(&path).await.unwrap().is_none(), "a refused attempt writes nothing");
        let a = NonBlockingLease::obtain_at(&fw, &path, Duration::from_secs(1), "host-a", now).await.unwrap();
        assert_eq!(a.end(), Some(at(T0 + 1)));
        let b = NonBlockingLease::obtain_at(&fw, &path, HOUR, "host-b", now + Duration::from_millis(300)).await;
        assert!(!b.unwrap().obtained(), "held until the next second");
        fw.delete(&path).recursive().await.unwrap();
        fw.close().await;
    })
    .await;
}

#[tokio::test]
async fn another_format_or_a_broken_record_is_left_alone() {
    init_tracing();
    bounded(LIMIT, async {
        let fw = plain_framework(&shared_connect().await, SESSION).await;
        let path = unique_path("lease", "format");
        let holder = format!("{path}/lease_holder");
        fw.create(&holder).data(br#"{"version": 2, "holder": "new", "end": "2000-01-01T00:00:00"}"#).await.unwrap();
        let attempt = NonBlockingLease::obtain_at(&fw, &path, HOUR, "old", at(T0)).await.unwrap();
        assert!(!attempt.obtained(), "an upgraded client's record is not replaced, even expired");
        fw.set_data(&holder, b"not json").await.unwrap();
        let broken = NonBlockingLease::obtain_at(&fw, &path, HOUR, "old", at(T0)).await;
        assert!(matches!(broken, Err(Error::CorruptData { .. })), "{broken:?}");
        fw.set_data(&holder, br#"{"version": 1, "holder": "x", "end": "tomorrow"}"#).await.unwrap();
        let broken = NonBlockingLease::obtain_at(&fw, &path, HOUR, "old", at(T0)).await;
        assert!(matches!(broken, Err(Error::CorruptData { .. })), "{broken:?}");
        assert_eq!(fw.get_data(&holder).await.unwrap().0, br#"{"version": 1, "holder": "x", "end": "tomorrow"}"#);
        eventually(EVENT, "no lock node left", || async {
            let left = children(&fw, &path).await;
            if left == ["lease_holder"] {
                Ok(())
            } else {
                Err(format!("{left:?}"))
            }
        })
        .await;

        let bad = unique_path("lease", "bad");
        assert!(matches!(NonBlockingLease::obtain(&fw, &bad, HOUR, "").await, Err(Error::InvalidArgument { .. })));
        assert!(matches!(NonBlockingLease::obtain(&fw, "no-slash", HOUR, "x").await, Err(Error::InvalidPath { .. })));
        let forever = NonBlockingLease::obtain(&fw, &bad, Duration::from_secs(u64::MAX / 4), "x").await;
        assert!(matches!(forever, Err(Error::InvalidArgument { name: "duration", .. })), "{forever:?}");
        let none = MultiNonBlockingLease::obtain(&fw, 0, &bad, HOUR, "x").await;
        assert!(matches!(none, Err(Error::InvalidArgument { name: "count", .. })));
        assert!(fw.exists(&bad).await.unwrap().is_none(), "bad input writes nothing");
        // The root and the server's own `/zookeeper` are no lease's path (an empty one would
        // have made the multi-lease's slot `/0`).
        for reserved in ["/", "/zookeeper"] {
            let refused = NonBlockingLease::obtain(&fw, reserved, HOUR, "x").await;
            assert!(matches!(refused, Err(Error::InvalidPath { .. })), "{reserved}: {refused:?}");
        }
        for reserved in ["", "/", "/zookeeper"] {
            let refused = MultiNonBlockingLease::obtain(&fw, 2, reserved, HOUR, "x").await;
            assert!(matches!(refused, Err(Error::InvalidPath { .. })), "{reserved:?}: {refused:?}");
        }
        for never in ["/0", "/lease_holder", "/zookeeper/lease_holder", "/zookeeper/0"] {
            assert!(fw.exists(never).await.unwrap().is_none(), "{never} was written");
        }
        fw.delete(&path).recursive().await.unwrap();
        fw.close().await;
    })
    .await;
}

#[tokio::test]
async fn a_multi_lease_gives_each_of_count_slots_to_one_identifier() {
    init_tracing();
    bounded(LIMIT, async {
        let fw = plain_framework(&shared_connect().await, SESSION).await;
        let path = unique_path("lease", "multi");
        let mut slots = Vec::new();
        for id in ["a", "b", "c", "d"] {
            let lease = MultiNonBlockingLease::obtain_at(&fw, 3, &path, HOUR, id, at(T0)).await.unwrap();
            slots.push(lease.slot());
        }
        assert_eq!(slots, [Some(0), Some(1), Some(2), None]);
        let again = MultiNonBlockingLease::obtain_at(&fw, 3, &path, HOUR, "b", at(T0 + 10)).await.unwrap();
        assert_eq!(again.slot(), Some(1), "b renews its own slot");
        assert_eq!(again.lease().unwrap().path(), format!("{path}/1"));
        let later = MultiNonBlockingLease::obtain_at(&fw, 3, &path, HOUR, "d", at(T0 + 3600)).await.unwrap();
        assert_eq!(later.slot(), Some(0), "a's slot ended first");
        let mut dirs = children(&fw, &path).await;
        dirs.sort();
        assert_eq!(dirs, ["0", "1", "2"]);
        fw.delete(&path).recursive().await.unwrap();
        fw.close().await;
    })
    .await;
}

/// Four identifiers attempt one lease again and again through connections that keep being
/// cut: only the first to obtain it ever does (its lease lasts the whole test), every attempt
/// ends obtained, not obtained or with an error, and no lock node stays behind.
#[tokio::test]
async fn attempts_through_a_breaking_connection_never_share_a_lease() {
    init_tracing();
    bounded(LIMIT, async {
        const ATTEMPTS: usize = 25;
        let faulty = Arc::new(FaultyServer::start().await);
        let path = unique_path("lease", "faults");
        let mut frameworks = Vec::new();
        for _ in 0..4 {
            frameworks.push(framework(&faulty.proxied(), common::timing::FAULT_SESSION).await);
        }
        let stop = Arc::new(AtomicBool::new(false));
        let breaker = {
            let (stop, faulty) = (stop.clone(), faulty.clone());
            tokio::spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    tokio::time::sleep(Duration::from_millis(60)).await;
                    faulty.proxy.reset_connections();
                }
            })
        };
        let mut tasks = Vec::new();
        for (i, fw) in frameworks.into_iter().enumerate() {
            let path = path.clone();
            tasks.push(tokio::spawn(async move {
                let id = format!("host-{i}");
                let (mut obtained, mut refused, mut errors) = (0, 0, 0);
                for _ in 0..ATTEMPTS {
                    match NonBlockingLease::obtain(&fw, &path, HOUR, &id).await {
                        Ok(lease) if lease.obtained() => obtained += 1,
                        Ok(_) => refused += 1,
                        Err(e) if e.is_retryable() || matches!(e, Error::OutcomeUnknown { .. }) => errors += 1,
                        Err(e) => panic!("{id}: {e}"),
                    }
                }
                fw.close().await;
                (id, obtained, refused, errors)
            }));
        }
        let mut holders = HashSet::new();
        let mut total_obtained = 0;
        for task in tasks {
            let (id, obtained, refused, errors) = task.await.unwrap();
            eprintln!("{id}: obtained {obtained}, refused {refused}, errors {errors}");
            if obtained > 0 {
                holders.insert(id);
            }
            total_obtained += obtained;
        }
        stop.store(true, Ordering::Relaxed);
        breaker.await.unwrap();
        assert!(holders.len() <= 1, "one identifier held the lease: {holders:?}");
        let fw = plain_framework(&faulty.direct(), SESSION).await;
        if total_obtained > 0 {
            let data = fw.get_data(&format!("{path}/lease_holder")).await.unwrap().0;
            let record = kazoo::decode_lease_record(&data).unwrap();
            assert!(holders.contains(&record.holder), "the record names the holder");
        }
        // Lock nodes of attempts cut short are deleted by the reaper or went with their session.
        eventually(common::timing::back_within(common::timing::FAULT_SESSION), "no lock node left", || async {
            let left = children(&fw, &path).await;
            if left.iter().all(|c| c == "lease_holder") {
                Ok(())
            } else {
                Err(format!("{left:?}"))
            }
        })
        .await;
        fw.close().await;
    })
    .await;
}
