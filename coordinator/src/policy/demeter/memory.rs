//! What the policy remembers of production and profiling, as model observations.
//!
//! Every second of production says something (capacity through rate ÷ busy fraction, latency
//! at that rate), but a GP's cost grows with n² to n³, so production seconds are aggregated
//! into windows — one configuration, a steady rate, at most `window_s` long — and the windows
//! are thinned to a bounded set that keeps coverage: a (configuration, rate band) cell holds
//! at most a few windows, the newest, and when the memory is full the most crowded cell loses
//! its oldest. Profiling and recovery observations (they carry recovery times, which
//! production rarely does) are kept apart and only dropped oldest-first beyond their own cap.

use std::collections::{HashMap, HashSet, VecDeque};

use crate::models::observations::Observation;
use crate::models::space::JobConfig;
use crate::policy::JobTick;

/// Windows with fewer ticks than this share of `window_s` (and fewer than 3) are too noisy to
/// keep: 10 of 60 at the defaults.
const MIN_WINDOW_SHARE: f64 = 1.0 / 6.0;
/// Windows per (configuration, rate band) cell before the oldest is replaced.
const PER_CELL: usize = 3;
/// Rate bands are this fraction of the space's rate scale wide.
const BAND_FRACTION: f64 = 0.04;

#[derive(Debug, Clone)]
struct Window {
    config: JobConfig,
    start_s: f64,
    rates: Vec<f64>,
    busy: Vec<f64>,
    latencies: Vec<f64>,
    cpu_sum: f64,
    memory_sum: f64,
}

impl Window {
    fn new(config: JobConfig, start_s: f64) -> Self {
        Window {
            config,
            start_s,
            rates: Vec::new(),
            busy: Vec::new(),
            latencies: Vec::new(),
            cpu_sum: 0.0,
            memory_sum: 0.0,
        }
    }

    fn mean_rate(&self) -> f64 {
        mean(&self.rates)
    }

    /// One row: mean rate, busy and resources; the median of the per-second p95 latencies
    /// (typical latency at the typical rate; spikes are the forecast's business).
    fn observation(&self, min_ticks: usize) -> Option<Observation> {
        if self.rates.len() < min_ticks {
            return None;
        }
        let n = self.rates.len() as f64;
        Some(Observation {
            config: self.config,
            rate: self.mean_rate(),
            busy_fraction: (self.busy.len() * 2 >= self.rates.len()).then(|| mean(&self.busy)),
            latency_p95_ms: median(&self.latencies),
            recovery_s: None,
            cpu_cores: self.cpu_sum / n,
            memory_mb: self.memory_sum / n,
        })
    }
}

#[derive(Debug, Clone)]
struct Entry {
    observation: Observation,
    at_s: f64,
    cell: (JobConfig, u32),
}

/// What a rescale in place keeps: slots, memory and CPU per TaskManager, and the checkpoint
/// interval. The policy trusts the surrogate along the parallelism of a measured shape (the
/// physics of scaling is the best-known part), not across shapes: per-slot resources and the
/// checkpoint interval interact in ways a few prior scalars cannot pin down without a
/// measurement (in tests, confounded CPU and memory effects and an underestimated checkpoint
/// cost made unmeasured shapes look confidently feasible).
pub type Shape = (u32, u32, u32, u32);

pub fn shape_of(config: &JobConfig) -> Shape {
    (
        config.slots_per_tm,
        config.tm_memory_mb,
        config.tm_cpu_millis,
        config.checkpoint_interval_s,
    )
}

/// Bounded, aggregated observations.
#[derive(Debug, Clone)]
pub struct Memory {
    window_s: f64,
    rate_change: f64,
    band_width: f64,
    max_production: usize,
    max_profiling: usize,
    window: Option<Window>,
    production: Vec<Entry>,
    profiling: VecDeque<Observation>,
    /// Latest (latency, busy) per configuration: what a recovery measurement is paired with.
    latest: HashMap<JobConfig, (f64, Option<f64>)>,
    /// Shapes ever measured (kept when their observations are thinned away).
    measured: HashSet<Shape>,
    changed: bool,
}

impl Memory {
    pub fn new(
        window_s: u32,
        rate_change: f64,
        rate_scale: f64,
        max_production: usize,
        max_profiling: usize,
    ) -> Self {
        Memory {
            window_s: f64::from(window_s),
            rate_change,
            band_width: (rate_scale * BAND_FRACTION).max(1.0),
            max_production,
            max_profiling,
            window: None,
            production: Vec::new(),
            profiling: VecDeque::new(),
            latest: HashMap::new(),
            measured: HashSet::new(),
            changed: false,
        }
    }

