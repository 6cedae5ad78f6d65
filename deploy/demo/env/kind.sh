# shellcheck shell=bash
# The tour's environment-specific parts on a kind cluster (DEMO_ENV=kind): sourced by
# deploy/demo/tour.sh. Verified on this project's machines by tests/e2e/kind.rs (in CI), with
# the node image built locally (deploy/kind/node-image/build.sh: no registry needed). See docs/kind.md.
#
# - install: the kind CLI and the host's needs (deploy/kind/ensure-host.sh), the node image, the cluster
#   from deploy/kind/cluster.yaml (created when missing), the image target/image/mini-kcm.tar (built by
#   deploy/image/build.sh when missing) loaded with `kind load image-archive`, then
#   `kubectl apply -k deploy/in-cluster` (2 leader-elected replicas managing the copies);
# - nodes: the cluster's third worker is taken out at install (kubelet stopped, Node deleted); adding it is
#   starting its kubelet, which registers the Node again; removing it is the reverse;
# - hand-over: kube-controller-manager's --controllers flag in its static pod manifest, and
#   deploy/in-cluster/overlays/apps for mini-kcm (the order is explained in env_handover).
#
# Settings: KIND_CLUSTER (default mini-kcm-demo); KIND_CONFIG (default deploy/kind/cluster.yaml; tests add
# an audit log to it); KIND_NODE_IMAGE (default mini-kcm/kind-node:<version>,
# built locally when missing; with internet, kind's public kindest/node:v1.37.x works too); KIND (default
# the kind that deploy/kind/ensure-host.sh builds); KUBECTL (default kubectl on PATH, else the local
# plane's); MINI_KCM (default the static binary deploy/image/build.sh builds).

# shellcheck source=../../control-plane/versions.env
source "$REPO/deploy/control-plane/versions.env"
KIND_CLUSTER=${KIND_CLUSTER:-mini-kcm-demo}
KIND_NODE_IMAGE=${KIND_NODE_IMAGE:-mini-kcm/kind-node:$KUBERNETES_VERSION}
KIND_CONFIG=${KIND_CONFIG:-$REPO/deploy/kind/cluster.yaml}
if [[ -z ${KUBECTL:-} ]]; then
  if command -v kubectl >/dev/null; then
    KUBECTL=kubectl
  else
    KUBECTL="${MINI_KCM_CACHE:-$HOME/.cache/mini-kcm}/k8s-${KUBERNETES_VERSION}_etcd-${ETCD_VERSION}_kwok-${KWOK_VERSION}/bin/kubectl"
  fi
fi
# shellcheck disable=SC2034 # read by tour.sh
SPARE_NODE=$KIND_CLUSTER-worker3
CONTROL_PLANE=$KIND_CLUSTER-control-plane
KCM_MANIFEST=/etc/kubernetes/manifests/kube-controller-manager.yaml
KCM_POD=kube-controller-manager-$CONTROL_PLANE
IMAGE_ARCHIVE=$REPO/target/image/mini-kcm.tar
WORKLOAD_CONTROLLERS_OFF=-deployment-controller,-replicaset-controller,-daemonset-controller

env_describe() {
  printf '%s\n' \
    "The kind cluster $KIND_CLUSTER (deploy/kind/cluster.yaml: a control plane and 3 workers), with its own" \
    "kube-controller-manager managing apps/v1, and mini-kcm installed as in any cluster: the image loaded" \
    "with kind load image-archive, then kubectl apply -k deploy/in-cluster (2 leader-elected replicas" \
    "managing the minikcm.dev copies). $SPARE_NODE is taken out now so that it can join later."
}

# (grep reads all of its input: with pipefail, an early exit of `grep -q` could fail the pipeline.)
kcm_command() { kubectl -n kube-system get pod "$KCM_POD" -o jsonpath='{.spec.containers[0].command}'; }
lease_holder() { kubectl -n mini-kcm-system get lease mini-kcm -o jsonpath='{.spec.holderIdentity}'; }
lease_held_by_mini_kcm() { [[ $(lease_holder) == mini-kcm-* ]]; }
# The Lease holder is "<pod name>_<suffix>".
leader_pod() {
  local holder
  holder=$(lease_holder)
  printf '%s' "${holder%_*}"
}

