//! The coordinator's durable store (redb): every sample each agent sent, and per (agent, boot)
//! the highest sequence number stored, which makes resends idempotent.
//!
//! Why redb: pure Rust (no C toolchain or system SQLite to match), ACID with a single writer,
//! crash-safe copy-on-write B-trees, and typed tables; group commits reach thousands of samples
//! per transaction, so the 5,000-agent ingest target costs a few commits a second.

use std::path::Path;

use demeter_common::metrics::Sample;
use demeter_common::protocol::MetricBatch;
use redb::{Database, ReadableDatabase, ReadableTable, TableDefinition};

use crate::error::{Error, Result};

/// (agent, boot, seq) → bincode of [`Sample`].
const SAMPLES: TableDefinition<(&str, u64, u64), &[u8]> = TableDefinition::new("samples");
/// (agent, boot) → highest sequence number stored.
const CURSORS: TableDefinition<(&str, u64), u64> = TableDefinition::new("cursors");

fn store_err(e: impl Into<redb::Error>) -> Error {
    Error::Store(e.into().to_string())
}

#[derive(Debug)]
pub struct Store {
    db: Database,
}

/// What one batch did to the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Appended {
    pub stored: u64,
    pub duplicates: u64,
    /// Sequence numbers that never arrived (the agent dropped them on overflow).
    pub gap: u64,
    pub stored_up_to: u64,
}

/// Which samples of a batch are new given the stored cursor. Pure, so the exactly-once rule is
/// testable on its own: everything at or below the cursor was stored before.
pub fn fresh_part(cursor: u64, batch: &MetricBatch) -> (usize, u64) {
    let skip = cursor
        .saturating_sub(batch.first_seq - 1)
        .min(batch.samples.len() as u64);
    let gap = batch.first_seq.saturating_sub(cursor + 1);
    (skip as usize, gap)
}

