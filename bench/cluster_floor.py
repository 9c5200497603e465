#!/usr/bin/env python3
"""Time from bare lab hosts to a Ready real cluster: kwin against the same steps run by hand.

    sudo bench/cluster_floor.py run --reps 3 [--kwin target/release/kwin] [--out DIR]
    bench/cluster_floor.py report DIR

Each repetition starts a fresh real-cluster lab for each tool (`lab/up.sh 3 --nodes`,
`lab/cluster/up.sh`: three bare hosts, the registry and the package mirror; lab
`KWIN_LAB_ID`, default 17), then times, from nothing to a cluster whose three Nodes are Ready
with flannel's and kube-proxy's DaemonSets rolled out (what kwin's `cluster-ready` waits for):

- floor: what a person does by hand, one shell script per host over OpenSSH
  (`bench/cluster-floor/node.sh` on the three hosts at once, then `control-plane.sh` on h1,
  then the join command it prints on h2 and h3 at once, then `kubectl wait` and `kubectl
  rollout status` on h1) — no checks, no probes, no idempotence;
- kwin: `kwin apply PLAN --no-verify` with the plan `lab/cluster/up.sh` wrote for the lab (the
  same versions, mirror and registry), in a directory of its own (no state from a run before).

The tools alternate which goes first. Both build Kubernetes `LAB_K8S_NEWEST` on containerd
`LAB_CONTAINERD`'s newest (lab/build/versions.sh, their one owner). Results are JSON lines in
OUT/results.jsonl, with the 1-minute load average before and after each run; `report` prints
the table with medians and kwin's ratio to the floor.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import time
import tomllib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
FLOOR = REPO / "bench" / "cluster-floor"
LAB_ID = os.environ.get("KWIN_LAB_ID", "17")
LAB_DIR = REPO / "target" / f"lab-{LAB_ID}"
HOSTS = ["h1", "h2", "h3"]
WORKERS = ["h2", "h3"]


def log(msg: str) -> None:
    print(f"cluster_floor: {msg}", file=sys.stderr, flush=True)


def load() -> float:
    return float(Path("/proc/loadavg").read_text().split()[0])


def lab_env() -> dict[str, str]:
    return {**os.environ, "KWIN_LAB_ID": LAB_ID}


def run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, env=lab_env(), text=True, capture_output=True, **kw)


def checked(cmd: list[str], what: str, **kw) -> str:
    p = run(cmd, **kw)
    if p.returncode != 0:
        sys.exit(f"cluster_floor: {what} failed ({p.returncode}):\n{p.stdout}{p.stderr}")
    return p.stdout


def versions() -> dict[str, str]:
    """The lab's versions, from lab/build/versions.sh."""
    out = checked(
        [
            "bash",
            "-c",
            'source lab/build/versions.sh && read -r _ _ pause < <(lab_kubeadm_images "$LAB_K8S_NEWEST") && '
            'printf "%s\\n" "$LAB_K8S_NEWEST" "${LAB_CONTAINERD##* }" "$LAB_RUNC" "$LAB_FLANNEL" "$pause"',
        ],
        "reading lab/build/versions.sh",
        cwd=REPO,
    ).split()
    return dict(zip(["K8S", "CONTAINERD", "RUNC", "FLANNEL", "PAUSE"], out))


def teardown() -> None:
    for s in ["lab/cluster/down.sh", "lab/down.sh"]:
        run([str(REPO / s)])


def fresh_lab() -> None:
    teardown()
    checked([str(REPO / "lab/up.sh"), "3", "--nodes"], "lab/up.sh 3 --nodes")
    checked([str(REPO / "lab/cluster/up.sh")], "lab/cluster/up.sh")


def service_env() -> dict[str, str]:
    """REGISTRY and MIRROR as lab/cluster/up.sh wrote them (shell assignments, quoted)."""
    out = {}
    for line in (LAB_DIR / "cluster" / "env").read_text().splitlines():
        k, _, v = line.partition("=")
        out[k] = shlex.split(v)[0] if v else ""
    return out


def ssh(host: str, script: Path | str, env: dict[str, str]) -> str:
    """`script` (a file of bench/cluster-floor, or a command line) as root on lab host `host`."""
    assign = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
    base = ["ssh", "-F", str(LAB_DIR / "ssh_config"), host]
    if isinstance(script, Path):
        with script.open() as f:
            return checked(base + [f"env {assign} sh -s"], f"{host}: {script.name}", stdin=f)
    return checked(base + [script], f"{host}: {script.split()[0]}")


