//! kazoo's (the Python client's) recipe layouts that this crate shares with kazoo: its lock
//! nodes (`<uuid hex>__lock__<sequence>`, the identifier as data), the lease record of its
//! `NonBlockingLease` (`<path>/lease_holder`, JSON), and its `SetPartitioner`'s directories.
//!
//! ```
//! use std::time::{Duration, UNIX_EPOCH};
//! use zk_recipes::protocol::kazoo::{self, LeaseRecord};
//!
//! let end = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
//! let bytes = kazoo::encode_lease_record("host-a", end);
//! assert_eq!(bytes, br#"{"version": 1, "holder": "host-a", "end": "2023-11-14T22:13:20"}"#);
//! let record = kazoo::decode_lease_record(&bytes).unwrap();
//! assert_eq!(record, LeaseRecord { version: 1, holder: "host-a".into(), end: "2023-11-14T22:13:20".into() });
//! assert_eq!(record.end_time(), Some(end));
//! assert_eq!(kazoo::lock_sequence("0f1e2d3c4b5a69788796a5b4c3d2e1f0__lock__0000000012"), Some("0000000012"));
//! ```

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::values::ValueError;

/// The name part of a kazoo lock node, between the contender's uuid and the sequence.
pub const KAZOO_LOCK_NAME: &str = "__lock__";

/// The child of a lease's path that holds its record.
pub const LEASE_HOLDER: &str = "lease_holder";

/// The record format kazoo writes (and the only one it accepts: a lease of another version is
/// never taken).
pub const LEASE_VERSION: i64 = 1;

/// The directory of a `SetPartitioner`'s members, under its path: each member an ephemeral
/// `<uuid hex>-<identifier>`, the identifier as data.
pub const PARTITION_PARTY: &str = "party";

/// The directory of a `SetPartitioner`'s item locks, under its path: a kazoo lock at
/// `locks/<item>` per item.
pub const PARTITION_LOCKS: &str = "locks";

/// The identifier of a `SetPartitioner` member's party node (`<uuid hex>-<identifier>`: the
/// text after the first `-`).
pub fn party_member(name: &str) -> &str {
    name.split_once('-').map_or(name, |(_, identifier)| identifier)
}

/// What a lease record is, for [`ValueError`].
const LEASE_EXPECTED: &str = "kazoo lease record";

/// A `NonBlockingLease`'s record: who holds the lease and until when (`end`, UTC, as
/// `%Y-%m-%dT%H:%M:%S`: whole seconds, no zone).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseRecord {
    /// The record format (kazoo's is [`LEASE_VERSION`]).
    pub version: i64,
    /// The identifier of the holder.
    pub holder: String,
    /// The end of the lease, as written.
    pub end: String,
}

impl LeaseRecord {
    /// The end as a time; `None` when it is not `%Y-%m-%dT%H:%M:%S` (kazoo cannot read it
    /// either).
    pub fn end_time(&self) -> Option<SystemTime> {
        parse_utc(&self.end)
    }
}

/// The record of a lease held by `holder` until `end` (truncated to whole seconds), byte for
/// byte as kazoo's `json.dumps` writes it: `{"version": 1, "holder": "...", "end": "..."}`,
/// non-ASCII characters escaped.
pub fn encode_lease_record(holder: &str, end: SystemTime) -> Vec<u8> {
    let mut out = String::from("{\"version\": 1, \"holder\": ");
    push_json_string(&mut out, holder);
    out.push_str(", \"end\": ");
    push_json_string(&mut out, &format_utc(end));
    out.push('}');
    out.into_bytes()
}

/// A lease record: a JSON object with `version` (an integer), `holder` and `end` (strings);
/// other members are ignored.
///
/// # Errors
/// A [`ValueError`] for bytes that are not such an object (kazoo fails on them too).
pub fn decode_lease_record(bytes: &[u8]) -> Result<LeaseRecord, ValueError> {
    let error = |found: &str| ValueError { expected: LEASE_EXPECTED, found: found.to_owned() };
    let text = std::str::from_utf8(bytes).map_err(|_| error("bytes that are not UTF-8"))?;
    let members = json::parse_flat_object(text).map_err(|e| error(&e))?;
    let (mut version, mut holder, mut end) = (None, None, None);
    for (key, value) in members {
        match (key.as_str(), value) {
            ("version", json::Value::Integer(v)) => version = Some(v),
            ("holder", json::Value::String(v)) => holder = Some(v),
            ("end", json::Value::String(v)) => end = Some(v),
            ("version" | "holder" | "end", _) => return Err(error(&format!("`{key}` of the wrong type"))),
            _ => {}
        }
    }
    match (version, holder, end) {
        (Some(version), Some(holder), Some(end)) => Ok(LeaseRecord { version, holder, end }),
        _ => Err(error("an object without `version`, `holder` and `end`")),
    }
}

/// The sequence of a kazoo lock node (`…__lock__<10 digits, maybe after a minus>`), as the
/// text kazoo compares contenders by; `None` for a node that is no kazoo lock contender.
pub fn lock_sequence(name: &str) -> Option<&str> {
    let at = name.rfind(KAZOO_LOCK_NAME)?;
    let sequence = &name[at + KAZOO_LOCK_NAME.len()..];
    let digits = sequence.strip_prefix('-').unwrap_or(sequence);
    (digits.len() == 10 && digits.bytes().all(|b| b.is_ascii_digit())).then_some(sequence)
}

