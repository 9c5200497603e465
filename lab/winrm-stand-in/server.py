#!/usr/bin/env python3
"""winrm-stand-in: a stand-in Windows host that speaks real WinRM.

It implements the WS-Management / Windows Remote Shell (WinRS) protocol
closely enough that unmodified WinRM clients (pywinrm, pypsrp) work against it:

* HTTP listener with NTLM (raw NTLM or SPNEGO-wrapped, via pyspnego's NTLM
  acceptor) and MS-WSMV message encryption (multipart/encrypted,
  application/HTTP-SPNEGO-session-encrypted); unencrypted requests after
  authentication are refused, as with Windows' default AllowUnencrypted=false.
* HTTPS listener (self-signed certificate kept in the state directory) with
  Basic and NTLM (channel binding tokens checked when the client sends them).
* WinRS shell operations Create, Command, Send, Receive (long poll with the
  w:TimedOut fault), Signal and Delete on the .../windows/shell/cmd resource.

Commands run as real child processes; PowerShell scripts are executed by
/bin/sh (this is a stand-in, not Windows). See README.md for the conventions
(simulated reboot, boot time) that kwin relies on.
"""

from __future__ import annotations

import argparse
import base64
import collections
import datetime
import hashlib
import hmac
import http.server
import ipaddress
import json
import os
import queue
import re
import select
import signal
import socket
import socketserver
import ssl
import struct
import subprocess
import sys
import tempfile
import threading
import time
import uuid
import xml.etree.ElementTree as ET
from xml.sax.saxutils import escape as xml_escape
from xml.sax.saxutils import quoteattr

HERE = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(os.path.dirname(HERE))

# --------------------------------------------------------------------------
# Protocol constants
# --------------------------------------------------------------------------

NS = {
    "s": "http://www.w3.org/2003/05/soap-envelope",
    "a": "http://schemas.xmlsoap.org/ws/2004/08/addressing",
    "x": "http://schemas.xmlsoap.org/ws/2004/09/transfer",
    "w": "http://schemas.dmtf.org/wbem/wsman/1/wsman.xsd",
    "p": "http://schemas.microsoft.com/wbem/wsman/1/wsman.xsd",
    "rsp": "http://schemas.microsoft.com/wbem/wsman/1/windows/shell",
    "f": "http://schemas.microsoft.com/wbem/wsman/1/wsmanfault",
    "wsmid": "http://schemas.dmtf.org/wbem/wsman/identity/1/wsmanidentity.xsd",
}

RESOURCE_CMD = "http://schemas.microsoft.com/wbem/wsman/1/windows/shell/cmd"
SHELL_NS = NS["rsp"]
ACT_CREATE = "http://schemas.xmlsoap.org/ws/2004/09/transfer/Create"
ACT_DELETE = "http://schemas.xmlsoap.org/ws/2004/09/transfer/Delete"
ACT_COMMAND = SHELL_NS + "/Command"
ACT_SEND = SHELL_NS + "/Send"
ACT_RECEIVE = SHELL_NS + "/Receive"
ACT_SIGNAL = SHELL_NS + "/Signal"
ACT_FAULT = "http://schemas.dmtf.org/wbem/wsman/1/wsman/fault"
ANONYMOUS = "http://schemas.xmlsoap.org/ws/2004/08/addressing/role/anonymous"
STATE_RUNNING = SHELL_NS + "/CommandState/Running"
STATE_DONE = SHELL_NS + "/CommandState/Done"
SIGNAL_TERMINATE = SHELL_NS + "/signal/terminate"
SIGNAL_CTRL_C = SHELL_NS + "/signal/ctrl_c"
SIGNAL_CTRL_BREAK = SHELL_NS + "/signal/ctrl_break"

ENC_BOUNDARY = b"Encrypted Boundary"
ENC_SPNEGO = "application/HTTP-SPNEGO-session-encrypted"
ENC_CONTENT_TYPE = 'multipart/encrypted;protocol="%s";boundary="Encrypted Boundary"' % ENC_SPNEGO
SOAP_CONTENT_TYPE = "application/soap+xml;charset=UTF-8"

# WSManFault codes (winerror.h / wsmerror.h values)
CODE_TIMED_OUT = 2150858793          # ERROR_WSMAN_OPERATION_TIMEDOUT
CODE_SHELL_NOT_FOUND = 2150858843    # "... the shell was not found on the server"
CODE_ACTION_NOT_SUPPORTED = 2150858771
CODE_RESOURCE_NOT_FOUND = 2150858752
CODE_SCHEMA = 2150858817             # ERROR_WSMAN_SCHEMA_VALIDATION_ERROR
CODE_ENVELOPE_LIMIT = 2150858825     # ERROR_WSMAN_SERVER_ENVELOPE_LIMIT
CODE_MAX_SHELLS = 2150859173         # ERROR_WSMAN_QUOTA_MAX_SHELLS
CODE_INVALID_PARAMETER = 87          # ERROR_INVALID_PARAMETER

CMD_LINE_LIMIT = 8191                # cmd.exe command-line limit
BOOT_MARKER = "# kwin:boot-time"
BOOT_ENV = "KWIN_STANDIN_BOOT_TIME"
OUTPUT_BUFFER_LIMIT = 4 * 1024 * 1024   # per command, before the child is throttled
MAX_HTTP_BODY = 64 * 1024 * 1024
KEEPALIVE_IDLE_SECS = 120            # http.sys default idle connection timeout
DEFAULT_IDLE_TIMEOUT = 7200.0        # winrm/config/winrs IdleTimeout default (s)

_log_lock = threading.Lock()
VERBOSE = False


def log(msg: str) -> None:
    with _log_lock:
        sys.stderr.write("winrm-stand-in: %s\n" % msg)
        sys.stderr.flush()


def vlog(msg: str) -> None:
    if VERBOSE:
        log(msg)


def emit(line: str) -> None:
    """A line on stdout, for harnesses (ready line and reboot notices)."""
    with _log_lock:
        try:
            sys.stdout.write(line + "\n")
            sys.stdout.flush()
        except (OSError, ValueError):
            pass  # nobody reads stdout any more; keep serving


def utc_now_iso() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_iso(value: str) -> datetime.datetime:
    v = value.strip()
    if v.endswith("Z"):
        v = v[:-1] + "+00:00"
    dt = datetime.datetime.fromisoformat(v)
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=datetime.timezone.utc)
    return dt.astimezone(datetime.timezone.utc)


