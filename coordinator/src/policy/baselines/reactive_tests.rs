//! The autoscaler rule driven through the twin: up at once (after a full window), down only
//! after the scale-down interval, nothing while inside the band.
#![allow(clippy::unwrap_used)]

use super::*;
use crate::twin::sim::SimEvent;
use crate::twin::testing::{self, benchmark_truth as truth};

/// (time, target) of every reconfiguration the policy ordered.
fn changes(initial: JobConfig, rates: &[f64]) -> Vec<(f64, JobConfig)> {
    let mut policy = Reactive::new(SearchSpace::default(), ReactiveSettings::default());
    let run = testing::run(&mut policy, rates, initial, testing::options(5, None, 0));
    run.events
        .iter()
        .filter_map(|e| match e {
            SimEvent::Action { t_s, action } => match action.as_ref() {
                Action::Reconfigure { to, .. } => {
                    let shape = JobConfig {
                        parallelism: initial.parallelism,
                        ..*to
                    };
                    assert_eq!(shape, initial, "parallelism only");
                    Some((*t_s, *to))
                }
                Action::Profile { .. } => panic!("reactive never profiles"),
            },
            _ => None,
        })
        .collect()
}

fn steps(parts: &[(u64, f64)]) -> Vec<f64> {
    parts
        .iter()
        .flat_map(|(seconds, rate)| std::iter::repeat_n(*rate, *seconds as usize))
        .collect()
}

#[test]
fn scales_up_after_a_rate_step_once_the_window_sees_it() {
    let small: JobConfig = "p=8,slots=1,mem=4g,cpu=1,ckpt=10".parse().unwrap();
    let capacity = truth().capacity(&small);
    let step_at = 20 * 60;
    let rates = steps(&[(step_at, 0.35 * capacity), (40 * 60, 0.95 * capacity)]);
    let changes = changes(small, &rates);
    assert!(!changes.is_empty(), "no scale-up");
    let (at, to) = changes[0];
    assert!(at > step_at as f64, "acted before the step, at {at}");
    assert!(
        at <= (step_at + 15 * 60 + 60) as f64,
        "too late: {at} (window 15 min)"
    );
    assert!(to.parallelism > small.parallelism);
    assert_eq!(
        JobConfig {
            parallelism: small.parallelism,
            ..to
        },
        small,
        "only the parallelism changes"
    );
    assert!(truth().capacity(&to) > 0.95 * capacity / 0.8);
}

#[test]
fn scales_down_only_after_the_scale_down_interval() {
    let peak = JobConfig::paper_default();
    let capacity = truth().capacity(&peak);
    let rates = steps(&[(100 * 60, 0.15 * capacity)]);
    let changes = changes(peak, &rates);
    assert_eq!(changes.len(), 1, "{changes:?}");
    let (at, to) = changes[0];
    // Wanted from the first full window (15 min), executed one interval (60 min) later.
    let earliest = (15 * 60 + 60 * 60) as f64;
    assert!(at >= earliest, "scaled down at {at}, before {earliest}");
    assert!(at <= earliest + 120.0, "{at}");
    assert!(to.parallelism < peak.parallelism);
}

#[test]
fn a_load_back_inside_the_band_cancels_the_scale_down() {
    let peak = JobConfig::paper_default();
    let capacity = truth().capacity(&peak);
    // Low for 40 min (a scale-down is wanted from 15 min), inside the band for 20 min, then
    // low again: the interval restarts when the window is low again (~69 min), not at 15 min.
    let rates = steps(&[
        (40 * 60, 0.15 * capacity),
        (20 * 60, 0.6 * capacity),
        (80 * 60, 0.15 * capacity),
    ]);
    let changes = changes(peak, &rates);
    assert_eq!(changes.len(), 1, "{changes:?}");
    assert!(changes[0].0 >= (120 * 60) as f64, "{changes:?}");
}
