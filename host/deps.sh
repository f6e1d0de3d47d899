#!/usr/bin/env bash
# host/deps.sh: install and fetch everything vnetlab needs to build and test.
#
#  1. Debian binary packages (apt-get as root; as a normal user the exact
#     apt-get line is printed and we stop).
#  2. Source packages from Debian's archive, through a private apt
#     configuration whose archive URIs are read at run time from this
#     machine's own apt sources (no host name is written in the repo), checked
#     against the signed Sources index: lwIP 2.1.3 (bookworm) and picolibc
#     1.8.10 (trixie).
#  3. picolibc built for freestanding x86-64 with meson/ninja.
#
# Everything lands in deps/ (git-ignored). Idempotent: a second run only
# checks stamps and package status and takes well under a second.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
deps=${VNETLAB_DEPS:-$top/deps}
quiet=${QUIET:-0}

say() { [ "$quiet" = 1 ] || echo "deps: $*"; }
die() {
	echo "deps: error: $*" >&2
	exit 1
}

# Binary packages: build toolchain, QEMU + OVMF (test runner), GNU-EFI,
# meson/ninja for picolibc, mtools + gdisk for the disk image, python3 for the
# test runner and harness, iproute2/iputils for namespace tests, clang +
# libclang-rt-14-dev for the libFuzzer targets (tests/fuzz/), memcached and
# libmemcached-tools (memccapable, memcaslap) for the memcached benchmark,
# pkg-config for the DPDK flags of host/pktgen/vupacegen.c.
PKGS=(gcc make binutils qemu-system-x86 ovmf gnu-efi meson ninja-build
	mtools gdisk python3 iproute2 iputils-ping xz-utils ca-certificates clang-format
	sockperf iperf python3-matplotlib dpdk-dev clang libclang-rt-14-dev memcached
	libmemcached-tools pkg-config)

