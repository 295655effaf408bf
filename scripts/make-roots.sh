#!/bin/sh
# make-roots.sh SUITE... - Debian roots for the tests, as a container image
# holds them: the suite's own stock LuaJIT (luajit, libluajit-5.1-2) and its
# nginx with the Lua module, made by debootstrap from the mirror this
# machine's apt uses. Each root goes to $B/roots/SUITE and is made once: a
# stamp names the package set it was made with.
set -eu
cd "$(dirname "$0")/.."
. scripts/debian-mirror.sh
B=${B:-build}
PKGS=luajit,libluajit-5.1-2,nginx-light,libnginx-mod-http-lua

MIRROR=${MIRROR:-$(mirror)}
[ -n "$MIRROR" ] || { echo "make-roots: no Debian mirror in the machine's apt sources; set MIRROR=" >&2; exit 1; }
for suite in "$@"; do
    root=$B/roots/$suite
    stamp=$root/.nupp-root
    [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$PKGS" ] && continue
    echo "make-roots: debootstrap $suite from $MIRROR into $root" >&2
    rm -rf "$root"
    mkdir -p "$B/roots"
    debootstrap --variant=minbase --include="$PKGS" "$suite" "$root" "$MIRROR" \
        >"$B/roots/$suite.log" 2>&1 || {
        echo "make-roots: debootstrap $suite failed; see $B/roots/$suite.log" >&2
        exit 1
    }
    echo "$PKGS" > "$stamp"
done
