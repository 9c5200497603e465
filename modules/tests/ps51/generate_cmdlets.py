#!/usr/bin/env python3
"""Regenerate modules/tests/ps51/cmdlets.tsv: the cmdlets of Windows PowerShell 5.1 on Windows
Server 2019 and their parameter names, from Microsoft's published cmdlet reference.

Sources (git repositories, read with `git show`, no work tree needed):

  MicrosoftDocs/PowerShell-Docs          reference/5.1/<module>/<cmdlet>.md
      the modules that ship with Windows PowerShell 5.1 (Core, Management, Utility, ...).
  MicrosoftDocs/windows-powershell-docs  docset/winserver2019-ps/<module>/<cmdlet>.md
      the Windows Server 2019 modules listed in WS2019_MODULES below.
  MicrosoftDocs/windows-powershell-docs  docset/winserver2025-ps/HostNetworkingService/...
      Get-HnsNetwork & co. are documented for Windows Server 2025 only: they are recorded with
      availability `ws2025`, which the profile test refuses (kwin supports Windows Server 2019
      and 2022 and talks to HNS through plans/lib/hns.ps1).

Each cmdlet page has `### -Parameter` headings under `## PARAMETERS` (plus `### CommonParameters`
when the cmdlet takes the common parameters) and its aliases in the front matter.

Usage:
  python3 modules/tests/ps51/generate_cmdlets.py \
      [--powershell-docs /work/.mirror/MicrosoftDocs+PowerShell-Docs/repo] \
      [--windows-docs /work/.mirror/MicrosoftDocs+windows-powershell-docs/repo] \
      > modules/tests/ps51/cmdlets.tsv
"""

import argparse
import re
import subprocess
import sys

# Windows PowerShell 5.1 modules of PowerShell-Docs left out: the ISE's own cmdlets exist only
# inside powershell_ise.exe, never in a remote session.
PS51_SKIP = {"ISE"}

# Windows Server 2019 modules kwin's scripts may use (networking, storage, features, firewall,
# certificates, Defender exclusions, scheduled tasks, containers).
WS2019_MODULES = [
    "BitsTransfer",
    "Defender",
    "DISM",
    "DnsClient",
    "HostComputeService",
    "Microsoft.Windows.ServerManager.Migration",  # Install-WindowsFeature & co. (ServerManager)
    "NetAdapter",
    "NetConnection",
    "NetNat",
    "NetSecurity",
    "NetTCPIP",
    "NetworkConnectivityStatus",
    "pki",
    "ScheduledTasks",
    "Storage",
    "TLS",
]

WS2025_ONLY = [("winserver2025-ps", "HostNetworkingService")]


def git(repo, *args):
    return subprocess.run(
        ["git", "-C", repo, *args], check=True, capture_output=True, text=True
    ).stdout


def files(repo, prefix):
    out = git(repo, "ls-tree", "-r", "--name-only", "HEAD", prefix)
    return [f for f in out.splitlines() if f.endswith(".md")]


def front_matter(text):
    text = text.lstrip("\ufeff")
    m = re.match(r"---\n(.*?)\n---\n", text, re.S)
    if not m:
        return {}, []
    fields, aliases, in_aliases = {}, [], False
    for line in m.group(1).splitlines():
        if in_aliases and re.match(r"\s+-\s+", line):
            aliases.append(line.strip()[1:].strip())
            continue
        in_aliases = False
        k, _, v = line.partition(":")
        if k.strip() == "aliases":
            in_aliases = True
            continue
        fields[k.strip()] = v.strip()
    return fields, aliases


