#!/usr/bin/env python3
"""Cross-check of the WinRM stand-in host against real WinRM clients.

Starts server.py on loopback (HTTP with NTLM + message encryption, HTTPS with
Basic and NTLM) and drives it with unmodified pywinrm and pypsrp clients:
the same scripts must give identical, correct results through every
client/transport pair; authentication failures, the unencrypted-HTTP refusal,
WS-Man faults, the Receive long-poll timeout, large inputs and outputs, the
boot-time convention, simulated reboots and SIGTERM shutdown are checked too.

Run:  target/winrm-venv/bin/python lab/winrm-stand-in/crosscheck.py
Ends with "crosscheck: N passed, M failed"; exit status 0 only if M == 0.
"""

from __future__ import annotations

import base64
import datetime
import hashlib
import os
import queue
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import uuid
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
SERVER = os.path.join(HERE, "server.py")
USER = "kwin"
PASSWORD = "St4nd-in!" + uuid.uuid4().hex[:8]
PW_ENV = "KWIN_CROSSCHECK_PASSWORD"
MIB = 1024 * 1024

warnings.filterwarnings("ignore")

try:
    import requests
    import winrm
    import winrm.exceptions
    from winrm.protocol import Protocol
    import xmltodict
    from pypsrp.exceptions import AuthenticationError, WSManFaultError
    from pypsrp.shell import Process, SignalCode, WinRS
    from pypsrp.wsman import WSMan
except ImportError as exc:  # pragma: no cover
    sys.stderr.write("crosscheck: %s; run lab/winrm-stand-in/setup.sh and use target/winrm-venv/bin/python\n" % exc)
    sys.exit(2)

PASSED = 0
FAILED = 0


def check(name: str, ok: bool, detail: str = "") -> bool:
    global PASSED, FAILED
    if ok:
        PASSED += 1
        print("ok   - %s" % name, flush=True)
    else:
        FAILED += 1
        print("FAIL - %s%s" % (name, (": " + detail) if detail else ""), flush=True)
    return ok


def expect_raises(name: str, fn, exc_types, predicate=lambda e: True) -> None:
    try:
        fn()
    except exc_types as exc:  # noqa: B030
        check(name, predicate(exc), "unexpected %r" % (exc,))
        return
    except Exception as exc:
        check(name, False, "raised %s: %s" % (type(exc).__name__, exc))
        return
    check(name, False, "no error raised")


def ps_encoded(script: str) -> list[str]:
    return ["-NoProfile", "-NonInteractive", "-EncodedCommand",
            base64.b64encode(script.encode("utf-16-le")).decode()]


PS_STDIN = ["-NoProfile", "-NonInteractive", "-Command", "-"]


# --------------------------------------------------------------------------
# The server under test
# --------------------------------------------------------------------------


class Server:
    def __init__(self, state: str, extra: list[str] | None = None):
        self.state = state
        env = dict(os.environ)
        env[PW_ENV] = PASSWORD
        self.log_path = os.path.join(state, "..", "server.log")
        self.log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            [sys.executable, SERVER, "--http", "127.0.0.1:0", "--https", "127.0.0.1:0", "--state", state,
             "--user", USER, "--password-env", PW_ENV, "--auth", "ntlm,basic", "--reboot-down-secs", "1",
             "-v"] + (extra or []),
            stdout=subprocess.PIPE, stderr=self.log, stdin=subprocess.DEVNULL, env=env,
        )
        self.lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()
        self.http_port = self.https_port = 0
        self.wait_ready(30)

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            self.lines.put(raw.decode("utf-8", "replace").rstrip("\n"))

    def wait_line(self, prefix: str, timeout: float) -> str:
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError("no %r line from server within %gs" % (prefix, timeout))
            try:
                line = self.lines.get(timeout=remaining)
            except queue.Empty:
                continue
            if line.startswith(prefix):
                return line

    def wait_ready(self, timeout: float) -> str:
        line = self.wait_line("winrm-stand-in ready ", timeout)
        fields = dict(part.split("=", 1) for part in line.split()[2:])
        self.http_port = int(fields["http"].rsplit(":", 1)[1])
        self.https_port = int(fields["https"].rsplit(":", 1)[1])
        return line

    @property
    def http(self) -> str:
        return "http://127.0.0.1:%d/wsman" % self.http_port

    @property
    def https(self) -> str:
        return "https://127.0.0.1:%d/wsman" % self.https_port

    def boot_time(self) -> str:
        with open(os.path.join(self.state, "boot-time")) as fh:
            return fh.read().strip()

    def stop(self) -> int | None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.log.close()
        return self.proc.returncode


# --------------------------------------------------------------------------
# Clients
# --------------------------------------------------------------------------