def floor_once(v: dict[str, str], plan: dict) -> dict:
    svc = service_env()
    node_env = {k: v[k] for k in ["K8S", "CONTAINERD", "RUNC", "PAUSE"]}
    node_env.update(MIRROR=svc["MIRROR"], REGISTRY=svc["REGISTRY"])
    steps = {}
    t0 = time.monotonic()
    with ThreadPoolExecutor(len(HOSTS)) as pool:
        list(pool.map(lambda h: ssh(h, FLOOR / "node.sh", node_env), HOSTS))
    steps["nodes"] = time.monotonic() - t0
    t = time.monotonic()
    cp_env = {
        "MIRROR": svc["MIRROR"],
        "K8S": v["K8S"],
        "FLANNEL": v["FLANNEL"],
        "NODE": "h1",
        "POD_CIDR": plan["cluster"]["pod_cidr"],
    }
    join = ssh("h1", FLOOR / "control-plane.sh", cp_env).strip().splitlines()[-1]
    if not join.startswith("kubeadm join "):
        sys.exit(f"cluster_floor: control-plane.sh printed no join command: {join!r}")
    steps["control_plane"] = time.monotonic() - t
    t = time.monotonic()
    with ThreadPoolExecutor(len(WORKERS)) as pool:
        list(
            pool.map(
                lambda h: ssh(
                    h,
                    f"{join} --node-name {h} --ignore-preflight-errors=SystemVerification >/root/kubeadm-join.log 2>&1"
                    " || { tail -n 30 /root/kubeadm-join.log >&2; exit 1; }",
                    {},
                ),
                WORKERS,
            )
        )
    steps["joins"] = time.monotonic() - t
    t = time.monotonic()
    ssh(
        "h1",
        f"until [ \"$(kubectl get nodes --no-headers 2>/dev/null | wc -l)\" -ge {len(HOSTS)} ]; do sleep 0.2; done; "
        "kubectl wait --for=condition=Ready node --all --timeout=15m >/dev/null && "
        "kubectl -n kube-flannel rollout status ds/kube-flannel-ds --timeout=10m >/dev/null && "
        "kubectl -n kube-system rollout status ds/kube-proxy --timeout=10m >/dev/null",
        {},
    )
    steps["ready"] = time.monotonic() - t
    return {"wall": time.monotonic() - t0, "steps": steps}


def kwin_once(kwin: Path, out: Path) -> dict:
    out.mkdir(parents=True, exist_ok=True)
    plan = out / "plan.toml"
    plan.write_text((LAB_DIR / "cluster" / "plan.toml").read_text())
    t0 = time.monotonic()
    p = run([str(kwin), "apply", str(plan), "--no-verify", "--output", "json"], cwd=out)
    wall = time.monotonic() - t0
    (out / "apply.json").write_text(p.stdout)
    if p.returncode != 0:
        sys.exit(f"cluster_floor: kwin apply failed ({p.returncode}):\n{p.stdout[-4000:]}{p.stderr[-4000:]}")
    return {"wall": wall, "steps": {}}


def ready_nodes() -> str:
    """Every Node's name, version, runtime and Ready status (the run's own oracle)."""
    return ssh(
        "h1",
        "kubectl --kubeconfig /etc/kubernetes/admin.conf get nodes -o jsonpath="
        "'{range .items[*]}{.metadata.name} {.status.nodeInfo.kubeletVersion} "
        "{.status.nodeInfo.containerRuntimeVersion} "
        '{.status.conditions[?(@.type=="Ready")].status}{"\\n"}{end}\'',
        {},
    )


def cmd_run(a: argparse.Namespace) -> int:
    if os.geteuid() != 0:
        sys.exit("cluster_floor: run as root (the lab needs it)")
    if not a.kwin.is_file():
        sys.exit(f"cluster_floor: no kwin binary at {a.kwin} (cargo build --release)")
    a.out.mkdir(parents=True, exist_ok=True)
    v = versions()
    results = a.out / "results.jsonl"
    try:
        for rep in range(a.reps):
            order = ["floor", "kwin"] if rep % 2 == 0 else ["kwin", "floor"]
            for tool in order:
                fresh_lab()
                plan = tomllib.loads((LAB_DIR / "cluster" / "plan.toml").read_text())
                before = load()
                log(f"rep {rep}: {tool} (load {before})")
                if tool == "floor":
                    r = floor_once(v, plan)
                else:
                    r = kwin_once(a.kwin, a.out / f"kwin-{rep}")
                nodes = ready_nodes()
                for h in HOSTS:
                    want = f"{h} v{v['K8S']} containerd://{v['CONTAINERD']} True"
                    if want not in nodes:
                        sys.exit(f"cluster_floor: {tool}: no '{want}' among the Nodes:\n{nodes}")
                r.update(tool=tool, rep=rep, load_before=before, load_after=load(), versions=v)
                log(f"rep {rep}: {tool} {r['wall']:.1f} s")
                with results.open("a") as f:
                    f.write(json.dumps(r) + "\n")
    finally:
        teardown()
    print(report(a.out))
    return 0


def report(out: Path) -> str:
    rows = [json.loads(l) for l in (out / "results.jsonl").read_text().splitlines() if l.strip()]
    lines = [
        "| rep | tool | wall s | floor steps s (nodes / control plane / joins / Ready) | load before / after |",
        "|---:|---|---:|---|---|",
    ]
    for r in rows:
        s = r["steps"]
        steps = " / ".join(f"{s[k]:.1f}" for k in ["nodes", "control_plane", "joins", "ready"]) if s else ""
        lines.append(
            f"| {r['rep']} | {r['tool']} | {r['wall']:.1f} | {steps} | {r['load_before']:.2f} / {r['load_after']:.2f} |"
        )
    med = {t: statistics.median([r["wall"] for r in rows if r["tool"] == t]) for t in ["floor", "kwin"] if any(r["tool"] == t for r in rows)}
    lines.append("")
    lines.append(", ".join(f"{t}: median {m:.1f} s" for t, m in med.items()))
    if len(med) == 2:
        lines.append(f"kwin / floor: {med['kwin'] / med['floor']:.2f} x (goal <= 1.3 x)")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--reps", type=int, default=3)
    r.add_argument("--kwin", type=Path, default=REPO / "target" / "release" / "kwin")
    r.add_argument("--out", type=Path, default=REPO / "target" / "cluster-floor")
    p = sub.add_parser("report")
    p.add_argument("out", type=Path)
    a = ap.parse_args()
    if a.cmd == "run":
        return cmd_run(a)
    print(report(a.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
