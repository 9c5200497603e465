#!/usr/bin/env python3
"""What kwin's remote scripts cost a host: processes spawned, CPU, bytes sent back.

    bench/script_cost.py HOST_LOG [--state cold|warm]      (as root)

HOST_LOG is one host's log of a kwin run (`.kwin/logs/<run-id>/<host>.log` next to the plan,
e.g. under target/bench/<stamp>/work/n50/d0/kwin/). Every `run #k` script in it is replayed in
order, locally, inside a private mount + network namespace where /srv and /etc/sysctl.d are
empty tmpfs (nothing of this machine is touched), starting from the benchmark workload's cold
state (reset.sh) or its converged state (`--state warm`). For each script: forks (clone) and
execs counted with strace -f, user+sys CPU of the shell and its children, and output size.

This is the host-side half of "where the time goes": the lab's hosts share the controller's
cores, so every process a script spawns on 50 hosts is paid for in the run's wall time.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.dont_write_bytecode = True  # no __pycache__ in the work tree
sys.path.insert(0, str(HERE / "workload"))
import gen  # noqa: E402


def scripts(log: Path) -> list[tuple[str, str]]:
    out, cur, head = [], None, None
    for line in log.read_text(errors="replace").splitlines():
        m = re.match(r"^\[\+[\d.]+s\] run #(\d+) (.*)$", line)
        if m and " exit " not in line[:40] and not m.group(2).startswith("exit"):
            cur, head = [], f"run #{m.group(1)} {m.group(2)}"
            continue
        if re.match(r"^\[\+[\d.]+s\] run #\d+ exit", line):
            if cur is not None:
                out.append((head, "\n".join(cur) + "\n"))
            cur = None
            continue
        if cur is not None and line.startswith("    $ "):
            cur.append(line[6:])
        elif cur is not None and line == "    $":
            cur.append("")
    return out


def warm_state() -> str:
    """A shell script writing the workload's converged state."""
    w = gen.WORKLOAD
    sh = ["set -e", gen.reset_script()]
    for d in w["directories"]:
        sh.append(f"mkdir -p {d['path']} && chmod {d['mode']} {d['path']}")
    for f in w["files"]:
        sh.append(f"printf '%s' {gen.sh(f['content'])} > {f['path']} && chmod {f['mode']} {f['path']}")
    for ln in w["lines"]:
        if ln["regexp"]:
            sh.append(f"sed -i 's/{ln['regexp']}.*/{ln['line']}/' {ln['path']}")
        else:
            sh.append(f"echo {gen.sh(ln['line'])} >> {ln['path']}")
    for s in w["sysctls"]:
        sh.append(f"printf '# managed by kwin\\n%s = %s\\n' {s['key']} {s['value']} > {s['file']}")
        sh.append(f"echo {s['value']} > /proc/sys/{s['key'].replace('.', '/')}")
    for c in w["commands"]:
        sh.append(f"echo x > {c['creates']}")
    return "\n".join(sh) + "\n"


def inner(args) -> int:
    """Runs inside the namespaces."""
    subprocess.run(["mount", "--make-rprivate", "/"], check=True)
    for d in ("/srv", "/etc/sysctl.d"):
        subprocess.run(["mount", "-t", "tmpfs", "none", d], check=True)
    setup = gen.reset_script() if args.state == "cold" else warm_state()
    subprocess.run(["sh", "-c", setup], check=True, stdout=subprocess.DEVNULL)
    strace = shutil.which("strace")
    runs = scripts(Path(args.log))
    files = []
    for _, text in runs:
        with tempfile.NamedTemporaryFile("w", suffix=".sh", delete=False) as f:
            f.write(text)
        files.append(f.name)
    # Pass 1 counts processes (strace slows everything down); pass 2, from the same starting
    # state, measures CPU and output. Both run the scripts in order, as the host did.
    counts: list[tuple[int, int]] = []
    for fn in files:
        if not strace:
            counts.append((-1, -1))
            continue
        st = fn + ".st"
        subprocess.run([strace, "-f", "-qq", "-c", "-o", st, "-e",
                        "trace=execve,clone,clone3,fork,vfork", "sh", fn],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        c = {}
        for line in Path(st).read_text().splitlines():
            p = line.split()
            if p and p[-1] in ("execve", "clone", "clone3", "fork", "vfork"):
                c[p[-1]] = int(p[3])
        os.unlink(st)
        counts.append((sum(v for k, v in c.items() if k != "execve"), c.get("execve", 0)))
    subprocess.run(["sh", "-c", setup], check=True, stdout=subprocess.DEVNULL)
    print(f"{'script':72} {'bytes':>7} {'forks':>6} {'execs':>6} {'CPU ms':>7} {'out B':>7}")
    tot = [0, 0, 0.0, 0]
    for (head, text), fn, (forks, execs) in zip(runs, files, counts):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        r = subprocess.run(["sh", fn], capture_output=True)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) * 1000
        os.unlink(fn)
        out = len(r.stdout) + len(r.stderr)
        print(f"{head[:72]:72} {len(text):7} {forks:6} {execs:6} {cpu:7.1f} {out:7}")
        tot = [tot[0] + max(forks, 0), tot[1] + max(execs, 0), tot[2] + cpu, tot[3] + out]
    print(f"{'total':72} {'':7} {tot[0]:6} {tot[1]:6} {tot[2]:7.1f} {tot[3]:7}")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("log", type=Path)
    ap.add_argument("--state", choices=("cold", "warm"), default="warm")
    ap.add_argument("--inner", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.inner:
        return inner(a)
    if os.geteuid() != 0:
        ap.error("run as root (private namespaces)")
    return subprocess.run(["unshare", "-m", "-n", sys.executable, __file__, "--inner",
                           "--state", a.state, str(a.log.resolve())]).returncode


if __name__ == "__main__":
    sys.exit(main())
