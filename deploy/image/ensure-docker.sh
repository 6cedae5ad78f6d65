#!/usr/bin/env bash
# Makes sure a Docker daemon answers, for CI on a clean Debian machine (the container proof of the
# in-cluster tests, tests/e2e/in_cluster.rs, and the kind cluster, tests/e2e/kind.rs, need one):
# - installs Debian's `docker.io` (and jq) with apt-get when `dockerd` is missing;
# - starts `dockerd` in the background when `docker info` does not answer, with flags that work inside a
#   container or a restricted VM (no iptables, no default bridge: the tests use --network host, kind makes
#   its own network), logging to $DOCKERD_LOG (default /tmp/dockerd.log), and waits until it answers.
#   Storage: overlay2 where the disk supports it (a kind node image is ~1 GB; vfs copies it whole for each
#   container), else vfs; DOCKER_STORAGE_DRIVER chooses. The default runtime is
#   deploy/kind/runc-without-sys-resource (runc, minus CAP_SYS_RESOURCE where the host's bounding set
#   lacks it, so that privileged containers such as kind's nodes can start; elsewhere it is runc as is).
# Idempotent: does nothing when a daemon already answers (it warns when that daemon lacks the runtime
# and this host needs it).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
log=${DOCKERD_LOG:-/tmp/dockerd.log}
runtime_name=runc-without-sys-resource
runtime_path=/usr/local/sbin/runc-without-sys-resource
as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

if command -v docker >/dev/null && docker info >/dev/null 2>&1; then
  echo "docker: a daemon answers ($(docker version --format '{{.Server.Version}}' 2>/dev/null), storage $(docker info --format '{{.Driver}}'), default runtime $(docker info --format '{{.DefaultRuntime}}'))"
  bounding=$(awk '/^CapBnd:/{print $2}' /proc/self/status)
  if ! (((16#${bounding:-0} >> 24) & 1)) && [[ $(docker info --format '{{.DefaultRuntime}}') != "$runtime_name" ]]; then
    echo "docker: warning: this host lacks CAP_SYS_RESOURCE and the daemon's default runtime is not $runtime_name:" \
      "privileged containers (kind's nodes) will not start; stop dockerd and run this script again" >&2
  fi
  exit 0
fi

missing=()
command -v dockerd >/dev/null || missing+=(docker.io)
command -v jq >/dev/null || missing+=(jq)
if ((${#missing[@]})); then
  echo "docker: installing Debian's ${missing[*]}"
  as_root apt-get update
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"
fi
as_root install -m 0755 "$here/../kind/runc-without-sys-resource" "$runtime_path"

start() { # STORAGE_DRIVER: starts dockerd and waits up to 60 s for it to answer
  echo "docker: starting dockerd, storage $1 (log: $log)"
  as_root sh -c "nohup dockerd --storage-driver=$1 --iptables=false --bridge=none \
    --add-runtime $runtime_name=$runtime_path --default-runtime $runtime_name >>'$log' 2>&1 &"
  for _ in $(seq 1 60); do
    if docker info >/dev/null 2>&1; then
      echo "docker: daemon ready ($(docker version --format '{{.Server.Version}}' 2>/dev/null), storage $1)"
      return 0
    fi
    if ! pgrep -x dockerd >/dev/null; then
      return 1
    fi
    sleep 1
  done
  return 1
}

stop_dockerd() { # a dockerd that failed to answer in time, before another try
  as_root pkill -x dockerd || true
  for _ in $(seq 1 40); do
    pgrep -x dockerd >/dev/null || return 0
    sleep 0.5
  done
}

if [[ -n ${DOCKER_STORAGE_DRIVER:-} ]]; then
  start "$DOCKER_STORAGE_DRIVER" && exit 0
elif start overlay2 || { stop_dockerd; start vfs; }; then
  exit 0
fi
echo "docker: dockerd did not answer within 60 s; last lines of $log:" >&2
tail -n 30 "$log" >&2 || true
exit 1
