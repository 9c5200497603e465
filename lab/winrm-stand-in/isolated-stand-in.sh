#!/bin/sh
# Run a command (the WinRM stand-in server) as a stand-in host with private files: in a new
# mount namespace where /etc and /var/lib are overlays whose writes land in DIR/upper, and
# /run is an empty tmpfs (as after a boot). The network is the machine's, so the host reaches
# services on 127.0.0.1. Needs root. Nothing the command writes to /etc, /var/lib or /run
# reaches the machine's own files.
#
# usage: isolated-stand-in.sh DIR COMMAND [ARG...]
#
# The command gets KWIN_STANDIN_ISOLATED=DIR in its environment only once every mount is in
# place; the lab's stand-in programs (windows-feature-stand-in, kubeadm-stand-in) refuse to
# run without it.
set -eu
[ "$#" -ge 2 ] || { echo "usage: $0 DIR COMMAND [ARG...]" >&2; exit 2; }
dir=$(cd "$1" && pwd) || exit 2
shift
[ "$(id -u)" = 0 ] || { echo "isolated-stand-in: needs root (mount namespaces)" >&2; exit 1; }
for d in etc var-lib; do
  mkdir -p "$dir/upper/$d" "$dir/work/$d"
done
# shellcheck disable=SC2016 # the inner script expands its own arguments
exec unshare --mount --propagation private /bin/sh -c '
set -eu
dir=$1; shift
mount -t overlay kwin-standin-etc -o "lowerdir=/etc,upperdir=$dir/upper/etc,workdir=$dir/work/etc" /etc
mount -t overlay kwin-standin-varlib -o "lowerdir=/var/lib,upperdir=$dir/upper/var-lib,workdir=$dir/work/var-lib" /var/lib
mount -t tmpfs -o mode=0755,size=16m kwin-standin-run /run
for m in kwin-standin-etc kwin-standin-varlib kwin-standin-run; do
  grep -q "^$m " /proc/self/mounts || { echo "isolated-stand-in: $m is not mounted" >&2; exit 1; }
done
KWIN_STANDIN_ISOLATED=$dir
export KWIN_STANDIN_ISOLATED
exec "$@"
' isolated-stand-in "$dir" "$@"
