//! The oracle's scheduling instance, built from what only the twin knows: the true curves, the
//! rate of every future second and the failure schedule.
//!
//! - Epochs of `epoch_s` seconds; an epoch's rate is its true maximum.
//! - Candidates: per epoch the `candidates_per_epoch` cheapest configurations that truly meet
//!   both QoS bounds (latency and recovery) at that rate; their union, widened by every other
//!   parallelism of each epoch's cheapest TaskManager shape (reachable in place), plus the
//!   configuration production starts in (`candidates.rs`). An epoch allows the candidates
//!   that meet the QoS at its rate; when none does, the most capable counts as meeting it.
//! - A change may only enter a configuration picked at the running maximum rate of a stretch
//!   starting at its epoch, and leave one picked for a stretch ending there: a stretch held in
//!   one configuration wants the cheapest ones for its maximum, so the DP skips the rest.
//! - A change at the boundary that starts epoch `e` is issued ahead of it, so that it is done
//!   at the boundary (at the very start for `e = 0`); the new configuration must meet the QoS
//!   at the higher of the two epochs' rates, and catch up the downtime's input at it. A change
//!   whose downtime or catch-up would overlap a failure's recovery is moved earlier, before the
//!   failure. Its cost is the allocation of both configurations during its steps (and of the
//!   new one when started early) beyond what holding the old one would have cost; it disrupts
//!   its downtime plus catch-up, at most the recovery QoS (a planned change never disrupts
//!   longer than a failure may).

use crate::models::space::JobConfig;
use crate::policy::ChangeKind;
use crate::twin::change;

use super::OracleSettings;
use super::candidates::{candidates, most_capable};
use super::dp::{Hold, Move, Problem, collect_moves};
pub use super::foresight::Foresight;

/// How a change is carried out in time.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Timing {
    /// Second at which the change is issued.
    pub issue_s: u64,
    /// Length of its steps (TaskManager start while running, then the downtime).
    pub steps_s: f64,
    pub downtime_s: f64,
    pub catchup_s: f64,
    /// The rate it must carry meanwhile (the higher of the two epochs').
    pub rate: f64,
}

/// The steps of one change, independent of when it happens.
#[derive(Debug, Clone, Copy)]
struct Steps {
    total_s: f64,
    downtime_s: f64,
    /// ∫ normalised allocation over the steps.
    allocation: f64,
}

/// Slack between a change's planned end and the boundary or failure it must precede.
const MARGIN_S: f64 = 2.0;
/// The policy's first chance to act (after the first observed second).
const FIRST_DECISION_S: u64 = 1;

#[derive(Debug)]
pub struct Instance<'a> {
    world: &'a Foresight,
    epoch_s: u64,
    /// Epoch e covers [starts[e], starts[e + 1]).
    starts: Vec<u64>,
    rates: Vec<f64>,
    pub configs: Vec<JobConfig>,
    unit_cost: Vec<f64>,
    catchup_capacity: Vec<f64>,
    most_capable: usize,
    initial: usize,
    allowed: Vec<Vec<usize>>,
    /// Whether a configuration meets the QoS at each epoch's rate (in an epoch where none
    /// does, the most capable counts as meeting it: it is the best achievable).
    ok: Vec<Vec<bool>>,
    /// Epochs whose rate no configuration carries within the QoS.
    hopeless: Vec<bool>,
    holds: Vec<Vec<Hold>>,
    steps: Vec<Steps>,
    /// Every possible change between allowed configurations, computed once (the λ search
    /// solves the DP many times): `moves[e][j]` lists (from, move) into the j-th configuration
    /// allowed in epoch e, from those allowed in e − 1 (for e = 0: the initial one).
    moves: Vec<Vec<Vec<(usize, Move)>>>,
    /// Position of a configuration in `allowed[e]` (`u32::MAX`: not allowed).
    position: Vec<Vec<u32>>,
    /// Whether a change at the start of epoch e may enter a configuration.
    enter: Vec<Vec<bool>>,
}

