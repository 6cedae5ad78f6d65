//! Child processes of the plane: output to a log file, own process group, never outliving us.
//!
//! Three rules keep `mini-kcm up` and the tests from leaving orphans behind:
//! - every child gets `PR_SET_PDEATHSIG(SIGKILL)`, so the kernel kills it if we die, even by SIGKILL;
//! - the kernel ties that signal to the *thread* that forked the child, so all children are forked by one
//!   launcher thread that lives as long as the process (a tokio worker thread may exit at any time);
//! - each child runs in its own process group, so a Ctrl-C in the terminal reaches only us and we stop
//!   the children in order ([`ManagedProcess::stop`]).

use std::fs::File;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::OnceLock;
use std::sync::mpsc;
use std::time::Duration;

use crate::PlaneError;

type SpawnRequest = (Command, mpsc::Sender<std::io::Result<Child>>);

fn launcher() -> &'static std::sync::Mutex<mpsc::Sender<SpawnRequest>> {
    static LAUNCHER: OnceLock<std::sync::Mutex<mpsc::Sender<SpawnRequest>>> = OnceLock::new();
    LAUNCHER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<SpawnRequest>();
        std::thread::Builder::new()
            .name("mini-kcm-launcher".into())
            .spawn(move || {
                for (mut command, reply) in rx {
                    let _ = reply.send(command.spawn());
                }
                // The sender lives in a static, so this loop only ends when the process does.
            })
            .expect("spawning the launcher thread");
        std::sync::Mutex::new(tx)
    })
}

fn spawn_on_launcher(command: Command) -> std::io::Result<Child> {
    let (reply_tx, reply_rx) = mpsc::channel();
    launcher()
        .lock()
        .map_err(|_| std::io::Error::other("launcher lock poisoned"))?
        .send((command, reply_tx))
        .map_err(|_| std::io::Error::other("launcher thread is gone"))?;
    reply_rx
        .recv()
        .map_err(|_| std::io::Error::other("launcher thread dropped the request"))?
}

/// One running component of the plane.
#[derive(Debug)]
pub struct ManagedProcess {
    name: String,
    child: Child,
    log: PathBuf,
}

