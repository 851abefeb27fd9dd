//! HTTP transport for the Flink REST API: per-request timeouts, retries for idempotent calls,
//! and mapping of every failure to a typed [`FlinkErrorKind`].

use std::sync::Mutex;
use std::time::Duration;

use rand::SeedableRng;
use rand::rngs::StdRng;
use reqwest::{Method, RequestBuilder, StatusCode, Url};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::retry::{Idempotency, RetryPolicy};
use super::types::JobId;
use crate::{Error, FlinkErrorKind, Result};

/// How the client talks to the JobManager.
#[derive(Debug, Clone, PartialEq)]
pub struct ClientConfig {
    /// Whole-request bound (connect, send, full response body) for ordinary calls.
    pub request_timeout: Duration,
    /// Bound for a jar upload, which moves megabytes instead of bytes.
    pub upload_timeout: Duration,
    /// Bound for establishing the TCP connection alone.
    pub connect_timeout: Duration,
    /// Retry schedule for idempotent calls; non-idempotent calls are sent once.
    pub retry: RetryPolicy,
    /// Seed for the retry jitter, so a run is reproducible.
    pub jitter_seed: u64,
}

impl Default for ClientConfig {
    fn default() -> Self {
        Self {
            request_timeout: Duration::from_secs(10),
            upload_timeout: Duration::from_secs(120),
            connect_timeout: Duration::from_secs(3),
            retry: RetryPolicy::default(),
            jitter_seed: 0x5eed,
        }
    }
}

/// A typed client for one Flink cluster's REST endpoint. Cheap to share behind an `Arc`.
#[derive(Debug)]
pub struct FlinkClient {
    http: reqwest::Client,
    base: Url,
    config: ClientConfig,
    jitter: Mutex<StdRng>,
}

/// A request target below the base URL: path segments (each percent-encoded) and query pairs.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Target<'a> {
    pub op: &'static str,
    pub segments: &'a [&'a str],
    pub query: &'a [(&'a str, &'a str)],
    /// The job the call is about, so a 404 naming it becomes [`FlinkErrorKind::JobNotFound`].
    pub job: Option<&'a JobId>,
}

impl FlinkClient {
    /// `base_url` is the REST root, e.g. `http://127.0.0.1:8081`. Only plain HTTP is supported:
    /// the JobManager is reached on loopback or a private network, and the build carries no TLS
    /// stack for it.
    pub fn new(base_url: &str, config: ClientConfig) -> Result<Self> {
        let invalid = |message: String| Error::Flink {
            op: "new_client",
            kind: FlinkErrorKind::InvalidRequest { message },
        };
        let base = Url::parse(base_url).map_err(|e| invalid(format!("{base_url}: {e}")))?;
        if base.scheme() != "http" || base.cannot_be_a_base() {
            return Err(invalid(format!(
                "{base_url}: only http:// base URLs are supported"
            )));
        }
        let http = reqwest::Client::builder()
            .connect_timeout(config.connect_timeout)
            .no_proxy()
            .build()
            .map_err(|e| invalid(error_chain(&e)))?;
        let jitter = Mutex::new(StdRng::seed_from_u64(config.jitter_seed));
        Ok(Self {
            http,
            base,
            config,
            jitter,
        })
    }

    pub fn base_url(&self) -> &Url {
        &self.base
    }

    pub fn config(&self) -> &ClientConfig {
        &self.config
    }

    pub(crate) fn http(&self) -> &reqwest::Client {
        &self.http
    }

    pub(crate) async fn get_json<T: DeserializeOwned>(&self, target: Target<'_>) -> Result<T> {
        self.call_json::<(), T>(Method::GET, target, None, Idempotency::Idempotent)
            .await
    }

