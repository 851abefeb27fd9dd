//! Harness for the end-to-end tests: a PKI in a temp dir, the real `demeter-coordinator` and
//! `demeter-agent` binaries as child processes, and raw QUIC peers that misbehave on purpose.

#![allow(clippy::unwrap_used, clippy::expect_used)]

pub mod flink_checks;
pub mod lab;
pub mod peers;
pub mod process;
pub mod proxy;

use std::net::{SocketAddr, UdpSocket};
use std::path::{Path, PathBuf};

use demeter_common::protocol::Role;
use demeter_common::tls;
use time::{Duration, OffsetDateTime};

/// A fresh directory under the target dir, removed when dropped unless the test failed.
#[derive(Debug)]
pub struct Scratch {
    pub path: PathBuf,
}

impl Scratch {
    pub fn new(name: &str) -> Self {
        let path = target_dir()
            .join("e2e")
            .join(format!("{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).unwrap();
        Self { path }
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

/// `target/debug` (or release) of this workspace, found from the running test binary.
pub fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    // …/target/debug/deps/test-binary
    exe.parent().and_then(Path::parent).unwrap().to_path_buf()
}

pub fn binary(name: &str) -> PathBuf {
    let path = target_dir().join(name);
    assert!(
        path.exists(),
        "{} is missing: run `cargo build --workspace --bins` before the end-to-end tests",
        path.display()
    );
    path
}

/// A UDP port that was free a moment ago on loopback.
pub fn free_udp_port() -> u16 {
    UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

pub fn loopback(port: u16) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], port))
}

/// The cluster PKI made with the library the `certs` command uses.
#[derive(Debug)]
pub struct Pki {
    pub dir: PathBuf,
}

impl Pki {
    pub fn new(dir: &Path) -> Self {
        let now = OffsetDateTime::now_utc();
        tls::init_ca_dir(
            dir,
            "e2e",
            now - Duration::hours(1),
            now + Duration::days(1),
        )
        .unwrap();
        let pki = Self {
            dir: dir.to_path_buf(),
        };
        pki.issue("coordinator", Role::Coordinator);
        pki
    }

    pub fn issue(&self, name: &str, role: Role) {
        let now = OffsetDateTime::now_utc();
        tls::issue_into_dir(
            &self.dir,
            name,
            role,
            now - Duration::hours(1),
            now + Duration::days(1),
        )
        .unwrap();
    }

    pub fn paths(&self, name: &str) -> tls::TlsPaths {
        tls::TlsPaths {
            ca: self.dir.join("ca.pem"),
            cert: self.dir.join(format!("{name}.pem")),
            key: self.dir.join(format!("{name}.key")),
        }
    }

    pub fn identity(&self, name: &str) -> tls::NodeIdentity {
        tls::NodeIdentity::load(&self.paths(name)).unwrap()
    }

    pub fn ca(&self) -> tls::PemPair {
        tls::load_ca_dir(&self.dir).unwrap()
    }
}
