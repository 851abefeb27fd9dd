//! Async helpers that move preambles and frames over quinn streams. Thin: all checks live in
//! [`crate::codec`].

use serde::{Serialize, de::DeserializeOwned};

use crate::codec::{self, LENGTH_PREFIX_LEN, PREAMBLE_LEN};
use crate::error::{Error, Result};
use crate::protocol::MAX_FRAME_LEN;

fn read_exact_err(e: quinn::ReadExactError) -> Error {
    match e {
        quinn::ReadExactError::FinishedEarly(0) => Error::StreamClosed("before the next frame"),
        quinn::ReadExactError::FinishedEarly(_) => Error::StreamClosed("in the middle of a frame"),
        quinn::ReadExactError::ReadError(e) => read_err(e),
    }
}

fn read_err(e: quinn::ReadError) -> Error {
    match e {
        quinn::ReadError::ConnectionLost(e) => Error::Connection(e),
        other => Error::Stream(other.to_string()),
    }
}

fn write_err(e: quinn::WriteError) -> Error {
    match e {
        quinn::WriteError::ConnectionLost(e) => Error::Connection(e),
        other => Error::Stream(other.to_string()),
    }
}

pub async fn write_preamble(send: &mut quinn::SendStream) -> Result<()> {
    send.write_all(&codec::preamble()).await.map_err(write_err)
}

/// Reads and checks the peer's preamble: wrong magic or version is an error.
pub async fn read_preamble(recv: &mut quinn::RecvStream) -> Result<u16> {
    let mut buf = [0u8; PREAMBLE_LEN];
    recv.read_exact(&mut buf).await.map_err(read_exact_err)?;
    codec::check_preamble(&buf)
}

pub async fn write_frame<T: Serialize>(send: &mut quinn::SendStream, msg: &T) -> Result<()> {
    let frame = codec::encode_frame(msg)?;
    send.write_all(&frame).await.map_err(write_err)
}

/// Reads one frame. `Ok(None)` when the peer finished the stream cleanly between frames.
pub async fn read_frame<T: DeserializeOwned>(recv: &mut quinn::RecvStream) -> Result<Option<T>> {
    let mut prefix = [0u8; LENGTH_PREFIX_LEN];
    match recv.read_exact(&mut prefix).await {
        Ok(()) => {}
        Err(quinn::ReadExactError::FinishedEarly(0)) => return Ok(None),
        Err(e) => return Err(read_exact_err(e)),
    }
    // The limit is checked before the payload buffer exists.
    let len = codec::check_frame_len(prefix, MAX_FRAME_LEN)?;
    let mut payload = vec![0u8; len];
    recv.read_exact(&mut payload)
        .await
        .map_err(read_exact_err)?;
    codec::decode_payload(&payload).map(Some)
}

/// Reads one frame that must be there.
pub async fn expect_frame<T: DeserializeOwned>(recv: &mut quinn::RecvStream) -> Result<T> {
    read_frame(recv)
        .await?
        .ok_or(Error::StreamClosed("before the expected frame"))
}
