#!/bin/sh
# Install the Debian 12 packages nupp-bpf builds and tests with, and a deb-src
# entry so `apt-get source luajit luajit2` works. Idempotent; silent when there
# is nothing to do. The format tests also fetch speedscope with npm, which
# comes with the machine's Node.js.
set -eu

PKGS="make gcc clang llvm bpftool libbpf-dev libelf-dev zlib1g-dev pkg-config \
      luajit libluajit-5.1-dev systemtap-sdt-dev python3 python3-pytest \
      dpkg-dev devscripts binutils libssl-dev gdb libcapstone-dev libdw-dev \
      debootstrap protobuf-c-compiler libprotobuf-c-dev golang-go chromium \
      python3-jsonschema"

SUDO=
[ "$(id -u)" -eq 0 ] || SUDO=sudo

missing=
for p in $PKGS; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' ||
        missing="$missing $p"
done

# deb-src for the Debian archive, mirroring the binary entries' suites.
have_src() {
    grep -rqsE '^(deb-src|Types:.*deb-src)' /etc/apt/sources.list /etc/apt/sources.list.d/
}
need_update=
if ! have_src; then
    $SUDO tee /etc/apt/sources.list.d/nupp-bpf-src.sources >/dev/null <<'SRC'
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb-src
URIs: http://deb.debian.org/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
    need_update=1
fi

[ -z "$missing" ] && [ -z "$need_update" ] && exit 0
echo "install-deps: installing:${missing:- (source index only)}" >&2
$SUDO apt-get update -qq >/dev/null
[ -z "$missing" ] || DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing >/dev/null
