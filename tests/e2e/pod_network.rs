//! The kind node image's pod network (deploy/kind/node-image/pod-network) on its own, with real kernel
//! objects: the script runs in a network namespace standing for a node, with a stand-in for the Node list
//! and for crictl, and Debian's real CNI plug-ins (bridge, host-local) give pods in other namespaces their
//! addresses, as containerd would. Node churn, as the kind tour makes it:
//! - a node that registers again with another pod CIDR: the config follows, the sandbox left on the old
//!   range is stopped, and the next pod gets an address of the new range (on the old script the bridge
//!   kept the old gateway and every sandbox failed: "cni0 already has an IP address different from ...");
//! - a node that leaves: its route goes; one that joins: its route comes;
//! - the node container restarted (a new network namespace, the config and host-local's store kept) and
//!   the script restarted (a route of a node that left meanwhile): each pass converges from what it finds;
//! - a pass with nothing to change prints nothing and changes nothing.
//!
//! Needs root, iproute2 and Debian's containernetworking-plugins (deploy/real-node/ensure-runtime.sh);
//! skips, saying why, without them unless MINI_KCM_REQUIRE_REAL_NODE is set (.ci/run sets it).

// Test code: a panic is the failure report.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use mini_kcm_e2e::{repo_path, runs_here};
use serde_json::Value;

const PLUGINS: &str = "/usr/lib/cni";

#[test]
fn the_pod_network_follows_a_node_that_registers_again_leaves_joins_or_restarts() {
    if !runs_here("MINI_KCM_REQUIRE_REAL_NODE", missing_prerequisite()) {
        return;
    }
    let node = Node::new();

    // The node registers with 10.244.2.0/24; node-b's pods are behind 172.18.0.4.
    node.set_nodes(&[
        ("node-a", "10.244.2.0/24", "172.18.0.2"),
        ("node-b", "10.244.1.0/24", "172.18.0.4"),
    ]);
    let log = node.pass();
    assert!(
        log.contains("CNI config written for pod CIDR 10.244.2.0/24"),
        "{log}"
    );
    assert_eq!(node.configured_subnet(), "10.244.2.0/24");
    assert_eq!(node.routes(), ["10.244.1.0/24 via 172.18.0.4"]);
    let first = node.add_pod("sandbox-1").unwrap();
    assert!(first.starts_with("10.244.2."), "{first}");
    assert_eq!(node.bridge_address(), "10.244.2.1/24");
    assert_eq!(
        node.pass(),
        "",
        "a pass with nothing to change says nothing"
    );

    // It is deleted and registers again with another CIDR; node-b leaves, node-c joins.
    node.set_nodes(&[
        ("node-a", "10.244.4.0/24", "172.18.0.2"),
        ("node-c", "10.244.3.0/24", "172.18.0.5"),
    ]);
    let log = node.pass();
    assert_eq!(node.configured_subnet(), "10.244.4.0/24", "{log}");
    assert_eq!(
        node.crictl_calls(),
        ["stopp sandbox-1"],
        "the sandbox on the old range is stopped, so that the kubelet starts it again: {log}"
    );
    assert!(
        node.reservations()
            .iter()
            .all(|ip| ip.starts_with("10.244.4.")),
        "host-local keeps no address of the old range: {:?}",
        node.reservations()
    );
    assert_eq!(node.routes(), ["10.244.3.0/24 via 172.18.0.5"], "{log}");
    let second = node
        .add_pod("sandbox-2")
        .unwrap_or_else(|e| panic!("a pod after the new CIDR: {e}\npass log: {log}"));
    assert!(second.starts_with("10.244.4."), "{second}");
    assert_eq!(node.bridge_address(), "10.244.4.1/24");
    assert_eq!(node.pass(), "", "converged: {:?}", node.crictl_calls());

    // The node container restarts (a new network namespace: no bridge, no routes; /etc and /var kept),
    // and while the script was down a route of a node that has left was still there.
    node.restart();
    node.ip(&[
        "route",
        "add",
        "10.244.9.0/24",
        "via",
        "172.18.0.9",
        "proto",
        "199",
    ]);
    let log = node.pass();
    assert_eq!(node.routes(), ["10.244.3.0/24 via 172.18.0.5"], "{log}");
    assert!(log.contains("route to 10.244.9.0/24 removed"), "{log}");
    let third = node.add_pod("sandbox-3").unwrap();
    assert!(third.starts_with("10.244.4."), "{third}");
    assert_ne!(third, second, "host-local still knows sandbox-2's address");
    assert_eq!(node.pass(), "");
}

