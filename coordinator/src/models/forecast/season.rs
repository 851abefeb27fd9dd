//! Seasonality: a coarse history of bucket levels, period detection by autocorrelation, and the
//! seasonal profile by classical decomposition. A period is only used once one and a half cycles
//! have been seen ([`MIN_CYCLES`]); before that the forecaster runs without a season (it degrades
//! to level + trend instead of guessing a profile from less than one cycle).

use std::collections::VecDeque;

/// Levels averaged over `resolution_s`, the most recent `capacity` of them, NaN where missing.
#[derive(Debug, Clone)]
pub struct CoarseHistory {
    resolution_s: u64,
    capacity: usize,
    /// Absolute index (`t / resolution_s`) of `values[0]`.
    first_index: u64,
    values: VecDeque<f64>,
    open: Option<(u64, f64, u32)>,
}

impl CoarseHistory {
    pub fn new(resolution_s: u64, capacity: usize) -> Self {
        Self {
            resolution_s: resolution_s.max(1),
            capacity: capacity.max(4),
            first_index: 0,
            values: VecDeque::new(),
            open: None,
        }
    }

    pub fn resolution_s(&self) -> u64 {
        self.resolution_s
    }

    /// Adds a level observed at `t_s`; returns true when this closed a coarse slot.
    pub fn push(&mut self, t_s: u64, level: f64) -> bool {
        let index = t_s / self.resolution_s;
        match self.open {
            Some((open, sum, n)) if open == index => {
                self.open = Some((open, sum + level, n + 1));
                false
            }
            Some((open, _, _)) if index < open => false,
            Some((open, sum, n)) => {
                self.store(open, sum / f64::from(n));
                self.open = Some((index, level, 1));
                true
            }
            None => {
                self.open = Some((index, level, 1));
                false
            }
        }
    }

    fn store(&mut self, index: u64, value: f64) {
        if self.values.is_empty() {
            self.first_index = index;
        }
        let next = self.first_index + self.values.len() as u64;
        // A gap longer than the whole history: start afresh rather than push NaNs.
        if index.saturating_sub(next) >= self.capacity as u64 {
            self.values.clear();
            self.first_index = index;
        } else {
            for _ in next..index {
                self.values.push_back(f64::NAN);
            }
        }
        self.values.push_back(value);
        while self.values.len() > self.capacity {
            self.values.pop_front();
            self.first_index += 1;
        }
    }

    pub fn len(&self) -> usize {
        self.values.len()
    }

    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    pub fn first_index(&self) -> u64 {
        self.first_index
    }

    /// The history with missing slots linearly interpolated (ends held flat).
    pub fn filled(&self) -> Vec<f64> {
        let mut out: Vec<f64> = self.values.iter().copied().collect();
        let known: Vec<usize> = (0..out.len()).filter(|&i| out[i].is_finite()).collect();
        let (Some(&first), Some(&last)) = (known.first(), known.last()) else {
            return Vec::new();
        };
        for i in 0..first {
            out[i] = out[first];
        }
        for i in last + 1..out.len() {
            out[i] = out[last];
        }
        for pair in known.windows(2) {
            let (a, b) = (pair[0], pair[1]);
            for i in a + 1..b {
                let w = (i - a) as f64 / (b - a) as f64;
                out[i] = out[a] + w * (out[b] - out[a]);
            }
        }
        out
    }
}

/// The lag (in slots) with the strongest autocorrelation of first differences (differencing
/// removes the trend that would otherwise dominate), among local maxima in
/// `[min_lag, max_lag]` with [`MIN_CYCLES`] cycles in `values` and correlation ≥ `min_acf`. A
/// divisor of the best lag within 90 % of its correlation wins, so a multiple of the true period
/// is not picked.
pub fn detect_period(
    values: &[f64],
    min_lag: usize,
    max_lag: usize,
    min_acf: f64,
) -> Option<(usize, f64)> {
    if values.len() <= DETECT_FULL_RESOLUTION_UP_TO {
        return detect_at_full_resolution(values, min_lag, max_lag, min_acf)
            .map(|(lag, r)| (lag.round() as usize, r));
    }
    // Long histories: search on block means (the cost is quadratic in the length); the peak's
    // centre is fractional, so the lag keeps full resolution.
    let block = values.len().div_ceil(DETECT_FULL_RESOLUTION_UP_TO);
    let coarse: Vec<f64> = values
        .chunks(block)
        .map(|c| c.iter().sum::<f64>() / c.len() as f64)
        .collect();
    let (coarse_lag, r) =
        detect_at_full_resolution(&coarse, min_lag.div_ceil(block), max_lag / block, min_acf)?;
    let lag = (coarse_lag * block as f64).round() as usize;
    (lag >= min_lag && lag <= max_lag && enough_cycles(values.len(), lag)).then_some((lag, r))
}

