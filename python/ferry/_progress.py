"""One redrawn line on stderr: done, failed and retried tasks, the rate and the ETA."""

import sys
import threading
import time

REDRAWS_PER_SECOND = 10


def enabled(progress, stream=None):
    """progress=None: on when stderr is a terminal."""
    if progress is not None:
        return bool(progress)
    stream = stream or sys.stderr
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


class Progress:
    def __init__(self, on, stream=None, clock=time.monotonic):
        self._on = on
        self._stream = stream
        self._clock = clock
        self._lock = threading.Lock()
        self._start = clock()
        self._last_draw = None
        self._width = 0
        self.total = 0
        self.total_known = True
        self.done = 0
        self.failed = 0
        self.retried = 0

    def add_total(self, n):
        """n more tasks expected; None: a stream of unknown length."""
        with self._lock:
            if n is None:
                self.total_known = False
            else:
                self.total += n

    def count(self, done=0, failed=0, retried=0):
        with self._lock:
            self.done += done
            self.failed += failed
            self.retried += retried
            if self._on:
                self._draw(force=False)

    def line(self, now):
        finished = self.done + self.failed
        elapsed = max(now - self._start, 1e-9)
        rate = finished / elapsed
        text = "ferry  %d" % finished
        if self.total_known and self.total:
            text += "/%d" % self.total
        text += " done, %d failed, %d retried  %.1f tasks/s" % (self.failed, self.retried, rate)
        if self.total_known and self.total and rate > 0:
            text += "  ETA %d s" % round(max(self.total - finished, 0) / rate)
        return text

    def _draw(self, force):
        now = self._clock()
        if not force and self._last_draw is not None and now - self._last_draw < 1.0 / REDRAWS_PER_SECOND:
            return
        self._last_draw = now
        text = self.line(now)
        stream = self._stream or sys.stderr
        stream.write("\r" + text + " " * max(self._width - len(text), 0))
        stream.flush()
        self._width = len(text)

    def clear(self):
        """Erase the line for other text (a task's output); the next count draws it again below."""
        with self._lock:
            if self._on and self._width:
                stream = self._stream or sys.stderr
                stream.write("\r" + " " * self._width + "\r")
                self._width = 0
                self._last_draw = None

    def close(self):
        """Clear the line."""
        with self._lock:
            if self._on and self._width:
                stream = self._stream or sys.stderr
                stream.write("\r" + " " * self._width + "\r")
                stream.flush()
                self._width = 0
            self._on = False
