//! The bytes the value recipes keep in their nodes, as Curator 5.x writes them: a shared count
//! and an atomic integer as 4 big-endian bytes, an atomic long as 8, queue items in Curator's
//! item framing. The recipes encode and decode with these functions, so a tool that decodes with
//! them reads exactly what the recipes (Rust or Java) wrote.
//!
//! ```
//! use zk_recipes::protocol::values;
//!
//! assert_eq!(values::encode_count(-2), [0xff, 0xff, 0xff, 0xfe]);
//! assert_eq!(values::decode_count(&[0, 0, 1, 0]), Ok(256));
//! assert!(values::decode_count(&[0, 0, 1]).is_err()); // Curator's getCount() throws here too
//! assert_eq!(values::decode_atomic_long(&[]), Ok(0)); // an empty node counts as zero
//! ```

/// A node's bytes do not have the recipe's layout.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{found}, where a {expected} was expected")]
pub struct ValueError {
    /// What the layout asks for (`4-byte count`, `8-byte long`, `queue item`).
    pub expected: &'static str,
    /// What was found instead, in words.
    pub found: String,
}

impl ValueError {
    fn length(expected: &'static str, len: usize) -> ValueError {
        ValueError { expected, found: format!("{len} bytes") }
    }
}

/// What a `SharedCount` node and a `DistributedAtomicInteger` node hold.
pub const COUNT_EXPECTED: &str = "4-byte big-endian count";

/// What a `DistributedAtomicLong` node holds.
pub const LONG_EXPECTED: &str = "8-byte big-endian long";

/// What a `DistributedQueue` item node holds.
pub const QUEUE_ITEM_EXPECTED: &str = "queue item (Curator's item framing)";

/// A `SharedCount`'s bytes (Curator's `ByteBuffer.putInt`): 4 bytes, big-endian two's
/// complement.
pub fn encode_count(count: i32) -> [u8; 4] {
    count.to_be_bytes()
}

/// A `SharedCount`'s value. Exactly 4 bytes: Curator throws on fewer (and silently ignores
/// bytes after the fourth, which here are refused, since no Curator writer makes them).
///
/// # Errors
/// [`ValueError`] for any other length.
pub fn decode_count(bytes: &[u8]) -> Result<i32, ValueError> {
    <[u8; 4]>::try_from(bytes).map(i32::from_be_bytes).map_err(|_| ValueError::length(COUNT_EXPECTED, bytes.len()))
}

/// A `DistributedAtomicInteger`'s value: no bytes count as 0 (a node created without data,
/// as Curator reads it), otherwise exactly 4 big-endian bytes.
///
/// # Errors
/// [`ValueError`] for any other length.
pub fn decode_atomic_int(bytes: &[u8]) -> Result<i32, ValueError> {
    if bytes.is_empty() {
        return Ok(0);
    }
    decode_count(bytes)
}

/// A `DistributedAtomicLong`'s bytes (Curator's `ByteBuffer.putLong`).
pub fn encode_long(value: i64) -> [u8; 8] {
    value.to_be_bytes()
}

/// A `DistributedAtomicLong`'s value: no bytes count as 0, otherwise exactly 8 big-endian
/// bytes (Curator throws on fewer and reads the first 8 of more; more are refused here).
///
/// # Errors
/// [`ValueError`] for any other length.
pub fn decode_atomic_long(bytes: &[u8]) -> Result<i64, ValueError> {
    if bytes.is_empty() {
        return Ok(0);
    }
    <[u8; 8]>::try_from(bytes).map(i64::from_be_bytes).map_err(|_| ValueError::length(LONG_EXPECTED, bytes.len()))
}

/// The version word that starts every `DistributedQueue` item node (Curator's
/// `ItemSerializer.VERSION`).
pub const QUEUE_ITEM_VERSION: u32 = 0x0001_0001;
const ITEM_OPCODE: u8 = 0x01;
const EOF_OPCODE: u8 = 0x02;

