"""`ferry map --range 1..20 -- python3 square.py {}`: one task per input."""
import sys

from app import stats

n = int(sys.argv[1])
print(stats.table([{"input": n, "square": n * n}]))
