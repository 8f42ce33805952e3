//! The chaos run's history checker (`tests/common/history.rs`) on made-up histories: each
//! kind of violation is found, and correct histories pass.

use std::time::Duration;

use tokio::time::Instant;

use crate::common::history::*;

fn resources() -> Vec<Resource> {
    vec![
        Resource { name: "m".into(), capacity: 1, ordered_tokens: true },
        Resource { name: "s".into(), capacity: 2, ordered_tokens: true },
        Resource { name: "rw".into(), capacity: 100, ordered_tokens: false },
    ]
}

/// A hold at `ms` offsets from `base`: entered, told, exited, released (`None`: the node
/// went with its session). Its acquire began as it entered (see [`began`]).
fn hold(
    base: Instant,
    resource: &str,
    holder: &str,
    token: i64,
    (entered, told, exited, released): (u64, Option<u64>, u64, Option<u64>),
) -> Hold {
    let at = |ms: u64| base + Duration::from_millis(ms);
    Hold {
        resource: resource.into(),
        holder: holder.into(),
        weight: 1,
        token,
        began: at(entered),
        entered: at(entered),
        told: told.map(at),
        exited: at(exited),
        released: released.map(at),
        session_ended: released.is_none(),
    }
}

fn kinds(report: &Report) -> Vec<&'static str> {
    report
        .violations
        .iter()
        .map(|v| match v {
            Violation::Overlap { .. } => "a",
            Violation::SignalAfterSteal { .. } => "b",
            Violation::TokenOrder { .. } => "c",
            Violation::NoProgress { .. } => "d",
            Violation::Malformed { .. } => "malformed",
        })
        .collect()
}

#[test]
fn sequential_holds_pass() {
    let b = Instant::now();
    let holds = vec![
        hold(b, "m", "t1", 10, (0, None, 100, Some(110))),
        hold(b, "m", "t2", 11, (120, None, 200, Some(210))),
        hold(b, "m", "t1", 12, (220, None, 300, Some(310))),
    ];
    let report = check(&resources(), &holds, None, b);
    assert!(report.is_ok(), "{:?}", report.violations);
    assert_eq!((report.acquisitions, report.lost_signals, report.steals), (3, 0, 0));
}

#[test]
fn overlap_of_untold_holds_fails() {
    let b = Instant::now();
    let holds =
        vec![hold(b, "m", "t1", 10, (0, None, 100, Some(110))), hold(b, "m", "t2", 11, (50, None, 150, Some(160)))];
    assert_eq!(kinds(&check(&resources(), &holds, None, b)), ["a"]);
}

#[test]
fn a_semaphore_admits_its_capacity_and_no_more() {
    let b = Instant::now();
    let two = vec![hold(b, "s", "t1", 10, (0, None, 100, None)), hold(b, "s", "t2", 11, (10, None, 100, None))];
    assert!(check(&resources(), &two, None, b).is_ok());
    let mut three = two.clone();
    three.push(hold(b, "s", "t3", 12, (20, None, 100, None)));
    assert_eq!(kinds(&check(&resources(), &three, None, b)), ["a"]);
}

#[test]
fn told_before_the_steal_passes_and_measures_the_margin() {
    let b = Instant::now();
    // t1 is told at 100, its session ends and the server gives its lock to t2 at 400: a
    // steal, 300 ms after the signal.
    let holds =
        vec![hold(b, "m", "t1", 10, (0, Some(100), 100, None)), hold(b, "m", "t2", 11, (400, None, 450, Some(460)))];
    let report = check(&resources(), &holds, None, b);
    assert!(report.is_ok(), "{:?}", report.violations);
    assert_eq!((report.lost_signals, report.steals), (1, 1));
    assert_eq!(report.min_signal_margin, Some(Duration::from_millis(300)));
    assert_eq!((report.steal_list[0].lost.as_str(), report.steal_list[0].thief.as_str()), ("t1", "t2"));
    assert_eq!(report.steal_list[0].margin(), Duration::from_millis(300));
}

#[test]
fn a_handoff_after_the_release_is_no_steal() {
    let b = Instant::now();
    // t1 was told (a flap), its session survived and its own release deleted the node; t2
    // enters even before t1's release call returned.
    let holds = vec![
        hold(b, "m", "t1", 10, (0, Some(100), 100, Some(150))),
        hold(b, "m", "t2", 11, (140, None, 200, Some(210))),
    ];
    let report = check(&resources(), &holds, None, b);
    assert!(report.is_ok());
    assert_eq!((report.steals, report.min_signal_margin), (0, None));
}

#[test]
fn told_after_the_steal_fails() {
    let b = Instant::now();
    // t2 entered at 300; t1 was told only at 350 (it was still trusting its hold).
    let holds = vec![
        hold(b, "m", "t1", 10, (0, Some(350), 350, Some(400))),
        hold(b, "m", "t2", 11, (300, None, 450, Some(460))),
    ];
    let report = check(&resources(), &holds, None, b);
    assert_eq!(kinds(&report), ["b"]);
    assert!(
        matches!(&report.violations[0], Violation::SignalAfterSteal { late, .. } if *late == Duration::from_millis(50))
    );
}

#[test]
fn a_holder_told_at_entry_never_counts_as_inside() {
    let b = Instant::now();
    // t2's acquire returned while its framework was already suspended: told at entry.
    let holds =
        vec![hold(b, "m", "t1", 10, (0, None, 100, Some(110))), hold(b, "m", "t2", 11, (50, Some(50), 50, Some(120)))];
    assert!(check(&resources(), &holds, None, b).is_ok());
}

