#!/usr/bin/env python3
"""What one bare SSH connection per host costs on the lab, measured several ways.

    sudo bench/floor.py --n 50,200 --reps 3 --out target/bench/floor-STAMP [--variants LIST]
    bench/floor.py --report target/bench/floor-STAMP [--md FILE]

For every N: `lab/up.sh N`, then per repetition every variant once (order rotating), each
measured as bench/harness.py measures a tool (wall from spawn to exit; controller CPU of every
process the run started, from a cgroup; host CPU of every process of the lab hosts, from a
second cgroup). Every variant logs in to every host, runs `true` and checks its exit status;
a run counts only when every host succeeded (`ok` = N).

Variants (bench/README.md, "The floor"):
  ssh2             bench/floor-ssh2: ONE process, libssh2 (kwin's library), a thread per host,
                   curve25519-sha256, ed25519 host key checked, kwin's key login (signed in
                   the process), exec `true`                                     <- THE floor
  ssh2-filelogin   the same with libssh2's own key login (`userauth_pubkey_file`: the key
                   parsed twice per login; the floor up to 2026-11-29 noon)
  libssh           bench/floor-libssh: the same from ONE process with libssh   <- second method
  openssh          one OpenSSH `ssh -F target/lab/ssh_config hI true` per host from a bash loop
                   (the floor of bench/results up to 2026-11-28)
  openssh-plain    the same without the config file (`-F /dev/null`, options on the command line)
  spawn            the bash loop of `openssh` running /bin/true instead of ssh (no connection)
  ssh2-seq         floor-ssh2 --parallel 1: one host after the other (no contention)
  ssh2-alt         floor-ssh2 to a second sshd per host (port 2222), same config as the lab's
  ssh2-norexec     ... to a second sshd started with -r (no re-exec of sshd per connection)
  ssh2-nooverlay   ... to a second sshd in the host's network namespace but on the machine's
                   root file system (no overlayfs; /root bound to the lab's seed /root)
  ssh2-quiet       ... to a second sshd with LogLevel QUIET (no per-connection log lines)
  ssh2-2ch         floor-ssh2 --channels 2: a second channel execs `true` on the same login
                   (what one more script costs a host beyond the login: kwin's cold run has two)
  ssh2-shs         floor-ssh2 --command 'sh -s': kwin's command (the login shell starts `sh`,
                   which reads an empty script)
The second sshds are started only when a variant needs them; lab/down.sh ends them with the
host (every process of a host's network namespace).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness  # noqa: E402  (the lab, the cgroups, measure())

REPO = harness.REPO
LAB_DIR = harness.LAB_DIR
SSH2 = REPO / "target" / "floor-ssh2" / "release" / "floor-ssh2"
LIBSSH = REPO / "target" / "floor-libssh"
VARIANTS = ("ssh2", "libssh", "openssh", "openssh-plain", "spawn", "ssh2-seq", "ssh2-alt",
            "ssh2-norexec", "ssh2-nooverlay", "ssh2-quiet", "ssh2-2ch", "ssh2-shs", "ssh2-filelogin")
ALT_PORTS = {"ssh2-alt": 2222, "ssh2-norexec": 2223, "ssh2-nooverlay": 2224, "ssh2-quiet": 2225}
log = harness.log


def addresses(n: int) -> list[str]:
    """Host addresses in host order, from the lab's known_hosts (one `ADDR KEY` line per host)."""
    out = []
    for line in (LAB_DIR / "known_hosts").read_text().splitlines():
        addr = line.split()[0]
        if not addr.startswith("["):
            out.append(addr)
    if len(out) < n:
        raise SystemExit(f"floor: known_hosts has {len(out)} hosts, want {n}")
    return out[:n]


def known_hosts_for(port: int, out: Path) -> Path:
    """known_hosts naming every host as [ADDR]:PORT (a second sshd has the host's key)."""
    p = out / f"known_hosts-{port}"
    lines = []
    for line in (LAB_DIR / "known_hosts").read_text().splitlines():
        addr, rest = line.split(None, 1)
        if not addr.startswith("["):
            lines.append(f"[{addr}]:{port} {rest}")
    p.write_text("\n".join(lines) + "\n")
    return p


