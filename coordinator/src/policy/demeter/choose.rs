//! Candidate scoring and pricing: which configuration to move to, whether the move pays, and
//! which candidates a profiling batch should measure.
//!
//! Cost is one scalar per second: total CPU and total memory, each divided by the safe
//! default's and weighted, so the safe default costs `cpu_weight + memory_weight`. A change is
//! priced as the seconds it spends over the latency QoS — the downtime (learned per change
//! kind) plus the catch-up of the backlog built meanwhile, drained by the new configuration's
//! spare capacity — at `violation_cost_s` safe-default-seconds each. A saving pays when
//! `saving per second × expected dwell > change cost`, so an in-place rescale (seconds of
//! downtime) wins over a restart that saves a little more.

use crate::Result;
use crate::models::mobo::{EnoughKnownOptions, enough_known};
use crate::models::space::JobConfig;
use crate::models::surrogate::{ConfigPrediction, Qos};
use crate::policy::{CandidateNumbers, ChangeKind, ProfilingRoom};

use super::config::DemeterConfig;
use super::memory::{Shape, shape_of};
use super::reach::{MeasurementNoise, confidence_margin, reach_probability};
use std::collections::HashSet;

/// Headroom is judged on capacity this many standard deviations below its median: where the
/// model is unsure of a configuration's capacity (an unmeasured parallelism or interval), it
/// must show more headroom.
const CAPACITY_SIGMA: f64 = 1.0;

/// A change as far as its downtime goes: the policy learns each class apart. A rescale in
/// place onto fewer subtasks restores more state into each (on a job with large state it took
/// twice a scale-out's downtime in the twin); a restart onto the TaskManagers the job has (a
/// new checkpoint interval) starts no JVMs; a restart onto new ones waits for them to start
/// and register.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Downtime {
    InPlace = 0,
    RestartOnKept = 1,
    Restart = 2,
    InPlaceScaleIn = 3,
}

impl Downtime {
    /// How many classes there are (the length of the learned downtimes).
    pub const COUNT: usize = 4;

    pub fn of(from: &JobConfig, to: &JobConfig) -> Self {
        let kept = from.same_taskmanager_shape(to) && to.task_managers() <= from.task_managers();
        match ChangeKind::between(from, to) {
            ChangeKind::InPlace if to.parallelism < from.parallelism => Self::InPlaceScaleIn,
            ChangeKind::InPlace => Self::InPlace,
            ChangeKind::FullRestart if kept => Self::RestartOnKept,
            ChangeKind::FullRestart => Self::Restart,
        }
    }
}

/// What the decision knows besides the predictions.
#[derive(Debug, Clone)]
pub struct Context<'a> {
    pub qos: &'a Qos,
    pub cfg: &'a DemeterConfig,
    /// Safe default's total CPU cores and memory MB (the cost units).
    pub reference: (f64, f64),
    pub current: JobConfig,
    /// Rate now: what builds the backlog during a change.
    pub rate_now: f64,
    /// Seconds a change is down, per [`Downtime`] class.
    pub downtime_s: [f64; Downtime::COUNT],
    /// Seconds over the QoS a change costs beyond downtime and catch-up, per class (learned:
    /// `overhead.rs`).
    pub overhead_s: [f64; Downtime::COUNT],
    /// Shapes production or profiling has measured.
    pub measured: &'a HashSet<Shape>,
    /// Shapes whose largest in-place configuration is acceptable at the peak rate: the only
    /// ones a full restart may move to (None: no restriction).
    pub carries: Option<&'a HashSet<Shape>>,
    /// Shapes whose largest in-place configuration plausibly carries the peak rate: the only
    /// ones worth profiling (None: no restriction).
    pub may_carry: Option<&'a HashSet<Shape>>,
    /// The QoS budget's factor on `violation_cost_s` (1 within the budget).
    pub violation_factor: f64,
    /// What one more measurement is blurred by: how much profiling can still teach.
    pub noise: MeasurementNoise,
}

