#!/usr/bin/env bash
# host/run.sh: what `make run` runs. Boots the appliance once per benchmark
# against host peers it starts itself (stock sockperf and iperf 2), prints
# the guest's RESULT lines, then a short human summary.
#
#   host/run.sh [--kernel ELF]        (settings from the environment, as
#                                      `make run TEST=udp_rr REQ=64 ...` sets them)
#
#   TEST=tcp_rr,tcp_stream  comma list of tcp_rr udp_rr tcp_stream tcp_maerts (or all);
#                           netperf's names (TCP_RR, TCP_STREAM, ...) work too
#   ROLE=client             client: the appliance drives, the host serves
#                           (sockperf server, iperf -s); server: the host drives
#                           (sockperf ping-pong, iperf -c), both sides' figures shown
#   REQ=256 RESP=256        RR message sizes (a sockperf server echoes REQ);
#                           REQ=256,256 is netperf's -r REQ,RESP
#   INSTANCES=1 BURST=1     RR connections and outstanding requests per connection;
#                           STREAM connections (iperf -P)
#   MSG=16384               STREAM write size
#   DURATION=3 WARMUP=1     measured and warm-up seconds per benchmark
#   NET=auto                auto: tap in a private network namespace as root,
#                           slirp (-netdev user) otherwise; or tap, user
#   ARGS="k=v ..."          extra kernel command-line words for every boot; with
#                           app= or test= in it, one plain boot with just those
#   ACCEL=auto              auto|kvm|tcg, passed to host/qemu-run.sh --accel (its
#                           header says how auto decides)
#   MACHINE=pc              QEMU machine: pc, q35, microvm (virtio-mmio, ACPI) or
#                           microvm,acpi=off (virtio-mmio from the kernel command line)
#   KERNEL=ELF              the image to boot, e.g. a variant's (default: --kernel's,
#                           else build/vnetlab.elf)
#   RING=split              the virtqueue layout the kernel was built with (`make run
#                           RING=packed` builds and boots a packed one): packed adds
#                           packed=on to the device, which a packed build needs
#
# Exit status: 0 when every benchmark produced its RESULT line and the guest's
# console ended with "vnetlab exit status=0"; else the first failing guest's
# status (see docs/interface.md, "Console format"), or 125 when QEMU ended without one.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
kernel=$top/build/vnetlab.elf
while [ $# -gt 0 ]; do
	case "$1" in
	--kernel) kernel=$2; shift 2 ;;
	*) echo "run: unknown option '$1' (settings come from the environment; see $0)" >&2; exit 2 ;;
	esac
done

kernel=${KERNEL:-$kernel}
tests=$(tr '[:upper:]' '[:lower:]' <<<"${TEST:-tcp_rr,tcp_stream}")
[ "$tests" = all ] && tests=tcp_rr,udp_rr,tcp_stream,tcp_maerts
role=${ROLE:-client}
req=${REQ:-256}
resp=${RESP:-}
if [[ $req == *,* ]]; then # netperf -r REQ,RESP
	[ -z "$resp" ] || { echo "run: error: REQ=$req already gives the response size; drop RESP" >&2; exit 2; }
	resp=${req#*,} req=${req%%,*}
fi
resp=${resp:-$req}
instances=${INSTANCES:-1}
burst=${BURST:-1}
msg=${MSG:-16384}
seconds=${DURATION:-3} # not SECONDS: bash keeps its own clock in that name
warmup=${WARMUP:-1}
net=${NET:-auto}
args=${ARGS:-}
machine=${MACHINE:-pc}
ring=${RING:-split}

die() {
	echo "run: error: $*" >&2
	exit 2
}
need() { # command, Debian package
	command -v "$1" >/dev/null || die "'$1' not found (Debian package $2; 'make deps' as root installs it)"
}

case "$role" in client | server) ;; *) die "ROLE must be client or server, not '$role'" ;; esac
case "$ring" in split | packed) ;; *) die "RING must be split or packed, not '$ring'" ;; esac
for kv in REQ:req RESP:resp INSTANCES:instances BURST:burst MSG:msg DURATION:seconds WARMUP:warmup; do
	n=${kv#*:}
	[[ ${!n} =~ ^[0-9]+$ ]] || die "${kv%%:*} must be a number, not '${!n}'"
done
IFS=, read -r -a test_list <<<"$tests"
for t in "${test_list[@]}"; do
	case "$t" in tcp_rr | udp_rr | tcp_stream | tcp_maerts) ;; *) die "unknown TEST '$t' (tcp_rr udp_rr tcp_stream tcp_maerts all)" ;; esac
