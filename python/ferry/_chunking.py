"""How many items go in one task frame, and how many may be in flight.

A chunk is one round trip for many items, so small tasks cost a frame each
only once per chunk. Too large a chunk leaves slots idle at the end of a map,
so the size aims at chunks of about TARGET_SECONDS of work.
"""

import threading
import time

MAX_CHUNK = 1024
TARGET_SECONDS = 0.05
CHUNKS_PER_SLOT = 4
MIN_WINDOW = 64
# The per-item time is re-measured over windows of at least this long.
MEASURE_SECONDS = 0.25


def known_length(iterables):
    """The number of items zip(*iterables) gives, when every iterable has a len()."""
    try:
        return min(len(it) for it in iterables)
    except TypeError:
        return None


def window(slots, chunksize):
    """Items in flight at most: enough to keep every slot busy with a few chunks queued."""
    return max(MIN_WINDOW, CHUNKS_PER_SLOT * max(slots, 1) * chunksize)


class ChunkSizer:
    """Chunk sizes for one map: fixed, or chosen from its length, its slots and the time measured.

    With a known length: about total / (4 * slots), at most MAX_CHUNK, made
    smaller when the measured time per item says a chunk would take longer
    than TARGET_SECONDS. With an unknown length: from 1, growing with the time
    measured. The per-item time is the slots' time spent per item completed:
    slots * elapsed / items, over a window that moves forward.
    """

    def __init__(self, total=None, chunksize=None, clock=time.monotonic):
        if chunksize is not None and chunksize < 1:
            raise ValueError("chunksize must be at least 1, not %r" % (chunksize,))
        self._total = total
        self._fixed = chunksize
        self._clock = clock
        self._lock = threading.Lock()
        self._per_item = None
        self._window_start = None
        self._window_items = 0
        self.current = chunksize or 1

    def next_size(self, slots):
        if self._fixed is not None:
            return self._fixed
        with self._lock:
            per_item = self._per_item
        if per_item is None:
            by_time = None
        else:
            by_time = max(1, int(TARGET_SECONDS / per_item)) if per_item > 0 else MAX_CHUNK
        if self._total is not None and slots > 0:
            by_length = max(1, -(-self._total // (CHUNKS_PER_SLOT * slots)))
            size = by_length if by_time is None else min(by_length, by_time)
        else:
            size = 1 if by_time is None else by_time  # unknown: start at one, grow when measured
        self.current = min(MAX_CHUNK, size)
        return self.current

    def record(self, items, slots):
        """`items` items completed now, with `slots` slots working."""
        now = self._clock()
        with self._lock:
            if self._window_start is None:  # the first result starts the clock
                self._window_start = now
                return
            self._window_items += items
            elapsed = now - self._window_start
            if elapsed <= 0:
                return
            if self._per_item is None or elapsed >= MEASURE_SECONDS:
                self._per_item = elapsed * max(slots, 1) / self._window_items
            if elapsed >= MEASURE_SECONDS:
                self._window_start = now
                self._window_items = 0