impl Context<'_> {
    pub fn cost(&self, config: &JobConfig) -> f64 {
        self.cfg.cpu_weight * config.total_cpu_cores() / self.reference.0.max(1e-9)
            + self.cfg.memory_weight * config.total_memory_mb() / self.reference.1.max(1e-9)
    }

    fn violation_price(&self) -> f64 {
        self.violation_factor
            * self.cfg.violation_cost_s
            * (self.cfg.cpu_weight + self.cfg.memory_weight)
    }
}

/// One candidate's prediction and verdict at the decision rate.
#[derive(Debug, Clone, Copy)]
pub struct Scored {
    pub prediction: ConfigPrediction,
    pub p_feasible: f64,
    pub cost: f64,
    /// Decision rate ÷ predicted capacity (one standard deviation below the median).
    pub utilisation: f64,
    /// Its shape was measured: the model then only extrapolates along the parallelism.
    pub measured: bool,
}

impl Scored {
    pub fn new(ctx: &Context<'_>, prediction: ConfigPrediction) -> Self {
        Scored {
            p_feasible: prediction.p_feasible(ctx.qos),
            cost: ctx.cost(&prediction.config),
            utilisation: prediction.rate / prediction.capacity.at_sigma(-CAPACITY_SIGMA).max(1e-9),
            measured: ctx.measured.contains(&shape_of(&prediction.config)),
            prediction,
        }
    }

    /// Feasible with the policy's confidence and headroom, and of a measured shape (when the
    /// configuration asks for it).
    pub fn acceptable(&self, cfg: &DemeterConfig) -> bool {
        self.usable_probability(cfg) >= cfg.confidence
    }

    /// P(feasible) as the decision may use it: zero where the headroom rule excludes the
    /// candidate; for an unmeasured shape, never quite confident — the surrogate extrapolates
    /// across shapes from a few scalars, and confounded effects (CPU vs memory per slot) make
    /// that extrapolation overconfident; profiling is what makes a shape trusted.
    pub fn usable_probability(&self, cfg: &DemeterConfig) -> f64 {
        if self.utilisation > cfg.max_utilisation {
            0.0
        } else if cfg.require_measured_shape && !self.measured {
            self.p_feasible.min(0.99 * cfg.confidence)
        } else {
            self.p_feasible
        }
    }

    pub fn numbers(&self) -> CandidateNumbers {
        let p = &self.prediction;
        CandidateNumbers {
            config: p.config,
            rate: p.rate,
            p_feasible: self.p_feasible,
            latency_p95_ms: p.latency_p95_ms.median(),
            recovery_s: p.recovery_s.median(),
            cpu_cores: p.config.total_cpu_cores(),
            memory_mb: p.config.total_memory_mb(),
        }
    }
}

/// A priced move to one candidate.
#[derive(Debug, Clone, Copy)]
pub struct Priced {
    pub index: usize,
    pub kind: ChangeKind,
    /// Cost per second saved (negative: the move costs more to run).
    pub saving: f64,
    /// Seconds over the QoS the change is expected to cause, and their price.
    pub violation_s: f64,
    pub change_cost: f64,
    /// Seconds the saving is paid out over.
    pub dwell_s: f64,
    /// A restart's credit for its shape: what it saves per second against the cheapest
    /// acceptable in-place option, over the extra seconds a shape is kept.
    pub shape_credit: f64,
    /// `saving × dwell − change cost + shape credit`.
    pub net: f64,
}

/// Prices the move to `scored`. `same_shape_floor`: the cost per second of the cheapest
/// acceptable option that keeps the current shape (the current cost if there is none). A saving
/// is paid out over `expected_dwell_s` whatever the change; a restart onto a new shape is
/// credited in addition with its saving against that floor over the rest of `shape_dwell_s`
/// (the rescales that follow keep the shape). Crediting a restart's whole saving over the
/// shape dwell made a new shape beat a rescale of the current one to the same cost.
pub fn price(ctx: &Context<'_>, index: usize, scored: &Scored, same_shape_floor: f64) -> Priced {
    let to = scored.prediction.config;
    let kind = ChangeKind::between(&ctx.current, &to);
    let class = Downtime::of(&ctx.current, &to);
    let downtime = ctx.downtime_s[class as usize];
    let modelled = modelled_over_qos_s(downtime, scored.prediction.capacity.median(), ctx.rate_now);
    let violation_s = (modelled + ctx.overhead_s[class as usize])
        .max(downtime)
        .min(1e6);
    let change_cost = violation_s * ctx.violation_price();
    let saving = ctx.cost(&ctx.current) - scored.cost;
    let dwell = ctx.cfg.expected_dwell_s as f64;
    let shape_credit = if shape_of(&to) == shape_of(&ctx.current) {
        0.0
    } else {
        let extra = ctx
            .cfg
            .shape_dwell_s
            .saturating_sub(ctx.cfg.expected_dwell_s) as f64;
        (same_shape_floor - scored.cost).max(0.0) * extra
    };
    Priced {
        index,
        kind,
        saving,
        violation_s,
        change_cost,
        dwell_s: dwell,
        shape_credit,
        net: saving * dwell - change_cost + shape_credit,
    }
}

