#!/usr/bin/env bash
# Creates the Python venv used by the WinRM stand-in host (server.py) and its
# cross-check (crosscheck.py), with pinned pyspnego / pywinrm / pypsrp.
#
#   KWIN_WINRM_VENV   venv path (default: <repo>/target/winrm-venv)
#   PYTHON            interpreter used to create the venv (default: python3)
#
# Idempotent: a stamp file records the hash of requirements.txt; a second run
# with an intact venv does nothing. Quiet unless something fails.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
venv=${KWIN_WINRM_VENV:-$root/target/winrm-venv}
python=${PYTHON:-python3}
reqs=$here/requirements.txt
stamp=$venv/.winrm-stand-in.stamp
want=$(sha256sum "$reqs" | cut -d' ' -f1)

probe() {
    [ -x "$venv/bin/python" ] &&
        "$venv/bin/python" -c 'import spnego, winrm, pypsrp, requests_ntlm, cryptography' >/dev/null 2>&1
}

if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && probe; then
    exit 0
fi

log=$(mktemp "${TMPDIR:-/tmp}/winrm-stand-in-setup.XXXXXX")
trap 'rm -f "$log"' EXIT

if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -m pip --version >/dev/null 2>&1; then
    rm -rf "$venv"
    mkdir -p "$(dirname "$venv")"
    if ! "$python" -m venv "$venv" >"$log" 2>&1; then
        cat "$log" >&2
        echo "setup.sh: '$python -m venv' failed (on Debian: apt-get install -y python3-venv)" >&2
        exit 1
    fi
fi

ok=0
for attempt in 1 2 3 4 5; do
    if "$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
        --no-input --timeout 60 --retries 5 -r "$reqs" >"$log" 2>&1; then
        ok=1
        break
    fi
    echo "setup.sh: pip install attempt $attempt failed, retrying" >&2
    sleep $((attempt * 5))
done
if [ "$ok" != 1 ]; then
    cat "$log" >&2
    echo "setup.sh: could not install $reqs into $venv" >&2
    exit 1
fi
if ! probe; then
    echo "setup.sh: venv at $venv is incomplete after install" >&2
    exit 1
fi
echo "$want" >"$stamp"
