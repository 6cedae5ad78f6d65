//! `mini-kcm env`: the shell lines that let the docs' commands be typed as written, from a fresh clone,
//! in a second terminal beside a running `mini-kcm up`:
//!
//! ```sh
//! eval "$(cargo run -q -p mini-kcm -- env)"
//! ```
//!
//! It prints `export` lines for a POSIX shell: `PATH` gains the folder of this very executable (so
//! `mini-kcm` is the one cargo just built) and the plane's binaries folder (its `kubectl`, of the plane's
//! Kubernetes version), and `KUBECONFIG` names the running plane's admin kubeconfig, the path `up` prints.
//! `mini-kcm explain` then finds the plane's manager through that kubeconfig's folder.
//!
//! Which plane: the one whose state directory `--state-dir` names (the same folder as `up --state-dir`),
//! else the plane `$KUBECONFIG` already names if it runs (so running the line again keeps the plane), else
//! the first plane slot under the cache (`planes/plane-N`) whose `up` still runs. A plane runs while the
//! process named in its `owner.pid` is alive; its `plane.json` (written once the plane is ready) says where
//! its binaries and kubeconfig are. With no running plane it prints nothing and fails, saying how to start
//! one, so `eval` leaves the shell as it was.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::Args;
use mini_kcm_local_plane::{Binaries, PlaneInfo};

/// The file in a state directory naming the pid of the `up` that owns it.
const OWNER_FILE: &str = "owner.pid";
/// The file a plane writes into its state directory once it is ready.
const PLANE_FILE: &str = "plane.json";

#[derive(Debug, Args)]
pub struct EnvArgs {
    /// The state directory of the `mini-kcm up` to use: the folder given to its `--state-dir`. Default:
    /// the plane $KUBECONFIG names, if it runs, else the first running plane under the cache
    /// (~/.cache/mini-kcm/planes/plane-N, or $MINI_KCM_CACHE/planes/plane-N).
    #[arg(long, value_name = "DIR")]
    state_dir: Option<PathBuf>,
}

pub fn run(args: EnvArgs) -> anyhow::Result<()> {
    let planes = Binaries::cache_root().join("planes");
    let slot = running_plane(
        args.state_dir.as_deref(),
        &planes,
        std::env::var_os("KUBECONFIG"),
    )?;
    let info = PlaneInfo::load(&slot.dir)
        .with_context(|| format!("reading the plane of {}", slot.dir.display()))?;
    let exe = std::env::current_exe().context("finding this executable")?;
    let exe_dir = exe
        .parent()
        .with_context(|| format!("{} has no folder", exe.display()))?;
    print!(
        "{}",
        exports(&slot, exe_dir, &info.bin_dir, &info.kubeconfig)?
    );
    Ok(())
}

/// A state directory whose `up` runs.
#[derive(Debug, PartialEq)]
struct RunningPlane {
    dir: PathBuf,
    pid: u32,
}

/// The plane `env` speaks of (see the module comment), or why there is none.
fn running_plane(
    state_dir: Option<&Path>,
    planes: &Path,
    kubeconfig: Option<OsString>,
) -> anyhow::Result<RunningPlane> {
    if let Some(dir) = state_dir {
        let pid = owner(dir).with_context(|| {
            format!(
                "no `mini-kcm up` runs with --state-dir {}: start one there in another terminal \
                 (cargo run -p mini-kcm -- up --state-dir {}) and wait for `mini-kcm: running`",
                dir.display(),
                dir.display()
            )
        })?;
        return ready(RunningPlane {
            dir: dir.to_path_buf(),
            pid,
        });
    }
    let named = kubeconfig.and_then(|paths| {
        std::env::split_paths(&paths)
            .next()
            .and_then(|kubeconfig| kubeconfig.parent().map(Path::to_path_buf))
    });
    if let Some(dir) = named.filter(|dir| dir.join(PLANE_FILE).is_file())
        && let Some(pid) = owner(&dir)
    {
        return ready(RunningPlane { dir, pid });
    }
    let mut slots: Vec<PathBuf> = std::fs::read_dir(planes)
        .map(|entries| entries.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    // plane-2 before plane-10.
    slots.sort_by_key(|slot| {
        let n = slot
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.strip_prefix("plane-"))
            .and_then(|n| n.parse::<u64>().ok());
        (n.is_none(), n, slot.clone())
    });
    let first = slots
        .into_iter()
        .find_map(|dir| owner(&dir).map(|pid| RunningPlane { dir, pid }))
        .with_context(|| {
            format!(
                "no `mini-kcm up` is running (no plane under {} has a live owner): start one in another \
                 terminal (cargo run -p mini-kcm -- up) and wait for `mini-kcm: running`; for a plane \
                 started with --state-dir DIR, give env the same --state-dir DIR",
                planes.display()
            )
        })?;
    ready(first)
}