/// Seconds over the QoS a change is modelled to cost: `downtime_s` down, then the backlog
/// built meanwhile at `rate_now` drained by the spare of `capacity` (infinite without spare).
pub fn modelled_over_qos_s(downtime_s: f64, capacity: f64, rate_now: f64) -> f64 {
    let spare = capacity - rate_now;
    let catch_up = if spare > 0.0 {
        rate_now * downtime_s / spare
    } else {
        f64::INFINITY
    };
    downtime_s + catch_up
}

/// The cost of the cheapest acceptable option of the current shape (see [`price`]).
pub fn same_shape_floor(ctx: &Context<'_>, scored: &[Scored]) -> f64 {
    let shape = shape_of(&ctx.current);
    scored
        .iter()
        .filter(|s| s.prediction.config != ctx.current && s.acceptable(ctx.cfg))
        .filter(|s| shape_of(&s.prediction.config) == shape)
        .map(|s| s.cost)
        .fold(ctx.cost(&ctx.current), f64::min)
}

/// The move to make, if any, and the best candidate passed over with why.
#[derive(Debug, Clone)]
pub struct Verdict {
    pub chosen: Option<Priced>,
    pub best_rejected: Option<(usize, String)>,
}

/// Which moves [`best_move`] may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Moves {
    Any,
    /// Only other parallelisms of the current shape: what a profiling batch cannot change.
    SameShape,
    /// Only in place: no downtime beyond a rescale.
    InPlace,
}

/// `must_move`: the current configuration is at risk, so the best acceptable candidate is taken
/// even if it costs more; otherwise only a move that saves enough and pays for itself.
/// A move onto a new shape must also carry the peak in place when `ctx.carries` says so.
pub fn best_move(ctx: &Context<'_>, scored: &[Scored], must_move: bool, moves: Moves) -> Verdict {
    let current_cost = ctx.cost(&ctx.current);
    let floor = same_shape_floor(ctx, scored);
    let mut chosen: Option<Priced> = None;
    for (i, s) in scored.iter().enumerate() {
        if s.prediction.config == ctx.current || !s.acceptable(ctx.cfg) {
            continue;
        }
        let priced = price(ctx, i, s, floor);
        let shape = shape_of(&s.prediction.config);
        let new_shape = shape != shape_of(&ctx.current);
        let allowed = match moves {
            Moves::Any => true,
            Moves::SameShape => !new_shape,
            Moves::InPlace => priced.kind == ChangeKind::InPlace,
        };
        if !allowed || (new_shape && ctx.carries.is_some_and(|c| !c.contains(&shape))) {
            continue;
        }
        let pays =
            must_move || (priced.net > 0.0 && priced.saving >= ctx.cfg.min_saving * current_cost);
        if pays && chosen.is_none_or(|c| priced.net > c.net) {
            chosen = Some(priced);
        }
    }
    let chosen_cost = chosen.map_or(current_cost, |c| scored[c.index].cost);
    // The closest call among the cheaper candidates not taken: the likeliest feasible one.
    let rejected = (0..scored.len())
        .filter(|&i| chosen.is_none_or(|c| c.index != i))
        .filter(|&i| scored[i].prediction.config != ctx.current && scored[i].cost < chosen_cost)
        .max_by(|&a, &b| {
            let (sa, sb) = (&scored[a], &scored[b]);
            sa.usable_probability(ctx.cfg)
                .total_cmp(&sb.usable_probability(ctx.cfg))
                .then(sb.cost.total_cmp(&sa.cost))
        });
    let best_rejected = rejected.map(|i| (i, why_not(ctx, i, &scored[i], current_cost, floor)));
    Verdict {
        chosen,
        best_rejected,
    }
}

