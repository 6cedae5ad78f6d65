#!/usr/bin/env bash
# Makes this machine able to run the kind cluster of the tour with no registry (docs/kind.md):
# - Debian's debootstrap, jq, containerd (ctr) and a C compiler with a static libc, which
#   deploy/kind/node-image/build.sh needs;
# - a Docker daemon (deploy/image/ensure-docker.sh: it registers deploy/kind/runc-without-sys-resource as
#   the default runtime, which kind's privileged node containers need on hosts without CAP_SYS_RESOURCE);
# - the kind CLI at the version pinned in deploy/control-plane/versions.env, built from its Go module into
#   ${MINI_KCM_CACHE:-~/.cache/mini-kcm}/kind/bin/kind.
# Idempotent. Prints the kind binary's path on its last line.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
# shellcheck source=../control-plane/versions.env
source "$repo/deploy/control-plane/versions.env"
as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

missing=()
command -v debootstrap >/dev/null || missing+=(debootstrap)
command -v jq >/dev/null || missing+=(jq)
command -v ctr >/dev/null || missing+=(containerd)
command -v cc >/dev/null || missing+=(gcc)
[ -f /usr/lib/x86_64-linux-gnu/libc.a ] || [ -f /usr/lib/libc.a ] || missing+=(libc6-dev)
if ((${#missing[@]})); then
  echo "kind host: installing Debian packages: ${missing[*]}"
  as_root apt-get update
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"
fi

bash "$repo/deploy/image/ensure-docker.sh"

bin_dir="${MINI_KCM_CACHE:-$HOME/.cache/mini-kcm}/kind/bin"
kind="$bin_dir/kind"
if [[ ! -x $kind ]] || [[ $("$kind" version 2>/dev/null | awk '{print $2}') != "$KIND_VERSION" ]]; then
  echo "kind host: building kind ${KIND_VERSION} from its Go module"
  mkdir -p "$bin_dir"
  GOTOOLCHAIN=local CGO_ENABLED=0 GOBIN="$bin_dir" GOFLAGS=-mod=mod go install "sigs.k8s.io/kind@${KIND_VERSION}"
fi
echo "kind host: $("$kind" version)"
echo "$kind"
