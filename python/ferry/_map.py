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
    Ordered, only out-of-order results within the window wait here. The first
    window is sent at once, so the work starts before the first next().
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
        self._in_flight = collections.deque()  # ordered: futures in input order
        self._outstanding = set()  # unordered: futures not yet yielded
        self._completed = queue.SimpleQueue()  # unordered: futures as they complete
        self._count = 0
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
            items = executor._new_items([(args, {}) for args in batch], self._next_index)
            self._next_index += len(batch)
            if not self._ordered:
                for item in items:
                    self._outstanding.add(item.future)
                    item.future.add_done_callback(self._completed.put)
            items[0].future.add_done_callback(
                lambda _f, n=len(batch): self._sizer.record(n, executor.slots))
            executor._send(self._fn, items, chunk=len(batch) > 1)
            if self._ordered:
                self._in_flight.extend(item.future for item in items)
            self._count += len(batch)

    def _remaining(self):
        if self._deadline is None:
            return None
        return max(0.0, self._deadline - time.monotonic())

    def __next__(self):
        if self._closed:
            raise StopIteration
        try:
            self._fill()
            if self._count == 0:
                self.close()
                raise StopIteration
            if self._ordered:
                future = self._in_flight.popleft()
                self._count -= 1
                exc = future.exception(self._remaining())
            else:
                try:
                    future = self._completed.get(timeout=self._remaining())
                except queue.Empty:
                    raise concurrent.futures.TimeoutError() from None
                self._count -= 1
                self._outstanding.discard(future)
                exc = None if future.cancelled() else future.exception()
        except KeyboardInterrupt:
            self._executor._interrupt()
            self._closed = True
            raise
        except BaseException:
            self.close()
            raise
        if exc is None:
            return future.result()
        if self._return_exceptions:
            return exc
        self.close()
        raise exc

    def close(self):
        """Stop: what is still in flight is cancelled (and dropped at the agent)."""
        if self._closed:
            return
        self._closed = True
        self._exhausted = True
        while self._in_flight:
            self._in_flight.popleft().cancel()
        for future in list(self._outstanding):
            future.cancel()
        self._outstanding.clear()
        self._count = 0

    def __del__(self):
        # An abandoned map does not keep its window running.
        try:
            self.close()
        except Exception:
            pass