    /// Sends `body` (if any) as JSON and decodes the JSON answer.
    pub(crate) async fn call_json<B: Serialize, T: DeserializeOwned>(
        &self,
        method: Method,
        target: Target<'_>,
        body: Option<&B>,
        idempotency: Idempotency,
    ) -> Result<T> {
        let url = self.url(&target)?;
        let bytes = self
            .execute(target, idempotency, self.config.request_timeout, || {
                let request = self.http.request(method.clone(), url.clone());
                match body {
                    Some(b) => request.json(b),
                    None => request,
                }
            })
            .await?;
        decode(target.op, &bytes)
    }

    /// Runs a request built by `build` (called once per attempt), retrying only when
    /// `idempotency` allows and the failure is transient. Returns the 2xx body.
    pub(crate) async fn execute(
        &self,
        target: Target<'_>,
        idempotency: Idempotency,
        timeout: Duration,
        build: impl Fn() -> RequestBuilder,
    ) -> Result<bytes::Bytes> {
        let mut failed_attempts = 0u32;
        loop {
            let kind = match self.attempt(&target, timeout, build()).await {
                Ok(body) => return Ok(body),
                Err(kind) => kind,
            };
            failed_attempts += 1;
            let delay = match idempotency {
                Idempotency::Idempotent if RetryPolicy::is_retryable(&kind) => {
                    let mut rng = self.jitter.lock().unwrap_or_else(|p| p.into_inner());
                    self.config.retry.next_delay(failed_attempts, &mut *rng)
                }
                _ => None,
            };
            let Some(delay) = delay else {
                return Err(Error::Flink {
                    op: target.op,
                    kind,
                });
            };
            tracing::warn!(op = target.op, attempt = failed_attempts, ?delay, error = %kind,
                "Flink REST call failed; retrying");
            tokio::time::sleep(delay).await;
        }
    }

    async fn attempt(
        &self,
        target: &Target<'_>,
        timeout: Duration,
        request: RequestBuilder,
    ) -> std::result::Result<bytes::Bytes, FlinkErrorKind> {
        let transport = |e: reqwest::Error| {
            if e.is_timeout() {
                FlinkErrorKind::Timeout { after: timeout }
            } else {
                FlinkErrorKind::Connect {
                    message: error_chain(&e),
                }
            }
        };
        let response = request.timeout(timeout).send().await.map_err(transport)?;
        let status = response.status();
        let body = response.bytes().await.map_err(transport)?;
        tracing::debug!(
            op = target.op,
            status = status.as_u16(),
            bytes = body.len(),
            "Flink REST"
        );
        if status.is_success() {
            return Ok(body);
        }
        let text = String::from_utf8_lossy(&body);
        match target.job {
            Some(job) if status == StatusCode::NOT_FOUND && names_missing_job(&text, job) => {
                Err(FlinkErrorKind::JobNotFound {
                    job_id: job.to_string(),
                })
            }
            _ => Err(FlinkErrorKind::Status {
                code: status.as_u16(),
                body: summarize_error_body(&text),
            }),
        }
    }

    pub(crate) fn url(&self, target: &Target<'_>) -> Result<Url> {
        let mut url = self.base.clone();
        url.path_segments_mut()
            .map_err(|()| Error::Flink {
                op: target.op,
                kind: FlinkErrorKind::InvalidRequest {
                    message: format!("bad base URL {}", self.base),
                },
            })?
            .pop_if_empty()
            .extend(target.segments);
        if !target.query.is_empty() {
            url.query_pairs_mut().extend_pairs(target.query);
        }
        Ok(url)
    }
}

pub(crate) fn decode<T: DeserializeOwned>(op: &'static str, body: &[u8]) -> Result<T> {
    serde_json::from_slice(body).map_err(|e| Error::Flink {
        op,
        kind: FlinkErrorKind::Decode {
            message: format!(
                "{e}; body starts {:?}",
                prefix(&String::from_utf8_lossy(body), 200)
            ),
        },
    })
}

fn names_missing_job(body: &str, job: &JobId) -> bool {
    body.contains("FlinkJobNotFoundException") || body.contains(&format!("Job {job} not found"))
}

