#!/usr/bin/env bash
# Builds Vigil's OCI images offline: a Debian bookworm root filesystem extracted by mmdebstrap from
# Debian's own packages (no base image is pulled from anywhere), holding only the packages that
# provide the shared libraries the binary links (read off the binary with ldd, mapped to packages
# with dpkg -S, so the list cannot drift from the build), committed with podman import.
#
#   vigil/agent:VERSION        vigil-agent, runs as root with the DaemonSet's capabilities
#   vigil/worker:VERSION       vigil-worker built without CUDA, runs as uid 65532, no model inside
#   vigil/worker-cuda:VERSION  vigil-worker with the CUDA backend and the toolkit's runtime
#                              libraries (only where nvcc is installed, or when asked by name)
#
# usage: images/build.sh [agent|worker|worker-cuda ...]   (default: agent worker, + worker-cuda
#        when nvcc is present); IMAGE_PREFIX=vigil; prints each image's size.
#        AGENT_BIN=PATH puts that vigil-agent in the agent's image instead of a Release build of
#        its own: the suite packs the binary it has just tested (the dev build's, -O2 -g, stripped
#        on install as Debian ships its packages) and saves a third compile of the agent.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
version=$(sed -n 's/^project(vigil VERSION \([0-9.]*\).*/\1/p' "$root/CMakeLists.txt")
prefix=${IMAGE_PREFIX:-vigil}
work="$root/build/images"
mkdir -p "$work"
suite=bookworm
mirrors=("deb http://deb.debian.org/debian $suite main"
         "deb http://deb.debian.org/debian $suite-updates main"
         "deb http://deb.debian.org/debian-security $suite-security main")

need() { command -v "$1" >/dev/null || { echo "images: $1 not found (scripts/setup.sh installs it)" >&2; exit 1; }; }
need mmdebstrap
need podman

targets=("$@")
if ((${#targets[@]} == 0)); then
  targets=(agent worker)
  command -v nvcc >/dev/null && targets+=(worker-cuda)
fi

# Release binaries of their own (the dev build carries debug info and links CUDA when it can).
build() {  # build DIR CUDA TARGETS...
  local dir=$1 cuda=$2
  shift 2
  cmake -S "$root" -B "$dir" -DCMAKE_BUILD_TYPE=Release -DVIGIL_CUDA="$cuda" -DVIGIL_BUILD_TESTS=OFF >/dev/null
  cmake --build "$dir" -j "$(nproc)" --target "$@" >/dev/null
}

# The Debian packages that provide the libraries `binary` loads, minus those under /usr/local.
packages_for() {
  ldd "$1" | awk '$3 ~ /^\// {print $3} $1 ~ /^\// {print $1}' | while read -r lib; do
    case $lib in /usr/local/*) continue ;; esac
    { dpkg -S "$lib" 2>/dev/null || dpkg -S "$(readlink -f "$lib")" 2>/dev/null ||
      { echo "images: no Debian package provides $lib" >&2; exit 1; }; } | head -1 | cut -d: -f1
  done | sort -u
}

# A root filesystem with `packages` extracted (their hard dependencies included), no maintainer
# scripts run, documentation and package-manager state removed.
rootfs() {  # rootfs DIR PACKAGES...
  local dir=$1
  shift
  rm -rf "$dir"
  mmdebstrap --quiet --variant=extract --include="$(IFS=,; echo "$*")" "$suite" "$dir" "${mirrors[@]}"
  rm -rf "$dir"/usr/share/{doc,man,info,locale,lintian,bug} "$dir"/var/lib/{apt,dpkg} "$dir"/var/cache/*
  mkdir -p "$dir"/{etc,tmp,proc,sys,dev,run}
  chmod 1777 "$dir/tmp"
  printf 'root:x:0:0:root:/root:/sbin/nologin\nvigil:x:65532:65532:vigil:/nonexistent:/sbin/nologin\n' >"$dir/etc/passwd"
  printf 'root:x:0:\nvigil:x:65532:\n' >"$dir/etc/group"
}

# The root filesystem of BIN's image at DIR, BIN installed (stripped) as /usr/local/bin/NAME.
image_root() {  # image_root DIR BIN NAME
  local dir=$1 bin=$2 name=$3 pkgs
  mapfile -t pkgs < <(packages_for "$bin")
  rootfs "$dir" "${pkgs[@]}"
  install -D -m 0755 -s "$bin" "$dir/usr/local/bin/$name"
}

commit() {  # commit DIR IMAGE USER ENTRYPOINT-JSON CMD-JSON [PORT]
  local dir=$1 image=$2 user=$3 entrypoint=$4 cmd=$5 port=${6:-}
  local changes=(--change "ENTRYPOINT $entrypoint" --change "CMD $cmd" --change "USER $user"
                 --change "LABEL org.opencontainers.image.version=$version"
                 --change "LABEL org.opencontainers.image.source=vigil")
  [[ -n $port ]] && changes+=(--change "EXPOSE $port")
  podman rmi -f "$image" >/dev/null 2>&1 || true
  tar -C "$dir" -c . | podman import "${changes[@]}" - "$image" >/dev/null
  local bytes
  bytes=$(podman image inspect --format '{{.Size}}' "$image")
  awk -v i="$image" -v b="$bytes" 'BEGIN {printf "images: %-32s %6.1f MB\n", i, b / 1e6}'
}

for target in "${targets[@]}"; do
  case $target in
    agent)
      bin=${AGENT_BIN:-}
      if [[ -z $bin ]]; then
        build "$work/cpu" OFF vigil-agent
        bin="$work/cpu/agent/vigil-agent"
      fi
      [[ -x $bin ]] || { echo "images: AGENT_BIN=$bin is not an executable" >&2; exit 1; }
      image_root "$work/agent-root" "$bin" vigil-agent
      commit "$work/agent-root" "$prefix/agent:$version" 0 '["/usr/local/bin/vigil-agent"]' \
        '["--config", "/etc/vigil/agent.yaml"]' 9435
      ;;
    worker)
      build "$work/cpu" OFF vigil-worker
      image_root "$work/worker-root" "$work/cpu/worker/vigil-worker" vigil-worker
      mkdir -p "$work/worker-root/models"
      commit "$work/worker-root" "$prefix/worker:$version" 65532 '["/usr/local/bin/vigil-worker"]' \
        '["serve", "-m", "/models/SmolLM2-135M-Instruct.Q4_1.gguf"]' 8080
      ;;
    worker-cuda)
      need nvcc
      build "$work/cuda" ON vigil-worker
      bin="$work/cuda/worker/vigil-worker"
      image_root "$work/worker-cuda-root" "$bin" vigil-worker
      # The toolkit's runtime libraries the binary loads (cudart, cuBLAS, cuBLASLt, NCCL), with
      # their version links, in the loader's default directory (the image has no ld.so.cache);
      # the driver (libcuda) comes from the node, as with every CUDA image.
      ldd "$bin" | awk '$3 ~ /^\/usr\/local\// {print $3}' | while read -r lib; do
        cp -a "$lib" "$(readlink -f "$lib")" "$work/worker-cuda-root/usr/lib/x86_64-linux-gnu/"
      done
      mkdir -p "$work/worker-cuda-root/models"
      commit "$work/worker-cuda-root" "$prefix/worker-cuda:$version" 65532 '["/usr/local/bin/vigil-worker"]' \
        '["serve", "-m", "/models/SmolLM2-135M-Instruct.Q4_1.gguf"]' 8080
      ;;
    *) echo "images: unknown image '$target' (agent, worker, worker-cuda)" >&2; exit 2 ;;
  esac
done
