#!/usr/bin/env bash
# Builds the mini-kcm container image `mini-kcm:dev` and saves it to target/image/mini-kcm.tar.
#
# 1. The release binary, fully static (glibc with +crt-static; TLS is rustls, so there is no OpenSSL and no
#    shared library to ship), built on the host by cargo.
# 2. An image FROM scratch holding only that binary (deploy/image/Dockerfile): nothing is pulled.
# 3. `docker save`: an archive that `docker load`, `kind load image-archive` and `ctr images import` read.
#
# Needs a reachable Docker daemon (deploy/image/ensure-docker.sh installs and starts one); says so and exits
# non-zero when there is none (`--binary-only` builds step 1 alone, without Docker). Environment: IMAGE
# (default mini-kcm:dev); MINI_KCM_IMAGE_PROFILE, the cargo profile (default release; .ci/run sets
# image-test, the same code linked faster, see Cargo.toml).
set -euo pipefail
cd "$(dirname "$0")/../.."

image=${IMAGE:-mini-kcm:dev}
target=x86_64-unknown-linux-gnu
out=target/image
profile=${MINI_KCM_IMAGE_PROFILE:-release}
binary=target/$target/$profile/mini-kcm

die() { echo "deploy/image/build.sh: error: $*" >&2; exit 1; }
human() { numfmt --to=iec-i --suffix=B --format='%.1f' "$1"; }

# --binary-only: step 1 alone, no Docker needed (.ci/run builds it while its other lane prepares Docker).
binary_only=false
[[ ${1:-} == --binary-only ]] && binary_only=true
if ! $binary_only; then
  command -v docker >/dev/null || die "the docker CLI is not installed (deploy/image/ensure-docker.sh installs it)"
  docker info >/dev/null 2>&1 || die "no Docker daemon is reachable (docker info fails); start one with deploy/image/ensure-docker.sh"
fi

# TLS must be rustls only: an OpenSSL or native-tls crate would mean a shared libssl in a static binary.
if grep -qE '^name = "(openssl-sys|native-tls)"$' Cargo.lock; then
  die "Cargo.lock contains openssl-sys or native-tls; the image needs rustls only"
fi

echo "==> static $profile binary ($target, +crt-static, jemalloc, no local-plane commands)"
# RUSTFLAGS apply to the --target build only, so build scripts and proc macros stay ordinary host
# binaries. Symbols are stripped: the binary is most of the image. The image's allocator is jemalloc
# (crates/mini-kcm/src/allocator.rs says why, docs/performance.md "Allocators" has the numbers). No
# `local-plane` commands (`up`, `bench`, ...): a controller in a cluster runs `run`, and a smaller
# executable is less resident memory (docs/performance.md, "The executable").
RUSTFLAGS="-C target-feature=+crt-static" CARGO_PROFILE_RELEASE_STRIP=symbols \
  cargo build --profile "$profile" --locked -p mini-kcm --no-default-features --features jemalloc --target "$target"

description=$(file -b "$binary")
case "$description" in
  *"statically linked"* | *"static-pie linked"*) ;;
  *) die "$binary is not static: $description" ;;
esac
if ldd "$binary" 2>&1 | grep -q '=>'; then
  die "$binary loads shared libraries: $(ldd "$binary" 2>&1)"
fi
echo "    $description"
$binary_only && exit 0

echo "==> image $image"
rm -rf "$out/context"
mkdir -p "$out/context"
cp "$binary" "$out/context/mini-kcm"
version=$(awk -F'"' '/^version = /{print $2; exit}' Cargo.toml)
build=(docker build --tag "$image" --build-arg "VERSION=$version" --file deploy/image/Dockerfile "$out/context")
# The Docker CLI builds with BuildKit through the buildx plugin; without the plugin, the classic builder
# (deprecated but sufficient for a COPY onto scratch).
if docker buildx version >/dev/null 2>&1; then
  "${build[@]}"
else
  DOCKER_BUILDKIT=0 "${build[@]}"
fi

echo "==> smoke test: read-only root filesystem, no capabilities, UID 65532"
help=$(docker run --rm --read-only --cap-drop ALL --security-opt no-new-privileges --network none \
  "$image" --help) || die "the image's binary failed to run: $help"
# Built without the `local-plane` commands: `run` is there, `bench` is not.
grep -qE '^  run ' <<<"$help" || die "the image's binary has no run command: $help"
if grep -qE '^  bench ' <<<"$help"; then
  die "the image's binary has the local-plane commands (built with default features?)"
fi
echo "    commands: $(awk '/^Commands:/{on=1; next} on && /^  [a-z]/{printf "%s ", $1} /^$/{on=0}' <<<"$help")"
# jemalloc prints its statistics at exit when asked: proof that the binary allocates with it.
stats=$(docker run --rm --network none --env _RJEM_MALLOC_CONF=stats_print:true "$image" --version 2>&1) \
  || die "the image's binary failed with jemalloc's statistics on: $stats"
if ! grep -q "Begin jemalloc statistics" <<<"$stats"; then
  die "the image's binary does not allocate with jemalloc (no statistics with _RJEM_MALLOC_CONF=stats_print:true)"
fi
echo "    allocator: jemalloc"

echo "==> $out/mini-kcm.tar"
docker save --output "$out/mini-kcm.tar" "$image"

binary_size=$(stat -c %s "$binary")
image_size=$(docker image inspect --format '{{.Size}}' "$image")
archive_size=$(stat -c %s "$out/mini-kcm.tar")
echo "binary:  $binary $(human "$binary_size") ($binary_size bytes)"
echo "image:   $image $(human "$image_size") ($image_size bytes)"
echo "archive: $out/mini-kcm.tar $(human "$archive_size") ($archive_size bytes)"