kind() { command "$KIND" "$@"; }

env_install() {
  if [[ -z ${KIND:-} ]]; then
    # Its progress shows; its last line is the kind binary.
    KIND=$(bash "$REPO/deploy/kind/ensure-host.sh" | tee /dev/stderr | tail -n 1) ||
      fail "deploy/kind/ensure-host.sh failed"
  fi
  [[ -x $KUBECTL ]] || command -v "$KUBECTL" >/dev/null || run bash "$REPO/deploy/control-plane/build.sh" ||
    fail "no kubectl ($KUBECTL), and building the plane's failed"
  if ! kind get clusters 2>/dev/null | grep -x "$KIND_CLUSTER" >/dev/null; then
    if [[ $KIND_NODE_IMAGE == mini-kcm/kind-node:* ]]; then
      run bash "$REPO/deploy/kind/node-image/build.sh" || fail "building the node image $KIND_NODE_IMAGE failed"
    fi
    run kind create cluster --name "$KIND_CLUSTER" --config "$KIND_CONFIG" \
      --image "$KIND_NODE_IMAGE" --wait 5m || fail "kind create cluster failed"
  fi
  kind get kubeconfig --name "$KIND_CLUSTER" >"$DEMO_WORK/kubeconfig"
  export KUBECONFIG=$DEMO_WORK/kubeconfig
  if kcm_command | grep -- -deployment-controller >/dev/null; then
    fail "kube-controller-manager of $KIND_CLUSTER already runs without its workload controllers (an earlier tour's hand-over): delete the cluster (kind delete cluster --name $KIND_CLUSTER) and run again"
  fi

  if [[ ! -f "$IMAGE_ARCHIVE" ]]; then
    run bash "$REPO/deploy/image/build.sh" || fail "building the image failed"
  fi
  MINI_KCM=${MINI_KCM:-$REPO/target/x86_64-unknown-linux-gnu/${MINI_KCM_IMAGE_PROFILE:-release}/mini-kcm}
  [[ -x "$MINI_KCM" ]] || fail "no mini-kcm binary at $MINI_KCM (bash deploy/image/build.sh builds it)"
  run kind load image-archive "$IMAGE_ARCHIVE" --name "$KIND_CLUSTER" || fail "kind load image-archive failed"

  if kubectl get node "$SPARE_NODE" >/dev/null 2>&1; then
    note "Taking $SPARE_NODE out, to add it back in the DaemonSet steps:"
    env_remove_node "$SPARE_NODE"
  fi

  run kubectl apply -k "$REPO/deploy/in-cluster" || fail "kubectl apply -k deploy/in-cluster failed"
  run kubectl -n mini-kcm-system rollout status deploy/mini-kcm --timeout="${DEMO_TIMEOUT}s" ||
    fail "mini-kcm's Deployment did not roll out"
  wait_until "a mini-kcm replica holds the Lease" lease_held_by_mini_kcm
}

# The image every node has: the pods' sandbox image of its containerd.
env_default_image() {
  docker exec "$CONTROL_PLANE" sed -n -E 's/^ *sandbox_image *= *"(.*)"/\1/p' /etc/containerd/config.toml
}

node_registered() { kubectl get node "$1"; }

env_add_node() { # NAME
  note "The node's kubelet starts and registers the Node object again."
  run docker exec "$1" systemctl start kubelet || fail "starting the kubelet of $1 failed"
  wait_until "the Node $1 is registered" node_registered "$1"
  run kubectl wait --for=condition=Ready "node/$1" --timeout="${DEMO_TIMEOUT}s" || fail "$1 did not become Ready"
}

env_remove_node() { # NAME
  run docker exec "$1" systemctl stop kubelet || fail "stopping the kubelet of $1 failed"
  run kubectl delete node "$1" --wait=true || fail "deleting node $1 failed"
}

