"""ferry's Python API on two nodes: an Executor, ferry.map and a @ferry.function.

Run it from this directory with the ferry binary built and storage set (scripts/demo.sh does both):
    FERRY_BIN=../../build/agent/ferry PYTHONPATH=../../python /usr/bin/python3 main.py
"""
import concurrent.futures

import ferry
import shapes


@ferry.function(nodes=2)
def describe(values):
    # Runs on a node: its print arrives here on stderr, prefixed with the node and the task.
    print("describing %d values" % len(values))
    return "min %d, max %d, mean %.1f" % (min(values), max(values), sum(values) / len(values))


def main():
    with ferry.Executor(nodes=2) as ex:
        # shapes.area is pickled by reference: the node imports it from the shipped workspace.
        print("areas:", list(ex.map(shapes.area, range(1, 9))))
        futures = [ex.submit(pow, 2, n) for n in range(8)]
        done = sorted(f.result() for f in concurrent.futures.as_completed(futures))
        print("powers of two, as they completed:", done)
        try:
            ex.submit(shapes.area, 1000).result()
        except shapes.TooLarge as e:  # the node's exception, as its own class
            print("caught here:", type(e).__name__, "-", e)

    # A lambda with a closure is pickled by value; the generator yields results in input order.
    offset = 1000
    print("ferry.map:", list(ferry.map(lambda x: x + offset, range(5), nodes=2)))

    print("describe.remote:", describe.remote([3, 1, 4, 1, 5, 9, 2, 6]))


if __name__ == "__main__":
    main()
