# A hostile local user on a managed host (run as an unprivileged account, never root) who
# points names in its own directory at root's files while kwin manages them. Used by
# tests/security_local_user.rs; it runs inside a lab host.
#
# usage: links.py OWN VICTIM VICTIM_DIR STOP SECONDS
#
# OWN        a directory this user owns, where root manages `app.conf` (a file for this user),
#            `conf.d/job` (a file in a directory of this user) and `data` (a directory)
# VICTIM     a root-only file this user wants root to write, chown or chmod
# VICTIM_DIR a root-only directory this user wants root to write in
# STOP       the attack ends when this file exists, or after SECONDS
#
# In a loop, each name flips between a plain file or directory of this user and a link to
# the victim, each flip one atomic rename, so whenever kwin looks, and whenever it acts, the
# name may be either.
import os
import sys
import time

own, victim, victim_dir, stop, seconds = sys.argv[1:6]
assert os.getuid() != 0, "the attacker must not run as root"
end = time.time() + float(seconds)
names = [("app.conf", victim, False), ("conf.d", victim_dir, True), ("data", victim_dir, True)]
flips = 0
n = 0


def flip(name, target, is_dir):
    global flips, n
    n += 1
    path = os.path.join(own, name)
    try:
        if os.path.islink(path):
            fresh = os.path.join(own, ".real-%d" % n)
            if is_dir:
                os.mkdir(fresh)
            else:
                with open(fresh, "w") as f:
                    f.write("mine\n")
            if is_dir and os.path.lexists(path):
                os.rename(path, os.path.join(own, ".old-%d" % n))
            os.rename(fresh, path)
        else:
            link = os.path.join(own, ".link-%d" % n)
            os.symlink(target, link)
            if is_dir and os.path.isdir(path):
                os.rename(path, os.path.join(own, ".old-%d" % n))
            os.rename(link, path)
        flips += 1
    except OSError:
        pass


sys.stderr.write("links: ready\n")
sys.stderr.flush()
while time.time() < end and not os.path.exists(stop):
    for name, target, is_dir in names:
        flip(name, target, is_dir)
    time.sleep(0.0005)
sys.stderr.write("links: done: %d flips\n" % flips)
