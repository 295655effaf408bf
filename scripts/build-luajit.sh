#!/bin/sh
# build-luajit.sh TREE     fetch and build one pinned LuaJIT tree (luajit | luajit2)
# build-luajit.sh --repin  rewrite luajit/pins to the versions apt knows now
#
# For TREE, with the version pinned in luajit/pins:
#   build/luajit/src/        `apt-get source` download and the unpacked tree
#                            (Debian patches applied), kept as a pristine copy
#   build/luajit/TREE/       a copy of it built exactly as debian/rules does:
#                            `make amalg CCDEBUG=-g PREFIX=/usr
#                             MULTILIB=lib/x86_64-linux-gnu Q= E=@:`
#                            products: src/luajit, src/libluajit.so (both
#                            unstripped), src/jit/*.lua, build.log
#   build/stock/TREE/        the matching Debian binary packages, unpacked with
#                            dpkg-deb -x (usr/bin/luajit, usr/lib/.../libluajit*)
# Each step is skipped when its stamp records the pinned version, so running
# this again is cheap. B=dir overrides build/, JOBS=n the make parallelism.
set -eu

cd "$(dirname "$0")/.."
B=${B:-build}
PINS=${PINS:-luajit/pins}
MULTIARCH=x86_64-linux-gnu

die() { echo "build-luajit: $*" >&2; exit 1; }

# Print the pins line of tree $1 as "tree src version exe lib".
pin_line() {
	awk -v t="$1" '!/^[ \t]*(#|$)/ && $1 == t { print $1, $2, $3, $4, $5; n++ }
		END { exit n == 1 ? 0 : 1 }' "$PINS" || die "no single entry for '$1' in $PINS"
}

# Run a command in directory $1 with its output in log $2; show the log on failure.
logged() {
	dir=$1 log=$2; shift 2
	if ! (cd "$dir" && "$@") >"$log" 2>&1; then
		tail -n 40 "$log" >&2
		die "failed: $* (in $dir; log: $log)"
	fi
}

repin() {
	tmp=$PINS.tmp
	: >"$tmp"
	while IFS= read -r line; do
		case $line in
		''|'#'*|' '*'#'*) printf '%s\n' "$line" >>"$tmp"; continue ;;
		esac
		set -- $line
		tree=$1 src=$2 old=$3 exe=$4 lib=$5
		new=$(apt-cache policy "$exe" | awk '/Candidate:/ { print $2 }')
		libv=$(apt-cache policy "$lib" | awk '/Candidate:/ { print $2 }')
		[ -n "$new" ] && [ "$new" != "(none)" ] || die "apt-cache policy: no candidate for $exe (run apt-get update?)"
		[ "$libv" = "$new" ] || die "$lib candidate $libv differs from $exe candidate $new"
		apt-cache showsrc "$src" | awk -v v="$new" '$1 == "Version:" && $2 == v { f = 1 } END { exit !f }' ||
			die "apt-cache showsrc $src has no version $new (is a deb-src entry configured? see scripts/install-deps.sh)"
		[ "$old" = "$new" ] || echo "build-luajit: $tree: $old -> $new" >&2
		printf '%-9s %-8s %-43s %-8s %s\n' "$tree" "$src" "$new" "$exe" "$lib" >>"$tmp"
	done <"$PINS"
	if cmp -s "$tmp" "$PINS"; then rm -f "$tmp"; else mv "$tmp" "$PINS"; fi
}

[ $# -eq 1 ] || die "usage: $0 luajit|luajit2|--repin"
if [ "$1" = --repin ]; then repin; exit 0; fi

set -- $(pin_line "$1")
TREE=$1 SRC=$2 VERSION=$3 EXE_PKG=$4 LIB_PKG=$5
PIN="$SRC $VERSION"
UPSTREAM=${VERSION#*:}
UPSTREAM=${UPSTREAM%-*}
JOBS=${JOBS:-$(nproc 2>/dev/null || echo 2)}

# --- 1. source -------------------------------------------------------------
SRCDIR=$B/luajit/src
PRISTINE=$SRCDIR/$SRC-$UPSTREAM
mkdir -p "$SRCDIR"
if [ "$(cat "$PRISTINE/.nupp-pin" 2>/dev/null)" != "$PIN" ]; then
	echo "  FETCH    $SRC $VERSION (source)"
	rm -rf "$PRISTINE"
	# apt downloads as _apt; a root-owned dir only causes a warning.
	logged "$SRCDIR" "$B/luajit/$TREE-source.log" apt-get source -q --only-source "$SRC=$VERSION"
	[ -f "$PRISTINE/src/Makefile" ] || die "apt-get source did not unpack $PRISTINE"
	echo "$PIN" >"$PRISTINE/.nupp-pin"
fi

# --- 2. build --------------------------------------------------------------
TDIR=$B/luajit/$TREE
if [ "$(cat "$TDIR/.nupp-built" 2>/dev/null)" != "$PIN" ]; then
	echo "  BUILD    $TREE ($SRC $VERSION, make amalg)"
	rm -rf "$TDIR"
	cp -a "$PRISTINE" "$TDIR"
	rm -f "$TDIR/.nupp-pin"
	# A clean environment: CC/CFLAGS/MAKEFLAGS from the caller must not leak
	# into the build, or .text would no longer match the Debian binaries.
	logged "$TDIR" "$TDIR/build.log" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/nonexistent LC_ALL=C \
		make -j"$JOBS" amalg CCDEBUG=-g PREFIX=/usr MULTILIB=lib/$MULTIARCH Q= E=@:
	for f in src/luajit src/libluajit.so src/jit/vmdef.lua; do
		[ -f "$TDIR/$f" ] || die "$TREE: build produced no $f"
	done
	"$TDIR/src/luajit" -e 'assert(jit.version)' || die "$TREE: built luajit does not run"
	echo "$PIN" >"$TDIR/.nupp-built"
fi

# --- 3. stock Debian binaries ----------------------------------------------
STOCK=$B/stock/$TREE
DEBS=$B/stock/debs
if [ "$(cat "$STOCK/.nupp-extracted" 2>/dev/null)" != "$PIN" ]; then
	echo "  FETCH    $EXE_PKG $LIB_PKG $VERSION (binary)"
	mkdir -p "$DEBS"
	FV=$(echo "$VERSION" | sed 's/:/%3a/')
	for p in "$EXE_PKG" "$LIB_PKG"; do
		ls "$DEBS/${p}_${FV}_"*.deb >/dev/null 2>&1 ||
			logged "$DEBS" "$B/stock/$TREE-download.log" apt-get download -q "$p=$VERSION"
	done
	rm -rf "$STOCK"
	mkdir -p "$STOCK"
	for p in "$EXE_PKG" "$LIB_PKG"; do
		deb=$(ls "$DEBS/${p}_${FV}_"*.deb | head -n 1)
		dpkg-deb -x "$deb" "$STOCK"
	done
	[ -f "$STOCK/usr/bin/luajit" ] || die "$EXE_PKG has no usr/bin/luajit"
	ls "$STOCK/usr/lib/$MULTIARCH"/libluajit*.so.*.*.* >/dev/null 2>&1 || die "$LIB_PKG has no shared library"
	echo "$PIN" >"$STOCK/.nupp-extracted"
fi
