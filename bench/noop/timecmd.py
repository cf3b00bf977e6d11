#!/usr/bin/env python3
"""Times a command N times with time.perf_counter around subprocess.

usage: timecmd.py N [--pre SHELL_CMD] [--cwd DIR] -- CMD [ARG...]

--pre runs (untimed, through sh) before every timed run, e.g. to drop a
cache. stdout and stderr of CMD go to /dev/null; a non-zero exit aborts.
Prints one line of JSON: {"n": N, "best_ms": .., "median_ms": .., "all_ms": [..]}.
"""
import json
import statistics
import subprocess
import sys
import time


def main(argv):
    n = int(argv[1])
    pre = None
    cwd = None
    i = 2
    while argv[i] != "--":
        if argv[i] == "--pre":
            pre = argv[i + 1]
            i += 2
        elif argv[i] == "--cwd":
            cwd = argv[i + 1]
            i += 2
        else:
            sys.exit(f"timecmd.py: unknown option {argv[i]}")
    cmd = argv[i + 1:]
    times = []
    for _ in range(n):
        if pre:
            subprocess.run(pre, shell=True, cwd=cwd, check=True)
        t0 = time.perf_counter()
        r = subprocess.run(cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        t1 = time.perf_counter()
        if r.returncode != 0:
            sys.exit(f"timecmd.py: {' '.join(cmd)} exited with {r.returncode}")
        times.append((t1 - t0) * 1000.0)
    print(json.dumps({"n": n, "best_ms": min(times), "median_ms": statistics.median(times),
                      "all_ms": [round(t, 3) for t in times]}))


if __name__ == "__main__":
    main(sys.argv)