fn why_not(ctx: &Context<'_>, index: usize, s: &Scored, current_cost: f64, floor: f64) -> String {
    let cfg = ctx.cfg;
    if cfg.require_measured_shape && !s.measured && s.p_feasible >= cfg.confidence {
        return "shape not measured yet".into();
    }
    if s.p_feasible < cfg.confidence {
        return format!(
            "P(feasible) {:.2} below confidence {:.2}",
            s.p_feasible, cfg.confidence
        );
    }
    if s.utilisation > cfg.max_utilisation {
        return format!(
            "utilisation {:.2} above {:.2}",
            s.utilisation, cfg.max_utilisation
        );
    }
    let p = price(ctx, index, s, floor);
    let shape = shape_of(&s.prediction.config);
    if shape != shape_of(&ctx.current) && ctx.carries.is_some_and(|c| !c.contains(&shape)) {
        return "its shape cannot carry the peak rate in place".into();
    }
    if p.saving < cfg.min_saving * current_cost {
        return format!(
            "saves {:.1} % < {:.1} %",
            100.0 * p.saving / current_cost.max(1e-9),
            100.0 * cfg.min_saving
        );
    }
    if p.net > 0.0 {
        return format!("pays (net {:.0}) but another move pays more", p.net);
    }
    format!(
        "{:?} change costs {:.0} (≈{:.0} s over QoS) vs {:.0} saved over the dwell",
        p.kind,
        p.change_cost,
        p.violation_s,
        p.saving * p.dwell_s + p.shape_credit
    )
}

/// A profiling batch: the candidates to measure and the miss probability that asked for it.
#[derive(Debug, Clone, PartialEq)]
pub struct Batch {
    pub configs: Vec<JobConfig>,
    pub miss_probability: f64,
}

/// The cost of the cheapest acceptable choice (the current configuration at worst), and the
/// cost a candidate must stay under to save `min_saving` against it: what profiling a
/// candidate may win.
pub fn saving_bar(ctx: &Context<'_>, scored: &[Scored]) -> (f64, f64) {
    let best_known = scored
        .iter()
        .filter(|s| s.acceptable(ctx.cfg))
        .map(|s| s.cost)
        .fold(ctx.cost(&ctx.current), f64::min);
    (best_known, best_known * (1.0 - ctx.cfg.min_saving))
}

