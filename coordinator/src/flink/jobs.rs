//! Cluster, job and TaskManager calls.

use reqwest::Method;
use serde::de::IgnoredAny;

use super::client::{FlinkClient, Target};
use super::retry::Idempotency;
use super::types::{
    ClusterOverview, DashboardConfig, JobDetails, JobId, JobOverview, JobsOverviewResponse,
    ResourceRequirements, TaskManagerId, TaskManagerInfo, TaskManagersResponse, VertexId,
    VertexTaskManagers,
};
use crate::Result;

impl FlinkClient {
    /// `GET /overview`: TaskManagers, slots, job counts and the Flink version.
    pub async fn overview(&self) -> Result<ClusterOverview> {
        self.get_json(Target {
            op: "overview",
            segments: &["overview"],
            query: &[],
            job: None,
        })
        .await
    }

    /// `GET /config`: the dashboard configuration (version, revision, enabled features).
    pub async fn dashboard_config(&self) -> Result<DashboardConfig> {
        self.get_json(Target {
            op: "dashboard_config",
            segments: &["config"],
            query: &[],
            job: None,
        })
        .await
    }

    /// `GET /jobs/overview`: every job the JobManager remembers, running or not.
    pub async fn jobs_overview(&self) -> Result<Vec<JobOverview>> {
        let response: JobsOverviewResponse = self
            .get_json(Target {
                op: "jobs_overview",
                segments: &["jobs", "overview"],
                query: &[],
                job: None,
            })
            .await?;
        Ok(response.jobs)
    }

    /// `GET /jobs/<id>`: state, vertices with parallelism and status, and the plan.
    pub async fn job_details(&self, job: &JobId) -> Result<JobDetails> {
        self.get_json(Target {
            op: "job_details",
            segments: &["jobs", job.as_str()],
            query: &[],
            job: Some(job),
        })
        .await
    }

    /// `PATCH /jobs/<id>?mode=cancel`. Cancelling twice is harmless, so this is retried.
    /// Returns once Flink accepted the request; poll [`Self::job_details`] for `CANCELED`.
    pub async fn cancel_job(&self, job: &JobId) -> Result<()> {
        let target = Target {
            op: "cancel_job",
            segments: &["jobs", job.as_str()],
            query: &[("mode", "cancel")],
            job: Some(job),
        };
        let _: IgnoredAny = self
            .call_json::<(), _>(Method::PATCH, target, None, Idempotency::Idempotent)
            .await?;
        Ok(())
    }

    /// `GET /jobs/<id>/resource-requirements` (adaptive scheduler).
    pub async fn resource_requirements(&self, job: &JobId) -> Result<ResourceRequirements> {
        self.get_json(Target {
            op: "resource_requirements",
            segments: &["jobs", job.as_str(), "resource-requirements"],
            query: &[],
            job: Some(job),
        })
        .await
    }

    /// `PUT /jobs/<id>/resource-requirements`: in-place rescale with the adaptive scheduler.
    /// Setting the same bounds twice has the same effect, so this is retried. Flink applies it
    /// asynchronously and waits out its rescale cooldown first; watch vertex parallelism.
    pub async fn set_resource_requirements(
        &self,
        job: &JobId,
        requirements: &ResourceRequirements,
    ) -> Result<()> {
        let target = Target {
            op: "set_resource_requirements",
            segments: &["jobs", job.as_str(), "resource-requirements"],
            query: &[],
            job: Some(job),
        };
        let _: IgnoredAny = self
            .call_json(
                Method::PUT,
                target,
                Some(requirements),
                Idempotency::Idempotent,
            )
            .await?;
        Ok(())
    }

    /// `GET /jobs/<id>/vertices/<vertex>/taskmanagers`: where the vertex's subtasks run.
    pub async fn vertex_taskmanagers(
        &self,
        job: &JobId,
        vertex: &VertexId,
    ) -> Result<VertexTaskManagers> {
        self.get_json(Target {
            op: "vertex_taskmanagers",
            segments: &[
                "jobs",
                job.as_str(),
                "vertices",
                vertex.as_str(),
                "taskmanagers",
            ],
            query: &[],
            job: Some(job),
        })
        .await
    }

    /// Every TaskManager running a subtask of the job, over all its vertices (sorted, once
    /// each): what must not be stopped while the job runs.
    pub async fn job_taskmanagers(&self, job: &JobId) -> Result<Vec<TaskManagerId>> {
        let details = self.job_details(job).await?;
        let mut ids = Vec::new();
        for vertex in &details.vertices {
            let placed = self.vertex_taskmanagers(job, &vertex.id).await?;
            ids.extend(placed.taskmanagers.into_iter().map(|t| t.taskmanager_id));
        }
        ids.sort();
        ids.dedup();
        Ok(ids)
    }

