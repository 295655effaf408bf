#!/bin/sh
# Install the Debian 12 packages nupp-bpf builds and tests with, and a deb-src
# entry so `apt-get source luajit luajit2` works. Idempotent; silent when there
# is nothing to do. The format tests also fetch speedscope with npm, which
# comes with the machine's Node.js.
set -eu

PKGS="make gcc clang llvm bpftool libbpf-dev libelf-dev zlib1g-dev pkg-config \
      luajit libluajit-5.1-dev systemtap-sdt-dev python3 python3-pytest \
      dpkg-dev devscripts binutils libmd-dev gdb libcapstone-dev libdw-dev \
      debootstrap protobuf-c-compiler libprotobuf-c-dev golang-go chromium \
      python3-jsonschema tmux libclang-rt-dev linux-perf wrk libjansson-dev"

SUDO=
[ "$(id -u)" -eq 0 ] || SUDO=sudo

missing=
for p in $PKGS; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' ||
        missing="$missing $p"
done

# deb-src for the Debian archive: the machine's own Debian entries (its
# mirror, suites and keys), as deb-src.
have_src() {
    grep -rqsE '^(deb-src|Types:.*deb-src)' /etc/apt/sources.list /etc/apt/sources.list.d/
}
src_entries() {
    for f in /etc/apt/sources.list.d/*.sources; do
        [ -r "$f" ] || continue
        awk 'BEGIN { RS = ""; ORS = "\n\n" }
             /(^|\n)Types: deb(\n|$)/ && /URIs: [^\n]*\/debian(-security)?\/?(\n|$)/ {
                 sub(/Types: deb/, "Types: deb-src"); print }' "$f"
    done
}
src_lines() {
    # Only the files that exist: a machine may have no sources.list at all.
    for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
        [ -r "$f" ] || continue
        sed -n 's#^deb \(\(\[[^]]*\] \)\?[^ ]*/debian\(-security\)\?/\? .*\)#deb-src \1#p' "$f"
    done
}
need_update=
if ! have_src; then
    entries=$(src_entries) lines=$(src_lines)
    if [ -z "$entries" ] && [ -z "$lines" ]; then
        echo "install-deps: no Debian entry in the machine's apt sources to add deb-src for" >&2
        exit 1
    fi
    [ -z "$entries" ] || printf '%s\n' "$entries" | $SUDO tee /etc/apt/sources.list.d/nupp-bpf-src.sources >/dev/null
    [ -z "$lines" ] || printf '%s\n' "$lines" | $SUDO tee /etc/apt/sources.list.d/nupp-bpf-src.list >/dev/null
    need_update=1
fi

[ -z "$missing" ] && [ -z "$need_update" ] && exit 0
echo "install-deps: installing:${missing:- (source index only)}" >&2
$SUDO apt-get update -qq >/dev/null
[ -z "$missing" ] || DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing >/dev/null
