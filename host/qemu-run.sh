#!/usr/bin/env bash
# host/qemu-run.sh: boot the appliance once under QEMU with a hard timeout and
# return the guest's own exit status.
#
#   host/qemu-run.sh [options] [-- extra QEMU arguments]
#     --kernel ELF        PVH direct boot (default build/vnetlab.elf)
#     --image IMG         UEFI boot of a disk image under OVMF (TCG only here)
#     --append "k=v ..."  kernel command line (PVH; the image carries its own)
#     --machine pc|q35|microvm[,OPTS]  QEMU machine model (default pc); microvm
#                         has no PCI: the NIC is virtio-net-device on virtio-mmio
#                         (version 2: force-legacy=false), found through ACPI, or
#                         through the kernel command line with microvm,acpi=off
#     --accel auto|kvm|tcg  auto = KVM when the CPU has vmx/svm and a probe boot
#                         under KVM works, else TCG, with the reason printed;
#                         kvm also takes a software KVM (kvm_pvm, native mode:
#                         kernel/pvm.c) after a probe boot (default auto)
#     --cpu MODEL         QEMU CPU model (default: per accelerator, see below)
#     --net user|tap:IF|none  NIC backend: slirp, an existing tap, or no NIC
#     --vhost             with tap: vhost=on (needs /dev/vhost-net)
#     --queues N          with tap: N queue pairs (-netdev queues=N, the NIC
#                         mq=on,rss=on, on PCI with 2N+2 MSI-X vectors; the tap must
#                         have been made with multi_queue); the guest's mq=N
#     --packed            offer the packed virtqueue layout (packed=on, virtio 1.2
#                         2.8): what RING=packed builds need; split builds ignore it
#     --nic-opts OPTS     more properties for the NIC device, comma-separated
#                         (e.g. iommu_platform=on: the device then offers
#                         VIRTIO_F_ACCESS_PLATFORM and refuses a driver without it)
#     --mem MIB           guest memory (default 512)
#     --timeout SEC       hard limit for the whole boot (default 60)
#
# Exit status: the guest's status (0 = success) as reported through
# isa-debug-exit, and only when the console also carries the guest's last line
# "vnetlab exit status=N" with the same N; 124 on timeout; 125 when QEMU
# ended without a guest status (QEMU's own failure, e.g. a tap it cannot
# open, exits 1), or the status and the console line disagree.
#
# The guest writes 0x20 + status to isa-debug-exit (kernel/exit.c), so QEMU
# exits with 2*(0x20+status)+1 = 65 + 2*status: no guest status can collide
# with QEMU's own exit code 1, which isa-debug-exit value 0 would produce.
# The accelerator actually used is printed as "qemu-run: accel=...".
#
# CPU model, the same for every guest this project boots (host/bench's stock
# Linux guest uses the same table, guests.CPU_MODEL): KVM the richest model
# the probe boots (kvm_pick below); TCG
# qemu64, QEMU's own default. Chosen by measurement: under TCG, -cpu max
# emulates far more (AVX, ...) and cost the stock Linux guest ~4x in iperf
# throughput, while the appliance measured the same either way (docs/results/appliance-vs-linux.md,
# "Appliance vs a stock Linux guest").
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
kernel=$top/build/vnetlab.elf
image=""
append=""
machine=pc
accel=auto
net=user
vhost=0
queues=1
packed=0
nic_opts=
mem=512
tmo=60
cpu_model=
extra=()

# kernel/exit.c writes DEBUG_EXIT_OFFSET + status to isa-debug-exit.
DEBUG_EXIT_OFFSET=32

die() {
	echo "qemu-run: error: $*" >&2
	exit 125
}