    /// `GET /taskmanagers`: registered TaskManagers with slots and memory configuration.
    pub async fn taskmanagers(&self) -> Result<Vec<TaskManagerInfo>> {
        let response: TaskManagersResponse = self
            .get_json(Target {
                op: "taskmanagers",
                segments: &["taskmanagers"],
                query: &[],
                job: None,
            })
            .await?;
        Ok(response.taskmanagers)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::super::fixture;
    use super::super::types::*;

    #[test]
    fn decodes_cluster_overview_and_config() {
        let o: ClusterOverview = fixture("overview.json");
        assert_eq!(
            (o.taskmanagers, o.slots_total, o.slots_available),
            (1, 2, 2)
        );
        assert_eq!(o.flink_version, "2.3.0");
        let c: DashboardConfig = fixture("config.json");
        assert_eq!(c.flink_revision.split(' ').next(), Some("c0f8d1a"));
        assert_eq!(c.features.get("web-submit"), Some(&true));
    }

    #[test]
    fn decodes_jobs_overview() {
        let running: JobsOverviewResponse = fixture("jobs_overview.json");
        assert_eq!(running.jobs.len(), 1);
        assert_eq!(running.jobs[0].state, JobState::Running);
        assert_eq!(running.jobs[0].end_time, -1);
        let finished: JobsOverviewResponse = fixture("jobs_overview_finished.json");
        assert_eq!(finished.jobs[0].state, JobState::Finished);
        assert!(finished.jobs[0].state.is_terminal());
    }

    #[test]
    fn decodes_job_details_and_finds_sources_from_the_plan() {
        let d: JobDetails = fixture("job_details.json");
        assert_eq!(d.state, JobState::Running);
        assert_eq!(d.max_parallelism, Some(128));
        assert_eq!(d.scheduler_type.as_deref(), Some("Adaptive"));
        let names: Vec<_> = d
            .vertices
            .iter()
            .map(|v| (v.name.as_str(), v.parallelism))
            .collect();
        assert_eq!(
            names,
            [("Source: gen", 2), ("window-agg -> discard: Writer", 2)]
        );
        let sources: Vec<_> = d.source_vertices().iter().map(|v| v.id.as_str()).collect();
        assert_eq!(sources, ["6bf01baa9d2ca23a3ef7ce311722523d"]);
        assert!(d.is_fully_running());
        let summary = d.vertices[0].metrics.as_ref().expect("vertex metrics");
        assert_eq!(summary.accumulated_busy_time, Some(0.0));

        let mut no_plan = d.clone();
        no_plan.plan = None;
        assert_eq!(no_plan.source_vertices().len(), 1);
    }

    #[test]
    fn decodes_a_just_submitted_job_with_undecided_max_parallelism() {
        // The adaptive scheduler reports maxParallelism -1 until the job is created.
        let d: JobDetails = fixture("job_details_created.json");
        assert_eq!(d.max_parallelism, None);
        assert!(d.vertices.iter().all(|v| v.max_parallelism == Some(128)));
        assert!(!d.is_fully_running());
    }

    #[test]
    fn decodes_where_a_vertex_runs() {
        // Two subtasks of the source on two one-slot TaskManagers (Flink 2.3).
        let v: VertexTaskManagers = fixture("vertex_taskmanagers.json");
        let ids: Vec<&str> = v
            .taskmanagers
            .iter()
            .map(|t| t.taskmanager_id.as_str())
            .collect();
        assert_eq!(ids.len(), 2);
        assert!(ids.iter().all(|id| id.starts_with("127.0.0.1:")), "{ids:?}");
        assert!(
            v.taskmanagers
                .iter()
                .all(|t| t.status.as_deref() == Some("RUNNING"))
        );
    }

    #[test]
    fn unknown_job_state_does_not_break_decoding() {
        let s: JobState = serde_json::from_str("\"TELEPORTING\"").expect("decode");
        assert_eq!(s, JobState::Unknown);
    }

    #[test]
    fn resource_requirements_round_trip() {
        let r: ResourceRequirements = fixture("resource_requirements.json");
        let source = &r[&VertexId::from("6bf01baa9d2ca23a3ef7ce311722523d")];
        assert_eq!(
            source.parallelism,
            ParallelismBounds {
                lower_bound: 1,
                upper_bound: 2
            }
        );
        let json = serde_json::to_value(&r).expect("encode");
        assert_eq!(
            json["01203aa9a12dc1ec725e03853dd7c8f2"]["parallelism"]["upperBound"],
            serde_json::json!(2)
        );
    }

    #[test]
    fn decodes_taskmanagers_with_memory_model() {
        let r: TaskManagersResponse = fixture("taskmanagers.json");
        let tm = &r.taskmanagers[0];
        assert_eq!(tm.id.as_str(), "127.0.0.1:39073-8e6168");
        assert_eq!((tm.slots_number, tm.free_slots), (2, 0));
        let mem = tm.memory_configuration.as_ref().expect("memory");
        assert_eq!(mem.total_process_memory, 1 << 30);
        assert_eq!(tm.hardware.as_ref().map(|h| h.cpu_cores), Some(2));
    }
}