/// The contender `name` waits for among `children`, by kazoo's rule: the one with the
/// greatest sequence below its own, sequences compared as text. `None` when `name` holds the
/// lock (no contender before it) or is no contender.
pub fn lock_predecessor<'a, S: AsRef<str>>(children: &'a [S], name: &str) -> Option<&'a str> {
    let ours = lock_sequence(name)?;
    children
        .iter()
        .map(AsRef::as_ref)
        .filter_map(|child| lock_sequence(child).filter(|s| *s < ours).map(|s| (s, child)))
        .max_by(|a, b| a.0.cmp(b.0))
        .map(|(_, child)| child)
}

/// `time` as kazoo writes it (`%Y-%m-%dT%H:%M:%S`, UTC, whole seconds; times before 1970
/// as 1970-01-01T00:00:00).
pub fn format_utc(time: SystemTime) -> String {
    let secs = time.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let (days, rest) = (secs / 86_400, secs % 86_400);
    let (y, m, d) = civil_from_days(days as i64);
    format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}", rest / 3600, rest % 3600 / 60, rest % 60)
}

/// The time `%Y-%m-%dT%H:%M:%S` (UTC) names; `None` for other text or a time before 1970.
pub fn parse_utc(text: &str) -> Option<SystemTime> {
    let b = text.as_bytes();
    if b.len() != 19 || b[4] != b'-' || b[7] != b'-' || b[10] != b'T' || b[13] != b':' || b[16] != b':' {
        return None;
    }
    let num = |range: std::ops::Range<usize>| -> Option<u64> {
        let part = &text[range];
        part.bytes().all(|c| c.is_ascii_digit()).then(|| part.parse().ok())?
    };
    let (y, m, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (hh, mm, ss) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&m) || d == 0 || d > days_in_month(y, m) || hh > 23 || mm > 59 || ss > 59 {
        return None;
    }
    let days = u64::try_from(days_from_civil(y as i64, m, d)).ok()?;
    Some(UNIX_EPOCH + Duration::from_secs(days * 86_400 + hh * 3600 + mm * 60 + ss))
}

fn days_in_month(y: u64, m: u64) -> u64 {
    match m {
        2 if (y % 4 == 0 && y % 100 != 0) || y % 400 == 0 => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: u64, d: u64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m as i64 + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d as i64 - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The date of a day count since 1970-01-01.
fn civil_from_days(z: i64) -> (i64, u64, u64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u64;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u64;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

/// `s` as a JSON string the way Python's `json.dumps` writes it (`ensure_ascii`).
fn push_json_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (' '..='~').contains(&c) => out.push(c),
            c => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    out.push_str(&format!("\\u{unit:04x}"));
                }
            }
        }
    }
    out.push('"');
}

/// Just enough JSON to read a flat object of strings and numbers (what kazoo writes).
mod json {
    pub(super) enum Value {
        String(String),
        Integer(i64),
        Other,
    }

    pub(super) fn parse_flat_object(text: &str) -> Result<Vec<(String, Value)>, String> {
        let mut p = Parser { chars: text.char_indices().peekable(), text };
        p.ws();
        p.expect('{')?;
        let mut members = Vec::new();
        p.ws();
        if p.peek() == Some('}') {
            p.next();
        } else {
            loop {
                p.ws();
                let key = p.string()?;
                p.ws();
                p.expect(':')?;
                p.ws();
                let value = p.value()?;
                members.push((key, value));
                p.ws();
                match p.next() {
                    Some(',') => continue,
                    Some('}') => break,
                    _ => return Err("not a JSON object".into()),
                }
            }
        }
        p.ws();
        if p.next().is_some() {
            return Err("bytes after the JSON object".into());
        }
        Ok(members)
    }

