#!/usr/bin/env bash
# vigil-agent as a daemon: config errors exit 2 naming key and line; missing BTF or privileges give
# one line and exit 1; it serves /metrics, /healthz, /readyz; SIGTERM leaves no program or link.
set -euo pipefail
agent=$1
[[ $(id -u) -eq 0 ]] || { echo "FAIL: needs root (CAP_BPF + CAP_PERFMON)"; exit 1; }
tmp=$(mktemp -d); pid=
cleanup() { [[ -n $pid ]] && kill "$pid" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }

expect_exit() {  # expect_exit CODE REGEX -- command...
  local code=$1 re=$2; shift 3
  set +e; out=$("$@" 2>&1); rc=$?; set -e
  [[ $rc -eq $code ]] || fail "'$*' exited $rc, expected $code: $out"
  [[ $out =~ $re ]] || fail "'$*' said '$out', expected /$re/"
  [[ $(wc -l <<<"$out") -eq 1 ]] || fail "'$*' said more than one line: $out"
}

printf 'listen: 127.0.0.1:1\nprobes:\n  tcp: true\n  gpus: true\n' >"$tmp/unknown.yaml"
expect_exit 2 'probes\.gpus \(line 4\)' -- "$agent" --config "$tmp/unknown.yaml"
printf 'grace_period: forever\n' >"$tmp/bad.yaml"
expect_exit 2 'grace_period \(line 1\)' -- "$agent" --config "$tmp/bad.yaml"
expect_exit 2 'listen' -- "$agent" --listen nowhere
printf 'kernel_btf: /nonexistent/vmlinux\n' >"$tmp/nobtf.yaml"
expect_exit 1 'kernel BTF not readable' -- "$agent" --config "$tmp/nobtf.yaml"
expect_exit 1 'missing privileges' -- setpriv --bounding-set=-all --inh-caps=-all "$agent" --listen 127.0.0.1:1
echo "config errors, missing BTF, missing privileges: ok"

port=$((20000 + RANDOM % 20000))
# No pinned state: SIGTERM must then leave nothing behind (agent_restart covers the pins).
"$agent" --listen 127.0.0.1:$port --bpf-pin-root "" 2>"$tmp/log" & pid=$!
for _ in $(seq 50); do curl -sf "127.0.0.1:$port/readyz" >/dev/null && break; sleep 0.2; done
curl -sf "127.0.0.1:$port/healthz" | grep -qx ok || fail "/healthz"
curl -sf "127.0.0.1:$port/readyz" | grep -qx ready || fail "/readyz"
metrics=$(curl -sf "127.0.0.1:$port/metrics")
grep -q '^vigil_agent_probes_attached{set="tcp"} [1-9]' <<<"$metrics" || fail "no tcp probes attached: $metrics"
# The xid set reads the kernel log on every node, with or without NVIDIA's tracepoint.
grep -q '^vigil_agent_probe_set_enabled{set="xid",reason=""} 1' <<<"$metrics" || fail "xid set not loaded: $(grep xid "$tmp/log")"
grep -q '^vigil-agent: xid: kernel log /dev/kmsg from record 0; tracepoint' "$tmp/log" || fail "xid start line: $(cat "$tmp/log")"
[[ $(curl -s -o /dev/null -w '%{http_code}' "127.0.0.1:$port/nope") == 404 ]] || fail "404"

# bpftool here lacks the pids view, so the agent's own fd table names what it holds.
ids() { grep -h "^$1:" /proc/$pid/fdinfo/* 2>/dev/null | awk '{print $2}' | sort -un | tr '\n' ' '; }
progs=$(ids prog_id); links=$(ids link_id)
[[ -n $progs && -n $links ]] || fail "bpftool shows no programs/links owned by the agent (pid $pid)"
kill -TERM $pid; wait $pid || fail "agent exited non-zero after SIGTERM: $(cat "$tmp/log")"; pid=
for id in $progs; do bpftool prog show id "$id" >/dev/null 2>&1 && fail "program $id still loaded"; done
for id in $links; do bpftool link show id "$id" >/dev/null 2>&1 && fail "link $id still attached"; done
echo "served /metrics /healthz /readyz; SIGTERM detached $(wc -w <<<"$links") links, unloaded $(wc -w <<<"$progs") programs"
