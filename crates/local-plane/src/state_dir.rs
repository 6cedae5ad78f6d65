//! Where one plane keeps its state (certificates, kubeconfig, etcd data, logs), and who owns it.
//!
//! Without `--state-dir`, a plane takes the first free slot `planes/plane-N` under the cache root: a single
//! `mini-kcm up` always lands in `plane-1` (a stable kubeconfig path), a second one beside it in `plane-2`.
//! A slot is owned by whoever holds an exclusive `flock` on its `owner.pid` file: taking it is atomic (two
//! planes starting at once, even in one process, cannot both win) and the kernel releases it when the owner
//! dies, so there are no stale claims. The file also names the owner's pid for people.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::PlaneError;

const OWNER_FILE: &str = "owner.pid";

/// A state directory owned by this process until dropped.
#[derive(Debug)]
pub(crate) struct StateDir {
    path: PathBuf,
    /// Holds the lock; closing it (on drop or death) releases the slot.
    owner_file: File,
}

impl StateDir {
    /// Takes `explicit` (wiping it), or the first free slot under `root`.
    pub(crate) fn acquire(explicit: Option<&Path>, root: &Path) -> Result<Self, PlaneError> {
        if let Some(dir) = explicit {
            return Self::try_take(dir)?.ok_or_else(|| PlaneError::StateDirInUse {
                dir: dir.to_path_buf(),
                pid: recorded_owner(dir).unwrap_or(0),
            });
        }
        for n in 1.. {
            if let Some(taken) = Self::try_take(&root.join(format!("plane-{n}")))? {
                return Ok(taken);
            }
        }
        unreachable!("some slot is always free")
    }

    /// `Some` if we got the slot's lock (and then wiped what a previous plane left), `None` if another
    /// plane holds it.
    fn try_take(path: &Path) -> Result<Option<Self>, PlaneError> {
        std::fs::create_dir_all(path)
            .map_err(|e| PlaneError::io(format!("creating {}", path.display()), e))?;
        let owner_path = path.join(OWNER_FILE);
        let mut owner = File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&owner_path)
            .map_err(|e| PlaneError::io(format!("opening {}", owner_path.display()), e))?;
        // An exclusive lock (flock on Linux) that fails instead of waiting when someone holds it.
        match owner.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => return Ok(None),
            Err(std::fs::TryLockError::Error(e)) => {
                return Err(PlaneError::io(
                    format!("locking {}", owner_path.display()),
                    e,
                ));
            }
        }
        // Remove what a previous plane left behind, but never anything we did not create.
        for sub in ["pki", "etcd", "logs", "kwok"] {
            let p = path.join(sub);
            if p.exists() {
                std::fs::remove_dir_all(&p)
                    .map_err(|e| PlaneError::io(format!("cleaning {}", p.display()), e))?;
            }
        }
        owner
            .set_len(0)
            .and_then(|()| write!(owner, "{}", std::process::id()))
            .map_err(|e| PlaneError::io("writing owner.pid", e))?;
        Ok(Some(StateDir {
            path: path.to_path_buf(),
            owner_file: owner,
        }))
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for StateDir {
    fn drop(&mut self) {
        // Unlock explicitly rather than by closing: a child forked at this moment shares the open file
        // until it execs, and closing our descriptor alone would leave the lock held that long.
        let _ = self.owner_file.unlock();
    }
}

/// The pid written in `dir/owner.pid` (for error messages).
fn recorded_owner(dir: &Path) -> Option<u32> {
    std::fs::read_to_string(dir.join(OWNER_FILE))
        .ok()?
        .trim()
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_taken_in_order_and_released_on_drop() {
        let root = std::env::temp_dir().join(format!("mini-kcm-slots-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let first = StateDir::acquire(None, &root).unwrap();
        assert_eq!(first.path(), root.join("plane-1"));
        // Held (even by this very process): the next plane gets the next slot.
        let second = StateDir::acquire(None, &root).unwrap();
        assert_eq!(second.path(), root.join("plane-2"));
        let err = StateDir::acquire(Some(&root.join("plane-1")), &root).unwrap_err();
        assert!(
            matches!(err, PlaneError::StateDirInUse { pid, .. } if pid == std::process::id()),
            "{err}"
        );
        drop(first);
        let again = StateDir::acquire(None, &root).unwrap();
        assert_eq!(
            again.path(),
            root.join("plane-1"),
            "a released slot is free again"
        );
        drop((second, again));
        std::fs::remove_dir_all(&root).unwrap();
    }
}
