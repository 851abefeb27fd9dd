//! The logs of a copy that failed outlive its tear-down. A copy's directory goes with it, and
//! so did the JobManager's and the local TaskManagers' logs — the only account of why a copy
//! never registered or never ran, and the place its own error message pointed to. They move to
//! `<profiling root>/failed/<copy>-<ms>/`; only the newest [`KEEP`] stay, so a job whose copies
//! keep failing cannot fill the disk.

use std::path::{Path, PathBuf};

/// How many failed copies' logs are kept.
pub const KEEP: usize = 8;

/// Where the logs of failed copies go, beside the copies' own directories.
pub fn failed_root(copy_dir: &Path) -> PathBuf {
    copy_dir
        .parent()
        .unwrap_or_else(|| Path::new("."))
        .join("failed")
}

/// Moves `copy_dir/log` to `failed/<name>-<now_ms>` and prunes the oldest beyond `keep`.
/// Returns where the logs now are (None: the copy never wrote a log directory).
pub fn keep(
    copy_dir: &Path,
    name: &str,
    now_ms: u64,
    keep: usize,
) -> std::io::Result<Option<PathBuf>> {
    let logs = copy_dir.join("log");
    if !logs.is_dir() {
        return Ok(None);
    }
    let root = failed_root(copy_dir);
    std::fs::create_dir_all(&root)?;
    let dest = root.join(format!("{name}-{now_ms}"));
    std::fs::rename(&logs, &dest)?;
    prune(&root, keep)?;
    Ok(Some(dest))
}

/// Removes all but the `keep` newest entries (by the time in their name; entries without one
/// are not ours and stay).
fn prune(root: &Path, keep: usize) -> std::io::Result<()> {
    let mut kept: Vec<(u64, PathBuf)> = std::fs::read_dir(root)?
        .flatten()
        .filter_map(|entry| {
            let name = entry.file_name().to_string_lossy().into_owned();
            let (_, ms) = name.rsplit_once('-')?;
            Some((ms.parse().ok()?, entry.path()))
        })
        .collect();
    kept.sort_unstable_by_key(|(ms, _)| std::cmp::Reverse(*ms));
    for (_, old) in kept.into_iter().skip(keep) {
        std::fs::remove_dir_all(old)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn copy_with_log(root: &Path, name: &str) -> PathBuf {
        let dir = root.join(name);
        std::fs::create_dir_all(dir.join("log")).unwrap();
        std::fs::write(
            dir.join("log/taskmanager.log"),
            format!("{name} never registered"),
        )
        .unwrap();
        dir
    }

    #[test]
    fn a_failed_copys_logs_survive_its_directory() {
        let root = tempfile::tempdir().unwrap();
        let dir = copy_with_log(root.path(), "prof-b1-c0");
        let kept = keep(&dir, "prof-b1-c0", 1_000, KEEP).unwrap().unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(kept, root.path().join("failed/prof-b1-c0-1000"));
        assert_eq!(
            std::fs::read_to_string(kept.join("taskmanager.log")).unwrap(),
            "prof-b1-c0 never registered"
        );
    }

    #[test]
    fn only_the_newest_are_kept() {
        let root = tempfile::tempdir().unwrap();
        for (i, at) in [5_000, 1_000, 3_000, 4_000].into_iter().enumerate() {
            let name = format!("prof-b{i}-c0");
            let dir = copy_with_log(root.path(), &name);
            keep(&dir, &name, at, 2).unwrap();
        }
        let stranger = root.path().join("failed/notes");
        std::fs::create_dir_all(&stranger).unwrap();
        keep(
            &copy_with_log(root.path(), "prof-b9-c1"),
            "prof-b9-c1",
            2_000,
            2,
        )
        .unwrap();
        let mut left: Vec<String> = std::fs::read_dir(root.path().join("failed"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(left, ["notes", "prof-b0-c0-5000", "prof-b3-c0-4000"]);
    }

    #[test]
    fn a_copy_without_logs_leaves_nothing() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("prof-b1-c0");
        std::fs::create_dir_all(&dir).unwrap();
        assert_eq!(keep(&dir, "prof-b1-c0", 1, KEEP).unwrap(), None);
        assert!(!root.path().join("failed").exists());
    }
}
