#!/usr/bin/env bash
# CI stage: the nginx module. Debian's nginx and nginx-dev are installed (nginx/build.sh does
# it as root), the module is built once, and tests/nginx runs against Debian's nginx with it
# (real backends on 127.0.0.1). A module that does not build fails the stage here, where it
# can be built; elsewhere the tests skip, saying why.
# Usage: bash .ci/nginx.sh PYTHON   (the venv's python with the project and its test extra)
set -euo pipefail
PYTHON="${1:?usage: bash .ci/nginx.sh PYTHON}"
cd "$(dirname "$0")/.."
OUT="$(mktemp -d)"
trap 'rm -rf "$OUT"' EXIT
bash nginx/build.sh "$OUT"
nginx -V 2>&1 | head -1
LEASTLOAD_NGINX_MODULE="$OUT/ngx_http_upstream_leastload_module.so" LEASTLOAD_IMPLEMENTATION=c \
    "$PYTHON" -m pytest -q -p no:cacheprovider tests/nginx
