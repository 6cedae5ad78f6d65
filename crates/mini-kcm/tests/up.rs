//! `mini-kcm up` as a user runs it: two instances side by side (separate state dirs, free ports), each
//! serving its own Ready nodes; Ctrl-C (SIGINT) and SIGTERM stop every component and free every port;
//! and even a SIGKILLed `mini-kcm up` leaves no component behind.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use mini_kcm_local_plane::{PlaneInfo, port_in_use};

const START_TIMEOUT: Duration = Duration::from_secs(180);
const STOP_TIMEOUT: Duration = Duration::from_secs(30);

struct Up {
    child: Child,
    state_dir: PathBuf,
    info: PlaneInfo,
}

fn state_dir(tag: &str) -> PathBuf {
    std::env::temp_dir().join(format!("mini-kcm-up-test-{}-{tag}", std::process::id()))
}

/// Builds the control plane first (minutes on a fresh machine, instant when cached), so that the start-up
/// timeout below only measures start-up.
fn build_plane_once() {
    static BUILT: std::sync::OnceLock<()> = std::sync::OnceLock::new();
    BUILT.get_or_init(|| {
        let status = Command::new(env!("CARGO_BIN_EXE_mini-kcm"))
            .arg("build-plane")
            .stdin(Stdio::null())
            .status()
            .expect("run mini-kcm build-plane");
        assert!(status.success(), "mini-kcm build-plane failed: {status}");
    });
}

/// Starts `mini-kcm up` and returns once it printed that it is running.
fn start(tag: &str, nodes: usize, workload_controllers: &str) -> Up {
    build_plane_once();
    let state_dir = state_dir(tag);
    let mut child = Command::new(env!("CARGO_BIN_EXE_mini-kcm"))
        .args([
            "up",
            "--nodes",
            &nodes.to_string(),
            "--workload-controllers",
            workload_controllers,
        ])
        .arg("--state-dir")
        .arg(&state_dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn mini-kcm up");
    let stdout = child.stdout.take().expect("stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            println!("[up] {line}");
            if line.contains("mini-kcm: running") {
                let _ = tx.send(());
            }
        }
    });
    if rx.recv_timeout(START_TIMEOUT).is_err() {
        let _ = child.kill();
        panic!("mini-kcm up ({tag}) did not report running within {START_TIMEOUT:?}");
    }
    let info = PlaneInfo::load(&state_dir).expect("plane.json");
    Up {
        child,
        state_dir,
        info,
    }
}

fn kubectl(info: &PlaneInfo, args: &[&str], stdin: Option<&str>) -> String {
    use std::io::Write;
    let mut child = Command::new(info.bin_dir.join("kubectl"))
        .arg("--kubeconfig")
        .arg(&info.kubeconfig)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run kubectl");
    if let Some(input) = stdin {
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(input.as_bytes())
            .expect("write stdin");
    }
    let out = child.wait_with_output().expect("kubectl output");
    assert!(
        out.status.success(),
        "kubectl {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

const COPY_REPLICA_SET: &str = r#"
apiVersion: minikcm.dev/v1
kind: ReplicaSet
metadata: {name: web}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: c, image: pause}]}
"#;

fn kubectl_ready_nodes(info: &PlaneInfo) -> usize {
    let out = Command::new(info.bin_dir.join("kubectl"))
        .arg("--kubeconfig")
        .arg(&info.kubeconfig)
        .args(["get", "nodes", "--no-headers"])
        .output()
        .expect("run kubectl");
    assert!(
        out.status.success(),
        "kubectl failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.split_whitespace().nth(1) == Some("Ready"))
        .count()
}

fn alive(pid: u32) -> bool {
    // A zombie still has a /proc entry; only a running (or sleeping) process counts.
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|stat| {
            let state = stat
                .rsplit(')')
                .next()
                .and_then(|rest| rest.split_whitespace().next());
            state != Some("Z")
        })
        .unwrap_or(false)
}

fn send(child: &Child, signal: libc::c_int) {
    let pid = libc::pid_t::try_from(child.id()).expect("pid");
    // SAFETY: plain syscall on our own child.
    assert_eq!(unsafe { libc::kill(pid, signal) }, 0);
}

