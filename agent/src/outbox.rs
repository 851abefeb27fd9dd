//! Samples waiting to reach the coordinator. Sans-IO: the sampling loop pushes, the connection
//! pulls batches to send and applies acknowledgements.
//!
//! Invariant: a sample leaves the outbox only when the coordinator acknowledged it as stored,
//! or when the outbox is full, and then the oldest go first and the loss is reported.

use std::collections::VecDeque;

use demeter_common::metrics::Sample;
use demeter_common::protocol::MetricBatch;

/// Samples lost to overflow, for the log line that reports them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dropped {
    pub first_seq: u64,
    pub last_seq: u64,
    pub oldest_taken_at_ms: u64,
    pub newest_taken_at_ms: u64,
}

impl Dropped {
    pub fn count(&self) -> u64 {
        self.last_seq - self.first_seq + 1
    }
}

#[derive(Debug)]
pub struct Outbox {
    boot_id: u64,
    batch_size: usize,
    capacity_samples: usize,
    next_seq: u64,
    /// Sealed batches, oldest first, not yet acknowledged.
    sealed: VecDeque<MetricBatch>,
    /// The batch being filled.
    open: Vec<Sample>,
    acked_up_to: u64,
    dropped_total: u64,
}

impl Outbox {
    pub fn new(boot_id: u64, batch_size: usize, capacity_samples: usize) -> Self {
        Self {
            boot_id,
            batch_size: batch_size.max(1),
            capacity_samples: capacity_samples.max(batch_size.max(1)),
            next_seq: 1,
            sealed: VecDeque::new(),
            open: Vec::new(),
            acked_up_to: 0,
            dropped_total: 0,
        }
    }

    pub fn boot_id(&self) -> u64 {
        self.boot_id
    }

    /// Adds a sample; seals the open batch when it is full. Returns what overflow dropped.
    pub fn push(&mut self, sample: Sample) -> Option<Dropped> {
        self.open.push(sample);
        if self.open.len() >= self.batch_size {
            self.seal()
        } else {
            None
        }
    }

    /// Seals the open batch now (the batch interval elapsed, or the agent is stopping).
    pub fn seal(&mut self) -> Option<Dropped> {
        if self.open.is_empty() {
            return None;
        }
        let samples = std::mem::take(&mut self.open);
        let first_seq = self.next_seq;
        self.next_seq += samples.len() as u64;
        self.sealed.push_back(MetricBatch {
            boot_id: self.boot_id,
            first_seq,
            samples,
        });
        self.enforce_capacity()
    }

    fn enforce_capacity(&mut self) -> Option<Dropped> {
        let mut dropped: Option<Dropped> = None;
        while self.pending_samples() > self.capacity_samples && self.sealed.len() > 1 {
            let Some(oldest) = self.sealed.pop_front() else {
                break;
            };
            let (first, last) = (oldest.first_seq, oldest.last_seq());
            let oldest_t = oldest.samples.first().map_or(0, |s| s.taken_at_ms);
            let newest_t = oldest.samples.last().map_or(0, |s| s.taken_at_ms);
            self.dropped_total += oldest.samples.len() as u64;
            dropped = Some(match dropped {
                None => Dropped {
                    first_seq: first,
                    last_seq: last,
                    oldest_taken_at_ms: oldest_t,
                    newest_taken_at_ms: newest_t,
                },
                Some(d) => Dropped {
                    last_seq: last,
                    newest_taken_at_ms: newest_t,
                    ..d
                },
            });
        }
        dropped
    }

    /// Applies the coordinator's acknowledgement: everything up to `stored_up_to` is durable.
    pub fn ack(&mut self, stored_up_to: u64) {
        self.acked_up_to = self.acked_up_to.max(stored_up_to);
        while self
            .sealed
            .front()
            .is_some_and(|b| b.last_seq() <= self.acked_up_to)
        {
            self.sealed.pop_front();
        }
    }

    /// The next sealed batch holding anything after `sent_up_to`.
    pub fn next_after(&self, sent_up_to: u64) -> Option<&MetricBatch> {
        self.sealed.iter().find(|b| b.last_seq() > sent_up_to)
    }

    pub fn pending_samples(&self) -> usize {
        self.sealed.iter().map(|b| b.samples.len()).sum::<usize>() + self.open.len()
    }

    /// Highest sequence number sealed so far (0 before the first batch).
    pub fn sealed_up_to(&self) -> u64 {
        self.next_seq - 1
    }

    pub fn acked_up_to(&self) -> u64 {
        self.acked_up_to
    }

    pub fn taken(&self) -> u64 {
        self.next_seq - 1 + self.open.len() as u64
    }

    pub fn dropped_total(&self) -> u64 {
        self.dropped_total
    }

    /// Everything sealed is acknowledged and nothing is open.
    pub fn is_drained(&self) -> bool {
        self.sealed.is_empty() && self.open.is_empty()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use demeter_common::metrics::HostSample;

    fn s(t: u64) -> Sample {
        Sample {
            taken_at_ms: t,
            host: HostSample::default(),
            jvms: vec![],
        }
    }

    #[test]
    fn batches_are_contiguous_and_acks_release_them() {
        let mut out = Outbox::new(7, 3, 100);
        for t in 0..7 {
            assert_eq!(out.push(s(t)), None);
        }
        assert_eq!(out.sealed_up_to(), 6);
        out.seal();
        let b = out.next_after(0).unwrap();
        assert_eq!((b.first_seq, b.last_seq(), b.boot_id), (1, 3, 7));
        assert_eq!(out.next_after(3).unwrap().first_seq, 4);
        assert_eq!(out.next_after(6).unwrap().first_seq, 7);
        assert!(out.next_after(7).is_none());
        out.ack(6);
        assert_eq!(out.pending_samples(), 1);
        out.ack(7);
        assert!(out.is_drained());
        assert_eq!(out.taken(), 7);
    }

    #[test]
    fn overflow_drops_the_oldest_and_says_what() {
        let mut out = Outbox::new(1, 2, 4);
        out.push(s(10));
        out.push(s(11));
        out.push(s(12));
        out.push(s(13));
        out.push(s(14));
        let dropped = out.push(s(15)).unwrap();
        assert_eq!(
            (dropped.first_seq, dropped.last_seq, dropped.count()),
            (1, 2, 2)
        );
        assert_eq!(
            (dropped.oldest_taken_at_ms, dropped.newest_taken_at_ms),
            (10, 11)
        );
        assert_eq!(out.dropped_total(), 2);
        assert_eq!(out.next_after(0).unwrap().first_seq, 3);
        assert_eq!(out.pending_samples(), 4);
    }

    #[test]
    fn a_stale_ack_changes_nothing() {
        let mut out = Outbox::new(1, 1, 10);
        out.push(s(0));
        out.push(s(1));
        out.ack(2);
        out.ack(1);
        assert_eq!(out.acked_up_to(), 2);
        assert!(out.is_drained());
    }
}
