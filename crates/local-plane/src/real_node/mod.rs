//! The optional real node: containerd, the kubelet and kube-proxy on this host, registered as one more
//! node beside the simulated ones, so mini-kcm's own image, manifests, probes and leader election can run
//! as real pods (`mini-kcm up --real-node`, tests/e2e/real_node.rs).
//!
//! - containerd, runc and the CNI plug-ins come from the distribution (deploy/real-node/ensure-runtime.sh);
//!   the kubelet and kube-proxy from the same k8s.io/kubernetes module as the rest of the plane.
//! - No registry is needed: the sandbox image is built here (deploy/real-node/build-images.sh) and every
//!   image is imported with `ctr images import` before the kubelet starts.
//! - The node is tainted [`REAL_NODE_TAINT`] (NoSchedule), so only pods that tolerate it land there.
//! - Pods reach the API server through the `kubernetes` Service: the API server listens on all addresses
//!   and advertises the bridge's gateway address, and kube-proxy forwards the Service to it.
//! - One real node per host: kube-proxy's rules and the bridge are host-wide, so a host lock
//!   (`/run/mini-kcm-real-node.lock`) makes a second `--real-node` fail with a clear message instead of
//!   breaking the first. Planes without a real node are unaffected.
//! - Stopping it (also when the plane is dropped) removes every process, mount, network namespace,
//!   cgroup and iptables rule it created ([`sweep`]).

mod config;
mod sweep;

use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::health::wait_until;
use crate::pki::{PkiFiles, REAL_NODE_NAME};

use crate::ports::free_ports;
use crate::{Binaries, ManagedProcess, PlaneError, nodes};

/// The bridge the pods are attached to (one per host, see the module documentation).
pub(crate) const BRIDGE: &str = "mkcm0";
/// The pods' addresses.
pub(crate) const POD_SUBNET: &str = "10.86.0.0/24";
/// The bridge's own address: the node's InternalIP, where the kubelet listens and where the `kubernetes`
/// Service leads.
pub(crate) const GATEWAY: &str = "10.86.0.1";
/// The cgroup (in every hierarchy) that holds all pods of the real node.
pub const CGROUP_ROOT: &str = "/mini-kcm-real-node";
/// The taint (effect NoSchedule) and label of the real node.
pub const REAL_NODE_TAINT: (&str, &str) = ("mini-kcm.dev/real-node", "true");
/// The image of deploy/real-node/build-images.sh: the pods' sandbox (`/pause`), `/http-get` and
/// `/https-get`.
pub const NODE_TOOLS_IMAGE: &str = "mini-kcm.local/node-tools:1";

const HOST_LOCK: &str = "/run/mini-kcm-real-node.lock";
/// Part of the containerd socket path of every real node; the shims carry it on their command line.
const SHIM_MARKER: &str = "real-node/containerd/containerd.sock";
const BUILD_SCRIPT: &str = include_str!("../../../../deploy/real-node/build-images.sh");
const PAUSE_SOURCE: &str = include_str!("../../../../deploy/real-node/pause.c");
const HTTP_GET_SOURCE: &str = include_str!("../../../../deploy/real-node/http-get.c");
const HTTPS_GET_SOURCE: &str = include_str!("../../../../deploy/real-node/https-get.c");

/// What the real node should run besides the sandbox image.
#[derive(Debug, Clone, Default)]
pub struct RealNodeOptions {
    /// Image archives (`docker save` or OCI) to import into the node's containerd before it starts.
    pub images: Vec<PathBuf>,
}

/// Where the real node is and what starting it cost; part of `plane.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RealNodeInfo {
    pub name: String,
    pub internal_ip: String,
    pub pod_subnet: String,
    pub containerd_socket: PathBuf,
    pub kubelet_port: u16,
    /// Component name to pid (containerd, kubelet, kube-proxy).
    pub pids: std::collections::BTreeMap<String, u32>,
    /// Archive path and the seconds `ctr images import` took for it.
    pub imports: Vec<(PathBuf, f64)>,
    /// From starting containerd to the node being Ready (image imports included).
    pub startup_seconds: f64,
}

