//! How the subcommands' tables show node data, ages, times, fields and columns.

use std::fmt::Write;

use zk_recipes::protocol::gzip;

/// Node data as `(text, "text")` when it is printable UTF-8, else `(hex, "hex")`.
pub fn data(bytes: &[u8]) -> (Option<String>, &'static str) {
    match std::str::from_utf8(bytes) {
        Ok(text) if !text.chars().any(char::is_control) => (Some(text.to_owned()), "text"),
        _ => (Some(hex(bytes)), "hex"),
    }
}

/// Lowercase hex, two digits a byte (data of up to 64 MiB once decompressed: no allocation
/// per byte).
fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 0x0f)]));
    }
    out
}

/// A table cell from a string anyone may have written (an instance's JSON): control
/// characters escaped (`\u{1b}`), so nothing reaches the terminal as a command.
pub fn cell(text: &str) -> String {
    text.chars().map(|c| if c.is_control() { c.escape_default().to_string() } else { c.to_string() }).collect()
}

/// Node data as [`data`] shows it, decompressed first when it is gzip (Curator's
/// `compressed()` writes and compressed models): `"gzip-text"` or `"gzip-hex"` then. Data that
/// starts with gzip's magic bytes but does not decompress is shown as stored.
pub fn data_decompressed(bytes: &[u8]) -> (Option<String>, &'static str) {
    if !gzip::is_gzip(bytes) {
        return data(bytes);
    }
    match gzip::decompress(bytes) {
        Ok(plain) => match data(&plain) {
            (shown, "text") => (shown, "gzip-text"),
            (shown, _) => (shown, "gzip-hex"),
        },
        Err(_) => data(bytes),
    }
}

/// How deep `pretty_json` indents: deeper JSON is shown as it is written (indenting each of
/// `n` levels would print about `n * n` spaces).
const MAX_INDENTED_DEPTH: usize = 64;

/// `text` indented two spaces a level when it is a JSON object or array, its tokens as written
/// (field order, numbers such as Jackson's `1.0E7` and escapes kept); `None` for anything
/// else, a bare JSON number or string included, and for JSON nested deeper than 64 levels.
pub fn pretty_json(text: &str) -> Option<String> {
    let text = text.trim();
    if !(text.starts_with('{') || text.starts_with('[')) {
        return None;
    }
    serde_json::from_str::<serde::de::IgnoredAny>(text).ok()?;
    let mut out = String::with_capacity(text.len() * 2);
    let newline = |out: &mut String, depth: usize| {
        out.push('\n');
        out.push_str(&"  ".repeat(depth));
    };
    let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if in_string {
            out.push(c);
            match c {
                _ if escaped => escaped = false,
                '\\' => escaped = true,
                '"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match c {
            '"' => {
                in_string = true;
                out.push(c);
            }
            '{' | '[' => {
                out.push(c);
                while chars.next_if(|c| c.is_whitespace()).is_some() {}
                match chars.next_if(|c| matches!(c, '}' | ']')) {
                    // An empty object or array stays on its line.
                    Some(close) => out.push(close),
                    None => {
                        depth += 1;
                        if depth > MAX_INDENTED_DEPTH {
                            return None;
                        }
                        newline(&mut out, depth);
                    }
                }
            }
            '}' | ']' => {
                depth = depth.saturating_sub(1);
                newline(&mut out, depth);
                out.push(c);
            }
            ',' => {
                out.push(c);
                newline(&mut out, depth);
            }
            ':' => out.push_str(": "),
            c if c.is_whitespace() => {}
            c => out.push(c),
        }
    }
    Some(out)
}

/// `850ms`, `12.3s`, `5m07s`, `2h03m`, `3d04h`.
pub fn age(ms: i64) -> String {
    let ms = ms.max(0);
    let s = ms / 1000;
    match ms {
        _ if ms < 1_000 => format!("{ms}ms"),
        _ if ms < 60_000 => format!("{:.1}s", ms as f64 / 1000.0),
        _ if s < 3_600 => format!("{}m{:02}s", s / 60, s % 60),
        _ if s < 86_400 => format!("{}h{:02}m", s / 3_600, (s % 3_600) / 60),
        _ => format!("{}d{:02}h", s / 86_400, (s % 86_400) / 3_600),
    }
}

/// A time in milliseconds since the epoch as UTC, `2026-12-02T01:59:03.123Z`.
pub fn utc(ms: i64) -> String {
    let (days, in_day) = (ms.div_euclid(86_400_000), ms.rem_euclid(86_400_000));
    // The civil date of a day count (proleptic Gregorian; eras of 400 years from 0000-03-01).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    let (s, milli) = (in_day / 1000, in_day % 1000);
    format!("{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{milli:03}Z", s / 3600, s / 60 % 60, s % 60)
}

