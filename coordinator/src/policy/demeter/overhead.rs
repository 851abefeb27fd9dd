//! The seconds over the QoS a change costs beyond what its price models, learned per kind of
//! change from the policy's own changes.
//!
//! A change is priced as its downtime plus the catch-up of the backlog built meanwhile (see
//! `choose::price`). What a job then shows is more: its p95 latency lags the drain by its
//! window, restored tasks warm up, an in-place rescale waits out Flink's cooldown. In the twin
//! the seconds a change spent over the QoS were about twice the modelled ones once in-place
//! scale-ins made changes short, and the policy, pricing them too low, changed half as often
//! again. So after every change the policy compares the seconds it spent over the QoS (from
//! the order until the job is no longer catching up) with the modelled ones and keeps a smoothed
//! residual per [`Downtime`] class, which the price adds.

use super::choose::Downtime;

/// Weight of the newest residual.
const SMOOTHING: f64 = 0.3;
/// Longest gap between ticks counted as seconds over the QoS (a stalled feed is not a change's
/// fault).
const MAX_TICK_S: f64 = 60.0;

#[derive(Debug, Clone, Copy)]
struct Window {
    class: Downtime,
    modelled_s: f64,
    over_s: f64,
    last_s: Option<f64>,
    /// A failure fell into the window: its seconds are not the change's.
    spoiled: bool,
}

#[derive(Debug, Clone, Default)]
pub struct ChangeOverhead {
    extra_s: [f64; Downtime::COUNT],
    window: Option<Window>,
}

impl ChangeOverhead {
    /// Learned extra seconds over the QoS per [`Downtime`] class.
    pub fn extra_s(&self) -> [f64; Downtime::COUNT] {
        self.extra_s
    }

    /// A change of `class` was ordered, modelled at `modelled_s` seconds over the QoS (None:
    /// nothing to compare with). An open window is abandoned: two changes' seconds cannot be
    /// told apart.
    pub fn ordered(&mut self, class: Downtime, modelled_s: Option<f64>) {
        self.window = modelled_s
            .filter(|s| s.is_finite())
            .map(|modelled_s| Window {
                class,
                modelled_s,
                over_s: 0.0,
                last_s: None,
                spoiled: false,
            });
    }

    /// One tick while the window may be open: `over` the QoS or not; `failure` when the job is
    /// down outside a change of the policy's own.
    pub fn on_tick(&mut self, now_s: f64, over: bool, failure: bool) {
        let Some(w) = self.window.as_mut() else {
            return;
        };
        let dt = w
            .last_s
            .map_or(1.0, |last| (now_s - last).clamp(0.0, MAX_TICK_S));
        w.last_s = Some(now_s);
        if over {
            w.over_s += dt;
        }
        w.spoiled |= failure;
    }

    /// The change failed: what it cost says nothing about a change that works.
    pub fn abandon(&mut self) {
        self.window = None;
    }

    /// The job no longer catches up after the change: learn its residual.
    pub fn settled(&mut self) {
        let Some(w) = self.window.take() else {
            return;
        };
        if w.spoiled {
            return;
        }
        let slot = &mut self.extra_s[w.class as usize];
        *slot += SMOOTHING * (w.over_s - w.modelled_s - *slot);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn change(o: &mut ChangeOverhead, modelled: f64, over_ticks: u32, ticks: u32, failure: bool) {
        o.ordered(Downtime::InPlaceScaleIn, Some(modelled));
        for t in 0..ticks {
            o.on_tick(f64::from(t), t < over_ticks, failure && t == 3);
        }
        o.settled();
    }

    #[test]
    fn learns_the_seconds_a_change_costs_beyond_the_model() {
        let mut o = ChangeOverhead::default();
        change(&mut o, 10.0, 30, 60, false);
        let learned = o.extra_s()[Downtime::InPlaceScaleIn as usize];
        assert!((learned - 6.0).abs() < 1e-9, "{learned}");
        for _ in 0..30 {
            change(&mut o, 10.0, 30, 60, false);
        }
        let learned = o.extra_s()[Downtime::InPlaceScaleIn as usize];
        assert!((learned - 20.0).abs() < 0.01, "{learned}");
        assert_eq!(
            o.extra_s()[Downtime::Restart as usize],
            0.0,
            "classes apart"
        );
        // A model that overestimates learns a negative residual.
        for _ in 0..30 {
            change(&mut o, 40.0, 30, 60, false);
        }
        assert!(o.extra_s()[Downtime::InPlaceScaleIn as usize] < -9.0);
    }

    #[test]
    fn failures_failed_changes_and_unmodelled_ones_teach_nothing() {
        let mut o = ChangeOverhead::default();
        change(&mut o, 10.0, 60, 60, true);
        o.ordered(Downtime::InPlace, Some(5.0));
        o.on_tick(0.0, true, false);
        o.abandon();
        o.settled();
        o.ordered(Downtime::InPlace, None);
        o.on_tick(0.0, true, false);
        o.settled();
        o.ordered(Downtime::InPlace, Some(f64::INFINITY));
        o.settled();
        assert_eq!(o.extra_s(), [0.0; Downtime::COUNT]);
    }
}
