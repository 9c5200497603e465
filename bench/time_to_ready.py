#!/usr/bin/env python3
"""Time-to-Ready of the lab cluster: cold `kwin apply examples/lab-cluster.toml`, measured.

    sudo bench/time_to_ready.py run --runs 3 --label after       # lab KWIN_LAB_ID (default 18)
    sudo bench/time_to_ready.py run --runs 1 --first 1 --label before --kwin OLD --commit C  # interleave
    bench/time_to_ready.py report target/ttr/before target/ttr/after > table.md

`run` does, per repetition, what tests/e2e_cluster.rs does for lab 5, on a fresh lab each
time: `lab/up.sh 3`, `lab/cluster-stand-in/up.sh` (the API server started with an audit log
of every request, `KWIN_APISERVER_EXTRA_ARGS`), the example plan rewritten for the lab (its
addresses, inventory and manifest path), then ONE cold `kwin apply --output json -v` with the
release binary. It keeps, under OUT/<label>/run-<i>/: `events.ts` (each stdout line with its
arrival time, seconds since kwin was spawned), the host logs (`.kwin/logs/<run>/hN.log`), the
API server's audit log, the stand-ins' logs of each host, `load` (the 1-minute load average
before and after), `graph.txt` (the task graph, `kwin graph --format text`).

`report` reads those and prints, per label: wall time, the critical path (the chain of tasks
that ends with the last task to finish, each task's time split into waiting for another host,
the batch it ran in, of which waiting for the API server), and load-independent counts: round
trips per host (`run #` entries of the host logs), requests kwin made to the API server (from
the audit log: user `kubernetes-admin`, user agent kubectl, from a lab host) and, of those,
the ones of kwin's waits (reads of the awaited objects, split into list/get and watch).

Every time in the tables is what this machine gave on that run; the machine is shared, so the
load average is next to every run, and the counts (which load does not change) next to the
times.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
LAB_ID = os.environ.get("KWIN_LAB_ID", "18")
LAB_DIR = REPO / "target" / (f"lab-{LAB_ID}" if LAB_ID != "0" else "lab")
SECOND = 213 + int(LAB_ID)

AUDIT_POLICY = """apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
  - level: Metadata