impl ManagedProcess {
    /// Starts `program args` with stdout and stderr appended to `log`.
    pub fn spawn(
        name: &str,
        program: &Path,
        args: &[String],
        envs: &[(&str, &Path)],
        log: &Path,
    ) -> Result<Self, PlaneError> {
        let out = File::options()
            .create(true)
            .append(true)
            .open(log)
            .map_err(|e| PlaneError::io(format!("opening log {}", log.display()), e))?;
        let err = out
            .try_clone()
            .map_err(|e| PlaneError::io("duplicating a log file handle", e))?;
        let mut command = Command::new(program);
        command
            .args(args)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .process_group(0);
        for (key, value) in envs {
            command.env(key, value);
        }
        // SAFETY: prctl is async-signal-safe and touches no memory of the parent.
        unsafe {
            command.pre_exec(|| {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = spawn_on_launcher(command)
            .map_err(|e| PlaneError::io(format!("starting {} ({})", name, program.display()), e))?;
        tracing::debug!(component = name, pid = child.id(), "started");
        Ok(ManagedProcess {
            name: name.to_string(),
            child,
            log: log.to_path_buf(),
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn log(&self) -> &Path {
        &self.log
    }

    /// `Some(status)` once the process has exited.
    pub fn exited(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// An error carrying the log tail if the process has exited.
    pub fn check_running(&mut self) -> Result<(), PlaneError> {
        match self.exited() {
            None => Ok(()),
            Some(status) => Err(PlaneError::ComponentExited {
                component: self.name.clone(),
                status: status.to_string(),
                log: self.log.clone(),
                tail: log_tail(&self.log, 30),
            }),
        }
    }

    /// SIGTERM, then SIGKILL if it is still running after `grace`; always reaps the child.
    pub async fn stop(mut self, grace: Duration) {
        self.signal(libc::SIGTERM);
        let deadline = tokio::time::Instant::now() + grace;
        while self.exited().is_none() {
            if tokio::time::Instant::now() >= deadline {
                tracing::warn!(component = %self.name, "did not stop after {grace:?}; killing it");
                self.signal(libc::SIGKILL);
                let _ = self.child.wait();
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        tracing::debug!(component = %self.name, "stopped");
    }

    /// SIGKILL at once, as a crash (no chance to hand anything over); reaps the child.
    pub fn kill(mut self) {
        self.signal(libc::SIGKILL);
        let _ = self.child.wait();
    }

    /// [`ManagedProcess::stop`] for code that cannot await (teardown from `Drop`).
    pub(crate) fn stop_blocking(mut self, grace: Duration) {
        self.signal(libc::SIGTERM);
        let deadline = std::time::Instant::now() + grace;
        while self.exited().is_none() {
            if std::time::Instant::now() >= deadline {
                tracing::warn!(component = %self.name, "did not stop after {grace:?}; killing it");
                self.signal(libc::SIGKILL);
                let _ = self.child.wait();
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        tracing::debug!(component = %self.name, "stopped");
    }

    fn signal(&self, signal: libc::c_int) {
        if let Ok(pid) = libc::pid_t::try_from(self.child.id()) {
            // SAFETY: plain syscall on a pid we own and have not reaped yet.
            unsafe {
                libc::kill(pid, signal);
            }
        }
    }
}

impl Drop for ManagedProcess {
    fn drop(&mut self) {
        if self.exited().is_none() {
            self.signal(libc::SIGKILL);
            let _ = self.child.wait();
        }
    }
}

/// The last `lines` lines of a log file (empty if it cannot be read).
pub(crate) fn log_tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read(path).unwrap_or_default();
    let text = String::from_utf8_lossy(&text);
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// How a process was started: enough to start it again the same way (the plane keeps one per
/// component, so a fault test can restart it in place).
#[derive(Debug, Clone)]
pub(crate) struct Recipe {
    program: PathBuf,
    args: Vec<String>,
    envs: Vec<(String, PathBuf)>,
    log: PathBuf,
}

impl Recipe {
    pub(crate) fn new(
        program: &Path,
        args: Vec<String>,
        envs: &[(&str, &Path)],
        log: PathBuf,
    ) -> Self {
        Recipe {
            program: program.to_path_buf(),
            args,
            envs: envs
                .iter()
                .map(|(k, v)| ((*k).to_string(), v.to_path_buf()))
                .collect(),
            log,
        }
    }

    pub(crate) fn spawn(&self, name: &str) -> Result<ManagedProcess, PlaneError> {
        let envs: Vec<(&str, &Path)> = self
            .envs
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_path()))
            .collect();
        ManagedProcess::spawn(name, &self.program, &self.args, &envs, &self.log)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn stop_terminates_and_reaps_a_child() {
        let dir =
            std::env::temp_dir().join(format!("mini-kcm-process-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let log = dir.join("sleep.log");
        let mut p = ManagedProcess::spawn(
            "sleeper",
            Path::new("/bin/sh"),
            &["-c".into(), "echo hello; exec sleep 600".into()],
            &[],
            &log,
        )
        .unwrap();
        let pid = p.pid();
        // The shell writes before it execs into sleep; wait for that so SIGTERM hits `sleep`.
        while !log_tail(&log, 5).contains("hello") {
            assert!(p.check_running().is_ok());
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        p.stop(Duration::from_secs(5)).await;
        // Reaped: the pid no longer names a process of ours.
        assert!(!Path::new(&format!("/proc/{pid}")).exists() || is_zombie_free(pid));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    fn is_zombie_free(pid: u32) -> bool {
        // The pid may have been reused by an unrelated process; it must not be our zombie.
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .map(|s| !s.contains(" Z "))
            .unwrap_or(true)
    }

    #[tokio::test]
    async fn exited_child_reports_its_log_tail() {
        let dir =
            std::env::temp_dir().join(format!("mini-kcm-process-exit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let log = dir.join("fail.log");
        let mut p = ManagedProcess::spawn(
            "failing",
            Path::new("/bin/sh"),
            &["-c".into(), "echo boom-reason; exit 3".into()],
            &[],
            &log,
        )
        .unwrap();
        let _ = p.child.wait();
        let err = p.check_running().unwrap_err().to_string();
        assert!(err.contains("failing exited early"), "{err}");
        assert!(err.contains("boom-reason"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
