#!/bin/sh
# fetch-suite-source.sh SUITE...  fetch the pinned LuaJIT source of other Debian suites
# fetch-suite-source.sh --repin   rewrite luajit/suite-pins to what the suites ship now
#
# The bookworm trees the registry is made from come through the machine's own
# apt (scripts/build-luajit.sh). Debian 13 (trixie) and sid ship other LuaJIT
# revisions, which the variant builds (scripts/build-variants.sh) and the
# layout generator (scripts/gen-layouts.py) need as sources too. They come
# here through a private apt configuration per suite, $B/luajit/apt/SUITE
# (deb-src entries for the suite, and its -updates and -security pockets
# unless it is sid, on the Debian mirror the machine's apt uses), which
# leaves the machine's own apt alone. For each SUITE of luajit/suite-pins:
#
#   $B/luajit/suites/SUITE-SRC/      the unpacked tree, Debian patches applied
#   $B/luajit/suites/SUITE-SRC/.nupp-pin
#       line 1: "SRC VERSION" as pinned (the stamp: nothing is fetched while
#               it matches the pin)
#       line 2: "SRC VERSION" fetched, then "orig-only" if so (below)
#
# The pinned version is fetched while the mirror lists it. When the suite has
# moved on (sid does, often) the version it ships now is fetched instead, with
# a note (`make regen` re-pins), so that a run on a fresh machine does not
# break. When the mirror lists a version but cannot serve its .dsc or Debian
# diff, the tree is the upstream .orig tarball alone, and line 2 says
# "orig-only". B=dir overrides build/.
set -eu

cd "$(dirname "$0")/.."
. scripts/debian-mirror.sh
B=${B:-build}
APT_DIR=$(realpath -m "$B/luajit/apt")	# absolute: apt runs in download directories
PINS=${PINS:-luajit/suite-pins}
KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg
MIRROR=${MIRROR:-$(mirror)}
[ -n "$MIRROR" ] || { echo "fetch-suite-source: no Debian mirror in the machine's apt sources; set MIRROR=" >&2; exit 1; }
SECURITY=${SECURITY:-$(echo "$MIRROR" | sed 's#/debian/*$#/debian-security#')}

die() { echo "fetch-suite-source: $*" >&2; exit 1; }
note() { echo "fetch-suite-source: $*" >&2; }

# apt-get or apt-cache ($1) on the private configuration of suite $2.
apt_in() {
	cmd=$1 dir=$APT_DIR/$2; shift 2
	"$cmd" -q -o Dir::Etc::sourcelist="$dir/sources.list" -o Dir::Etc::sourceparts=- \
		-o Dir::State::Lists="$dir/lists" -o Dir::Cache="$dir/cache" "$@"
}

# Write suite $1's sources list and update its index.
apt_setup() {
	dir=$APT_DIR/$1
	mkdir -p "$dir/lists/partial" "$dir/cache/archives/partial"
	{
		echo "deb-src [signed-by=$KEYRING] $MIRROR $1 main"
		if [ "$1" != sid ] && [ "$1" != unstable ]; then
			echo "deb-src [signed-by=$KEYRING] $MIRROR $1-updates main"
			echo "deb-src [signed-by=$KEYRING] $SECURITY $1-security main"
		fi
	} >"$dir/sources.list"
	apt_in apt-get "$1" update >"$dir/update.log" 2>&1 ||
		{ tail -n 20 "$dir/update.log" >&2; die "apt-get update for $1 failed (log: $dir/update.log)"; }
}

# The newest version of source package $2 that suite $1 ships now.
current_version() {
	apt_in apt-cache "$1" showsrc "$2" 2>/dev/null |
		awk -v p="$2" '$1 == "Package:" { ok = $2 == p } ok && $1 == "Version:" { print $2 }' |
		sort -V | tail -n 1
}

# Does suite $1 list version $3 of source package $2?
has_version() {
	apt_in apt-cache "$1" showsrc "$2" 2>/dev/null |
		awk -v p="$2" -v v="$3" '$1 == "Package:" { ok = $2 == p }
			ok && $1 == "Version:" && $2 == v { f = 1 } END { exit !f }'
}