kcm_without_workload_controllers() {
  kcm_command | grep -- -deployment-controller >/dev/null &&
    kubectl -n kube-system wait --for=condition=Ready "pod/$KCM_POD" --timeout=1s
}

# mini-kcm runs as an apps/v1 Deployment, which only an apps/v1 Deployment controller can roll out: once
# kube-controller-manager's are off, nothing would roll out the switch to --kinds=apps. So the tour
# lets kube-controller-manager roll mini-kcm out while the new replicas cannot lead (the tour holds their
# Lease), turns kube-controller-manager's workload controllers off, and only then frees the Lease.
env_handover() {
  note "1. Stop mini-kcm (it manages the copies) and hold its Lease, so that no mini-kcm replica leads yet."
  run kubectl -n mini-kcm-system scale deploy/mini-kcm --replicas=0
  run kubectl -n mini-kcm-system wait --for=delete pod -l app.kubernetes.io/name=mini-kcm \
    --timeout="${DEMO_TIMEOUT}s" || fail "mini-kcm's pods did not go"
  run kubectl -n mini-kcm-system patch lease mini-kcm --type=merge -p \
    "{\"spec\":{\"holderIdentity\":\"demo-tour\",\"leaseDurationSeconds\":3600,\"renewTime\":\"$(date -u +%Y-%m-%dT%H:%M:%S.000000Z)\"}}"
  note "2. Switch mini-kcm to apps/v1 (overlays/apps: --kinds=apps and its RBAC). kube-controller-manager" \
    "   rolls the Deployment out; the new replicas sync their caches and wait as standbys."
  run kubectl apply -k "$REPO/deploy/in-cluster/overlays/apps" || fail "applying overlays/apps failed"
  run kubectl -n mini-kcm-system rollout status deploy/mini-kcm --timeout="${DEMO_TIMEOUT}s" ||
    fail "mini-kcm's Deployment did not roll out"
  note "3. Turn kube-controller-manager's workload controllers off: --controllers=...,$WORKLOAD_CONTROLLERS_OFF" \
    "   in its static pod manifest; the kubelet restarts it."
  run docker exec "$CONTROL_PLANE" sed -i -E \
    "s/^( *- --controllers=.*)\$/\\1,$WORKLOAD_CONTROLLERS_OFF/" "$KCM_MANIFEST" ||
    fail "editing $KCM_MANIFEST failed"
  wait_until "kube-controller-manager runs without its workload controllers" kcm_without_workload_controllers
  note "4. Free the Lease: a mini-kcm replica, now --kinds=apps, takes it within a retry period (2 s)."
  run kubectl -n mini-kcm-system patch lease mini-kcm --type=merge -p '{"spec":{"holderIdentity":null}}'
  wait_until "a mini-kcm replica holds the Lease" lease_held_by_mini_kcm
  run kubectl -n mini-kcm-system get lease mini-kcm -o custom-columns='HOLDER:.spec.holderIdentity'
}

env_log_mark() { date -u +%Y-%m-%dT%H:%M:%SZ; }
env_logs_since() { # MARK
  # JSON lines ({"timestamp":..,"fields":{"message":..,..},"target":..,"span":{..,"key":..}}), shown as
  # "<key>: <fields>".
  kubectl -n mini-kcm-system logs "$(leader_pod)" --since-time="$1" |
    sed -nE 's/.*"fields":\{(.*)\},"target".*"key":"([^"]*)".*/\2: \1/p'
}

env_diagnostics() {
  kubectl -n mini-kcm-system get pods,lease -o wide || true
  kubectl -n mini-kcm-system logs "$(leader_pod)" --tail=30 || true
}

env_cleanup() {
  local status=$?
  printf 'demo: the kind cluster %s keeps running; delete it with: kind delete cluster --name %s\n' \
    "$KIND_CLUSTER" "$KIND_CLUSTER"
  return "$status"
}