/// The pid of the process that owns `dir`, if it is alive (a stopped `up` leaves its `owner.pid`).
fn owner(dir: &Path) -> Option<u32> {
    let pid: u32 = std::fs::read_to_string(dir.join(OWNER_FILE))
        .ok()?
        .trim()
        .parse()
        .ok()?;
    Path::new(&format!("/proc/{pid}")).exists().then_some(pid)
}

/// `plane` if it is ready: its `plane.json` was written since its owner took the folder (an older one
/// is a previous plane's).
fn ready(plane: RunningPlane) -> anyhow::Result<RunningPlane> {
    let modified = |file: &str| {
        std::fs::metadata(plane.dir.join(file))
            .and_then(|m| m.modified())
            .ok()
    };
    match (modified(OWNER_FILE), modified(PLANE_FILE)) {
        (Some(owned), Some(written)) if written >= owned => Ok(plane),
        _ => anyhow::bail!(
            "the `mini-kcm up` in {} (pid {}) is still starting: run this again once it prints \
             `mini-kcm: running`",
            plane.dir.display(),
            plane.pid
        ),
    }
}

/// The lines `env` prints: `mini-kcm`'s and the plane's binaries first on `PATH`, `KUBECONFIG`.
fn exports(
    plane: &RunningPlane,
    exe_dir: &Path,
    bin_dir: &Path,
    kubeconfig: &Path,
) -> anyhow::Result<String> {
    fn text(path: &Path) -> anyhow::Result<&str> {
        path.to_str()
            .with_context(|| format!("{} is not UTF-8", path.display()))
    }
    fn on_path(path: &Path) -> anyhow::Result<&str> {
        let path = text(path)?;
        anyhow::ensure!(
            !path.contains(':'),
            "{path} contains ':', so it cannot be on PATH"
        );
        Ok(path)
    }
    let mut folders = vec![on_path(exe_dir)?];
    let bin_dir = on_path(bin_dir)?;
    if !folders.contains(&bin_dir) {
        folders.push(bin_dir);
    }
    Ok(format!(
        "# the plane of `mini-kcm up` (pid {}) in {}\nexport PATH={}\":$PATH\"\nexport KUBECONFIG={}\n",
        plane.pid,
        plane.dir.display(),
        shell_quote(&folders.join(":")),
        shell_quote(text(kubeconfig)?)
    ))
}

