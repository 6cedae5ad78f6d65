#!/usr/bin/env bash
# Builds the local control plane from Go modules (no Docker, no downloaded binaries):
#   etcd, kube-apiserver, kube-scheduler, kube-controller-manager, kubectl, kwok,
#   for the optional real node (`mini-kcm up --real-node`): kubelet, kube-proxy,
#   and for the kind node image (deploy/kind/node-image/build.sh): kubeadm
# into ${MINI_KCM_CACHE:-$HOME/.cache/mini-kcm}/<version-set>/bin/. Idempotent: a complete, cached
# version set returns in well under a second. Versions come from versions.env beside this script
# (or from the environment when the Rust CLI runs an embedded copy of this script).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]:-$0}")" && pwd)"
if [[ -z "${KUBERNETES_VERSION:-}" && -f "$here/versions.env" ]]; then
  # shellcheck source=versions.env
  source "$here/versions.env"
fi
: "${KUBERNETES_VERSION:?KUBERNETES_VERSION is not set (see deploy/control-plane/versions.env)}"
: "${ETCD_VERSION:?ETCD_VERSION is not set}"
: "${KWOK_VERSION:?KWOK_VERSION is not set}"

cache_root="${MINI_KCM_CACHE:-$HOME/.cache/mini-kcm}"
version_set="k8s-${KUBERNETES_VERSION}_etcd-${ETCD_VERSION}_kwok-${KWOK_VERSION}"
set_dir="$cache_root/$version_set"
bin_dir="$set_dir/bin"
src_dir="$set_dir/src"
log_dir="$set_dir/logs"
stamp="$bin_dir/.complete"
binaries=(etcd kube-apiserver kube-scheduler kube-controller-manager kubectl kwok kubelet kube-proxy kubeadm)
# The k8s.io/kubernetes commands, all built from one module so their versions cannot drift apart.
k8s_commands=(kube-apiserver kube-scheduler kube-controller-manager kubectl kubelet kube-proxy kubeadm)

all_present() {
  [[ -f "$stamp" ]] || return 1
  local b
  for b in "${binaries[@]}"; do [[ -x "$bin_dir/$b" ]] || return 1; done
}

if all_present; then
  echo "control plane binaries: $bin_dir (cached, $version_set)"
  exit 0
fi

# Two builds at once (parallel tests, two `mini-kcm up`) would race on the same folders: take a lock,
# then look again, since the other build may have finished meanwhile.
mkdir -p "$set_dir"
exec 9>"$set_dir/.build.lock"
if ! flock -n 9; then
  echo "another build of $version_set is running; waiting for it"
  flock 9
fi
if all_present; then
  echo "control plane binaries: $bin_dir (built by a concurrent run)"
  exit 0
fi

if ! command -v go >/dev/null 2>&1; then
  echo "error: 'go' was not found on PATH; install Go >= 1.26 (https://go.dev/dl) to build the local control plane" >&2
  exit 127
fi

export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-mod=mod
mkdir -p "$bin_dir" "$src_dir" "$log_dir"
started=$SECONDS

# step NAME LOG CMD...: runs CMD with its output in LOG, prints the step name and elapsed time,
# and on failure the last lines of LOG.
step() {
  local name="$1" log="$2"; shift 2
  local t0=$SECONDS
  printf '==> %-44s (log: %s)\n' "$name" "$log"
  if ! "$@" >"$log" 2>&1; then
    echo "error: step '$name' failed after $((SECONDS - t0))s; last lines of $log:" >&2
    tail -n 40 "$log" >&2
    exit 1
  fi
  printf '    done in %ss (total %ss)\n' "$((SECONDS - t0))" "$((SECONDS - started))"
}

k8s_minor="${KUBERNETES_VERSION#v1.}"; k8s_minor="${k8s_minor%%.*}"
k8s_patch="${KUBERNETES_VERSION##*.}"
staging_version="v0.${k8s_minor}.${k8s_patch}"