/// None when enough is known about the candidates that matter: plausible ones (P(feasible)
/// at least `min_plausible`) that would save at least `min_saving` against the cheapest
/// acceptable one (or the current one). Otherwise up to `q` doubtful ones of distinct shapes,
/// best expected net saving first, among those worth their profiling run (P(one measurement
/// makes it acceptable) × saving × expected dwell above what the copy costs to run: a
/// value-of-information test, `reach.rs`) and within `limit` each.
///
/// Why not EHVI × P(feasible) here: with both objectives known exactly, EHVI rewards area
/// on the cost plane, so the cheapest long shots win a batch; the policy decides on one scalar
/// cost, and for a scalar the constrained expected improvement is the textbook acquisition.
pub fn profile_batch(
    ctx: &Context<'_>,
    scored: &[Scored],
    q: usize,
    limit: ProfilingRoom,
) -> Result<Option<Batch>> {
    if q == 0 || scored.is_empty() {
        return Ok(None);
    }
    let cfg = ctx.cfg;
    let (best_known, bar) = saving_bar(ctx, scored);
    // What matters: the acceptable ones (they bound the choice) and the plausible
    // cheaper-by-enough ones.
    let relevant: Vec<usize> = (0..scored.len())
        .filter(|&i| scored[i].prediction.config != ctx.current)
        .filter(|&i| {
            let s = &scored[i];
            s.acceptable(cfg) || (s.cost <= bar && s.usable_probability(cfg) >= cfg.min_plausible)
        })
        .collect();
    let costs: Vec<Vec<f64>> = relevant
        .iter()
        .map(|&i| {
            let c = &scored[i].prediction.config;
            vec![c.total_cpu_cores(), c.total_memory_mb()]
        })
        .collect();
    let pof: Vec<f64> = relevant
        .iter()
        .map(|&i| scored[i].usable_probability(cfg))
        .collect();
    let options = EnoughKnownOptions {
        confident: cfg.confidence,
        max_miss_probability: cfg.max_miss_probability,
    };
    let verdict = enough_known(&costs, &pof, &options);
    if verdict.enough {
        return Ok(None);
    }
    // Constrained expected improvement of the scalar cost (P(the measurement makes it
    // acceptable) × saving over the dwell), net of what the copy costs to run; one candidate
    // per TaskManager shape (slots, memory, CPU) so one batch explores several.
    let run_s = cfg.profile_run_s as f64;
    let dwell = cfg.expected_dwell_s as f64;
    let margin = confidence_margin(cfg.confidence);
    let mut ranked: Vec<(f64, usize)> = verdict
        .doubtful
        .iter()
        .map(|&k| {
            let s = &scored[relevant[k]];
            let reach = reach_probability(&s.prediction, ctx.qos, ctx.noise, margin);
            let value = reach * (best_known - s.cost) * dwell - s.cost * run_s;
            (value, relevant[k])
        })
        .filter(|&(value, i)| {
            let config = &scored[i].prediction.config;
            value > 0.0
                && config.total_cpu_cores() <= limit.cpu_cores
                && config.total_memory_mb() <= limit.memory_mb
                && ctx.may_carry.is_none_or(|m| m.contains(&shape_of(config)))
        })
        .collect();
    ranked.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    tracing::debug!(
        relevant = relevant.len(),
        doubtful = verdict.doubtful.len(),
        ranked = ranked.len(),
        best_known,
        "profiling candidates"
    );
    let mut shapes = HashSet::new();
    let configs: Vec<JobConfig> = ranked
        .into_iter()
        .map(|(_, i)| scored[i].prediction.config)
        .filter(|c| shapes.insert((c.slots_per_tm, c.tm_memory_mb, c.tm_cpu_millis)))
        .take(q)
        .collect();
    if configs.is_empty() {
        return Ok(None);
    }
    Ok(Some(Batch {
        configs,
        miss_probability: verdict.miss_probability,
    }))
}

/// Predictions and contexts for the decision tests here and in `risk`.
#[cfg(test)]
#[allow(clippy::unwrap_used)]
pub(super) mod fixtures {
    use super::*;
    use crate::models::surrogate::Estimate;

    const QOS: Qos = Qos {
        latency_p95_ms: 500.0,
        recovery_s: 180.0,
    };

