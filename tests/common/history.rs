//! A recorded history of lock holds and the safety and liveness checks run on it. Pure logic
//! (no ZooKeeper): the chaos tests record, this module judges. Tests that need it include it
//! with `#[path = "common/history.rs"] mod history;`.
//!
//! A resource (a lock path) has a capacity; each hold of it has a weight. A mutex is capacity
//! 1 with holds of weight 1, a semaphore of `n` leases capacity `n`; a read-write lock would be
//! capacity `N` with readers of weight 1 and writers of weight `N`. At any moment the holds
//! that are *trusted* (inside their critical section and not yet told of a loss) must fit in
//! the capacity.
//!
//! All instants come from one monotonic clock (`tokio::time::Instant` of one process).
//!
//! A counter's history is judged too ([`check_counter`]): increments recorded as succeeded,
//! failed or of unknown outcome, against the value read once they all ended.
#![allow(dead_code)] // each test binary uses a different part of this module

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::time::Duration;

use tokio::time::Instant;

/// A lock path under test.
#[derive(Debug, Clone)]
pub struct Resource {
    pub name: String,
    /// The total weight of holds allowed at once.
    pub capacity: u64,
    /// Whether fencing tokens must strictly increase in enter order (false where holds of one
    /// resource may share it and enter in any order, like readers).
    pub ordered_tokens: bool,
}

/// One hold of a resource: from the acquire's return to the end of the critical section.
#[derive(Debug, Clone)]
pub struct Hold {
    pub resource: String,
    /// Which task held (for progress and for messages), e.g. `c2/mutex/t1`.
    pub holder: String,
    pub weight: u64,
    /// The guard's fencing token.
    pub token: i64,
    /// When the acquire returned (the holder entered its critical section).
    pub entered: Instant,
    /// When the holder was told the lock could no longer be trusted (`lost()` completed), if
    /// it was before it left.
    pub told: Option<Instant>,
    /// When the holder left its critical section.
    pub exited: Instant,
    /// When our release returned having deleted the node; `None` when the node went some
    /// other way (its session ended, or the release gave up and left it to the background).
    pub released: Option<Instant>,
    /// The node went with its session (the ensemble removed it): the only way another holder
    /// can take this hold's place before its holder lets go.
    pub session_ended: bool,
}

impl Hold {
    /// The end of the time the holder acted as a holder: told or left, whichever came first.
    pub fn trusted_until(&self) -> Instant {
        self.told.map_or(self.exited, |told| told.min(self.exited))
    }

    fn trusted_at(&self, t: Instant) -> bool {
        self.entered <= t && t < self.trusted_until()
    }
}

/// What the checker found wrong.
#[derive(Debug, Clone, PartialEq)]
pub enum Violation {
    /// (a) Holds never told of a loss were trusted at once beyond the capacity.
    Overlap { resource: String, entering: String, inside: Vec<String>, at: Duration },
    /// (b) A holder entered while another, later told of its loss, still trusted its hold:
    /// the signal came `late` after the steal.
    SignalAfterSteal { resource: String, entering: String, told_late: String, late: Duration },
    /// (c) A fencing token did not increase over the previous hold's, in enter order.
    TokenOrder { resource: String, earlier: (String, i64), later: (String, i64) },
    /// (d) A task entered no critical section after the faults ended.
    NoProgress { task: String },
    /// A hold recorded with an impossible timeline (a bug in the recording).
    Malformed { holder: String, why: String },
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Violation::Overlap { resource, entering, inside, at } => {
                write!(
                    f,
                    "(a) overlap on {resource} at +{:.3}s: {entering} entered while {inside:?} held",
                    at.as_secs_f64()
                )
            }
            Violation::SignalAfterSteal { resource, entering, told_late, late } => write!(
                f,
                "(b) signal after steal on {resource}: {entering} entered {:.3}s before {told_late} was told",
                late.as_secs_f64()
            ),
            Violation::TokenOrder { resource, earlier, later } => write!(
                f,
                "(c) fencing tokens on {resource}: {} ({}) entered after {} ({})",
                later.0, later.1, earlier.0, earlier.1
            ),
            Violation::NoProgress { task } => write!(f, "(d) no progress after the faults: {task}"),
            Violation::Malformed { holder, why } => write!(f, "malformed hold of {holder}: {why}"),
        }
    }
}

/// The verdict and the figures of a history.
#[derive(Debug, Clone, Default)]
pub struct Report {
    pub violations: Vec<Violation>,
    pub acquisitions: usize,
    /// Holds told of a loss.
    pub lost_signals: usize,
    /// Steals: entries that took the place of a hold told of its loss before it was released.
    pub steals: usize,
    /// The smallest time from a loss signal to the steal of that hold.
    pub min_signal_margin: Option<Duration>,
    /// Every steal: the lost hold, when it was told, the hold that took its place, when.
    pub steal_list: Vec<Steal>,
}

/// A hold told of its loss whose place another hold took before its release returned.
#[derive(Debug, Clone)]
pub struct Steal {
    pub lost: String,
    pub told: Instant,
    pub thief: String,
    pub entered: Instant,
}