def fmt_iso(dt: datetime.datetime) -> str:
    return dt.astimezone(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


_DURATION = re.compile(
    r"^P(?:(?P<d>\d+)D)?(?:T(?:(?P<h>\d+)H)?(?:(?P<m>\d+)M)?(?:(?P<s>\d+(?:\.\d*)?)S)?)?$"
)


def parse_duration(text: str | None) -> float | None:
    """xs:duration (the subset WS-Man uses: PnDTnHnMn.nS) to seconds."""
    if not text:
        return None
    m = _DURATION.match(text.strip())
    if not m or text.strip() in ("P", "PT"):
        return None
    d, h, mi, s = (m.group(k) for k in ("d", "h", "m", "s"))
    return int(d or 0) * 86400 + int(h or 0) * 3600 + int(mi or 0) * 60 + float(s or 0)


def fmt_duration(secs: float) -> str:
    return "PT%.3fS" % secs


def new_id() -> str:
    return str(uuid.uuid4()).upper()


def addr_str(host: str, port: int) -> str:
    return "[%s]:%d" % (host, port) if ":" in host else "%s:%d" % (host, port)


def parse_listen(value: str, default_port: int) -> tuple[str, int]:
    v = value.strip()
    if v.startswith("["):
        end = v.find("]")
        if end < 0:
            raise argparse.ArgumentTypeError("bad address %r" % value)
        host, rest = v[1:end], v[end + 1:]
        port = int(rest[1:]) if rest.startswith(":") else default_port
    elif v.count(":") == 1:
        host, p = v.split(":")
        port = int(p)
    else:
        host, port = v, default_port
    ipaddress.ip_address(host)  # must be a literal address
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError("bad port in %r" % value)
    return host, port


# --------------------------------------------------------------------------
# Faults
# --------------------------------------------------------------------------


class WSManFault(Exception):
    def __init__(self, subcode: str, code: int, reason: str, sender: bool = True):
        super().__init__(reason)
        self.subcode = subcode
        self.code = code
        self.reason = reason
        self.sender = sender


def fault_shell_not_found(shell_id: str) -> WSManFault:
    return WSManFault(
        "w:InvalidSelectors",
        CODE_SHELL_NOT_FOUND,
        "The request for the Windows Remote Shell with ShellId %s failed because the shell was not "
        "found on the server. Possible causes are: the specified ShellId is incorrect or the shell no "
        "longer exists on the server. Provide the correct ShellId or create a new shell and retry the "
        "operation. " % shell_id,
    )


def fault_invalid_parameter(detail: str = "") -> WSManFault:
    return WSManFault("w:InvalidParameter", CODE_INVALID_PARAMETER, "The parameter is incorrect. " + detail)


def fault_timed_out() -> WSManFault:
    return WSManFault(
        "w:TimedOut",
        CODE_TIMED_OUT,
        "The WS-Management service cannot complete the operation within the time specified in "
        "OperationTimeout.  ",
        sender=False,
    )


# --------------------------------------------------------------------------
# SOAP envelopes
# --------------------------------------------------------------------------

_ENVELOPE_OPEN = (
    '<s:Envelope xml:lang="en-US" xmlns:s="%(s)s" xmlns:a="%(a)s" xmlns:x="%(x)s" '
    'xmlns:w="%(w)s" xmlns:rsp="%(rsp)s" xmlns:p="%(p)s">' % NS
)


def _created_shell(body: str) -> str | None:
    """The ShellId a Create reply names (for the operations log)."""
    m = re.search(r"<rsp:ShellId>([^<]+)</rsp:ShellId>", body)
    return m.group(1) if m else None


def envelope(action: str, relates_to: str | None, body: str) -> bytes:
    header = (
        "<s:Header><a:Action>%s</a:Action><a:MessageID>uuid:%s</a:MessageID>"
        "<a:To>%s</a:To>%s</s:Header>"
        % (
            xml_escape(action),
            new_id(),
            ANONYMOUS,
            "<a:RelatesTo>%s</a:RelatesTo>" % xml_escape(relates_to) if relates_to else "",
        )
    )
    body_xml = "<s:Body>%s</s:Body>" % body if body else "<s:Body/>"
    return (_ENVELOPE_OPEN + header + body_xml + "</s:Envelope>").encode("utf-8")


def fault_envelope(fault: WSManFault, relates_to: str | None, machine: str) -> bytes:
    body = (
        "<s:Fault><s:Code><s:Value>%s</s:Value><s:Subcode><s:Value>%s</s:Value></s:Subcode></s:Code>"
        '<s:Reason><s:Text xml:lang="en-US">%s</s:Text></s:Reason>'
        '<s:Detail><f:WSManFault xmlns:f="%s" Code="%d" Machine=%s><f:Message>%s</f:Message>'
        "</f:WSManFault></s:Detail></s:Fault>"
        % (
            "s:Sender" if fault.sender else "s:Receiver",
            xml_escape(fault.subcode),
            xml_escape(fault.reason),
            NS["f"],
            fault.code,
            quoteattr(machine),
            xml_escape(fault.reason),
        )
    )
    return envelope(ACT_FAULT, relates_to, body)


class SoapRequest:
    def __init__(self, raw: bytes):
        try:
            root = ET.fromstring(raw)
        except ET.ParseError as exc:
            raise WSManFault(
                "w:SchemaValidationError",
                CODE_SCHEMA,
                "The WS-Management service cannot process the request because the XML is invalid. (%s)" % exc,
            )
        if root.tag != "{%s}Envelope" % NS["s"]:
            raise WSManFault(
                "w:SchemaValidationError",
                CODE_SCHEMA,
                "The WS-Management service cannot process the request. The SOAP packet does not contain "
                "a SOAP 1.2 Envelope. ",
            )
        self.root = root
        self.header = root.find("s:Header", NS)
        self.body = root.find("s:Body", NS)
        h = self.header if self.header is not None else ET.Element("h")
        self.action = (h.findtext("a:Action", "", NS) or "").strip()
        self.message_id = (h.findtext("a:MessageID", "", NS) or "").strip() or None
        self.resource_uri = (h.findtext("w:ResourceURI", "", NS) or "").strip()
        self.to = (h.findtext("a:To", "", NS) or "").strip()
        self.operation_timeout = parse_duration(h.findtext("w:OperationTimeout", None, NS))
        try:
            self.max_envelope = int((h.findtext("w:MaxEnvelopeSize", "", NS) or "153600").strip())
        except ValueError:
            self.max_envelope = 153600
        self.selectors = {
            (sel.get("Name") or ""): (sel.text or "").strip() for sel in h.findall("w:SelectorSet/w:Selector", NS)
        }
        self.options = {
            (opt.get("Name") or "").upper(): (opt.text or "").strip() for opt in h.findall("w:OptionSet/w:Option", NS)
        }
        # What the operations log records beyond the operation itself (set by its handler).
        self.ops_fields: dict[str, str] = {}

    def body_child(self, tag: str):
        if self.body is None:
            return None
        return self.body.find(tag, NS)


# --------------------------------------------------------------------------
# Windows command-line handling
# --------------------------------------------------------------------------


def split_windows(cmdline: str) -> list[str]:
    """Split a command line the way CommandLineToArgvW / the MSVC runtime do."""
    args: list[str] = []
    i, n = 0, len(cmdline)
    while True:
        while i < n and cmdline[i] in " \t":
            i += 1
        if i >= n:
            break
        cur: list[str] = []
        in_quotes = False
        while i < n:
            c = cmdline[i]
            if c == "\\":
                j = i
                while j < n and cmdline[j] == "\\":
                    j += 1
                count = j - i
                if j < n and cmdline[j] == '"':
                    cur.append("\\" * (count // 2))
                    if count % 2:
                        cur.append('"')
                        i = j + 1
                    else:
                        i = j
                    continue
                cur.append("\\" * count)
                i = j
                continue
            if c == '"':
                if in_quotes and i + 1 < n and cmdline[i + 1] == '"':
                    cur.append('"')
                    i += 2
                    continue
                in_quotes = not in_quotes
                i += 1
                continue
            if c in " \t" and not in_quotes:
                break
            cur.append(c)
            i += 1
        args.append("".join(cur))
    return args


def exe_name(token: str) -> str:
    name = token.strip().strip('"').replace("/", "\\").split("\\")[-1].lower()
    return name[:-4] if name.endswith(".exe") else name


_PS_SWITCHES = ("noprofile", "noninteractive", "nologo", "noexit", "sta", "mta", "nop", "noni", "nol", "noe")
_PS_VALUE_PARAMS = (
    "executionpolicy", "inputformat", "outputformat", "windowstyle", "configurationname",
    "version", "psconsolefile", "workingdirectory", "encodedarguments", "settingsfile",
)
_PS_VALUE_ALIASES = ("ep", "ex", "if", "of", "w", "wd", "v", "ea")


def _ps_param(name: str) -> str | None:
    """Resolve a powershell.exe parameter (case-insensitive unique prefix)."""
    n = name.lower()
    if not n:
        return None
    if n in ("e", "ec") or (len(n) >= 2 and "encodedcommand".startswith(n)):
        return "encodedcommand"
    if n in ("c",) or (len(n) >= 2 and "command".startswith(n) and not "configurationname".startswith(n)):
        return "command"
    if n == "f" or (len(n) >= 2 and "file".startswith(n)):
        return "file"
    for sw in _PS_SWITCHES:
        if sw.startswith(n) and len(n) >= 3:
            return "switch"
    if n in ("sta", "mta"):
        return "switch"
    if n in _PS_VALUE_ALIASES:
        return "value"
    for vp in _PS_VALUE_PARAMS:
        if len(n) >= 2 and vp.startswith(n):
            return "value"
    return None


def normalise_script(text: str) -> str:
    if text.startswith("\ufeff"):
        text = text[1:]
    return text.replace("\r\n", "\n")


_RESTART_RE = re.compile(r"\s*Restart-Computer\s+-Force\s*", re.I)


def has_boot_marker(text: str) -> bool:
    return any(line.strip() == BOOT_MARKER for line in text.splitlines())


def marker_shutdown(text: str) -> "Plan | None":
    """kwin's reboot trigger is its boot-time query followed by a `shutdown.exe /r /t N ...`
    line (output piped to Out-Null). In a script carrying the boot-time marker, such a line
    is simulated as that command line would be; the script is still answered with the boot
    time only."""
    for line in text.splitlines():
        words = line.split("|", 1)[0].strip()
        if not words or words.startswith("#"):
            continue
        argv = split_windows(words)
        if argv and exe_name(argv[0]) == "shutdown":
            return plan_shutdown(argv)
    return None


# What the stand-in runs in place of a script carrying the boot-time marker: Windows answers
# kwin's boot-time query (a PowerShell one-liner reading LastBootUpTime) with one ISO-8601
# line, which /bin/sh could not produce from the PowerShell text itself.
BOOT_ANSWER = 'printf \'%s\\n\' "$KWIN_STANDIN_BOOT_TIME"\n'


class Plan:
    """What a WinRS Command turns into on this stand-in host."""

    def __init__(self, kind: str, **kw):
        self.kind = kind                          # exec | script | stdin-script | result
        self.argv: list[str] = kw.get("argv", [])
        self.script: str | None = kw.get("script")
        self.result: tuple[bytes, bytes, int] | None = kw.get("result")
        self.reboot_after: int | None = kw.get("reboot_after")
        self.abort_reboot: bool = kw.get("abort_reboot", False)
        self.boot_env: bool = kw.get("boot_env", False)


def plan_shutdown(argv: list[str]) -> Plan:
    flags: list[str] = []
    delay = 30
    i = 1
    while i < len(argv):
        tok = argv[i].lower()
        if tok[:1] in ("/", "-"):
            flag = tok[1:]
            if flag == "t" and i + 1 < len(argv):
                try:
                    delay = int(argv[i + 1])
                except ValueError:
                    return Plan("result", result=(b"", b"Invalid time-out value.\r\n", 87))
                i += 2
                continue
            flags.append(flag)
        i += 1
    if "a" in flags:
        return Plan("result", result=(b"", b"", 0), abort_reboot=True)
    if "r" in flags or "g" in flags:
        return Plan("result", result=(b"", b"", 0), reboot_after=max(1, delay))
    return Plan(
        "result",
        result=(b"", b"winrm-stand-in: only 'shutdown /r [/t N]' and 'shutdown /a' are simulated\r\n", 1),
    )


def plan_script(script: str) -> Plan:
    script = normalise_script(script)
    if _RESTART_RE.fullmatch(script):
        return Plan("result", result=(b"", b"", 0), reboot_after=1)
    boot = has_boot_marker(script)
    plan = Plan("script", script=script, boot_env=boot)
    shutdown = marker_shutdown(script) if boot else None
    if shutdown is not None:
        plan.reboot_after = shutdown.reboot_after
        plan.abort_reboot = shutdown.abort_reboot
    return plan


def plan_powershell(argv: list[str]) -> Plan:
    i = 1
    while i < len(argv):
        tok = argv[i]
        if tok[:1] in ("-", "/") and len(tok) > 1:
            kind = _ps_param(tok[1:])
            if kind == "switch":
                i += 1
                continue
            if kind == "value":
                i += 2
                continue
            if kind == "encodedcommand":
                if i + 1 >= len(argv):
                    return Plan("result", result=(b"", b"Cannot process the command because of a missing parameter.\r\n", 1))
                try:
                    b64 = argv[i + 1]
                    script = base64.b64decode(b64 + "=" * (-len(b64) % 4)).decode("utf-16-le")
                except Exception:
                    return Plan("result", result=(b"", b"Cannot process the command because the value specified with -EncodedCommand is not properly encoded.\r\n", 1))
                return plan_script(script)
            if kind == "command":
                rest = argv[i + 1:]
                if rest == ["-"] or not rest:
                    return Plan("stdin-script")
                return plan_script(" ".join(rest))
            if kind == "file":
                rest = argv[i + 1:]
                if not rest or rest[0] == "-":
                    return Plan("stdin-script")
                return Plan("exec", argv=["/bin/sh"] + rest)
        # first positional argument: the rest is the command text
        return plan_script(" ".join(argv[i:]))
    return Plan("stdin-script")


def _after_token(cmdline: str, token_index: int) -> str:
    """Raw text of a command line after its token_index-th token."""
    i, n = 0, len(cmdline)
    for _ in range(token_index + 1):
        while i < n and cmdline[i] in " \t":
            i += 1
        in_q = False
        while i < n and (in_q or cmdline[i] not in " \t"):
            if cmdline[i] == '"':
                in_q = not in_q
            i += 1
    return cmdline[i:].lstrip(" \t")


def plan_cmdline(cmdline: str, depth: int = 0) -> Plan:
    argv = split_windows(cmdline)
    if not argv:
        return Plan("result", result=(b"", b"", 0))
    exe = exe_name(argv[0])
    if depth < 4 and exe in ("powershell", "pwsh"):
        return plan_powershell(argv)
    if depth < 4 and exe == "cmd":
        for idx, tok in enumerate(argv[1:], start=1):
            low = tok.lower()
            if low in ("/c", "/k", "/r"):
                text = _after_token(cmdline, idx)
                if len(text) >= 2 and text.startswith('"') and text.endswith('"'):
                    text = text[1:-1]
                return plan_cmdline(text, depth + 1)
            if not low.startswith("/"):
                break
        return Plan("stdin-script")
    if exe == "shutdown":
        return plan_shutdown(argv)
    text = normalise_script(cmdline)
    return Plan("exec", argv=["/bin/sh", "-c", text], boot_env=has_boot_marker(text))


def plan_command(command: str, arguments: list[str]) -> Plan:
    cmdline = command.strip()
    if arguments:
        cmdline = cmdline + " " + " ".join(arguments)
    if len(cmdline) > CMD_LINE_LIMIT:
        return Plan("result", result=(b"", b"The command line is too long.\r\n", 1))
    return plan_cmdline(cmdline)


# --------------------------------------------------------------------------
# Shells and commands
# --------------------------------------------------------------------------


class Command:
    def __init__(self, app: "StandIn", shell: "Shell", cmd_id: str, plan: Plan):
        self.app = app
        self.shell = shell
        self.id = cmd_id
        self.plan = plan
        self.cond = threading.Condition()
        self.chunks: collections.deque[tuple[str, bytes]] = collections.deque()
        self.buffered = 0
        self.exit_code: int | None = None
        self.finished = False
        self.removed = False
        self.proc: subprocess.Popen | None = None
        self.stdin_q: queue.Queue | None = None
        self.stdin_closed = False
        self.spool_path: str | None = None
        self.spool_fd = None
        self.temp_files: list[str] = []
        self.exited_at: float | None = None

    # -- starting ---------------------------------------------------------
    def start(self) -> None:
        plan = self.plan
        if plan.abort_reboot:
            self.app.abort_reboot()
        if plan.reboot_after is not None:
            self.app.schedule_reboot(plan.reboot_after)
        if plan.kind == "result":
            out, err, rc = plan.result or (b"", b"", 0)
            with self.cond:
                if out:
                    self.chunks.append(("stdout", out))
                if err:
                    self.chunks.append(("stderr", err))
                self.exit_code = rc
                self.finished = True
                self.stdin_closed = True
                self.cond.notify_all()
            return
        if plan.kind == "stdin-script":
            fd, path = tempfile.mkstemp(prefix="stdin-script-", suffix=".sh", dir=self.app.tmp_dir)
            self.spool_fd = os.fdopen(fd, "wb")
            self.spool_path = path
            self.temp_files.append(path)
            return
        if plan.kind == "script":
            fd, path = tempfile.mkstemp(prefix="script-", suffix=".sh", dir=self.app.tmp_dir)
            with os.fdopen(fd, "wb") as fh:
                text = BOOT_ANSWER if plan.boot_env else (plan.script or "")
                fh.write(text.encode("utf-8", "surrogateescape"))
            self.temp_files.append(path)
            self._spawn(["/bin/sh", path], live_stdin=True, boot_env=plan.boot_env)
            return
        self._spawn(plan.argv, live_stdin=True, boot_env=plan.boot_env)

    def _env(self, boot_env: bool) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in self.app.hidden_env}
        env.update(self.shell.env)
        env.pop(BOOT_ENV, None)
        if boot_env:
            env[BOOT_ENV] = self.app.boot_time
        return env

    def _spawn(self, argv: list[str], live_stdin: bool, boot_env: bool) -> None:
        try:
            self.proc = subprocess.Popen(
                argv,
                stdin=subprocess.PIPE if live_stdin else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=self.shell.cwd,
                env=self._env(boot_env),
                start_new_session=True,
                close_fds=True,
            )
        except OSError as exc:
            with self.cond:
                self.chunks.append(("stderr", ("%s\r\n" % exc).encode()))
                self.exit_code = 1
                self.finished = True
                self.stdin_closed = True
                self.cond.notify_all()
            self._cleanup_files()
            return
        vlog("command %s: started pid %d: %r" % (self.id, self.proc.pid, argv[:3]))
        readers = []
        for name, pipe in (("stdout", self.proc.stdout), ("stderr", self.proc.stderr)):
            t = threading.Thread(target=self._reader, args=(name, pipe), daemon=True)
            t.start()
            readers.append(t)
        if live_stdin:
            self.stdin_q = queue.Queue()
            threading.Thread(target=self._stdin_writer, daemon=True).start()
        else:
            self.stdin_closed = True
        threading.Thread(target=self._waiter, args=(readers,), daemon=True).start()

    # -- child I/O ----------------------------------------------------------
    def _reader(self, name: str, pipe) -> None:
        fd = pipe.fileno()
        poller = select.poll()
        poller.register(fd, select.POLLIN | select.POLLHUP | select.POLLERR)
        try:
            while True:
                with self.cond:
                    while self.buffered > OUTPUT_BUFFER_LIMIT and not self.removed:
                        self.cond.wait(0.5)
                    if self.removed:
                        return
                if not poller.poll(200):
                    # child gone but a grandchild keeps the pipe open: give up after a grace period
                    if self.exited_at is not None and time.monotonic() - self.exited_at > 3.0:
                        return
                    continue
                data = os.read(fd, 65536)
                if not data:
                    return
                with self.cond:
                    if self.chunks and self.chunks[-1][0] == name and len(self.chunks[-1][1]) < 65536:
                        self.chunks[-1] = (name, self.chunks[-1][1] + data)
                    else:
                        self.chunks.append((name, data))
                    self.buffered += len(data)
                    self.cond.notify_all()
        except (OSError, ValueError):
            return
        finally:
            try:
                pipe.close()
            except OSError:
                pass

    def _stdin_writer(self) -> None:
        assert self.proc is not None and self.stdin_q is not None
        pipe = self.proc.stdin
        broken = False
        while True:
            item = self.stdin_q.get()
            if item is None:
                break
            if broken:
                continue
            try:
                pipe.write(item)
                pipe.flush()
            except (BrokenPipeError, OSError, ValueError):
                broken = True
        try:
            pipe.close()
        except (BrokenPipeError, OSError, ValueError):
            pass

    def _waiter(self, readers: list[threading.Thread]) -> None:
        assert self.proc is not None
        rc = self.proc.wait()
        self.exited_at = time.monotonic()
        for t in readers:
            t.join()
        if rc < 0:
            rc = 128 - rc
        with self.cond:
            self.exit_code = rc
            self.finished = True
            self.cond.notify_all()
        if self.stdin_q is not None:
            self.stdin_q.put(None)
        self._cleanup_files()
        vlog("command %s: exited %d" % (self.id, rc))

    def _cleanup_files(self) -> None:
        for path in self.temp_files:
            try:
                os.unlink(path)
            except OSError:
                pass
        self.temp_files = []

    # -- WinRS operations ---------------------------------------------------
    def send(self, data: bytes, end: bool) -> None:
        with self.cond:
            if self.stdin_closed:
                return
            if end:
                self.stdin_closed = True
        if self.plan.kind == "stdin-script":
            fh = self.spool_fd
            if fh is None:
                return
            if data:
                fh.write(data)
            if end:
                fh.close()
                self.spool_fd = None
                self._start_spooled()
            return
        if self.stdin_q is not None:
            if data:
                self.stdin_q.put(data)
            if end:
                self.stdin_q.put(None)

    def _start_spooled(self) -> None:
        path = self.spool_path
        assert path is not None
        with open(path, "rb") as fh:
            raw = fh.read()
        text = raw.decode("utf-8", "surrogateescape")
        if text.startswith("\ufeff"):
            text = text[1:]
        if _RESTART_RE.fullmatch(text):
            self.plan = Plan("result", result=(b"", b"", 0), reboot_after=1)
            self._cleanup_files()
            self.start()
            return
        norm = text.replace("\r\n", "\n")
        boot = has_boot_marker(norm)
        if boot:
            shutdown = marker_shutdown(norm)
            if shutdown is not None and shutdown.abort_reboot:
                self.app.abort_reboot()
            if shutdown is not None and shutdown.reboot_after is not None:
                self.app.schedule_reboot(shutdown.reboot_after)
            norm = BOOT_ANSWER
        if norm != text or raw.startswith(b"\xef\xbb\xbf"):
            with open(path, "wb") as fh:
                fh.write(norm.encode("utf-8", "surrogateescape"))
        self._spawn(["/bin/sh", path], live_stdin=False, boot_env=boot)

    def receive(self, streams: list[str], timeout: float, budget: int) -> tuple[list[tuple[str, bytes]], bool]:
        deadline = time.monotonic() + timeout
        with self.cond:
            while not self.chunks and not self.finished and not self.removed:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise fault_timed_out()
                self.cond.wait(min(remaining, 1.0))
            out: list[tuple[str, bytes]] = []
            used = 0
            while self.chunks:
                name, data = self.chunks[0]
                cost = 4 * ((len(data) + 2) // 3) + 160
                if used + cost > budget:
                    room = ((budget - used - 160) // 4) * 3
                    if room <= 0:
                        break
                    self.chunks[0] = (name, data[room:])
                    data = data[:room]
                    self.buffered -= len(data)
                    if name in streams:
                        out.append((name, data))
                    break
                self.chunks.popleft()
                self.buffered -= len(data)
                used += cost
                if name in streams:
                    out.append((name, data))
            self.cond.notify_all()
            done = (self.finished or self.removed) and not self.chunks
            return out, done

    def kill(self, sig: int = signal.SIGKILL) -> None:
        proc = self.proc
        if proc is not None and proc.poll() is None:
            try:
                os.killpg(proc.pid, sig)
            except (ProcessLookupError, PermissionError):
                pass

    def interrupt(self) -> None:
        self.kill(signal.SIGINT)

        def later():
            time.sleep(2.0)
            self.kill(signal.SIGKILL)

        threading.Thread(target=later, daemon=True).start()

    def remove(self) -> None:
        self.kill(signal.SIGKILL)
        with self.cond:
            self.removed = True
            if self.exit_code is None and self.proc is None:
                self.exit_code = 1
                self.finished = True
            self.cond.notify_all()
        if self.stdin_q is not None:
            self.stdin_q.put(None)
        if self.spool_fd is not None:
            try:
                self.spool_fd.close()
            except OSError:
                pass
            self.spool_fd = None
        if self.proc is None:
            self._cleanup_files()


class Shell:
    def __init__(self, shell_id: str, owner: str, client_ip: str, env: dict[str, str], cwd: str,
                 idle_timeout: float, input_streams: str, output_streams: str):
        self.id = shell_id
        self.owner = owner
        self.client_ip = client_ip
        self.env = env
        self.cwd = cwd
        self.idle_timeout = idle_timeout
        self.input_streams = input_streams
        self.output_streams = output_streams
        self.created = time.monotonic()
        self.last_activity = time.monotonic()
        self.commands: dict[str, Command] = {}
        self.lock = threading.Lock()

    def touch(self) -> None:
        self.last_activity = time.monotonic()

    def close(self) -> None:
        with self.lock:
            cmds = list(self.commands.values())
            self.commands.clear()
        for c in cmds:
            c.remove()


def user_key(name: str) -> str:
    return name.replace("/", "\\").split("\\")[-1].lower()


# --------------------------------------------------------------------------
# NTLM helpers
# --------------------------------------------------------------------------

NTLMSSP = b"NTLMSSP\x00"
MSV_AV_CHANNEL_BINDINGS = 0x000A


def parse_ntlm_authenticate(token: bytes):
    """(user, domain, has_cbt) from an NTLM AUTHENTICATE message (raw or in SPNEGO), else None."""
    start = token.find(NTLMSSP)
    if start < 0:
        return None
    msg = token[start:]
    try:
        if len(msg) < 64 or struct.unpack_from("<I", msg, 8)[0] != 3:
            return None

        def field(off: int) -> bytes:
            ln, _maxlen, o = struct.unpack_from("<HHI", msg, off)
            return msg[o:o + ln]

        nt = field(20)
        dom = field(28)
        usr = field(36)
        flags = struct.unpack_from("<I", msg, 60)[0]
        enc = "utf-16-le" if flags & 1 else "cp437"
        domain = dom.decode(enc, "replace")
        user = usr.decode(enc, "replace")
        has_cbt = False
        if len(nt) > 24:
            pos = 44  # NTProofStr(16) + NTLMv2_CLIENT_CHALLENGE header(28)
            while pos + 4 <= len(nt):
                av_id, av_len = struct.unpack_from("<HH", nt, pos)
                if av_id == 0:
                    break
                if av_id == MSV_AV_CHANNEL_BINDINGS and nt[pos + 4:pos + 4 + av_len].strip(b"\x00"):
                    has_cbt = True
                pos += 4 + av_len
        return user, domain, has_cbt
    except struct.error:
        return None


class NtlmUserStore:
    """The NTLM_USER_FILE that pyspnego's acceptor reads (DOMAIN:USER:PASSWORD lines).

    A local account on a stand-alone Windows host accepts any domain part (none,
    '.', the computer name, ...), so a line is added for each domain a client uses.
    """

    def __init__(self, path: str, user: str, password: str, computer: str):
        self.path = path
        self.user = user
        self.password = password
        self.lock = threading.Lock()
        self.domains: set[str] = set()
        with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w"):
            pass
        for d in ("", ".", computer, socket.gethostname()):
            self.ensure(d)

    def ensure(self, domain: str) -> None:
        if ":" in domain or "\n" in domain or "\r" in domain:
            return
        with self.lock:
            key = domain.upper()
            if key in self.domains:
                return
            self.domains.add(key)
            with open(self.path, "a", encoding="utf-8") as fh:
                fh.write("%s:%s:%s\n" % (domain, self.user, self.password))


# --------------------------------------------------------------------------
# HTTP(S) front end
# --------------------------------------------------------------------------


class HttpError(Exception):
    def __init__(self, status: int):
        super().__init__(status)
        self.status = status


class ConnState:
    def __init__(self):
        self.pending = None       # spnego context mid-handshake
        self.pending_scheme = ""
        self.sec = None           # completed NTLM context (message encryption)
        self.user: str | None = None
        self.kind: str | None = None

    def reset(self) -> None:
        self.__init__()


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "Microsoft-HTTPAPI/2.0"
    sys_version = ""
    timeout = KEEPALIVE_IDLE_SECS

    # -- connection lifecycle ------------------------------------------------
    def setup(self):
        srv: ListenServer = self.server  # type: ignore[assignment]
        self.app: StandIn = srv.app
        self.https = srv.tls is not None
        self.conn = ConnState()
        if self.https:
            self.request.settimeout(15)
            self.request = srv.tls.wrap_socket(self.request, server_side=True)
        super().setup()
        srv.track(self.request, True)

    def finish(self):
        try:
            super().finish()
        finally:
            self.server.track(self.request, False)  # type: ignore[attr-defined]

    def log_message(self, fmt, *args):  # noqa: N802 - http.server API
        vlog("%s %s" % (self.client_address[0], fmt % args))

    def version_string(self):
        return self.server_version

    # -- helpers --------------------------------------------------------------
    def _send(self, status: int, body: bytes = b"", headers: list[tuple[str, str]] | None = None) -> None:
        self.send_response(status)
        for k, v in headers or []:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if body:
            self.wfile.write(body)

    def _challenge_headers(self) -> list[tuple[str, str]]:
        hdrs = []
        if "ntlm" in self.app.auth_methods:
            hdrs.append(("WWW-Authenticate", "Negotiate"))
        if "basic" in self.app.auth_methods and (self.https or self.app.allow_unencrypted):
            hdrs.append(("WWW-Authenticate", 'Basic realm="WSMAN"'))
        return hdrs

    def _unauthorized(self) -> None:
        self._send(401, b"", self._challenge_headers())

    def _read_body(self) -> bytes:
        te = (self.headers.get("Transfer-Encoding") or "").lower()
        if "chunked" in te:
            parts = []
            total = 0
            while True:
                line = self.rfile.readline(1024)
                if not line:
                    raise HttpError(400)
                size = int(line.split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while True:
                        trailer = self.rfile.readline(8192)
                        if trailer in (b"\r\n", b"\n", b""):
                            break
                    break
                total += size
                if total > MAX_HTTP_BODY:
                    raise HttpError(413)
                parts.append(self.rfile.read(size))
                self.rfile.readline(8)
            return b"".join(parts)
        length = self.headers.get("Content-Length")
        if length is None:
            return b""
        try:
            n = int(length)
        except ValueError:
            raise HttpError(400)
        if n < 0 or n > MAX_HTTP_BODY:
            raise HttpError(413)
        data = self.rfile.read(n)
        if len(data) != n:
            raise HttpError(400)
        return data

    # -- methods ----------------------------------------------------------------
    def do_GET(self):  # noqa: N802
        self._send(405, b"", [("Allow", "POST")])

    do_PUT = do_DELETE = do_HEAD = do_GET

    def do_POST(self):  # noqa: N802
        try:
            body = self._read_body()
        except HttpError as exc:
            self.close_connection = True
            self._send(exc.status)
            return
        except (ValueError, OSError):
            self.close_connection = True
            return
        path = self.path.split("?", 1)[0].rstrip("/").lower()
        if path != "/wsman":
            self._send(404)
            return
        if self.app.rebooting.is_set():
            self.close_connection = True
            self._send(503)
            return

        authz = self.headers.get("Authorization")
        extra_headers: list[tuple[str, str]] = []
        if authz:
            scheme, _, param = authz.strip().partition(" ")
            scheme_l = scheme.lower()
            if scheme_l == "basic":
                if not self._basic(param.strip()):
                    self._unauthorized()
                    return
            elif scheme_l in ("negotiate", "ntlm") and "ntlm" in self.app.auth_methods:
                res = self._ntlm_step(scheme, param.strip())
                if res is None:
                    return  # a 401 (challenge or failure) was sent
                extra_headers = res
            else:
                self.conn.reset()
                self._unauthorized()
                return
        elif self.conn.user is None:
            self._unauthorized()
            return

        if not body:
            # e.g. the empty request a client sends to finish NTLM before encrypting
            self._send(200, b"", extra_headers)
            return
        self._handle_message(body, extra_headers)

    # -- authentication -------------------------------------------------------
    def _basic(self, param: str) -> bool:
        self.conn.reset()
        if "basic" not in self.app.auth_methods or not (self.https or self.app.allow_unencrypted):
            return False
        try:
            user, _, password = base64.b64decode(param, validate=True).decode("utf-8").partition(":")
        except Exception:
            return False
        ok_user = user_key(user) == user_key(self.app.user)
        ok_pw = hmac.compare_digest(password.encode("utf-8"), self.app.password.encode("utf-8"))
        if not (ok_user and ok_pw):
            log("basic auth failed for %r from %s" % (user, self.client_address[0]))
            return False
        self.conn.user = user
        self.conn.kind = "basic"
        return True

    def _ntlm_step(self, scheme: str, param: str) -> list[tuple[str, str]] | None:
        import spnego  # deferred: only needed once a client authenticates

        try:
            token = base64.b64decode(param, validate=True)
        except Exception:
            self.conn.reset()
            self._unauthorized()
            return None
        auth_info = parse_ntlm_authenticate(token)
        if self.conn.pending is None or auth_info is None:
            # a new handshake (NEGOTIATE message / SPNEGO NegTokenInit) resets the connection
            self.conn.reset()
            proto = "ntlm" if scheme.lower() == "ntlm" or token.startswith(NTLMSSP) else "negotiate"
            opts = spnego.NegotiateOptions.use_ntlm if proto == "ntlm" else spnego.NegotiateOptions.use_negotiate
            try:
                self.conn.pending = spnego.server(
                    hostname=self.app.computer_name, service="HTTP", protocol=proto, options=opts
                )
            except Exception as exc:  # pragma: no cover - environment problem
                log("cannot create NTLM acceptor: %s" % exc)
                self._send(500)
                return None
            self.conn.pending_scheme = scheme
        ctx = self.conn.pending
        cbt = None
        if auth_info is not None:
            user, domain, has_cbt = auth_info
            if user_key(user) == user_key(self.app.user):
                self.app.ntlm_users.ensure(domain)
            if self.https and self.app.cbt_hardening != "none":
                if has_cbt or self.app.cbt_hardening == "strict":
                    cbt = self.app.channel_bindings()
        try:
            out = ctx.step(token, channel_bindings=cbt) if cbt is not None else ctx.step(token)
        except Exception as exc:
            log("NTLM authentication failed from %s: %s" % (self.client_address[0], exc))
            self.conn.reset()
            self._unauthorized()
            return None
        if not ctx.complete:
            hdr = "%s %s" % (self.conn.pending_scheme, base64.b64encode(out or b"").decode())
            self._send(401, b"", [("WWW-Authenticate", hdr)])
            return None
        self.conn.sec = ctx
        self.conn.pending = None
        self.conn.user = ctx.client_principal or (auth_info[0] if auth_info else self.app.user)
        self.conn.kind = "ntlm"
        vlog("NTLM authenticated %s from %s" % (self.conn.user, self.client_address[0]))
        if out:
            return [("WWW-Authenticate", "%s %s" % (self.conn.pending_scheme, base64.b64encode(out).decode()))]
        return []

    # -- message layer ----------------------------------------------------------
    def _handle_message(self, body: bytes, extra_headers: list[tuple[str, str]]) -> None:
        ctype = (self.headers.get("Content-Type") or "").strip()
        ctype_l = ctype.lower()
        encrypted = ctype_l.startswith("multipart/encrypted") or ctype_l.startswith("multipart/x-multi-encrypted")
        if encrypted:
            if self.conn.sec is None or ENC_SPNEGO.lower() not in ctype_l:
                self._send(400, b"", extra_headers)
                return
            try:
                soap = self._decrypt(body, ctype)
            except Exception as exc:
                log("cannot decrypt request from %s: %s" % (self.client_address[0], exc))
                self.close_connection = True
                self._send(400, b"", extra_headers)
                return
        else:
            if not self.https and not self.app.allow_unencrypted:
                # AllowUnencrypted=false: plaintext SOAP over HTTP is refused
                log("refusing unencrypted request over HTTP from %s" % self.client_address[0])
                self._send(500, b"", extra_headers)
                return
            soap = body
        if encrypted and self.app.hostile == "unavailable":
            # what http.sys answers for a stopping WinRM service: a plaintext 503, no body
            self.close_connection = True
            self._send(503, b"", extra_headers)
            return
        status, reply = self.app.dispatch(soap, self.conn.user or "", self.client_address[0], self._local_url())
        if encrypted and self.app.hostile == "plaintext-replies":
            # what an attacker on the path can send without the session key
            self._send(status, reply, extra_headers + [("Content-Type", SOAP_CONTENT_TYPE)])
            return
        if encrypted:
            payload = self._encrypt(reply)
            self._send(status, payload, extra_headers + [("Content-Type", ENC_CONTENT_TYPE)])
        else:
            self._send(status, reply, extra_headers + [("Content-Type", SOAP_CONTENT_TYPE)])

    def _local_url(self) -> str:
        host, port = self.request.getsockname()[:2]
        return "%s://%s/wsman" % ("https" if self.https else "http", addr_str(host, port))

    def _decrypt(self, body: bytes, ctype: str) -> bytes:
        m = re.search(r'boundary="?([^";]+)"?', ctype, re.I)
        boundary = (m.group(1) if m else ENC_BOUNDARY.decode()).encode()
        marker = b"--" + boundary
        out = []
        pos = 0
        ctx = self.conn.sec
        while True:
            start = body.find(marker, pos)
            if start < 0:
                raise ValueError("missing MIME boundary")
            start += len(marker)
            if body[start:start + 2] == b"--":
                break  # closing boundary
            hdr_end = body.find(marker, start)
            if hdr_end < 0:
                raise ValueError("missing second MIME part")
            header = body[start:hdr_end]
            lm = re.search(rb"Length=(\d+)", header)
            if not lm:
                raise ValueError("missing OriginalContent Length")
            length = int(lm.group(1))
            part_start = hdr_end + len(marker)
            p = body.find(b"application/octet-stream", part_start)
            if p < 0:
                raise ValueError("missing octet-stream part")
            p = body.find(b"\n", p) + 1
            (sig_len,) = struct.unpack_from("<I", body, p)
            p += 4
            sig = body[p:p + sig_len]
            p += sig_len
            data = body[p:p + length]
            if len(data) != length:
                raise ValueError("truncated encrypted payload")
            plain = ctx.unwrap_winrm(sig, data)
            if len(plain) != length:
                raise ValueError("decrypted length does not match OriginalContent")
            out.append(plain)
            pos = p + length
        return b"".join(out)

    def _encrypt(self, data: bytes) -> bytes:
        w = self.conn.sec.wrap_winrm(data)
        return b"".join(
            [
                b"--Encrypted Boundary\r\n",
                b"\tContent-Type: " + ENC_SPNEGO.encode() + b"\r\n",
                b"\tOriginalContent: type=application/soap+xml;charset=UTF-8;Length=%d\r\n" % len(data),
                b"--Encrypted Boundary\r\n",
                b"\tContent-Type: application/octet-stream\r\n",
                struct.pack("<I", len(w.header)),
                w.header,
                w.data,
                b"--Encrypted Boundary--\r\n",
            ]
        )


class ListenServer(socketserver.ThreadingMixIn, socketserver.TCPServer):
    daemon_threads = True
    allow_reuse_address = True
    block_on_close = False
    request_queue_size = 128

    def __init__(self, addr, app: "StandIn", tls: ssl.SSLContext | None):
        self.app = app
        self.tls = tls
        self.conns: set = set()
        self.conns_lock = threading.Lock()
        super().__init__(addr, Handler)

    def track(self, sock, add: bool) -> None:
        with self.conns_lock:
            if add:
                self.conns.add(sock)
            else:
                self.conns.discard(sock)

    def drop_connections(self) -> None:
        with self.conns_lock:
            conns = list(self.conns)
            self.conns.clear()
        for s in conns:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def handle_error(self, request, client_address):
        exc = sys.exc_info()[1]
        if isinstance(exc, (ConnectionError, ssl.SSLError, socket.timeout, TimeoutError, OSError)):
            vlog("connection from %s: %s" % (client_address[0], exc))
            return
        log("error handling request from %s: %r" % (client_address[0], exc))
        if VERBOSE:
            import traceback

            traceback.print_exc()


def make_server(host: str, port: int, app: "StandIn", tls: ssl.SSLContext | None) -> ListenServer:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    cls = type("ListenServer6" if family == socket.AF_INET6 else "ListenServer4", (ListenServer,),
               {"address_family": family})
    return cls((host, port), app, tls)


# --------------------------------------------------------------------------
# TLS certificate
# --------------------------------------------------------------------------


def ensure_certificate(state: str, computer: str, hosts: list[str]) -> tuple[str, str, bytes]:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    from cryptography.x509.oid import NameOID

    cert_path = os.path.join(state, "cert.pem")
    key_path = os.path.join(state, "key.pem")
    if not (os.path.exists(cert_path) and os.path.exists(key_path)):
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        names: list[x509.GeneralName] = [x509.DNSName("localhost"), x509.DNSName(computer.lower())]
        ips = {"127.0.0.1", "::1"} | {h for h in hosts if h not in ("0.0.0.0", "::")}
        for ip in sorted(ips):
            names.append(x509.IPAddress(ipaddress.ip_address(ip)))
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, computer.lower())])
        now = datetime.datetime.now(datetime.timezone.utc)
        cert = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=3650))
            .add_extension(x509.SubjectAlternativeName(names), critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .sign(key, hashes.SHA256())
        )
        tmp_key = key_path + ".tmp"
        with open(os.open(tmp_key, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "wb") as fh:
            fh.write(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                       serialization.NoEncryption()))
        with open(cert_path + ".tmp", "wb") as fh:
            fh.write(cert.public_bytes(serialization.Encoding.PEM))
        os.replace(tmp_key, key_path)
        os.replace(cert_path + ".tmp", cert_path)
    with open(cert_path, "rb") as fh:
        der = ssl.PEM_cert_to_DER_cert(fh.read().decode())
    return cert_path, key_path, der


