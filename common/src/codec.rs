//! Framing: a stream is `PREAMBLE_MAGIC`, a big-endian u16 version, then frames of a big-endian
//! u32 length followed by that many bytes of bincode.
//!
//! Pure functions over byte slices; the async readers in [`crate::transport`] call them.
//! Invariant: no length read from the wire is trusted before it is compared with the limit.

use serde::{Serialize, de::DeserializeOwned};

use crate::error::{Error, Result};
use crate::protocol::{MAX_FRAME_LEN, PREAMBLE_MAGIC, PROTOCOL_VERSION};

pub const PREAMBLE_LEN: usize = 6;
pub const LENGTH_PREFIX_LEN: usize = 4;

/// bincode's own allocation limit mirrors the frame limit, so a frame that claims a huge
/// `Vec` inside a small payload cannot make the decoder allocate it.
fn bincode_config() -> impl bincode::config::Config {
    bincode::config::standard().with_limit::<MAX_FRAME_LEN>()
}

pub fn preamble() -> [u8; PREAMBLE_LEN] {
    let v = PROTOCOL_VERSION.to_be_bytes();
    let m = PREAMBLE_MAGIC;
    [m[0], m[1], m[2], m[3], v[0], v[1]]
}

/// Checks a peer's preamble and returns its version if this build speaks it.
pub fn check_preamble(bytes: &[u8; PREAMBLE_LEN]) -> Result<u16> {
    if bytes[..4] != PREAMBLE_MAGIC {
        return Err(Error::BadMagic {
            got: [bytes[0], bytes[1], bytes[2], bytes[3]],
        });
    }
    let version = u16::from_be_bytes([bytes[4], bytes[5]]);
    if version != PROTOCOL_VERSION {
        return Err(Error::UnsupportedVersion {
            got: version,
            supported: PROTOCOL_VERSION,
        });
    }
    Ok(version)
}

/// Validates a length prefix before anything of that size is allocated.
pub fn check_frame_len(prefix: [u8; LENGTH_PREFIX_LEN], max: usize) -> Result<usize> {
    let len = u32::from_be_bytes(prefix) as usize;
    if len > max {
        return Err(Error::FrameTooLarge { len, max });
    }
    if len == 0 {
        return Err(Error::EmptyFrame);
    }
    Ok(len)
}

/// Encodes one message as a length-prefixed frame.
pub fn encode_frame<T: Serialize>(msg: &T) -> Result<Vec<u8>> {
    let mut out = vec![0u8; LENGTH_PREFIX_LEN];
    bincode::serde::encode_into_std_write(msg, &mut out, bincode_config())
        .map_err(|e| Error::Encode(e.to_string()))?;
    let len = out.len() - LENGTH_PREFIX_LEN;
    if len > MAX_FRAME_LEN {
        return Err(Error::FrameTooLarge {
            len,
            max: MAX_FRAME_LEN,
        });
    }
    out[..LENGTH_PREFIX_LEN].copy_from_slice(&(len as u32).to_be_bytes());
    Ok(out)
}

/// Decodes a frame's payload (without its length prefix); the payload must be exactly one
/// message, with no bytes left over.
pub fn decode_payload<T: DeserializeOwned>(payload: &[u8]) -> Result<T> {
    let (msg, used) = bincode::serde::decode_from_slice(payload, bincode_config())
        .map_err(|e| Error::Decode(e.to_string()))?;
    if used != payload.len() {
        return Err(Error::TrailingBytes {
            extra: payload.len() - used,
        });
    }
    Ok(msg)
}

/// Decodes the first complete frame in `buf`: `Ok(None)` if more bytes are needed, otherwise
/// the message and how many bytes it used.
pub fn decode_frame<T: DeserializeOwned>(buf: &[u8], max: usize) -> Result<Option<(T, usize)>> {
    let Some(prefix) = buf.first_chunk::<LENGTH_PREFIX_LEN>() else {
        return Ok(None);
    };
    let len = check_frame_len(*prefix, max)?;
    let Some(payload) = buf[LENGTH_PREFIX_LEN..].get(..len) else {
        return Ok(None);
    };
    let msg = decode_payload(payload)?;
    Ok(Some((msg, LENGTH_PREFIX_LEN + len)))
}
