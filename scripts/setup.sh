#!/usr/bin/env bash
# Installs what Vigil needs on a fresh Debian 12 machine; a no-op when everything is present.
set -euo pipefail

DEBIAN_PACKAGES=(
  build-essential cmake pkg-config git python3 python3-venv
  clang llvm libbpf-dev bpftool libelf-dev zlib1g-dev
  prometheus-cpp-dev libyaml-cpp-dev libboost-dev systemtap-sdt-dev libssl-dev libcrypt-dev openssl
  libgloo-dev nlohmann-json3-dev libgtest-dev libgmock-dev libbenchmark-dev
  prometheus prometheus-alertmanager victoria-metrics nftables iproute2 curl jsonnet
  podman buildah mmdebstrap runc
)

missing=()
for p in "${DEBIAN_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  if [[ $(id -u) -ne 0 ]]; then
    echo "setup: root is needed to install Debian packages: ${missing[*]}" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
else
  echo "setup: all Debian packages present"
fi

# The eBPF toolchain reads the kernel's BTF and attaches through tracefs.
if [[ ! -r /sys/kernel/btf/vmlinux ]]; then
  echo "setup: warning: /sys/kernel/btf/vmlinux missing; the agent needs a kernel built with BTF" >&2
fi
if [[ ! -d /sys/kernel/tracing/events ]] && [[ $(id -u) -eq 0 ]]; then
  mount -t tracefs tracefs /sys/kernel/tracing 2>/dev/null || true
fi

# kubectl (with its kustomize) renders deploy/kubernetes for the manifest and container tests; it
# is not a Debian package, so it is checked, not installed.
command -v kubectl >/dev/null || echo "setup: warning: kubectl not found; the deploy tests need kubectl kustomize" >&2

"$(dirname "$0")/fetch_model.sh"

# PyPI packages of the alerting, dashboard and deploy tests (pyyaml, kubernetes-validate,
# helm-python-sdk: Helm's own engine, to render and lint the chart offline,
# matplotlib), in a venv under build/ops-venv.
"$(dirname "$0")/../tests/alerts/python_env.sh" >/dev/null