/// Why this machine cannot run the test, if it cannot.
fn missing_prerequisite() -> Option<String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Some("not root (network namespaces)".into());
    }
    if Command::new("ip").arg("-V").output().is_err() {
        return Some("no `ip` (iproute2)".into());
    }
    for plugin in ["bridge", "host-local"] {
        if !Path::new(PLUGINS).join(plugin).exists() {
            return Some(format!(
                "no CNI plug-in {PLUGINS}/{plugin} (deploy/real-node/ensure-runtime.sh installs it)"
            ));
        }
    }
    None
}

/// A node of the pod network: a network namespace, the files the script keeps (config, host-local's
/// store) in a folder, the stand-ins' inputs and records; pods are further namespaces. All removed when
/// dropped.
struct Node {
    name: String,
    dir: PathBuf,
    pods: std::cell::RefCell<Vec<String>>,
}

impl Node {
    fn new() -> Node {
        let name = format!("mkcm-pn-{}", std::process::id());
        let dir = std::env::temp_dir().join(&name);
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let crictl = dir.join("crictl");
        std::fs::write(
            &crictl,
            format!("#!/bin/sh\necho \"$*\" >> {}/crictl.calls\n", dir.display()),
        )
        .unwrap();
        std::fs::set_permissions(&crictl, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        let node = Node {
            name,
            dir,
            pods: Default::default(),
        };
        node.create_namespace();
        node
    }

    /// The node's namespace with the address the other nodes are reached from (a veth pair stands for
    /// Docker's network: routes need a next hop on a link).
    fn create_namespace(&self) {
        command("ip", &["netns", "add", &self.name]);
        self.ip(&["link", "set", "lo", "up"]);
        self.ip(&[
            "link", "add", "eth0", "type", "veth", "peer", "name", "peer0",
        ]);
        self.ip(&["addr", "add", "172.18.0.2/16", "dev", "eth0"]);
        self.ip(&["link", "set", "eth0", "up"]);
        self.ip(&["link", "set", "peer0", "up"]);
    }

    /// The node container restarted: a new network namespace, files kept.
    fn restart(&self) {
        command("ip", &["netns", "del", &self.name]);
        self.create_namespace();
    }

    fn ip(&self, args: &[&str]) -> String {
        let mut all = vec!["-n", &self.name];
        all.extend_from_slice(args);
        command("ip", &all)
    }

    /// What the Node list answers: name, pod CIDR, InternalIP.
    fn set_nodes(&self, nodes: &[(&str, &str, &str)]) {
        let text: String = nodes
            .iter()
            .map(|(name, cidr, address)| format!("{name} {cidr} {address}\n"))
            .collect();
        std::fs::write(self.dir.join("nodes"), text).unwrap();
    }

    /// One pass of the script in the node's namespace; what it logged.
    fn pass(&self) -> String {
        let d = self.dir.display();
        let script = repo_path("deploy/kind/node-image/pod-network");
        let output = Command::new("ip")
            .args(["netns", "exec", &self.name, "bash"])
            .arg(&script)
            .env("POD_NETWORK_ONCE", "1")
            .env("POD_NETWORK_NODE", "node-a")
            .env("POD_NETWORK_LIST_NODES", format!("cat {d}/nodes"))
            .env("POD_NETWORK_CONF_DIR", format!("{d}/net.d"))
            .env("POD_NETWORK_IPAM_DIR", format!("{d}/ipam"))
            .env("POD_NETWORK_CRICTL", format!("{d}/crictl"))
            .output()
            .unwrap();
        let (stdout, stderr) = texts(&output);
        assert!(
            output.status.success(),
            "pod-network failed:\n{stdout}\n{stderr}"
        );
        assert_eq!(stderr, "", "pod-network wrote errors");
        stdout
    }

    fn conflist(&self) -> Value {
        let text = std::fs::read_to_string(self.dir.join("net.d/10-mini-kcm.conflist")).unwrap();
        serde_json::from_str(&text).unwrap()
    }

    fn configured_subnet(&self) -> String {
        self.conflist()["plugins"][0]["ipam"]["ranges"][0][0]["subnet"]
            .as_str()
            .unwrap()
            .to_string()
    }

    /// The routes the script owns, as "CIDR via ADDRESS".
    fn routes(&self) -> Vec<String> {
        let mut routes: Vec<String> = self
            .ip(&["-4", "route", "show", "proto", "199"])
            .lines()
            .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
            .collect();
        routes.sort();
        routes
    }

    fn bridge_address(&self) -> String {
        let out = self.ip(&["-4", "-o", "addr", "show", "dev", "cni0"]);
        out.split_whitespace()
            .nth(3)
            .unwrap_or_default()
            .to_string()
    }

    fn reservations(&self) -> Vec<String> {
        std::fs::read_dir(self.dir.join("ipam/mini-kcm"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.parse::<std::net::Ipv4Addr>().is_ok())
            .collect()
    }

    fn crictl_calls(&self) -> Vec<String> {
        std::fs::read_to_string(self.dir.join("crictl.calls"))
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect()
    }

    /// A pod sandbox in its own namespace, networked as containerd does it: the config's bridge plug-in
    /// (with host-local) run for ADD in the node's namespace. Its IPv4 address, or the plug-in's error.
    fn add_pod(&self, sandbox: &str) -> Result<String, String> {
        let netns = format!("{}-{sandbox}", self.name);
        command("ip", &["netns", "add", &netns]);
        self.pods.borrow_mut().push(netns.clone());
        let list = self.conflist();
        let mut plugin = list["plugins"][0].clone();
        plugin["name"] = list["name"].clone();
        plugin["cniVersion"] = list["cniVersion"].clone();
        let mut child = Command::new("ip")
            .args(["netns", "exec", &self.name, &format!("{PLUGINS}/bridge")])
            .env("CNI_COMMAND", "ADD")
            .env("CNI_CONTAINERID", sandbox)
            .env("CNI_NETNS", format!("/run/netns/{netns}"))
            .env("CNI_IFNAME", "eth0")
            .env("CNI_PATH", PLUGINS)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        std::io::Write::write_all(
            &mut child.stdin.take().unwrap(),
            plugin.to_string().as_bytes(),
        )
        .unwrap();
        let output = child.wait_with_output().unwrap();
        let (stdout, stderr) = texts(&output);
        if !output.status.success() {
            return Err(format!("{stdout}{stderr}"));
        }
        let result: Value = serde_json::from_str(&stdout).unwrap();
        let address = result["ips"][0]["address"].as_str().unwrap();
        Ok(address.split('/').next().unwrap().to_string())
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        for netns in self.pods.borrow().iter().chain([&self.name]) {
            let _ = Command::new("ip").args(["netns", "del", netns]).output();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn texts(output: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// Runs a command, panicking with its output when it fails; its standard output.
fn command(program: &str, args: &[&str]) -> String {
    let output = Command::new(program).args(args).output().unwrap();
    let (stdout, stderr) = texts(&output);
    assert!(
        output.status.success(),
        "{program} {args:?} failed:\n{stdout}\n{stderr}"
    );
    stdout
}
