//! The daemons as child processes, with their logs in files the tests read.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use std::sync::Arc;

use demeter_coordinator::ingest::{Ingest, IngestConfig};
use demeter_coordinator::store::Store;

use crate::{Pki, binary, loopback};

#[derive(Debug)]
pub struct Daemon {
    pub name: String,
    pub child: Option<Child>,
    pub log: PathBuf,
}

impl Daemon {
    fn spawn(name: &str, program: &str, args: &[&str], log: PathBuf) -> Self {
        Self::spawn_env(name, program, args, log, &[])
    }

    fn spawn_env(
        name: &str,
        program: &str,
        args: &[&str],
        log: PathBuf,
        env: &[(&str, &str)],
    ) -> Self {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .unwrap();
        let child = Command::new(binary(program))
            .args(args)
            .envs(env.iter().copied())
            .env_remove("RUST_BACKTRACE")
            .stdin(Stdio::null())
            .stdout(file.try_clone().unwrap())
            .stderr(file)
            .spawn()
            .unwrap();
        Self {
            name: name.to_string(),
            child: Some(child),
            log,
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().unwrap().id()
    }

    pub fn log_text(&self) -> String {
        let mut text = String::new();
        if let Ok(mut f) = std::fs::File::open(&self.log) {
            let _ = f.read_to_string(&mut text);
        }
        text
    }

    /// Waits until the log contains `needle` at least `count` times.
    pub fn wait_for_log(&self, needle: &str, count: usize, timeout: Duration) {
        let start = Instant::now();
        while self.log_text().matches(needle).count() < count {
            assert!(
                start.elapsed() < timeout,
                "{}: {needle:?} did not appear {count}× within {timeout:?}; log:\n{}",
                self.name,
                self.log_text()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub fn kill9(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// SIGTERM, then waits for a clean exit.
    pub fn terminate(&mut self, timeout: Duration) -> std::process::ExitStatus {
        let mut child = self.child.take().expect("daemon already stopped");
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(child.id().to_string())
            .status();
        let start = Instant::now();
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                return status;
            }
            if start.elapsed() > timeout {
                let _ = child.kill();
                panic!("{} did not exit within {timeout:?} of SIGTERM", self.name);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn is_running(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|c| c.try_wait().ok().flatten().is_none())
    }

    /// Resident memory in KiB, from /proc.
    pub fn rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid())).unwrap();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap()
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        self.kill9();
    }
}

pub fn start_coordinator(dir: &Path, pki: &Pki, port: u16) -> Daemon {
    start_coordinator_with(dir, pki, port, "", &[])
}

/// [`start_coordinator`] with more TOML appended to its config (`[flink]`, `[executor]`) and
/// extra environment (e.g. `DEMETER_FAILPOINT`).
pub fn start_coordinator_with(
    dir: &Path,
    pki: &Pki,
    port: u16,
    extra_toml: &str,
    env: &[(&str, &str)],
) -> Daemon {
    let config = dir.join("coordinator.toml");
    let tls = pki.paths("coordinator");
    std::fs::write(
        &config,
        format!(
            "listen = \"127.0.0.1:{port}\"\nstore = \"{}\"\nlog = \"info,quinn=warn\"\n[tls]\nca = \"{}\"\ncert = \"{}\"\nkey = \"{}\"\n{extra_toml}",
            dir.join("store.redb").display(),
            tls.ca.display(),
            tls.cert.display(),
            tls.key.display()
        ),
    )
    .unwrap();
    let log = dir.join("coordinator.log");
    let before = std::fs::read_to_string(&log)
        .map(|t| t.matches("coordinator listening").count())
        .unwrap_or(0);
    let daemon = Daemon::spawn_env(
        "coordinator",
        "demeter-coordinator",
        &["run", "--config", config.to_str().unwrap()],
        log,
        env,
    );
    daemon.wait_for_log("coordinator listening", before + 1, Duration::from_secs(20));
    daemon
}

pub fn start_agent(dir: &Path, pki: &Pki, name: &str, port: u16, interval_ms: u64) -> Daemon {
    start_agent_with(dir, pki, name, port, interval_ms, "")
}

/// [`start_agent`] with more TOML appended to its config (e.g. a `[supervisor]` table).
/// An in-process ingest server on a free loopback port, with the coordinator's identity of
/// `pki` and a store in `dir`, for tests that drive agents through `IngestHandle` directly.
/// Needs a tokio runtime.
pub fn start_ingest(dir: &Path, pki: &Pki) -> Ingest {
    let store = Arc::new(Store::open(&dir.join("store.redb")).unwrap());
    let server = demeter_common::tls::server_config(&pki.identity("coordinator")).unwrap();
    Ingest::start(
        quinn::Endpoint::server(server, loopback(0)).unwrap(),
        store,
        IngestConfig::default(),
    )
}

pub fn start_agent_with(
    dir: &Path,
    pki: &Pki,
    name: &str,
    port: u16,
    interval_ms: u64,
    extra_toml: &str,
) -> Daemon {
    let config = dir.join(format!("{name}.toml"));
    let tls = pki.paths(name);
    std::fs::write(
        &config,
        format!(
            "coordinator = \"127.0.0.1:{port}\"\nlog = \"info,quinn=warn\"\n[tls]\nca = \"{}\"\ncert = \"{}\"\nkey = \"{}\"\n\
             [sampling]\ninterval_ms = {interval_ms}\nbatch_size = 5\nreconnect_initial_ms = 100\nreconnect_max_ms = 1000\n{extra_toml}",
            tls.ca.display(),
            tls.cert.display(),
            tls.key.display()
        ),
    )
    .unwrap();
    Daemon::spawn(
        name,
        "demeter-agent",
        &["--config", config.to_str().unwrap()],
        dir.join(format!("{name}.log")),
    )
}

/// `field=value` from the last log line containing `marker`.
pub fn log_field(log: &str, marker: &str, field: &str) -> Option<u64> {
    let line = log.lines().rev().find(|l| l.contains(marker))?;
    let start = line.find(&format!("{field}="))? + field.len() + 1;
    line[start..]
        .split(|c: char| !c.is_ascii_digit())
        .next()?
        .parse()
        .ok()
}

/// `demeter-coordinator job --coordinator 127.0.0.1:PORT` with the `name` certificate (role
/// `cli` to be let in); append the subcommand.
pub fn job_cli(pki: &Pki, name: &str, port: u16) -> Command {
    let mut command = coordinator_cli(pki, name, "job");
    command
        .args(["--coordinator", &format!("127.0.0.1:{port}")])
        .env_remove("DEMETER_FAILPOINT");
    command
}

/// `demeter-coordinator <subcommand> --ca … --cert … --key …` with the `name` certificate.
pub fn coordinator_cli(pki: &Pki, name: &str, subcommand: &str) -> Command {
    let tls = pki.paths(name);
    let mut command = Command::new(binary("demeter-coordinator"));
    command
        .arg(subcommand)
        .arg("--ca")
        .arg(&tls.ca)
        .arg("--cert")
        .arg(&tls.cert)
        .arg("--key")
        .arg(&tls.key)
        .env_remove("RUST_BACKTRACE");
    command
}
