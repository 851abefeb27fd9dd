//! Round trips and refusals of the frame codec.

use demeter_common::Error;
use demeter_common::codec::{self, check_preamble, decode_frame, encode_frame, preamble};
use demeter_common::metrics::{HeapSample, HostSample, JvmSample, Sample};
use demeter_common::protocol::jobs::{ConfigChange, JobApply};
use demeter_common::protocol::*;
use proptest::prelude::*;

fn arb_heap() -> impl Strategy<Value = HeapSample> {
    (any::<[u64; 8]>(), any::<[u64; 3]>(), 0.0f64..1e9).prop_map(|(b, c, t)| HeapSample {
        young_used_bytes: b[0],
        young_committed_bytes: b[1],
        young_max_bytes: b[2],
        old_used_bytes: b[3],
        old_committed_bytes: b[4],
        old_max_bytes: b[5],
        metaspace_used_bytes: b[6],
        metaspace_committed_bytes: b[7],
        young_gc_count: c[0],
        young_gc_time_ms: t,
        full_gc_count: c[1],
        full_gc_time_ms: t / 2.0,
        concurrent_gc_count: c[2],
        concurrent_gc_time_ms: t / 3.0,
    })
}

fn arb_sample() -> impl Strategy<Value = Sample> {
    let jvm = (
        any::<u32>(),
        proptest::option::of("[a-z0-9:-]{0,20}"),
        0f32..64.0,
        any::<u64>(),
        proptest::option::of(arb_heap()),
    )
        .prop_map(
            |(pid, taskmanager_id, cpu_cores, rss_bytes, heap)| JvmSample {
                pid,
                taskmanager_id,
                cpu_cores,
                rss_bytes,
                heap,
            },
        );
    (
        any::<u64>(),
        any::<u32>(),
        0f32..1.0,
        any::<[u64; 4]>(),
        proptest::collection::vec(jvm, 0..4),
    )
        .prop_map(|(taken_at_ms, cpu_count, cpu_busy, m, jvms)| Sample {
            taken_at_ms,
            host: HostSample {
                cpu_count,
                cpu_busy,
                mem_total_bytes: m[0],
                mem_used_bytes: m[1],
                mem_available_bytes: m[2],
                swap_used_bytes: m[3],
                load_1m: cpu_busy,
                load_5m: cpu_busy,
                load_15m: cpu_busy,
            },
            jvms,
        })
}

fn arb_agent_message() -> impl Strategy<Value = AgentMessage> {
    prop_oneof![
        (any::<u64>(), ".{0,30}").prop_map(|(boot_id, software)| AgentMessage::Hello(Hello {
            boot_id,
            software,
            capabilities: vec![Capability::Metrics, Capability::Ping],
        })),
        (
            any::<u64>(),
            1u64..u64::MAX / 2,
            proptest::collection::vec(arb_sample(), 0..8)
        )
            .prop_map(
                |(boot_id, first_seq, samples)| AgentMessage::Metrics(MetricBatch {
                    boot_id,
                    first_seq,
                    samples
                })
            ),
        (any::<u64>(), ".{0,40}").prop_map(|(order_id, why)| AgentMessage::OrderResult(
            OrderResult {
                order_id,
                outcome: OrderOutcome::Failed(why),
            }
        )),
        proptest::option::of("[a-z0-9-]{0,20}")
            .prop_map(|after| AgentMessage::FleetQuery(FleetQuery { after, limit: 7 })),
        (
            "[a-z0-9-]{0,20}",
            any::<u32>(),
            proptest::option::of(1u32..64)
        )
            .prop_map(
                |(job, deadline, parallelism)| AgentMessage::Job(JobRequest::Apply(JobApply {
                    job,
                    change: ConfigChange {
                        parallelism,
                        ..ConfigChange::default()
                    },
                    deadline_ms: u64::from(deadline),
                }))
            ),
    ]
}

