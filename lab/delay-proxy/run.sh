#!/usr/bin/env bash
# Run the delay proxy in the foreground, e.g.
#   lab/delay-proxy/run.sh --delay-ms 25 --listen 127.0.0.1:42001 --to 10.213.0.6:22
#   lab/delay-proxy/run.sh --delay-ms 25 --map 42001=10.213.0.6:22 --map 42002=10.213.0.10:22
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)"
py=${KWIN_LAB_PYTHON:-/usr/bin/python3}
[[ -x $py ]] || py=python3
exec "$py" "$here/delay_proxy.py" "$@"
