//! QoS-risk moves: which candidates may take production out of a predicted violation, and the
//! best-effort pick when none is acceptable at the risk rate.

use crate::models::space::JobConfig;
use crate::policy::ChangeKind;

use super::choose::{Context, Scored, price};
use super::config::DemeterConfig;

/// Least capacity gain of a QoS-risk move's target over the current configuration.
pub const RISK_MOVE_MIN_GAIN: f64 = 1.05;

/// The current configuration and the candidates predicted to carry clearly more. The current
/// one is at risk because the rate nears what it carries, so a move that adds no capacity
/// cannot help; yet one whose capacity rests on older, fewer measurements often looked likelier
/// than the current one, whose recent overloads and failures the model had just absorbed, and
/// risk moves flapped between TaskManager memory sizes of equal capacity.
pub fn stronger_than_current(scored: Vec<Scored>, current: JobConfig) -> Vec<Scored> {
    let Some(now) = scored
        .iter()
        .find(|s| s.prediction.config == current)
        .map(|s| s.prediction.capacity.median())
    else {
        return scored;
    };
    scored
        .into_iter()
        .filter(|s| {
            s.prediction.config == current
                || s.prediction.capacity.median() >= RISK_MOVE_MIN_GAIN * now
        })
        .collect()
}

/// Best-effort risk moves: P(feasible) within this of the likeliest candidate's is a tie,
/// which the cheaper candidate wins.
const RISK_ODDS_TIE: f64 = 0.05;

/// A candidate's odds of meeting the QoS for a best-effort risk move: usable P(feasible), then
/// P(feasible) alone, then log capacity. Where none is likely at all (every one past the
/// headroom at this rate), the likeliest to carry the rate decides: without that a job drowning
/// at a rate nothing allowed is believed to meet stayed where it was.
pub type Odds = (f64, f64, f64);

pub fn risk_odds(s: &Scored, cfg: &DemeterConfig) -> Odds {
    (
        s.usable_probability(cfg),
        s.p_feasible,
        s.prediction.capacity.log_mean,
    )
}

pub fn cmp_odds(a: Odds, b: Odds) -> std::cmp::Ordering {
    a.0.total_cmp(&b.0)
        .then(a.1.total_cmp(&b.1))
        .then(a.2.total_cmp(&b.2))
}

/// What production was seen doing when a best-effort risk move is due: it decides how far the
/// move may leap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Seen {
    /// Only a forecast: in-place moves only.
    Forecast,
    /// Latency over the QoS while the job keeps up: also restarts into a measured shape or
    /// onto more resources.
    OverQos,
    /// The backlog grows: the job cannot keep up where it is, so any restart.
    Drowning,
}

/// The best-effort risk move when nothing is acceptable: the likeliest to meet the QoS among
/// the other candidates, the cheaper of two whose usable odds are within [`RISK_ODDS_TIE`] of
/// the best (the model's odds differ by less than its own error there, and the likeliest was
/// often the largest configuration of its shape, at up to twice the safe default's cost), then
/// the cheaper change.
///
/// On a forecast alone ([`Seen::Forecast`]) only in-place moves: a restart is a certain minute
/// or more over the QoS at a rate already high, for odds the model itself could not call
/// acceptable. On the perturbed twin a forecast-only restart into a configuration with
/// P(feasible) 0.00 started four restarts in 30 minutes at the CARS peak (3.7 % of the seconds
/// over the QoS on that seed); in place only, the worst of seeds 1–12 went 3.68 → 2.15 % at
/// the same mean cost.
///
/// While the job keeps up ([`Seen::OverQos`]) a restart into a shape never measured must also
/// add resources (see [`adds_resources`]). Held to its cluster, the perturbed twin's static
/// default runs the CARS peak at the edge of the latency QoS with no backlog; the model,
/// extrapolating, gave the same 24 cores as 8 three-core TaskManagers P(feasible) 0.26 against
/// the default's 0.00, and the restarts into that weaker shape and back put seeds 5 and 12
/// 3.1–3.4 % over the QoS. When the backlog grows, staying drowns for certain, and a reshaping
/// of the same cores is a fair bet (on a drawn job whose default could not carry the CARS
/// peak, the 8 three-core TaskManagers held it).
pub fn likeliest_move<'a>(
    ctx: &Context<'_>,
    scored: &'a [Scored],
    seen: Seen,
) -> Option<&'a Scored> {
    let eligible = |s: &&Scored| {
        let config = &s.prediction.config;
        let restart_allowed = match seen {
            Seen::Forecast => false,
            Seen::OverQos => s.measured || adds_resources(ctx.current, *config),
            Seen::Drowning => true,
        };
        *config != ctx.current
            && (restart_allowed || ChangeKind::between(&ctx.current, config) == ChangeKind::InPlace)
    };
    let best_usable = scored
        .iter()
        .filter(eligible)
        .map(|s| s.usable_probability(ctx.cfg))
        .fold(0.0, f64::max);
    let near_best = |s: &Scored| {
        best_usable > 0.0 && s.usable_probability(ctx.cfg) >= best_usable - RISK_ODDS_TIE
    };
    let floor = ctx.cost(&ctx.current);
    let change_cost = |s: &Scored| price(ctx, 0, s, floor).change_cost;
    scored.iter().filter(eligible).max_by(|a, b| {
        let tie = if near_best(a) && near_best(b) {
            b.cost.total_cmp(&a.cost)
        } else {
            std::cmp::Ordering::Equal
        };
        tie.then(cmp_odds(risk_odds(a, ctx.cfg), risk_odds(b, ctx.cfg)))
            .then_with(|| change_cost(b).total_cmp(&change_cost(a)))
    })
}

