#!/usr/bin/env bash
# Builds a kind node image, `mini-kcm/kind-node:<Kubernetes version>`, with no registry: what kind's
# published `kindest/node` holds, assembled from the local control plane's binaries (built from Go
# modules), Debian's packages and kind's own base-image files (from kind's Go module).
#
# Why not `kind build node-image`: it fetches every image it did not build (etcd, CoreDNS, kindnetd,
# pause, ...) from a registry, and kind's newest base image is Debian trixie, whose systemd no longer boots
# on a cgroup v1 host. So this script does what kind's build does, by hand:
#   1. the plane's binaries (deploy/control-plane/build.sh): kubeadm, kubelet, kubectl for the node, and
#      the control-plane binaries for its images; crictl from its Go module, as kind's image has it;
#   2. kind's base-image files (entrypoint, systemd units, containerd and kubelet settings) from kind's Go
#      module, at the version pinned in deploy/control-plane/versions.env;
#   3. a Debian root file system (debootstrap, $KIND_NODE_SUITE) with systemd, containerd, runc, the CNI
#      plug-ins, iptables and conntrack, cached by its package list;
#   4. the images kubeadm asks for (`kubeadm config images list`), each a one-layer image archive:
#      kube-apiserver, kube-controller-manager, kube-scheduler (a static binary on PATH), etcd and CoreDNS
#      (built from their Go modules at the versions kubeadm names, cached; CoreDNS with only the plug-ins of
#      coredns/main.go), pause (deploy/real-node's
#      static pause), kube-proxy (its binary plus iptables, nftables and conntrack with their libraries
#      from the root file system);
#   5. the root file system laid out as kind's base image does, plus the node binaries, /kind/version,
#      a default StorageClass, this project's pod network (pod-network.service: kindnetd's job as a loop
#      on every node; kind's "default CNI" manifest is only a ConfigMap saying so) and
#      deploy/kind/runc-without-sys-resource as containerd's runc (a no-op where the host allows
#      CAP_SYS_RESOURCE);
#   6. the images imported into the root file system's containerd store (a private containerd on the
#      host, pointed at it), then one `docker import`.
#
# Cached under ${MINI_KCM_CACHE:-~/.cache/mini-kcm}/kind; the image carries a label with the hash of its
# inputs and is rebuilt only when one changes. Needs root, Docker, debootstrap, containerd (for ctr),
# jq and a C compiler with a static libc (deploy/kind/ensure-host.sh installs them).
# Usage: bash deploy/kind/node-image/build.sh   (prints the image name on its last line)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../../.." && pwd)"
# shellcheck source=../../control-plane/versions.env
source "$repo/deploy/control-plane/versions.env"
image=${KIND_NODE_IMAGE:-mini-kcm/kind-node:$KUBERNETES_VERSION}
cache=${MINI_KCM_CACHE:-$HOME/.cache/mini-kcm}/kind
suite=$KIND_NODE_SUITE
# The node's packages; kind's base image installs the same, less what only rootless or storage drivers need.
packages=(systemd systemd-sysv dbus iptables nftables conntrack iproute2 ethtool util-linux mount kmod
  libseccomp2 pigz bash ca-certificates procps e2fsprogs jq containerd runc containernetworking-plugins
  socat)
started=$SECONDS

die() { echo "deploy/kind/node-image/build.sh: error: $*" >&2; exit 1; }
# step NAME CMD...: runs CMD, printing the step and the time it took.
step() {
  local name=$1 t0=$SECONDS
  shift
  printf '==> %s\n' "$name"
  "$@"
  printf '    done in %ss (total %ss)\n' "$((SECONDS - t0))" "$((SECONDS - started))"
}

[[ $(id -u) -eq 0 ]] || die "needs root (debootstrap, chroot, a private containerd)"
for tool in docker debootstrap ctr containerd jq cc sha256sum; do
  command -v "$tool" >/dev/null || die "'$tool' is missing (bash deploy/kind/ensure-host.sh installs it)"
done
docker info >/dev/null 2>&1 || die "no Docker daemon answers (bash deploy/kind/ensure-host.sh starts one)"

mkdir -p "$cache"
exec 9>"$cache/.node-image.lock"
flock 9

