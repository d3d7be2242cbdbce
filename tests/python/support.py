"""Shared set-up of the Python tests: the package on sys.path, and a worker process to speak frames to."""

import os
import pickle
import struct
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PYTHON_DIR = os.path.join(REPO, "python")
WORKER_FILE = os.path.join(PYTHON_DIR, "ferry", "_worker.py")
if PYTHON_DIR not in sys.path:
    sys.path.insert(0, PYTHON_DIR)

from ferry import _worker  # noqa: E402  (after the path is set)


class WorkerProcess:
    """`python3 _worker.py` with pipes, as the agent runs it on a node."""

    def __init__(self, env=None):
        self.proc = subprocess.Popen([sys.executable, WORKER_FILE], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, bufsize=0,
                                     env=env)
        self.frames = _worker.FrameReader(self.proc.stdout.fileno())

    def send(self, kind, frame_id, payload=b""):
        self.proc.stdin.write(_worker.encode_frame(kind, frame_id, payload))

    def send_function(self, fn_id, fn_pickle):
        self.send("F", fn_id, fn_pickle)

    def send_task(self, task_id, fn_id, args_pickle, flags=0, blob_ids=(), eliot_id=b"eliot-task@/1"):
        body = _worker.pack_task(fn_id, flags, list(blob_ids), args_pickle)
        self.send("T", task_id, struct.pack("<H", len(eliot_id)) + eliot_id + body)

    def read(self):
        return self.frames.read_frame()

    def read_until_result(self):
        """(outcome, data, [O frames before it])."""
        outputs = []
        while True:
            frame = self.read()
            if frame is None:
                raise AssertionError("the worker ended before a result; stderr: %r" % self.stderr())
            kind, frame_id, payload = frame
            if kind == "R":
                return frame_id, payload[0], payload[1:], outputs
            outputs.append((kind, frame_id, payload))

    def end(self):
        self.send("E", 0)
        self.proc.stdin.close()
        return self.proc.wait()

    def stderr(self):
        return self.proc.stderr.read()

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        for f in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if not f.closed:
                f.close()


def args_pickle(*args, **kwargs):
    return pickle.dumps((args, kwargs), protocol=5)