/// `text` as one word for a POSIX shell: in single quotes, each `'` written as `'\''`.
fn shell_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// A scratch folder of its own per test.
    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("mini-kcm-env-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    /// A plane folder: `owner` in its `owner.pid`, and a `plane.json` written after it when `ready`.
    fn plane(dir: &Path, owner: u32, ready: bool) {
        std::fs::create_dir_all(dir).unwrap();
        std::fs::write(dir.join(OWNER_FILE), owner.to_string()).unwrap();
        if ready {
            std::fs::write(dir.join(PLANE_FILE), "{}").unwrap();
        }
    }

    /// Above the kernel's pid limit (2^22): no such process.
    const DEAD: u32 = 4_194_305;

    #[test]
    fn exports_survive_spaces_and_quotes_in_paths() {
        let running = RunningPlane {
            dir: PathBuf::from("/state"),
            pid: 42,
        };
        let out = exports(
            &running,
            Path::new("/my clone/it's/target/debug"),
            Path::new("/cache dir/bin"),
            Path::new("/state dir/kube config"),
        )
        .unwrap();
        assert_eq!(
            out,
            "# the plane of `mini-kcm up` (pid 42) in /state\n\
             export PATH='/my clone/it'\\''s/target/debug:/cache dir/bin'\":$PATH\"\n\
             export KUBECONFIG='/state dir/kube config'\n"
        );
        // What a shell makes of them.
        let shell = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!(
                "{out}printf '%s\\n' \"$KUBECONFIG\" \"${{PATH%%:*}}\" \"$PATH\""
            ))
            .env("PATH", "/usr/bin:/bin")
            .output()
            .unwrap();
        assert!(shell.status.success(), "{shell:?}");
        assert_eq!(
            String::from_utf8(shell.stdout).unwrap(),
            "/state dir/kube config\n/my clone/it's/target/debug\n\
             /my clone/it's/target/debug:/cache dir/bin:/usr/bin:/bin\n"
        );
    }

    #[test]
    fn a_folder_with_a_colon_cannot_go_on_path() {
        let running = RunningPlane {
            dir: PathBuf::from("/state"),
            pid: 1,
        };
        let err = exports(
            &running,
            Path::new("/a:b"),
            Path::new("/bin"),
            Path::new("/k"),
        )
        .unwrap_err();
        assert!(err.to_string().contains("cannot be on PATH"), "{err}");
    }

    #[test]
    fn no_running_plane_is_a_clear_error() {
        let planes = scratch("none");
        let err = running_plane(None, &planes, None).unwrap_err().to_string();
        assert!(err.contains("no `mini-kcm up` is running"), "{err}");
        assert!(err.contains("cargo run -p mini-kcm -- up"), "{err}");
        // A stopped plane leaves its files: still none.
        plane(&planes.join("plane-1"), DEAD, true);
        let err = running_plane(None, &planes, None).unwrap_err().to_string();
        assert!(err.contains("no `mini-kcm up` is running"), "{err}");
        // Nor is a state directory where no `up` runs.
        let err = running_plane(Some(&planes.join("plane-1")), &planes, None)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("no `mini-kcm up` runs with --state-dir") && err.contains("plane-1"),
            "{err}"
        );
        std::fs::remove_dir_all(&planes).unwrap();
    }

    #[test]
    fn the_plane_is_the_one_named_else_the_first_that_runs() {
        let planes = scratch("slots");
        let me = std::process::id();
        plane(&planes.join("plane-1"), DEAD, true);
        plane(&planes.join("plane-2"), me, true);
        plane(&planes.join("plane-10"), me, true);
        let own = planes.join("own");
        plane(&own, me, true);
        let found = |state_dir: Option<&Path>, kubeconfig: Option<&Path>| {
            running_plane(
                state_dir,
                &planes,
                kubeconfig.map(|k| k.as_os_str().to_owned()),
            )
            .unwrap()
            .dir
        };
        assert_eq!(found(None, None), planes.join("plane-2"));
        assert_eq!(found(Some(&own), None), own);
        assert_eq!(
            found(None, Some(&planes.join("plane-10/kubeconfig"))),
            planes.join("plane-10")
        );
        // A kubeconfig of no running plane (the stopped plane-1, or ~/.kube): the first that runs.
        assert_eq!(
            found(None, Some(&planes.join("plane-1/kubeconfig"))),
            planes.join("plane-2")
        );
        assert_eq!(
            running_plane(None, &planes, None).unwrap().pid,
            std::process::id()
        );
        std::fs::remove_dir_all(&planes).unwrap();
    }

    #[test]
    fn a_plane_still_starting_is_told_apart() {
        let planes = scratch("starting");
        // No plane.json yet.
        plane(&planes.join("plane-1"), std::process::id(), false);
        let err = running_plane(None, &planes, None).unwrap_err().to_string();
        assert!(err.contains("is still starting"), "{err}");
        // A previous plane's plane.json, older than the owner's claim.
        let slot = planes.join("plane-1");
        std::fs::write(slot.join(PLANE_FILE), "{}").unwrap();
        let old = std::time::SystemTime::now() - std::time::Duration::from_secs(60);
        std::fs::File::options()
            .write(true)
            .open(slot.join(PLANE_FILE))
            .unwrap()
            .set_modified(old)
            .unwrap();
        let err = running_plane(None, &planes, None).unwrap_err().to_string();
        assert!(err.contains("is still starting"), "{err}");
        std::fs::remove_dir_all(&planes).unwrap();
    }
}