done
[ -f "$kernel" ] || die "kernel '$kernel' not found (make pvh)"
if [[ ,$tests, =~ _rr, ]] && { [ "$req" -lt 14 ] || [ "$resp" -lt 14 ]; }; then
	die "sockperf's message header takes 14 bytes: REQ and RESP must be at least 14 here (smaller sizes use the appliance's raw framing, between two appliances)"
fi
need qemu-system-x86_64 qemu-system-x86
need python3 python3

case "${ACCEL:-auto}" in auto | kvm | tcg) ;; *) die "ACCEL=${ACCEL}: expected auto, kvm or tcg" ;; esac
qemu_run=("$top/host/qemu-run.sh" --kernel "$kernel" --machine "$machine" --accel "${ACCEL:-auto}")
# The NIC for slirp with port forwards, which boot() passes to QEMU itself:
# the same device qemu-run.sh picks for the machine (virtio-mmio on
# microvm), with packed=on for RING=packed.
user_nic="virtio-net-pci,netdev=n0,disable-legacy=on,romfile="
case "$machine" in microvm*) user_nic="virtio-net-device,netdev=n0" ;; esac
if [ "$ring" = packed ]; then
	qemu_run+=(--packed)
	user_nic="$user_nic,packed=on"
fi

# Plain boot, the way `make run ARGS="test=clock"` always worked.
if [[ " $args " =~ \ (app|test)= ]]; then
	exec "${qemu_run[@]}" --append "$args"
fi

case "$net" in
auto) if [ "$(id -u)" = 0 ]; then net=tap; else net=user; fi ;;
tap) [ "$(id -u)" = 0 ] || die "NET=tap needs root (a network namespace with a tap); NET=user works without" ;;
user) ;;
*) die "NET must be auto, tap or user, not '$net'" ;;
esac

