//! The executor against a real Flink 2.3 session cluster (JobManager from `scripts/flink-lab.sh`,
//! TaskManagers started by the executor's local backend), driven through the real
//! `demeter-coordinator job` CLI, one cluster for all scenarios to keep CI time down:
//!
//! 1. end-to-end: first deployment, an in-place parallelism change on the same TaskManager,
//!    an in-place scale-out onto a second one, an in-place scale-in that stops the TaskManager
//!    Flink left idle, two full restarts (parallelism, memory, slots, checkpoint interval), a
//!    killed TaskManager with its recovery timed;
//! 2. rollback: TaskManagers that cannot start (400m) → the old configuration runs again from
//!    the same savepoint;
//! 3. crash safety: the CLI SIGKILLs itself (`DEMETER_FAILPOINT`) after each step and in the
//!    middle of the stop and the submission; `job resume` always ends with the job RUNNING;
//! 4. REST faults (a proxy in front of the REST port: lost answers, 5xx, hung requests): no
//!    job is ever stopped without a completed savepoint;
//!
//! and at the end a stop-with-savepoint and `scripts/check-exactly-once.py` over everything the
//! job committed. Prints savepoint, downtime and restore figures.
//!
//! Runs only when `DEMETER_LAB` names an installed lab; REST/RPC ports
//! `DEMETER_EXECUTOR_REST_PORT` (18291) / `DEMETER_EXECUTOR_RPC_PORT` (16291).
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "executor_flink/support.rs"]
mod support;

use demeter_coordinator::executor::{Outcome, Strategy};
use demeter_coordinator::flink::JobState;
use demeter_tests::lab::Lab;
use demeter_tests::proxy::{Fault, FaultyProxy, Rule};
use support::{Bench, Figures};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn executor_on_real_flink() {
    let lab = match Lab::from_env() {
        Ok(lab) => lab,
        Err(reason) => {
            println!("SKIPPED executor_on_real_flink: {reason}");
            return;
        }
    };
    let (rest, rpc) = Lab::ports("DEMETER_EXECUTOR", 18291, 16291);
    let jar = lab.bench_jar();
    let cluster = lab.start("executor-test", rest, rpc);
    let mut bench = Bench::new(&lab, &cluster, &jar, rest).await;
    let mut figures = Figures::default();

    end_to_end(&mut bench, &mut figures).await;
    crash_safety(&mut bench).await;
    rest_faults(&mut bench).await;

    let records = bench.final_stop_and_check().await;
    println!("exactly-once: {records} records, none lost or duplicated");
    figures.print();
}

async fn end_to_end(b: &mut Bench, f: &mut Figures) {
    b.register();
    let op = b
        .apply(&[
            "--parallelism",
            "1",
            "--slots",
            "2",
            "--tm-memory",
            "1024m",
            "--tm-cpu",
            "1",
            "--checkpoint-interval",
            "5s",
        ])
        .await;
    assert_eq!(op.strategy, Strategy::Initial);
    b.expect_applied(&op, "p=1,slots=2,mem=1024m,cpu=1,ckpt=5")
        .await;

    let (op, down) = b.apply_timed(&["--parallelism", "2"]).await;
    assert_eq!(op.strategy, Strategy::InPlace);
    let d = b
        .expect_applied(&op, "p=2,slots=2,mem=1024m,cpu=1,ckpt=5")
        .await;
    assert_eq!(
        Some(d.job_id),
        op.from.map(|f| f.job_id),
        "in place keeps the job"
    );
    f.in_place_downtime.push(down);

    // A scale-out onto a second TaskManager: it starts beside the running job, then the
    // same job rescales onto it; no savepoint.
    let (d, down) = b
        .apply_in_place(
            "3",
            "p=3,slots=2,mem=1024m,cpu=1,ckpt=5",
            &[
                "taskmanagers",
                "wait-taskmanagers",
                "rescale",
                "wait-running",
            ],
        )
        .await;
    b.expect_taskmanagers(&d.config).await;
    f.scale_out_downtime.push(down);

    // A scale-in onto one subtask, in place: the same job rescales, then the TaskManager Flink
    // left without a subtask stops (whichever of the two it is); no savepoint.
    let (d, down) = b
        .apply_in_place(
            "1",
            "p=1,slots=2,mem=1024m,cpu=1,ckpt=5",
            &["rescale", "wait-running", "release"],
        )
        .await;
    assert_eq!(d.taskmanager_indices().len(), 1, "{d:?}");
    b.expect_deployment_taskmanagers(&d).await;
    f.in_place_downtime.push(down);
    println!(
        "in-place scale-in 3 → 1: kept {:?}, {down} ms down",
        d.taskmanager_indices()
    );

    // Back onto one TaskManager (and a new size) through a savepoint.
    for (n, (to, expected)) in [
        (
            [
                "--parallelism",
                "2",
                "--tm-memory",
                "1100m",
                "--checkpoint-interval",
                "7s",
                "--slots",
                "2",
            ],
            "p=2,slots=2,mem=1100m,cpu=1,ckpt=7",
        ),
        (
            [
                "--parallelism",
                "2",
                "--tm-memory",
                "1024m",
                "--checkpoint-interval",
                "5s",
                "--slots",
                "1",
            ],
            "p=2,slots=1,mem=1024m,cpu=1,ckpt=5",
        ),
    ]
    .into_iter()
    .enumerate()
    {
        if n == 1 {
            // On one TaskManager: the rollback restarts fewer JVMs.
            rollback(b, f).await;
        }
        let (op, down) = b.apply_timed(&to).await;
        assert_eq!(op.strategy, Strategy::Restart);
        let d = b.expect_applied(&op, expected).await;
        assert_eq!(
            b.restored_from(&d.job_id).await,
            op.savepoint,
            "restored from our savepoint"
        );
        assert_eq!(
            b.checkpoint_interval_ms(&d.job_id).await,
            u64::from(d.config.checkpoint_interval_s) * 1000
        );
        b.expect_taskmanagers(&d.config).await;
        f.restart(&op, down);
    }

    let recovery = b.kill_taskmanager("bench-tm1").await;
    println!("kill -9 bench-tm1: {recovery:?}");
    f.tm_recovery.push(recovery.drained_ms);
}

