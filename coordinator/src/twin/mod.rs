//! The digital twin: a deterministic simulator of a Flink job. For now its ground truth — the
//! curves a simulated job really follows — which tests and benchmarks train and score models on.

pub mod truth;