tmp=$(mktemp -d "${TMPDIR:-/tmp}/qemu-run.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

while [ $# -gt 0 ]; do
	case "$1" in
	--kernel) kernel=$2; shift 2 ;;
	--image) image=$2; shift 2 ;;
	--append) append=$2; shift 2 ;;
	--machine) machine=$2; shift 2 ;;
	--accel) accel=$2; shift 2 ;;
	--net) net=$2; shift 2 ;;
	--vhost) vhost=1; shift ;;
	--queues) queues=$2; shift 2
		case "$queues" in ""|*[!0-9]*|0) die "--queues takes a positive integer, not '$queues'" ;; esac ;;
	--packed) packed=1; shift ;;
	--nic-opts) nic_opts=$2; shift 2 ;;
	--mem) mem=$2; shift 2 ;;
	--cpu) cpu_model=$2; shift 2 ;;
	--timeout) tmo=$2; shift 2 ;;
	--) shift; extra=("$@"); break ;;
	*) die "unknown option '$1' (see the header of $0)" ;;
	esac
done

case "$machine" in pc | q35 | microvm | microvm,*) ;; *) die "unknown machine '$machine' (pc|q35|microvm[,opts])" ;; esac
command -v qemu-system-x86_64 >/dev/null ||
	die "qemu-system-x86_64 not found (Debian package qemu-system-x86; 'make deps' as root installs it)"

# KVM is decided by probe boots, not by cpuinfo flags: a /dev/kvm may be a
# software hypervisor (this machine kind's kvm_pvm, which runs a guest
# natively only once it registers, see kernel/pvm.c), and a CPU model may
# be refused (`-cpu host` there aborts on MSR 0x10a). kvm_why says why not.
kvm_why=""
kvm_cpu=""
kvm_cpu_why=""
kvm_mode=""
# One probe boot (app=none) with CPU model $1: 0 when the guest ended with
# status 0; its banner's kvm_mode= is left in kvm_mode.
kvm_probe() {
	local s
	: >"$tmp/probe.log"
	# In a subshell that outlives QEMU, so that the shell's own report of a
	# QEMU killed by a signal ("Aborted" after "failed to set MSR 0x10a")
	# lands in probe.err with QEMU's text, not on the terminal.
	s=$( (
		timeout 20 qemu-system-x86_64 -M "$machine" -accel kvm -cpu "$1" -m 128 -nodefaults \
			-display none -serial "file:$tmp/probe.log" -monitor none -device isa-debug-exit \
			-kernel "$kernel" -append app=none </dev/null >"$tmp/probe.err" 2>&1
		echo $?
	) 2>>"$tmp/probe.err")
	kvm_mode=$(sed -n 's/.* kvm_mode=\([a-z]*\).*/\1/p' "$tmp/probe.log" | head -n 1)
	# A plain boot exits with status 0: QEMU's 65, and the guest said so.
	[ "$s" = $((2 * DEBUG_EXIT_OFFSET + 1)) ] && grep -aq 'vnetlab exit status=0' "$tmp/probe.log"
}
# The richest CPU model this KVM accepts: host; host minus the features
# whose MSRs it refuses; qemu64 plus what the appliance uses (x2APIC,
# TSC-deadline timer, invariant TSC: QEMU then fills KVM's TSC leaf).
# Cached per kernel image, machine and QEMU binary, since every test boots.
kvm_pick() {
	[ -e /dev/kvm ] || { kvm_why="/dev/kvm does not exist$( (dmesg 2>/dev/null || true) | grep -o 'kvm-pvm: this kernel is itself a kvm-pvm guest; not binding' | head -n 1 | sed 's/^/ (dmesg: /; s/$/)/')"; return 1; }
	[ -r /dev/kvm ] && [ -w /dev/kvm ] || { kvm_why="/dev/kvm is not readable and writable by $(id -un)"; return 1; }
	[ -f "$kernel" ] || { kvm_why="no kernel to probe with ($kernel)"; return 1; }
	local key cache
	key=$(cat "$kernel" "$(command -v qemu-system-x86_64)" | cksum | cut -d' ' -f1)
	cache="${TMPDIR:-/tmp}/vnetlab-kvm-probe.$(id -u).$key.${machine%%,*}"
	# (A cache without kvm_cpu_why is an older script's: probe again.)
	if [ -f "$cache" ] && grep -q '^kvm_cpu_why=' "$cache"; then
		# shellcheck disable=SC1090
		. "$cache"
		[ -n "$kvm_cpu" ]
		return
	fi
	local models=() x m
	kvm_cpu=""
	if kvm_probe host; then
		kvm_cpu=host
		kvm_cpu_why="the probe boot accepted it"
	else
		kvm_why="-cpu host refused: $(grep -m1 -o 'failed to set MSR 0x[0-9a-f]* to 0x[0-9a-f]*\|error.*' "$tmp/probe.err" || echo 'probe boot failed')"
		m=host
		for x in $(grep -o 'failed to set MSR 0x[0-9a-f]*' "$tmp/probe.err" | awk '{print $NF}' | sort -u); do
			case "$x" in 0x10a) m="$m,-arch-capabilities" ;; esac
		done
		[ "$m" != host ] && models+=("$m")
		models+=(qemu64,+x2apic,+tsc-deadline,+invtsc qemu64)
		for m in "${models[@]}"; do
			if kvm_probe "$m"; then
				kvm_cpu=$m
				kvm_cpu_why="$kvm_why; $m booted"
				break
			fi
		done
	fi
	[ -n "$kvm_cpu" ] || kvm_why="no CPU model boots under KVM ($(head -c 200 "$tmp/probe.err" | tr '\n' ' '))"
	printf 'kvm_cpu=%q\nkvm_cpu_why=%q\nkvm_mode=%q\nkvm_why=%q\n' "$kvm_cpu" "$kvm_cpu_why" "$kvm_mode" "$kvm_why" >"$cache"
	[ -n "$kvm_cpu" ]
}

