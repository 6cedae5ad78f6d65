#!/usr/bin/env bash
# The supported Kubernetes versions, proven: for each version, a local plane of that version (built once
# and cached beside the pinned one) runs
#   - the controllers' e2e suites (both API families: apps/v1 and the minikcm.dev copies), and the bad-input
#     catalogue, whose quiet check fails on any retry loop,
#   - the in-cluster install as real pods on the real node (its kubelet and kube-proxy at that version),
#   - upstream's own e2e specs of that version (`conformance`, built from that version's test/e2e),
# with exactly the tests CI runs at the pinned version. CI itself runs the pinned version only.
#
# Usage: bash deploy/version-matrix.sh [1.X.Y ...]   (default: the oldest and the middle supported minor)
# Needs what `cargo test` needs (README) and root: it starts Docker and installs the real node's runtime
# first, as .ci/run does. A cold version costs ~13-19 min of plane build and a few minutes of conformance
# build on 2 cores (Go's build cache shared with the pinned plane); then its tests take ~15 min.
# Logs: target/version-matrix/<version>.log; a summary table at the end.
set -uo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here"
versions=("$@")
((${#versions[@]})) || versions=(1.35.4 1.36.3)
tests=(--test replicaset --test deployment --test daemonset --test bad_input --test real_node
  --test conformance)
out="target/version-matrix"
mkdir -p "$out"

# What the real node needs, as .ci/run installs it; the image is built with CI's profile (the release
# profile's fat LTO alone takes about 19 minutes here).
bash deploy/image/ensure-docker.sh
bash deploy/real-node/ensure-runtime.sh
export MINI_KCM_IMAGE_PROFILE="${MINI_KCM_IMAGE_PROFILE:-image-test}"

declare -A result seconds
for v in "${versions[@]}"; do
  log="$out/$v.log"
  echo "==> Kubernetes $v: ${tests[*]} (log: $log)"
  started=$SECONDS
  if MINI_KCM_KUBERNETES_VERSION="$v" MINI_KCM_REQUIRE_REAL_NODE=1 \
    cargo test -p mini-kcm-e2e --locked --no-fail-fast "${tests[@]}" >"$log" 2>&1; then
    result[$v]=passed
  else
    result[$v]=FAILED
    grep -E '^(test .* FAILED|failures:|---- )' "$log" | head -n 20 || true
  fi
  seconds[$v]=$((SECONDS - started))
  echo "    ${result[$v]} in ${seconds[$v]}s"
done

echo
echo "| Kubernetes | result | time |"
echo "| --- | --- | --- |"
status=0
for v in "${versions[@]}"; do
  echo "| $v | ${result[$v]} | ${seconds[$v]} s |"
  [[ "${result[$v]}" == passed ]] || status=1
done
exit "$status"