/// Cycles of history a period needs before it is detected and used: one full cycle gives every
/// phase of the profile once, and the extra half cycle is the overlap autocorrelation needs to
/// see the repeat (half a cycle of pairs). Detection in practice starts a little later (~1.65
/// cycles): the correlation peak must also be seen to fall again.
pub const MIN_CYCLES: f64 = 1.5;

fn enough_cycles(len: usize, lag: usize) -> bool {
    lag > 0 && len as f64 >= MIN_CYCLES * lag as f64
}

/// Above this many slots, detection first runs on block means.
const DETECT_FULL_RESOLUTION_UP_TO: usize = 1_440;

/// Autocorrelation of first differences (differencing removes the trend that would otherwise
/// dominate), unbiased per lag.
struct AutocorrelationOfDifferences {
    centred: Vec<f64>,
    variance: f64,
}

impl AutocorrelationOfDifferences {
    fn new(values: &[f64]) -> Option<Self> {
        if values.len() < 3 {
            return None;
        }
        let diffs: Vec<f64> = values.windows(2).map(|w| w[1] - w[0]).collect();
        let mean = diffs.iter().sum::<f64>() / diffs.len() as f64;
        let centred: Vec<f64> = diffs.iter().map(|d| d - mean).collect();
        let variance = centred.iter().map(|d| d * d).sum::<f64>() / centred.len() as f64;
        (variance > 0.0).then_some(Self { centred, variance })
    }

    fn at(&self, lag: usize) -> f64 {
        let n = self.centred.len();
        if lag == 0 || lag >= n {
            return 0.0;
        }
        let sum: f64 = self.centred[..n - lag]
            .iter()
            .zip(&self.centred[lag..])
            .map(|(a, b)| a * b)
            .sum();
        sum / (n - lag) as f64 / self.variance
    }
}

/// As [`detect_period`], the lag being the centre of the chosen peak: the correlation-weighted
/// centroid of the lags around it within 20 % of its correlation (at most ±10 % of the lag).
/// The top of a broad peak is flat, so its argmax wanders with noise; its centre does not.
fn detect_at_full_resolution(
    values: &[f64],
    min_lag: usize,
    max_lag: usize,
    min_acf: f64,
) -> Option<(f64, f64)> {
    let curve = AutocorrelationOfDifferences::new(values)?;
    let history_cap = (values.len() as f64 / MIN_CYCLES) as usize;
    let max_lag = max_lag.min(history_cap);
    if min_lag.max(1) + 1 > max_lag {
        return None;
    }
    // Each correlation once, then the ±2-lag average over them (lags from 1, so that the first
    // zero crossing is seen: a smooth series correlates highly at every short lag, and only a
    // peak after the correlation has dropped below zero is a period).
    let raw: Vec<f64> = (0..=max_lag + 3).map(|l| curve.at(l)).collect();
    let smoothed: Vec<f64> = raw
        .windows(5)
        .map(|w| w.iter().sum::<f64>() / 5.0)
        .collect();
    // smoothed[i] is the average around lag i + 2.
    let at = |lag: usize| smoothed[lag - 2];
    let first_negative = (3..=max_lag).find(|&lag| at(lag) < 0.0)?;
    let peaks: Vec<(usize, f64)> = (min_lag.max(first_negative).max(3)..=max_lag)
        .filter(|&lag| at(lag) >= at(lag - 1) && at(lag) >= at(lag + 1))
        // A peak must be seen to fall again: at the end of a short history the correlation is
        // still rising towards the true period, and its last lag is no period.
        .filter(|&lag| {
            let beyond = lag + (lag / 10).max(2);
            beyond <= history_cap && (lag + 1..=beyond.min(max_lag + 1)).all(|l| at(l) <= at(lag))
        })
        .map(|lag| (lag, at(lag)))
        .filter(|&(_, r)| r >= min_acf)
        .collect();
    let best = peaks.iter().copied().max_by(|a, b| a.1.total_cmp(&b.1))?;
    let divides_best = |lag: usize| {
        let cycles = (best.0 as f64 / lag as f64).round();
        cycles >= 2.0 && (best.0 as f64 - cycles * lag as f64).abs() <= 0.05 * best.0 as f64
    };
    let (lag, r) = peaks
        .into_iter()
        .find(|p| p.1 >= 0.9 * best.1 && divides_best(p.0))
        .unwrap_or(best);
    let (threshold, reach) = (0.8 * r, (lag / 10).max(1));
    let in_peak =
        |l: usize| l >= 3 && l <= max_lag && l.abs_diff(lag) <= reach && at(l) >= threshold;
    let mut lo = lag;
    while in_peak(lo - 1) {
        lo -= 1;
    }
    let mut hi = lag;
    while in_peak(hi + 1) {
        hi += 1;
    }
    let weights: Vec<(f64, f64)> = (lo..=hi).map(|l| (l as f64, at(l) - threshold)).collect();
    let total: f64 = weights.iter().map(|w| w.1).sum();
    let centre = if total > 0.0 {
        weights.iter().map(|(l, w)| l * w).sum::<f64>() / total
    } else {
        lag as f64
    };
    // The peak's centre may lean past a narrow range (a known period ± 2 slots): the range is
    // what the caller asked for.
    Some((centre.clamp(min_lag as f64, max_lag as f64), r))
}

