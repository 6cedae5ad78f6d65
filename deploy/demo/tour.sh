#!/usr/bin/env bash
# A guided tour of mini-kcm: one script that a person watches (or CI runs), step by step:
#
#   install -> a minikcm.dev Deployment: create, scale, roll out, pause/resume, roll back
#           -> a minikcm.dev DaemonSet following a node added, tainted, untainted, removed
#           -> an apps/v1 Deployment reconciled by kube-controller-manager, handed over to mini-kcm
#
# Every step says what to look at and which controller decision happened, shows what mini-kcm logged
# about it, and waits for a condition (kubectl wait, rollout status), never for a fixed time.
#
#   DEMO_ENV=local bash deploy/demo/tour.sh    # the local plane (mini-kcm up), verified in CI
#   DEMO_ENV=kind  bash deploy/demo/tour.sh    # a kind cluster (deploy/kind/; tests/e2e/kind.rs runs it)
#
# Settings (environment):
#   DEMO_ENV      local | kind (default local): which deploy/demo/env/<name>.sh provides the
#                 environment-specific parts (install, node add/remove, turning upstream's controllers off)
#   DEMO_PAUSE    1: wait for Enter after each step (default 0: runs straight through)
#   DEMO_TIMEOUT  seconds each wait may take before the tour fails (default 120)
#   DEMO_NS       the namespace of the demo objects (default demo)
#   DEMO_IMAGE    the containers' image (default: the environment's env_default_image; on kind the nodes'
#                 own pause image, which every node has; on the local plane registry.k8s.io/pause:3.10,
#                 never pulled: kwok only simulates pods)
#   DEMO_WORK     where logs, kubeconfig and state go (default: a new directory under $TMPDIR)
#   MINI_KCM      the mini-kcm binary on this machine (runs `mini-kcm rollout`; on the local plane also
#                 the plane and the controllers)
#   KUBECTL       the kubectl to use (local default: the plane's own)
# and the env file's own (see deploy/demo/env/*.sh). Docs: docs/demo.md.
set -euo pipefail

DEMO_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$DEMO_DIR/../.." && pwd)
DEMO_ENV=${DEMO_ENV:-local}
DEMO_PAUSE=${DEMO_PAUSE:-0}
DEMO_TIMEOUT=${DEMO_TIMEOUT:-120}
DEMO_NS=${DEMO_NS:-demo}
DEMO_IMAGE=${DEMO_IMAGE:-}
if [[ -z "${DEMO_WORK:-}" ]]; then
  DEMO_WORK=$(mktemp -d "${TMPDIR:-/tmp}/mini-kcm-demo.XXXXXX")
fi
mkdir -p "$DEMO_WORK"

# ---- presentation ----------------------------------------------------------------------------------

if [[ -t 1 ]]; then BOLD=$'\033[1m' DIM=$'\033[2m' RESET=$'\033[0m'; else BOLD='' DIM='' RESET=''; fi
STEP=0

