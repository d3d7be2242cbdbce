#!/usr/bin/env bash
# The demo: the most complete job ferry can do today, traced end to end. A Python program that uses
# eliot runs ferry inside its own action; ferry continues that task; `ferry trace tree` merges the two
# processes' traces into one tree, and `ferry trace chrome` turns them into a timeline for Perfetto.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/build.sh release >/dev/null
ferry=$PWD/build/agent/ferry

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export XDG_STATE_HOME=$work/state XDG_CONFIG_HOME=$work/config XDG_CACHE_HOME=$work/cache
cat >"$work/ferry.toml" <<'TOML'
[storage]
url = "s3://demo-bucket/layers"

[nodes]
count = 2
TOML

echo "== ferry version"
"$ferry" version
echo
echo "== a Python orchestrator (eliot) runs: ferry config show"
(cd "$work" && /usr/bin/python3 "$OLDPWD/tests/peers/eliot_parent.py" "$work/python.jsonl" \
  "$ferry" config show --trace "$work/ferry.jsonl" | grep -E 'storage.url|nodes.count|# files')
echo
echo "== ferry trace tree python.jsonl ferry.jsonl (one task, two processes)"
"$ferry" trace tree "$work/python.jsonl" "$work/ferry.jsonl"
echo "== ferry trace chrome"
"$ferry" trace chrome "$work/python.jsonl" "$work/ferry.jsonl" -o "$work/timeline.json"
echo "wrote $(wc -c <"$work/timeline.json") bytes of Chrome trace-event JSON"
echo
echo "== a bad configuration is refused with file:line:column (exit code 2)"
printf '[net]\nconnect_timout = "1s"\n' >"$work/bad.toml"
set +e
"$ferry" --config "$work/bad.toml" config show
echo "exit code: $?"
