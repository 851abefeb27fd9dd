//! HotSpot performance counters (`hsperfdata_<user>/<pid>`): what `jstat` reads, without attaching
//! to the JVM or opening JMX.
//!
//! The file is a memory-mapped buffer the JVM keeps updating, so everything here treats it as
//! untrusted bytes: every offset is bounds-checked and a bad file is an [`Error::Hsperf`], never a
//! panic. Layout (HotSpot `perfMemory.hpp`): a 32-byte prologue, then `num_entries` entries from
//! `entry_offset`, each a 20-byte header followed by its NUL-terminated name and its data.

use crate::error::{Error, Result};

mod locate;
pub use locate::locate;

/// The prologue's first four bytes, the same in either byte order.
const MAGIC: [u8; 4] = [0xca, 0xfe, 0xc0, 0xc0];
const PROLOGUE_LEN: usize = 32;
const ENTRY_HEADER_LEN: usize = 20;
/// Every JDK since 6 writes version 2.0 (JDK 17 included).
const SUPPORTED_MAJOR: u8 = 2;

/// The file header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Prologue {
    pub little_endian: bool,
    pub major_version: u8,
    pub minor_version: u8,
    /// False while the JVM is still initialising the buffer.
    pub accessible: bool,
    /// Bytes of the buffer in use; entries never extend past it.
    pub used: u32,
    pub overflow: u32,
    pub mod_time_stamp: i64,
    pub entry_offset: u32,
    pub num_entries: u32,
}

/// One counter's value. Only the types the GC counters and strings use are decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Value<'a> {
    /// A scalar `jlong` (type code `J`).
    Long(i64),
    /// A byte vector (type code `B`), e.g. a NUL-padded string.
    Bytes(&'a [u8]),
    /// Any other type code (`Z`, `I`, `D`, vectors of longs, …), carried undecoded.
    Other { data_type: u8 },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry<'a> {
    pub name: &'a [u8],
    pub value: Value<'a>,
}

/// A validated view of an hsperfdata buffer.
#[derive(Debug, Clone, Copy)]
pub struct PerfData<'a> {
    /// The buffer cut to `prologue.used`.
    buf: &'a [u8],
    prologue: Prologue,
}

impl<'a> PerfData<'a> {
    /// Checks the prologue; entries are checked one by one as [`PerfData::entries`] yields them.
    pub fn parse(buf: &'a [u8]) -> Result<Self> {
        if buf.len() < PROLOGUE_LEN {
            return Err(hsperf(buf.len(), "shorter than the 32-byte prologue"));
        }
        if buf[..4] != MAGIC {
            return Err(hsperf(0, "bad magic (not an hsperfdata file)"));
        }
        let little_endian = match buf[4] {
            0 => false,
            1 => true,
            _ => return Err(hsperf(4, "byte order is neither 0 nor 1")),
        };
        let r = Reader { buf, little_endian };
        let prologue = Prologue {
            little_endian,
            major_version: buf[5],
            minor_version: buf[6],
            accessible: buf[7] != 0,
            used: r.u32(8)?,
            overflow: r.u32(12)?,
            mod_time_stamp: r.i64(16)?,
            entry_offset: r.u32(24)?,
            num_entries: r.u32(28)?,
        };
        if prologue.major_version != SUPPORTED_MAJOR {
            return Err(hsperf(5, "unsupported major version"));
        }
        if !prologue.accessible {
            return Err(hsperf(7, "not yet accessible (JVM still initialising)"));
        }
        let used = to_usize(prologue.used);
        if used > buf.len() {
            return Err(hsperf(
                buf.len(),
                "file shorter than its used size (truncated)",
            ));
        }
        if used < PROLOGUE_LEN || to_usize(prologue.entry_offset) < PROLOGUE_LEN {
            return Err(hsperf(8, "used size or entry offset inside the prologue"));
        }
        Ok(Self {
            buf: &buf[..used],
            prologue,
        })
    }

    pub fn prologue(&self) -> Prologue {
        self.prologue
    }

