"""A stand-in for `ferry api` in the client's end-to-end tests: real workers, local, no nodes.

It speaks the client side of docs/python-api.md on stdin/stdout and runs
FERRY_TEST_WORKERS real workers (python/ferry/_worker.py) on this machine,
relaying frames as the agent does; blobs are kept as files and given to the
workers as file:// URLs. It does not pack, trace or retry.
"""

import hashlib
import json
import os
import struct
import subprocess
import sys
import tempfile
import threading

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
from ferry._worker import FrameReader, encode_frame, write_frame  # noqa: E402

WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python", "ferry", "_worker.py")


def main():
    out_lock = threading.Lock()
    out_fd = os.dup(1)
    os.dup2(2, 1)

    def to_client(kind, frame_id, payload=b""):
        with out_lock:
            write_frame(out_fd, kind, frame_id, payload)

    if os.environ.get("FERRY_TEST_FAIL"):
        to_client("X", 0, os.environ["FERRY_TEST_FAIL"].encode())
        return 3
    cache = tempfile.mkdtemp(prefix="ferry-relay-")
    n = int(os.environ.get("FERRY_TEST_WORKERS", "2"))
    workers, pending = [], {}
    lock = threading.Condition()

    def pump(index, proc):
        frames = FrameReader(proc.stdout.fileno())
        assert frames.read_frame()[0] == "H"
        while True:
            frame = frames.read_frame()
            if frame is None:
                return
            kind, task_id, payload = frame
            if kind == "O":
                node = b"node-%d" % index
                to_client("O", task_id, payload[:1] + bytes((len(node),)) + node + payload[1:])
            elif kind == "R":
                to_client("R", task_id, payload)
                with lock:
                    pending.pop(task_id, None)
                    lock.notify_all()

    for i in range(n):
        proc = subprocess.Popen([sys.executable, WORKER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                bufsize=0)
        workers.append(proc)
        threading.Thread(target=pump, args=(i, proc), daemon=True).start()
    to_client("S", 0, json.dumps({"event": "slots", "slots": n, "nodes": 1}).encode())
    frames = FrameReader(0)
    turn = 0
    while True:
        frame = frames.read_frame()
        if frame is None or frame[0] == "E":
            break
        kind, frame_id, payload = frame
        if kind == "F":
            for w in workers:
                w.stdin.write(encode_frame("F", frame_id, payload))
        elif kind == "B":
            path = os.path.join(cache, "blob-%d" % frame_id)
            with open(path + ".src", "wb") as f:
                f.write(payload)
            spec = json.dumps({"sha256": hashlib.sha256(payload).hexdigest(), "url": "file://" + path + ".src",
                               "path": path, "size": len(payload)}).encode()
            for w in workers:
                w.stdin.write(encode_frame("B", frame_id, spec))
        elif kind == "T":
            with lock:
                pending[frame_id] = True
            eliot = b"relay@/%d" % frame_id
            workers[turn % n].stdin.write(encode_frame("T", frame_id, struct.pack("<H", len(eliot)) + eliot + payload))
            turn += 1
    with lock:
        lock.wait_for(lambda: not pending)
    for w in workers:
        w.stdin.write(encode_frame("E", 0))
        w.stdin.close()
        w.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