prepare_k8s_module() {
  local dir="$src_dir/k8s"
  rm -rf "$dir"; mkdir -p "$dir"; cd "$dir"
  go mod init local/k8sbin
  # k/k's own go.mod (from the module proxy) names the staging modules it replaces with ./staging paths
  # and the go/godebug lines its binaries are built with; derive both from it rather than hard-coding.
  local gomod
  gomod="$(go mod download -json "k8s.io/kubernetes@${KUBERNETES_VERSION}" | sed -n 's/.*"GoMod": "\(.*\)",*/\1/p')"
  [[ -f "$gomod" ]] || { echo "could not locate go.mod of k8s.io/kubernetes@${KUBERNETES_VERSION}"; return 1; }
  local go_line godebug_line
  go_line="$(awk '$1=="go"{print $2; exit}' "$gomod")"
  godebug_line="$(awk '$1=="godebug"{print $2; exit}' "$gomod")"
  go mod edit -go="$go_line"
  [[ -n "$godebug_line" ]] && go mod edit -godebug="$godebug_line"
  go mod edit -require="k8s.io/kubernetes@${KUBERNETES_VERSION}"
  local mods
  mods="$(sed -n 's#^[[:space:]]*\(k8s.io/[a-z0-9-]*\) => ./staging/src/k8s.io/.*#\1#p' "$gomod")"
  [[ -n "$mods" ]] || { echo "no staging replaces found in $gomod"; return 1; }
  local m
  for m in $mods; do go mod edit -replace="$m=$m@$staging_version"; done
  echo "staging modules pinned at $staging_version: $(echo "$mods" | wc -l)"
  local tools=() c
  for c in "${k8s_commands[@]}"; do tools+=("k8s.io/kubernetes/cmd/$c@${KUBERNETES_VERSION}"); done
  go get -tool "${tools[@]}"
  go mod download
}

build_k8s() {
  cd "$src_dir/k8s"
  # No symbol table or DWARF (-s -w): a third smaller, linked a third faster (kwok: 3.3 s -> 2.4 s);
  # panics still name their functions.
  local ldflags="-s -w"
  local pkg
  # Stamp the version like k/k's hack/lib/version.sh so `--version` and /version report it.
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldflags+=" -X $pkg.gitVersion=${KUBERNETES_VERSION} -X $pkg.gitMajor=1 -X $pkg.gitMinor=${k8s_minor}"
    ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
  done
  # Only what is missing: a cache built before kubelet/kube-proxy were added gains just those two.
  local pkgs=() c
  for c in "${k8s_commands[@]}"; do [[ -x "$bin_dir/$c" ]] || pkgs+=("k8s.io/kubernetes/cmd/$c"); done
  go build -trimpath -ldflags "$ldflags" -o "$bin_dir/" "${pkgs[@]}"
}

build_etcd() {
  local dir="$src_dir/etcd"
  rm -rf "$dir"; mkdir -p "$dir"; cd "$dir"
  go mod init local/etcdbin
  go get -tool "go.etcd.io/etcd/server/v3@${ETCD_VERSION}"
  go build -trimpath -ldflags "-s -w" -o "$bin_dir/etcd" go.etcd.io/etcd/server/v3
}

build_kwok() {
  GOBIN="$bin_dir" go install -trimpath -ldflags "-s -w" "sigs.k8s.io/kwok/cmd/kwok@${KWOK_VERSION}"
}

echo "building control plane $version_set into $bin_dir (first build takes minutes; later ones are cached)"
[[ -x "$bin_dir/etcd" ]] || step "etcd ${ETCD_VERSION}" "$log_dir/etcd.log" build_etcd
[[ -x "$bin_dir/kwok" ]] || step "kwok ${KWOK_VERSION}" "$log_dir/kwok.log" build_kwok
k8s_missing=()
for c in "${k8s_commands[@]}"; do [[ -x "$bin_dir/$c" ]] || k8s_missing+=("$c"); done
if ((${#k8s_missing[@]})); then
  step "resolve k8s.io/kubernetes ${KUBERNETES_VERSION} modules" "$log_dir/k8s-modules.log" prepare_k8s_module
  step "compile ${k8s_missing[*]}" "$log_dir/k8s-build.log" build_k8s
fi

# Captured first: `cmd | grep -q` under pipefail fails whenever grep exits before cmd has written all.
apiserver_version="$("$bin_dir/kube-apiserver" --version)"
[[ "$apiserver_version" == *"${KUBERNETES_VERSION}"* ]] || { echo "error: kube-apiserver reports '$apiserver_version', not ${KUBERNETES_VERSION}" >&2; exit 1; }
etcd_version="$("$bin_dir/etcd" --version)"
[[ "$etcd_version" == *"${ETCD_VERSION#v}"* ]] || { echo "error: etcd reports '$etcd_version', not ${ETCD_VERSION}" >&2; exit 1; }
touch "$stamp"
echo "control plane binaries ready in $bin_dir after $((SECONDS - started))s ($(du -sh "$set_dir" | cut -f1) in $set_dir)"