/// What a restart into a shape never measured must offer while the job keeps up: at least as
/// many slots, each with at least as much CPU and memory, and more of one of them in all.
/// Reshaping the same resources on the model's extrapolation (fewer, larger TaskManagers, say),
/// for odds the model itself cannot call acceptable, is a certain restart for a guess.
fn adds_resources(current: JobConfig, target: JobConfig) -> bool {
    target.parallelism >= current.parallelism
        && target.cpu_per_slot() >= current.cpu_per_slot()
        && target.memory_per_slot_mb() >= current.memory_per_slot_mb()
        && (target.total_cpu_cores() > current.total_cpu_cores()
            || target.total_memory_mb() > current.total_memory_mb())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::policy::demeter::choose::fixtures::{scored, test_context};
    use crate::policy::demeter::memory::{Shape, shape_of};
    use std::collections::HashSet;

    /// A candidate at `capacity` whose odds of meeting the QoS are `p`.
    fn with_odds(ctx: &Context<'_>, config: &str, capacity: f64, p: f64) -> Scored {
        let mut s = scored(ctx, config, capacity);
        s.p_feasible = p;
        s
    }

    #[test]
    fn a_risk_move_must_add_capacity() {
        let cfg = DemeterConfig::default();
        let current: JobConfig = "p=24,slots=1,mem=4096m,cpu=1,ckpt=10s".parse().unwrap();
        let measured: HashSet<Shape> = HashSet::new();
        let ctx = test_context(&cfg, current, 20_000.0, &measured);
        let candidates = vec![
            scored(&ctx, "p=24,slots=1,mem=1024m,cpu=1,ckpt=10s", 25_500.0),
            scored(&ctx, "p=24,slots=1,mem=4096m,cpu=1,ckpt=10s", 25_000.0),
            scored(&ctx, "p=24,slots=2,mem=4096m,cpu=3,ckpt=10s", 31_000.0),
        ];
        let kept: Vec<String> = stronger_than_current(candidates.clone(), current)
            .iter()
            .map(|s| s.prediction.config.to_string())
            .collect();
        assert_eq!(
            kept,
            [
                "p=24,slots=1,mem=4096m,cpu=1,ckpt=10s",
                "p=24,slots=2,mem=4096m,cpu=3,ckpt=10s"
            ]
        );
        // Without the current configuration among them there is nothing to compare with.
        let others = vec![candidates[0], candidates[2]];
        assert_eq!(stronger_than_current(others, current).len(), 2);
    }

    #[test]
    fn a_best_effort_risk_move_takes_the_cheaper_of_near_equal_odds() {
        let cfg = DemeterConfig::default();
        let current: JobConfig = "p=24,slots=1,mem=4096m,cpu=1,ckpt=10s".parse().unwrap();
        let measured: HashSet<Shape> = [shape_of(&current)].into_iter().collect();
        let ctx = test_context(&cfg, current, 40_000.0, &measured);
        let mut candidates = vec![
            with_odds(&ctx, "p=24,slots=1,mem=4096m,cpu=1,ckpt=10s", 25_000.0, 0.0),
            with_odds(
                &ctx,
                "p=24,slots=1,mem=4096m,cpu=3,ckpt=10s",
                70_000.0,
                0.81,
            ),
            with_odds(
                &ctx,
                "p=20,slots=1,mem=4096m,cpu=3,ckpt=10s",
                60_000.0,
                0.80,
            ),
            with_odds(
                &ctx,
                "p=16,slots=1,mem=4096m,cpu=3,ckpt=10s",
                50_000.0,
                0.78,
            ),
            with_odds(
                &ctx,
                "p=24,slots=1,mem=4096m,cpu=2,ckpt=10s",
                40_000.0,
                0.50,
            ),
        ];
        let pick = |c: &[Scored], seen| likeliest_move(&ctx, c, seen).map(|s| s.prediction.config);
        // Restarts (here into unmeasured shapes) only on an observed violation.
        assert_eq!(pick(&candidates, Seen::Forecast), None);
        assert_eq!(
            pick(&candidates, Seen::Drowning),
            Some(candidates[3].prediction.config)
        );
        // Past the tie, the odds decide.
        candidates[3].p_feasible = 0.70;
        assert_eq!(
            pick(&candidates, Seen::Drowning),
            Some(candidates[2].prediction.config)
        );
        // Where nothing is likely at all, the likeliest to carry the rate, whatever its cost.
        for c in &mut candidates {
            c.p_feasible = 0.0;
        }
        assert_eq!(
            pick(&candidates, Seen::Drowning),
            Some(candidates[1].prediction.config)
        );
    }

    #[test]
    fn a_best_effort_restart_into_an_unmeasured_shape_must_add_resources() {
        let cfg = DemeterConfig::default();
        let current: JobConfig = "p=24,slots=1,mem=4096m,cpu=1,ckpt=10s".parse().unwrap();
        let measured: HashSet<Shape> = [shape_of(&current)].into();
        let ctx = test_context(&cfg, current, 42_000.0, &measured);
        let candidates = vec![
            with_odds(&ctx, "p=24,slots=1,mem=4096m,cpu=1,ckpt=10s", 30_000.0, 0.0),
            // The same 24 cores reshaped, and 30 cores on a quarter of the memory per slot.
            with_odds(&ctx, "p=8,slots=1,mem=4096m,cpu=3,ckpt=10s", 40_000.0, 0.26),
            with_odds(
                &ctx,
                "p=20,slots=2,mem=2048m,cpu=3,ckpt=10s",
                40_000.0,
                0.20,
            ),
            with_odds(
                &ctx,
                "p=24,slots=1,mem=4096m,cpu=2,ckpt=10s",
                36_000.0,
                0.10,
            ),
            // More cores in all, on half as many slots.
            with_odds(
                &ctx,
                "p=12,slots=1,mem=4096m,cpu=3,ckpt=10s",
                40_000.0,
                0.40,
            ),
        ];
        let pick = |c: &[Scored], seen| likeliest_move(&ctx, c, seen).map(|s| s.prediction.config);
        assert_eq!(
            pick(&candidates, Seen::OverQos),
            Some(candidates[3].prediction.config)
        );
        // Drowning, staying is certain to fail: the likeliest, whatever its shape.
        assert_eq!(
            pick(&candidates, Seen::Drowning),
            Some(candidates[4].prediction.config)
        );
        // Once its shape was measured, the reshaping is the model's knowledge, not a guess.
        let mut candidates = candidates;
        candidates[1].measured = true;
        assert_eq!(
            pick(&candidates, Seen::OverQos),
            Some(candidates[1].prediction.config)
        );
    }

    #[test]
    fn without_an_observed_violation_a_best_effort_risk_move_stays_in_place() {
        let cfg = DemeterConfig::default();
        let current: JobConfig = "p=16,slots=1,mem=4096m,cpu=1,ckpt=10s".parse().unwrap();
        let stronger_shape: JobConfig = "p=24,slots=1,mem=4096m,cpu=3,ckpt=10s".parse().unwrap();
        let measured: HashSet<Shape> = [shape_of(&current), shape_of(&stronger_shape)].into();
        let ctx = test_context(&cfg, current, 40_000.0, &measured);
        let candidates = vec![
            with_odds(&ctx, "p=16,slots=1,mem=4096m,cpu=1,ckpt=10s", 25_000.0, 0.0),
            with_odds(&ctx, "p=24,slots=1,mem=4096m,cpu=1,ckpt=10s", 32_000.0, 0.3),
            with_odds(&ctx, "p=24,slots=1,mem=4096m,cpu=3,ckpt=10s", 70_000.0, 0.8),
        ];
        let pick = |seen| likeliest_move(&ctx, &candidates, seen).map(|s| s.prediction.config);
        // Forecast only: the likelier restart, even into a measured shape, waits.
        assert_eq!(pick(Seen::Forecast), Some(candidates[1].prediction.config));
        assert_eq!(pick(Seen::OverQos), Some(stronger_shape));
    }
}