"""


def log(msg: str) -> None:
    print(f"time_to_ready: {msg}", file=sys.stderr, flush=True)


def sh(cmd: list[str], env: dict | None = None, check: bool = True) -> str:
    e = dict(os.environ, KWIN_LAB_ID=LAB_ID, **(env or {}))
    r = subprocess.run(cmd, cwd=REPO, env=e, capture_output=True, text=True)
    if check and r.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({r.returncode}):\n{r.stdout}{r.stderr}")
    return r.stdout


def load() -> float:
    return float(Path("/proc/loadavg").read_text().split()[0])


def plan_text() -> str:
    """examples/lab-cluster.toml for this lab, as tests/e2e_cluster.rs rewrites it."""
    text = (REPO / "examples" / "lab-cluster.toml").read_text()
    text = text.replace("10.213.", f"10.{SECOND}.")
    text = text.replace('"../modules/', f'"{REPO}/modules/')
    text = text.replace("step_timeout = 300", "step_timeout = 150")
    inv = LAB_DIR / "hosts.toml"
    return "\n".join(f"inventory = {json.dumps(str(inv))}" if l.startswith("inventory = ")
                     else l for l in text.splitlines()) + "\n"


def teardown() -> None:
    sh(["lab/cluster-stand-in/down.sh"], check=False)
    sh(["bash", "lab/down.sh"], check=False)


def one_run(kwin: Path, out: Path, commit: str) -> dict:
    out.mkdir(parents=True, exist_ok=True)
    teardown()
    sh(["bash", "lab/up.sh", "3"])
    policy = out / "audit-policy.yaml"
    policy.write_text(AUDIT_POLICY)
    audit = out / "audit.log"
    extra = f"--audit-policy-file={policy} --audit-log-path={audit} --audit-log-maxsize=0"
    sh(["lab/cluster-stand-in/up.sh"], env={"KWIN_APISERVER_EXTRA_ARGS": extra})
    plan_dir = out / "plan"
    if plan_dir.exists():
        shutil.rmtree(plan_dir)
    plan_dir.mkdir()
    (plan_dir / "plan.toml").write_text(plan_text())
    graph = subprocess.run([str(kwin), "graph", "plan.toml", "--format", "text"],
                           cwd=plan_dir, capture_output=True, text=True)
    (out / "graph.txt").write_text(graph.stdout if graph.returncode == 0 else "")
    http_log = LAB_DIR / "cluster" / "http.log"
    http_before = len(http_log.read_text(errors="replace").splitlines()) \
        if http_log.exists() else 0
    load_before = load()
    t0 = time.monotonic()
    wall_start = datetime.now().astimezone().isoformat()
    proc = subprocess.Popen([str(kwin), "apply", "plan.toml", "--output", "json", "-v"],
                            cwd=plan_dir, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, bufsize=1)
    with open(out / "events.ts", "w") as ts:
        assert proc.stdout is not None
        for line in proc.stdout:
            ts.write(f"{time.monotonic() - t0:.4f} {line}")
    stderr = proc.stderr.read() if proc.stderr else ""
    code = proc.wait()
    wall = time.monotonic() - t0
    (out / "stderr.txt").write_text(stderr)
    load_after = load()
    mirror = len(http_log.read_text(errors="replace").splitlines()) - http_before \
        if http_log.exists() else None
    # A second apply must change nothing (the first one converged).
    second = subprocess.run([str(kwin), "apply", "plan.toml", "--output", "json"],
                            cwd=plan_dir, capture_output=True, text=True)
    second_changed = None
    for line in second.stdout.splitlines():
        try:
            e = json.loads(line)
        except ValueError:
            continue
        if e.get("event") == "summary":
            second_changed = e.get("changed")
    # Host logs of the first run.
    logs = plan_dir / ".kwin" / "logs"
    first = sorted(logs.iterdir())[0] if logs.exists() else None
    for f in first.glob("*.log") if first else []:
        shutil.copy(f, out / f"host-{f.name}")
    # The stand-ins' own logs on each host (their timings are theirs, not kwin's).
    for h in ("h1", "h2", "h3"):
        for name in ("kubeadm-stand-in.log", "kubelet-stand-in.log"):
            text = sh(["ssh", "-F", str(LAB_DIR / "ssh_config"), h, f"cat /var/log/{name}"],
                      check=False)
            (out / f"{h}-{name}").write_text(text)
    shutil.copy(LAB_DIR / "cluster" / "timeline.log", out / "timeline.log") \
        if (LAB_DIR / "cluster" / "timeline.log").exists() else None
    meta = {"wall_s": round(wall, 3), "exit": code, "load_before": load_before,
            "load_after": load_after, "started": wall_start, "kwin": str(kwin),
            "mirror_requests": mirror, "second_exit": second.returncode,
            "second_changed": second_changed,
            "commit": commit}
    (out / "meta.json").write_text(json.dumps(meta, indent=1))
    teardown()
    return meta


# ------------------------------------------------------------------------------------ report


def events(run: Path) -> list[tuple[float, dict]]:
    evs = []
    for line in (run / "events.ts").read_text(errors="replace").splitlines():
        t, _, rest = line.partition(" ")
        try:
            evs.append((float(t), json.loads(rest)))
        except ValueError:
            continue
    return evs


HEADER = re.compile(r"^\[\+(\d+\.\d+)s\] run #(\d+) (.*?) \((\d+) bytes")
DONE = re.compile(r"^\[\+(\d+\.\d+)s\] run #(\d+) (?:exit (-?\d+) in|error after) (\d+)ms")


def host_log_ms(run: Path, host: str) -> dict[str, list[int]]:
    """Duration of every script sent to `host`, by what it was, in the order sent."""
    p = run / f"host-{host}.log"
    out: dict[str, list[int]] = {}
    if not p.exists():
        return out
    whats: dict[int, str] = {}
    for line in p.read_text(errors="replace").splitlines():
        m = HEADER.match(line)
        if m:
            whats.setdefault(int(m.group(2)), m.group(3))
            continue
        m = DONE.match(line)
        if m and int(m.group(2)) in whats:
            out.setdefault(whats[int(m.group(2))], []).append(int(m.group(4)))
    return out


def scripts(run: Path, evs: list[tuple[float, dict]]) -> dict[str, list[dict]]:
    """Per host, every script kwin sent (not the upgrade gate's): start (s since spawn, from
    its `script` event), duration (host log), what, and the tasks it finished."""
    per: dict[str, list[dict]] = {}
    for t, e in evs:
        if e.get("event") == "script" and not e["what"].startswith("upgrade gate"):
            per.setdefault(e["host"], []).append({"what": e["what"], "start": t})
    # When each script's own steps were done: its last task end marker as it arrived (-v;
    # a script whose log hides content arrives whole at its end: unknown).
    marks: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for t, e in evs:
        if e.get("event") != "output":
            continue
        k = (e["host"], e["what"])
        ends = [l for l in e.get("text", "").splitlines()
                if re.match(r"^@@kwin:[0-9a-f]+:task:\d+:end:", l)]
        marks.setdefault(k, []).append((t, 1.0 if ends else 0.0))
    for h, ss in per.items():
        ms = host_log_ms(run, h)
        seen: dict[str, int] = {}
        for sc in ss:
            i = seen.get(sc["what"], 0)
            seen[sc["what"]] = i + 1
            d = ms.get(sc["what"], [])
            sc["dur"] = d[i] / 1000 if i < len(d) else 0.0
            sc["end"] = sc["start"] + sc["dur"]
            arr = [(t, m) for t, m in marks.get((h, sc["what"]), [])
                   if sc["start"] - 1e-3 <= t <= sc["end"] + 0.05]
            first = min((t for t, _ in arr), default=None)
            steps = max((t for t, m in arr if m), default=None)
            live = first is not None and first < sc["end"] - 0.05
            sc["steps_end"] = steps if live else None
    return per


def audit(run: Path) -> list[dict]:
    p = run / "audit.log"
    out = []
    if not p.exists():
        return out
    for line in p.read_text(errors="replace").splitlines():
        try:
            e = json.loads(line)
        except ValueError:
            continue
        if e.get("stage") in ("ResponseComplete", "Panic"):
            out.append(e)
    return out


def from_hosts(e: dict) -> bool:
    """kubectl with the admin credentials on a lab host: kwin's scripts, and the kubeadm
    stand-in's own kubectl while `kubeadm init`/`join` runs."""
    return (e.get("user", {}).get("username") == "kubernetes-admin"
            and (e.get("userAgent") or "").startswith("kubectl")
            and not any(ip.endswith(".255.1") for ip in e.get("sourceIPs", [])))


