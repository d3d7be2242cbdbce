#!/usr/bin/env python3
"""Moving one large file through the same moto_server with ferry, the aws CLI and curl, side by side.

curl is the server's own ceiling: one plain PUT up, one presigned GET down. Each transfer runs as a
child process; its wall time and peak RSS (wait4's ru_maxrss) are measured the same way for all three.
Usage: bench_s3.py [--mib 500] [--rounds 2] [--ferry build/agent/ferry]
"""
import argparse
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def timed(argv, env):
    """Runs argv; returns (seconds, peak RSS in MiB). Raises on failure."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - start
    err = proc.stderr.read().decode()
    proc.stderr.close()
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"{argv[0]} failed: {err}")
    return seconds, usage.ru_maxrss / 1024


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--mib", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--ferry", default=os.path.join(os.path.dirname(__file__), "..", "build", "agent", "ferry"))
    args = parser.parse_args()

    work = tempfile.mkdtemp(prefix="ferry-bench-s3-")
    port = free_port()
    endpoint = f"http://127.0.0.1:{port}"
    moto = subprocess.Popen(["moto_server", "-H", "127.0.0.1", "-p", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    env = dict(os.environ, AWS_ACCESS_KEY_ID="bench", AWS_SECRET_ACCESS_KEY="bench", AWS_DEFAULT_REGION="us-east-1",
               AWS_ENDPOINT_URL=endpoint, AWS_CONFIG_FILE="/dev/null", AWS_SHARED_CREDENTIALS_FILE="/dev/null",
               XDG_STATE_HOME=os.path.join(work, "state"))
    try:
        for _ in range(100):
            try:
                urllib.request.urlopen(endpoint, timeout=1)
                break
            except Exception:
                time.sleep(0.1)
        subprocess.run(["aws", "s3", "mb", "s3://bench"], env=env, check=True, stdout=subprocess.DEVNULL)
        source = os.path.join(work, "source")
        with open(source, "wb") as f:
            for _ in range(args.mib):
                f.write(os.urandom(1 << 20))

        def rm(key):
            subprocess.run(["aws", "s3", "rm", f"s3://bench/{key}"], env=env, stdout=subprocess.DEVNULL)

        tools = {
            "ferry": (lambda key: [args.ferry, "-q", "storage", "cp", source, f"s3://bench/{key}"],
                      lambda key, out: [args.ferry, "-q", "storage", "cp", f"s3://bench/{key}", out]),
            "aws": (lambda key: ["aws", "s3", "cp", "--only-show-errors", source, f"s3://bench/{key}"],
                    lambda key, out: ["aws", "s3", "cp", "--only-show-errors", f"s3://bench/{key}", out]),
            "curl": (lambda key: ["curl", "-sSf", "-T", source, f"{endpoint}/bench/{key}"],
                     lambda key, out: ["curl", "-sSf", "-o", out,
                                       subprocess.run(["aws", "s3", "presign", f"s3://bench/{key}"], env=env,
                                                      check=True, capture_output=True, text=True).stdout.strip()]),
        }
        best = {}
        for round_ in range(args.rounds):
            for name, (up, down) in tools.items():
                key = f"{name}-{round_}"
                out = os.path.join(work, f"out-{name}")
                t_up, rss_up = timed(up(key), env)
                t_down, rss_down = timed(down(key, out), env)
                if not filecmp(source, out):
                    raise RuntimeError(f"{name}: downloaded bytes differ")
                os.unlink(out)
                rm(key)
                b = best.setdefault(name, [t_up, rss_up, t_down, rss_down])
                best[name] = [min(b[0], t_up), max(b[1], rss_up), min(b[2], t_down), max(b[3], rss_down)]

        print(f"{args.mib} MiB through one moto_server, best of {args.rounds} rounds (peak RSS over all rounds):")
        print(f"{'tool':<6} {'up s':>7} {'up MB/s':>8} {'up RSS':>8} {'down s':>7} {'down MB/s':>9} {'down RSS':>9}")
        mb = args.mib * 1.048576
        for name, (tu, ru, td, rd) in best.items():
            print(f"{name:<6} {tu:7.2f} {mb / tu:8.0f} {ru:6.0f}MB {td:7.2f} {mb / td:9.0f} {rd:7.0f}MB")
        f, a, c = best["ferry"], best["aws"], best["curl"]
        print(f"ferry vs aws:  up {a[0] / f[0]:.2f}x faster, down {a[2] / f[2]:.2f}x faster (goal >= 2x); "
              f"RSS {max(f[1], f[3]) / max(a[1], a[3]):.2f} of aws's (goal <= 0.33)")
        print(f"ferry vs curl: up {f[0] / c[0]:.2f}x curl's time, down {f[2] / c[2]:.2f}x (goal <= 1.25x)")
    finally:
        os.killpg(moto.pid, 9)
        moto.wait()
        shutil.rmtree(work, ignore_errors=True)


def filecmp(a, b):
    with open(a, "rb") as fa, open(b, "rb") as fb:
        while True:
            x, y = fa.read(1 << 20), fb.read(1 << 20)
            if x != y:
                return False
            if not x:
                return True


if __name__ == "__main__":
    sys.exit(main())
