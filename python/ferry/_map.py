"""A map over an executor: lazy input, a bounded window of items in flight, ordered or as completed."""

import collections
import concurrent.futures
import itertools
import queue
import time

from ._chunking import ChunkSizer, known_length, window


class MapRun:
    """The iterator behind Executor.map, ferry.map and RemoteFunction.map.

    The input is read only as far as the window allows, and a result is
    released once yielded, so a stream of any length runs in bounded memory.
    Each chunk of items is one task with one future, whose value is the list
    of its items' outcomes (Executor._send_collected): a map holds a future per
    chunk in flight, not per item. Ordered, only out-of-order chunks within the
    window wait here. The first window is sent at once, so the work starts
    before the first next(). An item whose exception is one of the executor's
    retry_on types is sent again on its own, up to its retries.
    """

    def __init__(self, executor, fn, iterables, ordered=True, return_exceptions=False, chunksize=None,
                 timeout=None):
        if not iterables:
            raise TypeError("map() needs at least one iterable")
        self._executor = executor
        self._fn = fn
        self._ordered = ordered
        self._return_exceptions = return_exceptions
        self._deadline = None if timeout is None else time.monotonic() + timeout
        total = known_length(iterables)
        self._sizer = ChunkSizer(total, chunksize)
        self._inputs = zip(*iterables)
        self._exhausted = False
        self._next_index = 0
        self._keep_args = bool(executor._retry_on) and executor._retries > 0
        self._in_flight = collections.deque()  # ordered: (future, args of its items or None), in input order
        self._outstanding = set()  # unordered: chunk futures not yet taken
        self._completed = queue.SimpleQueue()  # unordered: chunk futures as they complete
        self._args = {}  # unordered: future -> the args of its items, for retry_on
        self._ready = collections.deque()  # outcomes of the chunk being yielded, with their args
        self._count = 0  # items in flight or ready, not yet yielded
        self._closed = False
        executor._progress.add_total(total)
        self._fill()

    def __iter__(self):
        return self

    def _fill(self):
        executor = self._executor
        while not self._exhausted and self._count < window(executor.slots, self._sizer.current):
            n = self._sizer.next_size(executor.slots)
            batch = list(itertools.islice(self._inputs, n))
            if not batch:
                self._exhausted = True
                break
            future = executor._send_collected(self._fn, [(args, {}) for args in batch], self._next_index)
            self._next_index += len(batch)
            future.add_done_callback(lambda _f, n=len(batch): self._sizer.record(n, executor.slots))
            kept = batch if self._keep_args else None
            if self._ordered:
                self._in_flight.append((future, kept))
            else:
                self._outstanding.add(future)
                if kept is not None:
                    self._args[future] = kept
                future.add_done_callback(self._completed.put)
            self._count += len(batch)

    def _remaining(self):
        if self._deadline is None:
            return None
        return max(0.0, self._deadline - time.monotonic())

    def _next_chunk(self):
        """The next chunk's outcomes into _ready: the next in input order, or the next to complete."""
        if self._ordered:
            future, kept = self._in_flight.popleft()
            outcomes = future.result(self._remaining())
        else:
            try:
                future = self._completed.get(timeout=self._remaining())
            except queue.Empty:
                raise concurrent.futures.TimeoutError() from None
            self._outstanding.discard(future)
            kept = self._args.pop(future, None)
            outcomes = future.result() if not future.cancelled() else [(False, concurrent.futures.CancelledError())]
        for i, outcome in enumerate(outcomes):
            self._ready.append((outcome, kept[i] if kept is not None else None))

    def _retried(self, exc, args):
        """The item's outcome after retry_on: sent again on its own while its retries last."""
        executor = self._executor
        retries = executor._retries
        while args is not None and retries > 0 and isinstance(exc, executor._retry_on):
            retries -= 1
            # Counted as failed when its chunk came back: it is retried instead, and counted again once
            # its new attempt ends (submit counts a task of its own: the total stays the map's).
            executor._progress.count(retried=1, failed=-1)
            future = executor._submit(self._fn, args, {}, 0)  # its retries are counted here
            executor._progress.add_total(-1)
            exc = future.exception(self._remaining())
            if exc is None:
                return True, future.result()
        return False, exc

    def __next__(self):
        if self._closed:
            raise StopIteration
        try:
            self._fill()
            if self._count == 0:
                self.close()
                raise StopIteration
            if not self._ready:
                self._next_chunk()
            (ok, value), args = self._ready.popleft()
            self._count -= 1
            if not ok:
                ok, value = self._retried(value, args)
        except KeyboardInterrupt:
            self._executor._interrupt()
            self._closed = True
            raise
        except BaseException:
            self.close()
            raise
        if ok:
            return value
        if self._return_exceptions:
            return value
        self.close()
        raise value

    def close(self):
        """Stop: what is still in flight is cancelled (and dropped at the agent)."""
        if self._closed:
            return
        self._closed = True
        self._exhausted = True
        while self._in_flight:
            self._in_flight.popleft()[0].cancel()
        for future in list(self._outstanding):
            future.cancel()
        self._outstanding.clear()
        self._args.clear()
        self._ready.clear()
        self._count = 0

    def __del__(self):
        # An abandoned map does not keep its window running.
        try:
            self.close()
        except Exception:
            pass