/// `field  value` lines, the values aligned (the tables of `zkr counter` and `zkr barrier`).
pub fn fields(rows: &[(&str, String)]) -> String {
    let width = rows.iter().map(|(field, _)| field.chars().count()).max().unwrap_or(0);
    let mut out = String::new();
    for (field, value) in rows {
        let line = format!("{field:<width$}  {value}");
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// Aligned columns under `header`, two spaces apart, the last one unpadded.
pub fn columns<R: AsRef<[String]>>(header: &[&str], rows: &[R]) -> String {
    let header: Vec<String> = header.iter().map(|h| (*h).to_owned()).collect();
    let lines: Vec<&[String]> = std::iter::once(header.as_slice()).chain(rows.iter().map(AsRef::as_ref)).collect();
    let widths: Vec<usize> = (0..header.len())
        .map(|c| lines.iter().map(|l| l.get(c).map_or(0, |s| s.chars().count())).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for line in lines {
        let mut text = String::new();
        for (c, cell) in line.iter().enumerate() {
            let _ = write!(text, "{cell:<width$}  ", width = widths.get(c).copied().unwrap_or(0));
        }
        out.push_str(text.trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gzip_data_is_shown_decompressed() {
        let packed = gzip::compress(b"{\"a\":1}");
        assert_eq!(data_decompressed(&packed), (Some("{\"a\":1}".to_owned()), "gzip-text"));
        let packed = gzip::compress(&[0, 0xff]);
        assert_eq!(data_decompressed(&packed), (Some("00ff".to_owned()), "gzip-hex"));
        // The magic bytes alone are not gzip: shown as stored.
        assert_eq!(data_decompressed(&[0x1f, 0x8b, 1]), (Some("1f8b01".to_owned()), "hex"));
        assert_eq!(data_decompressed(b"plain"), (Some("plain".to_owned()), "text"));
    }

    #[test]
    fn cells_escape_control_characters() {
        assert_eq!(cell("a\u{1b}]0;x\u{7}b"), "a\\u{1b}]0;x\\u{7}b");
        assert_eq!(cell("10.0.0.1"), "10.0.0.1");
    }

    #[test]
    fn data_is_text_or_hex() {
        assert_eq!(data(b"127.0.1.1"), (Some("127.0.1.1".to_owned()), "text"));
        assert_eq!(data(b""), (Some(String::new()), "text"));
        assert_eq!(data(&[0, 1, 0xff]), (Some("0001ff".to_owned()), "hex"));
        assert_eq!(data(b"a\nb"), (Some("610a62".to_owned()), "hex"));
    }

    #[test]
    fn json_is_indented_as_written() {
        let jackson = r#"{"id":42,"item":"a,b:{\"c\"}","price":1.0E7,"tags":[],"note":null,"o":{"x":[1, 2]}}"#;
        assert_eq!(
            pretty_json(jackson).unwrap(),
            "{\n  \"id\": 42,\n  \"item\": \"a,b:{\\\"c\\\"}\",\n  \"price\": 1.0E7,\n  \"tags\": [],\n  \
             \"note\": null,\n  \"o\": {\n    \"x\": [\n      1,\n      2\n    ]\n  }\n}"
        );
        assert_eq!(pretty_json(" [ ] "), Some("[]".to_owned()));
        for not_json in ["42", "\"s\"", "{broken", "[1,]", "text"] {
            assert_eq!(pretty_json(not_json), None, "{not_json}");
        }
    }

    #[test]
    fn deep_json_is_left_as_written() {
        let nested = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
        assert!(pretty_json(&nested(MAX_INDENTED_DEPTH + 1)).is_some(), "the innermost [] stays on its line");
        // 100,000 levels (200 KB) would have been about 10^10 spaces.
        assert_eq!(pretty_json(&nested(100_000)), None);
    }

    #[test]
    fn fields_and_columns_align() {
        assert_eq!(fields(&[("A", "1".into()), ("LONG", "2".into())]), "A     1\nLONG  2\n");
        let rows = [["x".to_owned(), "long cell".to_owned(), "z".to_owned()]];
        assert_eq!(columns(&["H1", "H2", "H3"], &rows), "H1  H2         H3\nx   long cell  z\n");
    }

    #[test]
    fn utc_times() {
        assert_eq!(utc(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(utc(1_700_000_000_123), "2023-11-14T22:13:20.123Z");
        assert_eq!(utc(951_782_400_000), "2000-02-29T00:00:00.000Z");
        assert_eq!(utc(-1), "1969-12-31T23:59:59.999Z");
    }

    #[test]
    fn ages() {
        assert_eq!(age(-5), "0ms");
        assert_eq!(age(850), "850ms");
        assert_eq!(age(12_345), "12.3s");
        assert_eq!(age(307_000), "5m07s");
        assert_eq!(age(7_380_000), "2h03m");
        assert_eq!(age(273_600_000), "3d04h");
    }
}
