#!/usr/bin/env bash
# host/linux-guest/build.sh: a minimal stock Linux guest from Debian packages
# only, for host/bench's `linux` guest kind (the column next to the appliance).
#
#   host/linux-guest/build.sh [--force]
#
# Fetches with `apt-get download` (this machine's own apt sources, signed
# index; nothing is installed): the Debian kernel linux-image-amd64 depends
# on, busybox-static, sockperf, iperf, memcached, xdp-tools (xdp-bench and
# libxdp's BPF objects), ethtool (`ethtool -L eth0 combined N`, the harness's
# queues axis; libmnl0) and the shared libraries they need (libc6,
# libstdc++6, libgcc-s1; libevent, libsasl2, libssl3 for memcached; libbpf1,
# libelf1, zlib1g for xdp-bench). Unpacks them with dpkg-deb -x and writes
#
#   deps/linux-guest/vmlinuz      the Debian kernel, unmodified
#   deps/linux-guest/initrd.gz    busybox, sockperf, iperf, memcached, xdp-bench, their
#                                 libraries and ld.so, the virtio-net modules
#                                 (dependencies first, from their .modinfo;
#                                 loaded at boot) and pktgen (loaded only by
#                                 vnl.app=pktgen), host/linux-guest/init
#   deps/linux-guest/manifest     key=value: kernel version, package versions
#
# Idempotent: when the package versions apt would fetch and this script, init
# and mkcpio.py are unchanged, it only says so (well under a second). Needs
# no root once apt's package lists are current (as root it runs
# `apt-get update` once if the kernel package cannot be resolved).
set -euo pipefail

