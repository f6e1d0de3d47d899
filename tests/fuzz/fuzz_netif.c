/*
 * fuzz_netif.c: libFuzzer target for the netif + lwIP input path:
 * arbitrary Ethernet frames through the simulated device, the driver,
 * net/netif.c (zero-copy pbufs, copies, large frames), net/offload.c and
 * lwIP 2.1.3 with the appliance's own lwipopts.h (ARP, IPv4 with
 * reassembly, ICMP, UDP and TCP, with a TCP and a UDP echo listening on
 * port 7 so input reaches established connections).
 *
 * Input: records of [ctl][len:2][len bytes of frame]. ctl bit 0 sets the
 * header's DATA_VALID (TCP/UDP checksums not checked, as with the device's
 * offload), bit 1 fixes up the IPv4 header checksum and bit 2 the ICMP
 * checksum (so the fuzzer gets past them), bit 3 makes netif.c copy the
 * frame instead of handing up the driver's buffer (net.rx_hold_max=0),
 * bits 4-7 advance the clock by that many 100 ms before the frame (lwIP
 * timers run).
 *
 * Invariants: the device never runs out of RX buffers (the stack may not
 * pin the ring: netif.c copies frames once half is held), and after each
 * input, once every connection is aborted and timers have expired every
 * reassembly, all RX buffers and lwIP pools are back. lwIP assertions
 * abort. ASan/UBSan catch the rest.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "drivers/virtio/vnet_priv.h"
#include "kernel/kernel.h"
#include "lwip/init.h"
#include "lwip/memp.h"
#include "lwip/priv/tcp_priv.h"
#include "lwip/stats.h"
#include "net/inst.h"
#include "lwip/tcp.h"
#include "lwip/timeouts.h"
#include "lwip/udp.h"
#include "net/net.h"
#include "netif/ethernet.h"
#include "tests/fuzz/harness.h"
#include "tests/unit/host_shim.h"
#include "tests/unit/sim_dev.h"

const char fuzz_target[] = "fuzz_netif";

/* The platform services net/sys_arch.c gives the guest. */
u32_t sys_now(void)
{
	return (u32_t)(clock_ns() / 1000000);
}

unsigned int lwip_port_rand(void)
{
	static uint32_t x = 12345;

	x = x * 1103515245 + 12345;
	return x >> 8;
}

void lwip_port_assert(const char *msg, int line, const char *file)
{
	fprintf(stderr, "fuzz_netif: lwip assertion \"%s\" failed at %s:%d\n", msg, file, line);
	abort();
}

static struct netif nif;
static struct vnet *vn;

/* What net/net.c gives netif.c in the guest. */
struct vnet *net_vnet(void)
{
	return vn;
}

const char *net_backend(void)
{
	return "sim";
}

/* What net/net.c and net/instance.c give it: copy 0 of one (mq=1); the
 * copy table in net/inst_table.c names copy 0's ops, never called here. */
const struct net_inst_ops net_inst_ops;

/* (the two calls netif.c makes) */
unsigned net_inst_queues(void)
{
	return 1;
}

unsigned net_inst_index(void)
{
	return 0;
}

static err_t echo_recv(void *arg, struct tcp_pcb *pcb, struct pbuf *p, err_t err)
{
	(void)arg;
	if (!p || err != ERR_OK) {
		if (p)
			pbuf_free(p);
		tcp_arg(pcb, NULL);
		tcp_recv(pcb, NULL);
		if (tcp_close(pcb) != ERR_OK) {
			tcp_abort(pcb);
			return ERR_ABRT;
		}
		return ERR_OK;
	}
	/* Echo what fits, as apps/echo.c does, and acknowledge it all. */
	for (struct pbuf *q = p; q; q = q->next)
		if (tcp_sndbuf(pcb) >= q->len)
			tcp_write(pcb, q->payload, q->len, TCP_WRITE_FLAG_COPY);
	tcp_recved(pcb, p->tot_len);
	pbuf_free(p);
	tcp_output(pcb);
	return ERR_OK;
}

