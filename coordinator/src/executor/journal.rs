//! The executor's durable state in the coordinator's store: registered jobs, operations and
//! which operation is in flight per job. Every record is committed (fsync) before the driver
//! carries out the next effect, so a restarted coordinator finds each operation at the step
//! it had reached, and resumes or rolls it back.

use std::path::PathBuf;
use std::sync::Arc;

use redb::{ReadableDatabase, ReadableTable, TableDefinition};
use serde::{Deserialize, Serialize};

use super::operation::{Deployment, Operation, Outcome};
use crate::models::space::SearchSpace;
use crate::store::Store;
use crate::{Error, Result};

/// Job name → JSON [`JobRecord`].
const JOBS: TableDefinition<&str, &[u8]> = TableDefinition::new("executor_jobs");
/// Operation id → JSON [`Operation`] (in flight and finished: the history).
const OPERATIONS: TableDefinition<u64, &[u8]> = TableDefinition::new("executor_operations");
/// Job name → id of its operation in flight.
const IN_FLIGHT: TableDefinition<&str, u64> = TableDefinition::new("executor_in_flight");

/// A job Demeter manages: how to submit it, its QoS, and what runs now.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobRecord {
    pub name: String,
    pub jar: PathBuf,
    pub entry_class: String,
    pub args: Vec<String>,
    pub qos_latency_ms: Option<u64>,
    pub qos_recovery_s: Option<u64>,
    pub space: Option<SearchSpace>,
    /// `file:///…` directory for savepoints; `None` uses the cluster's default.
    pub savepoint_dir: Option<String>,
    pub current: Option<Deployment>,
    pub registered_ms: u64,
}

#[cfg(test)]
impl JobRecord {
    /// A registration of the benchmark job named `bench` for unit tests.
    pub(crate) fn for_tests(current: Option<Deployment>) -> Self {
        Self {
            name: "bench".into(),
            jar: "/x/bench.jar".into(),
            entry_class: "io.Bench".into(),
            args: vec!["--rate".into(), "100".into()],
            qos_latency_ms: Some(500),
            qos_recovery_s: None,
            space: None,
            savepoint_dir: None,
            current,
            registered_ms: 1,
        }
    }
}

fn err(e: impl Into<redb::Error>) -> Error {
    Error::Store(e.into().to_string())
}

fn encode<T: Serialize>(value: &T) -> Result<Vec<u8>> {
    serde_json::to_vec(value).map_err(|e| Error::Store(format!("encoding: {e}")))
}

fn decode<T: for<'de> Deserialize<'de>>(what: &str, bytes: &[u8]) -> Result<T> {
    serde_json::from_slice(bytes).map_err(|e| Error::Store(format!("{what} is corrupt: {e}")))
}

#[derive(Debug, Clone)]
pub struct Journal {
    store: Arc<Store>,
}

impl Journal {
    pub fn open(store: Arc<Store>) -> Result<Self> {
        let txn = store.db().begin_write().map_err(err)?;
        txn.open_table(JOBS).map_err(err)?;
        txn.open_table(OPERATIONS).map_err(err)?;
        txn.open_table(IN_FLIGHT).map_err(err)?;
        txn.commit().map_err(err)?;
        Ok(Self { store })
    }

    /// Registers a job or updates its submission details; what runs now is kept.
    pub fn register(&self, job: &JobRecord) -> Result<JobRecord> {
        let txn = self.store.db().begin_write().map_err(err)?;
        let record = {
            let mut jobs = txn.open_table(JOBS).map_err(err)?;
            let existing: Option<JobRecord> = match jobs.get(job.name.as_str()).map_err(err)? {
                Some(v) => Some(decode("job", v.value())?),
                None => None,
            };
            let mut record = job.clone();
            if let Some(old) = existing {
                record.current = old.current;
                record.registered_ms = old.registered_ms;
            }
            jobs.insert(job.name.as_str(), encode(&record)?.as_slice())
                .map_err(err)?;
            record
        };
        txn.commit().map_err(err)?;
        Ok(record)
    }

    pub fn job(&self, name: &str) -> Result<Option<JobRecord>> {
        let txn = self.store.db().begin_read().map_err(err)?;
        let jobs = txn.open_table(JOBS).map_err(err)?;
        match jobs.get(name).map_err(err)? {
            Some(v) => Ok(Some(decode("job", v.value())?)),
            None => Ok(None),
        }
    }

    pub fn jobs(&self) -> Result<Vec<JobRecord>> {
        let txn = self.store.db().begin_read().map_err(err)?;
        let jobs = txn.open_table(JOBS).map_err(err)?;
        let mut out = Vec::new();
        for entry in jobs.iter().map_err(err)? {
            let (_, v) = entry.map_err(err)?;
            out.push(decode("job", v.value())?);
        }
        Ok(out)
    }

    /// Makes `op` the job's operation in flight; refuses if another one is.
    pub fn begin(&self, op: &Operation) -> Result<()> {
        let txn = self.store.db().begin_write().map_err(err)?;
        {
            let mut in_flight = txn.open_table(IN_FLIGHT).map_err(err)?;
            if let Some(other) = in_flight.get(op.job.as_str()).map_err(err)? {
                let other = other.value();
                return Err(Error::Executor(format!(
                    "job {} has operation {other} in flight; run `job resume` first",
                    op.job
                )));
            }
            in_flight.insert(op.job.as_str(), op.id).map_err(err)?;
            let mut ops = txn.open_table(OPERATIONS).map_err(err)?;
            ops.insert(op.id, encode(op)?.as_slice()).map_err(err)?;
        }
        txn.commit().map_err(err)
    }

