"""The client's pieces (pickling, chunk sizing, the window, argv, output). The Executor end to end runs
against the real `ferry api` on local nodes: tests/agent/test_python_api.cpp."""

import concurrent.futures
import io
import pickle
import subprocess
import sys
import textwrap
import threading
import unittest

from support import PYTHON_DIR, REPO  # noqa: F401  (sets sys.path)

import ferry
from ferry import _chunking, _client, _output, _pickling, _progress


class FutureTest(unittest.TestCase):
    def test_a_cancelled_future_wakes_wait_and_as_completed(self):
        class Owner:
            def _item_cancelled(self, task):
                pass

        future = ferry.Future(Owner())
        self.assertTrue(future.cancel())
        done, not_done = concurrent.futures.wait([future], timeout=5)
        self.assertEqual((done, not_done), ({future}, set()))
        self.assertEqual(list(concurrent.futures.as_completed([future], timeout=5)), [future])


class FakeClock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


class PicklingTest(unittest.TestCase):
    def test_a_function_is_pickled_once_per_table(self):
        table = _pickling.FunctionTable()
        fn = lambda x: x  # noqa: E731
        fn_id, data = table.lookup(fn)
        self.assertIsNotNone(data)
        self.assertEqual(table.lookup(fn), (fn_id, None))
        self.assertNotEqual(table.lookup(textwrap.dedent)[0], fn_id)

    def test_small_arguments_are_one_plain_pickle(self):
        packer = _pickling.ArgumentPacker()
        work = ((1, "a"), {"k": [1, 2]})
        data, blob_ids, new = packer.pack(work, [1, "a", [1, 2]])
        self.assertEqual((blob_ids, new), ([], []))
        self.assertEqual(data, pickle.dumps(work, protocol=5))

    def test_a_task_that_fails_to_pickle_leaves_no_blob_taken_as_sent(self):
        packer = _pickling.ArgumentPacker(threshold=1000)
        known = list(range(2000))
        packer.pack(((known,), {}), [known])  # a blob sent already: the next pack looks at each argument
        big = list(range(1000))
        unpicklable = threading.Lock()
        with self.assertRaises(Exception):
            packer.pack(((known, big, unpicklable), {}), [known, big, unpicklable])
        _, blob_ids, new = packer.pack(((big, 1), {}), [big, 1])
        self.assertEqual(len(new), 1)  # sent with the task that names it, not taken as sent before
        self.assertEqual(blob_ids, [new[0][0]])

    def test_the_same_large_argument_is_a_blob_sent_once(self):
        packer = _pickling.ArgumentPacker(threshold=1000)
        big = list(range(1000))
        first = packer.pack(((big, 1), {}), [big, 1])
        second = packer.pack(((big, 2), {}), [big, 2])
        self.assertEqual(len(first[2]), 1)
        blob_id, blob = first[2][0]
        self.assertEqual(pickle.loads(blob), big)
        self.assertEqual(first[1], [blob_id])
        self.assertEqual((second[1], second[2]), ([blob_id], []))
        self.assertLess(len(second[0]), 100)  # the task names the blob, it does not carry it
        # The worker's side: the persistent id resolves to the blob.
        unpickler = pickle.Unpickler(io.BytesIO(second[0]))
        unpickler.persistent_load = lambda pid: {("ferry-blob", blob_id): big}[pid]
        self.assertEqual(unpickler.load(), ((big, 2), {}))

    def test_many_small_arguments_over_the_threshold_stay_inline(self):
        packer = _pickling.ArgumentPacker(threshold=1000)
        items = [((list(range(50)),), {}) for _ in range(10)]
        data, blob_ids, new = packer.pack(items, [a for args, _ in items for a in args])
        self.assertEqual((blob_ids, new), ([], []))
        self.assertEqual(pickle.loads(data), items)

    def test_an_argument_plain_pickle_refuses_goes_through_cloudpickle(self):
        packer = _pickling.ArgumentPacker()
        data, _, _ = packer.pack(((lambda: 5,), {}), [])
        self.assertEqual(pickle.loads(data)[0][0](), 5)

    def test_an_exception_record_becomes_the_exception_with_its_traceback_as_cause(self):
        record = (pickle.dumps(ValueError("v")), "builtins.ValueError", "v", "Traceback: remote\n")
        exc = _pickling.exception_from_record(record)
        self.assertIs(type(exc), ValueError)
        self.assertIsInstance(exc.__cause__, ferry.RemoteTraceback)
        self.assertEqual(str(exc.__cause__), "Traceback: remote\n")

    def test_an_exception_that_cannot_be_unpickled_is_a_remote_error(self):
        for exc_pickle in (None, b"garbage"):
            exc = _pickling.exception_from_record((exc_pickle, "mod.Gone", "m", "tb\n"))
            self.assertIsInstance(exc, ferry.RemoteError)
            self.assertEqual((exc.type_name, exc.message, exc.traceback), ("mod.Gone", "m", "tb\n"))


_WITHOUT_CLOUDPICKLE = r"""
import sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name == "cloudpickle":
            raise ImportError("blocked")
sys.meta_path.insert(0, Block())
sys.path.insert(0, %r)
import pickle, textwrap
from ferry import _pickling, FerryError
assert _pickling.cloudpickle is None
data = _pickling.dumps_function(textwrap.dedent)
assert pickle.loads(data) is textwrap.dedent
def in_main(x):
    return x
def closure():
    y = 1
    return lambda: y
for fn in (lambda x: x, in_main, closure()):
    try:
        _pickling.dumps_function(fn)
    except FerryError as exc:
        print("refused:", exc)
    else:
        print("pickled:", fn)
"""