def start_alt_sshds(lab: harness.Lab, variant: str) -> None:
    """A second sshd per host for a host-side variant, listening on ALT_PORTS[variant]."""
    port = ALT_PORTS[variant]
    procs = []
    for i, name in enumerate(lab.names, 1):
        hd = LAB_DIR / "hosts" / name
        holder = (hd / "holder.pid").read_text().strip()
        inner = ["-p", str(port), "-o", f"PidFile=/run/kwin-lab/alt{port}.pid",
                 "-E", f"/run/kwin-lab/alt{port}.log"]
        if variant == "ssh2-norexec":
            inner.append("-r")
        if variant == "ssh2-quiet":
            inner += ["-o", "LogLevel=QUIET"]
        if variant == "ssh2-nooverlay":
            cfg = hd / "sshd_config.nooverlay"
            cfg.write_text((hd / "sshd_config").read_text().replace("/run/kwin-lab", str(hd)))
            script = ('mount --bind "$1" /root && exec /usr/sbin/sshd -f "$2" -p "$3" '
                      '-o "PidFile=$4/alt$3.pid" -E "$4/alt$3.log"')
            cmd = ["nsenter", "-t", holder, "-n", "--", "unshare", "-m", "--propagation",
                   "private", "sh", "-c", script, "sh", str(LAB_DIR / "seed" / "root"), str(cfg),
                   str(port), str(hd)]
        else:
            cmd = ["nsenter", "-t", holder, "-n", "-m", "-u", "--", "/usr/sbin/sshd",
                   "-f", "/run/kwin-lab/sshd_config"] + inner
        procs.append(subprocess.Popen(cmd, stdin=subprocess.DEVNULL))
        if len(procs) >= 16:
            for p in procs:
                if p.wait() != 0:
                    raise SystemExit(f"floor: second sshd on {name} did not start: {cmd}")
            procs = []
    for p in procs:
        if p.wait() != 0:
            raise SystemExit("floor: a second sshd did not start")
    deadline = time.monotonic() + 60
    for name in lab.names:
        pid = LAB_DIR / "hosts" / name / f"alt{port}.pid"
        while not (pid.exists() and pid.read_text().strip()):
            if time.monotonic() > deadline:
                raise SystemExit(f"floor: second sshd of {name} wrote no pid file")
            time.sleep(0.05)


def command(variant: str, n: int, out: Path) -> tuple[list[str], dict]:
    env = dict(os.environ)
    key = str(LAB_DIR / "id_ed25519")
    kh = str(LAB_DIR / "known_hosts")
    addrs = addresses(n)
    names = [f"h{i}" for i in range(1, n + 1)]
    loop = ('rc=0; pids=(); for h in "${@:2}"; do CMD & pids+=($!); done; '
            'ok=0; for p in "${pids[@]}"; do if wait "$p"; then ok=$((ok+1)); else rc=1; fi; done; '
            'echo "{\\"hosts\\":$(($#-1)),\\"ok\\":$ok}"; exit $rc')
    if variant in ("ssh2", "ssh2-seq"):
        par = ["--parallel", "1"] if variant == "ssh2-seq" else []
        return [str(SSH2), "--key", key, "--known-hosts", kh] + par + addrs, env
    if variant == "ssh2-filelogin":
        return [str(SSH2), "--key", key, "--known-hosts", kh, "--login", "file"] + addrs, env
    if variant == "ssh2-2ch":
        return [str(SSH2), "--key", key, "--known-hosts", kh, "--channels", "2"] + addrs, env
    if variant == "ssh2-shs":
        return [str(SSH2), "--key", key, "--known-hosts", kh, "--command", "sh -s"] + addrs, env
    if variant in ALT_PORTS:
        port = ALT_PORTS[variant]
        return ([str(SSH2), "--key", key, "--known-hosts", str(known_hosts_for(port, out))]
                + [f"{a}:{port}" for a in addrs], env)
    if variant == "libssh":
        return [str(LIBSSH), "--key", key, "--known-hosts", kh] + addrs, env
    if variant == "openssh":
        env["CFG"] = str(LAB_DIR / "ssh_config")
        return ["bash", "-c", loop.replace("CMD", 'ssh -F "$CFG" "$h" true'), "floor", "-"] + names, env
    if variant == "openssh-plain":
        opts = (f"-F /dev/null -i {key} -o IdentitiesOnly=yes -o UserKnownHostsFile={kh} "
                "-o GlobalKnownHostsFile=/dev/null -o StrictHostKeyChecking=yes "
                "-o KexAlgorithms=curve25519-sha256 -o BatchMode=yes -o LogLevel=ERROR")
        return ["bash", "-c", loop.replace("CMD", f'ssh {opts} "root@$h" true'), "floor", "-"] + addrs, env
    if variant == "spawn":
        return ["bash", "-c", loop.replace("CMD", "/bin/true"), "floor", "-"] + addrs, env
    raise ValueError(variant)