proptest! {
    #[test]
    fn agent_messages_round_trip(msg in arb_agent_message()) {
        let frame = encode_frame(&msg).unwrap();
        let (back, used) = decode_frame::<AgentMessage>(&frame, MAX_FRAME_LEN).unwrap().unwrap();
        prop_assert_eq!(used, frame.len());
        prop_assert_eq!(back, msg);
    }

    #[test]
    fn any_prefix_of_a_frame_asks_for_more(msg in arb_agent_message(), cut in 0usize..64) {
        let frame = encode_frame(&msg).unwrap();
        let cut = cut.min(frame.len() - 1);
        prop_assert!(decode_frame::<AgentMessage>(&frame[..cut], MAX_FRAME_LEN).unwrap().is_none());
    }

    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        let _ = decode_frame::<AgentMessage>(&bytes, MAX_FRAME_LEN);
        let _ = decode_frame::<CoordinatorMessage>(&bytes, MAX_FRAME_LEN);
    }
}

#[test]
fn coordinator_messages_round_trip() {
    let msgs = vec![
        CoordinatorMessage::Welcome(Welcome {
            peer_name: "node-1".into(),
            coordinator_software: "0.1.0".into(),
            stored_up_to: 41,
        }),
        CoordinatorMessage::Ack {
            boot_id: 7,
            stored_up_to: 99,
        },
        CoordinatorMessage::Order(Order {
            id: 3,
            deadline_ms: 12,
            kind: OrderKind::Ping,
        }),
        CoordinatorMessage::Fleet(vec![]),
    ];
    for msg in msgs {
        let frame = encode_frame(&msg).unwrap();
        let (back, _) = decode_frame::<CoordinatorMessage>(&frame, MAX_FRAME_LEN)
            .unwrap()
            .unwrap();
        assert_eq!(back, msg);
    }
}

#[test]
fn oversized_length_prefix_is_refused_before_reading_the_payload() {
    let frame = [0xff, 0xff, 0xff, 0xff, 1, 2, 3];
    match decode_frame::<AgentMessage>(&frame, MAX_FRAME_LEN) {
        Err(Error::FrameTooLarge { len, max }) => {
            assert_eq!(len, u32::MAX as usize);
            assert_eq!(max, MAX_FRAME_LEN);
        }
        other => panic!("expected FrameTooLarge, got {other:?}"),
    }
}

#[test]
fn a_vec_claiming_more_than_the_frame_holds_is_refused() {
    // A metrics frame whose sample count claims u64::MAX entries in a few bytes of payload.
    let mut payload = vec![1u8]; // variant index of Metrics
    payload.extend([7, 1]); // boot_id 7, first_seq 1 (varints)
    payload.extend([0xfd, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]); // varint u64::MAX length
    let mut frame = (payload.len() as u32).to_be_bytes().to_vec();
    frame.extend(&payload);
    let err = decode_frame::<AgentMessage>(&frame, MAX_FRAME_LEN).unwrap_err();
    assert!(matches!(err, Error::Decode(_)), "{err:?}");
}

#[test]
fn trailing_bytes_after_a_message_are_refused() {
    let mut payload = codec::encode_frame(&AgentMessage::FleetQuery(FleetQuery {
        after: None,
        limit: 1,
    }))
    .unwrap();
    payload.push(0);
    let len = (payload.len() - 4) as u32;
    payload[..4].copy_from_slice(&len.to_be_bytes());
    let err = decode_frame::<AgentMessage>(&payload, MAX_FRAME_LEN).unwrap_err();
    assert!(matches!(err, Error::TrailingBytes { extra: 1 }), "{err:?}");
}

#[test]
fn empty_frames_are_refused() {
    let err = decode_frame::<AgentMessage>(&[0, 0, 0, 0], MAX_FRAME_LEN).unwrap_err();
    assert!(matches!(err, Error::EmptyFrame));
}

#[test]
fn preamble_checks_magic_and_version() {
    assert_eq!(check_preamble(&preamble()).unwrap(), PROTOCOL_VERSION);
    let mut other_version = preamble();
    other_version[5] = other_version[5].wrapping_add(1);
    let err = check_preamble(&other_version).unwrap_err();
    assert!(matches!(
        err,
        Error::UnsupportedVersion {
            supported: PROTOCOL_VERSION,
            ..
        }
    ));
    assert!(err.to_string().contains("unsupported protocol version"));
    let err = check_preamble(b"GET / ").unwrap_err();
    assert!(matches!(err, Error::BadMagic { .. }));
}