# Download version $3 of source package $2 (suite $1) into $4 and unpack it
# as $4/tree; print "orig-only" when only the .orig tarball could be had.
fetch_unpack() {
	suite=$1 src=$2 version=$3 dl=$4
	rm -rf "$dl"
	mkdir -p "$dl"
	uris=$(apt_in apt-get "$suite" source --print-uris --only-source "$src=$version" 2>/dev/null) ||
		die "$suite lists no source $src $version"
	# A file the mirror does not serve fails the command; what it did
	# download stays, and is checked against the sizes apt expects.
	(cd "$dl" && apt_in apt-get "$suite" source --download-only --only-source "$src=$version") \
		>"$dl/download.log" 2>&1 || true
	missing=
	for f in $(printf '%s\n' "$uris" | awk '/^'\''/ { print $2 "/" $3 }'); do
		[ "$(stat -c %s "$dl/${f%/*}" 2>/dev/null)" = "${f##*/}" ] || missing="$missing ${f%/*}"
	done
	if [ -z "$missing" ]; then
		dsc=$(printf '%s\n' "$uris" | awk '$2 ~ /\.dsc$/ { print $2 }')
		(cd "$dl" && dpkg-source -x "$dsc" tree) >>"$dl/download.log" 2>&1 ||
			{ tail -n 20 "$dl/download.log" >&2; die "dpkg-source -x $dsc failed"; }
		return 0
	fi
	orig=$(ls "$dl"/*.orig.tar.* 2>/dev/null | head -n 1)
	case $missing in *.orig.tar.*) orig= ;; esac
	[ -n "$orig" ] || { tail -n 20 "$dl/download.log" >&2; die "$src $version ($suite): could not download its source"; }
	note "$src $version ($suite): the mirror serves no$missing; using the .orig tarball alone"
	mkdir -p "$dl/tree"
	tar -x --strip-components=1 -f "$orig" -C "$dl/tree"
	echo orig-only
}

fetch_suite() {
	suite=$1
	set -- $(awk -v s="$suite" '!/^[ \t]*(#|$)/ && $1 == s { print $2, $3; n++ }
		END { exit n == 1 ? 0 : 1 }' "$PINS") || die "no single entry for '$suite' in $PINS"
	src=$1 pinned=$2
	tree=$B/luajit/suites/$suite-$src
	[ "$(head -n 1 "$tree/.nupp-pin" 2>/dev/null)" = "$src $pinned" ] && return 0
	apt_setup "$suite"
	version=$pinned
	if ! has_version "$suite" "$src" "$pinned"; then
		version=$(current_version "$suite" "$src")
		[ -n "$version" ] || die "$suite lists no source package $src"
		note "$suite no longer lists $src $pinned; fetching $version, what it ships now (\`make regen\` re-pins)"
	fi
	echo "  FETCH    $src $version ($suite, source)"
	dl=$tree.dl
	how=$(fetch_unpack "$suite" "$src" "$version" "$dl")
	[ -f "$dl/tree/src/Makefile" ] || die "$src $version ($suite): the tree holds no LuaJIT"
	printf '%s %s\n%s %s%s\n' "$src" "$pinned" "$src" "$version" "${how:+ $how}" >"$dl/tree/.nupp-pin"
	rm -rf "$tree"
	mv "$dl/tree" "$tree"
}

repin() {
	tmp=$PINS.tmp
	: >"$tmp"
	while IFS= read -r line; do
		case $line in
		''|'#'*) printf '%s\n' "$line" >>"$tmp"; continue ;;
		esac
		set -- $line
		apt_setup "$1"
		new=$(current_version "$1" "$2")
		[ -n "$new" ] || die "$1 lists no source package $2"
		[ "$3" = "$new" ] || note "$1 $2: $3 -> $new"
		printf '%-8s %-8s %s\n' "$1" "$2" "$new" >>"$tmp"
	done <"$PINS"
	if cmp -s "$tmp" "$PINS"; then rm -f "$tmp"; else mv "$tmp" "$PINS"; fi
}

[ $# -ge 1 ] || die "usage: $0 SUITE...|--repin"
if [ "$1" = --repin ]; then repin; exit 0; fi
for suite in "$@"; do
	fetch_suite "$suite"
done