# A numbered step: its title, then what happens and why.
step() {
  STEP=$((STEP + 1))
  printf '\n%s== %d. %s%s\n' "$BOLD" "$STEP" "$1" "$RESET"
  shift
  (($# == 0)) || printf '%s\n' "$@" | sed 's/^/   /'
}
# What to look at, and why it matters.
look() { printf '   %slook:%s %s\n' "$BOLD" "$RESET" "$*"; }
note() { printf '%s\n' "$@" | sed 's/^/   /'; }
# Runs a command, showing it first; its output is indented under it.
run() {
  printf '   %s$ %s%s\n' "$DIM" "$(shown "$@")" "$RESET"
  "$@" 2>&1 | sed 's/^/     /'
}
# A command as a person would type it: `k` spelled out, arguments with special characters quoted.
shown() {
  local out=() arg
  [[ "$1" != k ]] || set -- kubectl -n "$DEMO_NS" "${@:2}"
  for arg in "$@"; do
    if [[ "$arg" =~ ^[A-Za-z0-9_./=:,@%+-]*$ ]]; then out+=("$arg"); else out+=("'$arg'"); fi
  done
  printf '%s' "${out[*]}"
}
# Fails the tour; fd 3 is the script's stderr, so a failure inside a silenced wait_until condition shows.
exec 3>&2
fail() {
  {
    printf '\ndemo: FAILED in step %d: %s\n' "$STEP" "$*"
    if [[ -n "${KUBECONFIG:-}" ]]; then
      kubectl -n "$DEMO_NS" --request-timeout=5s get deployments.minikcm.dev,replicasets.minikcm.dev,daemonsets.minikcm.dev,deployments.apps,replicasets.apps,pods -o wide || true
    fi
    env_diagnostics || true
  } >&3 2>&3
  exit 1
}
# Between steps: a person watching presses Enter; CI runs straight through.
next() {
  printf '   %sok%s\n' "$BOLD" "$RESET"
  if [[ "$DEMO_PAUSE" == 1 ]]; then
    read -r -p "   (Enter for the next step) " _ </dev/tty || true
  fi
}

# ---- tools ------------------------------------------------------------------------------------------

# `kubectl` and `mini-kcm` in the commands shown are these (the env file sets KUBECTL and MINI_KCM).
kubectl() { command "$KUBECTL" "$@"; }
mini-kcm() { command "$MINI_KCM" "$@"; }
k() { kubectl -n "$DEMO_NS" "$@"; }

# Polls a condition kubectl wait cannot express (every half second, at most DEMO_TIMEOUT).
wait_until() {
  local what=$1 deadline=$((SECONDS + DEMO_TIMEOUT))
  shift
  printf '   %swaiting until %s%s\n' "$DIM" "$what" "$RESET"
  until "$@" >/dev/null 2>&1; do
    ((SECONDS < deadline)) || fail "timed out after ${DEMO_TIMEOUT}s waiting until $what"
    sleep 0.5
  done
}
# kubectl wait in the demo namespace, with the tour's timeout.
kwait() { run k wait --timeout="${DEMO_TIMEOUT}s" "$@" || fail "kubectl wait $* did not succeed"; }
rollout_status() {
  run mini-kcm rollout status -n "$DEMO_NS" --timeout="${DEMO_TIMEOUT}s" "$1" ||
    fail "the rollout of $1 did not complete"
}
jp() { k get "$1" -o "jsonpath=$2"; }

# What mini-kcm logged about the demo namespace since the mark (env_log_mark), at most 25 lines.
decisions_since() {
  local lines
  lines=$(env_logs_since "$1" | grep -F "$DEMO_NS/" || true)
  if [[ -z "$lines" ]]; then
    note "mini-kcm logged nothing about $DEMO_NS (no decision was needed)"
    return
  fi
  printf '   %smini-kcm said:%s\n' "$BOLD" "$RESET"
  printf '%s\n' "$lines" | sed -n '1,25s/^/     /p'
  local total
  total=$(printf '%s\n' "$lines" | wc -l)
  ((total <= 25)) || note "  ... ($((total - 25)) more lines)"
}
# The events of one object: who decided (reportingController, reportingInstance) and what.
events_of() {
  run k get events.events.k8s.io --field-selector "regarding.name=$1" --sort-by=.metadata.creationTimestamp \
    -o custom-columns='CONTROLLER:.reportingController,INSTANCE:.reportingInstance,REASON:.reason,NOTE:.note'
}
# The ReplicaSets of an app: name, desired replicas, the template's VERSION, the revision.
replica_sets() {
  run k get "$1" -l "app=$2" -o \
    custom-columns='NAME:.metadata.name,DESIRED:.spec.replicas,READY:.status.readyReplicas,VERSION:.spec.template.spec.containers[0].env[0].value,REVISION:.metadata.annotations.deployment\.kubernetes\.io/revision'
}
count_lines() { grep -c . || true; }
# How many ReplicaSets (mrs or rs) an app has.
rs_count() { k get "$1" -l "app=$2" -o name | count_lines; }

# ---- the environment ----------------------------------------------------------------------------------

ENV_FILE="$DEMO_DIR/env/$DEMO_ENV.sh"
[[ -f "$ENV_FILE" ]] || { echo "demo: unknown DEMO_ENV '$DEMO_ENV' (no $ENV_FILE)" >&2; exit 2; }
# The env file defines: env_install, env_default_image, env_add_node NAME, env_remove_node NAME, env_handover, env_log_mark,
# env_logs_since MARK, env_diagnostics, env_cleanup, and sets SPARE_NODE (a node the cluster can gain).
# shellcheck source=deploy/demo/env/local.sh
source "$ENV_FILE"
# Ctrl-C or SIGTERM end the tour through the EXIT trap, which stops what the environment started.
trap env_cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# ---- the tour -------------------------------------------------------------------------------------------

printf '%smini-kcm tour%s on %s (work directory: %s)\n' "$BOLD" "$RESET" "$DEMO_ENV" "$DEMO_WORK"

step "Install" "$(env_describe)"
env_install
DEMO_IMAGE=${DEMO_IMAGE:-$(env_default_image)}
look "the Lease names the one replica that writes: its holder is the leader's name plus a suffix"
run kubectl -n mini-kcm-system get lease mini-kcm -o custom-columns='HOLDER:.spec.holderIdentity,RENEWED:.spec.renewTime'
if kubectl get namespace "$DEMO_NS" >/dev/null 2>&1; then
  run kubectl delete namespace "$DEMO_NS" --wait=true --timeout="${DEMO_TIMEOUT}s"
fi
run kubectl create namespace "$DEMO_NS"
next

# -- a Deployment copy ---------------------------------------------------------------------------------

deployment_copy() { # VERSION
  cat <<YAML
apiVersion: minikcm.dev/v1
kind: Deployment
metadata: {name: web, namespace: $DEMO_NS}
spec:
  replicas: 3
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - {name: web, image: $DEMO_IMAGE, imagePullPolicy: IfNotPresent, env: [{name: VERSION, value: $1}]}
YAML
}
set_version() { # KIND NAME VERSION
  run k patch "$1" "$2" --type=json \
    -p "[{\"op\":\"replace\",\"path\":\"/spec/template/spec/containers/0/env/0/value\",\"value\":\"$3\"}]"
}

step "Create a Deployment copy (minikcm.dev/v1)" \
  "The same object as an apps/v1 Deployment, in the group minikcm.dev, which only mini-kcm reconciles." \
  "Its Deployment controller creates a ReplicaSet for the template (revision 1) and scales it to 3;" \
  "its ReplicaSet controller then creates the 3 pods."
mark=$(env_log_mark)
deployment_copy v1 | run kubectl apply -f -
rollout_status mdeploy/web
look "one ReplicaSet web-<pod-template-hash>, revision 1, 3 ready; its pods are owned by it"
replica_sets mrs web
run k get pods -l app=web -o custom-columns='POD:.metadata.name,OWNER:.metadata.ownerReferences[0].name,NODE:.spec.nodeName,PHASE:.status.phase'
decisions_since "$mark"
next

step "Scale it to 5" \
  "Only spec.replicas changed, not the template: the Deployment controller scales the ReplicaSet it has" \
  "(no new ReplicaSet, no new revision), and the ReplicaSet controller creates 2 pods."
mark=$(env_log_mark)
run k scale mdeploy/web --replicas=5
rollout_status mdeploy/web
look "still one ReplicaSet, now DESIRED 5; the log says 'scaling the active ReplicaSets', then 'too few replicas'"
replica_sets mrs web
[[ $(rs_count mrs web) == 1 ]] || fail "scaling created a ReplicaSet"
decisions_since "$mark"
next

step "Roll out a new template (VERSION v1 -> v2)" \
  "A template change is a new revision: a new ReplicaSet is scaled up while the old one is scaled down," \
  "within maxSurge 25% (at most 7 pods) and maxUnavailable 25% (at least 4 available) of 5."
mark=$(env_log_mark)
set_version mdeploy web v2
rollout_status mdeploy/web
look "two ReplicaSets: the new one (revision 2) at 5, the old one kept at 0 as history; the log shows each scaling step"
replica_sets mrs web
run mini-kcm rollout history -n "$DEMO_NS" mdeploy/web
decisions_since "$mark"
next

step "Pause, change the template, resume" \
  "A paused Deployment records its new template but the controller does not roll it out:" \
  "it observes the new generation and reports Progressing=Unknown, reason DeploymentPaused."
run mini-kcm rollout pause -n "$DEMO_NS" mdeploy/web
mark=$(env_log_mark)
set_version mdeploy web v3
generation=$(jp mdeploy/web '{.metadata.generation}')
kwait --for=jsonpath='{.status.observedGeneration}'="$generation" mdeploy/web
kwait --for=jsonpath='{.status.conditions[?(@.type=="Progressing")].reason}'=DeploymentPaused mdeploy/web
look "generation $generation is observed, yet there are still only two ReplicaSets and v2 runs everywhere"
replica_sets mrs web
[[ $(rs_count mrs web) == 2 ]] || fail "a paused Deployment rolled out"
note "Resuming lets the controller roll out v3 (revision 3)."
run mini-kcm rollout resume -n "$DEMO_NS" mdeploy/web
rollout_status mdeploy/web
replica_sets mrs web
decisions_since "$mark"
next

step "Roll back to the previous revision" \
  "'rollout undo' copies revision 2's template back into the Deployment; the controller finds the" \
  "ReplicaSet that already has this template and scales it up again: no new ReplicaSet, and the" \
  "revision moves from 2 to 4 (a revision number names a ReplicaSet's latest use)."
mark=$(env_log_mark)
run mini-kcm rollout undo -n "$DEMO_NS" mdeploy/web
rollout_status mdeploy/web
look "three ReplicaSets still; the v2 one is back at 5 with revision 4, v3 is at 0"
replica_sets mrs web
[[ $(rs_count mrs web) == 3 ]] || fail "the rollback created a ReplicaSet"
[[ $(jp mdeploy/web '{.spec.template.spec.containers[0].env[0].value}') == v2 ]] || fail "the template is not v2"
run mini-kcm rollout history -n "$DEMO_NS" mdeploy/web
decisions_since "$mark"
next

# -- a DaemonSet copy ------------------------------------------------------------------------------------

ds_status() {
  jp mds/agent '{.status.desiredNumberScheduled}/{.status.numberAvailable}/{.status.observedGeneration}'
}
# Waits until the DaemonSet wants N pods and N are available.
wait_daemon_pods() {
  kwait --for=jsonpath='{.status.desiredNumberScheduled}'="$1" mds/agent
  kwait --for=jsonpath='{.status.numberAvailable}'="$1" mds/agent
}
agent_pod_on() { k get pods -l app=agent --field-selector "spec.nodeName=$1" -o name; }
has_agent_pod_on() { [[ -n "$(agent_pod_on "$1")" ]]; }
has_no_agent_pod_on() { [[ -z "$(agent_pod_on "$1")" ]]; }

step "Create a DaemonSet copy: one pod per eligible node" \
  "The DaemonSet controller computes, for every node, whether a daemon pod should run there" \
  "(node selector, affinity, taints against tolerations), and creates or deletes pods to match."
mark=$(env_log_mark)
run kubectl apply -f - <<YAML
apiVersion: minikcm.dev/v1
kind: DaemonSet
metadata: {name: agent, namespace: $DEMO_NS}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec:
      terminationGracePeriodSeconds: 1
      containers: [{name: agent, image: $DEMO_IMAGE, imagePullPolicy: IfNotPresent}]
YAML
rollout_status mds/agent
nodes_before=$(jp mds/agent '{.status.desiredNumberScheduled}')
look "DESIRED = CURRENT = READY = $nodes_before: one pod on each schedulable node"
run k get mds agent
run k get pods -l app=agent -o custom-columns='POD:.metadata.name,NODE:.spec.nodeName,PHASE:.status.phase'
decisions_since "$mark"
next

step "A node joins: $SPARE_NODE" \
  "The new Node is an event for the DaemonSet controller: it re-evaluates the DaemonSets and" \
  "creates a pod bound to the new node (the controller sets the node affinity, the scheduler binds it)."
mark=$(env_log_mark)
env_add_node "$SPARE_NODE"
wait_daemon_pods $((nodes_before + 1))
wait_until "a daemon pod runs on $SPARE_NODE" has_agent_pod_on "$SPARE_NODE"
look "DESIRED went from $nodes_before to $((nodes_before + 1)); the log names the node in create_on"
run k get mds agent
decisions_since "$mark"
next

step "Taint $SPARE_NODE NoExecute, then remove the taint" \
  "The pod does not tolerate the taint, so the node is no longer eligible: the daemon pod goes" \
  "(deleted by mini-kcm or by kube-controller-manager's taint-eviction controller, whichever acts first)" \
  "and mini-kcm does not recreate it. Untainted, the node is eligible again and gets a new pod."
mark=$(env_log_mark)
run kubectl taint node "$SPARE_NODE" demo.minikcm.dev/maintenance=true:NoExecute
wait_daemon_pods "$nodes_before"
wait_until "no daemon pod is left on $SPARE_NODE" has_no_agent_pod_on "$SPARE_NODE"
look "DESIRED is back to $nodes_before while the node is tainted"
run k get mds agent
run kubectl taint node "$SPARE_NODE" demo.minikcm.dev/maintenance-
wait_daemon_pods $((nodes_before + 1))
wait_until "a daemon pod runs on $SPARE_NODE again" has_agent_pod_on "$SPARE_NODE"
look "DESIRED is $((nodes_before + 1)) again, with a new pod on $SPARE_NODE"
run k get pods -l app=agent -o custom-columns='POD:.metadata.name,NODE:.spec.nodeName,PHASE:.status.phase'
decisions_since "$mark"
next

step "The node leaves: $SPARE_NODE is removed" \
  "A deleted Node is no longer a place to run: the DaemonSet's desired count drops. The pod bound to it" \
  "is left to kube-controller-manager's pod garbage collector (pods of vanished nodes go after a 40 s" \
  "quarantine); the DaemonSet controller only deletes pods not yet scheduled to a vanished node."
mark=$(env_log_mark)
env_remove_node "$SPARE_NODE"
wait_daemon_pods "$nodes_before"
look "DESIRED and AVAILABLE are $nodes_before again"
run k get mds agent
decisions_since "$mark"
next

# -- hand-over from kube-controller-manager on apps/v1 --------------------------------------------------------

step "kube-controller-manager reconciles an apps/v1 Deployment" \
  "Until now mini-kcm managed only the copies; apps/v1 belongs to kube-controller-manager's own" \
  "Deployment and ReplicaSet controllers. It rolls out 'shop' (v1, then v2: two ReplicaSets)."
run kubectl apply -f - <<YAML
apiVersion: apps/v1
kind: Deployment
metadata: {name: shop, namespace: $DEMO_NS}
spec:
  replicas: 3
  selector: {matchLabels: {app: shop}}
  template:
    metadata: {labels: {app: shop}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - {name: shop, image: $DEMO_IMAGE, imagePullPolicy: IfNotPresent, env: [{name: VERSION, value: v1}]}
YAML
run k rollout status deploy/shop --timeout="${DEMO_TIMEOUT}s" || fail "upstream did not roll out shop"
set_version deploy shop v2
run k rollout status deploy/shop --timeout="${DEMO_TIMEOUT}s" || fail "upstream did not roll out shop v2"
look "the ScalingReplicaSet events come from kube-controller-manager's deployment-controller (no INSTANCE)"
events_of shop
replica_sets rs shop
# What the hand-over must keep: every ReplicaSet and every pod that is not already terminating.
live_pods() {
  k get pods -l app=shop -o jsonpath='{range .items[*]}{.metadata.uid} {.metadata.deletionTimestamp}{"\n"}{end}' |
    awk 'NF == 1 {print $1}' | sort
}
replica_set_uids() { k get rs -l app=shop -o jsonpath='{range .items[*]}{.metadata.uid}{"\n"}{end}' | sort; }
live_pods_are() { [[ $(live_pods | count_lines) == "$1" ]]; }
wait_until "shop's old pods are gone (3 live pods)" live_pods_are 3
pods_before=$(live_pods)
rs_before=$(replica_set_uids)
next

step "Hand-over: kube-controller-manager's workload controllers off, mini-kcm takes apps/v1" \
  "Turn upstream's deployment, replicaset and daemonset controllers off first, then let mini-kcm manage" \
  "apps/v1: never both at once, or they fight over every object."
mark=$(env_log_mark)
env_handover
look "mini-kcm's caches hold upstream's ReplicaSets and pods: it adopts nothing and recreates nothing"
[[ "$(replica_set_uids)" == "$rs_before" ]] || fail "the hand-over replaced a ReplicaSet"
[[ "$(live_pods)" == "$pods_before" ]] || fail "the hand-over replaced a pod"
note "same $(count_lines <<<"$rs_before") ReplicaSets and same $(count_lines <<<"$pods_before") pods (by UID) as before the hand-over"
next

step "mini-kcm keeps apps/v1 converged: scale shop to 4" \
  "Nothing else reconciles apps/v1 now. mini-kcm's Deployment controller recognises upstream's" \
  "ReplicaSet as the current one (same template; its pod-template-hash is computed differently) and" \
  "scales it to 4: one new pod, no new ReplicaSet."
run k scale deploy/shop --replicas=4
run k rollout status deploy/shop --timeout="${DEMO_TIMEOUT}s" || fail "mini-kcm did not scale shop"
[[ "$(replica_set_uids)" == "$rs_before" ]] || fail "scaling after the hand-over created a ReplicaSet"
pods_after=$(live_pods)
[[ -z "$(comm -23 <(printf '%s\n' "$pods_before") <(printf '%s\n' "$pods_after"))" ]] ||
  fail "a pod of upstream's rollout is gone"
[[ $(count_lines <<<"$pods_after") == 4 ]] || fail "expected 4 live pods, found: $pods_after"
look "the newest events now come from mini-kcm: same CONTROLLER names, and its INSTANCE where it has one"
events_of shop
replica_sets rs shop
decisions_since "$mark"
next

printf '\n%smini-kcm tour complete%s (%d steps, %ds). Logs and state: %s\n' "$BOLD" "$RESET" "$STEP" "$SECONDS" "$DEMO_WORK"
