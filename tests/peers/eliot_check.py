"""Parse trace files with eliot's own parser and print the trees it rebuilds, as JSON.

Usage: eliot_check.py FILE... -> [{"uuid", "complete", "root": node}], where a node is
{"action_type", "status", "children": [...]} or {"message_type"}.
"""
import json
import sys

from eliot.parse import Parser, WrittenAction


def describe(node):
    if isinstance(node, WrittenAction):
        out = {
            "action_type": node.action_type,
            "status": node.status,
            "children": [describe(c) for c in node.children],
        }
        if node.end_message is not None:
            out["reason"] = node.end_message.contents.get("reason")
        return out
    return {"message_type": node.contents.get("message_type")}


def main(paths):
    messages = []
    for path in paths:
        with open(path) as f:
            messages.extend(json.loads(line) for line in f if line.strip())
    # Each process wrote its own file; time merges them into one history, as eliot-tree does.
    messages.sort(key=lambda m: m["timestamp"])
    tasks = []
    for task in Parser.parse_stream(messages):
        root = task.root()
        tasks.append({"uuid": root.task_uuid, "complete": task.is_complete(), "root": describe(root)})
    json.dump(tasks, sys.stdout)


if __name__ == "__main__":
    main(sys.argv[1:])
