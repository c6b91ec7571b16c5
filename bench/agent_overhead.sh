#!/usr/bin/env bash
# The worker's single-stream generation throughput with vigil-agent attached vs not, alternating
# runs (off, on, off, on, ...) so both see the same machine noise. Needs root (the agent).
# usage: bench/agent_overhead.sh [rounds] [seconds]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
rounds=${1:-2} seconds=${2:-15}
agent="$root/build/dev/agent/vigil-agent"
export VIGIL_WORKER=${VIGIL_WORKER:-$root/build/dev/worker/vigil-worker}
[[ $(id -u) -eq 0 ]] || { echo "agent_overhead: needs root" >&2; exit 1; }

run() { python3 "$root/bench/load.py" streams --streams 1 --seconds "$seconds" | awk '$1 == "vigil" && $2 == 1 {print $3}'; }

off=() on=()
for ((r = 0; r < rounds; ++r)); do
  off+=("$(run)")
  "$agent" --listen 127.0.0.1:19899 >/dev/null 2>&1 &
  pid=$!
  sleep 3  # the agent is up and watching exec events before the worker starts
  on+=("$(run)")
  # The agent saw the worker: its USDT set attached to the binary and counted events.
  attached=$(curl -s 127.0.0.1:19899/metrics | awk '/^vigil_agent_events_total\{set="usdt"\}/ {print $2}')
  kill -TERM "$pid"; wait "$pid" || true
  echo "round $((r + 1)): off ${off[-1]} tok/s, on ${on[-1]} tok/s (agent usdt events: ${attached:-none})"
done
python3 - "${off[@]}" -- "${on[@]}" <<'PY'
import statistics, sys
args = sys.argv[1:]
cut = args.index("--")
off, on = [float(x) for x in args[:cut]], [float(x) for x in args[cut + 1:]]
m_off, m_on = statistics.median(off), statistics.median(on)
print(f"median off {m_off:.1f} tok/s, on {m_on:.1f} tok/s: attached is {100 * (1 - m_on / m_off):+.2f} % slower")
PY
