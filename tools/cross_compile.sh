#!/usr/bin/env bash
# Every C file of csrc/ compiled (not linked) for each platform the wheels claim,
# with zig's clang and the core's warnings as errors: x86_64-windows-gnu,
# x86_64-macos, aarch64-macos, aarch64-linux-gnu, and once more for
# aarch64-linux-gnu with LL_SHARED_LOCK_PORTABLE (macOS's lock on Linux).
# Any error or warning fails the run, naming the target and the file.
#
# Needs the ziglang package in the Python that runs it (PYTHON, default
# python): `python -m pip install ziglang`. Compiles on every core.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python}"
ZIG="$("$PYTHON" -c 'import os, ziglang; print(os.path.join(os.path.dirname(ziglang.__file__), "zig"))')"
[ -x "$ZIG" ] || { echo "no zig binary in the ziglang package: $ZIG" >&2; exit 1; }
"$ZIG" version
OUT="$(mktemp -d)"
trap 'rm -rf "$OUT"' EXIT

# the flags CMakeLists.txt gives the core (C11, no extensions, -Wall -Wextra, no FMA contraction)
FLAGS="-std=c11 -Wall -Wextra -Werror -O2 -ffp-contract=off -Icsrc"
# "target [extra flags]", one per line
BUILDS="x86_64-windows-gnu
x86_64-macos
aarch64-macos
aarch64-linux-gnu
aarch64-linux-gnu -DLL_SHARED_LOCK_PORTABLE"

jobs="$OUT/jobs"
: > "$jobs"
n=0
while IFS= read -r build; do
    for src in csrc/*.c csrc/methods/*.c; do
        n=$((n + 1))
        printf '%s\t%s\t%s\n' "$n" "$build" "$src" >> "$jobs"
    done
done <<< "$BUILDS"

# one compile per line of $jobs; a failure leaves its output in $OUT/failed.N
export ZIG FLAGS OUT
compile() {
    IFS=$'\t' read -r n build src <<< "$1"
    target="${build%% *}"
    extra=""
    [ "$build" = "$target" ] || extra="${build#* }"
    # shellcheck disable=SC2086  # FLAGS and extra are lists of flags
    if ! "$ZIG" cc -target "$target" $FLAGS $extra -c "$src" -o "$OUT/$n.o" > "$OUT/log.$n" 2>&1; then
        { echo "== $build: $src"; cat "$OUT/log.$n"; } > "$OUT/failed.$n"
    fi
}
export -f compile
tr '\n' '\0' < "$jobs" | xargs -0 -P "$(nproc)" -I{} bash -c 'compile "$1"' _ {}

if compgen -G "$OUT/failed.*" > /dev/null; then
    cat "$OUT"/failed.* >&2
    echo "cross-compilation failed: $(ls "$OUT"/failed.* | wc -l) of $n compiles" >&2
    exit 1
fi
echo "cross-compiled: $n compiles ($(echo "$BUILDS" | wc -l) builds of $(ls csrc/*.c csrc/methods/*.c | wc -l) files), no warning"
