"""The node worker, run for real (`python3 _worker.py` with pipes) and spoken to in frames."""

import hashlib
import http.server
import io
import json
import os
import pickle
import sys
import tempfile
import threading
import unittest

import cloudpickle

from support import WorkerProcess, _worker, args_pickle


def by_value(fn):
    return cloudpickle.dumps(fn, protocol=5)


class WorkerTest(unittest.TestCase):
    def setUp(self):
        self.worker = WorkerProcess()
        self.addCleanup(self.worker.close)

    def hello(self):
        kind, frame_id, payload = self.worker.read()
        self.assertEqual(kind, "H")
        return json.loads(payload)

    def test_says_hello_with_its_python_and_pid(self):
        info = self.hello()
        self.assertEqual(info["python"], "%d.%d.%d" % sys.version_info[:3])
        self.assertEqual(info["pid"], self.worker.proc.pid)
        self.assertEqual(self.worker.end(), 0)

    def test_eof_ends_the_worker_cleanly(self):
        self.hello()
        self.worker.proc.stdin.close()
        self.assertEqual(self.worker.proc.wait(), 0)

    def test_runs_a_lambda_pickled_by_value(self):
        self.hello()
        offset = 10
        self.worker.send_function(1, by_value(lambda x, y=0: x * x + y + offset))
        self.worker.send_task(5, 1, args_pickle(3, y=1))
        task_id, outcome, data, _ = self.worker.read_until_result()
        self.assertEqual((task_id, outcome), (5, _worker.OUTCOME_VALUE))
        self.assertEqual(pickle.loads(data), 20)
        self.assertEqual(self.worker.end(), 0)

    def test_runs_a_function_pickled_by_reference(self):
        self.hello()
        import textwrap
        fn_pickle = by_value(textwrap.dedent)
        self.assertNotIn(b"co_code", fn_pickle)  # a reference, not code
        self.assertIn(b"textwrap", fn_pickle)
        self.worker.send_function(2, fn_pickle)
        self.worker.send_task(1, 2, args_pickle("  a\n  b\n"))
        _, outcome, data, _ = self.worker.read_until_result()
        self.assertEqual(outcome, _worker.OUTCOME_VALUE)
        self.assertEqual(pickle.loads(data), "a\nb\n")

    def test_sets_the_eliot_task_id_for_the_task(self):
        self.hello()
        self.worker.send_function(1, by_value(lambda: os.environ["FERRY_TASK_ID"]))
        self.worker.send_task(1, 1, args_pickle(), eliot_id=b"abc@/2/1")
        _, _, data, _ = self.worker.read_until_result()
        self.assertEqual(pickle.loads(data), "abc@/2/1")

    def test_a_chunk_answers_every_item_and_one_failure_stays_its_own(self):
        self.hello()
        self.worker.send_function(1, by_value(lambda x: 10 // x))
        items = [((x,), {}) for x in (1, 0, 5)]
        self.worker.send_task(9, 1, pickle.dumps(items), flags=_worker.FLAG_CHUNK)
        task_id, outcome, data, _ = self.worker.read_until_result()
        self.assertEqual((task_id, outcome), (9, _worker.OUTCOME_VALUE))
        results = pickle.loads(data)
        self.assertEqual(results[0], (0, 10))
        self.assertEqual(results[2], (0, 2))
        self.assertEqual(results[1][0], 1)
        exc_pickle, type_name, message, tb_text = results[1][1]
        self.assertEqual(type_name, "builtins.ZeroDivisionError")
        self.assertIsInstance(pickle.loads(exc_pickle), ZeroDivisionError)
        self.assertIn("ZeroDivisionError", tb_text)

    def test_an_unpicklable_value_in_a_chunk_fails_only_its_item(self):
        self.hello()
        self.worker.send_function(1, by_value(lambda x: threading.Lock() if x else x))
        self.worker.send_task(1, 1, pickle.dumps([((0,), {}), ((1,), {})]), flags=_worker.FLAG_CHUNK)
        _, _, data, _ = self.worker.read_until_result()
        results = pickle.loads(data)
        self.assertEqual(results[0], (0, 0))
        self.assertEqual(results[1][0], 1)
        self.assertIn("lock", results[1][1][2])

    def test_an_exception_of_a_class_sent_by_value_comes_back_as_the_same_class(self):
        class MyError(Exception):  # local: cloudpickle sends it by value
            pass

        def fails(x):
            raise MyError("bad %d" % x)

        self.hello()
        self.worker.send_function(1, by_value(fails))
        self.worker.send_task(3, 1, args_pickle(7))
        _, outcome, data, _ = self.worker.read_until_result()
        self.assertEqual(outcome, _worker.OUTCOME_EXCEPTION)
        exc_pickle, type_name, message, tb_text = pickle.loads(data)
        self.assertTrue(type_name.endswith("MyError"), type_name)
        self.assertEqual(message, "bad 7")
        self.assertIn("in fails", tb_text)
        exc = pickle.loads(exc_pickle)
        self.assertIs(type(exc), MyError)
        self.assertEqual(exc.args, ("bad 7",))

    def test_system_exit_is_a_record_and_the_worker_goes_on(self):
        self.hello()
        self.worker.send_function(1, by_value(lambda x: sys.exit(x) if x else "alive"))
        self.worker.send_task(1, 1, args_pickle(3))
        self.worker.send_task(2, 1, args_pickle(0))
        _, outcome, data, _ = self.worker.read_until_result()
        self.assertEqual(outcome, _worker.OUTCOME_EXCEPTION)
        self.assertEqual(pickle.loads(data)[1], "builtins.SystemExit")
        _, outcome, data, _ = self.worker.read_until_result()
        self.assertEqual(pickle.loads(data), "alive")
        self.assertEqual(self.worker.end(), 0)

    def test_keyboard_interrupt_in_a_task_is_answered_then_the_worker_exits(self):
        def interrupted():
            raise KeyboardInterrupt

        self.hello()
        self.worker.send_function(1, by_value(interrupted))
        self.worker.send_task(1, 1, args_pickle())
        _, outcome, data, _ = self.worker.read_until_result()
        self.assertEqual(outcome, _worker.OUTCOME_EXCEPTION)
        self.assertEqual(pickle.loads(data)[1], "builtins.KeyboardInterrupt")
        self.assertNotEqual(self.worker.proc.wait(), 0)

    def test_a_function_that_cannot_be_unpickled_fails_its_tasks_only(self):
        self.hello()
        self.worker.send_function(1, b"not a pickle")
        self.worker.send_function(2, by_value(lambda: "ok"))
        self.worker.send_task(1, 1, args_pickle())
        self.worker.send_task(2, 2, args_pickle())
        _, outcome, _, _ = self.worker.read_until_result()
        self.assertEqual(outcome, _worker.OUTCOME_EXCEPTION)
        _, outcome, data, _ = self.worker.read_until_result()
        self.assertEqual(pickle.loads(data), "ok")

    def test_print_and_writes_to_fd_1_never_corrupt_the_frames(self):
        def noisy(n):
            print("line", n)
            print("partial", end="")
            sys.stderr.write("err %d\n" % n)
            os.write(1, b"from C on fd 1\n")
            sys.stdout.buffer.write(b"raw\n")
            return n

        self.hello()
        self.worker.send_function(1, by_value(noisy))
        self.worker.send_task(4, 1, args_pickle(1))
        self.worker.send_task(5, 1, args_pickle(2))
        task_id, outcome, data, outputs = self.worker.read_until_result()
        self.assertEqual((task_id, pickle.loads(data)), (4, 1))
        stdout = b"".join(p[1:] for k, i, p in outputs if p[0] == 1)
        stderr = b"".join(p[1:] for k, i, p in outputs if p[0] == 2)
        self.assertTrue(all(k == "O" and i == 4 for k, i, p in outputs), outputs)
        self.assertEqual(stdout, b"line 1\npartial" + b"raw\n")
        self.assertEqual(stderr, b"err 1\n")
        task_id, outcome, data, outputs = self.worker.read_until_result()
        self.assertEqual((task_id, pickle.loads(data)), (5, 2))
        self.assertEqual(self.worker.end(), 0)
        self.assertEqual(self.worker.stderr().count(b"from C on fd 1\n"), 2)


class _CountingBlobServer:
    """http.server on 127.0.0.1 serving one body and counting GETs."""

    def __init__(self, body, delay_event=None, status=200):
        server = self
        self.gets = 0
        self.tokens = []  # the x-ferry-token of each GET
        self.asked = threading.Event()  # set by the first GET
        self.lock = threading.Lock()

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                with server.lock:
                    server.gets += 1
                    server.tokens.append(self.headers.get("x-ferry-token"))
                server.asked.set()
                if delay_event is not None:
                    delay_event.wait()
                self.send_response(status)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = "http://127.0.0.1:%d/blob" % self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


class _BlobRef(pickle.Pickler):
    """Pickles one object as the persistent id of blob `blob_id`, as the client does."""

    def __init__(self, f, obj, blob_id):
        super().__init__(f, protocol=5)
        self.obj, self.blob_id = obj, blob_id

    def persistent_id(self, obj):
        return ("ferry-blob", self.blob_id) if obj is self.obj else None


def blob_task_args(obj, blob_id, *extra):
    f = io.BytesIO()
    _BlobRef(f, obj, blob_id).dump(((obj,) + extra, {}))
    return f.getvalue()


class BlobTest(unittest.TestCase):
    def setUp(self):
        self.cache = tempfile.TemporaryDirectory()
        self.addCleanup(self.cache.cleanup)
        self.big = list(range(200000))
        self.blob = pickle.dumps(self.big, protocol=5)

    def serve(self, body, delay_event=None, status=200):
        server = _CountingBlobServer(body, delay_event, status)
        self.addCleanup(server.close)
        return server

    def spec(self, url, sha256=None, **more):
        spec = {"sha256": sha256 or hashlib.sha256(self.blob).hexdigest(), "url": url,
                "path": os.path.join(self.cache.name, "blobs", "b1"), "size": len(self.blob)}
        spec.update(more)
        return json.dumps(spec).encode()

    def run_blob_task(self, spec):
        worker = self.start_worker()
        worker.send("B", 7, spec)
        worker.send_task(1, 1, blob_task_args(self.big, 7, 5), blob_ids=[7])
        _, outcome, data, _ = worker.read_until_result()
        self.assertEqual(worker.end(), 0)
        return outcome, pickle.loads(data)

    def start_worker(self):
        worker = WorkerProcess()
        self.addCleanup(worker.close)
        self.assertEqual(worker.read()[0], "H")
        worker.send_function(1, by_value(lambda xs, k: sum(xs) + k))
        return worker

    def test_two_workers_racing_fetch_a_blob_once_and_unpickle_it_per_worker(self):
        release = threading.Event()
        server = self.serve(self.blob, release)
        workers = [self.start_worker(), self.start_worker()]
        for w in workers:
            w.send("B", 7, self.spec(server.url))
            for task_id in (1, 2):
                w.send_task(task_id, 1, blob_task_args(self.big, 7, task_id), blob_ids=[7])
        # Both workers are now at the blob: one downloads (held by the server
        # until released), the other waits on the lock.
        while server.gets == 0:
            threading.Event().wait(0.01)
        release.set()
        for w in workers:
            for task_id in (1, 2):
                got_id, outcome, data, _ = w.read_until_result()
                self.assertEqual(outcome, _worker.OUTCOME_VALUE, pickle.loads(data))
                self.assertEqual(pickle.loads(data), sum(self.big) + got_id)
            self.assertEqual(w.end(), 0)
        self.assertEqual(server.gets, 1)
        with open(os.path.join(self.cache.name, "blobs", "b1"), "rb") as f:
            self.assertEqual(f.read(), self.blob)

    def test_a_download_whose_sha256_differs_is_refused_and_not_kept(self):
        server = self.serve(self.blob)
        worker = self.start_worker()
        worker.send("B", 7, self.spec(server.url, sha256="0" * 64))
        worker.send_task(1, 1, blob_task_args(self.big, 7, 0), blob_ids=[7])
        _, outcome, data, _ = worker.read_until_result()
        self.assertEqual(outcome, _worker.OUTCOME_EXCEPTION)
        _, type_name, message, _ = pickle.loads(data)
        self.assertIn("sha256", message)
        # Nothing kept but the lock, and the mark that turns the node's server away from it.
        self.assertEqual(sorted(os.listdir(os.path.join(self.cache.name, "blobs"))), ["b1.failed", "b1.lock"])
        self.assertEqual(worker.end(), 0)

    def test_a_blob_comes_from_the_nodes_parent_first_with_the_jobs_token(self):
        storage, parent = self.serve(self.blob), self.serve(self.blob)
        outcome, value = self.run_blob_task(self.spec(storage.url, peer=parent.url, token="t" * 64))
        self.assertEqual((outcome, value), (_worker.OUTCOME_VALUE, sum(self.big) + 5))
        self.assertEqual((parent.gets, storage.gets), (1, 0))
        self.assertEqual(parent.tokens, ["t" * 64])

    def test_a_parent_that_refuses_or_forges_leaves_the_blob_to_storage(self):
        for parent in (self.serve(b"not here", status=404), self.serve(self.blob[:-1] + b"\0")):
            kept = os.path.join(self.cache.name, "blobs", "b1")
            if os.path.exists(kept):  # the last round's
                os.unlink(kept)
            storage = self.serve(self.blob)
            outcome, value = self.run_blob_task(self.spec(storage.url, peer=parent.url, token="t" * 64))
            self.assertEqual((outcome, value), (_worker.OUTCOME_VALUE, sum(self.big) + 5))
            self.assertEqual((parent.gets, storage.gets), (1, 1))
            with open(os.path.join(self.cache.name, "blobs", "b1"), "rb") as f:
                self.assertEqual(f.read(), self.blob)

    def test_a_blob_to_fetch_now_is_in_the_node_cache_before_any_task_needs_it(self):
        storage = self.serve(self.blob)
        worker = self.start_worker()
        worker.send("B", 7, self.spec(storage.url, fetch=True))
        # Without a task in sight (the wait only keeps a broken worker from hanging the test).
        self.assertTrue(storage.asked.wait(120), "the worker never asked for the blob")
        worker.send_task(1, 1, blob_task_args(self.big, 7, 5), blob_ids=[7])
        _, outcome, data, _ = worker.read_until_result()
        self.assertEqual((outcome, pickle.loads(data)), (_worker.OUTCOME_VALUE, sum(self.big) + 5))
        self.assertEqual(worker.end(), 0)
        self.assertEqual(storage.gets, 1)


class FrameCodecTest(unittest.TestCase):
    def test_frames_round_trip_through_a_pipe_in_pieces(self):
        r, w = os.pipe()
        self.addCleanup(os.close, r)
        frames = [("F", 1, b"x" * 100), ("T", 2**40, b""), ("B", 3, os.urandom(3 << 20))]

        def writer():
            for frame in frames:
                _worker.write_frame(w, *frame)
            os.close(w)

        t = threading.Thread(target=writer)
        t.start()
        reader = _worker.FrameReader(r)
        got = []
        while True:
            frame = _worker.read_frame(reader)
            if frame is None:
                break
            got.append(frame)
        t.join()
        self.assertEqual(got, frames)

    def test_a_stream_cut_inside_a_frame_is_a_protocol_error(self):
        r, w = os.pipe()
        self.addCleanup(os.close, r)
        os.write(w, _worker.encode_frame("R", 1, b"abcdef")[:-2])
        os.close(w)
        with self.assertRaises(_worker.ProtocolError):
            _worker.FrameReader(r).read_frame()


if __name__ == "__main__":
    unittest.main()