if [ "$accel" = auto ] && ! grep -qE '\b(vmx|svm)\b' /proc/cpuinfo; then
	# No hardware virtualisation: any /dev/kvm is a software one (this
	# machine kind's kvm_pvm). Its native mode is taken only when asked
	# (--accel kvm, make run ACCEL=kvm): measured there, bulk data moves
	# 2-4x faster natively but every kick is a nested exit (RR slower than
	# TCG) and figures collapse on a loaded host (docs/results/kvm.md), so
	# auto keeps TCG.
	kvm_why="no vmx/svm in /proc/cpuinfo (a software KVM is used only with --accel kvm: docs/kvm.md)"
	accel=tcg
elif [ "$accel" = auto ] || [ "$accel" = kvm ]; then
	if [ -n "$image" ]; then
		# OVMF does not boot under kvm_pvm (x87 fwait is not emulated).
		[ "$accel" = kvm ] || { accel=tcg; kvm_why="UEFI image: auto boots OVMF under TCG"; }
	elif kvm_pick; then
		# Emulated KVM (kvm_pvm without native mode) is far slower than TCG.
		if [ "$accel" = auto ] && [ "$kvm_mode" = emulated ]; then
			kvm_why="the probe guest stayed emulated (kvm_mode=emulated)"
			accel=tcg
		else
			accel=kvm
		fi
	elif [ "$accel" = kvm ]; then
		die "--accel kvm: $kvm_why"
	else
		accel=tcg
	fi
fi
case "$accel" in
kvm) cpu=(-accel kvm -cpu "${cpu_model:-${kvm_cpu:-host}}") ;;
tcg) cpu=(-accel tcg -cpu "${cpu_model:-qemu64}") ;;
*) die "unknown accel '$accel' (auto|kvm|tcg)" ;;
esac
# Why not KVM, where there is a /dev/kvm to wonder about.
[ "$accel" = tcg ] && [ -n "$kvm_why" ] && [ -e /dev/kvm ] && echo "qemu-run: not KVM: $kvm_why" >&2

# The console goes to stdout and, through the chardev's log, to a file in
# which the guest's last line is looked up after QEMU ended.
args=(-M "$machine" "${cpu[@]}" -m "$mem" -nodefaults -display none -no-reboot
	-chardev "stdio,id=con0,logfile=$tmp/console.log" -serial chardev:con0 -monitor none
	-device isa-debug-exit)

if [ -n "$image" ]; then
	[ -f "$image" ] || die "image '$image' not found (make image)"
	ovmf=/usr/share/ovmf/OVMF.fd
	[ -f "$ovmf" ] || die "$ovmf not found (Debian package ovmf)"
	args+=(-bios "$ovmf" -drive "file=$image,format=raw,snapshot=on")
else
	[ -f "$kernel" ] || die "kernel '$kernel' not found (make pvh)"
	args+=(-kernel "$kernel")
	[ -n "$append" ] && args+=(-append "$append")
