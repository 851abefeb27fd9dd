//! Shape probes. A cheaper configuration the model already calls feasible may still be refused
//! because its TaskManager shape was never measured (`require_measured_shape`: the surrogate is
//! trusted along the parallelism of a measured shape, not across shapes). Profiling it at full
//! size needs about what production has, and beside a large production the cluster's spare
//! does not hold that: after the step trace's rise the policy sat on 4-GB slots for seven
//! hours with its best candidates blocked by "shape not measured yet" and none of them fitting.
//!
//! A probe runs that shape on fewer TaskManagers, fed the same load per subtask (the plan rate
//! times the parallelism share). It is ordered only for a shape never measured — once it ran,
//! the shape is measured and never probed again, so a probe cannot repeat — and only for a
//! candidate the model is already confident in, so that measuring the shape is all the move
//! lacks. (Scaled copies of candidates the model doubted were tried: the small copy taught the
//! full one only through the parallelism extrapolation, the candidate stayed doubtful, and the
//! same copy was ordered batch after batch.)

use super::choose::{Context, Scored, saving_bar};
use super::memory::shape_of;
use crate::models::space::JobConfig;
use crate::policy::ProfilingRoom;

/// The probe is at least this share of the candidate's parallelism: further down, the
/// extrapolation along the parallelism is what the move would rest on.
const MIN_SHARE: f64 = 0.5;

/// A copy of `candidate`'s shape on fewer TaskManagers, to be fed `share` of the plan rate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Probe {
    pub candidate: JobConfig,
    pub copy: JobConfig,
    pub share: f64,
}

/// The most valuable probe that fits `room` and `budget_core_s` (core-seconds for a run of
/// `run_s`), if any: among unmeasured shapes whose candidate is confidently feasible, saves at
/// least `min_saving` against the best known choice, may carry the peak, and does not fit at
/// full size (that is an ordinary batch's job). Value: the saving over the expected dwell minus
/// what the probe costs to run.
pub fn shape_probe(
    ctx: &Context<'_>,
    scored: &[Scored],
    room: ProfilingRoom,
    budget_core_s: f64,
    run_s: f64,
) -> Option<Probe> {
    let cfg = ctx.cfg;
    let (best_known, bar) = saving_bar(ctx, scored);
    let dwell = cfg.expected_dwell_s as f64;
    let fits = |c: &JobConfig| {
        c.total_cpu_cores() <= room.cpu_cores
            && c.total_memory_mb() <= room.memory_mb
            && c.total_cpu_cores() * run_s <= budget_core_s
    };
    scored
        .iter()
        .filter(|s| {
            let config = &s.prediction.config;
            !s.measured
                && s.utilisation <= cfg.max_utilisation
                && s.p_feasible >= cfg.confidence
                && s.cost <= bar
                && !fits(config)
                && ctx.may_carry.is_none_or(|m| m.contains(&shape_of(config)))
        })
        .filter_map(|s| {
            let candidate = s.prediction.config;
            let lowest = (f64::from(candidate.parallelism) * MIN_SHARE).ceil() as u32;
            let copy = (lowest.max(1)..candidate.parallelism)
                .rev()
                .map(|parallelism| JobConfig {
                    parallelism,
                    ..candidate
                })
                .find(|c| fits(c))?;
            let value = (best_known - s.cost) * dwell - ctx.cost(&copy) * run_s;
            let share = f64::from(copy.parallelism) / f64::from(candidate.parallelism);
            (value > 0.0).then_some((
                value,
                Probe {
                    candidate,
                    copy,
                    share,
                },
            ))
        })
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, probe)| probe)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::collections::HashSet;

    use super::*;
    use crate::policy::demeter::DemeterConfig;
    use crate::policy::demeter::choose::fixtures::{scored, test_context};
    use crate::policy::demeter::memory::Shape;

    /// Production on 16 one-slot 4-GB TaskManagers leaves 14 cores and 56 GB beside it.
    const ROOM: ProfilingRoom = ProfilingRoom {
        cpu_cores: 14.0,
        memory_mb: 57_344.0,
    };
    const BUDGET: f64 = 1e9;
    const RUN_S: f64 = 240.0;

    fn production() -> JobConfig {
        "p=16,slots=1,mem=4096m,cpu=1,ckpt=10s".parse().unwrap()
    }

    fn measured() -> HashSet<Shape> {
        HashSet::from([shape_of(&production())])
    }

    #[test]
    fn an_unmeasured_shape_the_model_trusts_is_probed_on_fewer_taskmanagers() {
        let cfg = DemeterConfig::default();
        let measured = measured();
        let ctx = test_context(&cfg, production(), 10_000.0, &measured);
        // 8 two-core TaskManagers: 16 cores, more than the room.
        let candidate = scored(&ctx, "p=16,slots=2,mem=2048m,cpu=2,ckpt=10s", 20_000.0);
        let current = scored(&ctx, &production().to_string(), 20_000.0);
        assert!(!candidate.acceptable(&cfg), "blocked by its shape alone");
        let probe = shape_probe(&ctx, &[current, candidate], ROOM, BUDGET, RUN_S).unwrap();
        assert_eq!(probe.candidate, candidate.prediction.config);
        assert_eq!(shape_of(&probe.copy), shape_of(&probe.candidate));
        assert_eq!(probe.copy.parallelism, 14, "the largest copy that fits");
        assert!(probe.copy.total_cpu_cores() <= ROOM.cpu_cores);
        assert_eq!(probe.share, 14.0 / 16.0);
    }

    #[test]
    fn no_probe_for_a_measured_shape_a_doubtful_candidate_or_one_that_fits_whole() {
        let cfg = DemeterConfig::default();
        let current = production();
        let unmeasured = "p=16,slots=2,mem=2048m,cpu=2,ckpt=10s";
        let mut measured = measured();
        measured.insert(shape_of(&unmeasured.parse().unwrap()));
        let ctx = test_context(&cfg, current, 10_000.0, &measured);
        let known = scored(&ctx, unmeasured, 20_000.0);
        assert_eq!(shape_probe(&ctx, &[known], ROOM, BUDGET, RUN_S), None);

        let measured = self::measured();
        let ctx = test_context(&cfg, current, 10_000.0, &measured);
        // Capacity one standard deviation below its median too close to the rate: the model
        // does not call it feasible, so measuring its shape would not settle the move.
        let doubtful = scored(&ctx, unmeasured, 10_500.0);
        assert_eq!(shape_probe(&ctx, &[doubtful], ROOM, BUDGET, RUN_S), None);
        // Six two-core TaskManagers fit whole: an ordinary batch measures that.
        let whole = scored(&ctx, "p=12,slots=2,mem=2048m,cpu=2,ckpt=10s", 20_000.0);
        assert_eq!(shape_probe(&ctx, &[whole], ROOM, BUDGET, RUN_S), None);
    }

    #[test]
    fn no_probe_below_half_the_candidates_parallelism_or_beyond_the_budget() {
        let cfg = DemeterConfig::default();
        let measured = measured();
        let ctx = test_context(&cfg, production(), 10_000.0, &measured);
        let candidate = scored(&ctx, "p=16,slots=2,mem=2048m,cpu=2,ckpt=10s", 20_000.0);
        let small = ProfilingRoom {
            cpu_cores: 6.0,
            ..ROOM
        };
        assert_eq!(shape_probe(&ctx, &[candidate], small, BUDGET, RUN_S), None);
        // Seven cores for a run: less than half the candidate (eight cores) needs.
        let poor = 7.0 * RUN_S;
        assert_eq!(shape_probe(&ctx, &[candidate], ROOM, poor, RUN_S), None);
    }
}
