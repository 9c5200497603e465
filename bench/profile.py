#!/usr/bin/env python3
"""Where a kwin run spends its time, from the harness's timestamped JSON event log.

    bench/profile.py RUN_DIR/logs/n50-d0-kwin-cold-r0.log.ts [...]

The harness stores each output line with its arrival time (seconds since kwin was spawned;
`--output json` flushes every event). From the events' own `duration_ms` and those arrival
times this prints, per run: start-up until the first event, connect and probe times across
hosts, time from probe to the host's end (planning + applying), the slowest hosts and the
tail after the last host finished.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    if not xs:
        return float("nan")
    k = min(len(xs) - 1, max(0, round(p / 100 * (len(xs) - 1))))
    return xs[k]


def dist(xs: list[float]) -> str:
    if not xs:
        return "–"
    return (f"min {min(xs):.3f}  p50 {statistics.median(xs):.3f}  p90 {pct(xs, 90):.3f}  "
            f"max {max(xs):.3f}")


def profile(path: Path) -> str:
    evs: list[tuple[float, dict]] = []
    for line in path.read_text(errors="replace").splitlines():
        t, _, rest = line.strip().partition(" ")
        try:
            evs.append((float(t), json.loads(rest)))
        except ValueError:
            continue
    if not evs:
        return f"{path}: no JSON events\n"
    by: dict[str, list[tuple[float, dict]]] = {}
    for t, e in evs:
        by.setdefault(e.get("event", "?"), []).append((t, e))
    out = [f"## {path.name}"]
    first = evs[0][0]
    out.append(f"first event ({evs[0][1].get('event')}) at {first:.3f} s after spawn")
    conn = by.get("host_connected", [])
    probe = by.get("host_probed", [])
    fin = by.get("host_finished", [])
    out.append(f"host_connected  arrival s: {dist([t for t, _ in conn])}")
    out.append(f"                duration s: {dist([e['duration_ms'] / 1000 for _, e in conn])}")
    out.append(f"host_probed     arrival s: {dist([t for t, _ in probe])}")
    out.append(f"                duration s: {dist([e['duration_ms'] / 1000 for _, e in probe])}")
    pt = {e["host"]: t for t, e in probe}
    out.append(f"host_finished   arrival s: {dist([t for t, _ in fin])}")
    out.append(f"                duration s: {dist([e['duration_ms'] / 1000 for _, e in fin])}")
    after_probe = [t - pt[e["host"]] for t, e in fin if e["host"] in pt]
    out.append(f"probe → host end s:        {dist(after_probe)}")
    tasks = by.get("task_finished", [])
    out.append(f"task_finished: {len(tasks)} events; durations s: "
               f"{dist([e['duration_ms'] / 1000 for _, e in tasks])}")
    changed = sum(1 for _, e in tasks if e.get("status") == "changed")
    out.append(f"changed tasks: {changed}")
    summ = by.get("summary", [])
    if summ:
        t, e = summ[-1]
        last_fin = max((t for t, _ in fin), default=t)
        out.append(f"summary at {t:.3f} s (engine duration {e['duration_ms'] / 1000:.3f} s); "
                   f"after the last host_finished: {t - last_fin:.3f} s")
    slow = sorted(fin, key=lambda x: -x[0])[:3]
    out.append("slowest hosts: " + ", ".join(f"{e['host']} ends {t:.3f} s" for t, e in slow))
    warn = by.get("warning", [])
    if warn:
        out.append(f"warnings: {len(warn)} (first: {warn[0][1].get('message', '')[:120]})")
    return "\n".join(out) + "\n"


def main() -> int:
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    for p in sys.argv[1:]:
        print(profile(Path(p)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