/// Zero-mean seasonal profile of period `lag`, indexed by absolute slot index modulo `lag`:
/// the average over cycles of the series minus its centred moving average. Needs
/// [`MIN_CYCLES`] cycles.
pub fn seasonal_profile(values: &[f64], first_index: u64, lag: usize) -> Option<Vec<f64>> {
    if !enough_cycles(values.len(), lag) {
        return None;
    }
    let mut sums = vec![0.0; lag];
    let mut counts = vec![0u32; lag];
    let mut window: f64 = values[..lag].iter().sum();
    let half = lag / 2;
    for start in 0..=values.len() - lag {
        if start > 0 {
            window += values[start + lag - 1] - values[start - 1];
        }
        let centre = start + half;
        let phase = ((first_index + centre as u64) % lag as u64) as usize;
        sums[phase] += values[centre] - window / lag as f64;
        counts[phase] += 1;
    }
    // Under two cycles the centred windows miss some phases; those are measured against the
    // first or last full window instead (one-sided, so a trend biases them a little — better
    // than no profile for a whole extra cycle).
    let len = values.len();
    let window_mean =
        |range: std::ops::Range<usize>| values[range].iter().sum::<f64>() / lag as f64;
    let edges = [
        (0..half, window_mean(0..lag)),
        (len - lag + half + 1..len, window_mean(len - lag..len)),
    ];
    for (range, mean) in edges {
        for i in range {
            let phase = ((first_index + i as u64) % lag as u64) as usize;
            if counts[phase] == 0 {
                sums[phase] = values[i] - mean;
                counts[phase] = 1;
            }
        }
    }
    let mut profile: Vec<f64> = sums
        .iter()
        .zip(&counts)
        .map(|(s, &c)| if c > 0 { s / f64::from(c) } else { 0.0 })
        .collect();
    let mean = profile.iter().sum::<f64>() / lag as f64;
    profile.iter_mut().for_each(|p| *p -= mean);
    Some(profile)
}

/// The period (in slots) to use for `values`, per `cfg`: the best-correlated among the known
/// periods (±2 slots) and, if enabled, any detected one.
pub fn choose_period(values: &[f64], cfg: &super::SeasonConfig) -> Option<usize> {
    let res = u64::from(cfg.resolution_s.max(1));
    let mut ranges: Vec<(usize, usize)> = cfg
        .known_periods_s
        .iter()
        .map(|p| (p / res) as usize)
        .filter(|&lag| lag >= 4)
        .map(|lag| (lag - 2, lag + 2))
        .collect();
    if cfg.detect {
        ranges.push((
            (cfg.min_period_s / res) as usize,
            (cfg.max_period_s / res) as usize,
        ));
    }
    ranges
        .into_iter()
        .filter_map(|(lo, hi)| detect_period(values, lo, hi, cfg.min_autocorrelation))
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .map(|(lag, _)| lag)
}

/// A detected season: value at any time by linear interpolation between slot centres.
#[derive(Debug, Clone, PartialEq)]
pub struct Season {
    pub resolution_s: u64,
    pub profile: Vec<f64>,
}

impl Season {
    pub fn period_s(&self) -> u64 {
        self.resolution_s * self.profile.len() as u64
    }