def analyse(run: Path) -> dict:
    evs = events(run)
    meta = json.loads((run / "meta.json").read_text())
    spawn = datetime.fromisoformat(meta["started"]).timestamp()
    per = scripts(run, evs)
    finished: dict[tuple[str, str], tuple[float, dict]] = {}
    started: dict[tuple[str, str], float] = {}
    for t, e in evs:
        k = (e.get("host"), e.get("task"))
        if e.get("event") == "task_finished":
            finished[k] = (t, e)
        elif e.get("event") == "task_started":
            started[k] = t
    hosts = sorted(per)
    for h in hosts:
        p = run / f"{h}-kubeadm-stand-in.log"
        for line in p.read_text().splitlines() if p.exists() else []:
            try:
                k = json.loads(line)
            except ValueError:
                continue
            done = k.get("epoch", 0) - spawn
            for sc in per[h]:
                if f"kubeadm-{k.get('verb')}" in sc["what"] and sc["start"] <= done <= sc["end"]:
                    sc["steps_end"] = done
    # Where each host's time went: scripts (by kind) and the gaps between them.
    split = {}
    for h in hosts:
        ss = per[h]
        d = {"probe": 0.0, "re-probe": 0.0, "apply": 0.0, "output": 0.0, "idle": 0.0}
        last = ss[0]["start"] if ss else 0.0
        for sc in ss:
            kind = sc["what"].split(" ")[0]
            d[kind if kind in d else "apply"] += sc["dur"]
            d["idle"] += max(0.0, sc["start"] - last)
            last = max(last, sc["end"])
        d["scripts"] = len(ss)
        d["end"] = last
        split[h] = d
    # The critical path: from the host that ends last, back through its scripts; a gap in
    # which it waited for another host continues on that host at the moment it was waited
    # for.
    preds: dict[tuple[str, str], list[tuple[str, str]]] = {}
    node = None
    gp = run / "graph.txt"
    for line in gp.read_text().splitlines() if gp.exists() else []:
        if line and not line.startswith(" "):
            h, _, rest = line.partition("/")
            node = (h, rest.split(" ")[0])
        elif node and line.strip():
            h, _, t = line.split()[-1].partition("/")
            preds.setdefault(node, []).append((h, t))
    path: list[dict] = []
    if hosts:
        h = max(hosts, key=lambda x: split[x]["end"])
        t = split[h]["end"]
        guard = 0
        while guard < 200:
            guard += 1
            before = [sc for sc in per[h] if sc["start"] < t - 1e-6]
            if not before:
                break
            sc = max(before, key=lambda x: x["start"])
            path.append({"host": h, "what": sc["what"], "start": sc["start"], "dur": sc["dur"],
                         "kind": "script", "steps_end": sc.get("steps_end"),
                         "end": sc["end"]})
            prev = [x for x in per[h] if x["start"] < sc["start"] and x is not sc]
            prev_end = max((x["end"] for x in prev), default=None)
            gap = sc["start"] - (prev_end if prev_end is not None else sc["start"])
            if gap > 0.15:
                # Which task of this host started when the gap ended, and what it waited for.
                cands = [(k, ts) for k, ts in started.items()
                         if k[0] == h and abs(ts - sc["start"]) < 0.05]
                other = None
                for k, _ in cands:
                    for p in preds.get(k, []):
                        if p[0] != h and p in finished:
                            if other is None or finished[p][0] > finished[other][0]:
                                other = p
                path.append({"host": h, "what": "waits for " + ("/".join(other) if other
                                                                else "(nothing kwin ran)"),
                             "start": prev_end, "dur": gap, "kind": "wait"})
                if other:
                    h, t = other[0], finished[other][0] + 1e-3
                    continue
            t = sc["start"]
        path.reverse()
    # API requests: all from the hosts, and those of kwin's wait steps (inside the batches
    # that ran a kube_wait change: cni-ready, nodes-ready).
    reqs = [e for e in audit(run) if from_hosts(e)]
    def at(e: dict) -> float:
        return datetime.fromisoformat(e["requestReceivedTimestamp"].replace("Z", "+00:00")
                                      ).timestamp() - spawn
    windows = []
    for h in hosts:
        for sc in per[h]:
            if "kubeadm-init" in sc["what"] or "kubeadm-join" in sc["what"]:
                windows.append(("kubeadm", sc["start"], sc["end"]))
            if sc["what"].startswith("apply") and ("cni-ready" in sc["what"]
                                                   or "nodes-ready" in sc["what"]):
                windows.append(("wait", sc["start"], sc["end"]))
    counts = {"all": len(reqs), "kubeadm": 0, "wait_list": 0, "wait_watch": 0}
    for e in reqs:
        x = at(e)
        for kind, a, b in windows:
            if a - 0.2 <= x <= b + 0.2:
                if kind == "kubeadm":
                    counts["kubeadm"] += 1
                elif (e.get("objectRef") or {}).get("resource") in ("daemonsets", "nodes"):
                    v = e.get("verb")
                    if v == "watch":
                        counts["wait_watch"] += 1
                    elif v in ("list", "get"):
                        counts["wait_list"] += 1
                break
    # The wait steps (kube_wait changes): from their begin to their end marker, as the
    # output arrived (-v), and the reads of the awaited kinds in that time.
    waits = []
    kube_wait = set()
    for line in gp.read_text().splitlines() if gp.exists() else []:
        if line.endswith("[kube_wait]"):
            kube_wait.add(line.split(" ")[0].split("/", 1)[1])
    for h in hosts:
        for sc in per[h]:
            if not sc["what"].startswith("apply "):
                continue
            names = sc["what"][len("apply "):].split(", ")
            for i, n in enumerate(names):
                if n not in kube_wait:
                    continue
                begin = end = None
                for t, e in evs:
                    if e.get("event") != "output" or e.get("host") != h \
                            or e.get("what") != sc["what"] or t < sc["start"] - 1e-3:
                        continue
                    for l in e.get("text", "").splitlines():
                        if re.match(rf"^@@kwin:[0-9a-f]+:task:{i}:begin$", l) and begin is None:
                            begin = t
                        if re.match(rf"^@@kwin:[0-9a-f]+:task:{i}:end:", l) and end is None:
                            end = t
                if begin is None or end is None:
                    continue
                lists = watches = 0
                for e in reqs:
                    x = at(e)
                    if begin <= x <= end and \
                            (e.get("objectRef") or {}).get("resource") in ("daemonsets", "nodes"):
                        if e.get("verb") == "watch":
                            watches += 1
                        elif e.get("verb") in ("list", "get"):
                            lists += 1
                waits.append({"host": h, "task": n, "s": end - begin, "lists": lists,
                              "watches": watches})
    # From the start of `kubeadm init` to the end: the Kubernetes part, after the packages
    # (real apt/dpkg, CPU-bound here, most of the load's effect).
    init = min((sc["start"] for sc in per.get("h1", []) if "kubeadm-init" in sc["what"]),
               default=None)
    last = max((sp["end"] for sp in split.values()), default=0.0)
    return {"meta": meta, "hosts": hosts, "scripts": per, "split": split, "path": path,
            "api": counts, "waits": waits,
            "k8s": (last - init) if init is not None else None,
            "pkgs": init}