top=$(cd "$(dirname "$0")/../.." && pwd)
here=$top/host/linux-guest
out=${VNETLAB_DEPS:-$top/deps}/linux-guest
force=0
[ "${1:-}" = --force ] && force=1
[ $# -le $force ] || { echo "usage: $0 [--force]" >&2; exit 2; }

say() { echo "linux-guest: $*"; }
die() {
	echo "linux-guest: error: $*" >&2
	exit 1
}

for t in apt-get apt-cache dpkg-deb readelf python3 xz; do
	command -v "$t" >/dev/null || die "missing host tool $t (Debian package $(
		case $t in readelf) echo binutils ;; xz) echo xz-utils ;; python3) echo python3 ;; *) echo apt/dpkg ;; esac)); \`make deps\` as root installs it"
done

# Modules the NIC needs (with their dependencies), unless the kernel has
# them built in.
WANT_MODULES=(virtio_pci virtio_net)
# Modules init loads only for the app that needs them (list file: name).
OPT_MODULES=(pktgen:vnl-modules-pktgen)
# Shared-library packages: the tools' NEEDED entries are looked up in them.
LIB_PKGS=(libc6 libstdc++6 libgcc-s1 libevent-2.1-7 libsasl2-2 libssl3 libbpf1 libelf1 zlib1g libmnl0)
TOOLS=(usr/bin/sockperf usr/bin/iperf usr/bin/memcached usr/sbin/xdp-bench sbin/ethtool)

# ---- what apt would fetch ----
kernel_pkg() {
	apt-cache depends linux-image-amd64 2>/dev/null | awk '$1 == "Depends:" && $2 ~ /^linux-image-[0-9]/ { print $2; exit }'
}
kpkg=$(kernel_pkg)
if [ -z "$kpkg" ] && [ "$(id -u)" = 0 ]; then
	say "apt cannot resolve linux-image-amd64; running apt-get update"
	timeout 600 apt-get update -qq || die "apt-get update failed"
	kpkg=$(kernel_pkg)
fi
[ -n "$kpkg" ] || die "apt cannot resolve the kernel package of linux-image-amd64 (stale package lists: as root run apt-get update)"
PKGS=("$kpkg" busybox-static sockperf iperf memcached xdp-tools libxdp1 ethtool "${LIB_PKGS[@]}")

# One apt-cache call (each costs most of a second): "pkg.NAME=VERSION" lines.
versions=$(apt-cache show --no-all-versions "${PKGS[@]}" 2>/dev/null |
	awk '/^Package:/ { p = $2 } /^Version:/ { print "pkg." p "=" $2 }')$'\n'
for p in "${PKGS[@]}"; do
	grep -qF "pkg.$p=" <<<"$versions" || die "apt knows no package $p (as root: apt-get update)"
done
inputs=$(cat "$0" "$here/init" "$here/mkcpio.py" | sha256sum | cut -c1-16)
want="${versions}inputs=$inputs"

if [ $force = 0 ] && [ -f "$out/stamp" ] && [ -f "$out/vmlinuz" ] && [ -f "$out/initrd.gz" ] &&
	[ "$(cat "$out/stamp")" = "$want" ]; then
	say "up to date ($kpkg, $out)"
	exit 0
fi

# ---- fetch and unpack ----
work=$out/work
rm -rf "$work" "$out/stamp"
# The unpacked packages (the whole kernel package) never outlive the script.
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/debs" "$work/pkgroot" "$work/root"
say "downloading ${PKGS[*]}"
# apt-get download writes into the current directory; running as root with
# a directory _apt cannot read only earns a warning, so sandbox as root.
(cd "$work/debs" && timeout 900 apt-get download -q -o APT::Sandbox::User=root "${PKGS[@]}" >/dev/null) ||
	die "apt-get download ${PKGS[*]} failed (is Debian's archive reachable?)"
for d in "$work"/debs/*.deb; do
	timeout 300 dpkg-deb -x "$d" "$work/pkgroot" || die "dpkg-deb -x $d failed"
done
P=$work/pkgroot
R=$work/root

kdirs=("$P"/lib/modules/*/)
[ ${#kdirs[@]} = 1 ] && [ -d "${kdirs[0]}" ] || die "expected one lib/modules/<version> in $kpkg"
kver=$(basename "${kdirs[0]}")
M=$P/lib/modules/$kver
[ -f "$P/boot/vmlinuz-$kver" ] || die "$kpkg has no boot/vmlinuz-$kver"

# ---- the initramfs tree ----
mkdir -p "$R"/{bin,sbin,usr/bin,usr/sbin,lib/x86_64-linux-gnu,lib64,etc,proc,sys,dev,tmp,"lib/modules/$kver"}
cp "$P/bin/busybox" "$R/bin/busybox"
for a in $("$P/bin/busybox" --list); do
	[ "$a" = busybox ] || ln -sf busybox "$R/bin/$a"
done
install -m 755 "$here/init" "$R/init"
for t in "${TOOLS[@]}"; do
	[ -f "$P/$t" ] || die "$t missing from the unpacked packages"
	cp "$P/$t" "$R/$t"
done

# Libraries: the NEEDED entries of the tools, recursively, from the unpacked
# library packages (never from the host), plus the dynamic loader.
find_lib() {
	local d
	for d in lib/x86_64-linux-gnu usr/lib/x86_64-linux-gnu; do
		[ -e "$P/$d/$1" ] && { readlink -f "$P/$d/$1"; return 0; }
	done
	return 1
}
todo=("${TOOLS[@]/#/$R/}")
declare -A seen=()
while [ ${#todo[@]} -gt 0 ]; do
	f=${todo[0]}
	todo=("${todo[@]:1}")
	for lib in $(readelf -d "$f" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
		[ -n "${seen[$lib]:-}" ] && continue
		seen[$lib]=1
		src=$(find_lib "$lib") || die "library $lib (needed by ${f#"$R"/}) is in none of ${LIB_PKGS[*]}: add its package to LIB_PKGS"
		cp "$src" "$R/lib/x86_64-linux-gnu/$lib"
		todo+=("$R/lib/x86_64-linux-gnu/$lib")
	done
done
# libxdp's BPF objects (xdp-bench attaches through libxdp's dispatcher).
mkdir -p "$R/usr/lib/x86_64-linux-gnu/bpf"
cp "$P"/usr/lib/x86_64-linux-gnu/bpf/*.o "$R/usr/lib/x86_64-linux-gnu/bpf/" || die "xdp-tools/libxdp1 carry no BPF objects"
cp "$(readlink -f "$P/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2")" "$R/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2"
ln -sf /lib/x86_64-linux-gnu/ld-linux-x86-64.so.2 "$R/lib64/ld-linux-x86-64.so.2"

# Modules: the dependency closure of WANT_MODULES (the `depends=` of each
# module's .modinfo; the package ships no modules.dep, depmod makes it at
# install time), dependencies first; .ko.xz unpacked (busybox insmod reads
# plain .ko).
declare -A kos=()
while IFS= read -r f; do
	n=$(basename "$f")
	n=${n%.xz}
	n=${n%.ko}
	kos[${n//-/_}]=${f#"$M"/}
done < <(find "$M/kernel" -name '*.ko' -o -name '*.ko.xz')
[ ${#kos[@]} -gt 0 ] || die "no modules found under $M/kernel"
: >"$R/etc/vnl-modules"
declare -A placed=()
list=vnl-modules
place_module() { # module name (appended to etc/$list)
	local name=${1//-/_} rel plain dep
	[ -n "${placed[$name]:-}" ] && return 0
	placed[$name]=1
	rel=${kos[$name]:-}
	if [ -z "$rel" ]; then
		grep -qE "/${name//_/[-_]}\.ko\$" "$M/modules.builtin" 2>/dev/null && return 0
		die "module $name is neither in $kpkg nor built into $kver"
	fi
	plain=${rel%.xz}
	mkdir -p "$(dirname "$R/lib/modules/$kver/$plain")"
	case "$rel" in
	*.xz) xz -dc "$M/$rel" >"$R/lib/modules/$kver/$plain" || die "cannot unpack $rel" ;;
	*) cp "$M/$rel" "$R/lib/modules/$kver/$plain" ;;
	esac
	for dep in $(readelf -p .modinfo "$R/lib/modules/$kver/$plain" | sed -n 's/.*\]  *depends=//p' | tr ',' ' '); do
		place_module "$dep"
	done
	echo "$plain" >>"$R/etc/$list"
}
for m in "${WANT_MODULES[@]}"; do
	place_module "$m"
done
for om in "${OPT_MODULES[@]}"; do
	list=${om#*:}
	: >"$R/etc/$list"
	place_module "${om%%:*}"
done

# ---- outputs ----
python3 "$here/mkcpio.py" "$R" "$out/initrd.gz" --node /dev/console:c:5:1:600 --node /dev/null:c:1:3:666 ||
	die "building the initramfs failed"
cp "$P/boot/vmlinuz-$kver" "$out/vmlinuz"
{
	echo "kernel=$kver"
	echo "kernel_pkg=$kpkg"
	echo "modules=$(tr '\n' ' ' <"$R/etc/vnl-modules" | sed 's/ $//')"
	printf '%s' "$versions"
} >"$out/manifest"
printf '%s' "$want" >"$out/stamp"
say "built $out: kernel $kver, initrd $(($(stat -c %s "$out/initrd.gz") / 1024)) KiB, modules: $(sed -n 's/^modules=//p' "$out/manifest")"