    /// Paper-grid units, learned downtimes of 5 s in place and 30 s restarts, no shape rules.
    pub fn test_context<'a>(
        cfg: &'a DemeterConfig,
        current: JobConfig,
        rate_now: f64,
        measured: &'a HashSet<Shape>,
    ) -> Context<'a> {
        Context {
            qos: &QOS,
            cfg,
            reference: (24.0, 98_304.0),
            current,
            rate_now,
            downtime_s: [5.0, 30.0, 30.0, 5.0],
            overhead_s: [0.0; Downtime::COUNT],
            measured,
            carries: None,
            may_carry: None,
            violation_factor: 1.0,
            noise: MeasurementNoise::default(),
        }
    }

    pub fn scored(ctx: &Context<'_>, config: &str, capacity: f64) -> Scored {
        let config: JobConfig = config.parse().unwrap();
        let sure = |v: f64| Estimate {
            log_mean: v.ln(),
            log_sd: 0.01,
        };
        Scored::new(
            ctx,
            ConfigPrediction {
                config,
                rate: 10_000.0,
                capacity: sure(capacity),
                latency_p95_ms: sure(200.0),
                recovery_s: sure(60.0),
            },
        )
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    use super::fixtures::{scored, test_context};
    use crate::models::surrogate::Estimate;

    #[test]
    fn scale_ins_in_place_and_restarts_onto_the_taskmanagers_the_job_has_are_their_own_downtime_classes()
     {
        let c = |t: &str| -> JobConfig { t.parse().unwrap() };
        let from = c("p=4,slots=2,mem=2g,cpu=1,ckpt=10s");
        for (to, class) in [
            ("p=6,slots=2,mem=2g,cpu=1,ckpt=10s", Downtime::InPlace),
            (
                "p=2,slots=2,mem=2g,cpu=1,ckpt=10s",
                Downtime::InPlaceScaleIn,
            ),
            (
                "p=3,slots=2,mem=2g,cpu=1,ckpt=10s",
                Downtime::InPlaceScaleIn,
            ),
            ("p=2,slots=2,mem=2g,cpu=1,ckpt=30s", Downtime::RestartOnKept),
            ("p=4,slots=2,mem=2g,cpu=1,ckpt=30s", Downtime::RestartOnKept),
            ("p=6,slots=2,mem=2g,cpu=1,ckpt=30s", Downtime::Restart),
            ("p=4,slots=2,mem=3g,cpu=1,ckpt=10s", Downtime::Restart),
        ] {
            assert_eq!(Downtime::of(&from, &c(to)), class, "{to}");
        }
    }

    #[test]
    fn a_new_shape_earns_no_credit_over_a_rescale_of_the_current_one_to_the_same_cost() {
        // From 16 one-slot TaskManagers: 8 of the same shape (in place, the idle 8 stop) or 4
        // two-slot ones with twice the cores and memory each (through a savepoint) cost the
        // same. Paying the new shape's saving out over the shape dwell made it win; only a
        // cheaper shape earns that credit.
        let cfg = DemeterConfig::default();
        let current: JobConfig = "p=16,slots=1,mem=2048m,cpu=1,ckpt=10s".parse().unwrap();
        let measured: HashSet<Shape> = [
            shape_of(&current),
            shape_of(&"p=8,slots=2,mem=4096m,cpu=2,ckpt=10s".parse().unwrap()),
            shape_of(&"p=8,slots=2,mem=2048m,cpu=1,ckpt=10s".parse().unwrap()),
        ]
        .into_iter()
        .collect();
        let ctx = test_context(&cfg, current, 10_000.0, &measured);
        let candidates = vec![
            scored(&ctx, "p=16,slots=1,mem=2048m,cpu=1,ckpt=10s", 40_000.0),
            scored(&ctx, "p=8,slots=1,mem=2048m,cpu=1,ckpt=10s", 25_000.0),
            scored(&ctx, "p=8,slots=2,mem=4096m,cpu=2,ckpt=10s", 25_000.0),
        ];
        let verdict = best_move(&ctx, &candidates, false, Moves::Any);
        let chosen = verdict.chosen.unwrap();
        assert_eq!(chosen.index, 1, "{chosen:?}");
        assert_eq!(chosen.kind, ChangeKind::InPlace);
        assert_eq!(chosen.shape_credit, 0.0);

        // A shape that is cheaper at the same capacity earns its credit and wins.
        let mut cheaper = candidates.clone();
        cheaper.push(scored(
            &ctx,
            "p=8,slots=2,mem=2048m,cpu=1,ckpt=10s",
            25_000.0,
        ));
        let chosen = best_move(&ctx, &cheaper, false, Moves::Any).chosen.unwrap();
        assert_eq!(chosen.index, 3, "{chosen:?}");
        assert!(chosen.shape_credit > 0.0);

        // Restarts can be ruled out (a risk move tries in place first): only other
        // parallelisms of the current shape remain, the cheapest best; with a batch in flight,
        // only the current shape too.
        cheaper.push(scored(
            &ctx,
            "p=20,slots=1,mem=2048m,cpu=1,ckpt=10s",
            50_000.0,
        ));
        let chosen = best_move(&ctx, &cheaper, true, Moves::InPlace)
            .chosen
            .unwrap();
        assert_eq!((chosen.index, chosen.kind), (1, ChangeKind::InPlace));
        let only_restarts_or_growth = [cheaper[0], cheaper[2], cheaper[3], cheaper[4]];
        let chosen = best_move(&ctx, &only_restarts_or_growth, true, Moves::InPlace)
            .chosen
            .unwrap();
        assert_eq!((chosen.index, chosen.kind), (3, ChangeKind::InPlace));
        let chosen = best_move(&ctx, &cheaper, false, Moves::SameShape)
            .chosen
            .unwrap();
        assert_eq!(chosen.index, 1);
    }

    #[test]
    fn an_overspent_qos_budget_prices_a_restart_out() {
        // Halving the job's TaskManagers with a new checkpoint interval saves 0.25 of the safe
        // default per second: 900 over the hour, plus 2700 credited to the new shape over the
        // rest of the shape dwell. The restart costs ~180 s over the QoS (30 s down, 150 s
        // catching up on 2k/s of spare capacity), 1800 at the operator's price: it pays. At
        // five times the price it does not.
        let cfg = DemeterConfig::default();
        let current: JobConfig = "p=16,slots=1,mem=2048m,cpu=1,ckpt=10s".parse().unwrap();
        let to: JobConfig = "p=8,slots=1,mem=2048m,cpu=1,ckpt=30s".parse().unwrap();
        let measured: HashSet<Shape> = [shape_of(&current), shape_of(&to)].into_iter().collect();
        let mut ctx = test_context(&cfg, current, 10_000.0, &measured);
        let candidates = vec![
            scored(&ctx, "p=16,slots=1,mem=2048m,cpu=1,ckpt=10s", 40_000.0),
            scored(&ctx, "p=8,slots=1,mem=2048m,cpu=1,ckpt=30s", 12_000.0),
        ];
        let chosen = best_move(&ctx, &candidates, false, Moves::Any).chosen;
        assert_eq!(chosen.map(|c| c.index), Some(1), "{chosen:?}");
        ctx.violation_factor = 5.0;
        let verdict = best_move(&ctx, &candidates, false, Moves::Any);
        assert!(verdict.chosen.is_none(), "{:?}", verdict.chosen);
        let (_, why) = verdict.best_rejected.unwrap();
        assert!(why.contains("change costs"), "{why}");
    }

    #[test]
    fn a_batch_skips_a_configuration_one_more_measurement_cannot_settle() {
        let cfg = DemeterConfig::default();
        let c = |t: &str| -> JobConfig { t.parse().unwrap() };
        let borderline_config = c("p=12,slots=1,mem=4g,cpu=1,ckpt=30s");
        let measured: HashSet<Shape> = [shape_of(&borderline_config)].into();
        let current = c("p=24,slots=1,mem=4g,cpu=1,ckpt=10s");
        let predict = |config, recovery_s: f64, recovery_sd| ConfigPrediction {
            config,
            rate: 10_000.0,
            capacity: Estimate {
                log_mean: 20_000f64.ln(),
                log_sd: 0.02,
            },
            latency_p95_ms: Estimate {
                log_mean: 200f64.ln(),
                log_sd: 0.02,
            },
            recovery_s: Estimate {
                log_mean: recovery_s.ln(),
                log_sd: recovery_sd,
            },
        };
        // Measured often, its mean recovery on the 180 s bound: P(feasible) ≈ ½ for good.
        let borderline = predict(borderline_config, 180.0, 0.02);
        let unknown = predict(c("p=8,slots=2,mem=2g,cpu=2,ckpt=10s"), 150.0, 0.5);
        let room = ProfilingRoom {
            cpu_cores: 100.0,
            memory_mb: 1e6,
        };
        let batch_with = |noise| {
            let ctx = Context {
                noise,
                ..test_context(&cfg, current, 10_000.0, &measured)
            };
            let scored = [Scored::new(&ctx, borderline), Scored::new(&ctx, unknown)];
            profile_batch(&ctx, &scored, 2, room)
                .unwrap()
                .unwrap()
                .configs
        };

        let noisy = MeasurementNoise {
            latency_log_sd: 0.08,
            recovery_log_sd: 0.08,
        };
        assert_eq!(batch_with(noisy), vec![unknown.config]);
        // Without measurement noise one more run would settle it, so it is worth a copy.
        assert_eq!(
            batch_with(MeasurementNoise::default()),
            vec![unknown.config, borderline.config]
        );
    }
}