/// One `DistributedQueue` node's bytes for `items` (Curator's `ItemSerializer`, its
/// `MultiItem` format; a single `put` is a one-item list): the version word, then per item
/// `0x01`, a 4-byte big-endian length and the bytes, then `0x02`. All big-endian.
pub fn encode_queue_items<I: AsRef<[u8]>>(items: &[I]) -> Vec<u8> {
    let size = 5 + items.iter().map(|i| 5 + i.as_ref().len()).sum::<usize>();
    let mut out = Vec::with_capacity(size);
    out.extend_from_slice(&QUEUE_ITEM_VERSION.to_be_bytes());
    for item in items {
        let item = item.as_ref();
        out.push(ITEM_OPCODE);
        // An item that does not fit an i32 length cannot be in a ZooKeeper node either.
        out.extend_from_slice(&u32::try_from(item.len()).unwrap_or(u32::MAX).to_be_bytes());
        out.extend_from_slice(item);
    }
    out.push(EOF_OPCODE);
    out
}

/// The items of one `DistributedQueue` node, checked as Curator's reader checks them: the
/// version word, only item and end opcodes, no negative length, nothing truncated. Bytes after
/// the end opcode are ignored, as Curator ignores them.
///
/// # Errors
/// [`ValueError`] naming the first problem.
pub fn decode_queue_items(bytes: &[u8]) -> Result<Vec<Vec<u8>>, ValueError> {
    let bad = |found: String| ValueError { expected: QUEUE_ITEM_EXPECTED, found };
    let word = |at: usize| -> Result<u32, ValueError> {
        bytes
            .get(at..at + 4)
            .map(|w| u32::from_be_bytes([w[0], w[1], w[2], w[3]]))
            .ok_or_else(|| bad(format!("truncated at byte {at}")))
    };
    let version = word(0)?;
    if version != QUEUE_ITEM_VERSION {
        return Err(bad(format!("version {version:#010x}")));
    }
    let mut at = 4;
    let mut items = Vec::new();
    loop {
        match bytes.get(at) {
            None => return Err(bad(format!("truncated at byte {at}"))),
            Some(&EOF_OPCODE) => return Ok(items),
            Some(&ITEM_OPCODE) => {
                let len = word(at + 1)?;
                if len > i32::MAX as u32 {
                    return Err(bad(format!("a negative item length at byte {}", at + 1)));
                }
                let start = at + 5;
                let end = start + len as usize;
                let item = bytes.get(start..end).ok_or_else(|| bad(format!("truncated at byte {}", bytes.len())))?;
                items.push(item.to_vec());
                at = end;
            }
            Some(other) => return Err(bad(format!("opcode {other:#04x} at byte {at}"))),
        }
    }
}

/// A recipe whose state is one node's data rather than its children (a node without children
/// is [`Recipe::Empty`](super::Recipe::Empty) to [`classify`](super::classify): name the
/// recipe to decode it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ValueLayout {
    /// `SharedCount`: 4 big-endian bytes.
    SharedCount,
    /// `SharedValue`: raw bytes.
    SharedValue,
    /// `DistributedAtomicLong`: 8 big-endian bytes (none reads as 0). A `CachedAtomicLong`'s
    /// node is one: it holds the end of the last block of values reserved.
    AtomicLong,
    /// `DistributedAtomicInteger`: 4 big-endian bytes (none reads as 0), also a
    /// `CachedAtomicInteger`'s node.
    AtomicInteger,
    /// `DistributedAtomicValue`: raw bytes.
    AtomicValue,
    /// `DistributedBarrier`: the node's existence is the barrier; its data (Curator writes the
    /// setter's IP address) means nothing.
    Barrier,
}

/// A value node, decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum DecodedValue {
    /// A count or counter.
    Number(i64),
    /// Raw bytes.
    Bytes(Vec<u8>),
    /// A barrier that is set (its node exists).
    Set,
}

