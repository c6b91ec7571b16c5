#!/usr/bin/env bash
# Checks deploy/alertmanager/alertmanager.yml with amtool: the config loads, and every priority
# and alert of alerts/generated/vigil.rules.yaml routes to the receiver its priority promises.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cfg="$root/deploy/alertmanager/alertmanager.yml"
rules="$root/alerts/generated/vigil.rules.yaml"
py=$("$root/tests/alerts/python_env.sh")
fails=0

amtool check-config "$cfg"

expect() {  # expect RECEIVER LABEL=VALUE...
  local want=$1; shift
  local got
  got=$(amtool config routes test --config.file="$cfg" "$@")
  if [[ $got == "$want" ]]; then
    echo "ok: $* -> $got"
  else
    echo "FAIL: $* -> '$got', want '$want'"
    fails=$((fails + 1))
  fi
}

expect vigil-page priority=P1 severity=critical alertname=VigilGpuFragmentationGraphFailures node=gpu-1
expect vigil-ticket priority=P2 severity=warning alertname=VigilGpuAllocationFailures node=gpu-1
expect vigil-ticket alertname=SomethingWithoutPriority
expect vigil-ticket priority=P3 severity=info alertname=SomethingInformational

# Every generated alert: P1 pages, P2 tickets (priorities read from the rule file itself).
alerts=$("$py" - "$rules" <<'PY'
import sys, yaml
for g in yaml.safe_load(open(sys.argv[1]))["groups"]:
    for r in g["rules"]:
        if "alert" in r:
            print(r["alert"], r["labels"]["priority"])
PY
)
[[ -n $alerts ]] || { echo "FAIL: no alerts in $rules"; exit 1; }
while read -r name priority; do
  case $priority in
    P1) expect vigil-page alertname="$name" priority=P1 ;;
    P2) expect vigil-ticket alertname="$name" priority=P2 ;;
    *) echo "FAIL: $name has priority '$priority'"; fails=$((fails + 1)) ;;
  esac
done <<<"$alerts"

# Grouping by node and workload is part of the contract (routes inherit the root's group_by).
"$py" - "$cfg" <<'PY' || fails=$((fails + 1))
import sys, yaml
route = yaml.safe_load(open(sys.argv[1]))["route"]
missing = {"node", "namespace", "pod", "pod_uid"} - set(route["group_by"])
assert not any("group_by" in r for r in route["routes"]), "a child route overrides group_by"
if missing:
    sys.exit("FAIL: the root route does not group by %s" % sorted(missing))
print("ok: grouped by", route["group_by"])
PY

((fails == 0)) || { echo "FAIL: $fails routing cases"; exit 1; }
echo "ok: routing"
