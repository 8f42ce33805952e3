//! How a typed node's value becomes bytes and back: the [`Codec`] trait and [`JsonCodec`], the
//! JSON Curator's `JacksonModelSerializer` writes.

use std::io;

use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::ser::{CharEscape, CompactFormatter, Formatter};

/// Why a value could not be encoded, or bytes could not be decoded.
pub type CodecError = Box<dyn std::error::Error + Send + Sync>;

/// Turns values of `T` into a node's bytes and back (Curator's `ModelSerializer`). The typed
/// nodes ([`ModeledFramework`](crate::ModeledFramework), [`ModeledCache`](crate::ModeledCache),
/// [`TypedSharedValue`](crate::TypedSharedValue)) take one; [`JsonCodec`] is the default.
///
/// ```
/// use zk_recipes::{Codec, CodecError};
///
/// /// A value stored as its decimal text.
/// struct Decimal;
///
/// impl Codec<u64> for Decimal {
///     fn encode(&self, value: &u64) -> Result<Vec<u8>, CodecError> {
///         Ok(value.to_string().into_bytes())
///     }
///     fn decode(&self, bytes: &[u8]) -> Result<u64, CodecError> {
///         Ok(std::str::from_utf8(bytes)?.parse()?)
///     }
///     fn name(&self) -> &'static str {
///         "decimal number"
///     }
/// }
/// assert_eq!(Decimal.decode(b"42").unwrap(), 42);
/// ```
#[doc(alias = "ModelSerializer")]
pub trait Codec<T>: Send + Sync + 'static {
    /// The bytes of `value`.
    ///
    /// # Errors
    /// A value the encoding cannot represent.
    fn encode(&self, value: &T) -> Result<Vec<u8>, CodecError>;

    /// The value in `bytes`.
    ///
    /// # Errors
    /// Bytes that are not an encoded value.
    fn decode(&self, bytes: &[u8]) -> Result<T, CodecError>;

    /// What the encoding is called, for errors (`JSON value`, ...).
    fn name(&self) -> &'static str;
}

/// JSON through serde, written as Curator's `JacksonModelSerializer` (a default Jackson
/// `ObjectMapper`) writes the same record, so Java and Rust processes share typed nodes:
/// compact (no spaces), UTF-8, fields in declaration order (serde's derive keeps it; Jackson
/// keeps a Java class's field order), `null` for an absent optional field, control
/// characters escaped as Jackson escapes them (`\n`, `\t`, ..., else `\u00XX` with
/// upper-case hex), and floating-point numbers in Java's `Double.toString` notation (`1.0`,
/// `1.0E7`, `1.0E-4`). Reading ignores unknown fields, as Jackson is configured to there
/// (`FAIL_ON_UNKNOWN_PROPERTIES` off), unless the type says `#[serde(deny_unknown_fields)]`.
///
/// What stays the model's business: a Java `byte[]` is base64 text in Jackson and an array
/// in serde (use a base64 string field); Java dates are numbers by default; `NaN` and the
/// infinities are written `null` here and `"NaN"` by Jackson.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[doc(alias = "JacksonModelSerializer")]
pub struct JsonCodec;

impl<T> Codec<T> for JsonCodec
where
    T: Serialize + DeserializeOwned,
{
    fn encode(&self, value: &T) -> Result<Vec<u8>, CodecError> {
        let mut out = Vec::with_capacity(128);
        let mut serializer = serde_json::Serializer::with_formatter(&mut out, JacksonFormatter);
        value.serialize(&mut serializer)?;
        Ok(out)
    }

    fn decode(&self, bytes: &[u8]) -> Result<T, CodecError> {
        Ok(serde_json::from_slice(bytes)?)
    }

    fn name(&self) -> &'static str {
        "JSON value"
    }
}

/// serde_json's compact output with Jackson's escapes and Java's number notation.
struct JacksonFormatter;

impl Formatter for JacksonFormatter {
    fn write_char_escape<W: ?Sized + io::Write>(&mut self, writer: &mut W, escape: CharEscape) -> io::Result<()> {
        match escape {
            CharEscape::AsciiControl(byte) => {
                const HEX: &[u8; 16] = b"0123456789ABCDEF";
                writer.write_all(&[b'\\', b'u', b'0', b'0', HEX[(byte >> 4) as usize], HEX[(byte & 0xf) as usize]])
            }
            other => CompactFormatter.write_char_escape(writer, other),
        }
    }