class PywinrmClient:
    def __init__(self, name: str, endpoint: str, transport: str, password: str = PASSWORD, op_timeout: int = 20):
        self.name = name
        self.protocol = Protocol(
            endpoint, transport=transport, username=USER, password=password,
            server_cert_validation="ignore", operation_timeout_sec=op_timeout, read_timeout_sec=op_timeout + 10,
        )
        self.shell = None

    def open(self) -> str:
        if self.shell is None:
            self.shell = self.protocol.open_shell()
        return self.shell

    def start(self, command: str, args: list[str]) -> str:
        return self.protocol.run_command(self.open(), command, args)

    def send(self, cmd_id: str, data: bytes, end: bool) -> None:
        self.protocol.send_command_input(self.shell, cmd_id, data, end=end)

    def finish(self, cmd_id: str) -> tuple[bytes, bytes, int]:
        out, err, rc = self.protocol.get_command_output(self.shell, cmd_id)
        self.protocol.cleanup_command(self.shell, cmd_id)
        return out, err, rc

    def run(self, command: str, args: list[str], stdin: list[bytes] | None = None):
        cmd_id = self.start(command, args)
        if stdin is not None:
            for i, chunk in enumerate(stdin):
                self.send(cmd_id, chunk, end=(i == len(stdin) - 1))
        return self.finish(cmd_id)

    def close(self) -> None:
        if self.shell is not None:
            try:
                self.protocol.close_shell(self.shell)
            except Exception:
                pass
            self.shell = None


class PypsrpClient:
    def __init__(self, name: str, port: int, ssl: bool, auth: str, password: str = PASSWORD, op_timeout: int = 20):
        self.name = name
        self.wsman = WSMan("127.0.0.1", port=port, ssl=ssl, auth=auth, username=USER, password=password,
                           cert_validation=False, operation_timeout=op_timeout, read_timeout=op_timeout + 10,
                           connection_timeout=10, reconnection_retries=0)
        self.shell = WinRS(self.wsman)
        self.procs: dict[str, Process] = {}

    def open(self) -> WinRS:
        self.shell.open()
        return self.shell

    def start(self, command: str, args: list[str]) -> str:
        p = Process(self.open(), command, args)
        p.begin_invoke()
        assert p.id is not None
        self.procs[p.id] = p
        return p.id

    def send(self, cmd_id: str, data: bytes, end: bool) -> None:
        self.shell.send("stdin", data, command_id=cmd_id, end=end)

    def finish(self, cmd_id: str) -> tuple[bytes, bytes, int]:
        p = self.procs.pop(cmd_id)
        p.end_invoke()
        p.signal(SignalCode.TERMINATE)
        return p.stdout, p.stderr, p.rc if p.rc is not None else -1

    def run(self, command: str, args: list[str], stdin: list[bytes] | None = None):
        cmd_id = self.start(command, args)
        if stdin is not None:
            for i, chunk in enumerate(stdin):
                self.send(cmd_id, chunk, end=(i == len(stdin) - 1))
        return self.finish(cmd_id)

    def close(self) -> None:
        try:
            self.shell.close()
        except Exception:
            pass
        try:
            self.wsman.close()
        except Exception:
            pass


def make_clients(srv: Server) -> list:
    return [
        PywinrmClient("pywinrm ntlm http+encryption", srv.http, "ntlm"),
        PywinrmClient("pywinrm basic https", srv.https, "basic"),
        PywinrmClient("pywinrm ntlm https+cbt", srv.https, "ntlm"),
        PypsrpClient("pypsrp negotiate http+encryption", srv.http_port, False, "negotiate"),
        PypsrpClient("pypsrp ntlm http+encryption", srv.http_port, False, "ntlm"),
        PypsrpClient("pypsrp basic https", srv.https_port, True, "basic"),
    ]


def chunks(data: bytes, size: int) -> list[bytes]:
    return [data[i:i + size] for i in range(0, len(data), size)] or [b""]


# --------------------------------------------------------------------------
# Checks
# --------------------------------------------------------------------------


def long_script() -> tuple[str, bytes]:
    lines = ["n=0"]
    i = 0
    while sum(len(x) + 1 for x in lines) < 12000:
        lines.append("n=$((n + %d)) # padding line %04d to make the script long" % (i, i))
        i += 1
    lines.append('echo "sum=$n"')
    total = sum(range(i))
    return "\r\n".join(lines) + "\r\n", ("sum=%d\n" % total).encode()


