"""Record the wall time of a test-suite run in `bench/ci_times.json` (the BENCHMARKS.md
section "Test suite run time" is read from it by `bench/report.py --only ci_times`).

    python bench/ci_times.py run -- pytest -q          # run the command, time it, record it
    python bench/ci_times.py record "pytest -q" 371     # a duration measured elsewhere (s)

A run is recorded under its command (one entry per command: a new run replaces the old one)
with the commit, the date, the machine and the load average at start and end. A run that
fails is not recorded.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

from sections import CI_TIMES, ROOT, load, machine

NAMES = {"bash .ci/run (newest versions)":
         "fresh virtual environment, newest package versions: install and suite",
         "bash .ci/run (lowest versions)":
         "fresh virtual environment, lowest versions pyproject allows: install and suite",
         "pytest -q": "suite in an installed environment"}


def _commit() -> str:
    out = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short=7", "HEAD"],
                         capture_output=True, text=True)
    return out.stdout.strip() or "unknown"


def record(command: str, seconds: float, start_load: str = "", end_load: str = "") -> dict:
    """Write (or replace) the entry of `command` in ci_times.json; returns the entry."""
    data = json.loads(CI_TIMES.read_text()) if CI_TIMES.exists() else {"runs": []}
    entry = {"name": NAMES.get(command, command), "command": command,
             "seconds": round(seconds, 1), "commit": _commit(),
             "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "machine": machine(),
             "load": f"{start_load or '?'} at start, {end_load or load()} at end"}
    runs = [r for r in data.get("runs", []) if r.get("command") != command]
    at = next((i for i, r in enumerate(data.get("runs", [])) if r.get("command") == command),
              len(runs))
    runs.insert(at, entry)
    data["runs"] = runs
    CI_TIMES.write_text(json.dumps(data, indent=1) + "\n")
    return entry


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="what", required=True)
    run = sub.add_parser("run", help="run a command and record its wall time")
    run.add_argument("command", nargs=argparse.REMAINDER)
    rec = sub.add_parser("record", help="record a duration measured elsewhere")
    rec.add_argument("command")
    rec.add_argument("seconds", type=float)
    rec.add_argument("--start-load", default="", help="load average when the run started")
    args = ap.parse_args(argv)
    if args.what == "record":
        print(json.dumps(record(args.command, args.seconds, args.start_load)))
        return 0
    cmd = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not cmd:
        ap.error("run: no command given")
    start_load, t0 = load(), time.perf_counter()
    status = subprocess.run(cmd, cwd=ROOT).returncode
    took = time.perf_counter() - t0
    if status:
        print(f"{' '.join(cmd)} failed (status {status}); not recorded", file=sys.stderr)
        return status
    print(json.dumps(record(" ".join(cmd), took, start_load)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