impl<'a> Instance<'a> {
    pub fn new(world: &'a Foresight, settings: &OracleSettings, initial: JobConfig) -> Self {
        let seconds = world.rates.len() as u64;
        let epoch_s = settings.epoch_s.max(1);
        let starts: Vec<u64> = (0..seconds.div_ceil(epoch_s))
            .map(|e| e * epoch_s)
            .chain(std::iter::once(seconds))
            .collect();
        let rates: Vec<f64> = starts
            .windows(2)
            .map(|w| {
                world.rates[w[0] as usize..w[1] as usize]
                    .iter()
                    .copied()
                    .fold(0.0, f64::max)
            })
            .collect();
        let (configs, picks) = candidates(world, settings, &rates, initial);
        let initial = configs.binary_search(&initial).unwrap_or(0);
        let capacity: Vec<f64> = configs.iter().map(|c| world.truth.capacity(c)).collect();
        let most_capable = most_capable(world, &configs)
            .and_then(|c| configs.binary_search(&c).ok())
            .unwrap_or(initial);
        let mut allowed = Vec::with_capacity(rates.len());
        let mut oks = Vec::with_capacity(rates.len());
        let mut hopeless = Vec::with_capacity(rates.len());
        let mut holds = Vec::with_capacity(rates.len());
        for (e, &rate) in rates.iter().enumerate() {
            let len = (starts[e + 1] - starts[e]) as f64;
            let mut ok: Vec<bool> = configs.iter().map(|c| world.feasible(c, rate)).collect();
            hopeless.push(!ok.iter().any(|ok| *ok));
            if !ok.iter().any(|ok| *ok) {
                // Nothing meets the QoS: the most capable candidate, which limits the damage,
                // is the best achievable and counts as meeting it.
                ok[most_capable] = true;
            }
            let list: Vec<usize> = (0..configs.len())
                .filter(|&i| ok[i] || i == initial)
                .collect();
            allowed.push(list);
            holds.push(
                configs
                    .iter()
                    .zip(&ok)
                    .map(|(c, ok)| Hold {
                        cost: world.cost(c) * len,
                        violates: !ok,
                    })
                    .collect(),
            );
            oks.push(ok);
        }
        let mut steps = Vec::with_capacity(configs.len() * configs.len());
        for from in &configs {
            for to in &configs {
                let kind = ChangeKind::between(from, to);
                let (_, plan) = change::plan(&world.truth, &world.space, kind, *from, *to);
                steps.push(Steps {
                    total_s: plan.iter().map(|s| s.duration).sum(),
                    downtime_s: plan
                        .iter()
                        .filter(|s| !s.processing)
                        .map(|s| s.duration)
                        .sum(),
                    allocation: plan.iter().map(|s| world.cost(&s.alloc) * s.duration).sum(),
                });
            }
        }
        let position = allowed
            .iter()
            .map(|list: &Vec<usize>| {
                let mut at = vec![u32::MAX; configs.len()];
                for (i, &c) in list.iter().enumerate() {
                    at[c] = i as u32;
                }
                at
            })
            .collect();
        // A change at the start of epoch e begins a stretch e..e' held in one configuration,
        // and one at the start of e + 1 ends a stretch e''..e. The configurations worth
        // entering (leaving) are those picked at the running maximum rate of such a stretch
        // forwards (backwards) — few distinct values — not every candidate allowed in e.
        let index = |c: &JobConfig| configs.binary_search(c).ok();
        let stretches = |order: &mut dyn Iterator<Item = usize>| {
            let mut worth = vec![false; configs.len()];
            let mut running = f64::NEG_INFINITY;
            for e in order {
                if rates[e] > running {
                    running = rates[e];
                    for i in picks[e].iter().filter_map(index) {
                        worth[i] = true;
                    }
                }
            }
            worth
        };
        let enter: Vec<Vec<bool>> = (0..rates.len())
            .map(|e| stretches(&mut (e..rates.len())))
            .collect();
        let leave: Vec<Vec<bool>> = (0..rates.len())
            .map(|e| {
                let mut worth = stretches(&mut (0..=e).rev());
                // Held since the start without being entered.
                worth[initial] = true;
                worth
            })
            .collect();
        let mut instance = Instance {
            world,
            epoch_s,
            starts,
            rates,
            unit_cost: configs.iter().map(|c| world.cost(c)).collect(),
            catchup_capacity: capacity
                .iter()
                .map(|c| c * world.truth.catchup_efficiency)
                .collect(),
            most_capable,
            configs,
            initial,
            allowed,
            ok: oks,
            hopeless,
            holds,
            steps,
            moves: Vec::new(),
            position,
            enter,
        };
        instance.moves = (0..instance.rates.len())
            .map(|e| {
                let from: &[usize] = if e == 0 {
                    std::slice::from_ref(&instance.initial)
                } else {
                    &instance.allowed[e - 1]
                };
                let from: Vec<usize> = from
                    .iter()
                    .copied()
                    .filter(|&a| e == 0 || leave[e - 1][a])
                    .collect();
                instance.allowed[e]
                    .iter()
                    .map(|&b| {
                        if !instance.enter[e][b] {
                            return Vec::new();
                        }
                        from.iter()
                            .filter(|&&a| a != b)
                            .filter_map(|&a| Some((a, instance.compute_move(e, a, b)?)))
                            .collect()
                    })
                    .collect()
            })
            .collect();
        instance
    }

    pub fn epoch_s(&self) -> u64 {
        self.epoch_s
    }

    /// The true maximum rate of every epoch.
    pub fn rates(&self) -> &[f64] {
        &self.rates
    }

    pub fn epoch_start(&self, epoch: usize) -> u64 {
        self.starts[epoch]
    }

