# shellcheck shell=bash
# The tour's environment-specific parts on the local plane (DEMO_ENV=local, the default): sourced by
# deploy/demo/tour.sh, which runs the shared steps. Everything runs as processes of this script and stops
# when it exits:
#
# - the plane: `mini-kcm up --workload-controllers none` (etcd, kube-apiserver, kube-scheduler,
#   kube-controller-manager without its Deployment/ReplicaSet/DaemonSet controllers, kwok nodes);
# - upstream's workload controllers: a second kube-controller-manager process running only those three,
#   so that "turning them off" is stopping it while the plane keeps running (on a real cluster it is a
#   flag of the one kube-controller-manager: see env/kind.sh);
# - mini-kcm: `mini-kcm run --kinds=copies`, leader-elected, later `--kinds=apps`.
#
# Nodes are kwok nodes: adding one is creating a Node object that kwok (started with
# --manage-all-nodes) keeps Ready; removing it is deleting the object.
#
# Settings: LOCAL_NODES (default 3) simulated nodes at start; MINI_KCM (default target/debug/mini-kcm,
# built with cargo when missing); KUBECTL (default the plane's own kubectl).

LOCAL_NODES=${LOCAL_NODES:-3}
# shellcheck disable=SC2034 # read by tour.sh
SPARE_NODE=kwok-node-$((LOCAL_NODES + 1))
UP_PID='' UPSTREAM_PID='' MINI_KCM_PID=''
MINI_KCM_LOG=$DEMO_WORK/mini-kcm.log
UPSTREAM_LOG=$DEMO_WORK/upstream-workload-controllers.log

env_describe() {
  printf '%s\n' \
    "A local control plane (mini-kcm up: real etcd, kube-apiserver, kube-scheduler and kube-controller-manager," \
    "$LOCAL_NODES kwok nodes), kube-controller-manager's own workload controllers (for apps/v1), and mini-kcm" \
    "as a process managing the minikcm.dev copies, leader-elected on the Lease mini-kcm-system/mini-kcm."
}

stop_process() { # PID
  [[ -n "$1" ]] || return 0
  kill -TERM "$1" 2>/dev/null || return 0
  wait "$1" 2>/dev/null || true
}

plane_running() {
  kill -0 "$UP_PID" 2>/dev/null || fail "mini-kcm up exited: $(tail -n 20 "$DEMO_WORK/up.log")"
  grep -q '^mini-kcm: running' "$DEMO_WORK/up.log"
}
upstream_synced() {
  kill -0 "$UPSTREAM_PID" 2>/dev/null || fail "kube-controller-manager exited: $(tail -n 20 "$UPSTREAM_LOG")"
  # One line per controller (deployment, replicaset, daemonset) once its informers are synced.
  (($(grep -c '"Caches are synced"' "$UPSTREAM_LOG") >= 3))
}
lease_held_by() { # IDENTITY-PREFIX
  kill -0 "$MINI_KCM_PID" 2>/dev/null || fail "mini-kcm exited: $(tail -n 20 "$MINI_KCM_LOG")"
  [[ $(kubectl -n mini-kcm-system get lease mini-kcm -o jsonpath='{.spec.holderIdentity}') == "$1"* ]]
}

# mini-kcm as a process; POD_NAME names it in the Lease and in its events' reportingInstance.
start_mini_kcm() { # KINDS
  note "\$ POD_NAME=mini-kcm-$1 mini-kcm run --kinds=$1 --leader-elect-resource-namespace=mini-kcm-system --metrics-addr=127.0.0.1:0 >>$MINI_KCM_LOG"
  POD_NAME=mini-kcm-$1 "$MINI_KCM" run --kinds="$1" --leader-elect-resource-namespace=mini-kcm-system \
    --metrics-addr=127.0.0.1:0 >>"$MINI_KCM_LOG" 2>&1 &
  MINI_KCM_PID=$!
  wait_until "mini-kcm --kinds=$1 holds the Lease" lease_held_by "mini-kcm-${1}_"
}