install_packages() {
	local missing=() p
	# One dpkg-query for all packages keeps the idempotent path fast.
	local status
	status=$(dpkg-query -W -f='${Package} ${db:Status-Abbrev}\n' "${PKGS[@]}" 2>/dev/null || true)
	for p in "${PKGS[@]}"; do
		grep -qE "^$p ii" <<<"$status" || missing+=("$p")
	done
	[ ${#missing[@]} -eq 0 ] && return 0
	if [ "$(id -u)" != 0 ]; then
		die "missing Debian packages; as root run: apt-get install -y ${missing[*]}"
	fi
	say "installing ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq || die "apt-get update failed"
	apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null ||
		die "apt-get install ${missing[*]} failed"
}

# The archive URI of this machine's Debian main repository, read from its apt
# configuration (deb822 first, then one-line format).
archive_uri() {
	local uri=""
	if [ -r /etc/apt/sources.list.d/debian.sources ]; then
		uri=$(awk '/^URIs:/ { for (i = 2; i <= NF; i++) if ($i !~ /security/) { print $i; exit } }' \
			/etc/apt/sources.list.d/debian.sources)
	fi
	if [ -z "$uri" ]; then
		uri=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null |
			awk '$1 == "deb" && $0 !~ /security/ { for (i = 2; i <= NF; i++) if ($i ~ /:\/\//) { print $i; exit } }')
	fi
	[ -n "$uri" ] || die "cannot find a Debian archive URI in /etc/apt sources"
	echo "$uri"
}

APT=()
apt_private() {
	[ ${#APT[@]} -gt 0 ] && return 0
	local d=$deps/apt
	mkdir -p "$d/lists/partial" "$d/cache/archives/partial"
	local keyring=/usr/share/keyrings/debian-archive-keyring.gpg
	[ -r "$keyring" ] || die "missing $keyring (Debian package debian-archive-keyring)"
	cat >"$d/src.sources" <<EOF
Types: deb-src
URIs: $(archive_uri)
Suites: bookworm trixie
Components: main
Signed-By: $keyring
EOF
	APT=(-o "Dir::Etc::SourceList=$d/src.sources" -o Dir::Etc::SourceParts=/dev/null
		-o "Dir::State::Lists=$d/lists" -o "Dir::Cache=$d/cache"
		-o APT::Sandbox::User=root)
	say "updating private source index"
	apt-get "${APT[@]}" -qq update || die "apt-get update of the private source index failed"
}

fetch_lwip() {
	[ -f "$deps/lwip/.stamp" ] && return 0
	apt_private
	local dl=$deps/download
	mkdir -p "$dl"
	say "fetching lwip/bookworm source"
	(cd "$dl" && apt-get "${APT[@]}" -qq source --download-only lwip/bookworm) ||
		die "apt-get source lwip/bookworm failed"
	local tarball
	tarball=$(ls "$dl"/lwip_2.1.3*.orig.tar.* 2>/dev/null | head -1)
	[ -n "$tarball" ] || die "lwIP orig tarball not found after download"
	rm -rf "$deps/lwip"
	mkdir -p "$deps/lwip"
	tar -xf "$tarball" -C "$deps/lwip" --strip-components=1
	[ -f "$deps/lwip/src/core/tcp.c" ] || die "lwIP tarball has no src/core/tcp.c"
	touch "$deps/lwip/.stamp"
}

fetch_picolibc() {
	[ -f "$deps/picolibc-src/.stamp" ] && return 0
	apt_private
	local dl=$deps/download
	mkdir -p "$dl"
	# trixie's picolibc .dsc is missing from the archive, so `apt-get source`
	# fails; the orig tarball is there, and the signed Sources index gives its
	# size and SHA256, which apt-helper verifies.
	local line uri file hash
	line=$(apt-get "${APT[@]}" -qq --print-uris source picolibc/trixie 2>/dev/null |
		grep -E "picolibc_1\.8\.10[^ ]*\.orig\.tar" | head -1) ||
		true
	[ -n "$line" ] || die "picolibc 1.8.10 orig tarball not in the trixie Sources index"
	uri=$(awk '{ gsub("\x27", "", $1); print $1 }' <<<"$line")
	file=$(awk '{ print $2 }' <<<"$line")
	hash=$(awk '{ print $4 }' <<<"$line")
	case "$hash" in SHA256:*) ;; *) die "no SHA256 for $file in the Sources index" ;; esac
	if [ ! -f "$dl/$file" ]; then
		say "fetching $file"
		/usr/lib/apt/apt-helper download-file "$uri" "$dl/$file.part" "$hash" >/dev/null ||
			die "download of $file failed or its SHA256 did not match"
		mv "$dl/$file.part" "$dl/$file"
	fi
	rm -rf "$deps/picolibc-src"
	mkdir -p "$deps/picolibc-src"
	tar -xf "$dl/$file" -C "$deps/picolibc-src" --strip-components=1
	touch "$deps/picolibc-src/.stamp"
}

build_picolibc() {
	[ -f "$deps/picolibc/.stamp" ] && return 0
	local b=$deps/picolibc-build
	rm -rf "$b" "$deps/picolibc"
	mkdir -p "$b"
	# Freestanding x86-64: no red zone (exceptions push onto the stack), no
	# TLS (single thread, errno is a plain global), -fPIC so the same archive
	# links into the static PVH ELF and the position-independent EFI image.
	cat >"$b/cross.txt" <<'EOF'
[binaries]
c = 'gcc'
ar = 'ar'
as = 'as'
nm = 'nm'
strip = 'strip'

[host_machine]
system = 'none'
cpu_family = 'x86_64'
cpu = 'x86_64'
endian = 'little'

[properties]
skip_sanity_check = true

[built-in options]
c_args = ['-m64', '-fPIC', '-mno-red-zone', '-fno-stack-protector', '-fno-asynchronous-unwind-tables', '-ffreestanding']
c_link_args = ['-static', '-nostdlib']
EOF
	say "building picolibc (about 30 s)"
	meson setup "$b/build" "$deps/picolibc-src" --cross-file "$b/cross.txt" \
		--prefix="$deps/picolibc" -Dmultilib=false -Dtests=false -Dsemihost=false \
		-Dpicocrt=false -Dthread-local-storage=false -Dsingle-thread=true \
		-Dfreestanding=true -Dspecsdir=none -Dincludedir=include -Dlibdir=lib \
		>"$b/setup.log" 2>&1 || die "meson setup failed; see $b/setup.log"
	ninja -C "$b/build" install >"$b/build.log" 2>&1 || die "picolibc build failed; see $b/build.log"
	[ -f "$deps/picolibc/lib/libc.a" ] || die "picolibc installed no lib/libc.a"
	touch "$deps/picolibc/.stamp"
}

install_packages
fetch_lwip
fetch_picolibc
build_picolibc
say "ready in $deps"