static err_t echo_accept(void *arg, struct tcp_pcb *pcb, err_t err)
{
	(void)arg;
	if (err != ERR_OK || !pcb)
		return ERR_VAL;
	tcp_recv(pcb, echo_recv);
	return ERR_OK;
}

static void udp_echo(void *arg, struct udp_pcb *pcb, struct pbuf *p, const ip_addr_t *addr,
                     u16_t port)
{
	(void)arg;
	udp_sendto(pcb, p, addr, port);
	pbuf_free(p);
}

static uint16_t csum16(const uint8_t *b, unsigned n)
{
	uint32_t s = 0;

	for (unsigned i = 0; i + 1 < n; i += 2)
		s += (uint32_t)(b[i] << 8 | b[i + 1]);
	if (n & 1)
		s += (uint32_t)b[n - 1] << 8;
	while (s >> 16)
		s = (s & 0xffff) + (s >> 16);
	return (uint16_t)~s;
}

static void fixup(uint8_t *f, unsigned len, unsigned ctl)
{
	unsigned ihl;

	if (len < 34 || f[12] != 0x08 || f[13] != 0x00)
		return;
	ihl = (f[14] & 15u) * 4;
	if (ihl < 20 || 14 + ihl > len)
		return;
	if (ctl & 2) {
		f[24] = f[25] = 0;
		uint16_t c = csum16(f + 14, ihl);
		f[24] = (uint8_t)(c >> 8);
		f[25] = (uint8_t)c;
	}
	if ((ctl & 4) && f[23] == 1 && len >= 14 + ihl + 4) {
		uint8_t *icmp = f + 14 + ihl;
		unsigned n = len - 14 - ihl;
		icmp[2] = icmp[3] = 0;
		uint16_t c = csum16(icmp, n);
		icmp[2] = (uint8_t)(c >> 8);
		icmp[3] = (uint8_t)c;
	}
}

static void pass(void)
{
	REQUIRE(vnet_poll(vn) >= 0, "the driver saw a device fault from a sane device");
	vnetif_input_all(&nif);
	sys_check_timeouts();
	vnet_tx_end_burst(vn);
}

/* Issue 23 finding 3: the inline header goes in front of the first pbuf
 * with data, so that is the one whose headroom counts. A zero-length head
 * (which has lwIP's headroom) followed by a PBUF_ROM pbuf over memory the
 * stack does not own must be flattened into a copy, not get 12 bytes
 * written in front of that memory: the ROM payload starts a heap block,
 * so ASan reports such a write as an underflow. Runs once at start-up,
 * so every fuzz run and every regression replay checks it. */
