#!/usr/bin/env bash
# The demo: ferry's main job on the embedded default, local nodes, from a fresh clone.
#  1. Two local nodes come up (real sshd, each in its own network namespace on the ferry0 bridge).
#  2. moto_server stands in for S3, on the bridge address, where the nodes reach it.
#  3. `ferry run` ships examples/project (its own package, and tabulate from its own venv) and runs
#     train.py on both nodes; the program continues ferry's trace with eliot.
#  4. `ferry map` runs square.py over 20 inputs on the same, now warm, nodes.
#  5. examples/python_api/main.py maps Python functions over the same nodes with `import ferry`, run by
#     Debian's python3 (which has python3-cloudpickle) with the package from python/ on its path.
#  6. `ferry trace tree` shows the run as one tree across processes; everything is torn down.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/build.sh demo >/dev/null
./scripts/example_env.sh
repo=$PWD
ferry=$repo/build/agent/ferry
project=$repo/examples/project

work=$(mktemp -d)
chmod 755 "$work"
moto_pid=
cleanup() {
  "$ferry" -q nodes down --all >/dev/null 2>&1 || true
  [ -n "$moto_pid" ] && kill "$moto_pid" 2>/dev/null && wait "$moto_pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
export XDG_STATE_HOME=$work/state XDG_CONFIG_HOME=$work/config XDG_CACHE_HOME=$work/cache
unset AWS_PROFILE AWS_SESSION_TOKEN AWS_ENDPOINT_URL_S3

echo "== 1. two local nodes: ferry nodes up 2"
"$ferry" nodes up 2

echo
echo "== 2. moto_server as the S3 store, on the bridge address 10.200.0.1"
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("10.200.0.1", 0)); print(s.getsockname()[1])')
moto_server -H 10.200.0.1 -p "$port" >"$work/moto.log" 2>&1 &
moto_pid=$!
export AWS_ACCESS_KEY_ID=demo AWS_SECRET_ACCESS_KEY=demo AWS_DEFAULT_REGION=us-east-1
export AWS_ENDPOINT_URL=http://10.200.0.1:$port AWS_CONFIG_FILE=/dev/null AWS_SHARED_CREDENTIALS_FILE=/dev/null
for _ in $(seq 100); do curl -s -o /dev/null "$AWS_ENDPOINT_URL" && break; sleep 0.1; done
aws s3 mb s3://ferry-demo >/dev/null
export FERRY_STORAGE_URL=s3://ferry-demo/project
echo "storage: $FERRY_STORAGE_URL at $AWS_ENDPOINT_URL"

cd "$project"
echo
echo "== 3. ferry run --nodes 2 -- python3 train.py   (in examples/project)"
"$ferry" --trace "$work/run.jsonl" run --nodes 2 --env FERRY_TRACE_DIR="$work" -- python3 train.py

echo
echo "== 4. ferry map --range 1..20 --concurrency 10 -- python3 square.py {}   (results as JSON lines; the first 3 shown)"
"$ferry" map --range 1..20 --concurrency 10 --output "$work/map" -- python3 square.py {}
head -n 3 "$work/map/tasks.jsonl"
echo "task 20's output:"
cat "$work/map/19.out"

echo
echo "== 5. the Python API: /usr/bin/python3 main.py   (in examples/python_api; import ferry from python/)"
(cd "$repo/examples/python_api" && FERRY_BIN="$ferry" PYTHONPATH="$repo/python" /usr/bin/python3 main.py)

echo
echo "== 6. ferry trace tree: the run, with the Python program's own actions inside it"
"$ferry" trace tree "$work/run.jsonl" "$work"/train-*.jsonl | grep -vE '^\s*(url|key|bucket|bytes|attempt|operation): '

echo
echo "== a bad configuration is refused with file:line:column (exit code 2)"
printf '[net]\nconnect_timout = "1s"\n' >"$work/bad.toml"
set +e
"$ferry" --config "$work/bad.toml" config show
echo "exit code: $?"
set -e

echo
echo "== teardown: ferry nodes down --all"
"$ferry" nodes down --all
