//! The names Curator 5.x's `DistributedQueue` family gives its item nodes, and the order each
//! variant takes them in. Every item is a persistent sequential node under the queue's path
//! whose name starts with [`QUEUE_ITEM_NAME`] (`queue-`); ZooKeeper
//! appends the 10-digit sequence:
//!
//! | Queue | Name | Order |
//! |---|---|---|
//! | `DistributedQueue` | `queue-<seq>` | plain string order |
//! | `DistributedIdQueue` | `queue-\|<id>\|<seq>` | the name without its `\|<id>\|` section: FIFO |
//! | `DistributedPriorityQueue` | `queue-<P><seq>`, `P` = [`priority_code`] | plain string order: lowest priority first |
//! | `DistributedDelayQueue` | `queue-\|<epoch ms, %08X>\|<seq>` | by the epoch; none before it is due |
//!
//! ```
//! use zk_recipes::protocol::queue_names::{self, QueueOrder};
//!
//! assert_eq!(queue_names::priority_code(5), "100000005");
//! assert_eq!(queue_names::priority_code(-1), "0FFFFFFFF");
//! assert_eq!(queue_names::priority_of("queue-1000000050000000003"), Some(5));
//! assert_eq!(queue_names::delay_code(1_700_000_000_123), "|18BCFE5687B|");
//! assert_eq!(queue_names::delay_epoch_of("queue-|18BCFE5687B|0000000007"), 1_700_000_000_123);
//! assert_eq!(queue_names::id_of("queue-|job-7|0000000002"), Some("job-7"));
//!
//! let mut names = vec!["queue-1000000050000000001".to_owned(), "queue-0FFFFFFFF0000000002".to_owned()];
//! QueueOrder::Priority.sort(&mut names);
//! assert_eq!(names[0], "queue-0FFFFFFFF0000000002"); // priority -1 before 5
//! ```

use std::borrow::Cow;
use std::cmp::Ordering;

use super::QUEUE_ITEM_NAME;

/// The separator around an id queue's id and a delay queue's epoch (Curator's `SEPARATOR`).
pub const SEPARATOR: char = '|';

/// The name of a `QueueSharder`'s shard under the queue's path, before a random UUID
/// (Curator's `QueueSharder`: `queue-<uuid>`, a persistent node holding one queue).
pub const SHARD_PREFIX: &str = "queue-";

/// Whether `name` is a shard's (`queue-<uuid>`).
pub fn is_shard_name(name: &str) -> bool {
    name.strip_prefix(SHARD_PREFIX).is_some_and(|rest| uuid::Uuid::parse_str(rest).is_ok() && rest.len() == 36)
}

/// The length of a priority code: a sign digit and 8 hex digits.
pub const PRIORITY_CODE_LEN: usize = 9;

/// How a queue variant orders its items.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum QueueOrder {
    /// `DistributedQueue`: plain string order of the names (by sequence).
    Fifo,
    /// `DistributedIdQueue`: by the name with its `|<id>|` section removed ([`id_sort_key`]),
    /// which is FIFO whatever the ids.
    Id,
    /// `DistributedPriorityQueue`: plain string order, which the [`priority_code`] makes
    /// lowest priority first (negative before positive), then FIFO.
    Priority,
    /// `DistributedDelayQueue`: by the epoch in the name ([`delay_epoch_of`]; a name without
    /// one counts as 0, due at once), ties in name order; an item is not taken before its
    /// epoch.
    Delay,
}

impl QueueOrder {
    /// Sorts item names into the order the variant takes them (a stable sort).
    pub fn sort(self, names: &mut [String]) {
        names.sort_by(|a, b| self.compare(a, b));
    }

    /// How two item names compare in the variant's order ([`sort`](Self::sort)'s comparison).
    pub fn compare(self, a: &str, b: &str) -> Ordering {
        match self {
            QueueOrder::Fifo | QueueOrder::Priority => a.cmp(b),
            QueueOrder::Id => id_sort_key(a).cmp(&id_sort_key(b)),
            QueueOrder::Delay => (delay_epoch_of(a), a).cmp(&(delay_epoch_of(b), b)),
        }
    }