# --------------------------------------------------------------------------
# The stand-in host
# --------------------------------------------------------------------------


class StandIn:
    def __init__(self, args: argparse.Namespace):
        self.args = args
        self.state = os.path.abspath(args.state)
        os.makedirs(self.state, exist_ok=True)
        self.tmp_dir = os.path.join(self.state, "tmp")
        self.home = os.path.join(self.state, "home")
        os.makedirs(self.tmp_dir, exist_ok=True)
        os.makedirs(self.home, exist_ok=True)
        for leftover in os.listdir(self.tmp_dir):
            try:
                os.unlink(os.path.join(self.tmp_dir, leftover))
            except OSError:
                pass
        self.computer_name = args.computer_name
        self.user = args.user
        pw = os.environ.get(args.password_env)
        if not pw:
            raise SystemExit("winrm-stand-in: environment variable %s (--password-env) is empty or unset"
                             % args.password_env)
        self.password = pw
        self.auth_methods = {m.strip().lower() for m in args.auth.split(",") if m.strip()}
        bad = self.auth_methods - {"ntlm", "basic"}
        if bad or not self.auth_methods:
            raise SystemExit("winrm-stand-in: --auth takes a list of ntlm,basic")
        self.allow_unencrypted = args.allow_unencrypted
        self.hostile = args.hostile
        self.cbt_hardening = args.cbt_hardening
        self.max_envelope = args.max_envelope_kb * 1024
        self.max_shells = args.max_shells_per_user
        self.max_timeout = args.max_timeout_ms / 1000.0
        self.down_secs = args.reboot_down_secs
        self.hidden_env = {args.password_env, "NTLM_USER_FILE"}

        users_path = os.path.join(self.state, "ntlm-users")
        self.ntlm_users = NtlmUserStore(users_path, self.user, self.password, self.computer_name)
        os.environ["NTLM_USER_FILE"] = users_path

        self.boot_path = os.path.join(self.state, "boot-time")
        if args.boot_time:
            self._write_boot_time(fmt_iso(parse_iso(args.boot_time)))
        elif os.path.exists(self.boot_path):
            try:
                with open(self.boot_path) as fh:
                    self.boot_time = fmt_iso(parse_iso(fh.read()))
            except (OSError, ValueError):
                self._write_boot_time(utc_now_iso())
        else:
            self._write_boot_time(utc_now_iso())

        self.listen_specs: list[tuple[str, str, int]] = []
        if args.http:
            self.listen_specs.append(("http", *args.http))
        if args.https:
            self.listen_specs.append(("https", *args.https))
        if not self.listen_specs:
            self.listen_specs = [("http", "127.0.0.1", 5985), ("https", "127.0.0.1", 5986)]

        self.tls: ssl.SSLContext | None = None
        self.cert_der = b""
        if any(kind == "https" for kind, _, _ in self.listen_specs):
            cert, key, der = ensure_certificate(self.state, self.computer_name,
                                                [h for k, h, _ in self.listen_specs])
            self.cert_der = der
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.minimum_version = ssl.TLSVersion.TLSv1_2
            ctx.load_cert_chain(cert, key)
            self.tls = ctx
            fp = hashlib.sha256(der).hexdigest()
            colon = ":".join(fp[i:i + 2] for i in range(0, len(fp), 2)).upper()
            with open(os.path.join(self.state, "cert.sha256"), "w") as fh:
                fh.write(colon + "\n" + fp + "\n")
            self.cert_fingerprint = (colon, fp)

        # --ops-log: one JSON line per WS-Management operation (see README.md, "Operations
        # log"): what a test counts round trips and processes from.
        self.ops_log = None
        self.ops_lock = threading.Lock()
        if args.ops_log:
            self.ops_log = open(args.ops_log, "a", buffering=1, encoding="utf-8")

        self.shells: dict[str, Shell] = {}
        self.shells_lock = threading.Lock()
        self.servers: list[tuple[str, ListenServer, threading.Thread]] = []
        self.bound: list[tuple[str, str, int]] = []
        self.stop_event = threading.Event()
        self.rebooting = threading.Event()
        self.reboot_lock = threading.Lock()
        self.reboot_pending = False
        self.reboot_cancel = threading.Event()

    # -- boot time --------------------------------------------------------------
    def _write_boot_time(self, value: str) -> None:
        tmp = self.boot_path + ".tmp"
        with open(tmp, "w") as fh:
            fh.write(value + "\n")
        os.replace(tmp, self.boot_path)
        self.boot_time = value

    def _new_boot_time(self) -> None:
        now = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0)
        try:
            old = parse_iso(self.boot_time)
            if now <= old:
                now = old + datetime.timedelta(seconds=1)
        except ValueError:
            pass
        self._write_boot_time(fmt_iso(now))

    def channel_bindings(self):
        import spnego.channel_bindings

        # tls-server-end-point (RFC 5929): SHA-256 for an RSA/SHA-256 certificate
        digest = hashlib.sha256(self.cert_der).digest()
        return spnego.channel_bindings.GssChannelBindings(application_data=b"tls-server-end-point:" + digest)

    # -- listeners ----------------------------------------------------------------
    def start_listeners(self) -> None:
        specs = self.bound or self.listen_specs
        started = []
        for kind, host, port in specs:
            srv = make_server(host, port, self, self.tls if kind == "https" else None)
            started.append((kind, srv))
        self.bound = [(kind, srv.server_address[0], srv.server_address[1]) for kind, srv in started]
        for kind, srv in started:
            t = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.2}, daemon=True)
            t.start()
            self.servers.append((kind, srv, t))

    def stop_listeners(self) -> None:
        servers, self.servers = self.servers, []
        for _, srv, _ in servers:
            srv.shutdown()
            srv.server_close()
            srv.drop_connections()

    def ready_line(self) -> str:
        return "winrm-stand-in ready " + " ".join("%s=%s" % (k, addr_str(h, p)) for k, h, p in self.bound)

    # -- reboot -------------------------------------------------------------------
    def schedule_reboot(self, delay: int) -> None:
        with self.reboot_lock:
            if self.reboot_pending:
                return
            self.reboot_pending = True
            self.reboot_cancel.clear()
        log("reboot scheduled in %ds" % delay)
        threading.Thread(target=self._reboot, args=(delay,), daemon=True).start()

    def _run_on_boot(self) -> None:
        """--on-boot: what the host does while it starts (Windows finishing a feature
        install, /run emptied), before the listeners open again."""
        cmd = self.args.on_boot
        if not cmd:
            return
        env = {k: v for k, v in os.environ.items() if k not in self.hidden_env}
        env[BOOT_ENV] = self.boot_time
        try:
            r = subprocess.run(["/bin/sh", "-c", cmd], env=env, cwd=self.home, stdin=subprocess.DEVNULL,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=120)
            out = r.stdout.decode("utf-8", "replace").strip()
            log("on-boot command exited %d%s" % (r.returncode, (": " + out) if out else ""))
        except (OSError, subprocess.TimeoutExpired) as exc:
            log("on-boot command failed: %s" % exc)

    def abort_reboot(self) -> None:
        self.reboot_cancel.set()

    def _reboot(self, delay: int) -> None:
        deadline = time.monotonic() + delay
        while time.monotonic() < deadline:
            if self.stop_event.is_set():
                return
            if self.reboot_cancel.wait(0.1):
                with self.reboot_lock:
                    self.reboot_pending = False
                log("scheduled reboot aborted")
                return
        self.rebooting.set()
        self.stop_listeners()
        self.delete_all_shells()
        emit("winrm-stand-in rebooting down_secs=%g" % self.down_secs)
        if self.stop_event.wait(self.down_secs):
            return
        self._new_boot_time()
        self._run_on_boot()
        while not self.stop_event.is_set():
            try:
                self.start_listeners()
                break
            except OSError as exc:
                log("cannot listen again after reboot (%s), retrying" % exc)
                self.stop_event.wait(0.5)
        self.rebooting.clear()
        with self.reboot_lock:
            self.reboot_pending = False
        emit(self.ready_line())

    # -- shells -------------------------------------------------------------------
    def delete_all_shells(self) -> None:
        with self.shells_lock:
            shells = list(self.shells.values())
            self.shells.clear()
        for sh in shells:
            sh.close()

    def reap_idle(self) -> None:
        now = time.monotonic()
        with self.shells_lock:
            idle = [s for s in self.shells.values() if now - s.last_activity > s.idle_timeout]
            for s in idle:
                del self.shells[s.id]
        for s in idle:
            log("shell %s idle for more than %gs: deleted" % (s.id, s.idle_timeout))
            s.close()

    def _shell(self, req: SoapRequest, user: str) -> Shell:
        sid = req.selectors.get("ShellId")
        if not sid:
            raise WSManFault(
                "w:InvalidSelectors",
                CODE_SHELL_NOT_FOUND,
                "The Windows Remote Shell cannot process the request because it requires the following "
                "selector: ShellId. ",
            )
        with self.shells_lock:
            sh = self.shells.get(sid.upper())
        if sh is None or user_key(sh.owner) != user_key(user):
            raise fault_shell_not_found(sid)
        sh.touch()
        return sh

    # -- operations log ---------------------------------------------------------------
    def record(self, listener: str, op: str, **fields) -> None:
        """One line of the operations log (`--ops-log`), if there is one."""
        if self.ops_log is None:
            return
        entry = {"t": round(time.time(), 6), "listener": listener, "op": op}
        entry.update({k: v for k, v in fields.items() if v is not None})
        line = json.dumps(entry, sort_keys=True)
        with self.ops_lock:
            try:
                self.ops_log.write(line + "\n")
            except (OSError, ValueError):
                pass

    # -- dispatch -------------------------------------------------------------------
    def dispatch(self, soap: bytes, user: str, client_ip: str, local_url: str) -> tuple[int, bytes]:
        relates = None
        req: SoapRequest | None = None
        listener = local_url.split("://", 1)[-1].split("/", 1)[0]
        try:
            if len(soap) > self.max_envelope:
                raise WSManFault(
                    "w:EncodingLimit",
                    CODE_ENVELOPE_LIMIT,
                    "The WS-Management service cannot process the request because the request size (%d) "
                    "exceeded the configured MaxEnvelopeSize quota (%d). " % (len(soap), self.max_envelope),
                )
            req = SoapRequest(soap)
            relates = req.message_id
            if self.hostile == "no-relates-to":
                relates = None
            elif self.hostile == "wrong-relates-to":
                relates = "uuid:%s" % new_id()
            vlog("%s %s shell=%s" % (user, req.action.rsplit("/", 1)[-1], req.selectors.get("ShellId", "-")))
            if req.body_child("wsmid:Identify") is not None:
                self.record(listener, "Identify")
                return 200, self._identify(req)
            if req.resource_uri.rstrip("/").lower() != RESOURCE_CMD.lower():
                raise WSManFault(
                    "w:DestinationUnreachable",
                    CODE_RESOURCE_NOT_FOUND,
                    "The WS-Management service cannot process the request. The resource URI (%s) was not "
                    "found in the WS-Management catalog. " % req.resource_uri,
                )
            handler = {
                ACT_CREATE: self.op_create,
                ACT_DELETE: self.op_delete,
                ACT_COMMAND: self.op_command,
                ACT_SEND: self.op_send,
                ACT_RECEIVE: self.op_receive,
                ACT_SIGNAL: self.op_signal,
            }.get(req.action)
            if handler is None:
                raise WSManFault(
                    "a:ActionNotSupported",
                    CODE_ACTION_NOT_SUPPORTED,
                    "The WS-Management service cannot process the request because the action (%s) is not "
                    "supported for this resource. " % req.action,
                )
            action, body = handler(req, user, client_ip, local_url)
            op = req.action.rsplit("/", 1)[-1]
            shell = req.selectors.get("ShellId") or _created_shell(body)
            self.record(listener, op, shell=shell, **req.ops_fields)
            return 200, envelope(action, relates, body)
        except WSManFault as fault:
            if fault.code != CODE_TIMED_OUT:
                log("fault %s (%d): %s" % (fault.subcode, fault.code, fault.reason.strip()))
            op = req.action.rsplit("/", 1)[-1] if req is not None else "?"
            self.record(listener, op, fault=fault.subcode)
            return 500, fault_envelope(fault, relates, self.computer_name)

    def _identify(self, req: SoapRequest) -> bytes:
        body = (
            '<wsmid:IdentifyResponse xmlns:wsmid="%s"><wsmid:ProtocolVersion>%s</wsmid:ProtocolVersion>'
            "<wsmid:ProductVendor>Microsoft Corporation</wsmid:ProductVendor>"
            "<wsmid:ProductVersion>OS: 10.0.17763 SP: 0.0 Stack: 3.0</wsmid:ProductVersion>"
            "</wsmid:IdentifyResponse>" % (NS["wsmid"], NS["w"])
        )
        return (_ENVELOPE_OPEN + "<s:Header/><s:Body>%s</s:Body></s:Envelope>" % body).encode()

    def op_create(self, req: SoapRequest, user: str, client_ip: str, local_url: str):
        shell_el = req.body_child("rsp:Shell")
        if shell_el is None:
            raise fault_invalid_parameter("(missing rsp:Shell)")
        env: dict[str, str] = {}
        for var in shell_el.findall("rsp:Environment/rsp:Variable", NS):
            name = var.get("Name")
            if name:
                env[name] = var.text or ""
        cwd = (shell_el.findtext("rsp:WorkingDirectory", "", NS) or "").strip()
        if not cwd or not os.path.isdir(cwd):
            cwd = self.home
        idle = parse_duration(shell_el.findtext("rsp:IdleTimeOut", None, NS)) or DEFAULT_IDLE_TIMEOUT
        in_streams = (shell_el.findtext("rsp:InputStreams", "stdin", NS) or "stdin").strip()
        out_streams = (shell_el.findtext("rsp:OutputStreams", "stdout stderr", NS) or "stdout stderr").strip()
        wanted = (shell_el.get("ShellId") or "").strip().upper()
        with self.shells_lock:
            owned = sum(1 for s in self.shells.values() if user_key(s.owner) == user_key(user))
            if owned >= self.max_shells:
                raise WSManFault(
                    "w:QuotaLimit",
                    CODE_MAX_SHELLS,
                    "The WS-Management service cannot process the request. This user is allowed a maximum "
                    "number of %d concurrent shells, which has been exceeded. Close existing shells or raise "
                    "the quota for this user. " % self.max_shells,
                )
            sid = wanted if wanted and wanted not in self.shells else new_id()
            sh = Shell(sid, user, client_ip, env, cwd, idle, in_streams, out_streams)
            self.shells[sid] = sh
        vlog("shell %s created for %s" % (sid, user))
        address = req.to or local_url
        body = (
            "<x:ResourceCreated><a:Address>%s</a:Address><a:ReferenceParameters>"
            "<w:ResourceURI>%s</w:ResourceURI><w:SelectorSet>"
            '<w:Selector Name="ShellId">%s</w:Selector></w:SelectorSet></a:ReferenceParameters>'
            "</x:ResourceCreated>"
            "<rsp:Shell><rsp:ShellId>%s</rsp:ShellId><rsp:ResourceUri>%s</rsp:ResourceUri>"
            "<rsp:Owner>%s</rsp:Owner><rsp:ClientIP>%s</rsp:ClientIP><rsp:IdleTimeOut>%s</rsp:IdleTimeOut>"
            "<rsp:InputStreams>%s</rsp:InputStreams><rsp:OutputStreams>%s</rsp:OutputStreams>"
            "<rsp:ShellRunTime>P0DT0H0M0S</rsp:ShellRunTime><rsp:ShellInactivity>P0DT0H0M0S</rsp:ShellInactivity>"
            "</rsp:Shell>"
            % (
                xml_escape(address), RESOURCE_CMD, sid, sid, RESOURCE_CMD, xml_escape(user),
                xml_escape(client_ip), fmt_duration(idle), xml_escape(in_streams), xml_escape(out_streams),
            )
        )
        return "http://schemas.xmlsoap.org/ws/2004/09/transfer/CreateResponse", body

    def op_delete(self, req: SoapRequest, user: str, client_ip: str, local_url: str):
        sh = self._shell(req, user)
        with self.shells_lock:
            self.shells.pop(sh.id, None)
        sh.close()
        vlog("shell %s deleted" % sh.id)
        return "http://schemas.xmlsoap.org/ws/2004/09/transfer/DeleteResponse", ""

    def op_command(self, req: SoapRequest, user: str, client_ip: str, local_url: str):
        sh = self._shell(req, user)
        cl = req.body_child("rsp:CommandLine")
        if cl is None:
            raise fault_invalid_parameter("(missing rsp:CommandLine)")
        command = (cl.findtext("rsp:Command", "", NS) or "").strip()
        args = [a.text or "" for a in cl.findall("rsp:Arguments", NS)]
        if not command:
            raise fault_invalid_parameter("(empty rsp:Command)")
        cmd_id = (cl.get("CommandId") or "").strip().upper() or new_id()
        plan = plan_command(command, args)
        cmd = Command(self, sh, cmd_id, plan)
        with sh.lock:
            if cmd_id in sh.commands:
                raise fault_invalid_parameter("(duplicate CommandId)")
            sh.commands[cmd_id] = cmd
        vlog("shell %s command %s: %s" % (sh.id, cmd_id, (command + " " + " ".join(args))[:120]))
        # For the operations log: the command line as Windows would start it, and what this
        # stand-in starts for it (a /bin/sh process, or nothing for an answered command).
        req.ops_fields = {
            "command": cmd_id,
            "exe": exe_name(split_windows(command)[0]) if split_windows(command) else "",
            "cmdline": (command + " " + " ".join(args))[:200],
            "spawns": "none" if plan.kind == "result" else "sh",
        }
        cmd.start()
        body = "<rsp:CommandResponse><rsp:CommandId>%s</rsp:CommandId></rsp:CommandResponse>" % cmd_id
        return SHELL_NS + "/CommandResponse", body

    def _command(self, sh: Shell, cmd_id: str | None) -> Command:
        if not cmd_id:
            raise fault_invalid_parameter("(missing CommandId)")
        with sh.lock:
            cmd = sh.commands.get(cmd_id.strip().upper())
        if cmd is None:
            raise fault_invalid_parameter("(unknown CommandId %s)" % cmd_id)
        return cmd

    def op_send(self, req: SoapRequest, user: str, client_ip: str, local_url: str):
        sh = self._shell(req, user)
        send = req.body_child("rsp:Send")
        if send is None:
            raise fault_invalid_parameter("(missing rsp:Send)")
        for stream in send.findall("rsp:Stream", NS):
            name = stream.get("Name") or "stdin"
            if name not in sh.input_streams.split():
                raise fault_invalid_parameter("(unknown input stream %s)" % name)
            cmd = self._command(sh, stream.get("CommandId"))
            text = (stream.text or "").strip()
            try:
                data = base64.b64decode(text, validate=False) if text else b""
            except Exception:
                raise fault_invalid_parameter("(stream data is not base64)")
            end = (stream.get("End") or "").strip().lower() in ("true", "1")
            cmd.send(data, end)
        return SHELL_NS + "/SendResponse", "<rsp:SendResponse/>"

    def op_receive(self, req: SoapRequest, user: str, client_ip: str, local_url: str):
        sh = self._shell(req, user)
        rcv = req.body_child("rsp:Receive")
        ds = rcv.find("rsp:DesiredStream", NS) if rcv is not None else None
        if ds is None:
            raise fault_invalid_parameter("(missing rsp:DesiredStream)")
        cmd = self._command(sh, ds.get("CommandId"))
        streams = (ds.text or "stdout stderr").split()
        timeout = req.operation_timeout if req.operation_timeout is not None else self.max_timeout
        timeout = max(0.0, min(timeout, self.max_timeout))
        budget = max(4096, min(req.max_envelope, self.max_envelope) - 2048)
        chunks, done = cmd.receive(streams, timeout, budget)
        sh.touch()
        parts = []
        cid = cmd.id
        for name, data in chunks:
            parts.append('<rsp:Stream Name="%s" CommandId="%s">%s</rsp:Stream>'
                         % (name, cid, base64.b64encode(data).decode()))
        if done:
            for name in streams:
                parts.append('<rsp:Stream Name="%s" CommandId="%s" End="true"></rsp:Stream>' % (name, cid))
            parts.append('<rsp:CommandState CommandId="%s" State="%s"><rsp:ExitCode>%d</rsp:ExitCode>'
                         "</rsp:CommandState>" % (cid, STATE_DONE, cmd.exit_code if cmd.exit_code is not None else 1))
        else:
            parts.append('<rsp:CommandState CommandId="%s" State="%s"/>' % (cid, STATE_RUNNING))
        return SHELL_NS + "/ReceiveResponse", "<rsp:ReceiveResponse>%s</rsp:ReceiveResponse>" % "".join(parts)

    def op_signal(self, req: SoapRequest, user: str, client_ip: str, local_url: str):
        sh = self._shell(req, user)
        sig = req.body_child("rsp:Signal")
        if sig is None:
            raise fault_invalid_parameter("(missing rsp:Signal)")
        cmd = self._command(sh, sig.get("CommandId"))
        code = (sig.findtext("rsp:Code", "", NS) or "").strip().lower()
        if code.endswith("/signal/terminate"):
            with sh.lock:
                sh.commands.pop(cmd.id, None)
            cmd.remove()
        elif code.endswith("/signal/ctrl_c") or code.endswith("/signal/ctrl_break") or code.endswith("ctrl_c"):
            cmd.interrupt()
        else:
            raise fault_invalid_parameter("(unknown signal code %s)" % code)
        return SHELL_NS + "/SignalResponse", "<rsp:SignalResponse/>"