    /// Durably records the operation's new state. When it finished, the job's current
    /// deployment and the in-flight index change in the same transaction.
    pub fn record(&self, op: &Operation) -> Result<()> {
        let txn = self.store.db().begin_write().map_err(err)?;
        {
            let mut ops = txn.open_table(OPERATIONS).map_err(err)?;
            ops.insert(op.id, encode(op)?.as_slice()).map_err(err)?;
            if let Some(outcome) = op.outcome() {
                let mut in_flight = txn.open_table(IN_FLIGHT).map_err(err)?;
                in_flight.remove(op.job.as_str()).map_err(err)?;
                let deployment = match outcome {
                    Outcome::Applied(d) | Outcome::RolledBack { deployment: d, .. } => {
                        Some(d.clone())
                    }
                    Outcome::Aborted { .. } | Outcome::NotStarted { .. } => None,
                };
                let mut jobs = txn.open_table(JOBS).map_err(err)?;
                let job = match jobs.get(op.job.as_str()).map_err(err)? {
                    Some(v) => Some(decode::<JobRecord>("job", v.value())?),
                    None => None,
                };
                if let (Some(mut job), Some(d)) = (job, deployment) {
                    job.current = Some(d);
                    jobs.insert(op.job.as_str(), encode(&job)?.as_slice())
                        .map_err(err)?;
                }
            }
        }
        txn.commit().map_err(err)
    }

    /// Operations not finished yet, one per job at most.
    pub fn in_flight(&self) -> Result<Vec<Operation>> {
        let txn = self.store.db().begin_read().map_err(err)?;
        let in_flight = txn.open_table(IN_FLIGHT).map_err(err)?;
        let ops = txn.open_table(OPERATIONS).map_err(err)?;
        let mut out = Vec::new();
        for entry in in_flight.iter().map_err(err)? {
            let (_, id) = entry.map_err(err)?;
            if let Some(v) = ops.get(id.value()).map_err(err)? {
                out.push(decode("operation", v.value())?);
            }
        }
        Ok(out)
    }

    /// Every operation of a job, oldest first.
    pub fn operations(&self, job: &str) -> Result<Vec<Operation>> {
        let txn = self.store.db().begin_read().map_err(err)?;
        let ops = txn.open_table(OPERATIONS).map_err(err)?;
        let mut out = Vec::new();
        for entry in ops.iter().map_err(err)? {
            let (_, v) = entry.map_err(err)?;
            let op: Operation = decode("operation", v.value())?;
            if op.job == job {
                out.push(op);
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::super::machine::{Limits, Machine};
    use super::super::plan::Strategy;
    use super::*;
    use crate::flink::JobId;

    fn journal(name: &str) -> (Journal, PathBuf) {
        let dir =
            std::env::temp_dir().join(format!("demeter-journal-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let path = dir.join("store.redb");
        (
            Journal::open(Arc::new(Store::open(&path).unwrap())).unwrap(),
            path,
        )
    }

    #[test]
    fn operations_survive_reopen_and_finishing_updates_the_job() {
        let (j, path) = journal("reopen");
        let from = Deployment {
            config: "p=1,slots=2,mem=1g,cpu=1,ckpt=5".parse().unwrap(),
            job_id: JobId::from("a"),
            taskmanagers: None,
        };
        j.register(&JobRecord::for_tests(Some(from.clone())))
            .unwrap();
        // Registering again keeps what runs.
        let again = j.register(&JobRecord::for_tests(None)).unwrap();
        assert_eq!(again.current, Some(from.clone()));
        let to = "p=2,slots=2,mem=1g,cpu=1,ckpt=5".parse().unwrap();
        let mut m = Machine::start(
            9,
            "bench",
            "c",
            Strategy::InPlace,
            Some(from),
            to,
            5,
            Limits::default(),
        );
        let op = m.operation().clone();
        j.begin(&op).unwrap();
        assert!(j.begin(&op).is_err(), "one operation in flight per job");
        let Some(super::super::Effect::Journal { op: first, .. }) = m.poll_effect() else {
            panic!()
        };
        j.record(&first).unwrap();
        drop(j);

        let j = Journal::open(Arc::new(Store::open(&path).unwrap())).unwrap();
        let in_flight = j.in_flight().unwrap();
        assert_eq!(in_flight.len(), 1);
        assert_eq!(in_flight[0].step, super::super::Step::Rescale);
        let mut done = in_flight[0].clone();
        done.phase = super::super::Phase::Finished(Outcome::Applied(Deployment {
            config: to,
            job_id: JobId::from("a"),
            taskmanagers: None,
        }));
        j.record(&done).unwrap();
        assert!(j.in_flight().unwrap().is_empty());
        assert_eq!(j.job("bench").unwrap().unwrap().current.unwrap().config, to);
        assert_eq!(j.operations("bench").unwrap().len(), 1);
        assert_eq!(j.jobs().unwrap().len(), 1);
        std::fs::remove_dir_all(path.parent().unwrap()).unwrap();
    }
}
