//! Against a stand-in `taskmanager.sh` that, like Flink's, re-execs through `env` before the
//! long-lived process: each exec leaves `/proc/<pid>/cmdline` empty for a moment, the window
//! the backend must not mistake for a TaskManager that ended.
#![allow(clippy::unwrap_used)]

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

use demeter_common::protocol::TaskManagerSpec;

use super::*;

const JOB: &str = "racing";

fn script(path: &Path, body: &str) {
    std::fs::write(path, body).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

fn backend(root: &Path) -> LocalTaskManagers {
    let home = root.join("flink");
    std::fs::create_dir_all(home.join("bin")).unwrap();
    script(
        &home.join("bin/taskmanager.sh"),
        "#!/usr/bin/env bash\nbin=`dirname \"$0\"`\n\
         exec /usr/bin/env bash \"$bin/console.sh\" \"$@\"\n",
    );
    script(
        &home.join("bin/console.sh"),
        "#!/usr/bin/env bash\nexec /usr/bin/env bash -c 'sleep 60; true' console \"$@\"\n",
    );
    LocalTaskManagers::new(LocalPaths {
        flink_home: home,
        conf_dir: root.join("conf"),
        log_dir: root.join("log"),
    })
}

fn spec() -> TaskManagerSpec {
    TaskManagerSpec {
        id: format!("{}0", prefix(JOB)),
        cluster: "test".into(),
        process_memory_mb: 1024,
        slots: 1,
        cpu_millis: 1000,
        properties: Vec::new(),
    }
}

/// Asks `alive` over and over through the first 300 ms of each of several starts, when the
/// start scripts exec.
#[tokio::test]
async fn a_starting_taskmanager_is_alive_while_its_scripts_exec() {
    let root = tempfile::tempdir().unwrap();
    let tms = backend(root.path());
    let spec = spec();
    for start in 0..8 {
        tms.ensure(JOB, std::slice::from_ref(&spec)).await.unwrap();
        let began = tokio::time::Instant::now();
        let mut asked = 0;
        while began.elapsed() < Duration::from_millis(300) {
            let alive = tms.alive(JOB).await.unwrap();
            assert_eq!(
                alive,
                vec![spec.id.clone()],
                "start {start}, question {asked}"
            );
            asked += 1;
        }
        tms.ensure(JOB, &[]).await.unwrap();
        assert!(tms.alive(JOB).await.unwrap().is_empty());
    }
}

/// `ensure` again right after a start keeps the one TaskManager instead of starting a twin.
#[tokio::test]
async fn ensuring_again_while_the_scripts_exec_starts_no_second_taskmanager() {
    let root = tempfile::tempdir().unwrap();
    let tms = backend(root.path());
    let spec = spec();
    for start in 0..8 {
        tms.ensure(JOB, std::slice::from_ref(&spec)).await.unwrap();
        for _ in 0..20 {
            tms.ensure(JOB, std::slice::from_ref(&spec)).await.unwrap();
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
        let groups = tms.scan(&prefix(JOB)).len();
        tms.ensure(JOB, &[]).await.unwrap();
        assert_eq!(groups, 1, "start {start}");
    }
}
