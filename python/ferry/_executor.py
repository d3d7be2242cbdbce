"""ferry.Executor: a concurrent.futures.Executor whose tasks run on ferry's nodes."""

import atexit
import concurrent.futures
import itertools
import json
import pickle
import threading
import weakref

from . import _client, _pickling
from ._errors import FerryError, TaskLostError
from ._output import OutputRouter
from ._progress import Progress, enabled
from ._worker import FLAG_CAPTURE, FLAG_CHUNK, OUTCOME_EXCEPTION, OUTCOME_LOST, OUTCOME_VALUE, pack_task

_live_executors = weakref.WeakSet()


@atexit.register
def _shutdown_at_exit():
    # The agent closes its trace and releases its nodes when its stdin ends.
    for executor in list(_live_executors):
        executor.shutdown(wait=True)


class Future(concurrent.futures.Future):
    """A concurrent.futures.Future that knows its task: cancel() drops it at the agent,
    Ctrl-C while waiting on it stops the agent, and `output` holds the captured output."""

    def __init__(self, executor):
        super().__init__()
        self.output = ""
        self._executor = executor
        self._task = None

    def cancel(self):
        cancelled = _cancel(self)
        if cancelled and self._task is not None:
            self._executor._item_cancelled(self._task)
        return cancelled

    def result(self, timeout=None):
        try:
            return super().result(timeout)
        except KeyboardInterrupt:
            self._executor._interrupt()
            raise

    def exception(self, timeout=None):
        try:
            return super().exception(timeout)
        except KeyboardInterrupt:
            self._executor._interrupt()
            raise


class _Item:
    """One call: its future and what is needed to send it again (retry_on)."""

    __slots__ = ("future", "index", "args", "kwargs", "retries_left")

    def __init__(self, future, index, args, kwargs, retries_left):
        self.future, self.index, self.args, self.kwargs = future, index, args, kwargs
        self.retries_left = retries_left


class _Task:
    """One T frame: a call, or a chunk of calls.

    `collected`: a map's chunk of `size` calls with one future for all of them, whose value is the list
    of their outcomes, each (True, value) or (False, exception): a future per item would cost a
    million-item map its memory."""

    __slots__ = ("task_id", "fn", "items", "chunk", "collected", "size")

    def __init__(self, task_id, fn, items, chunk, collected=False, size=1):
        self.task_id, self.fn, self.items, self.chunk = task_id, fn, items, chunk
        self.collected, self.size = collected, size

    @property
    def label(self):
        # Output is per task frame: a chunk's lines carry its first item's index.
        return self.items[0].index


def _cancel(future):
    """Cancel a future that is not done, and tell concurrent.futures.wait() and as_completed(), which count
    only futures an executor notified (as the standard ones do when a cancelled item comes up)."""
    cancelled = concurrent.futures.Future.cancel(future)
    with future._condition:
        unnotified = future._state == concurrent.futures._base.CANCELLED
    if unnotified:
        future.set_running_or_notify_cancel()
    return cancelled


def _settle(future, value=None, exc=None):
    """Resolve a future unless it was cancelled meanwhile."""
    if future.done():
        return False
    try:
        if exc is None:
            future.set_result(value)
        else:
            future.set_exception(exc)
    except concurrent.futures.InvalidStateError:
        return False
    return True