async fn rollback(b: &mut Bench, f: &mut Figures) {
    let before = b.current();
    let (op, down) = b.apply_timed(&["--tm-memory", "400m"]).await;
    let Some(Outcome::RolledBack { deployment, reason }) = op.outcome() else {
        panic!("expected a rollback: {:#?}", op.log)
    };
    println!("rolled back: {reason}");
    assert_eq!(deployment.config, before.config);
    assert_eq!(b.state(&deployment.job_id).await, Some(JobState::Running));
    assert!(op.savepoint.is_some());
    assert_eq!(
        b.restored_from(&deployment.job_id).await,
        op.savepoint,
        "the same savepoint"
    );
    b.expect_taskmanagers(&before.config).await;
    f.rollback.push(down);
}

async fn crash_safety(b: &mut Bench) {
    let points = [
        "in-step:stop",
        "after-step:stop",
        "after-step:taskmanagers",
        "after-step:wait-taskmanagers",
        "in-step:submit",
        "after-step:submit",
    ];
    for (i, point) in points.into_iter().enumerate() {
        let memory = if i % 2 == 0 { "1100m" } else { "1024m" };
        // Back to one TaskManager of two slots: each crash restarts one JVM, not two.
        let killed = b
            .apply_crashing(&["--tm-memory", memory, "--slots", "2"], point)
            .await;
        assert!(killed, "{point}: the CLI should have died by SIGKILL");
        let op = b.resume().await;
        let current = b.current();
        println!(
            "crash {point}: resumed to {:?}, runs {}",
            op.outcome().map(short),
            current.config
        );
        assert!(
            !matches!(op.outcome(), Some(Outcome::NotStarted { .. }) | None),
            "{point}: {:#?}",
            op.log
        );
        assert_eq!(
            b.state(&current.job_id).await,
            Some(JobState::Running),
            "{point}"
        );
        b.assert_one_running_and_every_stop_saved(point).await;
    }
}

async fn rest_faults(b: &mut Bench) {
    let proxy = FaultyProxy::start(b.rest_addr()).await;
    let scenarios: [(&str, Vec<Rule>, &str); 5] = [
        (
            "stop answer lost",
            vec![
                rule("POST", "/stop", Fault::DropResponse, 1),
                rule("GET", "/savepoints/", Fault::Status(502), 2),
            ],
            "Applied",
        ),
        (
            // The job runs on after a refused stop, so the executor asks again.
            "stop refused once with 503",
            vec![rule("POST", "/stop", Fault::Status(503), 1)],
            "Applied",
        ),
        (
            // Refused however often the executor asks: it gives up with the old job untouched.
            "stop refused with 503 every time",
            vec![rule("POST", "/stop", Fault::Status(503), u32::MAX)],
            "Aborted",
        ),
        (
            "run answer lost, a GET hangs",
            vec![
                rule("POST", "/run", Fault::DropResponse, 1),
                rule("GET", "/taskmanagers", Fault::Hang, 1),
                rule("GET", "/jobs/", Fault::Status(500), 2),
            ],
            "Applied",
        ),
        (
            "run refused with 500",
            vec![rule("POST", "/run", Fault::Status(500), 1)],
            "RolledBack",
        ),
    ];
    for (name, rules, expected) in scenarios {
        proxy.clear();
        for r in rules {
            proxy.add(r);
        }
        let before = b.current();
        let interval = if before.config.checkpoint_interval_s == 6 {
            "5s"
        } else {
            "6s"
        };
        let op = b
            .apply_via(&proxy.url(), &["--checkpoint-interval", interval])
            .await;
        let injected = proxy.injected.lock().unwrap().clone();
        println!(
            "REST faults, {name}: {injected:?} → {:?}",
            op.outcome().map(short)
        );
        assert!(!injected.is_empty(), "{name}: no fault injected");
        assert!(
            format!("{:?}", op.outcome()).starts_with(&format!("Some({expected}")),
            "{name}: {:#?}",
            op.log
        );
        let now = b.current();
        assert_eq!(
            b.state(&now.job_id).await,
            Some(JobState::Running),
            "{name}"
        );
        if expected == "Aborted" {
            assert_eq!(now, before, "{name}: nothing changed");
        }
        b.assert_one_running_and_every_stop_saved(name).await;
        proxy.injected.lock().unwrap().clear();
    }
}

fn rule(method: &'static str, path: &'static str, fault: Fault, times: u32) -> Rule {
    Rule {
        method,
        path_contains: path,
        fault,
        times,
    }
}

fn short(o: &Outcome) -> &'static str {
    match o {
        Outcome::Applied(_) => "Applied",
        Outcome::RolledBack { .. } => "RolledBack",
        Outcome::Aborted { .. } => "Aborted",
        Outcome::NotStarted { .. } => "NotStarted",
    }
}