    fn write_f64<W: ?Sized + io::Write>(&mut self, writer: &mut W, value: f64) -> io::Result<()> {
        writer
            .write_all(java_notation(value, format!("{value:e}"), value.abs() < 1e7 && value.abs() >= 1e-3).as_bytes())
    }

    fn write_f32<W: ?Sized + io::Write>(&mut self, writer: &mut W, value: f32) -> io::Result<()> {
        writer.write_all(
            java_notation(value.into(), format!("{value:e}"), value.abs() < 1e7 && value.abs() >= 1e-3).as_bytes(),
        )
    }
}

/// Java's `Double.toString` (and `Float.toString`) of a finite number, from the shortest
/// digits Rust finds (`scientific`, as `{:e}` writes them): plain notation with at least one
/// fractional digit from 10^-3 up to 10^7, else `d.dddE[-]n`.
fn java_notation(value: f64, scientific: String, plain: bool) -> String {
    if value == 0.0 {
        return if value.is_sign_negative() { "-0.0".to_owned() } else { "0.0".to_owned() };
    }
    let (sign, rest) = match scientific.strip_prefix('-') {
        Some(rest) => ("-", rest),
        None => ("", scientific.as_str()),
    };
    let Some((mantissa, exponent)) = rest.split_once('e') else { return scientific };
    let Ok(exponent) = exponent.parse::<i32>() else { return scientific };
    let mut digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    // Java writes two significant digits where the shortest is one that is not the value
    // itself: the two closest to it (`Double.MIN_VALUE`, shortest `5e-324`, is `4.9E-324`).
    // Only a subnormal (of f64, or of f32 whose values come here widened) lacks the precision
    // for its one digit to be the value's closest two.
    if digits.len() == 1 && value.abs() < f64::from(f32::MIN_POSITIVE) {
        let two = format!("{:.1e}", value.abs());
        if let Some((two, two_exponent)) = two.split_once('e') {
            let two: String = two.chars().filter(char::is_ascii_digit).collect();
            if !two.ends_with('0') && two_exponent.parse() == Ok(exponent) {
                digits = two;
            }
        }
    }
    if !plain {
        let fraction = if digits.len() > 1 { &digits[1..] } else { "0" };
        return format!("{sign}{}.{fraction}E{exponent}", &digits[..1]);
    }
    if exponent >= 0 {
        let point = exponent as usize + 1;
        let (int, fraction) = if digits.len() > point {
            (digits[..point].to_owned(), digits[point..].to_owned())
        } else {
            (format!("{digits:0<point$}"), "0".to_owned())
        };
        format!("{sign}{int}.{fraction}")
    } else {
        let zeros = "0".repeat((-exponent - 1) as usize);
        format!("{sign}0.{zeros}{digits}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn java(value: f64) -> String {
        let mut out = Vec::new();
        JacksonFormatter.write_f64(&mut out, value).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn doubles_in_java_notation() {
        for (value, text) in [
            (0.0, "0.0"),
            (-0.0, "-0.0"),
            (1.0, "1.0"),
            (-2.5, "-2.5"),
            (123.456, "123.456"),
            (100.0, "100.0"),
            (0.001, "0.001"),
            (0.0001, "1.0E-4"),
            (1.0e7, "1.0E7"),
            (9_999_999.0, "9999999.0"),
            (1.5e-10, "1.5E-10"),
            (12_345_678.9, "1.23456789E7"),
            (0.1, "0.1"),
            (1e300, "1.0E300"),
            (f64::from_bits(1), "4.9E-324"),
            (f64::from_bits(2), "1.0E-323"),
            (f64::from_bits(3), "1.5E-323"),
            (2e22, "2.0E22"),
            (4e-320, "4.0E-320"),
        ] {
            assert_eq!(java(value), text, "{value:e}");
        }
    }

    #[test]
    fn floats_in_java_notation() {
        for (value, text) in [(f32::from_bits(1), "1.4E-45"), (f32::from_bits(3), "4.2E-45"), (0.5f32, "0.5")] {
            let mut out = Vec::new();
            JacksonFormatter.write_f32(&mut out, value).unwrap();
            assert_eq!(String::from_utf8(out).unwrap(), text, "{value:e}");
        }
    }

    #[test]
    fn control_characters_escaped_as_jackson_does() {
        let out = JsonCodec.encode(&"a\u{1}\u{1f}\n\t\"\\/é".to_owned()).unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), "\"a\\u0001\\u001F\\n\\t\\\"\\\\/é\"");
    }
}
