#!/bin/sh
# fetch-nginx.sh - Debian's nginx with its Lua module (the OpenResty
# lua-nginx-module), unpacked into $B/stock/nginx for the tests: a real server
# that loads LuaJIT from a shared library into a master and forks workers.
# Unpacked, not installed: nothing starts a service, and the module loads
# whichever libluajit-5.1.so.2 the test puts first (luajit2's, as OpenResty
# ships, or luajit's). Skips what is already there.
set -eu

B=${B:-build}
PKGS="nginx libnginx-mod-http-ndk libnginx-mod-http-lua lua-resty-core lua-resty-lrucache"
DIR=$B/stock/nginx
DEBS=$B/stock/debs
STAMP=$DIR/.nupp-extracted

[ "$(cat "$STAMP" 2>/dev/null)" = "$PKGS" ] && exit 0
echo "  FETCH    $PKGS (binary)"
mkdir -p "$DEBS"
chmod 777 "$DEBS"	# apt downloads as _apt
( cd "$DEBS" && apt-get download -q $PKGS >"../nginx-download.log" 2>&1 ) || {
	echo "fetch-nginx: error: apt-get download failed; see $B/stock/nginx-download.log" >&2
	exit 1
}
rm -rf "$DIR"
mkdir -p "$DIR"
for p in $PKGS; do
	deb=$(ls -t "$DEBS/${p}_"*.deb | head -n 1)
	dpkg-deb -x "$deb" "$DIR"
done
for f in usr/sbin/nginx usr/lib/nginx/modules/ngx_http_lua_module.so usr/share/lua/5.1/resty/core.lua; do
	[ -e "$DIR/$f" ] || { echo "fetch-nginx: error: no $f in the packages" >&2; exit 1; }
done
echo "$PKGS" >"$STAMP"
