//! The job watchdog's decision: a registered job that is neither RUNNING nor under an
//! operation for longer than a grace period is brought back from its newest completed
//! snapshot — a job must never stay stopped. Pure: what was seen, the previous [`Watch`], the
//! time and the grace period in; the verdict and the next [`Watch`] out.
//!
//! The grace period lets Flink's own restart strategy work first (a TaskManager lost and
//! replaced, a short JobManager hiccup). Repeated recoveries of the same outage back off
//! (grace, 2 × grace, … up to [`MAX_BACKOFF_MS`]) so a job that cannot come back (no
//! snapshot) is not hammered.

use crate::flink::JobState;

/// Longest wait between two recoveries of one outage.
pub const MAX_BACKOFF_MS: u64 = 10 * 60 * 1000;

/// What the watchdog saw of one job at one tick.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Seen {
    /// Nothing deployed (never applied, or a first deployment that did not start).
    NotDeployed,
    /// An operation of the job is in flight: it owns the job for now.
    InFlight,
    /// Flink's state of the job the registration says runs; `None`: Flink does not know it.
    Flink(Option<JobState>),
    /// Flink's REST API did not answer: nothing can be known or done.
    Unreachable,
}

/// The watchdog's memory of one job between ticks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Watch {
    /// Since when the job is seen not running outside any operation.
    pub down_since: Option<u64>,
    /// Recoveries started since the job last ran.
    pub recoveries: u32,
    /// No recovery before this (backoff after a recovery that did not bring it back).
    pub not_before: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Fine,
    /// Not running; `first` on the tick it was first seen so (to log once).
    Down {
        for_ms: u64,
        first: bool,
    },
    /// Start a recovery now.
    Recover {
        for_ms: u64,
        attempt: u32,
    },
    /// Flink did not answer; the outage clock neither starts nor stops.
    Unknown,
}

/// Backoff before recovery `attempt + 1` of one outage.
pub fn backoff(grace_ms: u64, attempt: u32) -> u64 {
    grace_ms
        .max(1000)
        .saturating_mul(1 << attempt.min(20))
        .min(MAX_BACKOFF_MS)
}

pub fn decide(seen: Seen, watch: Watch, now: u64, grace_ms: u64) -> (Verdict, Watch) {
    match seen {
        Seen::Flink(Some(JobState::Running)) => (Verdict::Fine, Watch::default()),
        // An operation ends with the job running or with an alert; the outage clock starts
        // again after it, and the backoff of this outage is kept.
        Seen::NotDeployed | Seen::InFlight => (
            Verdict::Fine,
            Watch {
                down_since: None,
                ..watch
            },
        ),
        Seen::Unreachable => (Verdict::Unknown, watch),
        Seen::Flink(_) => {
            let since = watch.down_since.unwrap_or(now);
            let for_ms = now.saturating_sub(since);
            if for_ms >= grace_ms && now >= watch.not_before {
                let attempt = watch.recoveries + 1;
                let next = Watch {
                    down_since: None,
                    recoveries: attempt,
                    not_before: now.saturating_add(backoff(grace_ms, attempt)),
                };
                (Verdict::Recover { for_ms, attempt }, next)
            } else {
                let first = watch.down_since.is_none();
                let next = Watch {
                    down_since: Some(since),
                    ..watch
                };
                (Verdict::Down { for_ms, first }, next)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GRACE: u64 = 60_000;

    /// Feeds `seen` at each time, returns the verdicts.
    fn run(ticks: &[(u64, Seen)]) -> Vec<Verdict> {
        let mut watch = Watch::default();
        ticks
            .iter()
            .map(|&(now, seen)| {
                let (verdict, next) = decide(seen, watch, now, GRACE);
                watch = next;
                verdict
            })
            .collect()
    }

    const FAILED: Seen = Seen::Flink(Some(JobState::Failed));
    const RUNNING: Seen = Seen::Flink(Some(JobState::Running));

    #[test]
    fn a_stopped_job_is_recovered_after_the_grace_period_only() {
        let v = run(&[
            (0, FAILED),
            (30_000, FAILED),
            (59_999, FAILED),
            (60_000, FAILED),
        ]);
        assert_eq!(
            v,
            [
                Verdict::Down {
                    for_ms: 0,
                    first: true
                },
                Verdict::Down {
                    for_ms: 30_000,
                    first: false
                },
                Verdict::Down {
                    for_ms: 59_999,
                    first: false
                },
                Verdict::Recover {
                    for_ms: 60_000,
                    attempt: 1
                },
            ]
        );
    }

    #[test]
    fn running_or_under_an_operation_is_fine_and_restarts_the_clock() {
        for interrupt in [RUNNING, Seen::InFlight, Seen::NotDeployed] {
            let v = run(&[
                (0, FAILED),
                (50_000, interrupt),
                (60_000, FAILED),
                (110_000, FAILED),
            ]);
            assert_eq!(v[1], Verdict::Fine, "{interrupt:?}");
            assert!(
                matches!(v[3], Verdict::Down { for_ms: 50_000, .. }),
                "{interrupt:?}: {v:?}"
            );
        }
    }

    #[test]
    fn every_state_but_running_counts_and_an_unknown_job_too() {
        for state in [
            Some(JobState::Restarting),
            Some(JobState::Canceled),
            Some(JobState::Finished),
            Some(JobState::Suspended),
            None,
        ] {
            let v = run(&[(0, Seen::Flink(state)), (GRACE, Seen::Flink(state))]);
            assert!(matches!(v[1], Verdict::Recover { .. }), "{state:?}: {v:?}");
        }
    }

    #[test]
    fn an_unreachable_flink_neither_starts_nor_stops_the_clock() {
        let v = run(&[(0, Seen::Unreachable), (GRACE, FAILED)]);
        assert_eq!(v[0], Verdict::Unknown);
        assert!(matches!(v[1], Verdict::Down { first: true, .. }));
        let v = run(&[(0, FAILED), (30_000, Seen::Unreachable), (GRACE, FAILED)]);
        assert!(matches!(v[2], Verdict::Recover { .. }), "{v:?}");
    }

    #[test]
    fn recoveries_of_one_outage_back_off_until_it_runs_again() {
        // Recovery 1 at 60 s (the operation then runs: InFlight), it ends without the job
        // running; the clock starts again, but the next recovery waits for the backoff.
        let mut ticks = vec![(0, FAILED), (60_000, FAILED), (61_000, Seen::InFlight)];
        ticks.extend([(70_000, FAILED), (130_000, FAILED), (180_000, FAILED)]);
        let v = run(&ticks);
        assert!(matches!(v[1], Verdict::Recover { attempt: 1, .. }));
        assert!(matches!(v[4], Verdict::Down { .. }), "backoff: {v:?}");
        assert!(matches!(v[5], Verdict::Recover { attempt: 2, .. }), "{v:?}");
        assert_eq!(backoff(GRACE, 1), 120_000);
        assert_eq!(backoff(GRACE, 30), MAX_BACKOFF_MS);
        // Running again forgets the outage.
        let (_, watch) = decide(
            RUNNING,
            Watch {
                recoveries: 3,
                ..Watch::default()
            },
            0,
            GRACE,
        );
        assert_eq!(watch, Watch::default());
    }
}