/// A real node on this host; [`RealNode::stop`] (or dropping it) removes it again.
#[derive(Debug)]
pub(crate) struct RealNode {
    dir: PathBuf,
    bin_dir: PathBuf,
    /// Held while the node exists (see the module documentation).
    _host_lock: File,
    processes: Vec<ManagedProcess>,
    socket: PathBuf,
    stopped: bool,
}

impl RealNode {
    /// Takes the host lock, removes what an earlier (killed) real node left, and creates the bridge and
    /// the pods' cgroup. Runs before the API server starts, which is told to advertise [`GATEWAY`].
    pub(crate) fn prepare(plane_dir: &Path, binaries: &Binaries) -> Result<Self, PlaneError> {
        check_host_tools()?;
        let host_lock = File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(HOST_LOCK)
            .map_err(|e| PlaneError::io(format!("opening {HOST_LOCK}"), e))?;
        // SAFETY: flock on a descriptor we own; LOCK_NB makes it fail instead of waiting.
        if unsafe { libc::flock(host_lock.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
            return Err(PlaneError::RealNodeInUse {
                lock: PathBuf::from(HOST_LOCK),
            });
        }
        let dir = plane_dir.join("real-node");
        let node = RealNode {
            socket: dir.join("containerd").join("containerd.sock"),
            dir,
            bin_dir: binaries.dir().to_path_buf(),
            _host_lock: host_lock,
            processes: Vec::new(),
            stopped: false,
        };
        let report = sweep::sweep(&node.dir, SHIM_MARKER, &node.bin_dir.join("kube-proxy"));
        if !report.problems.is_empty() {
            return Err(PlaneError::RealNode(format!(
                "an earlier real node left things behind that could not be removed: {}",
                report.problems.join("; ")
            )));
        }
        if node.dir.exists() {
            std::fs::remove_dir_all(&node.dir)
                .map_err(|e| PlaneError::io(format!("cleaning {}", node.dir.display()), e))?;
        }
        for sub in [
            "containerd/root",
            "containerd/state",
            "cni/net.d",
            "cni/ipam",
            "kubelet",
            "pod-logs",
            "kube-proxy",
        ] {
            let path = node.dir.join(sub);
            std::fs::create_dir_all(&path)
                .map_err(|e| PlaneError::io(format!("creating {}", path.display()), e))?;
        }
        create_bridge()?;
        create_cgroup_root()?;
        Ok(node)
    }

    /// Starts containerd, imports the images, starts the kubelet and kube-proxy and waits until the node
    /// is Ready.
    pub(crate) async fn start(
        &mut self,
        options: &RealNodeOptions,
        pki: &PkiFiles,
        server: &str,
        client: &kube::Client,
        log_dir: &Path,
        timeout: Duration,
    ) -> Result<RealNodeInfo, PlaneError> {
        let started = Instant::now();
        let dir = self.dir.clone();
        let log = |name: &str| log_dir.join(format!("{name}.log"));

        // containerd
        let containerd_config = dir.join("containerd").join("config.toml");
        write(
            &containerd_config,
            &config::containerd(
                &dir.join("containerd/root"),
                &dir.join("containerd/state"),
                &self.socket,
                &dir.join("cni/net.d"),
            ),
        )?;
        write(
            &dir.join("cni/net.d/10-mini-kcm.conflist"),
            &config::cni_network(&dir.join("cni/ipam")),
        )?;
        self.processes.push(ManagedProcess::spawn(
            "containerd",
            Path::new("containerd"),
            &[format!("--config={}", containerd_config.display())],
            &[],
            &log("containerd"),
        )?);
        let socket = self.socket.clone();
        wait_until("containerd to answer", timeout, &mut self.processes, || {
            let socket = socket.clone();
            async move {
                tokio::task::spawn_blocking(move || ctr(&socket, &["version"]).map(|_| true))
                    .await
                    .map_err(|e| e.to_string())?
            }
        })
        .await?;

        // images: ours first (the sandbox), then what the caller asked for
        let node_tools = build_node_tools(&dir)?;
        let mut imports = Vec::new();
        for archive in std::iter::once(&node_tools).chain(options.images.iter()) {
            let t0 = Instant::now();
            let socket = self.socket.clone();
            let path = archive.display().to_string();
            tokio::task::spawn_blocking(move || ctr(&socket, &["images", "import", &path]))
                .await
                .map_err(|e| PlaneError::RealNode(e.to_string()))?
                .map_err(|e| {
                    PlaneError::RealNode(format!("importing {}: {e}", archive.display()))
                })?;
            let seconds = t0.elapsed().as_secs_f64();
            tracing::info!("imported {} in {seconds:.1}s", archive.display());
            imports.push((archive.clone(), seconds));
        }

        // kubelet
        let ports = free_ports(4)?;
        let (kubelet_port, kubelet_healthz, proxy_healthz, proxy_metrics) =
            (ports[0], ports[1], ports[2], ports[3]);
        let kubelet_dir = dir.join("kubelet");
        let kubelet_config = kubelet_dir.join("config.yaml");
        write(
            &kubelet_config,
            &config::kubelet(&config::KubeletPaths {
                ca_cert: &pki.ca_cert,
                containerd_socket: &self.socket,
                pod_logs: &dir.join("pod-logs"),
                port: kubelet_port,
                healthz_port: kubelet_healthz,
            }),
        )?;
        let kubelet_kubeconfig = kubelet_dir.join("kubeconfig");
        write(
            &kubelet_kubeconfig,
            &config::kubeconfig(
                server,
                &pki.ca_cert,
                &pki.kubelet_client.cert,
                &pki.kubelet_client.key,
            ),
        )?;
        let (label_key, label_value) = REAL_NODE_TAINT;
        self.processes.push(ManagedProcess::spawn(
            "kubelet",
            &self.bin_dir.join("kubelet"),
            &[
                format!("--config={}", kubelet_config.display()),
                format!("--kubeconfig={}", kubelet_kubeconfig.display()),
                format!("--root-dir={}", kubelet_dir.join("root").display()),
                format!("--hostname-override={REAL_NODE_NAME}"),
                format!("--node-ip={GATEWAY}"),
                format!("--node-labels={label_key}={label_value}"),
                "--v=1".into(),
            ],
            &[],
            &log("kubelet"),
        )?);

        // kube-proxy
        let proxy_dir = dir.join("kube-proxy");
        let proxy_kubeconfig = proxy_dir.join("kubeconfig");
        write(
            &proxy_kubeconfig,
            &config::kubeconfig(
                server,
                &pki.ca_cert,
                &pki.kube_proxy_client.cert,
                &pki.kube_proxy_client.key,
            ),
        )?;
        let proxy_config = proxy_dir.join("config.yaml");
        write(
            &proxy_config,
            &config::kube_proxy(&proxy_kubeconfig, proxy_healthz, proxy_metrics),
        )?;
        self.processes.push(ManagedProcess::spawn(
            "kube-proxy",
            &self.bin_dir.join("kube-proxy"),
            &[
                format!("--config={}", proxy_config.display()),
                "--v=1".into(),
            ],
            &[],
            &log("kube-proxy"),
        )?);

        let names = vec![REAL_NODE_NAME.to_string()];
        wait_until(
            "the real node to be Ready",
            timeout,
            &mut self.processes,
            || {
                let client = client.clone();
                let names = names.clone();
                async move { nodes::all_ready(&client, &names).await }
            },
        )
        .await?;
        let startup_seconds = started.elapsed().as_secs_f64();
        tracing::info!("real node {REAL_NODE_NAME} Ready in {startup_seconds:.1}s");
        Ok(RealNodeInfo {
            name: REAL_NODE_NAME.to_string(),
            internal_ip: GATEWAY.to_string(),
            pod_subnet: POD_SUBNET.to_string(),
            containerd_socket: self.socket.clone(),
            kubelet_port,
            pids: self
                .processes
                .iter()
                .map(|p| (p.name().to_string(), p.pid()))
                .collect(),
            imports,
            startup_seconds,
        })
    }

    /// An error naming the first real-node component that has exited, if any.
    pub(crate) fn check_running(&mut self) -> Result<(), PlaneError> {
        self.processes
            .iter_mut()
            .try_for_each(ManagedProcess::check_running)
    }

    /// Stops kube-proxy and the kubelet, removes every pod with containerd, stops containerd and sweeps
    /// the host (see [`sweep`]). Blocking: it also runs from `Drop`.
    pub(crate) fn stop(mut self) -> Vec<String> {
        self.teardown()
    }

    fn teardown(&mut self) -> Vec<String> {
        if self.stopped {
            return Vec::new();
        }
        self.stopped = true;
        let mut problems = Vec::new();
        // kube-proxy, then the kubelet (so it does not restart what we remove).
        while let Some(process) = self.processes.pop() {
            if process.name() == "containerd" {
                // The pods go first, through containerd, so their shims clean up after them.
                let socket = self.socket.clone();
                match ctr(&socket, &["containers", "list", "--quiet"]) {
                    Ok(ids) => {
                        for id in ids.split_whitespace() {
                            let _ = ctr(&socket, &["tasks", "delete", "--force", id]);
                            let _ = ctr(&socket, &["containers", "delete", id]);
                        }
                    }
                    Err(e) => problems.push(format!("listing the node's containers: {e}")),
                }
            }
            process.stop_blocking(Duration::from_secs(10));
        }
        let report = sweep::sweep(&self.dir, SHIM_MARKER, &self.bin_dir.join("kube-proxy"));
        problems.extend(report.problems);
        for problem in &problems {
            tracing::warn!("real node teardown: {problem}");
        }
        problems
    }
}

impl Drop for RealNode {
    fn drop(&mut self) {
        self.teardown();
    }
}

/// The tools the real node runs that do not come from the Go build.
fn check_host_tools() -> Result<(), PlaneError> {
    const HINT: &str = "the real node needs containerd, runc, the CNI plug-ins, iptables, iproute2 and a C compiler; run deploy/real-node/ensure-runtime.sh (as root)";
    for (tool, probe) in [
        ("containerd", "containerd"),
        ("ctr", "ctr"),
        ("runc", "runc"),
        ("containerd-shim-runc-v2", "containerd-shim-runc-v2"),
        ("iptables", "iptables"),
        ("ip", "ip"),
        ("cc", "cc"),
    ] {
        if find_on_path(probe).is_none() {
            return Err(PlaneError::MissingTool { tool, hint: HINT });
        }
    }
    for plugin in ["bridge", "host-local", "loopback"] {
        if !Path::new("/usr/lib/cni").join(plugin).exists() {
            return Err(PlaneError::MissingTool {
                tool: "CNI plug-ins in /usr/lib/cni",
                hint: HINT,
            });
        }
    }
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Err(PlaneError::RealNode(
            "the real node runs containers and must run as root".into(),
        ));
    }
    Ok(())
}