    /// The variant whose names a queue's children carry (children not named `queue-` are
    /// ignored): [`Delay`](Self::Delay) when every item with a `|...|` section has an epoch
    /// there as Curator writes it (upper-case hex, at least 8 digits) right after `queue-`,
    /// [`Id`](Self::Id) when some item has another section, [`Priority`](Self::Priority)
    /// when none has a section and one carries a priority code before its 10-digit sequence,
    /// [`Fifo`](Self::Fifo) otherwise (and for no items). The names cannot tell an id queue
    /// whose ids all look like epochs from a delay queue, nor a FIFO queue from a priority
    /// queue before its first item: a reader that knows the variant says so.
    pub fn detect<S: AsRef<str>>(names: &[S]) -> QueueOrder {
        let items = || names.iter().map(AsRef::as_ref).filter(|n| n.starts_with(QUEUE_ITEM_NAME));
        let mut sectioned = items().filter(|n| id_of(n).is_some()).peekable();
        if sectioned.peek().is_some() {
            return if sectioned.all(is_delay_name) { QueueOrder::Delay } else { QueueOrder::Id };
        }
        if items().any(is_priority_name) {
            QueueOrder::Priority
        } else {
            QueueOrder::Fifo
        }
    }

    /// The variant with this [`id`](Self::id).
    pub fn from_id(id: &str) -> Option<QueueOrder> {
        [QueueOrder::Fifo, QueueOrder::Id, QueueOrder::Priority, QueueOrder::Delay].into_iter().find(|o| o.id() == id)
    }

    /// A stable lowercase identifier (`fifo`, `id`, `priority`, `delay`).
    pub fn id(self) -> &'static str {
        match self {
            QueueOrder::Fifo => "fifo",
            QueueOrder::Id => "id",
            QueueOrder::Priority => "priority",
            QueueOrder::Delay => "delay",
        }
    }
}

/// A priority's code in an item name (Curator's `priorityToString`): `1` and the 8 upper-case
/// hex digits of a priority `>= 0`, `0` and the 8 hex digits of its 32-bit two's complement
/// otherwise, so plain string order is numeric order. Every `i32` has a code; Curator's
/// priority is a Java `int`, so there is nothing beyond.
pub fn priority_code(priority: i32) -> String {
    format!("{}{:08X}", if priority >= 0 { '1' } else { '0' }, priority as u32)
}

/// The name prefix of a priority queue's item at `priority`: `queue-<priority code>`.
pub fn priority_name(priority: i32) -> String {
    format!("{QUEUE_ITEM_NAME}{}", priority_code(priority))
}

/// The priority in a priority queue's item name (`queue-<code><sequence>`); `None` when the
/// name does not carry a well-formed code (such an item is still ordered by its name, as
/// Curator orders it).
pub fn priority_of(name: &str) -> Option<i32> {
    let code = name.strip_prefix(QUEUE_ITEM_NAME)?.get(..PRIORITY_CODE_LEN)?;
    // By `get`: a name from the server may carry any character there.
    let (sign, hex) = (code.get(..1)?, code.get(1..)?);
    if !hex.bytes().all(|b| b.is_ascii_digit() || (b'A'..=b'F').contains(&b)) {
        return None;
    }
    let value = u32::from_str_radix(hex, 16).ok()? as i32;
    match (sign, value >= 0) {
        ("1", true) | ("0", false) => Some(value),
        _ => None,
    }
}

/// An id as an id queue writes it into a name (Curator's `fixId`): `/` and `|` become `_`.
pub fn fix_id(id: &str) -> Cow<'_, str> {
    if id.contains(['/', SEPARATOR]) {
        Cow::Owned(id.replace(['/', SEPARATOR], "_"))
    } else {
        Cow::Borrowed(id)
    }
}

/// The name prefix of an id queue's item with this (fixed) id: `queue-|<id>|`.
pub fn id_name(id: &str) -> String {
    format!("{QUEUE_ITEM_NAME}{SEPARATOR}{}{SEPARATOR}", fix_id(id))
}

/// The id in an id queue's item name: the text between its first and second `|` (Curator's
/// `parseId`); `None` without both.
pub fn id_of(name: &str) -> Option<&str> {
    let first = name.find(SEPARATOR)?;
    let rest = &name[first + 1..];
    let second = rest.find(SEPARATOR)?;
    Some(&rest[..second])
}