    /// When and how long the change `from` → `to` at the boundary starting `epoch` runs; None
    /// when the new configuration could not catch up, or would disrupt longer than the
    /// recovery QoS allows a failure to.
    pub fn timing(&self, epoch: usize, from: usize, to: usize) -> Option<Timing> {
        let steps = self.steps[from * self.configs.len() + to];
        let rate = if epoch == 0 {
            self.rates[0]
        } else {
            self.rates[epoch - 1].max(self.rates[epoch])
        };
        let spare = self.catchup_capacity[to] - rate;
        let epoch_len = (self.starts[epoch + 1] - self.starts[epoch]) as f64;
        // Overloaded whatever runs: moving to the most capable configuration limits the
        // damage, however long its catch-up (at most the epoch) takes.
        let limits_damage = to == self.most_capable && self.hopeless[epoch];
        let catchup_s = if spare > 0.0 {
            (rate * steps.downtime_s / spare).min(epoch_len)
        } else {
            epoch_len
        };
        if !limits_damage
            && (spare <= 0.0 || steps.downtime_s + catchup_s > self.world.qos.recovery_s)
        {
            return None;
        }
        let busy = steps.total_s + catchup_s + MARGIN_S;
        let issue_s = if epoch == 0 {
            FIRST_DECISION_S
        } else {
            let boundary = self.starts[epoch] as f64;
            let earliest = self.starts[epoch - 1] as f64;
            let planned = (boundary - steps.total_s - MARGIN_S).floor().max(earliest);
            self.before_failures(planned, busy, earliest) as u64
        };
        Some(Timing {
            issue_s,
            steps_s: steps.total_s,
            downtime_s: steps.downtime_s,
            catchup_s,
            rate,
        })
    }

    /// `start`, or earlier (not before `earliest`) when `[start, start + busy)` overlaps a
    /// failure's recovery: a change and a failure stacked on each other disrupt both.
    fn before_failures(&self, start: f64, busy: f64, earliest: f64) -> f64 {
        let Some(every) = self.world.failures_every_s.filter(|e| *e > 0) else {
            return start;
        };
        let (every, recovery) = (every as f64, self.world.qos.recovery_s);
        let first = ((start - recovery) / every).floor().max(1.0) as u64;
        let last = ((start + busy) / every).ceil() as u64;
        for k in first..=last {
            let failure = k as f64 * every;
            if start < failure + recovery && failure < start + busy {
                let earlier = (failure - busy).floor();
                return if earlier >= earliest { earlier } else { start };
            }
        }
        start
    }
}

impl Problem for Instance<'_> {
    fn epochs(&self) -> usize {
        self.rates.len()
    }

    fn configs(&self) -> usize {
        self.configs.len()
    }

    fn initial(&self) -> usize {
        self.initial
    }

    fn allowed(&self, epoch: usize) -> &[usize] {
        &self.allowed[epoch]
    }

    fn hold(&self, epoch: usize, config: usize) -> Hold {
        self.holds[epoch][config]
    }

    fn may_enter(&self, epoch: usize, config: usize) -> bool {
        self.enter[epoch][config]
    }

    fn change(&self, epoch: usize, from: usize, to: usize) -> Option<Move> {
        if !self.enter[epoch][to] {
            return None;
        }
        self.compute_move(epoch, from, to)
    }

    fn moves_into<'s>(
        &'s self,
        epoch: usize,
        to: usize,
        sources: &[usize],
        scratch: &'s mut Vec<(usize, Move)>,
    ) -> &'s [(usize, Move)] {
        let j = self.position[epoch][to];
        let served = (epoch == 0 && sources == [self.initial])
            || (epoch > 0 && sources == self.allowed[epoch - 1].as_slice());
        if j != u32::MAX && served {
            return &self.moves[epoch][j as usize];
        }
        collect_moves(self, epoch, to, sources, scratch)
    }
}

impl Instance<'_> {
    fn compute_move(&self, epoch: usize, from: usize, to: usize) -> Option<Move> {
        let timing = self.timing(epoch, from, to)?;
        let steps = self.steps[from * self.configs.len() + to];
        // Actual allocation over the change's span vs the old configuration before the
        // boundary and the new one after it (what the holds already charge).
        let boundary = self.starts[epoch] as f64;
        let issue = timing.issue_s as f64;
        let (a, b) = (self.unit_cost[from], self.unit_cost[to]);
        let (w0, w1) = (issue.min(boundary), (issue + steps.total_s).max(boundary));
        let actual = a * (issue - w0) + steps.allocation + b * (w1 - issue - steps.total_s);
        let charged = a * (boundary - w0) + b * (w1 - boundary);
        // Feasibility is monotone in the rate: meeting the QoS at the higher of the two
        // epochs' rates is meeting it in both.
        let violates = !(self.ok[epoch][to] && (epoch == 0 || self.ok[epoch - 1][to]));
        Some(Move {
            cost: actual - charged,
            disruption_s: timing.downtime_s + timing.catchup_s,
            violates,
        })
    }
}