fn find_on_path(program: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")
        .map(|paths| std::env::split_paths(&paths).collect::<Vec<_>>())
        .unwrap_or_default()
        .into_iter()
        .chain(["/usr/sbin", "/sbin"].map(PathBuf::from))
        .map(|dir| dir.join(program))
        .find(|p| p.is_file())
}

fn create_bridge() -> Result<(), PlaneError> {
    let cidr = format!("{GATEWAY}/24");
    for args in [
        vec!["link", "add", BRIDGE, "type", "bridge"],
        vec!["addr", "add", &cidr, "dev", BRIDGE],
        vec!["link", "set", BRIDGE, "up"],
    ] {
        run_tool(Path::new("ip"), &args, Duration::from_secs(10))
            .map_err(|e| PlaneError::RealNode(format!("ip {}: {e}", args.join(" "))))?;
    }
    Ok(())
}

/// The kubelet (cgroupfs driver) requires its cgroup root to exist in every hierarchy. A new v1 cpuset
/// cgroup starts with no CPUs and memory nodes, so it gets its parent's.
fn create_cgroup_root() -> Result<(), PlaneError> {
    let base = Path::new("/sys/fs/cgroup");
    let relative = CGROUP_ROOT.trim_start_matches('/');
    let hierarchies: Vec<PathBuf> = if base.join("cgroup.procs").exists() {
        vec![base.to_path_buf()]
    } else {
        std::fs::read_dir(base)
            .map_err(|e| PlaneError::io("listing /sys/fs/cgroup", e))?
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.join("cgroup.procs").exists())
            .collect()
    };
    for hierarchy in hierarchies {
        let dir = hierarchy.join(relative);
        std::fs::create_dir_all(&dir)
            .map_err(|e| PlaneError::io(format!("creating cgroup {}", dir.display()), e))?;
        for file in ["cpuset.cpus", "cpuset.mems"] {
            if let Ok(parent) = std::fs::read_to_string(hierarchy.join(file)) {
                let current = std::fs::read_to_string(dir.join(file)).unwrap_or_default();
                if current.trim().is_empty() {
                    std::fs::write(dir.join(file), parent.trim()).map_err(|e| {
                        PlaneError::io(format!("writing {}", dir.join(file).display()), e)
                    })?;
                }
            }
        }
    }
    Ok(())
}