    /// The counters in file order. A malformed entry ends the iteration with its error, since
    /// the next entry's position depends on it.
    pub fn entries(&self) -> Entries<'a> {
        Entries {
            reader: Reader {
                buf: self.buf,
                little_endian: self.prologue.little_endian,
            },
            offset: to_usize(self.prologue.entry_offset),
            remaining: self.prologue.num_entries,
        }
    }
}

#[derive(Debug, Clone)]
pub struct Entries<'a> {
    reader: Reader<'a>,
    offset: usize,
    remaining: u32,
}

impl<'a> Iterator for Entries<'a> {
    type Item = Result<Entry<'a>>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.remaining == 0 {
            return None;
        }
        self.remaining -= 1;
        match self.reader.entry(self.offset) {
            Ok((entry, length)) => {
                self.offset += length;
                Some(Ok(entry))
            }
            Err(e) => {
                self.remaining = 0;
                Some(Err(e))
            }
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct Reader<'a> {
    buf: &'a [u8],
    little_endian: bool,
}

impl<'a> Reader<'a> {
    fn bytes<const N: usize>(&self, offset: usize) -> Result<[u8; N]> {
        offset
            .checked_add(N)
            .and_then(|end| self.buf.get(offset..end))
            .and_then(|s| <[u8; N]>::try_from(s).ok())
            .ok_or_else(|| hsperf(offset, "field runs past the end of the data"))
    }

    fn u32(&self, offset: usize) -> Result<u32> {
        let b = self.bytes::<4>(offset)?;
        Ok(if self.little_endian {
            u32::from_le_bytes(b)
        } else {
            u32::from_be_bytes(b)
        })
    }

    fn i64(&self, offset: usize) -> Result<i64> {
        let b = self.bytes::<8>(offset)?;
        Ok(if self.little_endian {
            i64::from_le_bytes(b)
        } else {
            i64::from_be_bytes(b)
        })
    }

    /// Decodes the entry at `start` and returns it with its length.
    fn entry(&self, start: usize) -> Result<(Entry<'a>, usize)> {
        let length = to_usize(self.u32(start)?);
        let name_offset = to_usize(self.u32(start + 4)?);
        let vector_length = to_usize(self.u32(start + 8)?);
        let [data_type, _flags, _units, _variability] = self.bytes::<4>(start + 12)?;
        let data_offset = to_usize(self.u32(start + 16)?);
        if length < ENTRY_HEADER_LEN {
            return Err(hsperf(start, "entry shorter than its header"));
        }
        let entry = start
            .checked_add(length)
            .and_then(|end| self.buf.get(start..end))
            .ok_or_else(|| hsperf(start, "entry runs past the used size"))?;
        if name_offset < ENTRY_HEADER_LEN || name_offset >= length {
            return Err(hsperf(start, "entry name outside the entry"));
        }
        let name_area = &entry[name_offset..];
        let name_len = name_area
            .iter()
            .position(|&b| b == 0)
            .ok_or_else(|| hsperf(start + name_offset, "entry name not NUL-terminated"))?;
        let name = &name_area[..name_len];
        let data_size = match (data_type, vector_length) {
            (b'J', 0) => 8,
            (b'B', n) if n > 0 => n,
            _ => 0,
        };
        let data = data_offset
            .checked_add(data_size)
            .filter(|_| data_offset >= ENTRY_HEADER_LEN)
            .and_then(|end| entry.get(data_offset..end))
            .ok_or_else(|| hsperf(start, "entry data outside the entry"))?;
        let value = match (data_type, vector_length) {
            (b'J', 0) => Value::Long(
                Reader {
                    buf: data,
                    little_endian: self.little_endian,
                }
                .i64(0)?,
            ),
            (b'B', n) if n > 0 => Value::Bytes(data),
            _ => Value::Other { data_type },
        };
        Ok((Entry { name, value }, length))
    }
}

fn hsperf(offset: usize, reason: &'static str) -> Error {
    Error::Hsperf { offset, reason }
}