class WithoutCloudpickleTest(unittest.TestCase):
    def test_importable_functions_work_and_the_others_say_what_to_install(self):
        out = subprocess.run([sys.executable, "-c", _WITHOUT_CLOUDPICKLE % PYTHON_DIR], capture_output=True,
                             text=True, check=True).stdout.splitlines()
        self.assertEqual(len(out), 3, out)
        for line in out:
            self.assertTrue(line.startswith("refused:"), line)
            self.assertIn("install cloudpickle (Debian: python3-cloudpickle)", line)


class ChunkingTest(unittest.TestCase):
    def test_a_fixed_chunksize_is_kept(self):
        sizer = _chunking.ChunkSizer(total=10000, chunksize=1)
        self.assertEqual(sizer.next_size(8), 1)

    def test_a_known_length_is_spread_over_four_chunks_per_slot_at_most_1024(self):
        self.assertEqual(_chunking.ChunkSizer(total=10000).next_size(4), 625)
        self.assertEqual(_chunking.ChunkSizer(total=10**7).next_size(4), 1024)
        self.assertEqual(_chunking.ChunkSizer(total=3).next_size(4), 1)

    def test_an_unknown_length_starts_at_one_and_grows_with_the_time_measured(self):
        clock = FakeClock()
        sizer = _chunking.ChunkSizer(clock=clock)
        self.assertEqual(sizer.next_size(4), 1)
        sizer.record(1, 4)
        clock.now += 0.001
        sizer.record(1, 4)  # 4 slots, 1 ms per result: 4 ms of slot time per item
        self.assertEqual(sizer.next_size(4), 12)
        clock.now += 0.3
        sizer.record(3000, 4)  # faster per item now: larger chunks
        self.assertGreater(sizer.next_size(4), 12)

    def test_slow_items_make_smaller_chunks_than_the_length_alone(self):
        clock = FakeClock()
        sizer = _chunking.ChunkSizer(total=10000, clock=clock)
        sizer.record(1, 4)
        clock.now += 0.5
        sizer.record(1, 4)  # 2 s of slot time per item: one item is over 50 ms
        self.assertEqual(sizer.next_size(4), 1)

    def test_the_window_keeps_four_chunks_per_slot_and_at_least_64(self):
        self.assertEqual(_chunking.window(0, 1), 64)
        self.assertEqual(_chunking.window(4, 100), 1600)
        self.assertEqual(_chunking.known_length([range(5), [1, 2, 3]]), 3)
        self.assertIsNone(_chunking.known_length([range(5), iter([1])]))


class AgentCommandTest(unittest.TestCase):
    def test_argv_carries_the_options_in_the_documented_order(self):
        argv = _client.agent_argv("/bin/ferry", config="f.toml", nodes=2, concurrency=3, provider="local",
                                  env={"A": "1", "B": "x=y"}, retries=2)
        self.assertEqual(argv, ["/bin/ferry", "--config", "f.toml", "api", "--nodes", "2", "--concurrency", "3",
                                "--retries", "2", "--provider", "local", "--env", "A", "--env", "B"])
        with self.assertRaises(ValueError):
            _client.agent_argv("/bin/ferry", nodes=0)

    def test_a_missing_binary_names_ferry_bin_and_path(self):
        with self.assertRaises(ferry.FerryError) as caught:
            _client.find_agent_binary({"PATH": "/nonexistent"})
        self.assertIn("FERRY_BIN", str(caught.exception))
        self.assertIn("PATH", str(caught.exception))
        with self.assertRaises(ferry.FerryError) as caught:
            _client.find_agent_binary({"FERRY_BIN": "/nonexistent/ferry"})
        self.assertIn("/nonexistent/ferry", str(caught.exception))

    def test_the_agent_packs_this_interpreter(self):
        env = _client.agent_environ({"X": "1"}, task_env={"B": "x=y"})
        self.assertEqual(env["FERRY_PACKAGING_PYTHON"], sys.executable)
        self.assertEqual(env["X"], "1")
        self.assertEqual(env["B"], "x=y")  # the value, which the argv never holds


class OutputTest(unittest.TestCase):
    def test_lines_are_prefixed_and_partial_lines_wait_for_their_end(self):
        out = io.StringIO()
        router = _output.OutputRouter(capture=False, stream=out)
        router.feed(7, 12, "node-1", 1, b"loss 0.3\npart", None)
        router.feed(8, 13, "node-2", 1, b"other\n", None)
        router.feed(7, 12, "node-1", 1, b"ial", None)
        router.end_task(7, 12)
        self.assertEqual(out.getvalue(), "[node-1 #12] loss 0.3\n[node-2 #13] other\n[node-1 #12] partial\n")

    def test_captured_output_is_kept_on_the_future(self):
        class F:
            output = ""
        future = F()
        router = _output.OutputRouter(capture=True, stream=io.StringIO())
        router.feed(1, 0, "n", 1, b"a\nb", future)
        self.assertEqual(future.output, "a\nb")


class ProgressTest(unittest.TestCase):
    def test_the_line_shows_done_failed_retried_rate_and_eta(self):
        clock = FakeClock()
        out = io.StringIO()
        progress = _progress.Progress(True, stream=out, clock=clock)
        progress.add_total(100)
        clock.now += 10
        progress.count(done=36)
        progress.count(failed=2, retried=3)  # within 0.1 s: not redrawn
        self.assertEqual(progress.line(clock.now), "ferry  38/100 done, 2 failed, 3 retried  3.8 tasks/s  ETA 16 s")
        self.assertEqual(out.getvalue().count("\r"), 1)
        progress.close()
        self.assertTrue(out.getvalue().endswith("\r"))


if __name__ == "__main__":
    unittest.main()
