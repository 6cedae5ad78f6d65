//! Where one plane keeps its state (certificates, kubeconfig, etcd data, logs), and who owns it.
//!
//! Without `--state-dir`, a plane takes the first free slot `planes/plane-N` under the cache root: a single
//! `mini-kcm up` always lands in `plane-1` (a stable kubeconfig path), a second one beside it in `plane-2`.
//! A slot is free when its `owner.pid` names no live process; its old content is wiped on take-over.

use std::path::{Path, PathBuf};

use crate::PlaneError;

const OWNER_FILE: &str = "owner.pid";

/// A state directory owned by this process until dropped.
#[derive(Debug)]
pub(crate) struct StateDir {
    path: PathBuf,
}

impl StateDir {
    /// Takes `explicit` (wiping it when it is not in use), or the first free slot under `root`.
    pub(crate) fn acquire(explicit: Option<&Path>, root: &Path) -> Result<Self, PlaneError> {
        if let Some(dir) = explicit {
            if let Some(pid) = live_owner(dir) {
                return Err(PlaneError::StateDirInUse {
                    dir: dir.to_path_buf(),
                    pid,
                });
            }
            return Self::take(dir.to_path_buf());
        }
        for n in 1.. {
            let dir = root.join(format!("plane-{n}"));
            if live_owner(&dir).is_none() {
                return Self::take(dir);
            }
        }
        unreachable!("some slot is always free")
    }

    fn take(path: PathBuf) -> Result<Self, PlaneError> {
        // Remove what a previous plane left behind, but never anything we did not create.
        for sub in ["pki", "etcd", "logs", "kwok"] {
            let p = path.join(sub);
            if p.exists() {
                std::fs::remove_dir_all(&p)
                    .map_err(|e| PlaneError::io(format!("cleaning {}", p.display()), e))?;
            }
        }
        std::fs::create_dir_all(&path)
            .map_err(|e| PlaneError::io(format!("creating {}", path.display()), e))?;
        std::fs::write(path.join(OWNER_FILE), std::process::id().to_string())
            .map_err(|e| PlaneError::io("writing owner.pid", e))?;
        Ok(StateDir { path })
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for StateDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(self.path.join(OWNER_FILE));
    }
}

/// The pid in `dir/owner.pid` if that process is alive (this process included).
fn live_owner(dir: &Path) -> Option<u32> {
    let pid: u32 = std::fs::read_to_string(dir.join(OWNER_FILE))
        .ok()?
        .trim()
        .parse()
        .ok()?;
    Path::new(&format!("/proc/{pid}")).exists().then_some(pid)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_taken_in_order_and_released_on_drop() {
        let root = std::env::temp_dir().join(format!("mini-kcm-slots-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        // A slot owned by a live process (pid 1 always exists) is skipped.
        std::fs::create_dir_all(root.join("plane-1")).unwrap();
        std::fs::write(root.join("plane-1").join(OWNER_FILE), "1").unwrap();
        let second = StateDir::acquire(None, &root).unwrap();
        assert_eq!(second.path(), root.join("plane-2"));
        let err = StateDir::acquire(Some(&root.join("plane-1")), &root).unwrap_err();
        assert!(
            matches!(err, PlaneError::StateDirInUse { pid: 1, .. }),
            "{err}"
        );
        drop(second);
        assert!(!root.join("plane-2").join(OWNER_FILE).exists());
        std::fs::remove_dir_all(&root).unwrap();
    }
}