def report(dirs: list[Path]) -> str:
    out: list[str] = []
    for d in dirs:
        runs = sorted(p for p in d.glob("run-*") if (p / "meta.json").exists())
        if not runs:
            continue
        res = [analyse(r) for r in runs]
        out.append(f"### {d.name}\n")
        out.append("| run | exit, 2nd apply changed | wall s | until kubeadm init s | "
                   "kubeadm init to the end s | load before / after | "
                   "scripts h1 / h2 / h3 | mirror requests | API requests from hosts "
                   "(in kubeadm steps) | kwin's waits: list/get + watch |")
        out.append("|---|---|---:|---:|---:|---|---|---:|---|---|")
        for r, a in zip(runs, res):
            m = a["meta"]
            sc = " / ".join(str(a["split"].get(h, {}).get("scripts", 0))
                            for h in ("h1", "h2", "h3"))
            api = a["api"]
            out.append(f"| {r.name} | {m['exit']}, {m.get('second_changed', '?')} | "
                       f"{m['wall_s']:.2f} | {a['pkgs'] or 0:.2f} | {a['k8s'] or 0:.2f} | "
                       f"{m['load_before']:.2f} / {m['load_after']:.2f} | "
                       f"{sc} | {m.get('mirror_requests', '?')} | {api['all']} "
                       f"({api['kubeadm']}) | {api['wait_list']} + {api['wait_watch']} |")
        walls = [a["meta"]["wall_s"] for a in res]
        k8s = [a["k8s"] for a in res if a["k8s"] is not None]
        out.append(f"\nwall: median {statistics.median(walls):.2f} s (min {min(walls):.2f}, "
                   f"max {max(walls):.2f}); kubeadm init to the end: median "
                   f"{statistics.median(k8s):.2f} s (min {min(k8s):.2f}, max {max(k8s):.2f}); "
                   "load before: "
                   + ", ".join(f"{a['meta']['load_before']:.2f}" for a in res) + "\n")
        out.append("Where each host's time went (s, medians over the runs):\n")
        out.append("| host | probe | re-probes | batches | outputs | idle between scripts "
                   "(waiting for another host) | scripts |")
        out.append("|---|---:|---:|---:|---:|---:|---:|")
        for h in ("h1", "h2", "h3"):
            med = lambda k: statistics.median(a["split"].get(h, {}).get(k, 0) for a in res)
            out.append(f"| {h} | {med('probe'):.2f} | {med('re-probe'):.2f} | "
                       f"{med('apply'):.2f} | {med('output'):.2f} | {med('idle'):.2f} | "
                       f"{med('scripts'):.0f} |")
        out.append("")
        out.append("kwin's wait steps that ran (a kube_wait change): how long the step "
                   "took, and the reads of the awaited kind meanwhile (a poll is a list; a "
                   "watch is one list and one watch):\n")
        out.append("| run | task | step s | lists / gets | watches |")
        out.append("|---|---|---:|---:|---:|")
        for r, a in zip(runs, res):
            for w in a["waits"]:
                out.append(f"| {r.name} | {w['host']}/{w['task']} | {w['s']:.2f} | "
                           f"{w['lists']} | {w['watches']} |")
        out.append("")
        med = sorted(zip(walls, range(len(res))))[len(res) // 2][1]
        a = res[med]
        out.append(f"\nCritical path of {runs[med].name} (the median run; s since kwin was "
                   "spawned):\n")
        out.append("| host | script | start | s | of which reading facts after its steps |")
        out.append("|---|---|---:|---:|---:|")
        for seg in a["path"]:
            what = seg["what"] if len(seg["what"]) < 100 else seg["what"][:97] + "..."
            if seg["kind"] == "wait":
                what = f"*{what}*"
            after = (f"{seg['end'] - seg['steps_end']:.2f}"
                     if seg.get("steps_end") is not None else "")
            out.append(f"| {seg['host']} | {what} | {seg['start']:.2f} | {seg['dur']:.2f} | "
                       f"{after} |")
        out.append("")
    return "\n".join(out) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--runs", type=int, default=3)
    r.add_argument("--first", type=int, default=0, help="number of the first run (to interleave labels)")
    r.add_argument("--label", required=True)
    r.add_argument("--out", type=Path, default=REPO / "target" / "ttr")
    r.add_argument("--kwin", type=Path, default=REPO / "target" / "release" / "kwin")
    r.add_argument("--commit", help="the commit the binary was built from (default: HEAD)")
    p = sub.add_parser("report")
    p.add_argument("dirs", nargs="+", type=Path)
    a = ap.parse_args()
    if a.cmd == "run":
        if os.geteuid() != 0:
            log("run as root (the lab uses network namespaces)")
            return 2
        commit = a.commit or sh(["git", "rev-parse", "--short", "HEAD"]).strip()
        for i in range(a.first, a.first + a.runs):
            meta = one_run(a.kwin.resolve(), a.out / a.label / f"run-{i}", commit)
            log(f"{a.label} run {i}: exit {meta['exit']}, {meta['wall_s']:.2f} s, "
                f"load {meta['load_before']:.2f}")
        return 0
    print(report(a.dirs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
