/*
 * macswap.c: an XDP program that sends every frame back where it came
 * from with its Ethernet addresses swapped (XDP_TX), the tap backend's
 * reflector for app=pkt pkt.mode=rr: a kernel reflector with no process
 * to schedule. On a tap, XDP runs on what QEMU writes (the guest's TX) and
 * XDP_TX queues the frame for QEMU to read (the guest's RX).
 *
 * Built with clang -target bpf by host/bench/xdprefl.py, attached with
 * `ip link set dev TAP xdp obj macswap.o sec xdp` (iproute2's own loader:
 * Debian's xdp-bench does not run on this machine kind's kernel).
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>

#define SEC(name) __attribute__((section(name), used))

SEC("xdp")
int xdp_macswap(struct xdp_md *ctx)
{
	unsigned char *d = (unsigned char *)(long)ctx->data;
	unsigned char *end = (unsigned char *)(long)ctx->data_end;
	unsigned char t[ETH_ALEN];

	if (d + ETH_HLEN > end) /* the verifier's bound, and a runt frame */
		return XDP_PASS;
	__builtin_memcpy(t, d, ETH_ALEN);
	__builtin_memcpy(d, d + ETH_ALEN, ETH_ALEN);
	__builtin_memcpy(d + ETH_ALEN, t, ETH_ALEN);
	return XDP_TX;
}

char _license[] SEC("license") = "GPL";
