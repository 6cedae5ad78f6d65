//! The files the real node's components read: containerd's config, the CNI network, the kubelet's and
//! kube-proxy's configurations and kubeconfigs. Pure text from paths and ports, so it is unit-tested.
//!
//! Everything a component would otherwise put in a host-wide place (containerd's root, state and socket,
//! the CNI configuration and IP allocations, the kubelet's root and pod logs) points into the plane's
//! `real-node/` folder, so a second containerd (Docker's, another plane's) never meets ours.

use std::path::Path;

use super::{BRIDGE, CGROUP_ROOT, GATEWAY, NODE_TOOLS_IMAGE, POD_SUBNET, REAL_NODE_TAINT};

/// containerd 1.6+ (config version 2) with only what the kubelet's CRI needs.
pub(super) fn containerd(root: &Path, state: &Path, socket: &Path, cni_conf_dir: &Path) -> String {
    format!(
        r#"version = 2
root = "{root}"
state = "{state}"
# Plug-ins that would touch host-wide places or that a node does not need.
disabled_plugins = ["io.containerd.internal.v1.opt", "io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs", "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]

[grpc]
  address = "{socket}"

[plugins."io.containerd.grpc.v1.cri"]
  # Built locally (deploy/real-node/build-images.sh): no registry is needed to start a pod.
  sandbox_image = "{NODE_TOOLS_IMAGE}"
  # Pod network namespaces under our state folder, not /var/run/netns.
  netns_mounts_under_state_dir = true
  disable_tcp_service = true
  # The kubelet asks for -998 for sandboxes; lowering the score needs more than a container or restricted
  # VM may grant (runc then fails with "failed to update /proc/self/oom_score_adj: Permission denied").
  restrict_oom_score_adj = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "{cni}"
    max_conf_num = 1
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        # runc's state beside containerd's, not in the host-wide default.
        Root = "{runc_root}"
"#,
        root = root.display(),
        state = state.display(),
        socket = socket.display(),
        cni = cni_conf_dir.display(),
        runc_root = state.join("runc").display(),
    )
}

/// One bridge on the host, host-local addresses. No IP masquerading (the pods need nothing outside the
/// host, and the bridge plug-in's per-pod NAT chains would outlive a killed pod); hairpin so a pod can
/// reach itself through a Service.
pub(super) fn cni_network(ipam_dir: &Path) -> String {
    serde_json::json!({
        "cniVersion": "1.0.0",
        "name": "mini-kcm-real-node",
        "plugins": [
            {
                "type": "bridge",
                "bridge": BRIDGE,
                "isGateway": true,
                "ipMasq": false,
                "hairpinMode": true,
                "ipam": {
                    "type": "host-local",
                    "dataDir": ipam_dir.display().to_string(),
                    "ranges": [[{"subnet": POD_SUBNET, "gateway": GATEWAY}]],
                    "routes": [{"dst": "0.0.0.0/0"}]
                }
            },
            {"type": "loopback"}
        ]
    })
    .to_string()
}

/// The kubelet's paths and ports.
pub(super) struct KubeletPaths<'a> {
    pub ca_cert: &'a Path,
    pub containerd_socket: &'a Path,
    pub pod_logs: &'a Path,
    pub port: u16,
    pub healthz_port: u16,
}

/// A KubeletConfiguration for this host: cgroup v1 allowed, cgroupfs, pods under a cgroup of their own
/// (so teardown finds every pod process), the taint that keeps pods that do not ask for it away, the API
/// server authenticated by client certificate from the plane CA, no image garbage collection (imported
/// images cannot be pulled again) and no eviction for disk: the node's filesystem is the host's, shared
/// with the builds and images of the run that started it, so its fill level says nothing about the node's
/// pods (a CI run that left 2 GB of a 252 GB disk tripped `nodefs.available: 1%`, evicted the pods and
/// tainted the node `disk-pressure`). The kubelet ignores a threshold of `0%`.
pub(super) fn kubelet(paths: &KubeletPaths<'_>) -> String {
    let (key, value) = REAL_NODE_TAINT;
    format!(
        r#"apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
failSwapOn: true
cgroupDriver: cgroupfs
cgroupRoot: {CGROUP_ROOT}
cgroupsPerQOS: true
containerRuntimeEndpoint: unix://{socket}
address: {GATEWAY}
port: {port}
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: {healthz}
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: false
  x509:
    clientCAFile: {ca}
authorization:
  mode: AlwaysAllow
registerWithTaints:
- key: {key}
  value: "{value}"
  effect: NoSchedule
clusterDomain: cluster.local
podLogsDir: {logs}
maxPods: 30
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard:
  memory.available: 50Mi
  nodefs.available: "0%"
  nodefs.inodesFree: "0%"
  imagefs.available: "0%"
  imagefs.inodesFree: "0%"
nodeStatusReportFrequency: 10s
nodeStatusUpdateFrequency: 5s
syncFrequency: 10s
fileCheckFrequency: 10s
"#,
        socket = paths.containerd_socket.display(),
        port = paths.port,
        healthz = paths.healthz_port,
        ca = paths.ca_cert.display(),
        logs = paths.pod_logs.display(),
    )
}