def micro(out: Path, n: int = 200) -> dict:
    """CPU (user+sys, ms) of starting one process of each kind, n times one after the other:
    what an OpenSSH client pays per host before it connects, and the sshd re-exec and the
    login shell a host pays per connection."""
    key = out / "micro_host_key"
    if not key.exists():
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    cfg = out / "micro_sshd_config"
    cfg.write_text(f"HostKey {key}\nUsePAM no\n")
    kinds = {
        "/bin/true": ["/bin/true"],
        "bash -c true": ["bash", "-c", "true"],
        "ssh -V (OpenSSH client start-up)": ["ssh", "-V"],
        "ssh -G with the lab's ssh_config (N Host blocks)": ["ssh", "-F", str(LAB_DIR / "ssh_config"), "-G", "h1"],
        "sshd -t (sshd start-up: the re-exec per connection)": ["/usr/sbin/sshd", "-t", "-f", str(cfg)],
    }
    res = {}
    for name, cmd in kinds.items():
        if "ssh_config" in name and not (LAB_DIR / "ssh_config").exists():
            continue
        u0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        for _ in range(n):
            subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        u1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        res[name] = (u1.ru_utime + u1.ru_stime - u0.ru_utime - u0.ru_stime) / n * 1000
    res["load"] = harness.loadavg()
    return res


def run(a) -> int:
    cg = harness.cgroup_root()
    cg_path, v2 = (cg if cg else (None, False))
    a.out = a.out.resolve()  # the runs' working directory is a.out itself
    a.out.mkdir(parents=True, exist_ok=True)
    (a.out / "logs").mkdir(exist_ok=True)
    variants = [v for v in a.variants.split(",") if v]
    for v in variants:
        if v not in VARIANTS:
            raise SystemExit(f"floor: unknown variant {v}")
    for exe, vs in ((SSH2, [v for v in variants if v.startswith("ssh2")]),
                    (LIBSSH, [v for v in variants if v == "libssh"])):
        if vs and not exe.exists():
            raise SystemExit(f"floor: {exe} is missing (bench/run.sh builds it)")
    failures = 0
    for n in [int(x) for x in a.n.split(",")]:
        lab = harness.Lab(n, 0, cg_path, v2)
        lab.up()
        try:
            for v in variants:
                if v in ALT_PORTS:
                    start_alt_sshds(lab, v)
            if cg_path:
                lab.adopt()  # the second sshds too
            if a.micro:
                m = micro(a.out)
                m["n"] = n
                with open(a.out / "micro.jsonl", "a") as f:
                    f.write(json.dumps(m) + "\n")
                log(f"n={n} process start-up CPU: " + ", ".join(
                    f"{k}: {v:.1f} ms" for k, v in m.items() if k not in ("n", "load")))
            for rep in range(a.reps):
                order = variants[rep % len(variants):] + variants[:rep % len(variants)]
                for v in order:
                    if v == "ssh2-seq" and rep >= a.seq_reps:
                        continue
                    cmd, env = command(v, n, a.out)
                    logp = a.out / "logs" / f"n{n}-{v}-r{rep}.log"
                    r = harness.measure(lab, cmd, cwd=a.out, env=env, log_path=logp,
                                        timeout=600, cg_root=cg_path, v2=v2)
                    summary = {}
                    for line in logp.read_text(errors="replace").splitlines():
                        if line.startswith('{"hosts"'):
                            summary = json.loads(line)
                    r.update({"n": n, "variant": v, "rep": rep, "ok": summary.get("ok"),
                              "failed_sample": summary.get("failed", [])[:3]})
                    with open(a.out / "runs.jsonl", "a") as f:
                        f.write(json.dumps(r) + "\n")
                    if r["exit"] != 0 or r["ok"] != n:
                        failures += 1
                    log(f"n={n} {v:15} rep {rep}: wall {r['wall']:.2f}s ctl {r['ctl_cpu']:.2f}s "
                        f"hosts {r['host_cpu']:.2f}s ok {r['ok']}/{n} exit {r['exit']} "
                        f"load {r['load_before']:.1f}")
        finally:
            if not a.keep_lab:
                lab.down()
            if cg_path:
                for sub in ("hosts", "proxy"):
                    harness.Cgroup(cg_path / sub, v2).remove()
    if cg_path:
        harness.Cgroup(cg_path, v2).remove()
    return 1 if failures else 0


