#!/usr/bin/env bash
# Builds ngx_http_upstream_leastload_module.so for the installed nginx:
#   bash nginx/build.sh OUTDIR
# Needs nginx and nginx-dev (Debian's: the source tree nginx was configured
# from, /usr/share/nginx/src); installs them when run as root and missing.
# The C core (csrc/) is compiled into a static archive with the project's own
# flags, then nginx's configure (--with-compat) and `make modules` run in a
# temporary copy of that tree. Prints the load_module line to add.
set -euo pipefail
if [ $# -ne 1 ]; then
    echo "usage: bash nginx/build.sh OUTDIR" >&2
    exit 2
fi
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(dirname "$HERE")"
mkdir -p "$1"
OUT="$(cd "$1" && pwd)"
NGINX_SRC=/usr/share/nginx/src

if ! command -v nginx >/dev/null 2>&1 || [ ! -x "$NGINX_SRC/configure" ]; then
    if [ "$(id -u)" -ne 0 ]; then
        echo "nginx and nginx-dev are needed (apt-get install nginx nginx-dev, as root)" >&2
        exit 1
    fi
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends nginx nginx-dev >/dev/null
fi
CC="${CC:-cc}"
command -v "$CC" >/dev/null 2>&1 || { echo "a C compiler is needed ($CC)" >&2; exit 1; }
command -v make >/dev/null 2>&1 || { echo "make is needed" >&2; exit 1; }

WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

# the core, as CMakeLists.txt compiles it (no FMA contraction: replay's floats round as Python's)
mkdir -p "$WORK/core"
CORE_SRCS=(ll_vserver.c ll_tree.c ll_replay.c ll_pending.c ll_floor.c ll_methods.c ll_columns.c ll_fixed.c
           ll_shared.c ll_xxh64.c ll_hash.c ll_peakewma.c ll_policy.c ll_slowstart.c ll_ejection.c
           ll_utilization.c methods/least.c methods/roundrobin.c methods/hash.c methods/sampled.c
           ll_shared_posix.c ll_shared_robust.c ll_shared_owner.c ll_shared_win.c)
for src in "${CORE_SRCS[@]}"; do
    "$CC" -std=c11 -O2 -fPIC -ffp-contract=off -pthread -Wall -Wextra ${LEASTLOAD_CORE_CFLAGS:-} \
        -I"$ROOT/csrc" -c "$ROOT/csrc/$src" -o "$WORK/core/$(echo "$src" | tr / _).o"
done
ar rcs "$WORK/libleastload_core.a" "$WORK"/core/*.o

cp -r "$NGINX_SRC" "$WORK/nginx"
cd "$WORK/nginx"
# the module's directory as it stands in the repository (its config reaches ../csrc)
LEASTLOAD_CORE_LIB="$WORK/libleastload_core.a" ./configure --with-compat \
    ${LEASTLOAD_NGINX_CC_OPT:+--with-cc-opt="$LEASTLOAD_NGINX_CC_OPT"} \
    ${LEASTLOAD_NGINX_LD_OPT:+--with-ld-opt="$LEASTLOAD_NGINX_LD_OPT"} \
    --add-dynamic-module="$HERE" > "$WORK/configure.log" 2>&1 \
    || { tail -30 "$WORK/configure.log" >&2; exit 1; }
make -j"$(nproc 2>/dev/null || echo 2)" -f objs/Makefile modules > "$WORK/make.log" 2>&1 || { tail -40 "$WORK/make.log" >&2; exit 1; }
# a new file moved into place: a running nginx that has the old one mapped keeps it intact
cp objs/ngx_http_upstream_leastload_module.so "$OUT/.ngx_http_upstream_leastload_module.so.new"
mv -f "$OUT/.ngx_http_upstream_leastload_module.so.new" "$OUT/ngx_http_upstream_leastload_module.so"
echo "load_module $OUT/ngx_http_upstream_leastload_module.so;"
