#!/usr/bin/env bash
# The demo: the most complete job ferry can do today, traced end to end.
#  1. A Python program that uses eliot runs ferry inside its own action; ferry continues that task, and
#     `ferry trace tree` merges the two processes' traces into one tree.
#  2. moto_server stands in for S3: ferry ships a file up and back, byte for byte, and the trace of the
#     upload is shown as a tree and written as a Chrome timeline.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/build.sh release >/dev/null
ferry=$PWD/build/agent/ferry
peers=$PWD/tests/peers

work=$(mktemp -d)
moto_pid=
cleanup() {
  [ -n "$moto_pid" ] && kill "$moto_pid" 2>/dev/null && wait "$moto_pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
export XDG_STATE_HOME=$work/state XDG_CONFIG_HOME=$work/config XDG_CACHE_HOME=$work/cache

echo "== ferry version"
"$ferry" version

echo
echo "== 1. a Python orchestrator (eliot) runs: ferry config show"
cat >"$work/ferry.toml" <<'TOML'
[nodes]
count = 2
TOML
(cd "$work" && /usr/bin/python3 "$peers/eliot_parent.py" "$work/python.jsonl" \
  "$ferry" config show --trace "$work/config.jsonl" | grep -E 'nodes.count|# files')
echo "-- ferry trace tree python.jsonl config.jsonl (one task, two processes)"
"$ferry" trace tree "$work/python.jsonl" "$work/config.jsonl"

echo "== 2. S3 (moto_server) as the store"
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
moto_server -H 127.0.0.1 -p "$port" >"$work/moto.log" 2>&1 &
moto_pid=$!
export AWS_ACCESS_KEY_ID=demo AWS_SECRET_ACCESS_KEY=demo AWS_DEFAULT_REGION=us-east-1
export AWS_ENDPOINT_URL=http://127.0.0.1:$port AWS_CONFIG_FILE=/dev/null AWS_SHARED_CREDENTIALS_FILE=/dev/null
for _ in $(seq 100); do curl -s -o /dev/null "$AWS_ENDPOINT_URL" && break; sleep 0.1; done
aws s3 mb s3://ferry-demo >/dev/null
head -c $((24 << 20)) /dev/urandom >"$work/data.bin"
echo "-- ferry storage cp data.bin s3://ferry-demo/data.bin (24 MiB as a multipart upload)"
FERRY_S3_MULTIPART_THRESHOLD=8MiB "$ferry" storage cp "$work/data.bin" s3://ferry-demo/data.bin --trace "$work/upload.jsonl"
"$ferry" storage ls s3://ferry-demo/
"$ferry" storage cp s3://ferry-demo/data.bin "$work/back.bin"
cmp "$work/data.bin" "$work/back.bin" && echo "-- the bytes came back identical"
echo "-- ferry trace tree upload.jsonl (requests folded)"
"$ferry" trace tree "$work/upload.jsonl" | grep -vE '(bucket|key|operation|bytes|attempt): |s3:call'
"$ferry" trace chrome "$work/upload.jsonl" -o "$work/upload-timeline.json"
echo "-- wrote a Chrome trace-event timeline of $(wc -c <"$work/upload-timeline.json") bytes"

echo
echo "== a bad configuration is refused with file:line:column (exit code 2)"
printf '[net]\nconnect_timout = "1s"\n' >"$work/bad.toml"
set +e
"$ferry" --config "$work/bad.toml" config show
echo "exit code: $?"
