//! The configurations the oracle's DP chooses among (see `instance.rs`): per epoch the
//! cheapest ones that truly meet the QoS at its rate, plus the in-place siblings of the
//! cheapest; when none does, the most capable.

use crate::models::space::JobConfig;

use super::OracleSettings;
use super::foresight::Foresight;

/// The candidates, sorted, and per epoch the configurations picked at its rate (the cheapest ones
/// meeting the QoS and the in-place siblings of the cheapest).
pub fn candidates(
    world: &Foresight,
    settings: &OracleSettings,
    rates: &[f64],
    initial: JobConfig,
) -> (Vec<JobConfig>, Vec<Vec<JobConfig>>) {
    let all: Vec<JobConfig> = world
        .space
        .candidates()
        .into_iter()
        .filter(|c| world.truth.can_run(c))
        .collect();
    let mut levels: Vec<f64> = rates.to_vec();
    levels.sort_by(f64::total_cmp);
    levels.dedup();
    let lowest = levels.first().copied().unwrap_or(0.0);
    let picks_at = |rate: f64| -> Vec<JobConfig> {
        let mut feasible: Vec<&JobConfig> =
            all.iter().filter(|c| world.feasible(c, rate)).collect();
        if feasible.is_empty() {
            return most_capable(world, &all).into_iter().collect();
        }
        feasible.sort_by(|a, b| world.cost(a).total_cmp(&world.cost(b)).then(a.cmp(b)));
        let cheapest = *feasible[0];
        let mut picks: Vec<JobConfig> = feasible
            .into_iter()
            .take(settings.candidates_per_epoch.max(1))
            .copied()
            .collect();
        // Every other parallelism of the cheapest shape: reachable in place, often the
        // cheapest change (on the benchmark traces, widening further changed no optimum).
        for &parallelism in &world.space.parallelism {
            let sibling = JobConfig {
                parallelism,
                ..cheapest
            };
            if world.space.is_valid(&sibling) && world.feasible(&sibling, lowest) {
                picks.push(sibling);
            }
        }
        picks.sort_unstable();
        picks.dedup();
        picks
    };
    let by_level: Vec<Vec<JobConfig>> = levels.iter().map(|&r| picks_at(r)).collect();
    let picks: Vec<Vec<JobConfig>> = rates
        .iter()
        .map(|r| {
            let level = levels.partition_point(|l| l < r);
            by_level.get(level).cloned().unwrap_or_default()
        })
        .collect();
    let mut chosen: Vec<JobConfig> = std::iter::once(initial)
        .chain(by_level.into_iter().flatten())
        .collect();
    chosen.sort_unstable();
    chosen.dedup();
    (chosen, picks)
}

/// The configuration with the most capacity (the cheapest, then the first, among equals).
pub fn most_capable(world: &Foresight, configs: &[JobConfig]) -> Option<JobConfig> {
    configs.iter().copied().min_by(|a, b| {
        let capacity = world.truth.capacity(b).total_cmp(&world.truth.capacity(a));
        capacity
            .then(world.cost(a).total_cmp(&world.cost(b)))
            .then(a.cmp(b))
    })
}
