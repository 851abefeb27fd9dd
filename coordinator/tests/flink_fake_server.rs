//! The Flink REST client against a scripted fake server: 5xx, slow answers beyond the timeout,
//! dropped connections and malformed JSON. Proves that idempotent GETs are retried, that
//! operation-starting POSTs are sent exactly once, and that failures come back typed.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use demeter_coordinator::flink::{
    ClientConfig, FlinkClient, JarId, JarRunRequest, JobId, ParallelismBounds,
    ResourceRequirements, RetryPolicy, StopRequest, TriggerId, VertexId, VertexResourceRequirement,
};
use demeter_coordinator::{Error, FlinkErrorKind};
use tokio::net::TcpListener;

mod fake_flink;
use fake_flink::{FakeFlink, Reply};

const OVERVIEW: &str = include_str!("../testdata/flink/overview.json");
const JOB: &str = "df04a0e2efab10f9f513094bc1f3fd74";

async fn wait(fake: &FakeFlink, deadline: Duration, poll: Duration) -> Result<String, Error> {
    let (job, trigger) = (JobId::from(JOB), TriggerId::from("t1"));
    fake.client()
        .wait_savepoint(&job, &trigger, deadline, poll)
        .await
}

fn kind(err: Error) -> (&'static str, FlinkErrorKind) {
    match err {
        Error::Flink { op, kind } => (op, kind),
        other => panic!("expected a Flink error, got {other}"),
    }
}

#[tokio::test]
async fn get_is_retried_through_5xx_and_a_dropped_connection() {
    let fake = FakeFlink::start(vec![
        Reply::Json(
            503,
            r#"{"errors":["Service temporarily unavailable due to an ongoing leader election."]}"#,
        ),
        Reply::Drop,
        Reply::Json(200, OVERVIEW),
    ])
    .await;
    let overview = fake.client().overview().await.expect("third try succeeds");
    assert_eq!(overview.flink_version, "2.3.0");
    assert_eq!(fake.requests().len(), 3);
    assert!(
        fake.requests()
            .iter()
            .all(|r| r.starts_with("GET /overview"))
    );
}

#[tokio::test]
async fn slow_get_times_out_and_the_retry_succeeds() {
    let fake = FakeFlink::start(vec![
        Reply::Slow(Duration::from_millis(900), OVERVIEW),
        Reply::Json(200, OVERVIEW),
    ])
    .await;
    let overview = fake.client().overview().await.expect("retry succeeds");
    assert_eq!(overview.slots_total, 2);
    assert_eq!(fake.requests().len(), 2);
}

