#!/usr/bin/env bash
# Makes sure a Docker daemon answers, for CI on a clean Debian machine (the container proof of the
# in-cluster tests, tests/e2e/in_cluster.rs, needs one):
# - installs Debian's `docker.io` with apt-get when `dockerd` is missing;
# - starts `dockerd` in the background when `docker info` does not answer, with flags that work inside a
#   container or a restricted VM (vfs storage, no iptables, no default bridge: the tests use --network host),
#   logging to $DOCKERD_LOG (default /tmp/dockerd.log), and waits until it answers.
# Idempotent: does nothing when a daemon already answers.
set -euo pipefail

log=${DOCKERD_LOG:-/tmp/dockerd.log}
as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

if command -v docker >/dev/null && docker info >/dev/null 2>&1; then
  echo "docker: a daemon answers ($(docker version --format '{{.Server.Version}}' 2>/dev/null))"
  exit 0
fi

if ! command -v dockerd >/dev/null; then
  echo "docker: installing Debian's docker.io"
  as_root apt-get update
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends docker.io
fi

echo "docker: starting dockerd (log: $log)"
as_root sh -c "nohup dockerd --storage-driver=vfs --iptables=false --bridge=none >>'$log' 2>&1 &"
for _ in $(seq 1 60); do
  if docker info >/dev/null 2>&1; then
    echo "docker: daemon ready ($(docker version --format '{{.Server.Version}}' 2>/dev/null))"
    exit 0
  fi
  sleep 1
done
echo "docker: dockerd did not answer within 60 s; last lines of $log:" >&2
tail -n 30 "$log" >&2 || true
exit 1