# 1. The plane's binaries.
plane_bin=""
find_plane() {
  bash "$repo/deploy/control-plane/build.sh"
  plane_bin="${MINI_KCM_CACHE:-$HOME/.cache/mini-kcm}/k8s-${KUBERNETES_VERSION}_etcd-${ETCD_VERSION}_kwok-${KWOK_VERSION}/bin"
  [[ -x $plane_bin/kubeadm ]] || die "no kubeadm in $plane_bin"
}
step "Kubernetes ${KUBERNETES_VERSION} binaries (deploy/control-plane/build.sh)" find_plane

# 2. kind's base-image files.
kind_files=""
find_kind_files() {
  local dir
  dir=$(cd "$cache" && GOFLAGS=-mod=mod go mod download -json "sigs.k8s.io/kind@${KIND_VERSION}" |
    jq -r .Dir) || die "go mod download sigs.k8s.io/kind@${KIND_VERSION} failed"
  kind_files=$dir/images/base/files
  [[ -f $kind_files/usr/local/bin/entrypoint ]] || die "kind's base-image files are not in $kind_files"
}
step "kind ${KIND_VERSION}'s base-image files (Go module)" find_kind_files

# The inputs of the image: when their hash is the image's label, there is nothing to do.
inputs_hash() {
  {
    printf '%s\n' "$KUBERNETES_VERSION" "$KIND_VERSION" "$CRICTL_VERSION" "$suite" "${packages[*]}"
    cat "${BASH_SOURCE[0]}" "$here/pod-network" "$here/pod-network.service" "$here/default-storage.yaml" \
      "$here/default-cni.yaml" "$here/coredns/main.go" "$repo/deploy/kind/runc-without-sys-resource" "$repo/deploy/real-node/pause.c"
    sha256sum "$plane_bin"/{kubeadm,kubelet,kubectl,kube-apiserver,kube-controller-manager,kube-scheduler,kube-proxy,etcd}
    (cd "$kind_files" && find . -type f -print0 | sort -z | xargs -0 sha256sum)
  } | sha256sum | cut -c1-16
}
hash=$(inputs_hash)
if [[ $(docker image inspect --format '{{index .Config.Labels "dev.minikcm.inputs"}}' "$image" 2>/dev/null) == "$hash" ]]; then
  echo "kind node image: $image (cached, inputs $hash)"
  echo "$image"
  exit 0
fi
echo "building kind node image $image (inputs $hash)"
previous=$(docker image inspect --format '{{.Id}}' "$image" 2>/dev/null || true)

work=$(mktemp -d "$cache/build.XXXXXX")
containerd_pid=""
cleanup() {
  [[ -n $containerd_pid ]] && kill "$containerd_pid" 2>/dev/null && wait "$containerd_pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

# 3. The Debian root file system, cached by suite and package list.
rootfs_tar="$cache/rootfs-$suite-$(printf '%s\n' "${packages[@]}" | sha256sum | cut -c1-12).tar"
debootstrap_rootfs() {
  if [[ -f $rootfs_tar ]]; then
    echo "    cached: $rootfs_tar"
    return
  fi
  local dir="$work/debootstrap"
  local include
  include=$(IFS=,; echo "${packages[*]}")
  debootstrap --variant=minbase --include="$include" "$suite" "$dir" "${DEBIAN_MIRROR:-http://deb.debian.org/debian}" \
    >"$work/debootstrap.log" 2>&1 || { tail -n 30 "$work/debootstrap.log" >&2; die "debootstrap failed"; }
  # Package caches and logs are not part of a node.
  rm -rf "$dir"/var/cache/apt/archives/*.deb "$dir"/var/lib/apt/lists/* "$dir"/var/log/*
  tar --numeric-owner -C "$dir" -cf "$rootfs_tar.tmp" .
  mv "$rootfs_tar.tmp" "$rootfs_tar"
  rm -rf "$dir"
  echo "    $rootfs_tar ($(du -h "$rootfs_tar" | cut -f1))"
}
step "Debian $suite root file system (debootstrap)" debootstrap_rootfs

rootfs="$work/rootfs"
mkdir -p "$rootfs"
step "unpack the root file system" tar --numeric-owner -C "$rootfs" -xf "$rootfs_tar"

# 4. The images kubeadm runs.
mapfile -t wanted < <("$plane_bin/kubeadm" config images list --kubernetes-version "$KUBERNETES_VERSION" 2>/dev/null)
((${#wanted[@]})) || die "kubeadm config images list printed nothing"
image_for() { # NAME: the reference kubeadm wants for the image whose repository ends in /NAME
  local ref
  for ref in "${wanted[@]}"; do
    [[ ${ref%:*} == */"$1" ]] && { echo "$ref"; return; }
  done
  die "kubeadm asks for no $1 image (it asks for: ${wanted[*]})"
}