static void check_tx_headroom_first_data_pbuf(void)
{
	enum { LEN = 60 };
	uint8_t *rom = malloc(LEN);
	uint8_t want[LEN];

	REQUIRE(rom, "malloc");
	memset(rom, 0xff, 6);                              /* broadcast */
	memcpy(rom + 6, (uint8_t[]){2, 0, 0, 0, 0, 9}, 6); /* a locally administered source */
	rom[12] = 0x88; /* EtherType 0x88b5: local experimental, */
	rom[13] = 0xb5; /* no offload applies */
	for (unsigned i = 14; i < LEN; i++)
		rom[i] = (uint8_t)i;
	memcpy(want, rom, LEN);
	uint64_t clones = vnetif_stats()->tx_clones, frames = sim.q[1].frames;
	struct pbuf *head = pbuf_alloc(PBUF_LINK, 0, PBUF_RAM);
	struct pbuf *tail = pbuf_alloc(PBUF_RAW, LEN, PBUF_ROM);

	REQUIRE(head && tail, "pbuf_alloc");
	tail->payload = rom;
	pbuf_cat(head, tail);
	REQUIRE(nif.linkoutput(&nif, head) == ERR_OK,
	        "linkoutput of a zero-length head + PBUF_ROM");
	pbuf_free(head);
	pass();
	REQUIRE(vnetif_stats()->tx_clones == clones + 1,
	        "a PBUF_ROM first segment without headroom was sent zero-copy");
	REQUIRE(sim.q[1].frames == frames + 1 && sim.q[1].last_len == 12 + LEN &&
	            !memcmp(sim.q[1].last + 12, want, LEN),
	        "the device did not get the frame intact");
	REQUIRE(!memcmp(rom, want, LEN), "the ROM memory was written");
	free(rom);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	ip4_addr_t addr, mask, gw;

	(void)argc;
	(void)argv;
	fuzz_quiet();
	shim_reset();
	shim_now_ns = 1000000000ull;
	vn = fuzz_vnet_open();
	lwip_init();
	IP4_ADDR(&addr, 10, 77, 0, 2);
	IP4_ADDR(&mask, 255, 255, 255, 0);
	IP4_ADDR(&gw, 10, 77, 0, 1);
	REQUIRE(netif_add(&nif, &addr, &mask, &gw, vn, vnetif_init, ethernet_input), "netif_add");
	netif_set_default(&nif);
	netif_set_up(&nif);
	netif_set_link_up(&nif);

	struct tcp_pcb *l = tcp_new();
	REQUIRE(l && tcp_bind(l, IP_ANY_TYPE, 7) == ERR_OK, "tcp bind");
	l = tcp_listen(l);
	REQUIRE(l, "tcp listen");
	tcp_accept(l, echo_accept);
	struct udp_pcb *u = udp_new();
	REQUIRE(u && udp_bind(u, IP_ANY_TYPE, 7) == ERR_OK, "udp bind");
	udp_recv(u, udp_echo, NULL);
	check_tx_headroom_first_data_pbuf();
	return 0;
}

/* After an input: every connection gone, every timer expired; what the
 * stack still uses must be what it used before any input. */
static void drain_and_check(void)
{
	while (tcp_active_pcbs)
		tcp_abort(tcp_active_pcbs);
	while (tcp_tw_pcbs)
		tcp_abort(tcp_tw_pcbs);
	for (int i = 0; i < 8; i++) { /* 20 s: reassembly (5 s) and ARP requests age out */
		shim_now_ns += 2500000000ull;
		pass();
	}
	REQUIRE(vnet_rx_held(vn) == 0, "RX buffers still held after the stack went idle");
	REQUIRE(lwip_stats.memp[MEMP_TCP_SEG]->used == 0, "TCP segments leaked");
	REQUIRE(lwip_stats.memp[MEMP_REASSDATA]->used == 0, "reassembly entries leaked");
	REQUIRE(lwip_stats.memp[MEMP_FRAG_PBUF]->used == 0, "fragment pbufs leaked");
	REQUIRE(lwip_stats.memp[MEMP_PBUF]->used == 0, "PBUF_REF/ROM leaked");
	REQUIRE(lwip_stats.memp[MEMP_PBUF_POOL]->used == 0, "pool pbufs leaked");
	REQUIRE(lwip_stats.memp[MEMP_TCP_PCB]->used == 0, "TCP pcbs leaked");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t frame[65536 + 14];
	size_t pos = 0;

	while (pos + 3 <= size) {
		unsigned ctl = data[pos];
		unsigned len = (unsigned)(data[pos + 1] << 8 | data[pos + 2]);
		pos += 3;
		if (len > size - pos)
			len = (unsigned)(size - pos);
		memcpy(frame, data + pos, len);
		pos += len;
		fixup(frame, len, ctl);
		vnetif_rx_hold_max = (ctl & 8) ? 0 : LONG_MAX;
		shim_now_ns += (uint64_t)(ctl >> 4) * 100000000ull;
		struct virtio_net_hdr h = {.flags = (ctl & 1) ? VIRTIO_NET_HDR_F_DATA_VALID : 0,
		                           .gso_type = VIRTIO_NET_HDR_GSO_NONE};
		/* Frames the driver must drop (runts, > MTU) are dropped there. */
		REQUIRE(sim_rx_inject_hdr(&h, frame, len, -1, -1) >= 0 || len + 12 > 65536,
		        "the device ran out of RX buffers: the stack pins the ring");
		pass();
	}
	drain_and_check();
	return 0;
}
