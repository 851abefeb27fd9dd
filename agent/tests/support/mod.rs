//! Shared by the integration tests: reading `jstat -gc` output, comparing it with
//! [`GcCounters`], and JVMs that are killed when the test ends, pass or fail.

#![allow(dead_code)] // Each test binary uses a different part.

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use demeter_agent::collectors::gc::GcCounters;

pub fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(rel)
}

/// `jstat -gc`'s columns, in order.
pub const COLUMNS: [&str; 19] = [
    "S0C", "S1C", "S0U", "S1U", "EC", "EU", "OC", "OU", "MC", "MU", "CCSC", "CCSU", "YGC", "YGCT",
    "FGC", "FGCT", "CGC", "CGCT", "GCT",
];

/// One `jstat -gc` table (header line, value line) as column → value; `-` becomes `None`.
pub fn parse_jstat(text: &str) -> HashMap<String, Option<f64>> {
    let mut lines = text.lines().filter(|l| !l.trim().is_empty());
    let header: Vec<&str> = lines.next().expect("header").split_whitespace().collect();
    let values: Vec<&str> = lines.next().expect("values").split_whitespace().collect();
    assert_eq!(header.len(), values.len(), "jstat output:\n{text}");
    header
        .into_iter()
        .zip(values)
        .map(|(h, v)| {
            let v = (v != "-").then(|| v.parse::<f64>().expect("number"));
            (h.to_owned(), v)
        })
        .collect()
}

enum Kind {
    /// KiB printed with one decimal; must equal ours rounded the same way. (Not whole KiB: G1
    /// pads each capacity counter by 8 bytes.)
    Capacity,
    /// KiB with one decimal, rounded by jstat.
    Used,
    Count,
    /// Seconds with three decimals.
    Seconds,
}

/// Our value of a column in jstat's units.
fn ours(c: &GcCounters, column: &str) -> (Kind, Option<f64>) {
    let kib = |b: u64| b as f64 / 1024.0;
    let secs = |t: u64| t as f64 / c.hrt_frequency as f64;
    match column {
        "S0C" => (Kind::Capacity, Some(kib(c.survivor0_capacity))),
        "S1C" => (Kind::Capacity, Some(kib(c.survivor1_capacity))),
        "S0U" => (Kind::Used, Some(kib(c.survivor0_used))),
        "S1U" => (Kind::Used, Some(kib(c.survivor1_used))),
        "EC" => (Kind::Capacity, Some(kib(c.eden_capacity))),
        "EU" => (Kind::Used, Some(kib(c.eden_used))),
        "OC" => (Kind::Capacity, Some(kib(c.old_capacity))),
        "OU" => (Kind::Used, Some(kib(c.old_used))),
        "MC" => (Kind::Capacity, Some(kib(c.metaspace_capacity))),
        "MU" => (Kind::Used, Some(kib(c.metaspace_used))),
        "CCSC" => (Kind::Capacity, c.compressed_class_capacity.map(kib)),
        "CCSU" => (Kind::Used, c.compressed_class_used.map(kib)),
        "YGC" => (Kind::Count, Some(c.young_gc_count as f64)),
        "YGCT" => (Kind::Seconds, Some(secs(c.young_gc_ticks))),
        "FGC" => (Kind::Count, Some(c.full_gc_count as f64)),
        "FGCT" => (Kind::Seconds, Some(secs(c.full_gc_ticks))),
        "CGC" => (Kind::Count, c.concurrent_gc_count.map(|n| n as f64)),
        "CGCT" => (Kind::Seconds, c.concurrent_gc_ticks.map(secs)),
        "GCT" => (Kind::Seconds, Some(secs(c.total_gc_ticks()))),
        other => panic!("unknown jstat column {other}"),
    }
}

/// Every column where our counters disagree with jstat beyond its printed precision.
pub fn mismatches(jstat: &HashMap<String, Option<f64>>, c: &GcCounters) -> Vec<String> {
    let mut out = Vec::new();
    for column in COLUMNS {
        let theirs = *jstat
            .get(column)
            .unwrap_or_else(|| panic!("jstat lacks {column}"));
        let (kind, mine) = ours(c, column);
        let ok = match (theirs, mine) {
            (None, None) => true,
            (Some(t), Some(m)) => match kind {
                Kind::Capacity => (m * 10.0).round() / 10.0 == t,
                Kind::Count => t == m,
                // Half a unit of the last printed digit, plus float slack.
                Kind::Used => (t - m).abs() <= 0.05 + 1e-9,
                Kind::Seconds => (t - m).abs() <= 0.0005 + 1e-9,
            },
            _ => false,
        };
        if !ok {
            out.push(format!("{column}: jstat {theirs:?}, ours {mine:?}"));
        }
    }
    out
}

/// A child JVM killed (and reaped) on drop, so a failing assertion does not leave it running.
#[derive(Debug)]
pub struct JvmGuard {
    pub child: Child,
}

impl JvmGuard {
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for JvmGuard {
    /// SIGTERM first, so the JVM deletes its hsperfdata file; SIGKILL if it lingers.
    fn drop(&mut self) {
        let _ = Command::new("kill").arg(self.pid().to_string()).status();
        for _ in 0..50 {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Writes `source` as `<dir>/<class path>.java`, compiles it there and returns the class dir.
pub fn compile(dir: &Path, class: &str, source: &str) -> PathBuf {
    let file = dir.join(format!("{}.java", class.replace('.', "/")));
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    std::fs::write(&file, source).unwrap();
    let classes = dir.join("classes");
    let status = Command::new("javac")
        .arg("-d")
        .arg(&classes)
        .arg(&file)
        .status()
        .expect("javac must be installed for this test");
    assert!(status.success(), "javac failed");
    classes
}

/// Starts `java <args>` and waits until it prints `ready` (its allocations are then done).
pub fn start_java(args: &[&str]) -> JvmGuard {
    let child = Command::new("java")
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("java must be installed for this test");
    let mut guard = JvmGuard { child };
    let stdout = guard.child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if line.trim() == "ready" {
                let _ = tx.send(());
            }
        }
    });
    // Generous: the machine is shared with other builds and JVMs.
    rx.recv_timeout(Duration::from_secs(120))
        .expect("JVM did not report ready");
    guard
}

/// A program that allocates, collects (so every GC counter is non-trivial), then idles so the
/// counters stay still while they are compared.
pub fn idle_program(package: Option<&str>, class: &str) -> String {
    let package = package
        .map(|p| format!("package {p};\n"))
        .unwrap_or_default();
    format!(
        r#"{package}
public class {class} {{
    static Object keep;
    public static void main(String[] args) throws Exception {{
        java.util.List<byte[]> l = new java.util.ArrayList<>();
        for (int i = 0; i < 300; i++) {{
            l.add(new byte[256 * 1024]);
            if (l.size() > 40) l.remove(0);
        }}
        keep = l;
        System.gc();
        System.out.println("ready");
        System.out.flush();
        while (true) Thread.sleep(60_000);
    }}
}}
"#
    )
}