    pub fn at(&self, t_s: f64) -> f64 {
        let lag = self.profile.len();
        if lag == 0 {
            return 0.0;
        }
        let x = t_s / self.resolution_s as f64 - 0.5;
        let lower = x.floor();
        let w = x - lower;
        let phase = |i: f64| self.profile[(i.rem_euclid(lag as f64)) as usize % lag];
        (1.0 - w) * phase(lower) + w * phase(lower + 1.0)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::f64::consts::TAU;

    fn series(n: usize, period: usize, noise: f64) -> Vec<f64> {
        let mut state = 12345u64;
        (0..n)
            .map(|i| {
                state = state
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let u = (state >> 11) as f64 / (1u64 << 53) as f64 - 0.5;
                1000.0 + 2.0 * i as f64 + 300.0 * (TAU * i as f64 / period as f64).sin() + noise * u
            })
            .collect()
    }

    #[test]
    fn finds_the_period_of_a_noisy_sine_with_trend() {
        let (lag, r) = detect_period(&series(700, 90, 20.0), 10, 400, 0.5).unwrap();
        assert!((89..=91).contains(&lag), "lag {lag} acf {r}");
    }

    #[test]
    fn prefers_the_period_over_its_multiples() {
        let (lag, _) = detect_period(&series(2000, 60, 5.0), 10, 1000, 0.5).unwrap();
        assert!((59..=61).contains(&lag), "lag {lag}");
    }

    #[test]
    fn long_histories_are_searched_coarse_then_refined() {
        // Noise dominates the differences here (SNR < 1): within 1.5 % is what the data allows.
        let (lag, _) = detect_period(&series(5_000, 1_000, 20.0), 10, 3_000, 0.5).unwrap();
        assert!((985..=1_015).contains(&lag), "lag {lag}");
        let (lag, _) = detect_period(&series(5_000, 97, 5.0), 10, 3_000, 0.5).unwrap();
        assert!((95..=99).contains(&lag), "lag {lag}");
    }

    #[test]
    fn needs_one_and_a_half_cycles() {
        // 1.5 cycles, and the correlation's peak must also be seen to fall: from ~1.65 cycles.
        assert_eq!(detect_period(&series(140, 90, 0.0), 10, 400, 0.5), None);
        let (lag, _) = detect_period(&series(150, 90, 0.0), 10, 400, 0.5).unwrap();
        assert!((89..=91).contains(&lag), "lag {lag}");
    }

    #[test]
    fn a_known_period_is_found_in_its_narrow_range() {
        // A known period is searched within ± 2 slots: the fall after the peak is checked only
        // as far as that range and the history reach, or no known period would ever pass.
        for len in [160, 300] {
            let found = detect_period(&series(len, 90, 5.0), 88, 92, 0.5);
            assert!(
                found.is_some_and(|(lag, _)| (88..=92).contains(&lag)),
                "{len}: {found:?}"
            );
        }
    }

    #[test]
    fn profile_from_one_and_a_half_cycles_covers_every_phase() {
        // 135 slots of a 90-slot sine: the centred windows reach phases 45..90 only; the rest
        // come from the first and last full windows.
        let values = series(135, 90, 0.0);
        assert_eq!(seasonal_profile(&values[..134], 0, 90), None);
        let profile = seasonal_profile(&values, 0, 90).unwrap();
        for (i, p) in profile.iter().enumerate() {
            let truth = 300.0 * (TAU * i as f64 / 90.0).sin();
            // The trend (2 per slot) biases the one-sided phases by up to half a window of it.
            assert!((p - truth).abs() < 100.0, "phase {i}: {p} vs {truth}");
        }
    }

    #[test]
    fn white_noise_has_no_period() {
        let noise: Vec<f64> = series(2000, 100_000, 1000.0);
        assert_eq!(detect_period(&noise, 10, 1000, 0.5), None);
    }

    #[test]
    fn profile_recovers_the_sine_and_interpolates() {
        let values = series(360, 90, 0.0);
        let profile = seasonal_profile(&values, 0, 90).unwrap();
        for (i, p) in profile.iter().enumerate() {
            let truth = 300.0 * (TAU * i as f64 / 90.0).sin();
            assert!((p - truth).abs() < 15.0, "phase {i}: {p} vs {truth}");
        }
        let season = Season {
            resolution_s: 60,
            profile,
        };
        assert!((season.at(30.0 + 60.0 * 90.0) - season.profile[0]).abs() < 1e-9);
        assert_eq!(season.period_s(), 5400);
    }

    #[test]
    fn history_fills_gaps_and_keeps_its_capacity() {
        let mut h = CoarseHistory::new(60, 5);
        for (t, v) in [(0, 1.0), (60, 2.0), (240, 5.0), (300, 6.0), (360, 7.0)] {
            h.push(t, v);
        }
        // The slot at 360 s is still open; the oldest slot fell out of the capacity.
        assert_eq!(h.filled(), vec![2.0, 3.0, 4.0, 5.0, 6.0]);
        assert_eq!(h.first_index(), 1);
        h.push(420, 0.0);
        assert_eq!(h.first_index(), 2);
        assert_eq!(h.len(), 5);
    }
}