env_install() {
  if [[ -z "${MINI_KCM:-}" ]]; then
    MINI_KCM=$REPO/target/debug/mini-kcm
    run cargo build --manifest-path "$REPO/Cargo.toml" -p mini-kcm || fail "building mini-kcm failed"
  fi
  [[ -x "$MINI_KCM" ]] || fail "no mini-kcm binary at $MINI_KCM"
  local bin_dir
  # build-plane prints the binaries' folder last (building them once, ~8 min, when not cached).
  bin_dir=$("$MINI_KCM" build-plane | tail -n 1) || fail "mini-kcm build-plane failed"
  KUBECTL=${KUBECTL:-$bin_dir/kubectl}

  note "\$ mini-kcm up --nodes $LOCAL_NODES --workload-controllers none --state-dir $DEMO_WORK/plane --kubeconfig-out $DEMO_WORK/kubeconfig >$DEMO_WORK/up.log"
  "$MINI_KCM" up --nodes "$LOCAL_NODES" --workload-controllers none --state-dir "$DEMO_WORK/plane" \
    --kubeconfig-out "$DEMO_WORK/kubeconfig" >"$DEMO_WORK/up.log" 2>&1 &
  UP_PID=$!
  wait_until "the plane is up ($LOCAL_NODES nodes Ready)" plane_running
  export KUBECONFIG=$DEMO_WORK/kubeconfig
  run kubectl get nodes

  note "kube-controller-manager's Deployment, ReplicaSet and DaemonSet controllers, in a process of their own:"
  note "\$ kube-controller-manager --kubeconfig=$KUBECONFIG --controllers=deployment-controller,replicaset-controller,daemonset-controller --leader-elect=false --secure-port=0 >$UPSTREAM_LOG"
  "$bin_dir/kube-controller-manager" --kubeconfig="$KUBECONFIG" \
    --controllers=deployment-controller,replicaset-controller,daemonset-controller \
    --leader-elect=false --secure-port=0 >"$UPSTREAM_LOG" 2>&1 &
  UPSTREAM_PID=$!
  wait_until "upstream's workload controllers have synced their caches" upstream_synced

  run kubectl create namespace mini-kcm-system
  start_mini_kcm copies
}

# kwok only simulates pods: no image is ever pulled, any name does.
env_default_image() { echo registry.k8s.io/pause:3.10; }

env_add_node() { # NAME
  run kubectl apply -f - <<YAML
apiVersion: v1
kind: Node
metadata:
  name: $1
  annotations: {kwok.x-k8s.io/node: fake}
  labels: {kubernetes.io/hostname: $1, kubernetes.io/os: linux, kubernetes.io/arch: amd64, type: kwok}
status:
  capacity: {cpu: "64", memory: 256Gi, pods: "1000"}
  allocatable: {cpu: "64", memory: 256Gi, pods: "1000"}
YAML
  run kubectl wait --for=condition=Ready "node/$1" --timeout="${DEMO_TIMEOUT}s" || fail "$1 did not become Ready"
}

env_remove_node() { # NAME
  run kubectl delete node "$1" --wait=true || fail "deleting node $1 failed"
}

env_handover() {
  note "1. Turn kube-controller-manager's workload controllers off: stop the process that runs them."
  note "\$ kill -TERM $UPSTREAM_PID"
  stop_process "$UPSTREAM_PID"
  UPSTREAM_PID=''
  note "2. Restart mini-kcm with --kinds=apps (the copies process releases the Lease when it stops)."
  note "\$ kill -TERM $MINI_KCM_PID"
  stop_process "$MINI_KCM_PID"
  MINI_KCM_PID=''
  start_mini_kcm apps
}

env_log_mark() { wc -l <"$MINI_KCM_LOG"; }
env_logs_since() { # MARK
  # Without the timestamp and the module path: "INFO sync{controller=... key=ns/name}: message".
  tail -n "+$(($1 + 1))" "$MINI_KCM_LOG" | sed -E 's/^[^ ]+ +//; s/ mini_kcm_[a-z_]+(::[a-z_]+)*://'
}

env_diagnostics() {
  local file
  for file in "$MINI_KCM_LOG" "$UPSTREAM_LOG" "$DEMO_WORK/up.log"; do
    [[ -f "$file" ]] || continue
    printf -- '--- last lines of %s\n' "$file"
    tail -n 30 "$file"
  done
}

env_cleanup() {
  local status=$?
  stop_process "$MINI_KCM_PID"
  stop_process "$UPSTREAM_PID"
  stop_process "$UP_PID"
  printf 'demo: local plane stopped; logs in %s\n' "$DEMO_WORK"
  return "$status"
}
