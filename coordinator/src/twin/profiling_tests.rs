//! Profiling copies on the cluster's spare capacity: shrunk, deferred, one batch at a time,
//! torn down when production grows, dropped after waiting too long.
#![allow(clippy::unwrap_used)]

use rand::SeedableRng;
use rand::rngs::StdRng;

use super::*;

fn config(text: &str) -> JobConfig {
    text.parse().unwrap()
}

/// 8 cores, 16 GB.
fn eight() -> JobConfig {
    config("p=8,slots=1,mem=2g,cpu=1,ckpt=30")
}

/// 4 cores, 8 GB.
fn four() -> JobConfig {
    config("p=8,slots=4,mem=4g,cpu=2,ckpt=30")
}

struct Bench {
    profiler: Profiler,
    truth: GroundTruth,
    space: SearchSpace,
    rng: StdRng,
}

impl Bench {
    /// A 20-core, 40 GB cluster.
    fn new() -> Self {
        Bench {
            profiler: Profiler::new(ProfilingTimes::default(), (20.0, 40_960.0)),
            truth: crate::twin::testing::benchmark_truth(),
            space: SearchSpace::default(),
            rng: StdRng::seed_from_u64(1),
        }
    }

    /// Ticks every second of `[from, to)` with `production` and collects finished batches.
    fn run(&mut self, from: u64, to: u64, production: Resources) -> Vec<BatchResult> {
        let mut done = Vec::new();
        for t in from..to {
            let now = t as f64;
            self.profiler
                .tick(now, production, &self.truth, &self.space, &mut self.rng);
            done.extend(self.profiler.finished(now + 1.0));
        }
        done
    }
}

#[test]
fn a_batch_is_shrunk_to_what_fits_beside_production() {
    let mut b = Bench::new();
    // 10 cores free: the first 8-core copy fits, the second does not, the 4-core one does not
    // either (2 left), so one copy runs.
    b.profiler
        .order(0.0, 1, &[eight(), eight(), four()], 20_000.0);
    let done = b.run(0, 3000, (10.0, 10_240.0));
    assert_eq!(done.len(), 1);
    assert_eq!(done[0].results.len(), 1);
    let s = b.profiler.stats;
    assert_eq!((s.copies_started, s.copies_dropped), (1, 2));
    assert_eq!(s.batches_deferred, 0);
}

#[test]
fn one_batch_at_a_time_and_none_without_room() {
    let mut b = Bench::new();
    b.profiler.order(0.0, 1, &[four()], 20_000.0);
    b.profiler.order(0.0, 2, &[four()], 20_000.0);
    let first = b.run(0, 1, (10.0, 10_240.0));
    assert!(first.is_empty());
    assert_eq!(b.profiler.in_flight(), 1);
    assert_eq!(b.profiler.waiting(), 1, "the second waits for the first");
    let done = b.run(1, 3000, (10.0, 10_240.0));
    assert_eq!(done.iter().map(|d| d.batch).collect::<Vec<_>>(), vec![1, 2]);
    assert!(done[1].at > done[0].at);
    assert_eq!(b.profiler.stats.batches_deferred, 1);

    // Production takes the whole cluster: a batch waits, then is dropped after max_defer_s.
    b.profiler.order(3000.0, 3, &[four()], 20_000.0);
    let done = b.run(3000, 4000, (20.0, 40_960.0));
    assert_eq!(done.len(), 1);
    assert!(done[0].results.is_empty());
    assert!(done[0].at > 3000.0 + ProfilingTimes::default().max_defer_s);
    assert_eq!(b.profiler.stats.batches_expired, 1);
    assert_eq!(b.profiler.stats.copies_started, 2);
}

#[test]
fn production_growing_tears_copies_down() {
    let mut b = Bench::new();
    b.profiler.order(0.0, 1, &[four(), four()], 20_000.0);
    assert!(b.run(0, 10, (8.0, 8_192.0)).is_empty());
    assert_eq!(b.profiler.allocated(9.0, 10.0).0, 8.0);
    // Production grows to 14 cores: one copy (the latest) must go.
    let done = b.run(10, 3000, (14.0, 8_192.0));
    assert_eq!(b.profiler.stats.copies_preempted, 1);
    assert_eq!(done.len(), 1);
    assert_eq!(
        done[0].results.len(),
        1,
        "the torn-down copy measured nothing"
    );
    assert_eq!(b.profiler.allocated(10.0, 11.0).0, 0.0);
}
