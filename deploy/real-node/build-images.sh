#!/usr/bin/env bash
# Builds the real node's own image, with no registry and no Docker: three static C programs (pause.c, the
# pods' sandbox process; http-get.c and https-get.c, one-shot GETs for in-cluster checks, the second with
# OpenSSL and a service account token) in one FROM-scratch image,
# written as a `docker save` archive that `ctr images import` reads:
#   target/real-node/node-tools.tar   tagged mini-kcm.local/node-tools:1 (both the sandbox image and the
#                                     test pods' image; entrypoint /pause)
# Idempotent: rebuilt only when a source is newer than the archive. Needs cc with a static libc
# and static OpenSSL (deploy/real-node/ensure-runtime.sh installs them).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
out="${1:-$here/../../target/real-node}"
tag="${NODE_TOOLS_IMAGE:-mini-kcm.local/node-tools:1}"
archive="$out/node-tools.tar"

if [[ -f "$archive" && "$archive" -nt "$here/pause.c" && "$archive" -nt "$here/http-get.c" && "$archive" -nt "$here/https-get.c" && "$archive" -nt "${BASH_SOURCE[0]}" ]]; then
  echo "node-tools image: $archive (up to date)"
  exit 0
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/rootfs" "$work/image" "$out"
for program in pause http-get; do
  cc -static -Os -s -Wall -Wextra -Werror -o "$work/rootfs/$program" "$here/$program.c"
done
# The linker warns that OpenSSL's name lookups need glibc's shared parts at run time: https-get takes
# numeric addresses only and never looks a name up.
cc -static -Os -s -Wall -Wextra -Werror -o "$work/rootfs/https-get" "$here/https-get.c" -lssl -lcrypto 2>"$work/link.log" \
  || { cat "$work/link.log" >&2; exit 1; }

# One layer; fixed owner and times so the same sources give the same digest.
tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -C "$work/rootfs" -cf "$work/image/layer.tar" .
layer_digest="$(sha256sum "$work/image/layer.tar" | cut -d' ' -f1)"
cat >"$work/image/config.json" <<JSON
{"architecture":"amd64","os":"linux","config":{"Entrypoint":["/pause"],"User":"65532:65532"},"rootfs":{"type":"layers","diff_ids":["sha256:$layer_digest"]},"history":[{"created_by":"deploy/real-node/build-images.sh"}]}
JSON
config_digest="$(sha256sum "$work/image/config.json" | cut -d' ' -f1)"
mv "$work/image/config.json" "$work/image/$config_digest.json"
cat >"$work/image/manifest.json" <<JSON
[{"Config":"$config_digest.json","RepoTags":["$tag"],"Layers":["layer.tar"]}]
JSON
tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -C "$work/image" -cf "$archive.tmp" .
mv "$archive.tmp" "$archive"
echo "node-tools image: $archive ($tag, $(stat -c %s "$archive") bytes)"
