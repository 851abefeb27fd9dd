//! What production's last `health_window_s` says about its health, second by second: whether the job is
//! catching up after a stop (its latency then says nothing about the configuration), whether
//! latency is observed over the QoS or the backlog grows (a QoS risk the model may have
//! missed), and how long a failure took to recover from — production failures are recovery
//! measurements the model gets for free.

use std::collections::VecDeque;

use crate::models::space::JobConfig;
use crate::policy::{JobPhase, JobTick};

/// Caught up once the backlog is below this many seconds of input.
const CAUGHT_UP_S: f64 = 2.0;
/// The backlog "grows" when it rose by this fraction of a minute's input over the last minute.
const GROWTH_FRACTION: f64 = 0.03;

/// What one tick told the policy.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TickFacts {
    /// Running and not catching up: its numbers describe the configuration at this rate.
    pub steady: bool,
    /// A failure's recovery ended: (configuration, mean rate meanwhile, seconds).
    pub recovery: Option<(JobConfig, f64, f64)>,
}

#[derive(Debug, Clone, Copy)]
struct Recent {
    t_s: f64,
    over: bool,
    backlog: f64,
    rate: f64,
}

#[derive(Debug, Clone, Copy)]
struct Failure {
    config: JobConfig,
    start_s: f64,
    rate_sum: f64,
    ticks: f64,
}

#[derive(Debug, Clone)]
pub struct Watch {
    latency_qos_ms: f64,
    /// Seconds of recent history kept.
    recent_s: f64,
    /// A catch-up longer than this is an overload, not a catch-up: its seconds count as steady.
    max_settle_s: f64,
    /// While catching up, the backlog is compared with its value this many seconds before (half
    /// the history): if it did not shrink, the job is overloaded rather than catching up.
    drain_probe_s: f64,
    recent: VecDeque<Recent>,
    /// Catching up since this time (after a stop of any kind).
    settling_since: Option<f64>,
    /// (time, backlog) of the last drain probe while catching up.
    probe: Option<(f64, f64)>,
    failure: Option<Failure>,
}

impl Watch {
    pub fn new(latency_qos_ms: f64, recent_s: u32, max_settle_s: u64) -> Self {
        let recent_s = f64::from(recent_s.max(1));
        Watch {
            latency_qos_ms,
            recent_s,
            max_settle_s: max_settle_s as f64,
            drain_probe_s: recent_s / 2.0,
            recent: VecDeque::new(),
            settling_since: None,
            probe: None,
            failure: None,
        }
    }

    /// `expected_down`: a reconfiguration is in flight, so a stop is ours, not a failure.
    pub fn on_tick(&mut self, now_s: f64, tick: &JobTick, expected_down: bool) -> TickFacts {
        let mut facts = TickFacts {
            steady: false,
            recovery: None,
        };
        if tick.phase == JobPhase::Down {
            self.settling_since = Some(now_s);
            self.probe = None;
            self.recent.clear();
            if expected_down {
                self.failure = None;
            } else if self.failure.is_none() {
                self.failure = Some(Failure {
                    config: tick.config,
                    start_s: now_s - 1.0,
                    rate_sum: 0.0,
                    ticks: 0.0,
                });
            }
            self.count_failure_rate(tick.rate);
            return facts;
        }
        self.count_failure_rate(tick.rate);
        if let Some(since) = self.settling_since {
            let caught_up = tick.backlog <= (tick.rate * CAUGHT_UP_S).max(1.0);
            let (probe_s, probe_backlog) = *self.probe.get_or_insert((now_s, tick.backlog));
            let mut not_draining = false;
            if now_s - probe_s >= self.drain_probe_s {
                not_draining = tick.backlog >= probe_backlog;
                self.probe = Some((now_s, tick.backlog));
            }
            // A job's p95 is taken over a window of seconds, so it stays over the QoS for that
            // long after the backlog drained: the catch-up ends when both are back, or it would
            // read as a risk the stop itself caused (and the next move cause the next one).
            let latency_back = tick.latency_p95_ms.is_none_or(|l| l <= self.latency_qos_ms);
            let done = now_s - since > self.max_settle_s
                || (caught_up && latency_back)
                || (!caught_up && not_draining);
            if caught_up || done {
                // A failure's recovery is the time until the backlog is drained.
                if let Some(f) = self.failure.take() {
                    let rate = f.rate_sum / f.ticks.max(1.0);
                    facts.recovery = Some((f.config, rate, now_s - f.start_s));
                }
            }
            if !done {
                return facts;
            }
            self.probe = None;
            self.settling_since = None;
        }
        facts.steady = true;
        self.recent.push_back(Recent {
            t_s: now_s,
            over: tick.latency_p95_ms.is_some_and(|l| l > self.latency_qos_ms),
            backlog: tick.backlog,
            rate: tick.rate,
        });
        while self
            .recent
            .front()
            .is_some_and(|r| r.t_s <= now_s - self.recent_s)
        {
            self.recent.pop_front();
        }
        facts
    }

    fn count_failure_rate(&mut self, rate: f64) {
        if let Some(f) = &mut self.failure {
            f.rate_sum += rate;
            f.ticks += 1.0;
        }
    }

    /// Seconds over the latency QoS in the health window of steady running.
    pub fn seconds_over(&self) -> u32 {
        self.recent.iter().filter(|r| r.over).count() as u32
    }

    /// The backlog rose over most of the last minute: the job is not keeping up.
    pub fn backlog_growing(&self) -> bool {
        let (Some(first), Some(last)) = (self.recent.front(), self.recent.back()) else {
            return false;
        };
        if last.t_s - first.t_s < 0.75 * self.recent_s {
            return false;
        }
        let mean_rate = self.recent.iter().map(|r| r.rate).sum::<f64>() / self.recent.len() as f64;
        let minute_input = mean_rate * (last.t_s - first.t_s);
        last.backlog - first.backlog > GROWTH_FRACTION * minute_input
            && last.backlog > mean_rate * CAUGHT_UP_S
    }

    pub fn catching_up(&self) -> bool {
        self.settling_since.is_some()
    }
}
