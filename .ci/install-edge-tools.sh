#!/usr/bin/env bash
# The programs the edge's tests run beside the proxy, from Debian's packages when missing:
# tmux (leastload top's live view, driven by send-keys and read by capture-pane), haproxy (a
# real PROXY protocol sender) and the openssl command (the TLS tests' certificates). Without
# root, or where a package cannot be installed, the tests that need it skip and say why.
set -uo pipefail
missing=()
for tool in tmux haproxy openssl; do
    command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
done
[ "${#missing[@]}" -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
    echo "not installed (needs root): ${missing[*]}: their tests skip" >&2
    exit 0
fi
apt-get update -qq || true
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null \
    || echo "could not install ${missing[*]}: their tests skip" >&2