impl ValueLayout {
    /// Every value layout.
    pub const ALL: &'static [ValueLayout] = &[
        ValueLayout::SharedCount,
        ValueLayout::SharedValue,
        ValueLayout::AtomicLong,
        ValueLayout::AtomicInteger,
        ValueLayout::AtomicValue,
        ValueLayout::Barrier,
    ];

    /// The layout whose [`id`](Self::id) is `id`.
    pub fn from_id(id: &str) -> Option<ValueLayout> {
        ValueLayout::ALL.iter().copied().find(|layout| layout.id() == id)
    }

    /// The counter layouts a node of `len` bytes can be, most specific first: 4 bytes a
    /// `SharedCount` or a `DistributedAtomicInteger` (one format), 8 a `DistributedAtomicLong`,
    /// none either atomic (both read an empty node as 0; a `SharedCount` refuses it), any other
    /// length no counter.
    pub fn counters_of_length(len: usize) -> &'static [ValueLayout] {
        match len {
            0 => &[ValueLayout::AtomicLong, ValueLayout::AtomicInteger],
            4 => &[ValueLayout::SharedCount, ValueLayout::AtomicInteger],
            8 => &[ValueLayout::AtomicLong],
            _ => &[],
        }
    }

    /// The Curator class that writes the layout, and its bytes, in words.
    pub fn describe(self) -> &'static str {
        match self {
            ValueLayout::SharedCount => "SharedCount (4 big-endian bytes)",
            ValueLayout::SharedValue => "SharedValue (raw bytes)",
            ValueLayout::AtomicLong => "DistributedAtomicLong (8 big-endian bytes)",
            ValueLayout::AtomicInteger => "DistributedAtomicInteger (4 big-endian bytes)",
            ValueLayout::AtomicValue => "DistributedAtomicValue (raw bytes)",
            ValueLayout::Barrier => "DistributedBarrier (set while the node exists)",
        }
    }

    /// A stable lowercase identifier (`shared-count`, `atomic-long`, ...).
    pub fn id(self) -> &'static str {
        match self {
            ValueLayout::SharedCount => "shared-count",
            ValueLayout::SharedValue => "shared-value",
            ValueLayout::AtomicLong => "atomic-long",
            ValueLayout::AtomicInteger => "atomic-integer",
            ValueLayout::AtomicValue => "atomic-value",
            ValueLayout::Barrier => "barrier",
        }
    }

    /// Decodes an existing node's data.
    ///
    /// # Errors
    /// [`ValueError`] when the bytes do not have the layout.
    pub fn decode(self, bytes: &[u8]) -> Result<DecodedValue, ValueError> {
        Ok(match self {
            ValueLayout::SharedCount => DecodedValue::Number(decode_count(bytes)?.into()),
            ValueLayout::AtomicInteger => DecodedValue::Number(decode_atomic_int(bytes)?.into()),
            ValueLayout::AtomicLong => DecodedValue::Number(decode_atomic_long(bytes)?),
            ValueLayout::SharedValue | ValueLayout::AtomicValue => DecodedValue::Bytes(bytes.to_vec()),
            ValueLayout::Barrier => DecodedValue::Set,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_are_four_big_endian_bytes() {
        assert_eq!(encode_count(1), [0, 0, 0, 1]);
        assert_eq!(encode_count(i32::MIN), [0x80, 0, 0, 0]);
        for v in [0, 1, -1, 256, i32::MAX, i32::MIN] {
            assert_eq!(decode_count(&encode_count(v)), Ok(v));
            assert_eq!(decode_atomic_int(&encode_count(v)), Ok(v));
        }
        for bad in [&[][..], &[1, 2, 3], &[0, 0, 0, 0, 9]] {
            assert!(decode_count(bad).is_err(), "{bad:?}");
        }
        assert_eq!(decode_atomic_int(&[]), Ok(0));
        assert!(decode_atomic_int(&[1, 2, 3]).is_err());
    }

    #[test]
    fn longs_are_eight_big_endian_bytes() {
        assert_eq!(encode_long(258), [0, 0, 0, 0, 0, 0, 1, 2]);
        for v in [0, 1, -1, i64::MAX, i64::MIN] {
            assert_eq!(decode_atomic_long(&encode_long(v)), Ok(v));
        }
        assert_eq!(decode_atomic_long(&[]), Ok(0));
        let err = decode_atomic_long(&[0; 9]).unwrap_err();
        assert_eq!(err.to_string(), "9 bytes, where a 8-byte big-endian long was expected");
        assert!(decode_atomic_long(&[0; 4]).is_err(), "an integer's node is not a long");
    }

    #[test]
    fn value_layouts_decode_their_nodes() {
        assert_eq!(ValueLayout::SharedCount.decode(&[0, 0, 0, 3]), Ok(DecodedValue::Number(3)));
        assert!(ValueLayout::SharedCount.decode(&[]).is_err());
        assert_eq!(ValueLayout::AtomicInteger.decode(&[]), Ok(DecodedValue::Number(0)));
        assert_eq!(ValueLayout::AtomicLong.decode(&encode_long(-5)), Ok(DecodedValue::Number(-5)));
        assert_eq!(ValueLayout::SharedValue.decode(b"x"), Ok(DecodedValue::Bytes(b"x".to_vec())));
        assert_eq!(ValueLayout::Barrier.decode(b"10.0.0.5"), Ok(DecodedValue::Set));
        assert_eq!(ValueLayout::AtomicLong.id(), "atomic-long");
    }

    #[test]
    fn value_layouts_by_id_and_counters_by_length() {
        for layout in ValueLayout::ALL {
            assert_eq!(ValueLayout::from_id(layout.id()), Some(*layout));
        }
        assert_eq!(ValueLayout::from_id("mutex"), None);
        assert_eq!(ValueLayout::counters_of_length(8), [ValueLayout::AtomicLong]);
        assert_eq!(ValueLayout::counters_of_length(4), [ValueLayout::SharedCount, ValueLayout::AtomicInteger]);
        assert_eq!(ValueLayout::counters_of_length(0), [ValueLayout::AtomicLong, ValueLayout::AtomicInteger]);
        for len in [1, 3, 5, 9] {
            assert!(ValueLayout::counters_of_length(len).is_empty(), "{len}");
        }
        for len in [0, 4, 8] {
            for layout in ValueLayout::counters_of_length(len) {
                assert!(layout.decode(&vec![0; len]).is_ok(), "{layout:?} decodes {len} bytes");
            }
        }
    }

    #[test]
    fn queue_items_use_curators_framing() {
        // Measured with Curator 5.4.0: ["ab", "", "c"].
        let bytes = encode_queue_items(&[&b"ab"[..], b"", b"c"]);
        let expected = [0, 1, 0, 1, 1, 0, 0, 0, 2, 0x61, 0x62, 1, 0, 0, 0, 0, 1, 0, 0, 0, 1, 0x63, 2];
        assert_eq!(bytes, expected);
        assert_eq!(decode_queue_items(&bytes).unwrap(), vec![b"ab".to_vec(), vec![], b"c".to_vec()]);
        assert_eq!(decode_queue_items(&encode_queue_items::<&[u8]>(&[])).unwrap(), Vec::<Vec<u8>>::new());
        // Curator's reader refusals.
        assert!(decode_queue_items(&[0, 1, 0, 2, 2]).is_err(), "version");
        assert!(decode_queue_items(&[0, 1, 0, 1, 3]).is_err(), "opcode");
        assert!(decode_queue_items(&[0, 1, 0, 1, 1, 0xff, 0xff, 0xff, 0xff]).is_err(), "negative length");
        assert!(decode_queue_items(&[0, 1, 0, 1, 1, 0, 0, 0, 5, 1]).is_err(), "truncated");
        assert!(decode_queue_items(&[0, 1, 0, 1]).is_err(), "no end");
    }
}
