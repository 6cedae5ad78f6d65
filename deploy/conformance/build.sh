#!/usr/bin/env bash
# Builds the upstream e2e specs that exercise workload controllers (suite_test.go beside this script) into
#   ${MINI_KCM_CACHE:-$HOME/.cache/mini-kcm}/<version-set>/conformance/e2e.test
# from the same k8s.io/kubernetes module, the same staging pins and the same -trimpath as the control
# plane (deploy/control-plane/build.sh, run first when missing), so Go's build cache of the plane is reused
# (2-5 minutes the first time, well under a second when the suite and the versions are unchanged).
# Prints the binary's path on its last line. Nothing is written into the repository.
# `mini-kcm conformance` runs an embedded copy of this script with the versions in the environment and
# CONFORMANCE_SUITE naming a copy of suite_test.go.
set -euo pipefail

# Bump when the way the binary is built changes (part of the cache fingerprint).
build_revision=1
here="$(cd "$(dirname "${BASH_SOURCE[0]:-$0}")" && pwd)"
plane_build="$here/../control-plane/build.sh"
if [[ -z "${KUBERNETES_VERSION:-}" && -f "$here/../control-plane/versions.env" ]]; then
  # shellcheck source=../control-plane/versions.env
  source "$here/../control-plane/versions.env"
fi
: "${KUBERNETES_VERSION:?KUBERNETES_VERSION is not set (see deploy/control-plane/versions.env)}"
: "${ETCD_VERSION:?ETCD_VERSION is not set}"
: "${KWOK_VERSION:?KWOK_VERSION is not set}"
suite="${CONFORMANCE_SUITE:-$here/suite_test.go}"
[[ -f "$suite" ]] || { echo "error: the suite source $suite does not exist" >&2; exit 1; }

cache_root="${MINI_KCM_CACHE:-$HOME/.cache/mini-kcm}"
set_dir="$cache_root/k8s-${KUBERNETES_VERSION}_etcd-${ETCD_VERSION}_kwok-${KWOK_VERSION}"
plane_module="$set_dir/src/k8s"
module_dir="$set_dir/src/conformance"
out_dir="$set_dir/conformance"
binary="$out_dir/e2e.test"
# The binary is current when it was built from this suite_test.go for this version set.
fingerprint="$( (cat "$suite"; echo "$build_revision $KUBERNETES_VERSION $ETCD_VERSION $KWOK_VERSION") | sha256sum | cut -d' ' -f1)"
stamp="$out_dir/.built-from"

current() { [[ -x "$binary" && -f "$stamp" && "$(cat "$stamp")" == "$fingerprint" ]]; }
if current; then
  echo "$binary"
  exit 0
fi

# The plane's module (and its Go build cache) comes first.
if [[ ! -f "$set_dir/bin/.complete" || ! -f "$plane_module/go.mod" ]]; then
  [[ -f "$plane_build" ]] || { echo "error: build the control plane first (mini-kcm build-plane)" >&2; exit 1; }
  bash "$plane_build" >&2
fi
[[ -f "$plane_module/go.mod" ]] || {
  echo "error: $plane_module/go.mod is missing (the plane binaries were not built here from source);" \
    "remove $set_dir/bin and build the plane again" >&2
  exit 1
}

mkdir -p "$out_dir"
exec 9>"$out_dir/.build.lock"
if ! flock -n 9; then
  echo "another build of the conformance binary is running; waiting for it" >&2
  flock 9
fi
if current; then
  echo "$binary"
  exit 0
fi

export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-mod=mod
started=$SECONDS
# The plane's module already pins k8s.io/kubernetes and every staging module; start from it so both
# resolve to exactly the same versions, minus the plane's tool directives.
rm -rf "$module_dir"
mkdir -p "$module_dir"
cp "$plane_module/go.mod" "$plane_module/go.sum" "$module_dir/"
cp "$suite" "$module_dir/suite_test.go"
cd "$module_dir"
go mod edit -module local/conformance
for tool in $(go mod edit -json | sed -n 's/.*"Path": "\(k8s.io\/kubernetes\/cmd\/[^"]*\)".*/\1/p'); do
  go mod edit -droptool="$tool"
done

k8s_minor="${KUBERNETES_VERSION#v1.}"; k8s_minor="${k8s_minor%%.*}"
# gomega's object formatting for the specs moved in 1.37 (test/utils/format → test/utils/ktesting/format).
if ((k8s_minor < 37)); then
  sed -i 's#"k8s.io/kubernetes/test/utils/ktesting/format"#"k8s.io/kubernetes/test/utils/format"#' suite_test.go
fi
# No symbol table or DWARF, as the plane (deploy/control-plane/build.sh).
ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags+=" -X $pkg.gitVersion=${KUBERNETES_VERSION} -X $pkg.gitMajor=1 -X $pkg.gitMinor=${k8s_minor}"
  ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
done
log="$out_dir/build.log"
echo "building the conformance binary into $binary (log: $log)" >&2
# CONFORMANCE_BUILD_JOBS limits the compiler's parallelism on a shared machine (go build -p).
if ! go test -c -trimpath -p "${CONFORMANCE_BUILD_JOBS:-$(nproc)}" -ldflags "$ldflags" -o "$binary.tmp" . >"$log" 2>&1; then
  echo "error: building the conformance binary failed; last lines of $log:" >&2
  tail -n 40 "$log" >&2
  exit 1
fi
mv "$binary.tmp" "$binary"
echo "$fingerprint" >"$stamp"
echo "conformance binary built in $((SECONDS - started))s" >&2
echo "$binary"