fi

# The NIC: modern-only virtio-net-pci (1af4:1041), so the driver can only
# use the virtio 1.x transport; no option ROM (we never boot from it). On
# microvm a virtio-mmio device, which QEMU 7.2 makes version 1 (legacy)
# unless told otherwise; the driver takes version 2 only.
nic="virtio-net-pci,netdev=n0,disable-legacy=on,romfile="
case "$machine" in
microvm*)
	nic="virtio-net-device,netdev=n0"
	args+=(-global virtio-mmio.force-legacy=false)
	;;
esac
# packed=on is a virtio device property (both transports): the device then
# offers VIRTIO_F_RING_PACKED, which a split build simply does not take.
[ "$packed" = 1 ] && nic="$nic,packed=on"
[ -n "$nic_opts" ] && nic="$nic,$nic_opts"
case "$net" in
none) ;;
user) args+=(-netdev user,id=n0 -device "$nic") ;;
tap:*)
	ifname=${net#tap:}
	v=""
	if [ "$vhost" = 1 ]; then
		[ -c /dev/vhost-net ] || die "vhost=on needs /dev/vhost-net, which this host does not have"
		v=",vhost=on"
	fi
	if [ "$queues" != 1 ]; then
		v="$v,queues=$queues"
		# virtio-net-pci: an MSI-X vector per queue, the control queue and
		# config changes. virtio-mmio (microvm) has one interrupt line and
		# no vectors property: mq=on only (the guest polls, IDLE=poll).
		# rss=on: VIRTIO_NET_F_RSS, so the guest decides each flow's queue
		# (QEMU hashes in software where it cannot load its eBPF program).
		case "$machine" in
		microvm*) nic="$nic,mq=on,rss=on" ;;
		*) nic="$nic,mq=on,rss=on,vectors=$((2 * queues + 2))" ;;
		esac
	fi
	args+=(-netdev "tap,id=n0,ifname=$ifname,script=no,downscript=no$v" -device "$nic")
	;;
*) die "unknown net '$net' (user|tap:IFNAME|none)" ;;
esac

[ "$accel" = kvm ] && [ -n "$kvm_mode" ] && mode_label=" kvm_mode=$kvm_mode" || mode_label=""
# Under KVM the line also says why this CPU model (the probes' QEMU output
# stays in their log: an aborting -cpu host is expected, not news).
cpu_label=""
if [ "$accel" = kvm ]; then
	if [ -n "$cpu_model" ]; then
		cpu_label=" (cpu: from --cpu)"
	elif [ -n "$kvm_cpu_why" ]; then
		cpu_label=" (cpu: $kvm_cpu_why)"
	fi
fi
echo "qemu-run: accel=$accel$mode_label cpu=${cpu[3]} machine=$machine net=$net packed=$packed boot=$([ -n "$image" ] && echo efi || echo pvh)$cpu_label" >&2
s=0
timeout --foreground --kill-after=5 "$tmo" qemu-system-x86_64 "${args[@]}" "${extra[@]}" </dev/null || s=$?
if [ "$s" = 124 ] || [ "$s" = 137 ]; then
	echo "qemu-run: error: timeout after ${tmo}s, QEMU killed" >&2
	exit 124
fi
# isa-debug-exit: guest value v = DEBUG_EXIT_OFFSET + status -> QEMU 2v+1.
if [ $((s % 2)) = 1 ] && [ "$s" -ge $((2 * DEBUG_EXIT_OFFSET + 1)) ]; then
	g=$(((s - 1) / 2 - DEBUG_EXIT_OFFSET))
	said=$(grep -aoE 'vnetlab exit status=[0-9]+' "$tmp/console.log" | tail -n 1 | sed 's/.*=//')
	if [ "$said" = "$g" ]; then
		exit "$g"
	fi
	echo "qemu-run: error: QEMU reported guest status $g but the console's last line says" \
		"'${said:+vnetlab exit status=$said}${said:-nothing}'" >&2
	exit 125
fi
echo "qemu-run: error: QEMU exited with status $s without a guest exit status" \
	"(status 1 is QEMU's own failure: see its message above)" >&2
exit 125