impl Steal {
    /// From the signal to the steal.
    pub fn margin(&self) -> Duration {
        self.entered - self.told
    }
}

impl Report {
    pub fn is_ok(&self) -> bool {
        self.violations.is_empty()
    }
}

/// Checks (a) no overlap of untold holds, (b) signal before steal, (c) fencing tokens
/// increasing in enter order, and, when `progress` is given as `(faults_ended, tasks)`, (d)
/// every task entered after the faults ended. `origin` is where reported times count from.
pub fn check(
    resources: &[Resource],
    holds: &[Hold],
    progress: Option<(Instant, &[String])>,
    origin: Instant,
) -> Report {
    let mut report = Report { acquisitions: holds.len(), ..Report::default() };
    report.lost_signals = holds.iter().filter(|h| h.told.is_some()).count();
    for hold in holds {
        if let Some(why) = malformed(hold) {
            report.violations.push(Violation::Malformed { holder: hold.holder.clone(), why });
        }
    }
    let by_resource = group(holds);
    for resource in resources {
        let Some(holds) = by_resource.get(resource.name.as_str()) else { continue };
        exclusion(resource, holds, origin, &mut report);
        margins(resource, holds, &mut report);
        if resource.ordered_tokens {
            token_order(resource, holds, &mut report);
        }
    }
    for name in by_resource.keys() {
        if !resources.iter().any(|r| r.name == *name) {
            report.violations.push(Violation::Malformed {
                holder: format!("resource {name}"),
                why: "holds of an undeclared resource".to_owned(),
            });
        }
    }
    if let Some((faults_ended, tasks)) = progress {
        let progressed: BTreeSet<&str> =
            holds.iter().filter(|h| h.entered >= faults_ended).map(|h| h.holder.as_str()).collect();
        for task in tasks {
            if !progressed.contains(task.as_str()) {
                report.violations.push(Violation::NoProgress { task: task.clone() });
            }
        }
    }
    report
}

fn malformed(hold: &Hold) -> Option<String> {
    if hold.exited < hold.entered {
        return Some("left before it entered".to_owned());
    }
    if hold.told.is_some_and(|told| told < hold.entered || told > hold.exited) {
        return Some("told outside its critical section".to_owned());
    }
    if hold.released.is_some_and(|released| released < hold.exited) {
        return Some("released before it left".to_owned());
    }
    if hold.weight == 0 {
        return Some("weight 0".to_owned());
    }
    None
}

fn group(holds: &[Hold]) -> BTreeMap<&str, Vec<&Hold>> {
    let mut by_resource: BTreeMap<&str, Vec<&Hold>> = BTreeMap::new();
    for hold in holds {
        by_resource.entry(hold.resource.as_str()).or_default().push(hold);
    }
    for holds in by_resource.values_mut() {
        holds.sort_by_key(|h| h.entered);
    }
    by_resource
}

/// (a) and (b): at every entry, the holds trusted at that moment plus the entering one fit.
fn exclusion(resource: &Resource, holds: &[&Hold], origin: Instant, report: &mut Report) {
    for (i, entering) in holds.iter().enumerate() {
        if entering.trusted_until() <= entering.entered {
            continue; // told at once: it never acted as a holder
        }
        let t = entering.entered;
        let inside: Vec<&Hold> =
            holds.iter().enumerate().filter(|(j, h)| *j != i && h.trusted_at(t)).map(|(_, h)| *h).collect();
        let weight: u64 = inside.iter().map(|h| h.weight).sum::<u64>() + entering.weight;
        if weight <= resource.capacity {
            continue;
        }
        match inside.iter().filter(|h| h.told.is_some()).max_by_key(|h| h.told) {
            Some(told_late) => report.violations.push(Violation::SignalAfterSteal {
                resource: resource.name.clone(),
                entering: entering.holder.clone(),
                told_late: told_late.holder.clone(),
                late: told_late.told.unwrap_or(t) - t,
            }),
            None => report.violations.push(Violation::Overlap {
                resource: resource.name.clone(),
                entering: entering.holder.clone(),
                inside: inside.iter().map(|h| h.holder.clone()).collect(),
                at: t.saturating_duration_since(origin),
            }),
        }
    }
}

/// Signal-before-steal margins: for each hold told of its loss whose node went with its
/// session, the first entry by another hold that only fits without it, measured from the
/// signal. (Holds whose holder deleted the node hand over; nothing is stolen from them.)
fn margins(resource: &Resource, holds: &[&Hold], report: &mut Report) {
    for (i, lost) in holds.iter().enumerate() {
        let Some(told) = lost.told.filter(|_| lost.session_ended) else { continue };
        let steal = holds.iter().enumerate().filter(|(j, h)| *j != i && h.entered >= told).find(|(j, h)| {
            let others: u64 = holds
                .iter()
                .enumerate()
                .filter(|(k, o)| *k != *j && *k != i && o.entered <= h.entered && h.entered < o.exited)
                .map(|(_, o)| o.weight)
                .sum();
            others + lost.weight + h.weight > resource.capacity
        });
        if let Some((_, steal)) = steal {
            report.steals += 1;
            let margin = steal.entered - told;
            report.min_signal_margin = Some(report.min_signal_margin.map_or(margin, |m| m.min(margin)));
            report.steal_list.push(Steal {
                lost: lost.holder.clone(),
                told,
                thief: steal.holder.clone(),
                entered: steal.entered,
            });
        }
    }
}