def param_aliases(block):
    """Aliases of one parameter: `Aliases: a, b` (PlatyPS 1) or `Aliases: []` / a `- a` list
    (PlatyPS 2024-05-01)."""
    m = re.search(r"^Aliases:[ \t]*(.*)$", block, re.M)
    if not m:
        return []
    v = m.group(1).strip()
    if v.startswith("["):
        return [a.strip() for a in v.strip("[]").split(",") if a.strip()]
    if v:
        return [a for a in re.split(r"[,\s]+", v) if a]
    rest = block[m.end():].splitlines()[1:]
    out = []
    for line in rest:
        if not line.startswith("- "):
            break
        out.append(line[2:].strip())
    return out


def accepted_values(block):
    """`Accepted values: A, B` (PlatyPS 1) or an `AcceptedValues:` list (PlatyPS 2024-05-01)."""
    m = re.search(r"^Accepted values:[ \t]*(.*)$", block, re.M)
    if m and m.group(1).strip():
        return [v.strip() for v in m.group(1).split(",") if v.strip()]
    m = re.search(r"^AcceptedValues:[ \t]*$", block, re.M)
    out = []
    if m:
        for line in block[m.end():].splitlines()[1:]:
            if not line.startswith("- "):
                break
            out.append(line[2:].strip())
    return out


def provider_dynamic_parameters(repo):
    """{cmdlet: [(parameter, provider)]} from the `## Dynamic parameters` sections of the 5.1
    about_*_Provider topics: provider parameters (New-Item -Address in WSMan:, -File in the
    file system, ...) that the cmdlet pages do not list."""
    out = {}
    for path in files(repo, "reference/5.1"):
        m = re.search(r"about_(\w+)_Provider\.md$", path)
        if not m:
            continue
        text = git(repo, "show", f"HEAD:{path}").lstrip("\ufeff")
        if "## Dynamic parameters" not in text:
            continue
        body = re.split(r"\n## ", text.split("## Dynamic parameters", 1)[1], 1)[0]
        for block in re.split(r"\n### ", body)[1:]:
            head = block.splitlines()[0]
            pm = re.match(r"(\w+)", head)
            if not pm or head.startswith("Cmdlets"):
                continue
            for cmdlet in re.findall(r"^- \[([A-Za-z]+-[A-Za-z]+)\]", block, re.M):
                out.setdefault(cmdlet.lower(), []).append((pm.group(1), m.group(1)))
    return out


