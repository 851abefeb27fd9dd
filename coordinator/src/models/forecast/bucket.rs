//! 1-s observations → fixed-width buckets, so model state and update cost do not grow with the
//! sampling rate. A bucket keeps a robust level (median: a few spikes or dropped samples don't
//! move it) and its peak (max: what the decision must provision for).

/// One closed bucket. `index` is `t_s / width_s`, absolute, so buckets line up across restarts.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bucket {
    pub index: u64,
    pub level: f64,
    pub peak: f64,
    pub count: u32,
}

#[derive(Debug, Clone)]
pub struct BucketAggregator {
    width_s: u64,
    current: Option<u64>,
    values: Vec<f64>,
}

impl BucketAggregator {
    pub fn new(width_s: u32) -> Self {
        Self {
            width_s: u64::from(width_s.max(1)),
            current: None,
            values: Vec::with_capacity(width_s.max(1) as usize),
        }
    }

    pub fn width_s(&self) -> u64 {
        self.width_s
    }

    /// Index of the bucket being filled (None before the first observation).
    pub fn current_index(&self) -> Option<u64> {
        self.current
    }

    /// Adds an observation and returns the bucket it closed, if it started a new one. The caller
    /// must pass non-decreasing times; an observation for an already closed bucket is dropped
    /// (returns None) because the models have moved past it.
    pub fn push(&mut self, t_s: u64, rate: f64) -> Option<Bucket> {
        let index = t_s / self.width_s;
        let closed = match self.current {
            Some(current) if index < current => return None,
            Some(current) if index == current => None,
            Some(current) => self.close(current),
            None => None,
        };
        self.current = Some(index);
        if self.values.len() < self.width_s as usize {
            self.values.push(rate);
        }
        closed
    }

    fn close(&mut self, index: u64) -> Option<Bucket> {
        if self.values.is_empty() {
            return None;
        }
        let count = self.values.len();
        let peak = self
            .values
            .iter()
            .copied()
            .fold(f64::NEG_INFINITY, f64::max);
        let (below, upper_middle, _) = self
            .values
            .select_nth_unstable_by(count / 2, f64::total_cmp);
        let upper_middle = *upper_middle;
        let level = if count % 2 == 1 {
            upper_middle
        } else {
            0.5 * (below.iter().copied().fold(f64::NEG_INFINITY, f64::max) + upper_middle)
        };
        let bucket = Bucket {
            index,
            level,
            peak,
            count: count as u32,
        };
        self.values.clear();
        Some(bucket)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn closes_a_bucket_with_median_level_and_max_peak() {
        let mut agg = BucketAggregator::new(10);
        for (t, r) in [(100, 5.0), (101, 1000.0), (102, 6.0), (105, 7.0)] {
            assert_eq!(agg.push(t, r), None);
        }
        let b = agg.push(110, 1.0).unwrap();
        assert_eq!(b.index, 10);
        assert_eq!(b.count, 4);
        assert_eq!(b.level, 6.5);
        assert_eq!(b.peak, 1000.0);
        assert_eq!(agg.current_index(), Some(11));
    }

    #[test]
    fn gap_closes_the_last_filled_bucket_and_late_points_are_dropped() {
        let mut agg = BucketAggregator::new(10);
        agg.push(5, 1.0);
        let b = agg.push(95, 2.0).unwrap();
        assert_eq!(b.index, 0);
        assert_eq!(agg.current_index(), Some(9));
        assert_eq!(agg.push(50, 3.0), None);
        assert_eq!(agg.push(99, 4.0), None);
        assert_eq!(agg.push(100, 0.0).unwrap().level, 3.0);
    }
}