/// Builds (or finds up to date) the node-tools image archive from the embedded sources.
fn build_node_tools(dir: &Path) -> Result<PathBuf, PlaneError> {
    let sources = dir.join("node-tools-build");
    std::fs::create_dir_all(&sources)
        .map_err(|e| PlaneError::io(format!("creating {}", sources.display()), e))?;
    write(&sources.join("build-images.sh"), BUILD_SCRIPT)?;
    write(&sources.join("pause.c"), PAUSE_SOURCE)?;
    write(&sources.join("http-get.c"), HTTP_GET_SOURCE)?;
    write(&sources.join("https-get.c"), HTTPS_GET_SOURCE)?;
    let out = sources.join("out");
    run_tool(
        Path::new("bash"),
        &[
            &sources.join("build-images.sh").display().to_string(),
            &out.display().to_string(),
        ],
        Duration::from_secs(120),
    )
    .map_err(|e| PlaneError::RealNode(format!("building the node-tools image: {e}")))?;
    Ok(out.join("node-tools.tar"))
}

fn write(path: &Path, contents: &str) -> Result<(), PlaneError> {
    std::fs::write(path, contents)
        .map_err(|e| PlaneError::io(format!("writing {}", path.display()), e))
}

/// `ctr --address <socket> --namespace k8s.io ARGS` (the kubelet's namespace).
fn ctr(socket: &Path, args: &[&str]) -> Result<String, String> {
    let address = socket.display().to_string();
    let mut all = vec!["--address", &address, "--namespace", "k8s.io"];
    all.extend_from_slice(args);
    run_tool(Path::new("ctr"), &all, Duration::from_secs(60))
}