def common_cases() -> list[tuple[str, str, list[str], list[bytes] | None, tuple[bytes, bytes, int]]]:
    script, expect = long_script()
    assert len(script) > 8191
    uni = "h\u00e9llo w\u00f6rld \u2713 \u00df \u4e2d\u6587 \U0001F600"
    return [
        ("echo via stdin script", "powershell.exe", PS_STDIN, [b"echo hello\n"], (b"hello\n", b"", 0)),
        ("echo via -EncodedCommand", "powershell.exe", ps_encoded("echo encoded; echo second"), None,
         (b"encoded\nsecond\n", b"", 0)),
        ("stderr output", "powershell.exe", PS_STDIN, [b"echo to-out\r\necho to-err >&2\r\n"],
         (b"to-out\n", b"to-err\n", 0)),
        ("non-zero exit code", "powershell.exe", PS_STDIN, [b"echo failing >&2\nexit 7\n"], (b"", b"failing\n", 7)),
        ("cmd.exe /c", "cmd.exe", ["/c", "echo via-cmd"], None, (b"via-cmd\n", b"", 0)),
        ("script > 8191 chars via stdin", "powershell.exe", PS_STDIN,
         chunks(script.encode(), 4000), (expect, b"", 0)),
        ("script > 8191 chars on the command line is refused like cmd.exe", "powershell.exe",
         ps_encoded(script), None, (b"", b"The command line is too long.\r\n", 1)),
        ("unicode output (UTF-8 bytes)", "powershell.exe", PS_STDIN,
         [("printf '%%s\\n' '%s'\n" % uni).encode("utf-8")], ((uni + "\n").encode("utf-8"), b"", 0)),
        ("stdin data to a running command", "powershell.exe", ps_encoded("tr a-z A-Z"),
         [b"abc", b"def\n", b""], (b"ABCDEF\n", b"", 0)),
        ("boot-time marker unset without marker", "powershell.exe", PS_STDIN,
         [b'echo "[${KWIN_STANDIN_BOOT_TIME:-}]"\n'], (b"[]\n", b"", 0)),
    ]


def run_matrix(srv: Server, clients: list) -> None:
    results: dict[str, dict[str, tuple]] = {}
    for c in clients:
        results[c.name] = {}
        for name, command, args, stdin, expect in common_cases():
            try:
                got = c.run(command, args, stdin)
            except Exception as exc:
                got = ("error", repr(exc))
            results[c.name][name] = got
            check("%s: %s" % (c.name, name), tuple(got) == expect, "got %r, expected %r" % (got, expect))
    # the same scripts give identical results through every client and transport
    names = [n for n, *_ in common_cases()]
    base = clients[0].name
    same = all(results[c.name][n] == results[base][n] for c in clients for n in names)
    check("identical results across %d client/transport pairs" % len(clients), same)


def run_boot_marker(srv: Server, clients: list) -> None:
    boot = srv.boot_time()
    script = b"# kwin:boot-time\r\necho \"$KWIN_STANDIN_BOOT_TIME\"\r\n"
    for c in clients:
        out, err, rc = c.run("powershell.exe", PS_STDIN, [script])
        check("%s: boot-time marker gives STATE/boot-time" % c.name,
              (out, rc) == ((boot + "\n").encode(), 0), "got %r %r %r, boot %r" % (out, err, rc, boot))