/// (c): tokens strictly increase in enter order.
fn token_order(resource: &Resource, holds: &[&Hold], report: &mut Report) {
    for pair in holds.windows(2) {
        if pair[1].token <= pair[0].token {
            report.violations.push(Violation::TokenOrder {
                resource: resource.name.clone(),
                earlier: (pair[0].holder.clone(), pair[0].token),
                later: (pair[1].holder.clone(), pair[1].token),
            });
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Counters.

/// The increments (by one) of one counter, as the tasks that made them were told.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Increments {
    /// The value each increment reported as applied wrote (its post value).
    pub succeeded: Vec<i64>,
    /// Increments reported as not applied (every try lost its race, or an error before the
    /// write could have reached the server).
    pub failed: u64,
    /// Increments whose outcome nobody knows: the reply was lost (`OutcomeUnknown`), or the
    /// task gave up waiting and dropped the operation.
    pub unknown: u64,
}

impl Increments {
    /// Adds another task's record to this one.
    pub fn merge(&mut self, other: Increments) {
        self.succeeded.extend(other.succeeded);
        self.failed += other.failed;
        self.unknown += other.unknown;
    }
}

/// Judges a counter that started at `initial` and was only ever incremented by one, and read
/// `final_value` after every increment ended: each increment reported as applied is in the
/// final value and none beyond those of unknown outcome (`succeeded <= final - initial <=
/// succeeded + unknown`); and, since each applied increment wrote one more than the version it
/// read, no two reported as applied wrote the same value, each above `initial` and at most the
/// final value. Returns what is wrong, in words (nothing when all holds).
pub fn check_counter(name: &str, initial: i64, final_value: i64, increments: &Increments) -> Vec<String> {
    let mut problems = Vec::new();
    let applied = final_value.wrapping_sub(initial);
    let succeeded = increments.succeeded.len() as i64;
    let unknown = increments.unknown as i64;
    if applied < succeeded {
        problems.push(format!(
            "{name}: lost increments: {applied} applied, fewer than the {succeeded} reported as succeeded"
        ));
    }
    if applied > succeeded + unknown {
        problems.push(format!(
            "{name}: {applied} increments applied, more than the {succeeded} succeeded + {unknown} unknown \
             (an increment reported as failed was applied, or one was applied twice)"
        ));
    }
    let mut seen = BTreeSet::new();
    for &value in &increments.succeeded {
        if !seen.insert(value) {
            problems.push(format!("{name}: two increments reported as succeeded both wrote {value}"));
        }
        if value <= initial || value > final_value {
            problems.push(format!(
                "{name}: an increment reported as succeeded wrote {value}, outside ({initial}, {final_value}]"
            ));
        }
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resources() -> Vec<Resource> {
        vec![
            Resource { name: "m".into(), capacity: 1, ordered_tokens: true },
            Resource { name: "s".into(), capacity: 2, ordered_tokens: true },
            Resource { name: "rw".into(), capacity: 100, ordered_tokens: false },
        ]
    }

    /// A hold at `ms` offsets from `base`: entered, told, exited, released (`None`: the node
    /// went with its session).
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
        let holds = vec![
            hold(b, "m", "t1", 10, (0, Some(100), 100, None)),
            hold(b, "m", "t2", 11, (400, None, 450, Some(460))),
        ];
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
        let holds = vec![
            hold(b, "m", "t1", 10, (0, None, 100, Some(110))),
            hold(b, "m", "t2", 11, (50, Some(50), 50, Some(120))),
        ];
        assert!(check(&resources(), &holds, None, b).is_ok());
    }

    #[test]
    fn fencing_tokens_must_increase_in_enter_order() {
        let b = Instant::now();
        let holds = vec![
            hold(b, "m", "t1", 12, (0, None, 100, Some(110))),
            hold(b, "m", "t2", 11, (120, None, 200, Some(210))),
        ];
        assert_eq!(kinds(&check(&resources(), &holds, None, b)), ["c"]);
        let equal = vec![
            hold(b, "m", "t1", 12, (0, None, 100, Some(110))),
            hold(b, "m", "t2", 12, (120, None, 200, Some(210))),
        ];
        assert_eq!(kinds(&check(&resources(), &equal, None, b)), ["c"]);
        // Not checked where holds share and enter in any order.
        let shared = vec![
            hold(b, "rw", "r1", 12, (0, None, 100, Some(110))),
            hold(b, "rw", "r2", 11, (10, None, 100, Some(110))),
        ];
        assert!(check(&resources(), &shared, None, b).is_ok());
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
}
