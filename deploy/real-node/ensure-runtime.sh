#!/usr/bin/env bash
# Makes sure the real node of the local plane (`mini-kcm up --real-node`, tests/e2e/real_node.rs) can run
# containers: installs Debian's containerd, runc and CNI plugins with apt-get when one is missing, plus
# iptables (kube-proxy's and the checks' tool) and a C compiler with a static libc (deploy/real-node/
# build-images.sh compiles the pause, http-get and https-get binaries, the last with static OpenSSL). Starts nothing: each plane runs its own
# containerd with a private config, state and socket.
# Idempotent: does nothing when everything is there.
set -euo pipefail

as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

missing=()
command -v containerd >/dev/null || missing+=(containerd)
command -v ctr >/dev/null || missing+=(containerd)
command -v runc >/dev/null || missing+=(runc)
[ -x /usr/lib/cni/bridge ] && [ -x /usr/lib/cni/host-local ] && [ -x /usr/lib/cni/loopback ] ||
  missing+=(containernetworking-plugins)
command -v iptables >/dev/null || missing+=(iptables)
command -v ip >/dev/null || missing+=(iproute2)
command -v cc >/dev/null || missing+=(gcc)
[ -f /usr/lib/x86_64-linux-gnu/libc.a ] || [ -f /usr/lib/libc.a ] || missing+=(libc6-dev)
# deploy/real-node/https-get.c links OpenSSL statically.
[ -f /usr/lib/x86_64-linux-gnu/libssl.a ] || missing+=(libssl-dev)

if [ "${#missing[@]}" -eq 0 ]; then
  echo "real-node runtime: containerd $(containerd --version | awk '{print $3}'), runc $(runc --version | awk 'NR==1{print $3}'), CNI plugins in /usr/lib/cni"
  exit 0
fi
# Unique names, in order.
mapfile -t packages < <(printf '%s\n' "${missing[@]}" | awk '!seen[$0]++')
echo "real-node runtime: installing Debian packages: ${packages[*]}"
as_root apt-get update
as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${packages[@]}"
