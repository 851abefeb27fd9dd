//! Carrying out one effect against Flink's REST API or the TaskManager backend, and turning
//! the answer into the machine's event.

use super::super::effects::{
    Effect, Event, Fault, JobView, RegisteredTm, SavepointProgress, StopView, TaskManagersView,
};
use super::super::journal::JobRecord;
use super::super::plan;
use super::Driver;
use crate::flink::{
    JarRunRequest, JobId, ParallelismBounds, SavepointFormat, SavepointStatus, StopRequest,
};
use crate::models::space::JobConfig;
use crate::{Error, FlinkErrorKind, Result};

fn fault(e: Error) -> Fault {
    Fault::new(e.to_string())
}

pub(crate) fn not_found(e: &Error) -> bool {
    matches!(
        e,
        Error::Flink {
            kind: FlinkErrorKind::JobNotFound { .. },
            ..
        }
    )
}

impl Driver {
    pub(super) async fn execute(&self, job: &JobRecord, effect: &Effect) -> Event {
        let c = &self.client;
        match effect {
            Effect::TriggerStop { job: id } => {
                let request = StopRequest {
                    target_directory: job.savepoint_dir.clone(),
                    drain: false,
                    format: Some(SavepointFormat::Canonical),
                };
                Event::StopTriggered(c.stop_with_savepoint(id, &request).await.map_err(fault))
            }
            Effect::PollSavepoint { job: id, trigger } => {
                Event::Savepoint(match c.savepoint_status(id, trigger).await {
                    Ok(SavepointStatus::InProgress) => Ok(SavepointProgress::InProgress),
                    Ok(SavepointStatus::Completed { location }) => {
                        Ok(SavepointProgress::Completed { location })
                    }
                    Ok(SavepointStatus::Failed(f)) => Ok(SavepointProgress::Failed {
                        message: format!("{}: {}", f.message, f.root_cause),
                    }),
                    Err(e) => Err(fault(e)),
                })
            }
            Effect::InspectStop { job: id, since_ms } => {
                Event::StopInspected(self.inspect_stop(id, *since_ms).await.map_err(fault))
            }
            Effect::EnsureTaskManagers { job: name, specs } => Event::TaskManagersEnsured(
                self.taskmanagers.ensure(name, specs).await.map_err(fault),
            ),
            Effect::QueryTaskManagers { job: name, ids } => {
                Event::TaskManagers(self.query_taskmanagers(name, ids).await.map_err(fault))
            }
            Effect::Submit {
                job_id,
                config,
                restore,
            } => Event::Submitted(
                self.submit(job, job_id, config, restore.clone())
                    .await
                    .map_err(fault),
            ),
            Effect::QueryJob { job: id } => Event::Job(match c.job_details(id).await {
                Ok(d) => {
                    let sources = d.source_vertices();
                    let records: Vec<f64> = sources
                        .iter()
                        .filter_map(|v| v.metrics.as_ref().and_then(|m| m.write_records))
                        .collect();
                    Ok(Some(JobView {
                        state: d.state,
                        all_running: d.is_fully_running(),
                        vertices: d
                            .vertices
                            .iter()
                            .map(|v| (v.parallelism, v.max_parallelism))
                            .collect(),
                        source_records: (!records.is_empty()).then(|| records.iter().sum()),
                    }))
                }
                Err(e) if not_found(&e) => Ok(None),
                Err(e) => Err(fault(e)),
            }),
            Effect::Rescale {
                job: id,
                parallelism,
            } => Event::Rescaled(self.rescale(id, *parallelism).await.map_err(fault)),
            Effect::QueryPlacement { job: id } => Event::Placement(
                c.job_taskmanagers(id)
                    .await
                    .map(|ids| ids.into_iter().map(|id| id.0).collect())
                    .map_err(fault),
            ),
            Effect::Cancel { job: id } => Event::Cancelled(c.cancel_job(id).await.map_err(fault)),
            Effect::ReadRestorePoint { job: id } => {
                Event::RestorePoint(match c.checkpoint_stats(id).await {
                    Ok(stats) => Ok(stats.latest.restore_point()),
                    Err(e) if not_found(&e) => Ok(None),
                    Err(e) => Err(fault(e)),
                })
            }
            Effect::Journal { .. } | Effect::Alert { .. } => {
                Event::Submitted(Err(Fault::new("not an action")))
            }
        }
    }

    async fn inspect_stop(&self, id: &JobId, since_ms: u64) -> Result<StopView> {
        let state = match self.client.job_details(id).await {
            Ok(d) => d.state,
            Err(e) if not_found(&e) => {
                return Ok(StopView {
                    state: None,
                    savepoint: None,
                    snapshot_in_progress: false,
                });
            }
            Err(e) => return Err(e),
        };
        let stats = self.client.checkpoint_stats(id).await?;
        let savepoint = stats
            .latest
            .savepoint
            .filter(|s| s.status == "COMPLETED" && s.trigger_timestamp >= since_ms as i64)
            .and_then(|s| s.external_path);
        Ok(StopView {
            state: Some(state),
            savepoint,
            snapshot_in_progress: stats.counts.in_progress > 0,
        })
    }

    async fn query_taskmanagers(&self, name: &str, ids: &[String]) -> Result<TaskManagersView> {
        let registered = self
            .client
            .taskmanagers()
            .await?
            .into_iter()
            .map(|t| RegisteredTm {
                id: t.id.0,
                slots: t.slots_number,
                memory_mb: t
                    .memory_configuration
                    .map_or(0, |m| (m.total_process_memory >> 20) as u32),
            })
            .collect();
        let alive = self.taskmanagers.alive(name).await?;
        let dead = ids
            .iter()
            .filter(|id| !alive.contains(id))
            .cloned()
            .collect();
        Ok(TaskManagersView { registered, dead })
    }

    async fn submit(
        &self,
        job: &JobRecord,
        job_id: &JobId,
        config: &JobConfig,
        restore: Option<String>,
    ) -> Result<()> {
        let cached = self
            .jar_ids
            .lock()
            .ok()
            .and_then(|m| m.get(&job.jar).cloned());
        let jar = match cached {
            Some(jar) => jar,
            None => {
                let jar = self.client.upload_jar(&job.jar).await?;
                if let Ok(mut m) = self.jar_ids.lock() {
                    m.insert(job.jar.clone(), jar.clone());
                }
                jar
            }
        };
        let request = JarRunRequest {
            entry_class: Some(job.entry_class.clone()),
            program_args_list: job.args.clone(),
            parallelism: Some(config.parallelism),
            savepoint_path: restore,
            allow_non_restored_state: Some(false),
            flink_configuration: plan::flink_configuration(config),
            job_id: Some(job_id.clone()),
        };
        let result = self.client.run_jar(&jar, &request).await;
        if result.is_err() {
            // The jar may be gone (a restarted JobManager): upload again next time.
            if let Ok(mut m) = self.jar_ids.lock() {
                m.remove(&job.jar);
            }
        }
        result.map(|_| ())
    }

    async fn rescale(&self, id: &JobId, parallelism: u32) -> Result<()> {
        let mut requirements = self.client.resource_requirements(id).await?;
        for requirement in requirements.values_mut() {
            requirement.parallelism = ParallelismBounds {
                lower_bound: 1,
                upper_bound: parallelism,
            };
        }
        self.client
            .set_resource_requirements(id, &requirements)
            .await
    }
}