def report(dirs: list[Path]) -> str:
    runs = []
    for d in dirs:
        for line in (d / "runs.jsonl").read_text().splitlines():
            runs.append(json.loads(line))
    cells: dict[tuple[int, str], list[dict]] = {}
    for r in runs:
        cells.setdefault((r["n"], r["variant"]), []).append(r)
    order = {v: i for i, v in enumerate(VARIANTS)}
    out = ["| N | variant | wall s | controller CPU ms/host | host CPU ms/host | total CPU ms/host "
           "| host CPU ms/host read at the client's exit | all hosts ok | load before (min–max) |",
           "|---:|---|---:|---:|---:|---:|---:|---:|---|"]
    for (n, v), rs in sorted(cells.items(), key=lambda kv: (kv[0][0], order.get(kv[0][1], 99))):
        good = [r for r in rs if r["exit"] == 0 and r.get("ok") == n]
        if not good:
            out.append(f"| {n} | {v} | – | – | – | – | – | 0/{len(rs)} | |")
            continue
        med = lambda k: statistics.median(r[k] for r in good)  # noqa: E731
        tot = statistics.median(r["ctl_cpu"] + r["host_cpu"] for r in good)
        loads = [r["load_before"] for r in rs]
        out.append(f"| {n} | {v} | {med('wall'):.2f} | {med('ctl_cpu') / n * 1000:.1f} | "
                   f"{med('host_cpu') / n * 1000:.1f} | {tot / n * 1000:.1f} | "
                   f"{med('host_cpu_at_exit') / n * 1000:.1f} | {len(good)}/{len(rs)} | "
                   f"{min(loads):.1f}–{max(loads):.1f} |")
    micro_rows = []
    for d in dirs:
        mp = d / "micro.jsonl"
        if mp.exists():
            micro_rows += [json.loads(line) for line in mp.read_text().splitlines() if line]
    if micro_rows:
        ks = [k for k in micro_rows[0] if k not in ("n", "load")]
        out += ["", "CPU of starting one process, ms (200 starts one after the other, user+sys "
                "of the children):", "", "| lab N | " + " | ".join(ks) + " | load |",
                "|" + "---:|" * (len(ks) + 2)]
        for m in micro_rows:
            out.append(f"| {m['n']} | " + " | ".join(f"{m.get(k, 0):.1f}" for k in ks)
                       + f" | {m['load']:.1f} |")
    out.append("")
    out.append("Every run: N, variant, rep, wall s, controller CPU s, host CPU s, hosts ok, exit, load")
    out.append("")
    out.append("```")
    for r in sorted(runs, key=lambda r: (r["n"], order.get(r["variant"], 99), r["rep"])):
        out.append(f"{r['n']:4} {r['variant']:15} {r['rep']} {r['wall']:6.2f} {r['ctl_cpu']:6.2f} "
                   f"{r['host_cpu']:6.2f} {r.get('ok')}/{r['n']} {r['exit']} {r['load_before']:.1f}")
    out.append("```")
    return "\n".join(out) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--n", default="50")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--seq-reps", type=int, default=1, help="repetitions of ssh2-seq (slow)")
    ap.add_argument("--variants", default="ssh2,libssh,openssh")
    ap.add_argument("--out", type=Path)
    ap.add_argument("--keep-lab", action="store_true")
    ap.add_argument("--micro", action="store_true",
                    help="also measure the CPU of starting ssh, sshd, bash (micro.jsonl)")
    ap.add_argument("--report", type=Path, nargs="*", help="print the table of these run directories")
    a = ap.parse_args()
    if a.report:
        print(report(a.report), end="")
        return 0
    if not a.out:
        ap.error("--out is required")
    if os.geteuid() != 0:
        ap.error("must run as root (the lab needs it)")
    return run(a)


if __name__ == "__main__":
    sys.exit(main())
