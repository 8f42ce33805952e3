//! A recorded history of lock holds and the safety and liveness checks run on it. Pure logic
//! (no ZooKeeper): the chaos tests record, this module judges (and `tests/chaos/checker.rs`
//! checks the judge).
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
    /// Whether fencing tokens must strictly increase in admission order (false where holds of
    /// one resource may share it and enter in any order, like readers). Admission is seen from
    /// outside only through instants taken around the acquire, so the order is judged where it
    /// is certain: with capacity 1, holds never overlap and enter order is admission order;
    /// with more, a hold that entered before another's acquire began was admitted first (two
    /// acquires that overlap may return in either order: the thread that returns the earlier
    /// one can be descheduled between the admission and its clock reading).
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
    /// When the acquire was called.
    pub began: Instant,
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
    /// (c) A fencing token did not increase over that of a hold admitted before it.
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
                "(c) fencing tokens on {resource}: {} ({}) admitted after {} ({})",
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
    /// Where tokens are ordered and holds share (a semaphore): consecutive entries whose
    /// tokens went down while their acquires overlapped (returns seen out of admission order,
    /// not violations).
    pub reordered_returns: usize,
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
    if hold.entered < hold.began {
        return Some("entered before its acquire began".to_owned());
    }
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

/// (c): tokens strictly increase in admission order, judged where that order is certain (see
/// [`Resource::ordered_tokens`]).
fn token_order(resource: &Resource, holds: &[&Hold], report: &mut Report) {
    let violation = |report: &mut Report, earlier: &Hold, later: &Hold| {
        report.violations.push(Violation::TokenOrder {
            resource: resource.name.clone(),
            earlier: (earlier.holder.clone(), earlier.token),
            later: (later.holder.clone(), later.token),
        });
    };
    if resource.capacity == 1 {
        for pair in holds.windows(2) {
            if pair[1].token <= pair[0].token {
                violation(report, pair[0], pair[1]);
            }
        }
        return;
    }
    report.reordered_returns += holds.windows(2).filter(|pair| pair[1].token < pair[0].token).count();
    // `holds` is in enter order; walk the holds in the order their acquires began, keeping the
    // highest token of the holds that entered before.
    let mut by_start: Vec<&Hold> = holds.to_vec();
    by_start.sort_by_key(|h| h.began);
    let mut entered = holds.iter().peekable();
    let mut highest: Option<&Hold> = None;
    for later in by_start {
        while let Some(earlier) = entered.next_if(|h| h.entered < later.began) {
            if highest.map_or(true, |h| earlier.token > h.token) {
                highest = Some(earlier);
            }
        }
        if let Some(earlier) = highest.filter(|h| h.token >= later.token) {
            violation(report, earlier, later);
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