tmp=$(mktemp -d /tmp/vnetlab-run.XXXXXX)
ns=""
peer_pids=()
guest_pid=""
stop_pid() { # end a process this script started, by its id
	kill "$1" 2>/dev/null || return 0
	wait "$1" 2>/dev/null || true
}
# shellcheck disable=SC2317 # called from the trap
stop_guest() { # the guest runs in its own session: qemu-run.sh, timeout, QEMU
	kill -TERM -- "-$1" 2>/dev/null || return 0
	wait "$1" 2>/dev/null || true
}
# shellcheck disable=SC2317 # called from the trap
cleanup() {
	local p
	for p in "${peer_pids[@]}"; do
		stop_pid "$p"
	done
	[ -n "$guest_pid" ] && stop_guest "$guest_pid"
	[ -n "$ns" ] && ip netns del "$ns" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---- network: host side of the appliance's NIC ----
free_port() {
	python3 -c 'import socket,sys; s=socket.socket(socket.AF_INET, int(sys.argv[1])); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' "$1"
}
if [ "$net" = tap ]; then
	need ip iproute2
	ns=vnetlab-run-$$
	ip netns add "$ns"
	ip -n "$ns" link set lo up
	ip -n "$ns" tuntap add dev vnltap0 mode tap
	# keep the host's IPv6 ND/MLD chatter off the wire we measure
	ip netns exec "$ns" sysctl -qw net.ipv6.conf.vnltap0.disable_ipv6=1
	ip -n "$ns" addr add 10.77.0.1/24 dev vnltap0
	ip -n "$ns" link set vnltap0 up
	host_ip=10.77.0.1  # where the guest finds its peers
	bind_ip=10.77.0.1  # where they listen
	guest_ip=10.77.0.2 # where host clients find the guest
	in_ns=(ip netns exec "$ns")
	guest_net=(--net tap:vnltap0)
	guest_args="ip=$guest_ip/24 backend=tap"
else
	host_ip=10.0.2.2   # slirp's alias of the host's loopback
	bind_ip=127.0.0.1
	guest_ip=127.0.0.1 # host clients reach the guest through hostfwd
	in_ns=()
	guest_net=()
	guest_args="backend=user"
fi

# Ports the host peers use; with slirp they must be free on the host.
rr_port=11111 stream_port=5001

wait_listen() { # proto(t|u) port: a host peer is ready
	local i
	for ((i = 0; i < 50; i++)); do
		"${in_ns[@]}" ss -Hln"$1" "sport = :$2" 2>/dev/null | grep -q . && return 0
		sleep 0.1
	done
	die "host peer did not start listening on port $2"
}

start_peer() { # log, argv...: a host peer, ended on exit
	local log=$1
	shift
	"${in_ns[@]}" "$@" >"$log" 2>&1 &
	peer_pids+=($!)
}

# Boot the guest with kernel args "$1"; for server roles with slirp, $2 is
# the hostfwd list. Console to $tmp/guest.log; returns the guest's status.
boot() {
	local kargs="$guest_args $1 $args" fwd=${2:-} tmo=$((warmup + seconds + 60))
	local netargs=("${guest_net[@]}") extra=()
	if [ "$net" = user ]; then
		netargs=(--net none)
		extra=(-- -netdev "user,id=n0$fwd" -device "$user_nic")
	fi
	setsid "${in_ns[@]}" "${qemu_run[@]}" "${netargs[@]}" --timeout "$tmo" --append "$kargs" "${extra[@]}" \
		>"$tmp/guest.log" 2>"$tmp/qemu.err" &
	guest_pid=$!
}

guest_wait() {
	local s=0
	wait "$guest_pid" || s=$?
	guest_pid=""
	return $s
}

# The guest prints "... listening" once its server is up.
wait_guest_line() {
	local i
	for ((i = 0; i < 300; i++)); do
		grep -q "$1" "$tmp/guest.log" 2>/dev/null && return 0
		kill -0 "$guest_pid" 2>/dev/null || return 1
		sleep 0.1
	done
	return 1
}

results=$tmp/results
: >"$results"
status=0
peer_notes=$tmp/peer_notes
: >"$peer_notes"

run_one() {
	local t=$1 proto=tcp s=0 fwd="" log=$tmp/peer.log tcp=(--tcp) sock=1
	if [[ $t == udp_* ]]; then
		proto=udp tcp=() sock=2
	fi
	echo "== $t ($role, $net, $((warmup + seconds)) s) ==" >&2
	case "$t,$role" in
	*_rr,client)
		need sockperf sockperf
		[ "$net" = user ] && rr_port=$(free_port $sock)
		# A feed file with -F epoll: with plain -i/-p, sockperf 3.7 blocks
		# in recvfrom() on one socket and serves one TCP connection at a
		# time, so INSTANCES>1 would silently run as one.
		printf '%s:%s:%s\n' "$([ "$proto" = tcp ] && echo T || echo U)" "$bind_ip" "$rr_port" >"$tmp/feed.txt"
		start_peer "$log" sockperf server -f "$tmp/feed.txt" -F epoll
		wait_listen "${proto:0:1}" "$rr_port"
		boot "app=rr rr.proto=$proto rr.peer=$host_ip rr.port=$rr_port rr.req=$req rr.resp=$resp rr.instances=$instances rr.burst=$burst rr.seconds=$seconds rr.warmup=$warmup"
		guest_wait || s=$?
		;;
	*_rr,server)
		need sockperf sockperf
		local port=11111
		if [ "$net" = user ]; then
			port=$(free_port $sock)
			fwd=",hostfwd=$proto:127.0.0.1:$port-:11111"
		fi
		boot "app=rr rr.role=server rr.proto=$proto rr.warmup=$warmup rr.wait=30" "$fwd"
		if wait_guest_line "^rr server listening"; then
			# --full-rtt: sockperf reports round trips, as the guest does
			"${in_ns[@]}" timeout $((warmup + seconds + 30)) sockperf ping-pong -i "$guest_ip" -p "$port" \
				"${tcp[@]}" -m "$req" -b "$burst" -t $((warmup + seconds)) --full-rtt \
				>"$log" 2>&1 || true
			grep -E "Valid Duration|Summary|percentile (50|99)\.000" "$log" |
				sed "s/^sockperf: /  $t sockperf ping-pong: /" >>"$peer_notes"
		fi
		guest_wait || s=$?
		;;
	*,client)
		need iperf iperf
		[ "$net" = user ] && stream_port=$(free_port 1)
		start_peer "$log" iperf -s -B "$bind_ip" -p "$stream_port"
		wait_listen t "$stream_port"
		local dir=stream
		[ "$t" = tcp_maerts ] && dir=maerts
		boot "app=stream stream.test=$dir stream.peer=$host_ip stream.port=$stream_port stream.msg=$msg stream.instances=$instances stream.seconds=$seconds stream.warmup=$warmup"
		guest_wait || s=$?
		;;
	*,server)
		need iperf iperf
		local port=5001
		if [ "$net" = user ]; then
			port=$(free_port 1)
			fwd=",hostfwd=tcp:127.0.0.1:$port-:5001"
		fi
		boot "app=stream stream.role=server stream.msg=$msg stream.instances=$instances stream.warmup=$warmup stream.wait=30" "$fwd"
		local reverse=()
		[ "$t" = tcp_stream ] && reverse=(-R)
		if wait_guest_line "^stream server listening"; then
			# TCP_STREAM: the appliance sends, so iperf's client asks for it (-R)
			"${in_ns[@]}" timeout $((warmup + seconds + 30)) iperf -c "$guest_ip" -p "$port" -l "$msg" \
				-P "$instances" -t $((warmup + seconds)) "${reverse[@]}" \
				>"$log" 2>&1 || true
			grep -E "bits/sec" "$log" | tail -1 | sed "s/^/  $t iperf -c: /" >>"$peer_notes"
		fi
		guest_wait || s=$?
		;;
	esac
	# The status alone is not enough: the guest's own last word must agree.
	if [ "$s" = 0 ] && ! grep -aq '^vnetlab exit status=0' "$tmp/guest.log"; then
		echo "run: $t: QEMU ended 0 but the console has no 'vnetlab exit status=0' line" >&2
		s=125
	fi
	if [ "$s" = 0 ] && ! grep -aq '^RESULT {' "$tmp/guest.log"; then
		echo "run: $t: the guest exited 0 without a RESULT line" >&2
		s=1
	fi
	# stop this benchmark's host peers
	local p
	for p in "${peer_pids[@]}"; do
		stop_pid "$p"
	done
	peer_pids=()
	{ grep -E "^(RESULT|PROFILE|ERROR) " "$tmp/guest.log" || true; } | tr -d '\r' | tee -a "$results"
	if [ "$s" != 0 ]; then
		echo "run: $t: guest exit status $s; console tail:" >&2
		tail -5 "$tmp/guest.log" | sed 's/^/  | /' >&2
		sed 's/^/  ! /' "$tmp/qemu.err" | tail -3 >&2
		[ "$status" = 0 ] && status=$s
	fi
	sed -n 's/^qemu-run: accel=\([a-z]*\).*/\1/p' "$tmp/qemu.err" >"$tmp/accel"
}

for t in "${test_list[@]}"; do
	run_one "$t"
done

echo
python3 "$top/host/peers/summary.py" --net "$net" --machine "$machine" --accel "$(cat "$tmp/accel" 2>/dev/null)" <"$results"
if [ -s "$peer_notes" ]; then
	echo "the host tools' own figures (sockperf: round trips in usec):"
	cat "$peer_notes"
fi
exit "$status"