/// An id queue's sort key: the name without its `|<id>|` section (`queue-<sequence>`), or the
/// whole name when it has no such section.
pub fn id_sort_key(name: &str) -> Cow<'_, str> {
    match (name.find(SEPARATOR), id_of(name)) {
        (Some(first), Some(id)) => {
            let after = first + 1 + id.len() + 1;
            Cow::Owned(format!("{}{}", &name[..first], &name[after..]))
        }
        _ => Cow::Borrowed(name),
    }
}

/// A delay's code in an item name (Curator's `epochToString`): `|`, the epoch in milliseconds
/// as upper-case hex of at least 8 digits, `|`.
pub fn delay_code(epoch_ms: u64) -> String {
    format!("{SEPARATOR}{epoch_ms:08X}{SEPARATOR}")
}

/// The name prefix of a delay queue's item due at `epoch_ms`: `queue-|<epoch hex>|`.
pub fn delay_name(epoch_ms: u64) -> String {
    format!("{QUEUE_ITEM_NAME}{}", delay_code(epoch_ms))
}

/// The epoch (milliseconds) in a delay queue's item name: the hex text between its last two
/// `|` (Curator's `getEpoch`); 0, due at once, when there is none or it does not parse.
pub fn delay_epoch_of(name: &str) -> u64 {
    let Some(last) = name.rfind(SEPARATOR) else { return 0 };
    let Some(first) = name[..last].rfind(SEPARATOR) else { return 0 };
    if first == 0 || last <= first + 1 {
        return 0;
    }
    let hex = &name[first + 1..last];
    // Java's `Long.parseLong(hex, 16)` also takes a sign and lower-case digits; a negative
    // epoch is in the past, as 0 is.
    match i64::from_str_radix(hex, 16) {
        Ok(epoch) => u64::try_from(epoch).unwrap_or(0),
        Err(_) => 0,
    }
}

/// Whether `sequence` is ZooKeeper's 10-digit sequence suffix.
fn is_sequence(sequence: &str) -> bool {
    sequence.len() == 10 && sequence.bytes().all(|b| b.is_ascii_digit())
}

/// `queue-<priority code><sequence>`.
fn is_priority_name(name: &str) -> bool {
    priority_of(name).is_some() && name.get(QUEUE_ITEM_NAME.len() + PRIORITY_CODE_LEN..).is_some_and(is_sequence)
}

