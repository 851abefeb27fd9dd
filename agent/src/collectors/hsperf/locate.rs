//! Where a JVM's hsperfdata file is.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use crate::collectors::process::ProcStatus;

/// Finds the hsperfdata file of host pid `pid`.
///
/// First in the JVM's own /tmp as seen through `/proc/<pid>/root` under its namespace pid (this
/// sees through systemd `PrivateTmp=` and containers), then in the host's `/tmp` under the host
/// pid. The user directory is found by listing `hsperfdata_*`, which spares resolving the uid to
/// a name in the JVM's own passwd database.
pub fn locate(
    proc_root: &Path,
    host_tmp: &Path,
    pid: u32,
    status: Option<&ProcStatus>,
) -> Option<PathBuf> {
    let euid = status.map(|s| s.euid);
    let namespace_pid = status.and_then(|s| s.nspid).unwrap_or(pid);
    let own_tmp = proc_root.join(pid.to_string()).join("root").join("tmp");
    [(own_tmp, namespace_pid), (host_tmp.to_path_buf(), pid)]
        .into_iter()
        .find_map(|(tmp, id)| choose(candidates_in(&tmp, id), euid))
}

#[derive(Debug)]
struct Candidate {
    path: PathBuf,
    owner: u32,
    modified: Option<SystemTime>,
}

fn candidates_in(tmp: &Path, id: u32) -> Vec<Candidate> {
    let Ok(dir) = std::fs::read_dir(tmp) else {
        return Vec::new();
    };
    let file_name = id.to_string();
    dir.flatten()
        .filter(|e| e.file_name().as_encoded_bytes().starts_with(b"hsperfdata_"))
        .filter_map(|e| {
            let path = e.path().join(&file_name);
            // The JVM never makes this a symlink; following one could read an arbitrary file.
            let meta = std::fs::symlink_metadata(&path).ok()?;
            meta.is_file().then(|| Candidate {
                path,
                owner: meta.uid(),
                modified: meta.modified().ok(),
            })
        })
        .collect()
}

/// Prefers the file owned by the JVM's user (a same-numbered file of another user is a leftover
/// of a dead JVM), then the most recently written.
fn choose(candidates: Vec<Candidate>, euid: Option<u32>) -> Option<PathBuf> {
    candidates
        .into_iter()
        .max_by_key(|c| (Some(c.owner) == euid, c.modified))
        .map(|c| c.path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn candidate(name: &str, owner: u32, age_s: u64) -> Candidate {
        Candidate {
            path: PathBuf::from(name),
            owner,
            modified: Some(SystemTime::UNIX_EPOCH + Duration::from_secs(1_000 - age_s)),
        }
    }

    #[test]
    fn prefers_the_jvm_owner_then_the_newest() {
        let both = || {
            vec![
                candidate("stale-other-user", 0, 1),
                candidate("own", 1000, 500),
            ]
        };
        assert_eq!(choose(both(), Some(1000)), Some(PathBuf::from("own")));
        assert_eq!(
            choose(both(), None),
            Some(PathBuf::from("stale-other-user"))
        );
        assert_eq!(choose(Vec::new(), Some(1000)), None);
    }
}