/// kube-proxy in iptables mode. It masquerades all Service traffic: the pods share one bridge without
/// br_netfilter, so a reply from a backend on the same bridge would otherwise bypass the DNAT's
/// conntrack entry. NodePorts only on the bridge address, conntrack sysctls left alone.
pub(super) fn kube_proxy(kubeconfig: &Path, healthz_port: u16, metrics_port: u16) -> String {
    format!(
        r#"apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection:
  kubeconfig: {kubeconfig}
hostnameOverride: {node}
mode: iptables
clusterCIDR: {POD_SUBNET}
healthzBindAddress: 127.0.0.1:{healthz_port}
metricsBindAddress: 127.0.0.1:{metrics_port}
nodePortAddresses: ["{GATEWAY}/32"]
iptables:
  masqueradeAll: true
  syncPeriod: 10s
  minSyncPeriod: 0s
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
"#,
        kubeconfig = kubeconfig.display(),
        node = crate::pki::REAL_NODE_NAME,
    )
}

/// A kubeconfig that authenticates with a client certificate.
pub(super) fn kubeconfig(server: &str, ca: &Path, cert: &Path, key: &Path) -> String {
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: mini-kcm\n  cluster:\n    server: {server}\n    \
         certificate-authority: {ca}\nusers:\n- name: node\n  user:\n    client-certificate: {cert}\n    \
         client-key: {key}\ncontexts:\n- name: mini-kcm\n  context:\n    cluster: mini-kcm\n    user: node\n\
         current-context: mini-kcm\n",
        ca = ca.display(),
        cert = cert.display(),
        key = key.display(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample_kubelet() -> String {
        kubelet(&KubeletPaths {
            ca_cert: Path::new("/p/ca.crt"),
            containerd_socket: Path::new("/p/containerd.sock"),
            pod_logs: Path::new("/p/pods"),
            port: 1234,
            healthz_port: 1235,
        })
    }

    #[test]
    fn kubelet_allows_cgroup_v1_and_taints_itself() {
        let text = sample_kubelet();
        assert!(text.contains("failCgroupV1: false"));
        assert!(text.contains("cgroupDriver: cgroupfs"));
        assert!(text.contains("containerRuntimeEndpoint: unix:///p/containerd.sock"));
        assert!(
            text.contains("- key: mini-kcm.dev/real-node\n  value: \"true\"\n  effect: NoSchedule")
        );
        assert!(text.contains("port: 1234\n"));
    }

    #[test]
    fn kubelet_never_evicts_for_the_shared_host_disk() {
        let text = sample_kubelet();
        for signal in [
            "nodefs.available",
            "nodefs.inodesFree",
            "imagefs.available",
            "imagefs.inodesFree",
        ] {
            assert!(text.contains(&format!("  {signal}: \"0%\"\n")), "{signal}");
        }
        assert!(text.contains("  memory.available: 50Mi\n"));
    }

    #[test]
    fn cni_network_keeps_allocations_in_the_plane() {
        let conf: serde_json::Value =
            serde_json::from_str(&cni_network(Path::new("/p/ipam"))).unwrap();
        assert_eq!(conf["plugins"][0]["bridge"], BRIDGE);
        assert_eq!(conf["plugins"][0]["ipMasq"], false);
        assert_eq!(conf["plugins"][0]["ipam"]["dataDir"], "/p/ipam");
    }

    #[test]
    fn containerd_uses_only_plane_paths() {
        let text = containerd(
            Path::new("/p/root"),
            Path::new("/p/state"),
            Path::new("/p/c.sock"),
            Path::new("/p/net.d"),
        );
        assert!(text.contains("root = \"/p/root\""));
        assert!(text.contains("address = \"/p/c.sock\""));
        assert!(text.contains("conf_dir = \"/p/net.d\""));
        assert!(!text.contains("/var/lib/containerd") && !text.contains("/run/containerd"));
    }
}