    struct Parser<'a> {
        chars: std::iter::Peekable<std::str::CharIndices<'a>>,
        text: &'a str,
    }

    impl Parser<'_> {
        fn peek(&mut self) -> Option<char> {
            self.chars.peek().map(|(_, c)| *c)
        }

        fn next(&mut self) -> Option<char> {
            self.chars.next().map(|(_, c)| c)
        }

        fn ws(&mut self) {
            while matches!(self.peek(), Some(' ' | '\t' | '\n' | '\r')) {
                self.next();
            }
        }

        fn expect(&mut self, c: char) -> Result<(), String> {
            if self.next() == Some(c) {
                Ok(())
            } else {
                Err("not a JSON object".into())
            }
        }

        fn hex4(&mut self) -> Result<u32, String> {
            let mut v = 0;
            for _ in 0..4 {
                let d = self.next().and_then(|c| c.to_digit(16)).ok_or("a bad \\u escape")?;
                v = v * 16 + d;
            }
            Ok(v)
        }

        fn string(&mut self) -> Result<String, String> {
            self.expect('"').map_err(|_| "a JSON key that is not a string".to_owned())?;
            let mut out = String::new();
            loop {
                match self.next().ok_or("an unterminated string")? {
                    '"' => return Ok(out),
                    '\\' => match self.next().ok_or("an unterminated string")? {
                        '"' => out.push('"'),
                        '\\' => out.push('\\'),
                        '/' => out.push('/'),
                        'b' => out.push('\u{8}'),
                        'f' => out.push('\u{c}'),
                        'n' => out.push('\n'),
                        'r' => out.push('\r'),
                        't' => out.push('\t'),
                        'u' => {
                            let first = self.hex4()?;
                            let code = if (0xd800..0xdc00).contains(&first) {
                                if self.next() != Some('\\') || self.next() != Some('u') {
                                    return Err("a lone surrogate".into());
                                }
                                let second = self.hex4()?;
                                if !(0xdc00..0xe000).contains(&second) {
                                    return Err("a lone surrogate".into());
                                }
                                0x10000 + ((first - 0xd800) << 10) + (second - 0xdc00)
                            } else {
                                first
                            };
                            out.push(char::from_u32(code).ok_or("a lone surrogate")?);
                        }
                        _ => return Err("a bad escape".into()),
                    },
                    c if (c as u32) < 0x20 => return Err("a control character in a string".into()),
                    c => out.push(c),
                }
            }
        }

        fn value(&mut self) -> Result<Value, String> {
            match self.peek().ok_or("a missing value")? {
                '"' => self.string().map(Value::String),
                '-' | '0'..='9' => {
                    let start = self.chars.peek().map_or(self.text.len(), |(i, _)| *i);
                    let mut end = start;
                    while let Some((i, c)) = self.chars.peek().copied() {
                        if !(c.is_ascii_digit() || matches!(c, '-' | '+' | '.' | 'e' | 'E')) {
                            break;
                        }
                        end = i + c.len_utf8();
                        self.next();
                    }
                    let number = &self.text[start..end];
                    Ok(number.parse().map(Value::Integer).unwrap_or(Value::Other))
                }
                _ => {
                    for word in ["true", "false", "null"] {
                        let rest = self.chars.peek().map_or("", |(i, _)| &self.text[*i..]);
                        if rest.starts_with(word) {
                            for _ in 0..word.len() {
                                self.next();
                            }
                            return Ok(Value::Other);
                        }
                    }
                    Err("a nested or unknown JSON value".into())
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_round_trip() {
        for secs in [0u64, 59, 86_399, 86_400, 951_782_400, 1_709_164_800, 4_102_444_799, 253_402_300_799] {
            let t = UNIX_EPOCH + Duration::from_secs(secs);
            assert_eq!(parse_utc(&format_utc(t)), Some(t), "{}", format_utc(t));
        }
        assert_eq!(format_utc(UNIX_EPOCH + Duration::from_secs(951_782_400)), "2000-02-29T00:00:00");
        assert_eq!(parse_utc("2023-02-29T00:00:00"), None);
        assert_eq!(parse_utc("2023-01-01 00:00:00"), None);
        assert_eq!(parse_utc("2023-01-01T24:00:00"), None);
    }

    #[test]
    fn records_are_pythons_json() {
        let end = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        assert_eq!(
            encode_lease_record("h\u{e9}\"\\\u{1f600}", end),
            br#"{"version": 1, "holder": "h\u00e9\"\\\ud83d\ude00", "end": "2023-11-14T22:13:20"}"#
        );
        let back = decode_lease_record(&encode_lease_record("h\u{e9}\"\\\u{1f600}", end)).unwrap();
        assert_eq!(back.holder, "h\u{e9}\"\\\u{1f600}");
        let compact = decode_lease_record(br#"{"end":"2023-11-14T22:13:20","holder":"x","version":2,"more":[1]}"#);
        assert!(compact.is_err(), "a nested value is refused");
        let other = decode_lease_record(br#"{"end":"2023-11-14T22:13:20","holder":"x","version":2,"x":null}"#);
        assert_eq!(other.unwrap().version, 2);
        assert!(decode_lease_record(b"").is_err());
        assert!(decode_lease_record(br#"{"version": "1", "holder": "x", "end": "y"}"#).is_err());
        assert!(decode_lease_record(br#"{"version": 1, "holder": "x"}"#).is_err());
        assert!(decode_lease_record(br#"{"version": 1, "holder": "x", "end": "y"} x"#).is_err());
    }

    #[test]
    fn lock_predecessors_follow_kazoo() {
        let a = "aaaa__lock__0000000003";
        let b = "bbbb__lock__0000000001";
        let c = "cccc__lock__0000000002";
        let children = [a, b, c, "lease_holder", "dddd__lock__000000002"];
        assert_eq!(lock_predecessor(&children, b), None);
        assert_eq!(lock_predecessor(&children, c), Some(b));
        assert_eq!(lock_predecessor(&children, a), Some(c));
        assert_eq!(lock_predecessor(&children, "lease_holder"), None);
        assert_eq!(lock_sequence("x__lock__-000000001"), None);
        assert_eq!(lock_sequence("x__lock__-0000000001"), Some("-0000000001"));
    }
}