/// Flink's error bodies are `{"errors":[...]}` holding whole Java stack traces; keep the lines a
/// human needs: the first real message and the deepest `Caused by:`.
pub(crate) fn summarize_error_body(body: &str) -> String {
    #[derive(serde::Deserialize)]
    struct Errors {
        errors: Vec<String>,
    }
    let Ok(parsed) = serde_json::from_str::<Errors>(body) else {
        return prefix(body.trim(), 300).to_owned();
    };
    let lines: Vec<&str> = parsed
        .errors
        .iter()
        .flat_map(|e| e.lines())
        .map(str::trim)
        .filter(|l| {
            !l.is_empty()
                && !l.starts_with("at ")
                && !l.starts_with("...")
                && !l.starts_with("<Exception on server side")
                && !l.starts_with("End of exception on server side")
        })
        .collect();
    let first = lines
        .iter()
        .find(|l| **l != "Internal server error.")
        .or(lines.first());
    let root = lines.iter().rev().find(|l| l.starts_with("Caused by:"));
    let summary = match (first, root) {
        (Some(f), Some(r)) => format!("{f} | {r}"),
        (Some(f), None) => (*f).to_owned(),
        _ => String::from("(no error message)"),
    };
    prefix(&summary, 600).to_owned()
}

fn prefix(s: &str, max_chars: usize) -> &str {
    s.char_indices().nth(max_chars).map_or(s, |(i, _)| &s[..i])
}

/// reqwest's top-level message is generic ("error sending request"); the cause chain says why.
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut message = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        message.push_str(": ");
        message.push_str(&cause.to_string());
        source = cause.source();
    }
    message
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn error_summary_keeps_message_and_root_cause() {
        let body = include_str!("../../testdata/flink/error_job_not_found.json");
        let s = summarize_error_body(body);
        assert!(
            s.starts_with("org.apache.flink.runtime.rest.NotFoundException: Job 0000"),
            "{s}"
        );
        assert!(
            s.contains("Caused by: org.apache.flink.runtime.messages.FlinkJobNotFoundException")
        );
        assert!(!s.contains("\tat "));
        assert!(names_missing_job(
            body,
            &JobId::from("00000000000000000000000000000000")
        ));
    }

    #[test]
    fn error_summary_skips_internal_server_error_preamble() {
        let body = r#"{"errors":["Internal server error.","<Exception on server side:\njava.util.concurrent.CompletionException: RestHandlerException: Jar file /x/nope.jar does not exist\n\tat org.Foo.bar(Foo.java:1)\n\nEnd of exception on server side>"]}"#;
        assert_eq!(
            summarize_error_body(body),
            "java.util.concurrent.CompletionException: RestHandlerException: Jar file /x/nope.jar does not exist"
        );
        assert_eq!(summarize_error_body("gateway down"), "gateway down");
    }

    #[test]
    fn urls_encode_segments_and_query() {
        let c =
            FlinkClient::new("http://127.0.0.1:8081/", ClientConfig::default()).expect("client");
        let target = Target {
            op: "t",
            segments: &["taskmanagers", "127.0.0.1:39073-8e6168", "metrics"],
            query: &[("get", "a,b")],
            job: None,
        };
        let url = c.url(&target).expect("url");
        assert_eq!(
            url.as_str(),
            "http://127.0.0.1:8081/taskmanagers/127.0.0.1:39073-8e6168/metrics?get=a%2Cb"
        );
    }

    #[test]
    fn https_and_garbage_base_urls_are_rejected() {
        for bad in ["https://flink:8081", "not a url", "mailto:x@y"] {
            let err = FlinkClient::new(bad, ClientConfig::default()).expect_err(bad);
            assert!(matches!(
                err,
                Error::Flink {
                    kind: FlinkErrorKind::InvalidRequest { .. },
                    ..
                }
            ));
        }
    }
}