/// `queue-|<epoch, upper-case hex, 8 digits or more>|<sequence>`.
fn is_delay_name(name: &str) -> bool {
    let Some(rest) = name.strip_prefix(QUEUE_ITEM_NAME).and_then(|r| r.strip_prefix(SEPARATOR)) else {
        return false;
    };
    let Some((hex, sequence)) = rest.split_once(SEPARATOR) else { return false };
    hex.len() >= 8 && hex.bytes().all(|b| b.is_ascii_digit() || (b'A'..=b'F').contains(&b)) && is_sequence(sequence)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn priority_codes_are_curators() {
        // Measured with Curator 5.4.0.
        for (p, code) in [
            (0, "100000000"),
            (5, "100000005"),
            (-1, "0FFFFFFFF"),
            (-2, "0FFFFFFFE"),
            (i32::MAX, "17FFFFFFF"),
            (i32::MIN, "080000000"),
        ] {
            assert_eq!(priority_code(p), code);
            assert_eq!(priority_of(&format!("queue-{code}0000000001")), Some(p));
        }
        assert_eq!(priority_of("queue-0000000001"), None, "a plain item");
        assert_eq!(priority_of("queue-100000005"), Some(5), "no sequence needed");
        assert_eq!(priority_of("queue-17FFFFFFG0000000001"), None);
        assert_eq!(priority_of("queue-080000001"), Some(i32::MIN + 1));
        assert_eq!(priority_of("queue-000000001"), None, "a positive value with the negative sign");
        // Any client may name a child: a character of two bytes where the sign goes.
        assert_eq!(priority_of("queue-\u{e9}12345670000000001"), None);
        assert_eq!(priority_of("queue-1\u{e9}234567"), None);
        // String order is numeric order.
        let mut codes: Vec<i32> = vec![3, -7, 0, i32::MIN, i32::MAX, -1, 1];
        codes.sort_by_key(|p| priority_code(*p));
        assert_eq!(codes, [i32::MIN, -7, -1, 0, 1, 3, i32::MAX]);
    }

    #[test]
    fn ids_are_curators() {
        assert_eq!(id_name("job-7"), "queue-|job-7|");
        assert_eq!(id_name("a/b|c"), "queue-|a_b_c|");
        assert_eq!(id_of("queue-|job-7|0000000002"), Some("job-7"));
        assert_eq!(id_of("queue-0000000002"), None);
        assert_eq!(id_of("queue-|open0000000002"), None);
        assert_eq!(id_sort_key("queue-|zzz|0000000002"), "queue-0000000002");
        assert_eq!(id_sort_key("queue-0000000002"), "queue-0000000002");
        let mut names: Vec<String> =
            ["queue-|b|0000000003", "queue-|zz|0000000001", "queue-|a|0000000002"].map(str::to_owned).to_vec();
        QueueOrder::Id.sort(&mut names);
        assert_eq!(names, ["queue-|zz|0000000001", "queue-|a|0000000002", "queue-|b|0000000003"]);
    }

    #[test]
    fn the_variant_is_told_by_the_names() {
        let detect = |names: &[&str]| QueueOrder::detect(names);
        assert_eq!(detect(&[]), QueueOrder::Fifo);
        assert_eq!(detect(&["queue-0000000001", "queue-1000000005"]), QueueOrder::Fifo, "a sequence is no code");
        assert_eq!(detect(&["queue-1000000050000000003", "notes"]), QueueOrder::Priority);
        assert_eq!(detect(&["queue-0000000001", "queue-0FFFFFFFF0000000002"]), QueueOrder::Priority);
        assert_eq!(detect(&["queue-|18BCFE5687B|0000000007", "queue-|00000001|0000000008"]), QueueOrder::Delay);
        assert_eq!(detect(&["queue-|18BCFE5687B|0000000007", "queue-|job-7|0000000008"]), QueueOrder::Id);
        assert_eq!(detect(&["queue-|1|0000000001"]), QueueOrder::Id, "too short for an epoch");
        assert_eq!(detect(&["queue-|ff00ff00|0000000001"]), QueueOrder::Id, "Curator writes upper case");
        assert_eq!(detect(&["queue-|DEADBEEF|0000000001"]), QueueOrder::Delay, "ambiguous: an epoch");
        for order in [QueueOrder::Fifo, QueueOrder::Id, QueueOrder::Priority, QueueOrder::Delay] {
            assert_eq!(QueueOrder::from_id(order.id()), Some(order));
        }
        assert_eq!(QueueOrder::from_id("lifo"), None);
    }

    #[test]
    fn delays_are_curators() {
        // Measured with Curator 5.4.0.
        assert_eq!(delay_code(1_700_000_000_123), "|18BCFE5687B|");
        assert_eq!(delay_code(1), "|00000001|");
        assert_eq!(delay_name(1), "queue-|00000001|");
        assert_eq!(priority_name(-2), "queue-0FFFFFFFE");
        assert_eq!(delay_epoch_of("queue-|18BCFE5687B|0000000007"), 1_700_000_000_123);
        assert_eq!(delay_epoch_of("queue-0000000007"), 0);
        assert_eq!(delay_epoch_of("queue-||0000000007"), 0);
        assert_eq!(delay_epoch_of("queue-|xyz|0000000007"), 0);
        assert_eq!(delay_epoch_of("queue-|-5|0000000007"), 0);
        assert_eq!(delay_epoch_of("queue-|ff|0000000007"), 255, "Java parses lower case too");
        let mut names: Vec<String> = [
            "queue-|00000003|0000000001",
            "queue-0000000004",
            "queue-|00000002|0000000002",
            "queue-|00000002|0000000000",
        ]
        .map(str::to_owned)
        .to_vec();
        QueueOrder::Delay.sort(&mut names);
        assert_eq!(
            names,
            [
                "queue-0000000004",
                "queue-|00000002|0000000000",
                "queue-|00000002|0000000002",
                "queue-|00000003|0000000001"
            ]
        );
    }
}