/// Runs a host tool to completion (killing it after `timeout`); its stdout, or its stderr as the error.
pub(crate) fn run_tool(program: &Path, args: &[&str], timeout: Duration) -> Result<String, String> {
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("starting {}: {e}", program.display()))?;
    // Read both pipes on their own threads, so a chatty tool cannot block on a full pipe.
    let read = |pipe: Option<Box<dyn std::io::Read + Send>>| {
        std::thread::spawn(move || {
            let mut text = Vec::new();
            if let Some(mut pipe) = pipe {
                let _ = pipe.read_to_end(&mut text);
            }
            String::from_utf8_lossy(&text).into_owned()
        })
    };
    let stdout = read(child.stdout.take().map(|p| Box::new(p) as _));
    let stderr = read(child.stderr.take().map(|p| Box::new(p) as _));
    let deadline = Instant::now() + timeout;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("{} timed out after {timeout:?}", program.display()));
            }
            Err(e) => return Err(e.to_string()),
        }
    };
    let stdout = stdout.join().unwrap_or_default();
    let stderr = stderr.join().unwrap_or_default();
    if status.success() {
        Ok(stdout)
    } else {
        Err(format!(
            "{} {} exited with {status}: {}",
            program.display(),
            args.join(" "),
            stderr.trim()
        ))
    }
}
