#!/bin/sh
# build-variants.sh [NAME...]   build LuaJIT variants for the code-site tests
# build-variants.sh --list      print the variant matrix
#
# nupp-bpf finds its uprobe sites (interpreter blob, GC cycle probe,
# trace-abort jcc) in the machine code of builds it has never seen
# (user/luajit/code_sites.c), and reads facts of the build there too (GC64 or not,
# whether a struct layout fits). To learn which code compilers make of those
# sites, and to test the finder, LuaJIT is built here in several ways into
# build/variants/NAME/ (products: src/luajit, src/libluajit.so). Every build
# keeps its symbols and DWARF (CCDEBUG=-g, TARGET_STRIP=@:): the unit test
# (tests/unit/test_code_sites.c) strips copies and compares what the finder
# says about the copy with the symbols of the original.
#
# Sources: the unpacked Debian trees that scripts/build-luajit.sh leaves in
# build/luajit/src/ (bookworm: deb:luajit, deb:luajit2) and
# scripts/fetch-suite-source.sh in build/luajit/suites/ (deb:trixie:luajit,
# deb:sid:luajit), or a revision of a git
# repository through `git archive` (git:upstream:REV, git:openresty:REV; the
# repositories are $UPSTREAM_GIT and $OPENRESTY_GIT). A variant whose source
# is missing is skipped with a note. A variant already built with the same
# definition is skipped (stamp .nupp-variant); JOBS=n sets the make
# parallelism (default 2), B=dir the build directory.
set -eu

cd "$(dirname "$0")/.."
B=${B:-build}
JOBS=${JOBS:-2}
UPSTREAM_GIT=${UPSTREAM_GIT:-$B/git/luajit.git}
OPENRESTY_GIT=${OPENRESTY_GIT:-$B/git/luajit2.git}
OUT=$B/variants
MULTIARCH=x86_64-linux-gnu

# The matrix: name, source, make target (amalg as debian/rules, or "all" for
# a plain `make`), then the make variables, quoted as in a shell command.
# Every Debian source is built in every flavour, named by the source's prefix
# (bookworm's trees have none: luajit-gcc-O3, trixie-luajit-gcc-O3). gcc-O2
# is LuaJIT's own default, -O2 -fomit-frame-pointer; gcc-fp keeps the frame
# pointer.
FLAVOURS="
gcc-O1        CC=gcc CCOPT=-O1
gcc-O2        CC=gcc
gcc-O3        CC=gcc CCOPT=-O3
gcc-Os        CC=gcc CCOPT=-Os
gcc-fp        CC=gcc 'CCOPT=-O2 -fno-omit-frame-pointer'
clang-O2      CC=clang
gcc-nummode2  CC=gcc 'XCFLAGS=-DLUAJIT_NUMMODE=2 -DLUAJIT_ENABLE_LUA52COMPAT'
gcc-noffi     CC=gcc XCFLAGS=-DLUAJIT_DISABLE_FFI
"
DEBIAN_SOURCES="
luajit-         deb:luajit
luajit2-        deb:luajit2
trixie-luajit-  deb:trixie:luajit
sid-luajit-     deb:sid:luajit
"
# Bookworm's trees in gcc-O2 are what Debian built: the registry knows their
# .text (the stock binaries' tests run them), so they are no variant.
matrix() {
	echo "$DEBIAN_SOURCES" | while read -r prefix source; do
		[ -n "$prefix" ] || continue
		echo "$FLAVOURS" | while read -r flavour vars; do
			case $prefix$flavour in
			"$prefix"|luajit-gcc-O2|luajit2-gcc-O2) continue ;;
			esac
			echo "$prefix$flavour $source amalg $vars"
		done
	done
	cat <<'EOF'
luajit-gcc-nojit      deb:luajit             amalg  CC=gcc XCFLAGS=-DLUAJIT_DISABLE_JIT
luajit-gcc-nogc64     deb:luajit             amalg  CC=gcc XCFLAGS=-DLUAJIT_DISABLE_GC64
luajit2-clang-Os      deb:luajit2            amalg  CC=clang CCOPT=-Os
luajit2-gcc-nopie     deb:luajit2            amalg  CC=gcc 'TARGET_XLDFLAGS=-Wl,-E -no-pie'
luajit2-gcc-nogc64    deb:luajit2            amalg  CC=gcc XCFLAGS=-DLUAJIT_DISABLE_GC64
openresty-gcc-O2      git:openresty:v2.1-agentzh  amalg  CC=gcc
upstream-make         git:upstream:v2.1      all
upstream-clang-O3     git:upstream:v2.1      all    CC=clang CCOPT=-O3
EOF
}