fn to_usize(v: u32) -> usize {
    usize::try_from(v).unwrap_or(usize::MAX)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// Builds a file with the given `J` counters, laid out as HotSpot does, in either order.
    fn file_in_order(counters: &[(&str, i64)], little_endian: bool) -> Vec<u8> {
        let u32_bytes = |v: usize| {
            let v = v as u32;
            if little_endian {
                v.to_le_bytes()
            } else {
                v.to_be_bytes()
            }
        };
        let mut body = Vec::new();
        for (name, value) in counters {
            let name_offset = ENTRY_HEADER_LEN;
            let data_offset = (name_offset + name.len() + 1).div_ceil(8) * 8;
            let length = data_offset + 8;
            let mut e = vec![0u8; length];
            e[0..4].copy_from_slice(&u32_bytes(length));
            e[4..8].copy_from_slice(&u32_bytes(name_offset));
            e[12] = b'J';
            e[16..20].copy_from_slice(&u32_bytes(data_offset));
            e[name_offset..name_offset + name.len()].copy_from_slice(name.as_bytes());
            let value = if little_endian {
                value.to_le_bytes()
            } else {
                value.to_be_bytes()
            };
            e[data_offset..].copy_from_slice(&value);
            body.extend_from_slice(&e);
        }
        let mut f = vec![0u8; PROLOGUE_LEN];
        f[..4].copy_from_slice(&MAGIC);
        f[4] = u8::from(little_endian);
        f[5] = 2;
        f[7] = 1;
        f[8..12].copy_from_slice(&u32_bytes(PROLOGUE_LEN + body.len()));
        f[24..28].copy_from_slice(&u32_bytes(PROLOGUE_LEN));
        f[28..32].copy_from_slice(&u32_bytes(counters.len()));
        f.extend_from_slice(&body);
        f
    }

    fn file_with(counters: &[(&str, i64)]) -> Vec<u8> {
        file_in_order(counters, true)
    }

    #[test]
    fn reads_counters_back_in_both_byte_orders() {
        for little_endian in [true, false] {
            let f = file_in_order(
                &[("a.b", 7), ("sun.os.hrt.frequency", 1_000_000_000)],
                little_endian,
            );
            let pd = PerfData::parse(&f).unwrap();
            assert_eq!(pd.prologue().little_endian, little_endian);
            let got: Vec<_> = pd.entries().collect::<Result<_>>().unwrap();
            assert_eq!(got.len(), 2);
            assert_eq!(got[0].name, b"a.b");
            assert_eq!(got[0].value, Value::Long(7));
            assert_eq!(got[1].value, Value::Long(1_000_000_000));
        }
    }

    #[test]
    fn rejects_bad_headers() {
        let good = file_with(&[("x", 1)]);
        let mut bad_magic = good.clone();
        bad_magic[0] = 0;
        let mut not_ready = good.clone();
        not_ready[7] = 0;
        let mut bad_order = good.clone();
        bad_order[4] = 9;
        let mut version = good.clone();
        version[5] = 3;
        for f in [
            &bad_magic,
            &not_ready,
            &bad_order,
            &version,
            &good[..20].to_vec(),
        ] {
            assert!(matches!(PerfData::parse(f), Err(Error::Hsperf { .. })));
        }
    }

    #[test]
    fn entry_pointing_outside_is_an_error() {
        let mut f = file_with(&[("x", 1)]);
        // entry_length far past the end.
        f[PROLOGUE_LEN..PROLOGUE_LEN + 4].copy_from_slice(&10_000u32.to_le_bytes());
        let pd = PerfData::parse(&f).unwrap();
        assert!(matches!(
            pd.entries().next(),
            Some(Err(Error::Hsperf { .. }))
        ));

        let mut f = file_with(&[("x", 1)]);
        // data_offset past the entry.
        f[PROLOGUE_LEN + 16..PROLOGUE_LEN + 20].copy_from_slice(&u32::MAX.to_le_bytes());
        let pd = PerfData::parse(&f).unwrap();
        assert!(matches!(
            pd.entries().next(),
            Some(Err(Error::Hsperf { .. }))
        ));
    }
}
