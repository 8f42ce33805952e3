//! Compressed node data as Curator's `GzipCompressionProvider` writes and reads it: one gzip
//! member (RFC 1952) with no flags and a zero modification time, the deflate body at the
//! default level, then the CRC-32 and the length, both little-endian.
//!
//! The header is byte for byte Curator 5.4's: `1f 8b 08 00 00 00 00 00 00 00` (the last byte,
//! the operating system, is `00` as Curator 5.4 writes it; Curator 5.6 and later write `ff` on
//! Java 16 and later, and every reader ignores it). The deflate body is this crate's own
//! (flate2's pure-Rust deflate): it may differ in bytes from what Java's zlib makes of the same
//! data, and it decodes to the same data everywhere.
//!
//! ```
//! use zk_recipes::protocol::gzip;
//!
//! let packed = gzip::compress(b"hello");
//! assert_eq!(&packed[..10], &[0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0]);
//! assert_eq!(gzip::decompress(&packed).unwrap(), b"hello");
//! assert!(gzip::decompress(b"hello").is_err()); // Curator: "Not in GZip format"
//! ```

use std::io::{Read, Write};

use flate2::write::DeflateEncoder;
use flate2::{Compression, Crc};

use super::values::ValueError;

/// What a compressed node holds.
pub const GZIP_EXPECTED: &str = "gzip member (compressed data)";

/// The header Curator 5.4 writes: magic, deflate, no flags, no time, no extra flags, OS 0.
pub const HEADER: [u8; 10] = [0x1f, 0x8b, 0x08, 0, 0, 0, 0, 0, 0, 0];

/// `data` compressed as one gzip member with Curator 5.4's header.
pub fn compress(data: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(data.len() / 2 + 32);
    out.extend_from_slice(&HEADER);
    let mut encoder = DeflateEncoder::new(out, Compression::default());
    // Writing to a Vec cannot fail.
    let _ = encoder.write_all(data);
    let mut out = encoder.finish().unwrap_or_default();
    let mut crc = Crc::new();
    crc.update(data);
    out.extend_from_slice(&crc.sum().to_le_bytes());
    // ISIZE is the length modulo 2^32 (RFC 1952).
    out.extend_from_slice(&(data.len() as u32).to_le_bytes());
    out
}

/// [`compress`] for data this crate writes: data over [`MAX_DECOMPRESSED`] bytes is refused
/// with [`Error::TooLarge`](crate::Error::TooLarge) before anything is sent (it would
/// compress into a node that no reader of this crate decompresses).
pub(crate) fn compress_for_write(data: &[u8]) -> crate::Result<Vec<u8>> {
    if data.len() > MAX_DECOMPRESSED {
        return Err(crate::Error::TooLarge { name: "data", size: data.len(), limit: MAX_DECOMPRESSED });
    }
    Ok(compress(data))
}

/// True when `data` starts with gzip's magic bytes (it may still be damaged).
pub fn is_gzip(data: &[u8]) -> bool {
    data.starts_with(&[0x1f, 0x8b])
}

/// The most a node's data is decompressed to: 64 MiB. A node holds at most ZooKeeper's
/// request limit (1 MiB by default), and data worth keeping compresses perhaps tenfold; gzip
/// can expand a 1 MiB member to about a gigabyte of zeros, which a reader should not have to
/// hold because a writer wrote it.
pub const MAX_DECOMPRESSED: usize = 64 << 20;

/// The data of exactly one gzip member, as Curator's provider reads it: the optional header
/// fields (extra, name, comment, header CRC) are accepted, the CRC-32 and the length are
/// checked, and bytes after the member are refused (Curator: "Expected just one GZip block").
///
/// # Errors
/// [`ValueError`] for data that is not one whole, intact gzip member (including empty data),
/// or that decompresses to more than [`MAX_DECOMPRESSED`] bytes.
pub fn decompress(data: &[u8]) -> Result<Vec<u8>, ValueError> {
    decompress_at_most(data, MAX_DECOMPRESSED)
}

/// [`decompress`] with a bound of `max` bytes.
fn decompress_at_most(data: &[u8], max: usize) -> Result<Vec<u8>, ValueError> {
    let fail = |found: String| ValueError { expected: GZIP_EXPECTED, found };
    if !is_gzip(data) {
        return Err(fail(format!("{} bytes not in gzip format", data.len())));
    }
    let mut decoder = flate2::bufread::GzDecoder::new(data);
    let mut out = Vec::new();
    let mut bounded = (&mut decoder).take(max as u64 + 1);
    bounded.read_to_end(&mut out).map_err(|e| fail(format!("a damaged gzip member ({e})")))?;
    if out.len() > max {
        return Err(fail(format!("a gzip member of {} bytes that decompresses to more than {max} bytes", data.len())));
    }
    let rest = decoder.into_inner();
    if !rest.is_empty() {
        return Err(fail(format!("{} bytes after the gzip member", rest.len())));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_checks() {
        for data in [&b""[..], b"a", &[0u8; 10_000], "ünïcode".as_bytes()] {
            let packed = compress(data);
            assert_eq!(packed[..10], HEADER);
            assert_eq!(decompress(&packed).unwrap(), data);
        }
        let mut packed = compress(b"hello world");
        let last = packed.len() - 5;
        packed[last] ^= 1; // the CRC
        assert!(decompress(&packed).is_err());
        let mut twice = compress(b"a");
        twice.extend(compress(b"b"));
        assert!(decompress(&twice).is_err(), "a second member is refused");
        assert!(decompress(&compress(b"abc")[..12]).is_err(), "a truncated member is refused");
        assert!(decompress(b"").is_err());
    }

    #[test]
    fn a_member_that_expands_past_the_bound_is_refused() {
        let packed = compress(&[0u8; 1000]);
        assert_eq!(decompress_at_most(&packed, 1000).unwrap().len(), 1000);
        let refused = decompress_at_most(&packed, 999).unwrap_err();
        assert!(refused.found.contains("more than 999 bytes"), "{refused:?}");
        // The bound: a member a node can hold, of zeros, is refused before it is all read.
        let bomb = compress(&vec![0u8; MAX_DECOMPRESSED + 1]);
        assert!(bomb.len() < 1 << 20, "{} bytes: it fits in a node", bomb.len());
        assert!(decompress(&bomb).is_err());
    }

    #[test]
    fn reads_the_header_curator_5_6_writes_on_new_jdks() {
        let mut packed = compress(b"x");
        packed[9] = 0xff;
        assert_eq!(decompress(&packed).unwrap(), b"x");
    }

    #[test]
    fn empty_input_is_curators_twenty_bytes() {
        assert_eq!(compress(b""), [0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
    }
}
