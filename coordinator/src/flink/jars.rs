//! Jar upload, listing, run and delete (`/jars…`).

use std::collections::BTreeMap;
use std::path::Path;

use reqwest::Method;
use reqwest::multipart::{Form, Part};
use serde::de::IgnoredAny;
use serde::{Deserialize, Serialize};

use super::client::{FlinkClient, Target, decode};
use super::retry::Idempotency;
use super::types::{JarId, JobId};
use crate::{Error, FlinkErrorKind, Result};

/// Body of `POST /jars/<id>/run`. Unset fields are left out so the cluster defaults apply.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct JarRunRequest {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub entry_class: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub program_args_list: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parallelism: Option<u32>,
    /// Restore from this savepoint/checkpoint (a location from `wait_savepoint`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub savepoint_path: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allow_non_restored_state: Option<bool>,
    /// Per-job configuration, e.g. `execution.checkpointing.interval = "5 s"`.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub flink_configuration: BTreeMap<String, String>,
    /// Fixes the new job's id (otherwise Flink picks one).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub job_id: Option<JobId>,
}

/// One entry of `GET /jars`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct JarFile {
    pub id: JarId,
    pub name: String,
    pub uploaded: i64,
    #[serde(default)]
    pub entry: Vec<JarEntry>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct JarEntry {
    pub name: String,
}

#[derive(Deserialize)]
struct JarListResponse {
    files: Vec<JarFile>,
}

#[derive(Deserialize)]
struct UploadResponse {
    filename: String,
    status: String,
}

#[derive(Deserialize)]
struct RunResponse {
    jobid: JobId,
}

impl UploadResponse {
    /// The jar id is the basename of the file Flink stored.
    fn jar_id(&self) -> Option<JarId> {
        if self.status != "success" {
            return None;
        }
        let name = self.filename.rsplit('/').next()?;
        (!name.is_empty()).then(|| JarId::from(name))
    }
}

impl FlinkClient {
    /// `POST /jars/upload` (multipart field `jarfile`). Sent once: a retry could store the jar
    /// twice under two ids. Flink requires the file name to end in `.jar`.
    pub async fn upload_jar(&self, path: &Path) -> Result<JarId> {
        let op = "upload_jar";
        let bytes = tokio::fs::read(path).await.map_err(|source| Error::Io {
            context: format!("reading jar {}", path.display()),
            source,
        })?;
        let file_name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".jar"))
            .ok_or_else(|| Error::Flink {
                op,
                kind: FlinkErrorKind::InvalidRequest {
                    message: format!("{} is not a .jar", path.display()),
                },
            })?;
        let target = Target {
            op,
            segments: &["jars", "upload"],
            query: &[],
            job: None,
        };
        let url = self.url(&target)?;
        let timeout = self.config().upload_timeout;
        let body = self
            .execute(target, Idempotency::SendOnce, timeout, || {
                let part = Part::bytes(bytes.clone()).file_name(file_name.clone());
                self.http()
                    .post(url.clone())
                    .multipart(Form::new().part("jarfile", part))
            })
            .await?;
        let response: UploadResponse = decode(op, &body)?;
        response.jar_id().ok_or_else(|| Error::Flink {
            op,
            kind: FlinkErrorKind::Decode {
                message: format!(
                    "upload status {:?}, file {:?}",
                    response.status, response.filename
                ),
            },
        })
    }

    /// `GET /jars`: uploaded jars with their entry classes.
    pub async fn list_jars(&self) -> Result<Vec<JarFile>> {
        let response: JarListResponse = self
            .get_json(Target {
                op: "list_jars",
                segments: &["jars"],
                query: &[],
                job: None,
            })
            .await?;
        Ok(response.files)
    }

    /// `POST /jars/<id>/run`: submits a job. Sent once, never retried: a lost response with a
    /// retry would start the job twice. On an unclear failure, look at [`Self::jobs_overview`].
    pub async fn run_jar(&self, jar: &JarId, request: &JarRunRequest) -> Result<JobId> {
        let target = Target {
            op: "run_jar",
            segments: &["jars", jar.as_str(), "run"],
            query: &[],
            job: None,
        };
        let response: RunResponse = self
            .call_json(Method::POST, target, Some(request), Idempotency::SendOnce)
            .await?;
        Ok(response.jobid)
    }

    /// `DELETE /jars/<id>`. Deleting is idempotent in effect, so it is retried.
    pub async fn delete_jar(&self, jar: &JarId) -> Result<()> {
        let target = Target {
            op: "delete_jar",
            segments: &["jars", jar.as_str()],
            query: &[],
            job: None,
        };
        let _: IgnoredAny = self
            .call_json::<(), _>(Method::DELETE, target, None, Idempotency::Idempotent)
            .await?;
        Ok(())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::super::fixture;
    use super::*;

    #[test]
    fn jar_id_is_the_stored_basename() {
        let r: UploadResponse = fixture("jar_upload.json");
        assert_eq!(
            r.jar_id().map(|j| j.0),
            Some("56f528b1-bd06-47f2-a71f-24d1cdf84da1_tiny-job.jar".into())
        );
        let failed = UploadResponse {
            filename: "/x/a.jar".into(),
            status: "failure".into(),
        };
        assert_eq!(failed.jar_id(), None);
    }

    #[test]
    fn decodes_jar_list_and_run_response() {
        let list: JarListResponse = fixture("jars.json");
        assert_eq!(list.files[0].name, "tiny-job.jar");
        assert_eq!(list.files[0].entry[0].name, "demeter.testjob.TinyJob");
        let run: RunResponse = fixture("jar_run.json");
        assert_eq!(run.jobid.as_str(), "df04a0e2efab10f9f513094bc1f3fd74");
    }

    #[test]
    fn run_body_uses_flinks_field_names_and_omits_unset_fields() {
        let request = JarRunRequest {
            entry_class: Some("demeter.testjob.TinyJob".into()),
            program_args_list: vec!["--rate".into(), "300".into()],
            parallelism: Some(3),
            savepoint_path: Some("file:/sp/savepoint-1".into()),
            allow_non_restored_state: Some(false),
            flink_configuration: [("execution.checkpointing.interval".into(), "2 s".into())].into(),
            job_id: None,
        };
        assert_eq!(
            serde_json::to_value(&request).expect("encode"),
            serde_json::json!({
                "entryClass": "demeter.testjob.TinyJob",
                "programArgsList": ["--rate", "300"],
                "parallelism": 3,
                "savepointPath": "file:/sp/savepoint-1",
                "allowNonRestoredState": false,
                "flinkConfiguration": {"execution.checkpointing.interval": "2 s"}
            })
        );
        assert_eq!(
            serde_json::to_value(JarRunRequest::default()).expect("encode"),
            serde_json::json!({})
        );
    }
}
