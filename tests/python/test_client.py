"""The client's pieces (pickling, chunk sizing, the window, argv, output) and, through the
relay in place of `ferry api`, the Executor end to end on real workers."""

import concurrent.futures
import io
import os
import pickle
import subprocess
import sys
import textwrap
import unittest

from support import PYTHON_DIR, REPO  # noqa: F401  (sets sys.path)

import ferry
from ferry import _chunking, _client, _output, _pickling, _progress


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


RELAY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "relay_agent.py")


class MyError(Exception):
    pass


class EndToEndTest(unittest.TestCase):
    """The Executor through the relay (tests/python/relay_agent.py) on two real workers."""

    def setUp(self):
        self.bin_dir = self.enterContext_tmp()
        binary = os.path.join(self.bin_dir, "ferry")
        with open(binary, "w") as f:
            f.write("#!/bin/sh\nexec %s %s\n" % (sys.executable, RELAY))
        os.chmod(binary, 0o755)
        old = os.environ.get("FERRY_BIN")
        os.environ["FERRY_BIN"] = binary
        self.addCleanup(lambda: os.environ.pop("FERRY_BIN") if old is None else os.environ.update(FERRY_BIN=old))
        # The workers import this module by name, as nodes import the shipped workspace.
        old_path = os.environ.get("PYTHONPATH")
        os.environ["PYTHONPATH"] = os.path.dirname(os.path.abspath(__file__))
        self.addCleanup(lambda: os.environ.pop("PYTHONPATH") if old_path is None
                        else os.environ.update(PYTHONPATH=old_path))

    def enterContext_tmp(self):
        import tempfile
        d = tempfile.TemporaryDirectory()
        self.addCleanup(d.cleanup)
        return d.name

    def test_map_submit_and_as_completed(self):
        offset = 3
        with ferry.Executor(progress=False) as ex:
            self.assertEqual(list(ex.map(lambda x: x * x + offset, range(200))),
                             [x * x + offset for x in range(200)])
            futures = [ex.submit(pow, 2, i) for i in range(10)]
            self.assertEqual(sorted(f.result() for f in concurrent.futures.as_completed(futures)),
                             [2 ** i for i in range(10)])

    def test_the_users_own_exception_class_with_the_remote_traceback(self):
        class LocalError(Exception):
            pass

        def fails(x):
            raise LocalError("no %d" % x)

        with ferry.Executor(progress=False) as ex:
            with self.assertRaises(LocalError) as caught:
                ex.submit(fails, 4).result()
        self.assertIsInstance(caught.exception.__cause__, ferry.RemoteTraceback)
        self.assertIn("in fails", str(caught.exception.__cause__))

    def test_ferry_map_unordered_with_exceptions_returned(self):
        def f(x):
            if x % 7 == 0:
                raise MyError(x)
            return x
        got = list(ferry.map(f, iter(range(500)), ordered=False, return_exceptions=True, progress=False))
        self.assertEqual(len(got), 500)
        self.assertEqual(sorted(g for g in got if not isinstance(g, MyError)),
                         [x for x in range(500) if x % 7])
        self.assertEqual(sum(isinstance(g, MyError) for g in got), len(range(0, 500, 7)))

    def test_retry_on_sends_the_failed_item_again(self):
        marker = os.path.join(self.bin_dir, "tried")

        def flaky(path):
            if not os.path.exists(path):
                open(path, "w").close()
                raise MyError("first time")
            return "second time"

        with ferry.Executor(retries=1, retry_on=(MyError,), progress=False) as ex:
            self.assertEqual(ex.submit(flaky, marker).result(), "second time")

    def test_an_endless_input_is_read_only_a_window_ahead(self):
        pulled = []

        def endless():
            n = 0
            while True:
                pulled.append(n)
                yield n
                n += 1

        run = ferry.map(abs, endless(), progress=False, chunksize=1)
        self.assertEqual([next(run) for _ in range(100)], list(range(100)))
        run.close()
        # 2 slots, chunks of 1: at most 64 items in flight beyond those yielded.
        self.assertLessEqual(len(pulled), 100 + _chunking.window(2, 1) + 1)

    def test_a_fatal_agent_error_fails_the_executor_with_its_text(self):
        os.environ["FERRY_TEST_FAIL"] = "storage: bucket nope does not exist"
        self.addCleanup(os.environ.pop, "FERRY_TEST_FAIL")
        ex = ferry.Executor(progress=False)
        future = ex.submit(pow, 2, 2)
        with self.assertRaises(ferry.FerryError) as caught:
            future.result()
        self.assertIn("bucket nope", str(caught.exception))
        ex.shutdown()


if __name__ == "__main__":
    unittest.main()