die() { echo "build-variants: $*" >&2; exit 1; }
note() { echo "build-variants: $*" >&2; }

# The repository of a git:REPO:REV source spec.
git_repo() {
	rest=${1#git:}
	case ${rest%%:*} in
	upstream) echo "$UPSTREAM_GIT" ;;
	openresty) echo "$OPENRESTY_GIT" ;;
	*) die "unknown repository in $1" ;;
	esac
}

# The tree scripts/fetch-suite-source.sh unpacked for deb:SUITE:SRC.
suite_tree() {
	suite_src=${1#deb:}
	echo "$B/luajit/suites/${suite_src%%:*}-${suite_src#*:}"
}

# What spec $1 stands for now: the unpacked bookworm tree, the version of
# another suite's tree (as fetched), or the commit a git revision resolves
# to (so that a moved branch is built again); empty when the source is not
# available.
source_id() {
	case $1 in
	deb:*:*)
		sed -n 2p "$(suite_tree "$1")/.nupp-pin" 2>/dev/null ;;
	deb:*)
		ls -d "$B/luajit/src/${1#deb:}"-[0-9]*/ 2>/dev/null | head -n 1 ;;
	git:*)
		git -C "$(git_repo "$1")" rev-parse -q --verify "${1##*:}^{commit}" 2>/dev/null ;;
	*) die "unknown source $1" ;;
	esac
}

# Copy the source of spec $1 (resolved to $2 by source_id) into directory $3.
fetch_source() {
	case $1 in
	deb:*:*)
		cp -a "$(suite_tree "$1")" "$3"
		rm -f "$3/.nupp-pin" ;;
	deb:*)
		[ -f "$2/src/Makefile" ] || die "$2 holds no LuaJIT tree"
		cp -a "$2" "$3"
		rm -f "$3/.nupp-pin" ;;
	git:*)
		mkdir -p "$3"
		# .relver (LuaJIT's version, from git in a checkout) is filled
		# in by git archive (export-subst).
		git -C "$(git_repo "$1")" archive --format=tar "$2" | tar -x -C "$3" ;;
	esac
}

# Build variant $1 from its matrix line ($2: source, $3: target, $4: vars).
build_one() {
	name=$1 source=$2 target=$3 vars=$4
	dir=$OUT/$name
	id=$(source_id "$source") || id=
	if [ -z "$id" ]; then
		note "$name: skipped, source $source not available"
		return 0
	fi
	stamp="$source ($id) $target $vars"
	if [ "$(cat "$dir/.nupp-variant" 2>/dev/null)" = "$stamp" ]; then
		return 0
	fi
	rm -rf "$dir"
	mkdir -p "$OUT"
	fetch_source "$source" "$id" "$dir"
	echo "  BUILD    $name ($source, make $target $vars)"
	eval "set -- $vars"
	# env -i: the caller's CC/CFLAGS/MAKEFLAGS must not change the variant.
	if ! (cd "$dir" && env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/nonexistent LC_ALL=C \
		make -j"$JOBS" "$target" CCDEBUG=-g TARGET_STRIP=@: PREFIX=/usr \
		MULTILIB=lib/$MULTIARCH Q= E=@: "$@") >"$dir/build.log" 2>&1; then
		tail -n 30 "$dir/build.log" >&2
		die "$name: build failed (log: $dir/build.log)"
	fi
	for f in src/luajit src/libluajit.so; do
		[ -f "$dir/$f" ] || die "$name: the build produced no $f"
	done
	"$dir/src/luajit" -e 'assert(jit.version)' || die "$name: the built luajit does not run"
	echo "$stamp" >"$dir/.nupp-variant"
}

if [ "${1-}" = --list ]; then
	matrix
	exit 0
fi
matrix | while read -r name source target vars; do
	if [ $# -gt 0 ]; then
		case " $* " in *" $name "*) ;; *) continue ;; esac
	fi
	build_one "$name" "$source" "$target" "$vars"
done