    /// Adds one production second. `steady` is false while the job catches up after a restart
    /// (its latency then says nothing about the configuration at this rate).
    pub fn record_tick(&mut self, now_s: f64, tick: &JobTick, steady: bool) {
        let usable = steady && tick.observation().is_some();
        let fits = self.window.as_ref().is_some_and(|w| {
            let mean = w.mean_rate();
            w.config == tick.config
                && now_s - w.start_s < self.window_s
                && (tick.rate - mean).abs() <= self.rate_change * mean.max(1.0)
        });
        if !usable || !fits {
            self.close_window();
        }
        if !usable {
            return;
        }
        let window = self
            .window
            .get_or_insert_with(|| Window::new(tick.config, now_s));
        window.rates.push(tick.rate);
        if let Some(busy) = tick.busy_fraction {
            window.busy.push(busy);
        }
        if let Some(latency) = tick.latency_p95_ms {
            window.latencies.push(latency);
        }
        window.cpu_sum += tick.cpu_cores;
        window.memory_sum += tick.memory_mb;
    }

    /// Ends the current window (if long enough it becomes an observation).
    pub fn close_window(&mut self) {
        let Some(window) = self.window.take() else {
            return;
        };
        let min_ticks = ((self.window_s * MIN_WINDOW_SHARE).round() as usize).max(3);
        if let Some(observation) = window.observation(min_ticks) {
            self.latest.insert(
                observation.config,
                (observation.latency_p95_ms, observation.busy_fraction),
            );
            self.insert_production(observation, window.start_s);
        }
    }

    fn insert_production(&mut self, observation: Observation, at_s: f64) {
        let band = (observation.rate / self.band_width).floor().max(0.0) as u32;
        let cell = (observation.config, band);
        self.measured.insert(shape_of(&observation.config));
        let entry = Entry {
            observation,
            at_s,
            cell,
        };
        self.changed = true;
        let in_cell: Vec<usize> = (0..self.production.len())
            .filter(|&i| self.production[i].cell == cell)
            .collect();
        if in_cell.len() >= PER_CELL
            && let Some(&oldest) = in_cell
                .iter()
                .min_by(|&&a, &&b| self.production[a].at_s.total_cmp(&self.production[b].at_s))
        {
            self.production[oldest] = entry;
            return;
        }
        self.production.push(entry);
        if self.production.len() > self.max_production {
            self.drop_most_crowded();
        }
    }

    /// Removes the oldest window of the most crowded cell (ties: the cell whose oldest is
    /// oldest), so rare (configuration, rate) combinations survive.
    fn drop_most_crowded(&mut self) {
        let mut cells: HashMap<(JobConfig, u32), (usize, usize)> = HashMap::new();
        for (i, e) in self.production.iter().enumerate() {
            let slot = cells.entry(e.cell).or_insert((0, i));
            slot.0 += 1;
            if e.at_s < self.production[slot.1].at_s {
                slot.1 = i;
            }
        }
        let victim = cells
            .values()
            .max_by(|a, b| {
                a.0.cmp(&b.0).then(
                    self.production[b.1]
                        .at_s
                        .total_cmp(&self.production[a.1].at_s),
                )
            })
            .map(|&(_, oldest)| oldest);
        if let Some(i) = victim {
            self.production.swap_remove(i);
        }
    }

    /// Adds observations from profiling copies or measured recoveries.
    pub fn record_profiled(&mut self, observations: &[Observation]) {
        for o in observations {
            if !(o.rate.is_finite() && o.latency_p95_ms.is_finite() && o.latency_p95_ms > 0.0) {
                continue;
            }
            self.measured.insert(shape_of(&o.config));
            self.profiling.push_back(*o);
            self.changed = true;
        }
        while self.profiling.len() > self.max_profiling {
            self.profiling.pop_front();
        }
    }

    /// The newest window's latency and busy fraction of `config`, if any.
    pub fn latest_of(&self, config: &JobConfig) -> Option<(f64, Option<f64>)> {
        self.latest.get(config).copied()
    }

    pub fn measured_shapes(&self) -> &HashSet<Shape> {
        &self.measured
    }

    /// Everything the model should be fitted on, production first.
    pub fn observations(&self) -> Vec<Observation> {
        self.production
            .iter()
            .map(|e| e.observation)
            .chain(self.profiling.iter().copied())
            .collect()
    }

    /// True once since the last call if anything was added.
    pub fn take_changed(&mut self) -> bool {
        std::mem::take(&mut self.changed)
    }
}

fn mean(values: &[f64]) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    values.iter().sum::<f64>() / values.len() as f64
}

fn median(values: &[f64]) -> f64 {
    crate::models::physics::median(values)
}