#[test]
fn fencing_tokens_must_increase_in_enter_order() {
    let b = Instant::now();
    let holds =
        vec![hold(b, "m", "t1", 12, (0, None, 100, Some(110))), hold(b, "m", "t2", 11, (120, None, 200, Some(210)))];
    assert_eq!(kinds(&check(&resources(), &holds, None, b)), ["c"]);
    let equal =
        vec![hold(b, "m", "t1", 12, (0, None, 100, Some(110))), hold(b, "m", "t2", 12, (120, None, 200, Some(210)))];
    assert_eq!(kinds(&check(&resources(), &equal, None, b)), ["c"]);
    // Not checked where holds share and enter in any order.
    let shared =
        vec![hold(b, "rw", "r1", 12, (0, None, 100, Some(110))), hold(b, "rw", "r2", 11, (10, None, 100, Some(110)))];
    assert!(check(&resources(), &shared, None, b).is_ok());
}

/// `hold` with its acquire begun at `ms`.
fn began(mut hold: Hold, base: Instant, ms: u64) -> Hold {
    hold.began = base + Duration::from_millis(ms);
    hold
}

#[test]
fn semaphore_tokens_must_increase_over_every_lease_admitted_before_the_acquire_began() {
    let b = Instant::now();
    // Two acquires at once: the one admitted first (token 10) may return second.
    let overlapping = vec![
        began(hold(b, "s", "t1", 11, (50, None, 100, Some(110))), b, 0),
        began(hold(b, "s", "t2", 10, (52, None, 100, Some(110))), b, 0),
    ];
    let report = check(&resources(), &overlapping, None, b);
    assert!(report.is_ok(), "{:?}", report.violations);
    assert_eq!(report.reordered_returns, 1);
    // t2's acquire began after t1 entered: t1 was admitted first.
    let after = vec![
        began(hold(b, "s", "t1", 11, (50, None, 100, Some(110))), b, 0),
        began(hold(b, "s", "t2", 10, (60, None, 100, Some(110))), b, 51),
    ];
    assert_eq!(kinds(&check(&resources(), &after, None, b)), ["c"]);
    // The highest token admitted before counts, not only the last hold's.
    let behind_an_older = vec![
        began(hold(b, "s", "t1", 15, (10, None, 20, Some(21))), b, 0),
        began(hold(b, "s", "t2", 16, (30, None, 40, Some(41))), b, 25),
        began(hold(b, "s", "t3", 14, (60, None, 70, Some(71))), b, 50),
    ];
    assert_eq!(kinds(&check(&resources(), &behind_an_older, None, b)), ["c"]);
}

#[test]
fn a_writer_excludes_readers() {
    let b = Instant::now();
    let mut writer = hold(b, "rw", "w", 20, (50, None, 80, Some(90)));
    writer.weight = 100;
    let holds = vec![hold(b, "rw", "r1", 10, (0, None, 100, Some(110))), writer];
    assert_eq!(kinds(&check(&resources(), &holds, None, b)), ["a"]);
}

#[test]
fn every_task_must_progress_after_the_faults() {
    let b = Instant::now();
    let holds = vec![
        hold(b, "m", "t1", 10, (0, None, 100, Some(110))),
        hold(b, "m", "t2", 11, (1_000, None, 1_100, Some(1_110))),
    ];
    let tasks = vec!["t1".to_owned(), "t2".to_owned()];
    let ended = b + Duration::from_millis(500);
    let report = check(&resources(), &holds, Some((ended, &tasks)), b);
    assert_eq!(report.violations, [Violation::NoProgress { task: "t1".into() }]);
}

#[test]
fn malformed_records_and_unknown_resources_are_reported() {
    let b = Instant::now();
    let holds = vec![
        hold(b, "m", "t1", 10, (100, None, 50, None)),
        hold(b, "m", "t2", 11, (200, Some(400), 300, None)),
        hold(b, "x", "t3", 12, (0, None, 10, None)),
    ];
    assert_eq!(kinds(&check(&resources(), &holds, None, b)), ["malformed", "malformed", "malformed"]);
}

fn increments(succeeded: &[i64], failed: u64, unknown: u64) -> Increments {
    Increments { succeeded: succeeded.to_vec(), failed, unknown }
}

#[test]
fn a_counter_holds_every_success_and_at_most_the_unknown_ones() {
    assert!(check_counter("c", 0, 3, &increments(&[1, 2, 3], 5, 0)).is_empty());
    assert!(check_counter("c", 10, 14, &increments(&[11, 13, 14], 0, 2)).is_empty(), "one unknown applied");
    assert!(check_counter("c", 0, 2, &increments(&[1, 2], 0, 2)).is_empty(), "no unknown applied");
}

#[test]
fn a_counter_above_succeeded_plus_unknown_fails() {
    let problems = check_counter("c", 0, 4, &increments(&[1, 2, 3], 7, 0));
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(problems[0].contains("more than"), "{problems:?}");
}

#[test]
fn a_lost_or_doubled_success_fails() {
    let lost = check_counter("c", 0, 2, &increments(&[1, 2, 3], 0, 0));
    assert!(lost.iter().any(|p| p.contains("lost increments")), "{lost:?}");
    assert!(lost.iter().any(|p| p.contains("outside")), "{lost:?}");
    let twice = check_counter("c", 0, 3, &increments(&[1, 2, 2], 0, 1));
    assert_eq!(twice.len(), 1, "{twice:?}");
    assert!(twice[0].contains("both wrote 2"), "{twice:?}");
}

#[test]
fn increments_merge() {
    let mut all = increments(&[1], 1, 0);
    all.merge(increments(&[2, 3], 0, 4));
    assert_eq!(all, increments(&[1, 2, 3], 1, 4));
}
