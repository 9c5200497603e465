#!/usr/bin/env python3
"""Write the benchmark workload for kwin, Ansible and pyinfra, plus the host reset and check
scripts, for the lab hosts of one inventory.

    gen.py --inventory target/lab/hosts.toml --known-hosts target/lab/known_hosts \
           --out target/bench/work/n50-d0 [--collections DIR]

The workload is defined once (WORKLOAD below) and rendered three times:

    OUT/kwin/plan.toml          kwin plan: [[tasks]] on every host
    OUT/ansible/ansible.cfg     fast settings (pipelining, ControlPersist, forks = N, ...)
    OUT/ansible/inventory.ini
    OUT/ansible/site.yml        gather_facts: false, strategy: linear
    OUT/pyinfra/inventory.py
    OUT/pyinfra/deploy.py
    OUT/remote/reset.sh         makes a host "cold" again (run as `sh -s` over ssh)
    OUT/remote/check.sh         prints OK when a host is in the desired state, else what differs

Per host: 20 tasks — 4 directories, 8 files, 4 lines in files, 2 sysctl keys (live value and
a file under /etc/sysctl.d), 2 commands guarded by `creates`. See bench/README.md for how each
tool expresses them.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import tomllib
from pathlib import Path

ROOT = "/srv/bench"


def _file_content(i: int) -> str:
    """Deterministic config-like text, 0.5 to 4 KiB."""
    lines = [f"# app-{i}.conf: managed by the benchmark workload", f"[section-{i}]"]
    n = 12 * i
    for k in range(n):
        lines.append(f"option_{i}_{k:03d} = value-{(i * 7919 + k * 104729) % 100000:05d}")
    return "\n".join(lines) + "\n"


LINE_FIXTURE = "# svc-{i}.conf (fixture written by reset.sh)\nlisten_port = 80\nworkers = 2\n"

WORKLOAD = {
    "directories": [
        {"name": "dir-conf", "path": f"{ROOT}/conf.d", "mode": "0755"},
        {"name": "dir-data", "path": f"{ROOT}/data", "mode": "0750"},
        {"name": "dir-state", "path": f"{ROOT}/state", "mode": "0700"},
        {"name": "dir-log", "path": f"{ROOT}/log", "mode": "0755"},
    ],
    "files": [
        {
            "name": f"file-app-{i}",
            "path": f"{ROOT}/conf.d/app-{i}.conf",
            "content": _file_content(i),
            "mode": "0640" if i % 4 == 0 else "0644",
        }
        for i in range(1, 9)
    ],
    # regexp: replace the matching line (or append when none matches); no regexp: append the
    # exact line when missing.
    "lines": [
        {"name": "line-svc-1-port", "path": f"{ROOT}/lines/svc-1.conf",
         "regexp": "^listen_port *=", "line": "listen_port = 8081"},
        {"name": "line-svc-2-workers", "path": f"{ROOT}/lines/svc-2.conf",
         "regexp": "^workers *=", "line": "workers = 8"},
        {"name": "line-svc-3-maxconn", "path": f"{ROOT}/lines/svc-3.conf",
         "regexp": None, "line": "max_connections = 512"},
        {"name": "line-svc-4-loglevel", "path": f"{ROOT}/lines/svc-4.conf",
         "regexp": None, "line": "log_level = info"},
    ],
    # Keys that are per network namespace, so writable inside a lab host. `reset` is the value
    # reset.sh sets, `value` the desired one.
    "sysctls": [
        {"name": "sysctl-ip-forward", "key": "net.ipv4.ip_forward", "value": "1", "reset": "0",
         "file": "/etc/sysctl.d/90-bench-ip_forward.conf"},
        {"name": "sysctl-accept-redirects", "key": "net.ipv4.conf.all.accept_redirects",
         "value": "0", "reset": "1", "file": "/etc/sysctl.d/90-bench-accept_redirects.conf"},
    ],
    "commands": [
        {"name": "command-token", "creates": f"{ROOT}/state/token",
         "run": f"umask 077; head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \\n' > {ROOT}/state/token"},
        {"name": "command-snapshot", "creates": f"{ROOT}/data/conf-snapshot.tar",
         "run": f"tar -C {ROOT}/conf.d -cf {ROOT}/data/conf-snapshot.tar ."},
    ],
}

TASKS_PER_HOST = sum(len(v) for v in WORKLOAD.values())
# kwin task names are references (`after`): no whitespace, `.`, `:`, `/` or `@`.
assert TASKS_PER_HOST == 20


# ---------------------------------------------------------------------------------------------
# Quoting helpers (no third-party libraries: TOML and YAML are written by hand, as JSON-style
# strings, which both formats accept).


def q(s: str) -> str:
    """A double-quoted string valid in TOML basic strings, YAML and Python."""
    return json.dumps(s, ensure_ascii=False)


def sh(s: str) -> str:
    return "'" + s.replace("'", "'\\''") + "'"


# ---------------------------------------------------------------------------------------------


def read_inventory(path: Path) -> list[dict]:
    with open(path, "rb") as f:
        hosts = tomllib.load(f)["hosts"]
    if not hosts:
        sys.exit(f"gen.py: no hosts in {path}")
    return hosts


def kwin_plan(inventory: Path, hosts: list[dict]) -> str:
    w = WORKLOAD
    out = [
        "# Benchmark workload (bench/workload/gen.py): 20 tasks on every host.",
        f"inventory = {q(str(inventory))}",
        "",
        "[settings]",
        f"parallelism = {len(hosts)}",
        "",
    ]
    for h in hosts:
        out += ["[[hosts]]", f"name = {q(h['name'])}", 'os = "linux"', ""]

    def task(name: str, module: str, params: dict, after: list[str] | None = None) -> None:
        ps = ", ".join(f"{k} = {q(v)}" for k, v in params.items())
        out.extend(["[[tasks]]", f"name = {q(name)}", f"module = {q(module)}"])
        if after:
            out.append("after = [" + ", ".join(q(a) for a in after) + "]")
        out.extend([f"params = {{ {ps} }}", ""])

    for d in w["directories"]:
        task(d["name"], "directory",
             {"path": d["path"], "mode": d["mode"], "owner": "root", "group": "root"})
    for f in w["files"]:
        task(f["name"], "file", {"path": f["path"], "content": f["content"], "mode": f["mode"],
                                 "owner": "root", "group": "root"}, after=["dir-conf"])
    for ln in w["lines"]:
        p = {"path": ln["path"], "line": ln["line"]}
        if ln["regexp"]:
            p["regexp"] = ln["regexp"]
        task(ln["name"], "line_in_file", p)
    for s in w["sysctls"]:
        task(s["name"], "sysctl", {"key": s["key"], "value": s["value"], "file": s["file"]})
    # The snapshot command reads conf.d: it runs after the files, as in the other tools' order.
    for c in w["commands"]:
        after = ["dir-state"] if "state" in c["creates"] else [f["name"] for f in w["files"]]
        task(c["name"], "command", {"run": c["run"], "creates": c["creates"]}, after=after)
    return "\n".join(out)


def ansible_files(hosts: list[dict], known_hosts: Path, collections: Path | None) -> dict[str, str]:
    n = len(hosts)
    ssh_args = (
        "-o ControlMaster=auto -o ControlPersist=60s "
        "-o KexAlgorithms=curve25519-sha256 "
        f"-o UserKnownHostsFile={known_hosts} -o GlobalKnownHostsFile=/dev/null "
        "-o StrictHostKeyChecking=yes -o IdentitiesOnly=yes -o BatchMode=yes"
    )
    cfg = [
        "# Fast settings for the benchmark (bench/workload/gen.py).",
        "[defaults]",
        f"forks = {n}",
        "strategy = linear",
        "gathering = explicit",
        "host_key_checking = True",
        "interpreter_python = /usr/bin/python3",
        "retry_files_enabled = False",
        "stdout_callback = default",
        "nocows = True",
    ]
    if collections:
        cfg.append(f"collections_path = {collections}")
    cfg += [
        "",
        "[ssh_connection]",
        "pipelining = True",
        f"ssh_args = {ssh_args}",
        # control_path_dir is set per run through ANSIBLE_SSH_CONTROL_PATH_DIR.
        "control_path = %(directory)s/%%C",
        "",
    ]
    inv = ["[bench]"]
    for h in hosts:
        inv.append(
            f"{h['name']} ansible_host={h['address']} ansible_port={h.get('port', 22)} "
            f"ansible_user={h.get('user', 'root')} ansible_ssh_private_key_file={h['private_key']}"
        )
    w = WORKLOAD
    y = [
        "# Benchmark workload (bench/workload/gen.py): 20 tasks on every host.",
        "- hosts: bench",
        "  gather_facts: false",
        "  strategy: linear",
        "  tasks:",
    ]

    def task(name: str, module: str, params: dict) -> None:
        y.append(f"    - name: {q(name)}")
        y.append(f"      {module}:")
        for k, v in params.items():
            y.append(f"        {k}: {v if isinstance(v, bool) else q(v)}")

    for d in w["directories"]:
        task(d["name"], "ansible.builtin.file", {"path": d["path"], "state": "directory",
                                                  "mode": d["mode"], "owner": "root", "group": "root"})
    for f in w["files"]:
        task(f["name"], "ansible.builtin.copy", {"dest": f["path"], "content": f["content"],
                                                  "mode": f["mode"], "owner": "root", "group": "root"})
    for ln in w["lines"]:
        p = {"path": ln["path"], "line": ln["line"]}
        if ln["regexp"]:
            p["regexp"] = ln["regexp"]
        task(ln["name"], "ansible.builtin.lineinfile", p)
    for s in w["sysctls"]:
        task(s["name"], "ansible.posix.sysctl", {"name": s["key"], "value": s["value"],
                                                  "sysctl_file": s["file"], "sysctl_set": True,
                                                  "reload": False, "state": "present"})
    for c in w["commands"]:
        task(c["name"], "ansible.builtin.shell", {"cmd": c["run"], "creates": c["creates"]})
    return {"ansible.cfg": "\n".join(cfg), "inventory.ini": "\n".join(inv) + "\n",
            "site.yml": "\n".join(y) + "\n"}


def pyinfra_files(hosts: list[dict], known_hosts: Path) -> dict[str, str]:
    inv = ["# Benchmark inventory (bench/workload/gen.py).", "bench = ["]
    for h in hosts:
        data = {
            "ssh_hostname": h["address"],
            "ssh_port": h.get("port", 22),
            "ssh_user": h.get("user", "root"),
            "ssh_key": h["private_key"],
            "ssh_known_hosts_file": str(known_hosts),
            "ssh_strict_host_key_checking": "yes",
            "ssh_allow_agent": False,
            "ssh_look_for_keys": False,
        }
        inv.append(f"    ({q(h['name'])}, {data!r}),")
    inv.append("]")
    w = WORKLOAD
    d = [
        '"""Benchmark workload (bench/workload/gen.py): 20 operations on every host."""',
        "from io import StringIO",
        "",
        "from pyinfra import host",
        "from pyinfra.facts.files import File",
        "from pyinfra.operations import files, server",
        "",
    ]
    for x in w["directories"]:
        d.append(f"files.directory(name={q(x['name'])}, path={q(x['path'])}, "
                 f"mode={q(x['mode'][1:])}, user=\"root\", group=\"root\")")
    for f in w["files"]:
        d.append(f"files.put(name={q(f['name'])}, src=StringIO({q(f['content'])}), "
                 f"dest={q(f['path'])}, mode={q(f['mode'][1:])}, user=\"root\", group=\"root\")")
    for ln in w["lines"]:
        if ln["regexp"]:
            d.append(f"files.line(name={q(ln['name'])}, path={q(ln['path'])}, "
                     f"line={q(ln['regexp'])}, replace={q(ln['line'])})")
        else:
            d.append(f"files.line(name={q(ln['name'])}, path={q(ln['path'])}, "
                     f"line={q('^' + ln['line'] + '$')})")
    for s in w["sysctls"]:
        d.append(f"server.sysctl(name={q(s['name'])}, key={q(s['key'])}, value={s['value']}, "
                 f"persist=True, persist_file={q(s['file'])})")
    # pyinfra's server.shell has no `creates`: the idiom is a File fact check.
    for c in w["commands"]:
        d.append(f"if host.get_fact(File, path={q(c['creates'])}) is None:")
        d.append(f"    server.shell(name={q(c['name'])}, commands=[{q(c['run'])}])")
    return {"inventory.py": "\n".join(inv) + "\n", "deploy.py": "\n".join(d) + "\n"}


def reset_script() -> str:
    w = WORKLOAD
    out = ["# Make a host cold: remove what the workload manages, restore the line fixtures and",
           "# the sysctl values it changes. Run as root with `sh -s`.",
           "set -e",
           f"rm -rf {ROOT}",
           "rm -f " + " ".join(s["file"] for s in w["sysctls"]),
           f"mkdir -p {ROOT}/lines"]
    for ln in w["lines"]:
        i = ln["path"].rsplit("svc-", 1)[1].split(".")[0]
        out.append(f"printf '%s' {sh(LINE_FIXTURE.format(i=i))} > {ln['path']}")
    for s in w["sysctls"]:
        out.append(f"echo {s['reset']} > /proc/sys/{s['key'].replace('.', '/')}")
    out.append("echo RESET")
    return "\n".join(out) + "\n"


def check_script() -> str:
    """Checks the desired state, tool-neutrally (each tool writes sysctl files its own way)."""
    w = WORKLOAD
    out = ["# Print OK if this host is in the workload's desired state, else each difference.",
           "exec 2>/dev/null", "bad=0", "fail() { echo \"DIFF $*\"; bad=1; }",
           "mode() { stat -c '%a %U %G' \"$1\" 2>/dev/null; }"]
    for x in w["directories"]:
        out.append(f"[ -d {x['path']} ] && [ \"$(mode {x['path']})\" = "
                   f"{sh(x['mode'][1:] + ' root root')} ] || fail dir {x['path']}")
    for f in w["files"]:
        h = hashlib.sha256(f["content"].encode()).hexdigest()
        out.append(f"[ \"$(sha256sum < {f['path']} 2>/dev/null | cut -d' ' -f1)\" = {h} ] "
                   f"|| fail content {f['path']}")
        out.append(f"[ \"$(mode {f['path']})\" = {sh(f['mode'][1:] + ' root root')} ] "
                   f"|| fail mode {f['path']}")
    for ln in w["lines"]:
        out.append(f"grep -qxF {sh(ln['line'])} {ln['path']} || fail line {ln['path']}")
        if ln["regexp"]:
            out.append(f"[ \"$(grep -c {sh(ln['regexp'])} {ln['path']})\" = 1 ] "
                       f"|| fail regexp {ln['path']}")
    for s in w["sysctls"]:
        out.append(f"[ \"$(cat /proc/sys/{s['key'].replace('.', '/')})\" = {s['value']} ] "
                   f"|| fail live {s['key']}")
        k = s["key"].replace(".", "\\.")
        out.append(f"grep -qE {sh('^' + k + ' *= *' + s['value'] + '$')} {s['file']} "
                   f"|| fail persisted {s['key']}")
    for c in w["commands"]:
        out.append(f"[ -s {c['creates']} ] || fail command {c['creates']}")
    out.append("[ $bad = 0 ] && echo OK")
    out.append("exit 0")
    return "\n".join(out) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--inventory", required=True, type=Path)
    ap.add_argument("--known-hosts", required=True, type=Path)
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--collections", type=Path, help="Ansible collections path (ansible.posix)")
    a = ap.parse_args()
    inventory = a.inventory.resolve()
    known_hosts = a.known_hosts.resolve()
    hosts = read_inventory(inventory)
    files = {"kwin/plan.toml": kwin_plan(inventory, hosts) + "\n"}
    files.update({f"ansible/{k}": v for k, v in
                  ansible_files(hosts, known_hosts, a.collections.resolve() if a.collections else None).items()})
    files.update({f"pyinfra/{k}": v for k, v in pyinfra_files(hosts, known_hosts).items()})
    files["remote/reset.sh"] = reset_script()
    files["remote/check.sh"] = check_script()
    for rel, text in files.items():
        p = a.out / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    (a.out / "hosts.json").write_text(json.dumps(hosts, indent=1) + "\n")
    print(f"gen.py: {len(hosts)} hosts x {TASKS_PER_HOST} tasks -> {a.out}")


if __name__ == "__main__":
    os.umask(0o022)
    main()