#[tokio::test]
async fn get_gives_up_after_the_budget_with_the_last_typed_error() {
    let busy = Reply::Json(503, r#"{"errors":["busy"]}"#);
    let fake = FakeFlink::start(vec![busy.clone(), busy.clone(), busy.clone(), busy]).await;
    let (op, k) = kind(fake.client().overview().await.expect_err("all 503"));
    assert_eq!(op, "overview");
    assert_eq!(
        k,
        FlinkErrorKind::Status {
            code: 503,
            body: "busy".into()
        }
    );
    assert_eq!(fake.requests().len(), 3, "max_attempts is 3");
}

#[tokio::test]
async fn stop_with_savepoint_is_sent_once_whatever_fails() {
    let job = JobId::from(JOB);
    let stop = StopRequest {
        target_directory: Some("file:///sp".into()),
        drain: false,
        format: None,
    };
    for (reply, expect_timeout) in [
        (Reply::Json(503, r#"{"errors":["busy"]}"#), false),
        (Reply::Drop, false),
        (
            Reply::Slow(Duration::from_millis(900), r#"{"request-id":"x"}"#),
            true,
        ),
    ] {
        let fake = FakeFlink::start(vec![reply, Reply::Json(200, r#"{"request-id":"abc"}"#)]).await;
        let (op, k) = kind(
            fake.client()
                .stop_with_savepoint(&job, &stop)
                .await
                .expect_err("no retry"),
        );
        assert_eq!(op, "stop_with_savepoint");
        let requests = fake.requests();
        assert_eq!(
            requests.len(),
            1,
            "stop must not be retried: {requests:?} ({k})"
        );
        assert!(requests[0].starts_with(&format!("POST /jobs/{JOB}/stop")));
        assert!(
            requests[0].contains(r#""targetDirectory":"file:///sp""#),
            "{}",
            requests[0]
        );
        match k {
            FlinkErrorKind::Timeout { after } => {
                assert!(expect_timeout);
                assert_eq!(after, Duration::from_millis(300));
            }
            FlinkErrorKind::Status { code: 503, .. } | FlinkErrorKind::Connect { .. } => {
                assert!(!expect_timeout)
            }
            other => panic!("unexpected {other:?}"),
        }
    }
}

#[tokio::test]
async fn run_and_savepoint_posts_are_not_retried() {
    let fake = FakeFlink::start(vec![
        Reply::Drop,
        Reply::Drop,
        Reply::Json(200, r#"{"jobid":"x"}"#),
    ])
    .await;
    let client = fake.client();
    let run = client
        .run_jar(&JarId::from("a.jar"), &JarRunRequest::default())
        .await;
    assert!(matches!(
        kind(run.expect_err("dropped")).1,
        FlinkErrorKind::Connect { .. }
    ));
    let request = demeter_coordinator::flink::SavepointRequest {
        target_directory: None,
        format: None,
    };
    let sp = client.trigger_savepoint(&JobId::from(JOB), &request).await;
    assert!(matches!(
        kind(sp.expect_err("dropped")).1,
        FlinkErrorKind::Connect { .. }
    ));
    assert_eq!(fake.requests().len(), 2, "one request each");
}

#[tokio::test]
async fn malformed_json_is_a_decode_error_without_retry() {
    let fake = FakeFlink::start(vec![Reply::Json(200, r#"{"taskmanagers": 1, "slots"#)]).await;
    let (_, k) = kind(fake.client().overview().await.expect_err("truncated"));
    let FlinkErrorKind::Decode { message } = k else {
        panic!("expected Decode, got {k:?}")
    };
    assert!(message.contains("EOF"), "{message}");
    assert_eq!(fake.requests().len(), 1);
}

#[tokio::test]
async fn missing_job_is_job_not_found() {
    let body = include_str!("../testdata/flink/error_job_not_found.json");
    let fake = FakeFlink::start(vec![Reply::Json(404, body)]).await;
    let job = JobId::from("00000000000000000000000000000000");
    let (op, k) = kind(fake.client().job_details(&job).await.expect_err("404"));
    assert_eq!(op, "job_details");
    assert_eq!(
        k,
        FlinkErrorKind::JobNotFound {
            job_id: job.to_string()
        }
    );
    assert_eq!(fake.requests().len(), 1, "4xx is not retried");
}

#[tokio::test]
async fn refused_connection_is_connect_after_retries() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    drop(listener);
    let client = FlinkClient::new(
        &url,
        ClientConfig {
            retry: RetryPolicy {
                max_attempts: 2,
                base_delay: Duration::from_millis(5),
                max_delay: Duration::from_millis(5),
            },
            ..ClientConfig::default()
        },
    )
    .unwrap();
    let (_, k) = kind(client.overview().await.expect_err("nothing listens"));
    let FlinkErrorKind::Connect { message } = k else {
        panic!("expected Connect, got {k:?}")
    };
    assert!(message.to_lowercase().contains("refused"), "{message}");
}

#[tokio::test]
async fn wait_savepoint_polls_until_completed() {
    let fake = FakeFlink::start(vec![
        Reply::Json(
            200,
            include_str!("../testdata/flink/savepoint_in_progress.json"),
        ),
        Reply::Json(503, r#"{"errors":["blip"]}"#),
        Reply::Json(
            200,
            include_str!("../testdata/flink/savepoint_in_progress.json"),
        ),
        Reply::Json(
            200,
            include_str!("../testdata/flink/savepoint_completed.json"),
        ),
    ])
    .await;
    let location = wait(&fake, Duration::from_secs(5), Duration::from_millis(10))
        .await
        .expect("completes");
    assert!(
        location.contains("/savepoints/savepoint-df04a0-"),
        "{location}"
    );
    assert_eq!(fake.requests().len(), 4);
    assert!(fake.requests()[0].starts_with(&format!("GET /jobs/{JOB}/savepoints/t1")));
}

#[tokio::test]
async fn wait_savepoint_reports_flinks_failure_cause() {
    let failed = include_str!("../testdata/flink/savepoint_failed.json");
    let fake = FakeFlink::start(vec![Reply::Json(200, failed)]).await;
    let err = wait(&fake, Duration::from_secs(5), Duration::from_millis(10))
        .await
        .expect_err("failed savepoint");
    let (op, k) = kind(err);
    assert_eq!(op, "wait_savepoint");
    let FlinkErrorKind::SavepointFailed { root_cause, .. } = k else {
        panic!("got {k:?}")
    };
    assert!(
        root_cause.contains("Failed to create savepoint directory"),
        "{root_cause}"
    );
}

#[tokio::test]
async fn wait_savepoint_stops_at_the_deadline() {
    let in_progress = Reply::Json(
        200,
        include_str!("../testdata/flink/savepoint_in_progress.json"),
    );
    let fake = FakeFlink::start(vec![in_progress; 50]).await;
    let err = wait(&fake, Duration::from_millis(120), Duration::from_millis(30))
        .await
        .expect_err("deadline");
    let (_, k) = kind(err);
    let FlinkErrorKind::SavepointDeadline { waited } = k else {
        panic!("got {k:?}")
    };
    // Gives up once another poll would overrun: after at least deadline - poll.
    assert!(waited > Duration::from_millis(90), "{waited:?}");
    assert!(fake.requests().len() >= 2);
}

#[tokio::test]
async fn upload_sends_multipart_jarfile_once() {
    let dir = std::env::temp_dir().join(format!("demeter-flink-upload-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let jar = dir.join("tiny.jar");
    std::fs::write(&jar, b"PK-not-really-a-jar").unwrap();
    let fake = FakeFlink::start(vec![Reply::Json(
        200,
        r#"{"filename":"/tmp/flink-web-upload/1234_tiny.jar","status":"success"}"#,
    )])
    .await;
    let id = fake.client().upload_jar(&jar).await.expect("upload");
    assert_eq!(id.as_str(), "1234_tiny.jar");
    let request = &fake.requests()[0];
    assert!(request.starts_with("POST /jars/upload"));
    assert!(
        request.contains(r#"name="jarfile"; filename="tiny.jar""#),
        "{request}"
    );
    assert!(request.contains("PK-not-really-a-jar"));

    let not_a_jar = dir.join("tiny.zip");
    std::fs::write(&not_a_jar, b"x").unwrap();
    let (_, k) = kind(
        fake.client()
            .upload_jar(&not_a_jar)
            .await
            .expect_err("not .jar"),
    );
    assert!(matches!(k, FlinkErrorKind::InvalidRequest { .. }));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[tokio::test]
async fn resource_requirements_put_and_cancel_are_retried() {
    let fake = FakeFlink::start(vec![
        Reply::Drop,
        Reply::Json(200, "{}"),
        Reply::Json(503, r#"{"errors":["busy"]}"#),
        Reply::Json(202, "{}"),
    ])
    .await;
    let client = fake.client();
    let job = JobId::from(JOB);
    let bounds = ParallelismBounds {
        lower_bound: 1,
        upper_bound: 3,
    };
    let requirements: ResourceRequirements = [(
        VertexId::from("v1"),
        VertexResourceRequirement {
            parallelism: bounds,
        },
    )]
    .into();
    client
        .set_resource_requirements(&job, &requirements)
        .await
        .expect("second try");
    client.cancel_job(&job).await.expect("second try");
    let requests = fake.requests();
    assert_eq!(requests.len(), 4);
    for put in &requests[..2] {
        assert!(put.starts_with(&format!("PUT /jobs/{JOB}/resource-requirements")));
        assert!(
            put.contains(r#"{"v1":{"parallelism":{"lowerBound":1,"upperBound":3}}}"#),
            "{put}"
        );
    }
    for cancel in &requests[2..] {
        assert!(
            cancel.starts_with(&format!("PATCH /jobs/{JOB}?mode=cancel")),
            "{cancel}"
        );
    }
}