/// Waits (polling process state, which has no event to watch) until every component pid is gone and
/// every port is free.
fn assert_all_gone(info: &PlaneInfo) {
    let deadline = Instant::now() + STOP_TIMEOUT;
    loop {
        let alive_pids: Vec<_> = info.pids.iter().filter(|(_, pid)| alive(**pid)).collect();
        let busy_ports: Vec<_> = info
            .ports
            .iter()
            .filter(|(_, port)| port_in_use(**port))
            .collect();
        if alive_pids.is_empty() && busy_ports.is_empty() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "after stopping: still alive {alive_pids:?}, ports still bound {busy_ports:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn cleanup(dir: &Path) {
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn two_planes_side_by_side_stop_cleanly_on_sigint_and_sigterm() {
    // `a` runs mini-kcm's controllers in-process (the default), `b` none.
    let mut a = start("a", 2, "mini");
    let mut b = start("b", 1, "none");
    assert_ne!(a.info.ports, b.info.ports, "each plane has its own ports");
    assert_eq!(kubectl_ready_nodes(&a.info), 2);
    assert_eq!(kubectl_ready_nodes(&b.info), 1);
    for info in [&a.info, &b.info] {
        assert_eq!(
            info.pids.len(),
            5,
            "etcd, apiserver, scheduler, controller-manager, kwok"
        );
        assert!(info.pids.values().all(|pid| alive(*pid)));
    }

    // The README's main job: the in-process controllers reconcile a CRD copy on plane `a`
    // (`kubectl wait` watches; it does not poll).
    kubectl(&a.info, &["apply", "-f", "-"], Some(COPY_REPLICA_SET));
    kubectl(
        &a.info,
        &[
            "wait",
            "--for=jsonpath={.status.readyReplicas}=2",
            "replicasets.minikcm.dev/web",
            "--timeout=60s",
        ],
        None,
    );
    let pods = kubectl(
        &a.info,
        &["get", "pods", "-l", "app=web", "--no-headers"],
        None,
    );
    assert_eq!(
        pods.lines().filter(|l| l.contains("Running")).count(),
        2,
        "{pods}"
    );

    // `up` records its manager's address for `mini-kcm explain`, which reads the live view there.
    let addr = std::fs::read_to_string(a.state_dir.join("manager.addr")).expect("manager.addr");
    let explain = Command::new(env!("CARGO_BIN_EXE_mini-kcm"))
        .args(["explain", "rs/web", "--family", "copies", "--manager-addr"])
        .arg(addr.trim())
        .output()
        .expect("run mini-kcm explain");
    let text = String::from_utf8_lossy(&explain.stdout);
    assert!(
        explain.status.success(),
        "{}",
        String::from_utf8_lossy(&explain.stderr)
    );
    assert!(
        text.starts_with("ReplicaSet default/web (copies)"),
        "{text}"
    );
    assert_eq!(
        text.lines()
            .filter(|l| l.contains("Running  ready  owner ReplicaSet/web"))
            .count(),
        2,
        "{text}"
    );

    send(&a.child, libc::SIGINT);
    let status = a.child.wait().expect("wait a");
    assert!(status.success(), "Ctrl-C is a clean stop: {status}");
    assert_all_gone(&a.info);
    // The other plane is untouched by its neighbour's stop.
    assert_eq!(kubectl_ready_nodes(&b.info), 1);

    send(&b.child, libc::SIGTERM);
    let status = b.child.wait().expect("wait b");
    assert!(status.success(), "SIGTERM is a clean stop: {status}");
    assert_all_gone(&b.info);
    cleanup(&a.state_dir);
    cleanup(&b.state_dir);
}

#[test]
fn a_killed_mini_kcm_up_leaves_no_component_behind() {
    let mut c = start("c", 1, "none");
    send(&c.child, libc::SIGKILL);
    let _ = c.child.wait();
    // No handler runs on SIGKILL: the kernel's parent-death signal stops the components.
    assert_all_gone(&c.info);
    cleanup(&c.state_dir);
}

/// A version out of the supported range is refused before anything is built or started, with the range
/// in the message; a malformed one too.
#[test]
fn an_unsupported_kubernetes_version_is_refused_at_once() {
    for (version, expected) in [
        (
            "1.34.4",
            "unsupported Kubernetes version: Kubernetes 1.34.4 is older than the oldest supported minor, 1.35",
        ),
        (
            "latest",
            "unsupported Kubernetes version: \"latest\" is not a Kubernetes version",
        ),
    ] {
        let state_dir = state_dir(&format!("refused-{version}"));
        let out = Command::new(env!("CARGO_BIN_EXE_mini-kcm"))
            .args(["up", "--kubernetes-version", version])
            .arg("--state-dir")
            .arg(&state_dir)
            .stdin(Stdio::null())
            .output()
            .expect("run mini-kcm up");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{version}: {stderr}");
        assert!(stderr.contains(expected), "{version}: {stderr}");
        assert!(
            !state_dir.join("kubeconfig").exists(),
            "{version}: nothing started"
        );
    }
}