# --------------------------------------------------------------------------
# main
# --------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="server.py",
        description="A stand-in Windows host speaking WinRM (WS-Management / WinRS); commands run with /bin/sh.",
    )
    p.add_argument("--http", metavar="ADDR:PORT", type=lambda v: parse_listen(v, 5985),
                   help="HTTP listener (NTLM + message encryption), e.g. 127.0.0.1:5985 or [::1]:0")
    p.add_argument("--https", metavar="ADDR:PORT", type=lambda v: parse_listen(v, 5986),
                   help="HTTPS listener (Basic and/or NTLM), e.g. 127.0.0.1:5986")
    p.add_argument("--state", default=os.path.join(REPO_ROOT, "target", "winrm-stand-in"),
                   help="state directory (boot-time, cert.pem, key.pem, cert.sha256, ntlm-users, home/)")
    p.add_argument("--user", default="kwin", help="account name accepted by the host (default: kwin)")
    p.add_argument("--password-env", default="KWIN_WINRM_PASSWORD",
                   help="environment variable holding the account's password (default: KWIN_WINRM_PASSWORD)")
    p.add_argument("--auth", default="ntlm,basic", help="comma list of ntlm,basic (default: ntlm,basic)")
    p.add_argument("--boot-time", metavar="ISO8601",
                   help="set the stored boot time (default: keep STATE/boot-time, or now if absent)")
    p.add_argument("--reboot-down-secs", type=float, default=3.0,
                   help="how long the listeners stay closed during a simulated reboot (default: 3)")
    p.add_argument("--on-boot", metavar="CMD", default=None,
                   help="shell command run at every simulated boot, before the listeners open again")
    p.add_argument("--computer-name", default=socket.gethostname().split(".")[0].upper()[:15] or "WIN-STANDIN",
                   help="computer name shown in faults and the certificate")
    p.add_argument("--allow-unencrypted", action="store_true",
                   help="accept plaintext SOAP (and Basic) over HTTP, like AllowUnencrypted=true")
    p.add_argument("--hostile", choices=("plaintext-replies", "no-relates-to", "wrong-relates-to",
                                         "unavailable"),
                   default=None,
                   help="behave as a hostile server would, for the client's tests: answer encrypted "
                        "requests in plaintext, or leave a:RelatesTo out of replies, or relate them to "
                        "another message, or answer them with a plaintext 503 (a stopping service)")
    p.add_argument("--cbt-hardening", choices=("relaxed", "strict", "none"), default="relaxed",
                   help="NTLM channel binding check over HTTPS (default: relaxed, as Windows)")
    p.add_argument("--max-envelope-kb", type=int, default=500, help="MaxEnvelopeSizekb (default: 500)")
    p.add_argument("--max-shells-per-user", type=int, default=30, help="MaxShellsPerUser (default: 30)")
    p.add_argument("--max-timeout-ms", type=int, default=60000,
                   help="upper bound for OperationTimeout, MaxTimeoutms (default: 60000)")
    p.add_argument("-v", "--verbose", action="store_true", help="log every request to stderr")
    p.add_argument("--ops-log", metavar="FILE", default=None,
                   help="append one JSON line per WS-Management operation (Create, Command, Send, "
                        "Receive, Signal, Delete, Identify; faults too) to FILE")
    return p


def main(argv: list[str] | None = None) -> int:
    global VERBOSE
    args = build_parser().parse_args(argv)
    VERBOSE = args.verbose
    app = StandIn(args)

    def on_signal(signum, _frame):
        app.stop_event.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    try:
        app.start_listeners()
    except OSError as exc:
        log("cannot listen: %s" % exc)
        app.stop_listeners()
        return 1
    if app.tls is not None:
        emit("winrm-stand-in cert sha256=%s %s" % app.cert_fingerprint)
    emit(app.ready_line())
    last_reap = time.monotonic()
    while not app.stop_event.wait(0.5):
        if time.monotonic() - last_reap > 10:
            last_reap = time.monotonic()
            app.reap_idle()
    log("stopping")
    app.stop_listeners()
    app.delete_all_shells()
    return 0


if __name__ == "__main__":
    sys.exit(main())