class Executor(concurrent.futures.Executor):
    """Runs functions on ferry's nodes through one `ferry api` agent, started at once."""

    def __init__(self, nodes=None, concurrency=None, retries=0, env=None, config=None, retry_on=(),
                 capture_output=False, provider=None, progress=None):
        if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
            raise ValueError("retries must be a non-negative integer, not %r" % (retries,))
        if isinstance(retry_on, type):
            retry_on = (retry_on,)
        self._retry_on = tuple(retry_on)
        self._retries = retries
        self._capture = bool(capture_output)
        self._lock = threading.RLock()
        self._tasks = {}
        self._task_ids = itertools.count(1)
        self._submit_index = itertools.count(0)
        self._functions = _pickling.FunctionTable()
        self._arguments = _pickling.ArgumentPacker()
        self._progress = Progress(enabled(progress))
        self._output = OutputRouter(self._capture, before_write=self._progress.clear)
        self._slots = 0
        self._nodes = 0
        self._failure = None
        self._shut_down = False
        self._interrupted = False
        argv = _client.agent_argv(_client.find_agent_binary(), config, nodes, concurrency, provider, env, retries)
        self._agent = _client.AgentConnection(argv, _client.agent_environ(task_env=env), self._on_frame,
                                              self._on_exit)
        _live_executors.add(self)

    # ------------------------------------------------------------ submitting

    @property
    def slots(self):
        """Tasks that can run at once, as the agent last said (0 until its nodes are up)."""
        return self._slots

    def submit(self, fn, /, *args, **kwargs):
        return self._submit(fn, args, kwargs, self._retries)

    def _submit(self, fn, args, kwargs, retries_left):
        future = Future(self)
        self._progress.add_total(1)
        self._send(fn, [_Item(future, next(self._submit_index), args, kwargs, retries_left)], chunk=False)
        return future

    def map(self, fn, *iterables, timeout=None, chunksize=None):
        """Results in input order, like the standard executors' map; the first exception is raised when reached."""
        from ._map import MapRun
        return MapRun(self, fn, iterables, ordered=True, return_exceptions=False, chunksize=chunksize,
                      timeout=timeout)

    def _send_collected(self, fn, calls, first_index):
        """A map's chunk of calls ((args, kwargs) each) as one task with one future (see _Task)."""
        future = Future(self)
        item = _Item(future, first_index, None, None, 0)
        if len(calls) == 1:
            args, kwargs = calls[0]
            work, top_level = (args, kwargs), list(itertools.chain(args, kwargs.values()))
        else:
            work = calls
            top_level = [a for args, kwargs in calls for a in itertools.chain(args, kwargs.values())]
        self._send(fn, [item], chunk=len(calls) > 1, work=work, top_level=top_level, collected=True,
                   size=len(calls))
        return future

    def _send(self, fn, items, chunk, work=None, top_level=None, collected=False, size=1):
        """Pickle and queue one task frame (with the F and B frames it needs first)."""
        if work is not None:
            pass  # the caller's (_send_collected)
        elif chunk:
            work = [(item.args, item.kwargs) for item in items]
            top_level = [a for item in items for a in itertools.chain(item.args, item.kwargs.values())]
        else:
            item = items[0]
            work = (item.args, item.kwargs)
            top_level = list(itertools.chain(item.args, item.kwargs.values()))
        flags = (FLAG_CHUNK if chunk else 0) | (FLAG_CAPTURE if self._capture else 0)
        with self._lock:
            # Under the lock: ids increase in the order the frames are queued,
            # and a function's F frame precedes every task that uses it.
            if self._shut_down:
                raise RuntimeError("cannot schedule new futures after shutdown")
            if self._failure is not None:
                raise self._failure
            # The arguments first: a function is taken as sent only once its task can go too.
            data, blob_ids, new_blobs = self._arguments.pack(work, top_level)
            fn_id, fn_pickle = self._functions.lookup(fn)
            if fn_pickle is not None:
                self._agent.send("F", fn_id, fn_pickle)
            for blob_id, blob in new_blobs:
                self._agent.send("B", blob_id, blob)
            task = _Task(next(self._task_ids), fn, items, chunk, collected, size)
            self._tasks[task.task_id] = task
            for item in items:
                item.future._task = task
            self._agent.send("T", task.task_id, pack_task(fn_id, flags, blob_ids, data))
        return task

    def _item_cancelled(self, task):
        """A future was cancelled: drop its task at the agent once none of its items is wanted."""
        with self._lock:
            if self._tasks.get(task.task_id) is not task:
                return
            if not all(item.future.cancelled() for item in task.items):
                return
            del self._tasks[task.task_id]
            if not self._shut_down or not self._agent.exited():
                self._agent.send("C", task.task_id)

    # ------------------------------------------------------------ frames from the agent

    def _on_frame(self, kind, frame_id, payload):
        if kind == "R":
            self._on_result(frame_id, payload)
        elif kind == "O":
            self._on_output(frame_id, payload)
        elif kind == "S":
            self._on_status(payload)

    def _on_result(self, task_id, payload):
        with self._lock:
            task = self._tasks.pop(task_id, None)
        if task is None:
            return  # cancelled meanwhile
        self._output.end_task(task_id, task.label)
        outcome, data = payload[0], memoryview(payload)[1:]
        if task.collected:
            self._collect(task, outcome, data)
            return
        if outcome == OUTCOME_LOST:
            error = TaskLostError(bytes(data).decode("utf-8", "replace"))
            for item in task.items:
                self._finish(item, exc=error)
            return
        try:
            loaded = pickle.loads(data)
        except Exception as exc:
            error = FerryError("cannot unpickle the result of task %d here: %s" % (task_id, exc))
            for item in task.items:
                self._finish(item, exc=error)
            return
        if outcome == OUTCOME_EXCEPTION:
            for item in task.items:
                self._finish_exception(task.fn, item, loaded)
        elif task.chunk:
            for item, (item_outcome, value) in zip(task.items, loaded):
                if item_outcome == OUTCOME_VALUE:
                    self._finish(item, value)
                else:
                    self._finish_exception(task.fn, item, value)
        else:
            self._finish(task.items[0], loaded)

    def _collect(self, task, outcome, data):
        """A collected chunk's outcomes, one per call, on its one future."""
        if outcome == OUTCOME_LOST:
            error = TaskLostError(bytes(data).decode("utf-8", "replace"))
            outcomes = [(False, error)] * task.size
        else:
            try:
                loaded = pickle.loads(data)
            except Exception as exc:
                outcome = None
                error = FerryError("cannot unpickle the result of task %d here: %s" % (task.task_id, exc))
                outcomes = [(False, error)] * task.size
            if outcome is None:
                pass
            elif outcome == OUTCOME_EXCEPTION:
                outcomes = [(False, _pickling.exception_from_record(loaded))] * task.size
            elif task.chunk:
                outcomes = [(True, value) if item_outcome == OUTCOME_VALUE
                            else (False, _pickling.exception_from_record(value))
                            for item_outcome, value in loaded]
            else:
                outcomes = [(True, loaded)]
        failed = sum(1 for ok, _ in outcomes if not ok)
        if _settle(task.items[0].future, outcomes):
            self._progress.count(done=len(outcomes) - failed, failed=failed)

    def _finish(self, item, value=None, exc=None):
        if _settle(item.future, value, exc):
            self._progress.count(done=1 if exc is None else 0, failed=0 if exc is None else 1)

    def _finish_exception(self, fn, item, record):
        exc = _pickling.exception_from_record(record)
        if item.retries_left > 0 and self._retry_on and isinstance(exc, self._retry_on) \
                and not item.future.done():
            item.retries_left -= 1
            try:
                self._send(fn, [item], chunk=False)
                self._progress.count(retried=1)
                return
            except (FerryError, RuntimeError):
                pass  # shut down or agent gone: deliver the exception itself
        self._finish(item, exc=exc)

    def _on_output(self, task_id, payload):
        stream_no, n = payload[0], payload[1]
        node = bytes(payload[2:2 + n]).decode("utf-8", "replace")
        with self._lock:
            task = self._tasks.get(task_id)
        if task is None:
            return
        self._output.feed(task_id, task.label, node, stream_no, payload[2 + n:], task.items[0].future)

    def _on_status(self, payload):
        try:
            event = json.loads(payload)
        except ValueError:
            return
        if event.get("event") == "slots":
            with self._lock:
                self._slots = int(event.get("slots", 0))
                self._nodes = int(event.get("nodes", 0))
        elif event.get("event") == "retry":
            self._progress.count(retried=1)

    def _on_exit(self, error):
        """The agent is gone: fail whatever is still waiting for it."""
        with self._lock:
            if error is None and self._tasks:
                error = FerryError("the ferry agent exited with %d tasks unanswered" % len(self._tasks))
            if error is not None and self._failure is None:
                self._failure = error
            tasks, self._tasks = self._tasks, {}
        for task in tasks.values():
            for item in task.items:
                self._finish(item, exc=self._failure)
        self._progress.close()

    # ------------------------------------------------------------ ending

    def shutdown(self, wait=True, *, cancel_futures=False):
        with self._lock:
            first = not self._shut_down
            self._shut_down = True
            if first and cancel_futures:
                for task in list(self._tasks.values()):
                    for item in task.items:
                        _cancel(item.future)
                    del self._tasks[task.task_id]
                    self._agent.send("C", task.task_id)
            if first:
                self._agent.send("E", 0)
                self._agent.close_input()
        if wait:
            try:
                self._agent.wait()
            except KeyboardInterrupt:
                self._interrupt()
                raise
            self._progress.close()
        _live_executors.discard(self)

    def __exit__(self, exc_type, exc, tb):
        if exc_type is not None and issubclass(exc_type, KeyboardInterrupt):
            self._interrupt()
        else:
            self.shutdown(wait=True)
        return False

    def _interrupt(self):
        """Ctrl-C in the user's thread: stop the agent, cancel what is left; the caller re-raises."""
        with self._lock:
            if self._interrupted:
                return
            self._interrupted = True
            self._shut_down = True
            tasks, self._tasks = self._tasks, {}
            if self._failure is None:
                self._failure = FerryError("interrupted")
        for task in tasks.values():
            for item in task.items:
                _cancel(item.future)
        try:
            self._agent.interrupt()
        finally:
            self._progress.close()
            _live_executors.discard(self)
