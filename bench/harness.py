#!/usr/bin/env python3
"""Run the benchmark matrix: kwin, Ansible, pyinfra and the SSH floor against the lab.

Called by bench/run.sh (which installs and builds what this needs); runnable by itself as root
once the venv and the release binary exist:

    bench/harness.py --n 50 --delay 0,25 --reps 3 --tools kwin,ansible,pyinfra,floor

For every N: `lab/up.sh N [--delay-ms D]`, workload generation (bench/workload/gen.py), then per
repetition and tool: reset the hosts, a measured cold run, a check of every host's state, a
measured warm run (nothing may change). The floor (one process connecting to every host at
once and running `true`, bench/floor-ssh2; `floor-libssh` the same with libssh, `floor-openssh`
one OpenSSH client per host) is measured once per repetition. Each run appends one JSON line
to OUT/runs.jsonl; bench/report.py turns that into the results table.

What is measured (see bench/README.md, "Method"):
  wall      monotonic time from spawning the tool to its exit
  ctl_cpu   user+sys CPU of every process of the tool on this machine: a cpuacct cgroup the
            tool is started in (so daemonised children such as ssh ControlPersist masters are
            counted); read after those are closed. Cross-check: wait4() rusage of the tool.
  host_cpu  user+sys CPU of every process of the lab hosts (their sshd, its sessions, shells and
            commands): all processes of each host's network namespace are moved into a second
            cgroup before the run, read after the sessions have ended.
  rss       peak of the tool's memory: ru_maxrss (largest single process, exact) and the sum of
            PSS over its processes, sampled every 100 ms.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
LAB = REPO / "lab"
# KWIN_LAB_ID (lab/lib.sh) picks one of ten labs that can run side by side; 0 is the plain one.
LAB_ID = os.environ.get("KWIN_LAB_ID", "0")
LAB_TAG = "" if LAB_ID == "0" else LAB_ID
LAB_DIR = REPO / "target" / ("lab" + (f"-{LAB_TAG}" if LAB_TAG else ""))
LAB_NS_PREFIX = f"kwin{LAB_TAG}-"
VENV = REPO / "target" / "bench-venv"
TOOLS = ("kwin", "kwin-base", "ansible", "pyinfra", "floor", "floor-filelogin", "floor-libssh",
         "floor-openssh")
# The floor's two clients (bench/README.md, "The floor"), built by bench/run.sh.
FLOOR_SSH2 = REPO / "target" / "floor-ssh2" / "release" / "floor-ssh2"
FLOOR_LIBSSH = REPO / "target" / "floor-libssh"
CLK = os.sysconf("SC_CLK_TCK")


def log(msg: str) -> None:
    print(f"bench: {msg}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------
# CPU accounting groups


class Cgroup:
    """A cpuacct group (cgroup v1) or a cgroup v2 directory; usage in seconds."""

    def __init__(self, path: Path, v2: bool):
        self.path, self.v2 = path, v2
        path.mkdir(parents=True, exist_ok=True)

    def add(self, pid: int) -> bool:
        try:
            (self.path / "cgroup.procs").write_text(f"{pid}\n")
            return True
        except OSError:  # gone already
            return False

    def procs(self) -> list[int]:
        try:
            return [int(x) for x in (self.path / "cgroup.procs").read_text().split()]
        except OSError:
            return []

    def usage(self) -> float:
        if self.v2:
            for line in (self.path / "cpu.stat").read_text().splitlines():
                k, v = line.split()
                if k == "usage_usec":
                    return int(v) / 1e6
            raise RuntimeError("no usage_usec in cpu.stat")
        return int((self.path / "cpuacct.usage").read_text()) / 1e9

    def remove(self) -> None:
        try:
            self.path.rmdir()
        except OSError:
            pass


def cgroup_root() -> tuple[Path, bool] | None:
    v1 = Path("/sys/fs/cgroup/cpuacct")
    if (v1 / "cpuacct.usage").exists() and os.access(v1, os.W_OK):
        return v1 / "kwin-bench", False
    v2 = Path("/sys/fs/cgroup")
    if (v2 / "cgroup.controllers").exists() and os.access(v2, os.W_OK):
        return v2 / "kwin-bench", True
    for p in (Path("/sys/fs/cgroup/unified"),):
        if (p / "cgroup.procs").exists() and os.access(p, os.W_OK):
            return p / "kwin-bench", True
    return None


# ---------------------------------------------------------------------------------------------
# /proc helpers


def proc_cpu(pid: int) -> float:
    """utime+stime+cutime+cstime of a process, seconds (0 if gone)."""
    try:
        s = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0.0
    f = s[s.rindex(")") + 2:].split()
    return sum(int(x) for x in f[11:15]) / CLK


def proc_mem(pid: int) -> tuple[int, int]:
    """(RSS, PSS) in KiB; PSS from smaps_rollup when readable."""
    rss = pss = 0
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1])
                break
    except OSError:
        return 0, 0
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                pss = int(line.split()[1])
                break
    except OSError:
        pss = rss
    return rss, pss or rss


def netns_inode(ns: str) -> int | None:
    try:
        return os.stat(f"/run/netns/{ns}").st_ino
    except OSError:
        return None


def pids_in_netns(inodes: set[int]) -> list[int]:
    """PIDs whose network namespace is one of `inodes` (what `ip netns pids` does, for all at once)."""
    pids = []
    for e in os.scandir("/proc"):
        if not e.name.isdigit():
            continue
        try:
            if os.stat(f"/proc/{e.name}/ns/net").st_ino in inodes:
                pids.append(int(e.name))
        except OSError:
            pass
    return pids


def loadavg() -> float:
    return float(Path("/proc/loadavg").read_text().split()[0])


# ---------------------------------------------------------------------------------------------
# The lab


class Lab:
    def __init__(self, n: int, delay: int, cg: Path | None, v2: bool):
        self.n, self.delay = n, delay
        self.names = [f"h{i}" for i in range(1, n + 1)]
        self.cg_root, self.v2 = cg, v2
        self.hosts_cg: Cgroup | None = None
        self.proxy_cg: Cgroup | None = None

    def up(self) -> None:
        cmd = [str(LAB / "up.sh"), str(self.n)]
        if self.delay:
            cmd += ["--delay-ms", str(self.delay)]
        log("lab: " + " ".join(cmd[1:]))
        t0 = time.monotonic()
        subprocess.run(cmd, check=True)
        self.up_seconds = time.monotonic() - t0
        if self.cg_root:
            self.hosts_cg = Cgroup(self.cg_root / "hosts", self.v2)
            self.proxy_cg = Cgroup(self.cg_root / "proxy", self.v2)
            self.adopt()

    def adopt(self) -> None:
        """Move every process of every lab host (and the delay proxy) into the accounting groups."""
        assert self.hosts_cg and self.proxy_cg
        for pid in self.host_pids():
            self.hosts_cg.add(pid)
        for line in (LAB_DIR / "pids").read_text().splitlines():
            parts = line.split()
            if parts and parts[0] == "delay-proxy":
                self.proxy_cg.add(int(parts[1]))
        self.baseline = len(self.hosts_cg.procs())

    def down(self) -> None:
        subprocess.run([str(LAB / "down.sh")], check=False)

    def host_pids(self) -> list[int]:
        if not hasattr(self, "inodes"):
            self.inodes = {i for i in (netns_inode(f"{LAB_NS_PREFIX}{h}") for h in self.names) if i}
            if len(self.inodes) != self.n:
                raise SystemExit(f"bench: found {len(self.inodes)} of {self.n} lab namespaces")
        return pids_in_netns(self.inodes)

    def host_cpu_proc(self) -> float:
        """Fallback host CPU: sum over the hosts' processes of own + reaped children's CPU."""
        return sum(proc_cpu(p) for p in self.host_pids())

    def host_cpu(self) -> float:
        return self.hosts_cg.usage() if self.hosts_cg else self.host_cpu_proc()

    def proxy_cpu(self) -> float:
        return self.proxy_cg.usage() if self.proxy_cg else 0.0

    def wait_quiet(self, timeout: float = 30.0) -> bool:
        """Wait until only each host's long-lived processes remain (sessions have ended)."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            n = len(self.hosts_cg.procs()) if self.hosts_cg else len(self.host_pids())
            if n <= getattr(self, "baseline", 2 * self.n):
                return True
            time.sleep(0.05)
        return False

    def ssh_all(self, script: str, parallel: int = 25) -> dict[str, str]:
        """Run `sh -s` with `script` on every host (direct, not through the proxy)."""
        out: dict[str, str] = {}
        cfg = str(LAB_DIR / "ssh_config")
        pending = list(self.names)
        running: list[tuple[str, subprocess.Popen]] = []
        while pending or running:
            while pending and len(running) < parallel:
                h = pending.pop(0)
                p = subprocess.Popen(["ssh", "-F", cfg, h, "sh -s"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                assert p.stdin
                p.stdin.write(script)
                p.stdin.close()
                running.append((h, p))
            h, p = running.pop(0)
            assert p.stdout
            out[h] = p.stdout.read().strip()
            p.wait()
        return out


# ---------------------------------------------------------------------------------------------
# One measured run


class Sampler(threading.Thread):
    def __init__(self, procs):
        super().__init__(daemon=True)
        self.procs, self.stop = procs, threading.Event()
        self.peak_pss = self.peak_rss_sum = self.peak_nprocs = 0

    def run(self) -> None:
        while not self.stop.wait(0.1):
            rss = pss = 0
            ps = self.procs()
            for pid in ps:
                r, p = proc_mem(pid)
                rss += r
                pss += p
            self.peak_pss = max(self.peak_pss, pss)
            self.peak_rss_sum = max(self.peak_rss_sum, rss)
            self.peak_nprocs = max(self.peak_nprocs, len(ps))


def measure(lab: Lab, cmd: list[str], *, cwd: Path, env: dict, log_path: Path, timeout: float,
            cg_root: Path | None, v2: bool, after=None) -> dict:
    """Run `cmd` once; returns wall/CPU/memory figures (seconds, MiB)."""
    ctl = Cgroup(cg_root / f"ctl-{os.getpid()}-{time.monotonic_ns()}", v2) if cg_root else None
    if not lab.wait_quiet(10):
        log("warning: lab hosts still have sessions before the run")
    h0, x0, load0 = lab.host_cpu(), lab.proxy_cpu(), loadavg()
    fallback_h0 = lab.host_cpu_proc()

    def pre() -> None:
        os.setsid()
        if ctl:
            ctl.add(os.getpid())

    with open(log_path, "w") as out, open(str(log_path) + ".ts", "w") as ts:
        t0 = time.monotonic()
        p = subprocess.Popen(cmd, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, preexec_fn=pre)

        def tee() -> None:
            # The log as the tool wrote it, and each line's arrival time (seconds since spawn):
            # where a run spends its time, for every tool, without touching the tools.
            assert p.stdout
            for raw in iter(p.stdout.readline, b""):
                now = time.monotonic() - t0
                line = raw.decode(errors="replace")
                out.write(line)
                ts.write(f"{now:9.3f} {line}")
        reader = threading.Thread(target=tee, daemon=True)
        reader.start()
        sampler = Sampler(ctl.procs if ctl else (lambda: [p.pid]))
        sampler.start()
        killed = threading.Event()

        def kill() -> None:
            killed.set()
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        timer = threading.Timer(timeout, kill)
        timer.start()
        _, status, ru = os.wait4(p.pid, 0)
        wall = time.monotonic() - t0
        # The hosts' CPU at the moment the tool exits, before their sessions have ended: what a
        # harness that does not wait for them would count (host_cpu below waits).
        h_exit = lab.host_cpu()
        timer.cancel()
        timed_out = killed.is_set()
        p.returncode = os.waitstatus_to_exitcode(status)
        if after:
            after()  # e.g. close Ansible's ControlPersist masters (they belong to the run)
        reader.join(20)  # a leftover child holding the pipe must not hang the harness
    # Let every process of the run end (ssh masters, host sessions), then read the counters.
    if ctl:
        end = time.monotonic() + 15
        while ctl.procs() and time.monotonic() < end:
            time.sleep(0.05)
        leftover = ctl.procs()
        for pid in leftover:  # only processes this run started
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
    quiet = lab.wait_quiet(30)
    sampler.stop.set()
    sampler.join()
    res = {
        "exit": p.returncode,
        "timed_out": timed_out,
        "wall": wall,
        "ru_user": ru.ru_utime,
        "ru_sys": ru.ru_stime,
        "ru_maxrss_mib": ru.ru_maxrss / 1024,
        "tree_pss_peak_mib": sampler.peak_pss / 1024,
        "tree_rss_sum_peak_mib": sampler.peak_rss_sum / 1024,
        "peak_procs": sampler.peak_nprocs,
        "host_cpu": lab.host_cpu() - h0,
        "host_cpu_proc": lab.host_cpu_proc() - fallback_h0,
        "host_cpu_at_exit": h_exit - h0,
        "proxy_cpu": lab.proxy_cpu() - x0,
        "hosts_quiet": quiet,
        "load_before": load0,
        "load_after": loadavg(),
    }
    if ctl:
        res["ctl_cpu"] = ctl.usage()
        res["ctl_leftover"] = len(leftover)
        time.sleep(0.05)
        ctl.remove()
    else:
        res["ctl_cpu"] = ru.ru_utime + ru.ru_stime
    # The tree's peak is at least the largest single process.
    res["rss_mib"] = max(res["tree_pss_peak_mib"], res["ru_maxrss_mib"])
    return res


# ---------------------------------------------------------------------------------------------
# Tools


def count_changes(tool: str, text: str) -> dict:
    """Changed/failed counts from a tool's output (None where it cannot be read)."""
    if tool in ("kwin", "kwin-base"):
        for line in reversed(text.splitlines()):
            try:
                ev = json.loads(line)
            except ValueError:
                continue
            if isinstance(ev, dict) and ev.get("event") == "summary":
                return {"changed": ev.get("changed"), "failed": ev.get("failed"),
                        "ok": ev.get("ok")}
        return {"changed": None, "failed": None}
    if tool == "ansible":
        changed = failed = 0
        found = False
        for m in re.finditer(r"^\S+\s+:\s+ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+"
                             r"failed=(\d+)", text, re.M):
            found = True
            changed += int(m.group(2))
            failed += int(m.group(3)) + int(m.group(4))
        return {"changed": changed, "failed": failed} if found else {"changed": None, "failed": None}
    if tool == "pyinfra":
        # Results table, last line: "Grand total   HOSTS×OPS   SUCCESS   ERROR   NO CHANGE"
        # (SUCCESS counts operations that changed something; "-" is 0).
        m = re.search(r"Grand total\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)", text)
        if not m:
            return {"changed": None, "failed": None}
        v = [0 if x == "-" else int(x) for x in m.groups()]
        return {"changed": v[1], "failed": v[2], "ok": v[3]}
    if tool in ("floor", "floor-filelogin", "floor-libssh"):
        for line in text.splitlines():
            if line.startswith('{"hosts"'):
                ev = json.loads(line)
                return {"hosts_ok": ev.get("ok"), "failed_sample": ev.get("failed", [])[:3]}
    return {}


class Runner:
    def __init__(self, a, lab: Lab, work: Path, out: Path, cg: Path | None, v2: bool):
        self.a, self.lab, self.work, self.out, self.cg, self.v2 = a, lab, work, out, cg, v2
        self.kwin = a.kwin
        # reset.sh/check.sh do not depend on the delay: any generated copy will do.
        self.remote = next(work.glob("d*/remote"))
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(("ANSIBLE_", "PYINFRA_"))}
        self.env["PATH"] = f"{VENV / 'bin'}:{self.env.get('PATH', '/usr/bin:/bin')}"
        self.env.setdefault("LANG", "C.UTF-8")

    def command(self, tool: str, d: int, tmp: Path) -> tuple[list[str], Path, dict, object]:
        n = self.lab.n
        w = self.work / f"d{d}"
        env = dict(self.env)
        after = None
        if tool in ("kwin", "kwin-base"):
            exe = self.kwin if tool == "kwin" else self.a.kwin_base
            return ([str(exe), "apply", "plan.toml", "--output", "json",
                     "--parallelism", str(n)], w / "kwin", env, None)
        if tool == "ansible":
            # Unix socket paths are limited to 108 bytes: keep the ControlPath short.
            cp = Path(tempfile.mkdtemp(prefix="kwb-cp-", dir="/tmp"))
            env.update({
                "ANSIBLE_CONFIG": str(w / "ansible" / "ansible.cfg"),
                "ANSIBLE_SSH_CONTROL_PATH_DIR": str(cp),
                "ANSIBLE_HOME": str(tmp / "home"),
                "ANSIBLE_LOCAL_TEMP": str(tmp / "local"),
                "ANSIBLE_FORCE_COLOR": "0",
                "ANSIBLE_NOCOLOR": "1",
            })

            def close_masters() -> None:
                for sock in cp.iterdir():
                    subprocess.run(["ssh", "-o", f"ControlPath={sock}", "-O", "exit", "x"],
                                   capture_output=True)
                shutil.rmtree(cp, ignore_errors=True)
            after = close_masters
            return ([str(VENV / "bin" / "ansible-playbook"), "-i", "inventory.ini", "site.yml"],
                    w / "ansible", env, after)
        if tool == "pyinfra":
            env["PYINFRA_PROGRESS"] = "off"
            return ([str(VENV / "bin" / "pyinfra"), "-y", "--parallel", str(n),
                     "inventory.py", "deploy.py"], w / "pyinfra", env, None)
        if tool in ("floor", "floor-filelogin", "floor-libssh"):
            # ONE process, a connection to every host at once (libssh2 through the ssh2 crate,
            # kwin's library; or libssh): kex curve25519-sha256, the host's ed25519 key checked
            # against known_hosts, key login (kwin's, or libssh2's own for floor-filelogin),
            # exec `true`, every exit status checked.
            exe = FLOOR_LIBSSH if tool == "floor-libssh" else FLOOR_SSH2
            login = ["--login", "file"] if tool == "floor-filelogin" else []
            inv = tomllib.loads((LAB_DIR / ("hosts-delay.toml" if d else "hosts.toml")).read_text())
            addrs = [f"{h['address']}:{h['port']}" for h in inv["hosts"]]
            return ([str(exe), "--key", str(LAB_DIR / "id_ed25519"), "--known-hosts",
                     str(LAB_DIR / "known_hosts")] + login + addrs, tmp, env, None)
        if tool == "floor-openssh":
            # one OpenSSH client process per host (the floor of the results up to 2026-11-28)
            cfg = str(LAB_DIR / "ssh_config")
            suffix = "-delay" if d else ""
            script = ('rc=0; pids=(); for h in "$@"; do ssh -F "$CFG" "$h" true & pids+=($!); done; '
                      'for p in "${pids[@]}"; do wait "$p" || rc=1; done; exit $rc')
            env["CFG"] = cfg
            return (["bash", "-c", script, "floor"] + [h + suffix for h in self.lab.names],
                    tmp, env, None)
        raise ValueError(tool)

    def run(self, tool: str, d: int, mode: str, rep: int) -> dict:
        tmp = Path(tempfile.mkdtemp(prefix=f"kwb-{tool}-", dir=self.out / "tmp"))
        cmd, cwd, env, after = self.command(tool, d, tmp)
        logp = self.out / "logs" / f"n{self.lab.n}-d{d}-{tool}-{mode}-r{rep}.log"
        r = measure(self.lab, cmd, cwd=cwd, env=env, log_path=logp, timeout=self.a.timeout,
                    cg_root=self.cg, v2=self.v2, after=after)
        r.update({"n": self.lab.n, "d": d, "tool": tool, "mode": mode, "rep": rep,
                  "log": str(logp.relative_to(self.out))})
        r.update(count_changes(tool, logp.read_text(errors="replace")))
        shutil.rmtree(tmp, ignore_errors=True)
        return r

    def record(self, r: dict) -> None:
        with open(self.out / "runs.jsonl", "a") as f:
            f.write(json.dumps(r) + "\n")
        ch = r.get("changed")
        log(f"n={r['n']} d={r['d']} {r['tool']:8} {r['mode']:5} rep {r['rep']}: "
            f"wall {r['wall']:.2f}s ctl {r['ctl_cpu']:.2f}s hosts {r['host_cpu']:.2f}s "
            f"rss {r['rss_mib']:.0f}MiB exit {r['exit']}"
            + (f" changed {ch}" if ch is not None else "") + f" load {r['load_before']:.1f}")

    def reset(self) -> None:
        res = self.lab.ssh_all((self.remote / "reset.sh").read_text())
        bad = [h for h, o in res.items() if not o.endswith("RESET")]
        if bad:
            raise SystemExit(f"bench: reset failed on {bad[:5]}: {res[bad[0]]}")

    def check(self) -> list[str]:
        res = self.lab.ssh_all((self.remote / "check.sh").read_text())
        return [f"{h}: {o}" for h, o in res.items() if o != "OK"]


def gen_workloads(lab: Lab, work: Path, delays: list[int]) -> None:
    for d in delays:
        inv = LAB_DIR / ("hosts-delay.toml" if d else "hosts.toml")
        subprocess.run([sys.executable, str(REPO / "bench" / "workload" / "gen.py"),
                        "--inventory", str(inv), "--known-hosts", str(LAB_DIR / "known_hosts"),
                        "--collections", str(VENV / "collections"), "--out", str(work / f"d{d}")],
                       check=True)


def machine_info(kwin: Path) -> dict:
    mem = 0
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            mem = int(line.split()[1])
    cpu = ""
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break

    def ver(cmd: list[str]) -> str:
        try:
            return subprocess.run(cmd, capture_output=True, text=True).stdout.strip().splitlines()[0]
        except (OSError, IndexError):
            return "?"
    return {
        "nproc": os.cpu_count(),
        "mem_gib": round(mem / 1024 / 1024, 1),
        "cpu": cpu,
        "kernel": os.uname().release,
        "os": next((l.split("=", 1)[1].strip('"') for l in Path("/etc/os-release").read_text()
                    .splitlines() if l.startswith("PRETTY_NAME=")), "?"),
        "load_start": Path("/proc/loadavg").read_text().split()[:3],
        "openssh": subprocess.run(["ssh", "-V"], capture_output=True, text=True).stderr.strip(),
        "kwin": ver([str(kwin), "--version"]).removeprefix("kwin "),
        "kwin_commit": ver(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"]),
        "ansible": ver([str(VENV / "bin" / "ansible"), "--version"]),
        "pyinfra": ver([str(VENV / "bin" / "pyinfra"), "--version"]),
        "python": ver([str(VENV / "bin" / "python"), "--version"]),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--n", default="50", help="host counts, comma-separated (default 50)")
    ap.add_argument("--delay", default="0,25", help="delays in ms, comma-separated (default 0,25)")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--tool-reps", default="",
                    help="fewer repetitions for some tools, e.g. ansible=1 (slow tools on a small machine)")
    ap.add_argument("--tools", default=",".join(TOOLS))
    ap.add_argument("--ansible-n", default="50",
                    help="the host counts Ansible runs at, comma-separated (default 50: an Ansible "
                         "run at N = 50 takes minutes on 2 cores, at 200 or 500 most of an hour)")
    ap.add_argument("--modes", default="cold,warm")
    ap.add_argument("--out", type=Path, required=True, help="directory for runs.jsonl and logs")
    ap.add_argument("--timeout", type=float, default=1200, help="seconds per tool run")
    ap.add_argument("--keep-lab", action="store_true", help="leave the last lab up")
    ap.add_argument("--kwin", type=Path, default=REPO / "target" / "release" / "kwin",
                    help="the kwin binary (default target/release/kwin)")
    ap.add_argument("--kwin-base", type=Path,
                    help="tool kwin-base: another kwin binary (an earlier build), run interleaved "
                         "with kwin to compare the two on the same lab and load")
    a = ap.parse_args()
    ns = [int(x) for x in a.n.split(",")]
    delays = sorted({int(x) for x in a.delay.split(",")})
    tools = [t for t in a.tools.split(",") if t]
    if "kwin-base" in tools and not (a.kwin_base and a.kwin_base.exists()):
        sys.exit("harness: tool kwin-base needs --kwin-base PATH (an existing kwin binary)")
    modes = [m for m in a.modes.split(",") if m]
    for t in tools:
        if t not in TOOLS:
            ap.error(f"unknown tool {t}")
    tool_reps = {t: a.reps for t in tools}
    for item in filter(None, a.tool_reps.split(",")):
        t, _, r = item.partition("=")
        if t not in TOOLS or not r.isdigit():
            ap.error(f"bad --tool-reps entry {item}")
        tool_reps[t] = min(int(r), a.reps)
    ansible_ns = {int(x) for x in a.ansible_n.split(",") if x}
    nonzero = [d for d in delays if d]
    if len(nonzero) > 1:
        ap.error("one non-zero delay per invocation (the lab runs one delay proxy)")
    if os.geteuid() != 0:
        ap.error("must run as root (the lab needs it)")
    # SIGTERM/SIGHUP (e.g. a timeout around the run) unwind like Ctrl-C: the lab is taken
    # down and the accounting groups removed in the `finally` blocks.
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda num, _f: sys.exit(128 + num))

    a.out.mkdir(parents=True, exist_ok=True)
    (a.out / "logs").mkdir(exist_ok=True)
    (a.out / "tmp").mkdir(exist_ok=True)
    cg = cgroup_root()
    cg_path, v2 = (cg if cg else (None, False))
    info = machine_info(a.kwin)
    info.update({"cgroup": (f"{'v2' if v2 else 'v1 cpuacct'} {cg_path}" if cg_path else "none (/proc)"),
                 "args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(a).items()}, "started": time.strftime("%Y-%m-%d %H:%M:%S")})
    (a.out / "machine.json").write_text(json.dumps(info, indent=1) + "\n")
    log(f"machine: {info['nproc']} cpus, {info['mem_gib']} GiB, kernel {info['kernel']}, "
        f"load {' '.join(info['load_start'])}; accounting: {info['cgroup']}")

    failures = 0
    for n in ns:
        lab = Lab(n, nonzero[0] if nonzero else 0, cg_path, v2)
        lab.up()
        try:
            work = a.out / "work" / f"n{n}"
            gen_workloads(lab, work, delays)
            runner = Runner(a, lab, work, a.out, cg_path, v2)
            for d in delays:
                for rep in range(a.reps):
                    order = tools[rep % len(tools):] + tools[:rep % len(tools)]
                    for tool in order:
                        if rep >= tool_reps.get(tool, a.reps):
                            continue
                        if tool == "ansible" and n not in ansible_ns:
                            if rep == 0 and d == delays[0]:
                                log(f"n={n}: Ansible runs only at N in {sorted(ansible_ns)} (--ansible-n)")
                            continue
                        if tool.startswith("floor"):
                            r = runner.run(tool, d, "-", rep)
                            runner.record(r)
                            if r["exit"] != 0:
                                failures += 1
                            continue
                        if "cold" in modes:
                            runner.reset()
                            r = runner.run(tool, d, "cold", rep)
                            bad = runner.check()
                            r["check_failures"] = len(bad)
                            if bad:
                                r["check_sample"] = bad[:3]
                                log(f"state check failed on {len(bad)} hosts after {tool}: {bad[:2]}")
                                failures += 1
                            runner.record(r)
                        elif rep == 0:
                            # warm only: converge once first, unmeasured
                            runner.reset()
                            runner.run(tool, d, "prime", rep)
                        if "warm" in modes:
                            r = runner.run(tool, d, "warm", rep)
                            if r.get("changed") not in (0, None):
                                log(f"warm run of {tool} changed {r['changed']}")
                            runner.record(r)
                        if r["exit"] != 0:
                            failures += 1
        finally:
            if not (a.keep_lab and n == ns[-1]):
                lab.down()
            if cg_path:
                for sub in ("hosts", "proxy"):
                    Cgroup(cg_path / sub, v2).remove()
    if cg_path:
        Cgroup(cg_path, v2).remove()
    shutil.rmtree(a.out / "tmp", ignore_errors=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
