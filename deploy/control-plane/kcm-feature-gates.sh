#!/usr/bin/env bash
# Writes the feature gates kube-controller-manager knows (crates/runtime/data/kcm-feature-gates.txt), read
# off the built binary: each candidate name (every gate declared in the Go modules of this and the previous
# release, whose removed names upstream refuses, and every gate its --help lists) is tried as --feature-gates=NAME=true and =false, and
# classified by kube-controller-manager's own answer: unrecognized, locked to a value, or accepted.
# Run it after a version bump (bash deploy/control-plane/build.sh first); the e2e test
# tests/e2e/bad_input.rs checks the file against the binary of the pinned version.
# Usage: bash deploy/control-plane/kcm-feature-gates.sh PREVIOUS_VERSION (e.g. v1.36.3)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/versions.env"
previous="${1:?usage: $0 PREVIOUS_VERSION (e.g. v1.36.3)}"
cache_root="${MINI_KCM_CACHE:-$HOME/.cache/mini-kcm}"
kcm="$cache_root/k8s-${KUBERNETES_VERSION}_etcd-${ETCD_VERSION}_kwok-${KWOK_VERSION}/bin/kube-controller-manager"
[[ -x "$kcm" ]] || { echo "error: $kcm missing: run deploy/control-plane/build.sh" >&2; exit 1; }
staging() { local v="$1"; v="${v#v1.}"; echo "v0.$v"; }
dirs=()
for v in "$KUBERNETES_VERSION" "$previous"; do
  s="$(staging "$v")"
  dirs+=("$(go mod download -json "k8s.io/kubernetes@$v" | sed -n 's/.*"Dir": "\(.*\)",*/\1/p')/pkg/features")
  for m in apiextensions-apiserver apiserver client-go component-base controller-manager; do
    dirs+=("$(go mod download -json "k8s.io/$m@$s" | sed -n 's/.*"Dir": "\(.*\)",*/\1/p')")
  done
done
out="$here/../../crates/runtime/data/kcm-feature-gates.txt"
{
  echo "# The feature gates kube-controller-manager $KUBERNETES_VERSION accepts, read off the binary by"
  echo "# deploy/control-plane/kcm-feature-gates.sh; 'locked-to=X' marks a gate that refuses any other value."
  {
    grep -rhoE '^\s+[A-Z][A-Za-z0-9]+\s+(featuregate\.)?Feature\s*=\s*"[A-Za-z0-9]+"' "${dirs[@]}" --include=*.go |
      grep -oE '"[A-Za-z0-9]+"' | tr -d '"'
    # The help lists the alpha and beta gates of every module the binary links.
    "$kcm" --help 2>&1 | grep -oE 'kube:[A-Za-z0-9]+=true\|false' | sed 's/^kube://; s/=.*//'
  } | sort -u |
    while read -r gate; do
      [[ "$gate" == AllAlpha || "$gate" == AllBeta ]] && continue
      answer="$("$kcm" --feature-gates="$gate=true" --kubeconfig=/nonexistent 2>&1 || true)"
      answer+="$("$kcm" --feature-gates="$gate=false" --kubeconfig=/nonexistent 2>&1 || true)"
      if [[ "$answer" == *"unrecognized feature gate"* ]]; then
        continue
      elif [[ "$answer" =~ feature\ is\ locked\ to\ (true|false) ]]; then
        echo "$gate locked-to=${BASH_REMATCH[1]}"
      else
        echo "$gate"
      fi
    done
} >"$out"
echo "wrote $(grep -vc '^#' "$out") gates to $out"
