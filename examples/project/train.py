"""`ferry run -- python3 train.py`: runs on a node with this project and its venv's packages in place.

It reports where it runs and what it imported, and, when eliot is installed on the node and ferry set
FERRY_TASK_ID, logs its work as an action that continues ferry's trace (to $FERRY_TRACE_DIR, default /tmp).
"""
import os
import platform
import sys

import tabulate

from app import stats


def work():
    values = [float(i * i % 17) for i in range(1, 1001)]
    print(stats.table([stats.summary(values)]))
    print(f"node {platform.node()}: python {platform.python_version()}, tabulate {tabulate.__version__} "
          f"from {os.path.dirname(tabulate.__file__)}")
    print(f"workspace: {os.getcwd()}")


def main():
    task_id = os.environ.get("FERRY_TASK_ID")
    try:
        import eliot
    except ImportError:
        eliot = None
    if eliot is None or not task_id:
        work()
        return 0
    trace_dir = os.environ.get("FERRY_TRACE_DIR", "/tmp")
    path = os.path.join(trace_dir, f"train-{os.getpid()}.jsonl")
    with open(path, "ab") as out:
        eliot.to_file(out)
        with eliot.Action.continue_task(task_id=task_id):
            with eliot.start_action(action_type="example:train"):
                work()
    print(f"trace: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