# go_binary NAME PACKAGE VERSION [MAIN]: PACKAGE@VERSION built from the Go module proxy into the cache (once);
# prints its path. With MAIN, a main package of this repository (one file) is built instead, against
# PACKAGE's module at VERSION, and cached by that file's hash too.
go_binary() {
  local name=$1 package=$2 version=$3 main=${4:-} out="$cache/go-bin/$1-$3" dir
  [[ -n $main ]] && out+="-$(sha256sum "$main" | cut -c1-12)"
  if [[ ! -x $out ]]; then
    mkdir -p "$cache/go-bin"
    dir=$(mktemp -d "$work/go.XXXXXX")
    [[ -n $main ]] && cp "$main" "$dir/"
    (
      cd "$dir"
      export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-mod=mod
      go mod init "local/$name" || exit 1
      if [[ -n $main ]]; then
        go get "$package@$version" && go build -trimpath -o "$out.tmp" .
      else
        go get -tool "$package@$version" && go build -trimpath -o "$out.tmp" "$package"
      fi
    ) >"$work/$name.log" 2>&1 || { tail -n 30 "$work/$name.log" >&2; die "building $package@$version failed"; }
    mv "$out.tmp" "$out"
    rm -rf "$dir"
  fi
  echo "$out"
}

# The etcd and CoreDNS binaries at the versions kubeadm asks for (the plane's etcd when it is that one).
component_binaries() {
  local etcd_tag coredns_tag
  etcd_tag=$(image_for etcd)
  etcd_tag=${etcd_tag##*:}
  etcd_version="v${etcd_tag%-*}"
  if [[ $etcd_version == "$ETCD_VERSION" ]]; then
    etcd_binary="$plane_bin/etcd"
  else
    etcd_binary=$(go_binary etcd go.etcd.io/etcd/server/v3 "$etcd_version")
  fi
  coredns_tag=$(image_for coredns)
  # Only the plug-ins a kubeadm Corefile uses (coredns/main.go says why).
  coredns_binary=$(go_binary coredns github.com/coredns/coredns "${coredns_tag##*:}" "$here/coredns/main.go")
  crictl_binary=$(go_binary crictl sigs.k8s.io/cri-tools/cmd/crictl "$CRICTL_VERSION")
  echo "    etcd $etcd_version: $etcd_binary"
  echo "    CoreDNS ${coredns_tag##*:}: $coredns_binary"
  echo "    crictl $CRICTL_VERSION: $crictl_binary"
}
etcd_binary="" coredns_binary="" crictl_binary=""
step "etcd and CoreDNS at kubeadm's versions, crictl (Go modules, cached)" component_binaries

# archive TAG OUT ENTRYPOINT_JSON LAYER_DIR: a docker-save archive of one layer (LAYER_DIR's content),
# with fixed owners and times so that the same inputs give the same digests.
archive() {
  local tag=$1 out=$2 entrypoint=$3 layer_dir=$4 dir
  dir=$(mktemp -d "$work/archive.XXXXXX")
  tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -C "$layer_dir" -cf "$dir/layer.tar" .
  local layer_digest config_digest
  layer_digest=$(sha256sum "$dir/layer.tar" | cut -d' ' -f1)
  jq -cn --arg diff "sha256:$layer_digest" --argjson entrypoint "$entrypoint" '{
      architecture: "amd64", os: "linux",
      config: {Entrypoint: $entrypoint, Env: ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"]},
      rootfs: {type: "layers", diff_ids: [$diff]},
      history: [{created_by: "deploy/kind/node-image/build.sh"}]
    }' >"$dir/config.json"
  config_digest=$(sha256sum "$dir/config.json" | cut -d' ' -f1)
  mv "$dir/config.json" "$dir/$config_digest.json"
  jq -cn --arg config "$config_digest.json" --arg tag "$tag" \
    '[{Config: $config, RepoTags: [$tag], Layers: ["layer.tar"]}]' >"$dir/manifest.json"
  tar --owner=0 --group=0 --numeric-owner --mtime=@0 -C "$dir" -cf "$out" manifest.json "$config_digest.json" layer.tar
  rm -rf "$dir"
}

# binary_image NAME BINARY PATH: kubeadm's NAME image, BINARY at PATH in it (the static pods run the bare
# command name, found on PATH; CoreDNS's Deployment runs the image's entrypoint, /coredns).
binary_image() {
  local name=$1 binary=$2 path=$3 layer="$work/layer-$1"
  mkdir -p "$layer$(dirname "$path")" "$layer/tmp" "$layer/var/run"
  chmod 1777 "$layer/tmp"
  cp "$binary" "$layer$path"
  archive "$(image_for "$name")" "$work/images/$name.tar" "[\"$path\"]" "$layer"
  rm -rf "$layer"
}

# The files of PACKAGES and of every package they depend on, as installed in the root file system.
package_closure() {
  local -A done=()
  local queue=("$@") pkg deps dep
  while ((${#queue[@]})); do
    pkg=${queue[0]}
    queue=("${queue[@]:1}")
    [[ -n ${done[$pkg]:-} ]] && continue
    done[$pkg]=1
    deps=$(chroot "$rootfs" dpkg-query -W -f='${Pre-Depends}, ${Depends}' "$pkg" 2>/dev/null) || continue
    # "a (>= 1), b | c, d:any": the first of each alternative, without versions or architectures.
    while read -r dep; do
      [[ -n $dep ]] && queue+=("$dep")
    done < <(tr ',' '\n' <<<"$deps" | sed -E 's/\|.*//; s/\(.*\)//; s/:any//; s/[[:space:]]//g')
  done
  printf '%s\n' "${!done[@]}"
}

kube_proxy_image() {
  local layer="$work/layer-kube-proxy" pkg path src dir
  mkdir -p "$layer/usr/local/bin" "$layer/run" "$layer/tmp" "$layer/var/lib"
  chmod 1777 "$layer/tmp"
  # /lib, /lib64, /bin, /sbin are links into /usr on bookworm: the same links, and every file copied to
  # the directory it really is in.
  for path in lib lib64 bin sbin; do
    [[ -L $rootfs/$path ]] && ln -sfn "$(readlink "$rootfs/$path")" "$layer/$path"
  done
  # dpkg's own lists say which files each package installed.
  while read -r pkg; do
    while read -r path; do
      src=$rootfs$path
      [[ -e $src || -L $src ]] || continue
      [[ -d $src ]] && continue
      dir=$(cd "$(dirname "$src")" && pwd -P) || continue
      dir=${dir#"$rootfs"}
      mkdir -p "$layer$dir"
      cp -a "$src" "$layer$dir/"
    done < <(chroot "$rootfs" dpkg -L "$pkg" 2>/dev/null)
  done < <(package_closure iptables nftables conntrack)
  # Alternatives (iptables → xtables-nft-multi) are links that maintainer scripts made, not dpkg's lists.
  mkdir -p "$layer/etc/alternatives" "$layer/usr/sbin"
  cp -a "$rootfs"/etc/alternatives/{iptables,ip6tables}* "$layer/etc/alternatives/"
  for path in "$rootfs"/usr/sbin/ip{,6}tables{,-save,-restore}; do
    [[ -L $path ]] && cp -a "$path" "$layer/usr/sbin/"
  done
  cp "$plane_bin/kube-proxy" "$layer/usr/local/bin/"
  archive "$(image_for kube-proxy)" "$work/images/kube-proxy.tar" '["/usr/local/bin/kube-proxy"]' "$layer"
  rm -rf "$layer"
}

pause_image() {
  local layer="$work/layer-pause"
  mkdir -p "$layer"
  cc -static -Os -s -Wall -Wextra -Werror -o "$layer/pause" "$repo/deploy/real-node/pause.c"
  archive "$(image_for pause)" "$work/images/pause.tar" '["/pause"]' "$layer"
  rm -rf "$layer"
}

build_images() {
  mkdir -p "$work/images"
  local name
  for name in kube-apiserver kube-controller-manager kube-scheduler; do
    binary_image "$name" "$plane_bin/$name" "/usr/local/bin/$name"
  done
  binary_image etcd "$etcd_binary" /usr/local/bin/etcd
  binary_image coredns "$coredns_binary" /coredns
  kube_proxy_image
  pause_image
  for name in "$work"/images/*.tar; do
    printf '    %-60s %s\n' "$(tar -xOf "$name" manifest.json | jq -r '.[0].RepoTags[0]')" "$(du -h "$name" | cut -f1)"
  done
}
step "images for kubeadm (${#wanted[@]} asked for)" build_images

# 5. The node's file system, laid out as kind's base image.
lay_out_node() {
  local r=$rootfs
  # kind's files: entrypoint, systemd units (containerd, kubelet and its drop-ins, undo-mount-hacks),
  # containerd's config, crictl's, kubelet defaults, sysctls.
  cp -a "$kind_files/." "$r/"
  chmod 0755 "$r/usr/local/bin/"* "$r/kind/bin/"*
  # kind's units run containerd from /usr/local/bin; Debian installs it in /usr/bin. CNI plug-ins are
  # looked up in /opt/cni/bin.
  ln -sf /usr/bin/containerd "$r/usr/local/bin/containerd"
  mkdir -p "$r/opt/cni"
  ln -sfn /usr/lib/cni "$r/opt/cni/bin"
  # containerd's runc is the wrapper (a no-op unless the host's bounding set lacks CAP_SYS_RESOURCE), and
  # the sandbox image is the pause image kubeadm asks for.
  install -m 0755 "$repo/deploy/kind/runc-without-sys-resource" "$r/usr/local/sbin/runc-without-sys-resource"
  local pause
  pause=$(image_for pause)
  sed -i -E "s#^( *sandbox_image *= *).*#\\1\"$pause\"#" "$r/etc/containerd/config.toml"
  sed -i -E 's#^( *)SystemdCgroup = true#\1SystemdCgroup = true\n\1BinaryName = "/usr/local/sbin/runc-without-sys-resource"#' \
    "$r/etc/containerd/config.toml"
  grep -q 'BinaryName = "/usr/local/sbin/runc-without-sys-resource"' "$r/etc/containerd/config.toml" ||
    die "could not set containerd's runc in kind's config.toml"
  # Lowering a process's oom_score_adj needs CAP_SYS_RESOURCE too: without it, runc fails to start every
  # sandbox ("can't get final child's PID from pipe"). Restricted, containerd never asks for a value below
  # its own (where the capability exists, containerd runs at -999 and nothing changes).
  sed -i -E 's#^( *restrict_oom_score_adj *= *).*#\1true#' "$r/etc/containerd/config.toml"
  grep -q 'restrict_oom_score_adj = true' "$r/etc/containerd/config.toml" ||
    die "could not set restrict_oom_score_adj in kind's config.toml"
  # The base spec of every container, as kind derives it from containerd's default.
  ctr oci spec | jq '.hooks.createContainer[.hooks.createContainer | length] |= . + {"path": "/kind/bin/mount-product-files.sh"}' |
    jq 'del(.process.rlimits)' >"$r/etc/containerd/cri-base.json"
  # systemd in a container: only the units the node needs start (kind's base image does the same).
  find "$r/lib/systemd/system/sysinit.target.wants/" -name "systemd-tmpfiles-setup.service" -delete
  rm -f "$r"/lib/systemd/system/multi-user.target.wants/* "$r"/etc/systemd/system/*.wants/* \
    "$r"/lib/systemd/system/local-fs.target.wants/* "$r"/lib/systemd/system/sockets.target.wants/*udev* \
    "$r"/lib/systemd/system/sockets.target.wants/*initctl* "$r"/lib/systemd/system/basic.target.wants/*
  echo "ReadKMsg=no" >>"$r/etc/systemd/journald.conf"
  install -m 0755 "$here/pod-network" "$r/usr/local/bin/pod-network"
  install -m 0644 "$here/pod-network.service" "$r/etc/systemd/system/pod-network.service"
  chroot "$r" systemctl enable kubelet.service containerd.service undo-mount-hacks.service pod-network.service \
    >/dev/null 2>&1 || die "systemctl enable failed in the root file system"
  chroot "$r" systemctl mask systemd-binfmt.service >/dev/null 2>&1
  # Pods route through the node: forwarding on (the host's value is inherited otherwise, and may be 0).
  echo "net.ipv4.ip_forward=1" >"$r/etc/sysctl.d/20-mini-kcm-forwarding.conf"
  mkdir -p "$r/etc/kubernetes/manifests" "$r/kind/manifests"
  local b
  for b in kubeadm kubelet kubectl; do install -m 0755 "$plane_bin/$b" "$r/usr/bin/$b"; done
  install -m 0755 "$crictl_binary" "$r/usr/local/bin/crictl"
  printf '%s' "$KUBERNETES_VERSION" >"$r/kind/version"
  install -m 0644 "$here/default-storage.yaml" "$r/kind/manifests/default-storage.yaml"
  install -m 0644 "$here/default-cni.yaml" "$r/kind/manifests/default-cni.yaml"
}
step "lay out the node (kind's base files, binaries, pod network, runc wrapper)" lay_out_node

# 6. The images into the node's containerd store, by a private containerd pointed at it.
import_images() {
  local state="$work/containerd-state" socket="$work/containerd.sock"
  mkdir -p "$state"
  printf 'version = 2\n[grpc]\n  address = "%s"\n' "$socket" >"$work/containerd.toml"
  containerd --config "$work/containerd.toml" --root "$rootfs/var/lib/containerd" --state "$state" \
    >"$work/containerd.log" 2>&1 &
  containerd_pid=$!
  local i
  for i in $(seq 1 50); do
    ctr --address "$socket" version >/dev/null 2>&1 && break
    sleep 0.2
  done
  ctr --address "$socket" version >/dev/null 2>&1 || { tail -n 20 "$work/containerd.log" >&2; die "containerd did not start"; }
  local tar
  for tar in "$work"/images/*.tar; do
    ctr --address "$socket" -n k8s.io images import --label=io.cri-containerd.pinned=pinned \
      --all-platforms --no-unpack --digests "$tar" >/dev/null || die "ctr images import $tar failed"
  done
  ctr --address "$socket" -n k8s.io images ls -q | sed 's/^/    /'
  kill "$containerd_pid"
  wait "$containerd_pid" 2>/dev/null || true
  containerd_pid=""
}
step "import the images into the node's containerd" import_images

commit_image() {
  local imported
  imported=$(tar --numeric-owner -C "$rootfs" -c . | docker import - "$image-rootfs")
  # `docker import` cannot set a stop signal; a build on top of the imported file system sets the image's
  # configuration (the classic builder: it needs no registry for a local base).
  mkdir -p "$work/context"
  cat >"$work/context/Dockerfile" <<DOCKERFILE
FROM $imported
ENV container=docker
STOPSIGNAL SIGRTMIN+3
ENTRYPOINT ["/usr/local/bin/entrypoint", "/sbin/init"]
LABEL dev.minikcm.inputs=$hash
DOCKERFILE
  DOCKER_BUILDKIT=0 docker build --quiet --tag "$image" "$work/context" >/dev/null 2>"$work/docker-build.log" ||
    { cat "$work/docker-build.log" >&2; die "docker build of $image failed"; }
  docker rmi "$image-rootfs" >/dev/null
  # The image this one replaces (1.3 GB) goes, unless a container still uses it.
  if [[ -n $previous && $previous != "$(docker image inspect --format '{{.Id}}' "$image")" ]]; then
    docker rmi "$previous" >/dev/null 2>&1 || true
  fi
  echo "    $image: $(docker image inspect --format '{{.Size}}' "$image" | numfmt --to=iec-i --suffix=B)"
}
step "docker import $image" commit_image
echo "kind node image ready after $((SECONDS - started))s"
echo "$image"
