//! The decision log in the coordinator's store: every action a tuned job's policy took, with
//! its reason, the forecast, the predicted numbers of the chosen and the best rejected
//! candidates (design §4.6), and later how it ended — so "why did it do that?" has an answer
//! after a restart too.

use std::sync::Arc;

use redb::{ReadableDatabase, ReadableTable, TableDefinition};
use serde::{Deserialize, Serialize};

use crate::policy::Decision;
use crate::store::Store;
use crate::{Error, Result};

/// (job, sequence number) → JSON [`DecisionEntry`].
const DECISIONS: TableDefinition<(&str, u64), &[u8]> = TableDefinition::new("tuner_decisions");

/// Most entries kept per job; older ones are dropped when a new one is written.
pub const MAX_ENTRIES_PER_JOB: u64 = 5_000;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DecisionEntry {
    pub seq: u64,
    /// Wall clock, ms since the Unix epoch.
    pub at_ms: u64,
    pub policy: String,
    /// What was ordered, in words (`reconfigure in place to p=4,…`, `profile 2 copies at 800/s`).
    pub action: String,
    pub decision: Decision,
    /// How it ended (`applied`, `rolled back: …`, `3 measured`), once known.
    pub outcome: Option<String>,
}

#[derive(Debug, Clone)]
pub struct DecisionLog {
    store: Arc<Store>,
}

fn err(e: impl Into<redb::Error>) -> Error {
    Error::Store(e.into().to_string())
}

impl DecisionLog {
    pub fn open(store: Arc<Store>) -> Result<Self> {
        let txn = store.db().begin_write().map_err(err)?;
        txn.open_table(DECISIONS).map_err(err)?;
        txn.commit().map_err(err)?;
        Ok(Self { store })
    }

    /// Appends an entry for `job` (its `seq` is assigned here) and returns the sequence number.
    pub fn append(&self, job: &str, mut entry: DecisionEntry) -> Result<u64> {
        let txn = self.store.db().begin_write().map_err(err)?;
        let seq = {
            let mut table = txn.open_table(DECISIONS).map_err(err)?;
            let seq = table
                .range((job, 0)..=(job, u64::MAX))
                .map_err(err)?
                .next_back()
                .transpose()
                .map_err(err)?
                .map_or(1, |(k, _)| k.value().1 + 1);
            entry.seq = seq;
            let bytes = serde_json::to_vec(&entry)
                .map_err(|e| Error::Store(format!("encoding a decision: {e}")))?;
            table.insert((job, seq), bytes.as_slice()).map_err(err)?;
            if seq > MAX_ENTRIES_PER_JOB {
                table
                    .remove((job, seq - MAX_ENTRIES_PER_JOB))
                    .map_err(err)?;
            }
            seq
        };
        txn.commit().map_err(err)?;
        Ok(seq)
    }

    /// Records how the decision `seq` of `job` ended.
    pub fn set_outcome(&self, job: &str, seq: u64, outcome: &str) -> Result<()> {
        let txn = self.store.db().begin_write().map_err(err)?;
        {
            let mut table = txn.open_table(DECISIONS).map_err(err)?;
            let entry = table
                .get((job, seq))
                .map_err(err)?
                .map(|v| decode(v.value()))
                .transpose()?;
            if let Some(mut entry) = entry {
                entry.outcome = Some(outcome.to_string());
                let bytes = serde_json::to_vec(&entry)
                    .map_err(|e| Error::Store(format!("encoding a decision: {e}")))?;
                table.insert((job, seq), bytes.as_slice()).map_err(err)?;
            }
        }
        txn.commit().map_err(err)
    }

    /// The newest `last` entries of `job`, oldest first.
    pub fn recent(&self, job: &str, last: usize) -> Result<Vec<DecisionEntry>> {
        let txn = self.store.db().begin_read().map_err(err)?;
        let table = txn.open_table(DECISIONS).map_err(err)?;
        let mut out = Vec::new();
        for item in table.range((job, 0)..=(job, u64::MAX)).map_err(err)?.rev() {
            let (_, v) = item.map_err(err)?;
            out.push(decode(v.value())?);
            if out.len() >= last {
                break;
            }
        }
        out.reverse();
        Ok(out)
    }
}

fn decode(bytes: &[u8]) -> Result<DecisionEntry> {
    serde_json::from_slice(bytes).map_err(|e| Error::Store(format!("a decision is corrupt: {e}")))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::policy::Reason;

    fn entry(action: &str) -> DecisionEntry {
        DecisionEntry {
            seq: 0,
            at_ms: 1,
            policy: "demeter".into(),
            action: action.into(),
            decision: Decision {
                at: Duration::from_secs(60),
                reason: Reason::Cheaper { saving: 0.2 },
                forecast: None,
                chosen: None,
                best_rejected: None,
            },
            outcome: None,
        }
    }

    #[test]
    fn entries_survive_a_reopen_per_job_in_order_with_outcomes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("store.redb");
        {
            let log = DecisionLog::open(Arc::new(Store::open(&path).unwrap())).unwrap();
            assert_eq!(log.append("a", entry("first")).unwrap(), 1);
            assert_eq!(log.append("b", entry("other job")).unwrap(), 1);
            assert_eq!(log.append("a", entry("second")).unwrap(), 2);
            log.set_outcome("a", 1, "applied").unwrap();
        }
        let log = DecisionLog::open(Arc::new(Store::open(&path).unwrap())).unwrap();
        let a = log.recent("a", 10).unwrap();
        let actions: Vec<&str> = a.iter().map(|e| e.action.as_str()).collect();
        assert_eq!(actions, ["first", "second"]);
        assert_eq!(a[0].outcome.as_deref(), Some("applied"));
        assert_eq!(log.recent("a", 1).unwrap()[0].action, "second");
        assert_eq!(log.recent("b", 10).unwrap().len(), 1);
        assert!(log.recent("c", 10).unwrap().is_empty());
    }
}