def parse(text):
    """(title, module, aliases, params, param_aliases, common) of a cmdlet page, or None."""
    text = text.lstrip("\ufeff")
    fields, aliases = front_matter(text)
    title = fields.get("title", "")
    if not re.fullmatch(r"[A-Za-z]+-[A-Za-z0-9]+", title) or "## SYNTAX" not in text:
        return None
    params_section = text.split("## PARAMETERS", 1)
    params, palias, common, values = [], [], False, []
    if len(params_section) == 2:
        body = re.split(r"\n## ", params_section[1], 1)[0]
        for block in re.split(r"\n### ", "\n" + body)[1:]:
            head = block.splitlines()[0].strip()
            if head == "CommonParameters":
                common = True
            elif head.startswith("-"):
                name = head[1:].split()[0]
                params.append(name)
                for a in param_aliases(block):
                    palias.append(f"{name}={a}")
                accepted = accepted_values(block)
                if accepted:
                    values.append(f"{name}=" + "|".join(accepted))
    if "[<CommonParameters>]" in text:
        common = True
    return title, fields.get("Module Name", ""), aliases, params, palias, common, values


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--powershell-docs", default="/work/.mirror/MicrosoftDocs+PowerShell-Docs/repo")
    ap.add_argument("--windows-docs", default="/work/.mirror/MicrosoftDocs+windows-powershell-docs/repo")
    a = ap.parse_args()
    ps_commit = git(a.powershell_docs, "rev-parse", "HEAD").strip()
    win_commit = git(a.windows_docs, "rev-parse", "HEAD").strip()

    rows = {}

    def add(repo, path, availability):
        got = parse(git(repo, "show", f"HEAD:{path}"))
        if got is None:
            return
        title, module, aliases, params, palias, common, values = got
        key = title.lower()
        if key in rows:  # first source wins (5.1 reference before the Server docs)
            return
        rows[key] = (title, module, availability, params, aliases, palias, common, path, values)

    for path in files(a.powershell_docs, "reference/5.1"):
        if path.split("/")[2] in PS51_SKIP:
            continue
        add(a.powershell_docs, path, "5.1")
    # Provider dynamic parameters join their cmdlet's parameters as `Name@Provider`.
    for cmdlet, params in provider_dynamic_parameters(a.powershell_docs).items():
        if cmdlet in rows:
            row = list(rows[cmdlet])
            known = {p.lower() for p in row[3]}
            row[3] = row[3] + sorted({f"{p}@{prov}" for p, prov in params if p.lower() not in known})
            rows[cmdlet] = tuple(row)
    for module in WS2019_MODULES:
        for path in files(a.windows_docs, f"docset/winserver2019-ps/{module}/"):
            add(a.windows_docs, path, "ws2019")
    for docset, module in WS2025_ONLY:
        for path in files(a.windows_docs, f"docset/{docset}/{module}/"):
            add(a.windows_docs, path, "ws2025")

    # The common parameters, from about_CommonParameters of the 5.1 reference; a parameter
    # whose own section says it was added in PowerShell 7 is left out (ProgressAction, 7.4).
    about = "reference/5.1/Microsoft.PowerShell.Core/About/about_CommonParameters.md"
    text = git(a.powershell_docs, "show", f"HEAD:{about}")
    listed = re.findall(r"^- `(\w+)` \(`?(\w+)`?\)$", text, re.M)
    common, left_out = [], []
    for name, alias in listed:
        if name in ("WhatIf", "Confirm"):  # risk mitigation parameters: listed per cmdlet
            continue
        section = re.split(r"\n### ", text.split(f"### -{name}\n", 1)[-1], 1)[0] if f"### -{name}\n" in text else ""
        if re.search(r"added in\s+PowerShell\s+[67]", section):
            left_out.append(name)
        else:
            common.append(f"{name}={alias}")

    out = sys.stdout
    out.write("# Cmdlets of Windows PowerShell 5.1 on Windows Server 2019 and their parameter names.\n")
    out.write("# Generated by modules/tests/ps51/generate_cmdlets.py; do not edit by hand.\n")
    out.write(f"# source: MicrosoftDocs/PowerShell-Docs {ps_commit} reference/5.1 (all modules but {', '.join(sorted(PS51_SKIP))})\n")
    out.write(f"# source: MicrosoftDocs/windows-powershell-docs {win_commit} docset/winserver2019-ps: {', '.join(WS2019_MODULES)}\n")
    out.write(f"# source: MicrosoftDocs/windows-powershell-docs {win_commit} docset/winserver2025-ps/HostNetworkingService (availability `ws2025`: documented for Windows Server 2025 only, refused by the profile)\n")
    out.write(f"# common parameters: {about}; left out (added in PowerShell 7): {', '.join(left_out)}\n")
    out.write("\t".join(["<common>", "", "5.1", ",".join(c.split("=")[0] for c in common), "", ",".join(common), "n", about, ""]) + "\n")
    out.write("# dynamic parameters: reference/5.1/*/About/about_*_Provider.md, `## Dynamic parameters` (written Name@Provider)\n")
    out.write("# columns: cmdlet, module, availability (5.1 | ws2019 | ws2025), parameters, cmdlet aliases, parameter aliases (Param=Alias), common parameters (y/n), source path, accepted values (Param=A|B;...)\n")
    for key in sorted(rows):
        title, module, availability, params, aliases, palias, common, path, values = rows[key]
        out.write("\t".join([
            title, module, availability, ",".join(params), ",".join(aliases),
            ",".join(palias), "y" if common else "n", path, ";".join(values),
        ]) + "\n")


if __name__ == "__main__":
    main()
