//! Any byte string fed to the frame decoder yields a message, a request for more bytes, or an
//! error: never a panic, never an allocation beyond the frame limit.
#![no_main]

use demeter_common::codec::{check_preamble, decode_frame, PREAMBLE_LEN};
use demeter_common::protocol::{AgentMessage, CoordinatorMessage, MAX_FRAME_LEN};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Some(preamble) = data.first_chunk::<PREAMBLE_LEN>() {
        let _ = check_preamble(preamble);
    }
    let mut rest = data;
    while let Ok(Some((_, used))) = decode_frame::<AgentMessage>(rest, MAX_FRAME_LEN) {
        rest = &rest[used..];
    }
    let _ = decode_frame::<CoordinatorMessage>(data, MAX_FRAME_LEN);
});