impl Store {
    pub fn open(path: &Path) -> Result<Self> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|source| Error::Io {
                context: format!("creating {}", dir.display()),
                source,
            })?;
        }
        let db = Database::create(path).map_err(store_err)?;
        let txn = db.begin_write().map_err(store_err)?;
        txn.open_table(SAMPLES).map_err(store_err)?;
        txn.open_table(CURSORS).map_err(store_err)?;
        txn.commit().map_err(store_err)?;
        Ok(Self { db })
    }

    /// The database, for modules that keep their own tables in the same file (the
    /// executor's journal): one file, one writer, one fsync per commit.
    pub(crate) fn db(&self) -> &Database {
        &self.db
    }

    pub fn stored_up_to(&self, agent: &str, boot: u64) -> Result<u64> {
        let txn = self.db.begin_read().map_err(store_err)?;
        let table = txn.open_table(CURSORS).map_err(store_err)?;
        Ok(table
            .get((agent, boot))
            .map_err(store_err)?
            .map(|v| v.value())
            .unwrap_or(0))
    }

    /// Stores many agents' batches in one durable transaction (group commit).
    pub fn append(&self, batches: &[(&str, &MetricBatch)]) -> Result<Vec<Appended>> {
        let txn = self.db.begin_write().map_err(store_err)?;
        let mut results = Vec::with_capacity(batches.len());
        {
            let mut samples = txn.open_table(SAMPLES).map_err(store_err)?;
            let mut cursors = txn.open_table(CURSORS).map_err(store_err)?;
            let mut encoded = Vec::new();
            for (agent, batch) in batches {
                let key = (*agent, batch.boot_id);
                let cursor = cursors
                    .get(key)
                    .map_err(store_err)?
                    .map(|v| v.value())
                    .unwrap_or(0);
                let (skip, gap) = fresh_part(cursor, batch);
                let mut stored = 0;
                for (offset, sample) in batch.samples.iter().enumerate().skip(skip) {
                    encoded.clear();
                    bincode::serde::encode_into_std_write(
                        sample,
                        &mut encoded,
                        bincode::config::standard(),
                    )
                    .map_err(|e| Error::Store(format!("encoding a sample: {e}")))?;
                    let seq = batch.first_seq + offset as u64;
                    samples
                        .insert((*agent, batch.boot_id, seq), encoded.as_slice())
                        .map_err(store_err)?;
                    stored += 1;
                }
                let stored_up_to = cursor.max(batch.last_seq());
                if stored_up_to > cursor {
                    cursors.insert(key, stored_up_to).map_err(store_err)?;
                }
                results.push(Appended {
                    stored,
                    duplicates: skip as u64,
                    gap: if stored > 0 { gap } else { 0 },
                    stored_up_to,
                });
            }
        }
        txn.commit().map_err(store_err)?;
        Ok(results)
    }

    /// Every stored sample of one agent, ordered by (boot, seq).
    pub fn samples_of(&self, agent: &str) -> Result<Vec<(u64, u64, Sample)>> {
        let txn = self.db.begin_read().map_err(store_err)?;
        let table = txn.open_table(SAMPLES).map_err(store_err)?;
        let mut out = Vec::new();
        for entry in table
            .range((agent, 0u64, 0u64)..=(agent, u64::MAX, u64::MAX))
            .map_err(store_err)?
        {
            let (key, value) = entry.map_err(store_err)?;
            let (_, boot, seq) = key.value();
            let (sample, _) =
                bincode::serde::decode_from_slice(value.value(), bincode::config::standard())
                    .map_err(|e| {
                        Error::Store(format!("sample {agent}/{boot}/{seq} is corrupt: {e}"))
                    })?;
            out.push((boot, seq, sample));
        }
        Ok(out)
    }

    /// Every (agent, boot) with its cursor.
    pub fn cursors(&self) -> Result<Vec<(String, u64, u64)>> {
        let txn = self.db.begin_read().map_err(store_err)?;
        let table = txn.open_table(CURSORS).map_err(store_err)?;
        let mut out = Vec::new();
        for entry in table.iter().map_err(store_err)? {
            let (key, value) = entry.map_err(store_err)?;
            let (agent, boot) = key.value();
            out.push((agent.to_string(), boot, value.value()));
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use demeter_common::metrics::HostSample;

    fn batch(boot_id: u64, first_seq: u64, n: u64) -> MetricBatch {
        let samples = (0..n)
            .map(|i| Sample {
                taken_at_ms: first_seq + i,
                host: HostSample::default(),
                jvms: vec![],
            })
            .collect();
        MetricBatch {
            boot_id,
            first_seq,
            samples,
        }
    }

    #[test]
    fn fresh_part_skips_what_is_stored_and_reports_gaps() {
        assert_eq!(fresh_part(0, &batch(1, 1, 5)), (0, 0));
        assert_eq!(fresh_part(3, &batch(1, 1, 5)), (3, 0));
        assert_eq!(fresh_part(9, &batch(1, 1, 5)), (5, 0));
        assert_eq!(fresh_part(5, &batch(1, 9, 2)), (0, 3));
    }

    #[test]
    fn resent_batches_are_stored_once_and_survive_reopen() {
        let dir = std::env::temp_dir().join(format!("demeter-store-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let path = dir.join("store.redb");
        {
            let store = Store::open(&path).unwrap();
            let a = store
                .append(&[("a", &batch(1, 1, 4)), ("b", &batch(9, 1, 2))])
                .unwrap();
            assert_eq!(
                a[0],
                Appended {
                    stored: 4,
                    duplicates: 0,
                    gap: 0,
                    stored_up_to: 4
                }
            );
            let again = store.append(&[("a", &batch(1, 3, 4))]).unwrap();
            assert_eq!(
                again[0],
                Appended {
                    stored: 2,
                    duplicates: 2,
                    gap: 0,
                    stored_up_to: 6
                }
            );
        }
        let store = Store::open(&path).unwrap();
        assert_eq!(store.stored_up_to("a", 1).unwrap(), 6);
        assert_eq!(store.stored_up_to("a", 2).unwrap(), 0);
        let seqs: Vec<u64> = store.samples_of("a").unwrap().iter().map(|s| s.1).collect();
        assert_eq!(seqs, vec![1, 2, 3, 4, 5, 6]);
        assert_eq!(store.samples_of("b").unwrap().len(), 2);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