def run_large(srv: Server, clients: list) -> None:
    data = os.urandom(10 * MIB)
    digest = hashlib.sha256(data).hexdigest()
    big_out_script = "yes 0123456789abcdef0123456789abcde | head -c %d" % (10 * MIB)
    expected_out = (b"0123456789abcdef0123456789abcde\n" * (10 * MIB // 32 + 1))[:10 * MIB]
    for c in clients:
        t = time.monotonic()
        out, err, rc = c.run("powershell.exe", ps_encoded("sha256sum | cut -c1-64"), chunks(data, 200 * 1024))
        check("%s: 10 MiB stdin in %d Send chunks (%.1fs)" % (c.name, len(chunks(data, 200 * 1024)),
                                                              time.monotonic() - t),
              (out.strip().decode(), rc) == (digest, 0), "got %r %r %r" % (out[:80], err[:200], rc))
        t = time.monotonic()
        out, err, rc = c.run("powershell.exe", ps_encoded(big_out_script))
        check("%s: 10 MiB stdout (%.1fs)" % (c.name, time.monotonic() - t),
              len(out) == 10 * MIB and out == expected_out and rc == 0,
              "got %d bytes rc %r err %r" % (len(out), rc, err[:200]))


def run_envelope_limit(srv: Server) -> None:
    c = PywinrmClient("pywinrm ntlm http", srv.http, "ntlm")
    try:
        cmd = c.start("powershell.exe", ps_encoded("cat >/dev/null"))
        expect_raises("Send larger than MaxEnvelopeSize (500 KiB) gives w:EncodingLimit fault",
                      lambda: c.send(cmd, b"x" * (600 * 1024), end=True), winrm.exceptions.WSManFaultError,
                      lambda e: e.code == 500 and e.fault_subcode == "w:EncodingLimit")
        c.send(cmd, b"small", end=True)
        out, err, rc = c.finish(cmd)
        check("command still usable after the quota fault", rc == 0, "rc %r err %r" % (rc, err))
    finally:
        c.close()


def run_timeouts_and_signals(srv: Server) -> None:
    # pywinrm: Receive long-poll returns the w:TimedOut fault (2150858793) when nothing arrives in time
    c = PywinrmClient("pywinrm ntlm http", srv.http, "ntlm", op_timeout=1)
    try:
        shell = c.open()
        cmd = c.start("powershell.exe", ps_encoded("sleep 2; echo late"))
        t = time.monotonic()
        expect_raises("pywinrm: Receive with no output times out (WinRMOperationTimeoutError)",
                      lambda: c.protocol.get_command_output_raw(shell, cmd),
                      winrm.exceptions.WinRMOperationTimeoutError)
        waited = time.monotonic() - t
        check("Receive long-poll honours OperationTimeout PT1S (waited %.2fs)" % waited, 0.8 <= waited <= 1.8)
        out, err, rc = c.protocol.get_command_output(shell, cmd)
        check("output after a timed-out Receive is delivered", (out, rc) == (b"late\n", 0), repr((out, err, rc)))
        c.protocol.cleanup_command(shell, cmd)

        # Signal terminate kills the process
        cmd = c.start("powershell.exe", ps_encoded("echo $$; exec sleep 60"))
        first = b""
        deadline = time.monotonic() + 10
        while not first.strip() and time.monotonic() < deadline:
            try:
                o, _e, _rc, _done = c.protocol.get_command_output_raw(shell, cmd)
                first += o
            except winrm.exceptions.WinRMOperationTimeoutError:
                pass
        pid = int(first.strip() or b"0")
        check("long-running command reports its pid", pid > 0, repr(first))
        c.protocol.cleanup_command(shell, cmd)  # Signal .../signal/terminate
        gone = False
        for _ in range(50):
            if pid and not os.path.exists("/proc/%d" % pid):
                gone = True
                break
            time.sleep(0.1)
        check("Signal terminate kills the process", gone)

        # faults: unknown shell id, unknown action
        def receive_unknown_shell():
            c.protocol.get_command_output_raw(str(uuid.uuid4()).upper(), cmd)

        expect_raises("unknown ShellId gives WSManFault 2150858843 (HTTP 500)", receive_unknown_shell,
                      winrm.exceptions.WSManFaultError,
                      lambda e: e.code == 500 and e.wsman_fault_code == 2150858843
                      and e.fault_subcode == "w:InvalidSelectors" and "shell was not found" in e.reason)

        def bad_action():
            req = {"env:Envelope": c.protocol.build_wsman_header(
                resource_uri="http://schemas.microsoft.com/wbem/wsman/1/windows/shell/cmd",
                action="http://schemas.microsoft.com/wbem/wsman/1/windows/shell/Bogus", shell_id=shell)}
            req["env:Envelope"].setdefault("env:Body", {})
            c.protocol.send_message(xmltodict.unparse(req))

        expect_raises("unsupported action gives WSManFault 2150858771", bad_action,
                      winrm.exceptions.WSManFaultError,
                      lambda e: e.code == 500 and e.wsman_fault_code == 2150858771
                      and e.fault_subcode == "a:ActionNotSupported")
    finally:
        c.close()

    # pypsrp sees the same TimedOut fault code and RelatesTo/MessageID matching
    p = PypsrpClient("pypsrp negotiate http", srv.http_port, False, "negotiate")
    try:
        shell = p.open()
        cmd = p.start("powershell.exe", ps_encoded("sleep 2; echo late"))
        expect_raises("pypsrp: Receive timeout is WSManFault 2150858793",
                      lambda: shell.receive("stdout stderr", cmd, timeout=1), WSManFaultError,
                      lambda e: e.code == 2150858793)
        out, err, rc = p.finish(cmd)
        check("pypsrp: output after timeout", (out, rc) == (b"late\n", 0), repr((out, err, rc)))
        cmd = p.start("powershell.exe", ps_encoded("echo started; exec sleep 60"))
        t = time.monotonic()
        proc = p.procs[cmd]
        while b"started" not in proc.stdout and time.monotonic() - t < 10:
            proc.poll_invoke(timeout=1)
        shell.signal(SignalCode.CTRL_C, cmd)
        while proc.state != "http://schemas.microsoft.com/wbem/wsman/1/windows/shell/CommandState/Done" \
                and time.monotonic() - t < 10:
            proc.poll_invoke(timeout=1)
        check("pypsrp: Signal ctrl_c stops the command (rc %r)" % proc.rc, proc.rc not in (None, 0))
        p.procs.pop(cmd, None)
    finally:
        p.close()


def run_shell_quota(srv: Server) -> None:
    c = PywinrmClient("pywinrm basic https", srv.https, "basic")
    opened: list[str] = []
    fault = None
    try:
        for _ in range(31):
            try:
                opened.append(c.protocol.open_shell())
            except winrm.exceptions.WSManFaultError as exc:
                fault = exc
                break
        check("MaxShellsPerUser (30): the next Create gives w:QuotaLimit 2150859173",
              fault is not None and fault.wsman_fault_code == 2150859173 and fault.fault_subcode == "w:QuotaLimit"
              and len(opened) <= 30, "opened %d, fault %r" % (len(opened), fault))
        for sh in opened:
            c.protocol.close_shell(sh, close_session=False)
        opened = []
        out, err, rc = c.run("cmd.exe", ["/c", "echo again"])
        check("shells can be created again after Delete", (out, rc) == (b"again\n", 0), repr((out, err, rc)))
    finally:
        for sh in opened:
            try:
                c.protocol.close_shell(sh, close_session=False)
            except Exception:
                pass
        c.close()


def run_auth_failures(srv: Server) -> None:
    bad = "not-the-password"

    def pywinrm_run(endpoint: str, transport: str, **kw):
        s = winrm.Session(endpoint, auth=(USER, bad), transport=transport, server_cert_validation="ignore",
                          read_timeout_sec=15, operation_timeout_sec=10, **kw)
        return s.run_cmd("echo", ["x"])

    expect_raises("pywinrm ntlm http: wrong password -> 401 (InvalidCredentialsError)",
                  lambda: pywinrm_run(srv.http, "ntlm"), winrm.exceptions.InvalidCredentialsError)
    expect_raises("pywinrm basic https: wrong password -> 401 (InvalidCredentialsError)",
                  lambda: pywinrm_run(srv.https, "basic"), winrm.exceptions.InvalidCredentialsError)
    expect_raises("pywinrm ntlm https: wrong password -> 401 (InvalidCredentialsError)",
                  lambda: pywinrm_run(srv.https, "ntlm"), winrm.exceptions.InvalidCredentialsError)

    def pypsrp_open(port: int, ssl: bool, auth: str):
        c = PypsrpClient("x", port, ssl, auth, password=bad)
        try:
            c.open()
        finally:
            c.wsman.close()

    expect_raises("pypsrp negotiate http: wrong password -> 401 (AuthenticationError)",
                  lambda: pypsrp_open(srv.http_port, False, "negotiate"), AuthenticationError)
    expect_raises("pypsrp basic https: wrong password -> 401 (AuthenticationError)",
                  lambda: pypsrp_open(srv.https_port, True, "basic"), AuthenticationError)

    # Basic is only accepted over HTTPS
    def basic_over_http():
        s = winrm.Session(srv.http, auth=(USER, PASSWORD), transport="basic", read_timeout_sec=15,
                          operation_timeout_sec=10)
        return s.run_cmd("echo", ["x"])

    expect_raises("Basic over HTTP with the right password -> 401", basic_over_http,
                  winrm.exceptions.InvalidCredentialsError)

    # unencrypted SOAP over HTTP after NTLM authentication is refused (AllowUnencrypted=false)
    def never_encrypt():
        p = Protocol(srv.http, transport="ntlm", username=USER, password=PASSWORD, message_encryption="never",
                     read_timeout_sec=15, operation_timeout_sec=10)
        p.open_shell()

    expect_raises("pywinrm ntlm http with message_encryption=never -> HTTP 500", never_encrypt,
                  winrm.exceptions.WinRMTransportError, lambda e: e.code == 500)

    c = PywinrmClient("pywinrm ntlm http", srv.http, "ntlm")
    try:
        shell = c.open()  # authenticated, encrypted connection
        req = {"env:Envelope": c.protocol.build_wsman_header(
            resource_uri="http://schemas.microsoft.com/wbem/wsman/1/windows/shell/cmd",
            action="http://schemas.xmlsoap.org/ws/2004/09/transfer/Delete", shell_id=shell)}
        req["env:Envelope"].setdefault("env:Body", {})
        session = c.protocol.transport.session
        # sent the way pywinrm sends (session.send), so the authenticated pooled connection is reused
        prepared = session.prepare_request(requests.Request(
            "POST", srv.http, data=xmltodict.unparse(req).encode(),
            headers={"Content-Type": "application/soap+xml;charset=UTF-8"}))
        resp = session.send(prepared, timeout=15)
        check("plaintext request on an authenticated HTTP connection -> HTTP 500",
              resp.status_code == 500 and not resp.history,
              "status %d after %r" % (resp.status_code, [h.status_code for h in resp.history]))
        out, err, rc = c.run("powershell.exe", PS_STDIN, [b"echo still-fine\n"])
        check("encrypted requests on the same session still work", (out, rc) == (b"still-fine\n", 0),
              repr((out, err, rc)))
    finally:
        c.close()


IDENTIFY = (b'<s:Envelope xmlns:s="http://www.w3.org/2003/05/soap-envelope" '
            b'xmlns:wsmid="http://schemas.dmtf.org/wbem/wsman/identity/1/wsmanidentity.xsd">'
            b'<s:Header/><s:Body><wsmid:Identify/></s:Body></s:Envelope>')
ENC_TYPE = 'multipart/encrypted;protocol="application/HTTP-SPNEGO-session-encrypted";boundary="Encrypted Boundary"'


def seal(ctx, soap: bytes) -> bytes:
    """MS-WSMV 2.2.9.1.1 framing, byte for byte as a Windows client sends it."""
    w = ctx.wrap_winrm(soap)
    return (b"--Encrypted Boundary\r\n"
            b"\tContent-Type: application/HTTP-SPNEGO-session-encrypted\r\n"
            b"\tOriginalContent: type=application/soap+xml;charset=UTF-8;Length=%d\r\n"
            b"--Encrypted Boundary\r\n"
            b"\tContent-Type: application/octet-stream\r\n" % len(soap)
            + struct.pack("<I", len(w.header)) + w.header + w.data + b"--Encrypted Boundary--\r\n")


def unseal(ctx, body: bytes) -> bytes:
    head = (b"--Encrypted Boundary\r\n"
            b"\tContent-Type: application/HTTP-SPNEGO-session-encrypted\r\n"
            b"\tOriginalContent: type=application/soap+xml;charset=UTF-8;Length=")
    assert body.startswith(head), body[:120]
    rest = body[len(head):]
    length, rest = rest.split(b"\r\n", 1)
    mid = b"--Encrypted Boundary\r\n\tContent-Type: application/octet-stream\r\n"
    assert rest.startswith(mid), rest[:80]
    rest = rest[len(mid):]
    (sig_len,) = struct.unpack_from("<I", rest)
    assert sig_len == 16, sig_len
    sig, data = rest[4:4 + sig_len], rest[4 + sig_len:]
    assert data.endswith(b"--Encrypted Boundary--\r\n")
    data = data[:-len(b"--Encrypted Boundary--\r\n")]
    assert len(data) == int(length)
    return ctx.unwrap_winrm(sig, data)


def run_raw_wire(srv: Server) -> None:
    """The HTTP exchange at the byte level, the way a new client implementation sees it."""
    import http.client
    import spnego
    import spnego.channel_bindings

    conn = http.client.HTTPConnection("127.0.0.1", srv.http_port, timeout=15)

    def post(c, body: bytes, headers: dict):
        c.request("POST", "/wsman", body=body, headers=dict({"Content-Length": str(len(body))}, **headers))
        r = c.getresponse()
        return r, r.read()

    r, _ = post(conn, b"", {})
    check("raw: unauthenticated POST -> 401, WWW-Authenticate: Negotiate (no Basic over HTTP)",
          r.status == 401 and r.getheader("WWW-Authenticate") == "Negotiate", repr(r.getheaders()))
    ctx = spnego.client(USER, PASSWORD, hostname="127.0.0.1", service="http", protocol="ntlm",
                        options=spnego.NegotiateOptions.use_ntlm)
    r, _ = post(conn, b"", {"Authorization": "Negotiate " + base64.b64encode(ctx.step()).decode()})
    challenge = (r.getheader("WWW-Authenticate") or "")
    check("raw: NTLM NEGOTIATE -> 401 with 'Negotiate <CHALLENGE>'",
          r.status == 401 and challenge.startswith("Negotiate TlRMTVNTUAACAAAA"), challenge[:40])
    auth = ctx.step(base64.b64decode(challenge.split()[1]))
    r, body = post(conn, b"", {"Authorization": "Negotiate " + base64.b64encode(auth).decode()})
    check("raw: NTLM AUTHENTICATE with an empty body -> 200, empty", r.status == 200 and body == b"",
          "%d %r" % (r.status, body[:80]))
    r, body = post(conn, seal(ctx, IDENTIFY), {"Content-Type": ENC_TYPE})
    ok = r.status == 200 and r.getheader("Content-Type") == ENC_TYPE
    try:
        reply = unseal(ctx, body)
    except Exception as exc:  # noqa: BLE001
        reply = repr(exc).encode()
        ok = False
    check("raw: sealed Identify -> 200 sealed IdentifyResponse (16-byte NTLM signature framing)",
          ok and b"IdentifyResponse" in reply and b"Microsoft Corporation" in reply, repr(reply[:200]))
    other = http.client.HTTPConnection("127.0.0.1", srv.http_port, timeout=15)
    r, _ = post(other, seal(ctx, IDENTIFY), {"Content-Type": ENC_TYPE})
    check("raw: NTLM is per connection: a second TCP connection gets 401", r.status == 401)
    r, body = post(conn, IDENTIFY, {"Content-Type": "application/soap+xml;charset=UTF-8"})
    check("raw: plaintext SOAP on the authenticated connection -> 500, empty body",
          r.status == 500 and body == b"", "%d %r" % (r.status, body[:80]))
    other.close()
    conn.close()

    tls = http.client.HTTPSConnection("127.0.0.1", srv.https_port, timeout=15,
                                      context=__import__("ssl")._create_unverified_context())
    r, _ = post(tls, b"", {})
    check("raw: HTTPS offers Negotiate and Basic realm=\"WSMAN\"",
          r.status == 401 and r.getheader("WWW-Authenticate") == 'Negotiate, Basic realm="WSMAN"',
          repr(r.getheader("WWW-Authenticate")))
    # NTLM over HTTPS: channel binding tokens (tls-server-end-point) are checked when the client sends them
    bogus = spnego.channel_bindings.GssChannelBindings(application_data=b"tls-server-end-point:" + b"\0" * 31 + b"x")
    bad = spnego.client(USER, PASSWORD, hostname="127.0.0.1", service="http", protocol="ntlm",
                        options=spnego.NegotiateOptions.use_ntlm, channel_bindings=bogus)
    r, _ = post(tls, b"", {"Authorization": "Negotiate " + base64.b64encode(bad.step()).decode()})
    token = base64.b64decode((r.getheader("WWW-Authenticate") or "x y").split()[1])
    r, _ = post(tls, b"", {"Authorization": "Negotiate " + base64.b64encode(bad.step(token)).decode()})
    check("raw: NTLM over HTTPS with a wrong channel binding token -> 401", r.status == 401, str(r.status))
    basic = base64.b64encode(("%s:%s" % (USER, PASSWORD)).encode()).decode()
    r, body = post(tls, IDENTIFY, {"Authorization": "Basic " + basic,
                                  "Content-Type": "application/soap+xml;charset=UTF-8"})
    check("raw: Basic over HTTPS, plaintext Identify -> 200", r.status == 200 and b"IdentifyResponse" in body,
          "%d %r" % (r.status, body[:120]))
    tls.close()


def port_closed(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return False
    except OSError:
        return True


def run_reboots(srv: Server) -> None:
    boot0 = srv.boot_time()
    c = PywinrmClient("pywinrm ntlm http", srv.http, "ntlm")
    old_shell = c.open()
    out, err, rc = c.run("shutdown.exe", ["/r", "/t", "1"])
    check("shutdown.exe /r /t 1 answers success", (out, err, rc) == (b"", b"", 0), repr((out, err, rc)))
    t0 = time.monotonic()
    try:
        srv.wait_line("winrm-stand-in rebooting", 10)
        check("reboot starts after ~1s (%.1fs)" % (time.monotonic() - t0), time.monotonic() - t0 < 5)
        check("listeners are closed while the host is down", port_closed(srv.http_port) and
              port_closed(srv.https_port))
        old_http = srv.http_port
        srv.wait_ready(20)
        check("ready line again after the reboot, same ports", srv.http_port == old_http)
    except TimeoutError as exc:
        check("simulated reboot", False, str(exc))
        return
    boot1 = srv.boot_time()
    check("boot time changed and moved forward (%s -> %s)" % (boot0, boot1),
          datetime.datetime.fromisoformat(boot1.replace("Z", "+00:00"))
          > datetime.datetime.fromisoformat(boot0.replace("Z", "+00:00")))

    fresh = PywinrmClient("pywinrm ntlm http", srv.http, "ntlm")
    try:
        out, err, rc = fresh.run("powershell.exe", PS_STDIN, [b"# kwin:boot-time\necho $KWIN_STANDIN_BOOT_TIME\n"])
        check("boot-time marker reports the new boot time", out == (boot1 + "\n").encode(), repr((out, err, rc)))
        expect_raises("shells do not survive a reboot",
                      lambda: fresh.protocol.get_command_output_raw(old_shell, str(uuid.uuid4()).upper()),
                      winrm.exceptions.WSManFaultError, lambda e: e.wsman_fault_code == 2150858843)
    finally:
        fresh.close()

    p = PypsrpClient("pypsrp basic https", srv.https_port, True, "basic")
    try:
        out, err, rc = p.run("powershell.exe", PS_STDIN, [b"Restart-Computer -Force\r\n"])
        check("Restart-Computer -Force on stdin answers success", (out, err, rc) == (b"", b"", 0),
              repr((out, err, rc)))
    finally:
        p.wsman.close()
    try:
        srv.wait_line("winrm-stand-in rebooting", 10)
        srv.wait_ready(20)
    except TimeoutError as exc:
        check("second simulated reboot", False, str(exc))
        return
    boot2 = srv.boot_time()
    check("second reboot writes a newer boot time (%s)" % boot2, boot2 > boot1)

    # kwin's reboot trigger: its boot-time query and a shutdown.exe line in one script.
    trigger = (b"# kwin:boot-time\r\n(Get-CimInstance -ClassName Win32_OperatingSystem).LastBootUpTime"
               b".ToUniversalTime().ToString('o')\r\n"
               b"shutdown.exe /r /t 1 /d p:4:1 /c \"kwin: reboot requested by a task\" | Out-Null\r\n")
    c = PywinrmClient("pywinrm ntlm http", srv.http, "ntlm")
    try:
        out, err, rc = c.run("powershell.exe", PS_STDIN, [trigger])
        check("kwin's reboot trigger answers the current boot time", (out, err, rc) == ((boot2 + "\n").encode(), b"", 0),
              repr((out, err, rc)))
    finally:
        c.close()
    try:
        srv.wait_line("winrm-stand-in rebooting", 10)
        srv.wait_ready(20)
    except TimeoutError as exc:
        check("reboot by kwin's trigger script", False, str(exc))
        return
    boot3 = srv.boot_time()
    check("kwin's trigger script reboots the host (%s)" % boot3, boot3 > boot2)
    try:
        with open(os.path.join(srv.state, "..", "booted")) as fh:
            seen = fh.read().split()
    except OSError as exc:
        seen = [str(exc)]
    check("--on-boot runs once per boot, with the new boot time", seen == [boot1, boot2, boot3], repr(seen))


def run_shutdown(srv: Server) -> None:
    c = PywinrmClient("pywinrm basic https", srv.https, "basic")
    shell = c.open()
    cmd = c.start("powershell.exe", ps_encoded("echo $$; exec sleep 300"))
    out = b""
    deadline = time.monotonic() + 10
    while not out.strip() and time.monotonic() < deadline:
        try:
            o, _e, _rc, _d = c.protocol.get_command_output_raw(shell, cmd)
            out += o
        except winrm.exceptions.WinRMOperationTimeoutError:
            pass
    pid = int(out.strip() or b"0")
    t = time.monotonic()
    rc = srv.stop()
    check("SIGTERM stops the server promptly with status 0 (%.1fs)" % (time.monotonic() - t),
          rc == 0 and time.monotonic() - t < 10, "rc %r" % rc)
    time.sleep(0.3)
    check("child processes are killed on shutdown", pid > 0 and not os.path.exists("/proc/%d" % pid),
          "pid %d" % pid)


def main() -> int:
    signal.signal(signal.SIGALRM, lambda *_: (_ for _ in ()).throw(TimeoutError("crosscheck watchdog")))
    signal.alarm(900)
    work = tempfile.mkdtemp(prefix="winrm-crosscheck-")
    state = os.path.join(work, "state")
    os.makedirs(state)
    srv = None
    try:
        t = time.monotonic()
        booted = os.path.join(work, "booted")
        srv = Server(state, ["--on-boot", 'printf "%%s\\n" "$KWIN_STANDIN_BOOT_TIME" >> %s' % booted])
        check("server ready in %.1fs (http=%d https=%d)" % (time.monotonic() - t, srv.http_port, srv.https_port),
              True)
        with open(os.path.join(state, "cert.sha256")) as fh:
            colon, plain = fh.read().split()
        check("STATE/cert.sha256 has the colon and plain forms of one fingerprint",
              colon.replace(":", "").lower() == plain and len(plain) == 64 and colon == colon.upper())

        clients = make_clients(srv)
        try:
            run_matrix(srv, clients)
            run_boot_marker(srv, clients)
            run_large(srv, [clients[0], clients[3], clients[5]])
        finally:
            for c in clients:
                c.close()
        run_raw_wire(srv)
        run_envelope_limit(srv)
        run_timeouts_and_signals(srv)
        run_shell_quota(srv)
        run_auth_failures(srv)
        run_reboots(srv)
        run_shutdown(srv)
    except Exception as exc:
        check("crosscheck ran to completion", False, "%s\n%s" % (exc, traceback.format_exc()))
    finally:
        signal.alarm(0)
        if srv is not None and srv.proc.poll() is None:
            srv.stop()
        if FAILED:
            try:
                with open(os.path.join(work, "server.log"), "rb") as fh:
                    tail = fh.read()[-6000:].decode("utf-8", "replace")
                print("--- server log (tail) ---\n" + tail)
            except OSError:
                pass
        shutil.rmtree(work, ignore_errors=True)
    print("crosscheck: %d passed, %d failed" % (PASSED, FAILED))
    return 0 if FAILED == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
