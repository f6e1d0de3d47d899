/*
 * arpping.c: driver-only request/response. ARP requests (raw Ethernet, no
 * IP stack) to one host address, each reply timed with clock_ns(): the
 * round trip through the driver, the backend and the host's ARP code, and
 * nothing else. Works against slirp's gateway (10.0.2.2) and against a
 * host kernel on a tap.
 *
 * Keys: arp.target=A.B.C.D (default 10.0.2.2), arp.ip=A.B.C.D (10.0.2.15),
 *       arp.count=N measured exchanges (1000), arp.warmup=N unmeasured (10),
 *       arp.timeout_ms=MS per reply (1000), backend=LABEL (RESULT line only).
 */
#include <stdio.h>
#include <string.h>
#include "apps/apps.h"
#include "apps/lib/hist.h"
#include "drivers/virtio/vnet.h"
#include "kernel/kernel.h"

#define ARP_FRAME_LEN  60 /* minimum Ethernet frame without FCS */
#define ARP_SLOT_SIZE  128
#define ARP_HEADROOM   16   /* >= vnet_tx_headroom */
#define ARP_SLOTS      1024 /* >= frames the TX ring can hold (zero-copy keeps them) */
#define ETH_TYPE_ARP   0x0806
#define ARP_OP_REQUEST 1
#define ARP_OP_REPLY   2

struct arpping {
	struct vnet *vn;
	uint8_t ip[4], target[4];
	const char *target_str, *backend;
	uint64_t count, warmup, timeout_ns;
	uint8_t *slots;
	bool busy[ARP_SLOTS];
	uint64_t other_frames, answered;
	struct hist rtt;
};

static struct arpping ap;

static void arpping_parse_ip(const char *key, const char *def, uint8_t out[4], const char **str)
{
	const char *s = cmdline_str(key, def), *p = s;

	*str = s;
	for (int i = 0; i < 4; i++) {
		unsigned v = 0, digits = 0;

		while (*p >= '0' && *p <= '9' && digits < 4) {
			v = v * 10 + (unsigned)(*p++ - '0');
			digits++;
		}
		if (!digits || v > 255 || *p != (i < 3 ? '.' : '\0'))
			kernel_usage_error(
			    "cmdline", "bad value '%s' for key '%s' (not an IPv4 address)", s, key);
		out[i] = (uint8_t)v;
		p++;
	}
}

void arpping_configure(void)
{
	const char *ip_str;

	arpping_parse_ip("arp.target", "10.0.2.2", ap.target, &ap.target_str);
	arpping_parse_ip("arp.ip", "10.0.2.15", ap.ip, &ip_str);
	ap.count = cmdline_u64("arp.count", 1000, 1, 10000000);
	ap.warmup = cmdline_u64("arp.warmup", 10, 0, 1000000);
	ap.timeout_ns = cmdline_u64("arp.timeout_ms", 1000, 1, 60000) * 1000000ull;
	ap.backend = cmdline_str("backend", "unknown");
}

static void arpping_tx_done(void *arg, void *cookie)
{
	(void)arg;
	ap.busy[(uintptr_t)cookie] = false;
}

static void arpping_device_failed(void)
{
	vnet_print_counters(ap.vn);
	kernel_error("virtio-net", "%s", vnet_error(ap.vn));
}

/* 28-byte ARP packet for IPv4 over Ethernet (RFC 826) in a 60-byte frame. */
static void arpping_build(uint8_t *f, uint16_t op, const uint8_t dst_mac[6], const uint8_t tha[6],
                          const uint8_t tpa[4])
{
	const uint8_t *mac = vnet_mac(ap.vn);
	static const uint8_t hdr[8] = {0, 1, 8, 0, 6, 4, 0, 0};

	memset(f, 0, ARP_FRAME_LEN);
	memcpy(f, dst_mac, 6);
	memcpy(f + 6, mac, 6);
	f[12] = ETH_TYPE_ARP >> 8;
	f[13] = ETH_TYPE_ARP & 0xff;
	memcpy(f + 14, hdr, 8);
	f[21] = (uint8_t)op;
	memcpy(f + 22, mac, 6);
	memcpy(f + 28, ap.ip, 4);
	memcpy(f + 32, tha, 6);
	memcpy(f + 38, tpa, 4);
}

/* Queue one frame built by the caller into a free slot; waits (bounded)
 * through back-pressure. */
static void arpping_send(uint16_t op, const uint8_t dst_mac[6], const uint8_t tha[6],
                         const uint8_t tpa[4], uint64_t deadline)
{
	uintptr_t s;

	for (;;) {
		for (s = 0; s < ARP_SLOTS && ap.busy[s]; s++)
			continue;
		if (s < ARP_SLOTS) {
			uint8_t *f = ap.slots + s * ARP_SLOT_SIZE + ARP_HEADROOM;
			struct vnet_seg seg = {f, ARP_FRAME_LEN};
			int rc;

			arpping_build(f, op, dst_mac, tha, tpa);
			ap.busy[s] = true;
			rc = vnet_tx(ap.vn, &seg, 1, NULL, (void *)s);
			if (rc == 0)
				break;
			ap.busy[s] = false; /* not accepted: the slot is still ours */
			if (rc == -VNET_EDEVICE)
				arpping_device_failed();
			if (rc != -VNET_EAGAIN)
				kernel_error("arpping", "vnet_tx refused an ARP frame (%d)", rc);
		}
		if (vnet_poll(ap.vn) < 0)
			arpping_device_failed();
		if (clock_ns() > deadline)
			kernel_error("arpping", "transmit ring stayed full for %lu ms",
			             (unsigned long)(ap.timeout_ns / 1000000));
	}
	vnet_tx_end_burst(ap.vn);
}

static uint16_t arpping_be16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

/* Handle one received frame: 1 if it is the reply we wait for. ARP
 * requests for our address are answered so the host's neighbour entry
 * stays complete. */
static int arpping_input(const uint8_t *f, uint32_t len, uint64_t deadline)
{
	if (len < 42 || arpping_be16(f + 12) != ETH_TYPE_ARP || arpping_be16(f + 14) != 1 ||
	    arpping_be16(f + 16) != 0x0800) {
		ap.other_frames++;
		return 0;
	}
	if (arpping_be16(f + 20) == ARP_OP_REPLY && !memcmp(f + 28, ap.target, 4) &&
	    !memcmp(f + 38, ap.ip, 4))
		return 1;
	if (arpping_be16(f + 20) == ARP_OP_REQUEST && !memcmp(f + 38, ap.ip, 4)) {
		uint8_t sha[6], spa[4];

		memcpy(sha, f + 22, 6);
		memcpy(spa, f + 28, 4);
		arpping_send(ARP_OP_REPLY, sha, sha, spa, deadline);
		ap.answered++;
		return 0;
	}
	ap.other_frames++;
	return 0;
}

/* One exchange; returns the round trip in ns, or an ERROR line and exit. */
static uint64_t arpping_exchange(uint64_t seq, uint8_t peer_mac[6])
{
	static const uint8_t bcast[6] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
	static const uint8_t zero[6] = {0};
	uint64_t t0 = clock_ns(), deadline = t0 + ap.timeout_ns;

	arpping_send(ARP_OP_REQUEST, bcast, zero, ap.target, deadline);
	vnet_before_wait(ap.vn);
	for (;;) {
		struct vnet_rx f;
		int rc;

		if (vnet_poll(ap.vn) < 0)
			arpping_device_failed();
		while ((rc = vnet_rx(ap.vn, &f)) > 0) {
			/* ARP fits the first buffer; longer frames are not ours */
			int hit = arpping_input(f.buf[0].data, f.buf[0].len, deadline);
			uint64_t t1 = clock_ns();

			if (hit)
				memcpy(peer_mac, (const uint8_t *)f.buf[0].data + 22, 6);
			vnet_rx_release_frame(ap.vn, &f);
			if (hit)
				return t1 - t0;
		}
		if (rc < 0)
			arpping_device_failed();
		if (clock_ns() > deadline) {
			vnet_print_counters(ap.vn);
			kernel_error("arpping", "no ARP reply from %s within %lu ms (request %lu)",
			             ap.target_str, (unsigned long)(ap.timeout_ns / 1000000),
			             (unsigned long)seq);
		}
	}
}

static void arpping_ratio(const char *key, uint64_t num, uint64_t den)
{
	uint64_t m = den ? (num * 1000 + den / 2) / den : 0;

	printf(",\"%s\":%lu.%03lu", key, (unsigned long)(m / 1000), (unsigned long)(m % 1000));
}

static void arpping_result(const struct vnet_counters *rx0, const struct vnet_counters *tx0)
{
	struct vnet_counters rx, tx;
	uint64_t frames, kicks, reclaims;

	vnet_counters(ap.vn, &rx, &tx);
	frames = tx.frames - tx0->frames;
	kicks = (tx.kicks - tx0->kicks) + (rx.kicks - rx0->kicks);
	reclaims = tx.reclaim_calls - tx0->reclaim_calls;
	printf("RESULT {\"test\":\"arp_rr\",\"role\":\"client\",\"variant\":\"%s\","
	       "\"accel\":\"%s\",\"backend\":\"%s\",\"count\":%lu,\"min_ns\":%lu,\"mean_ns\":%lu,"
	       "\"p50_ns\":%lu,\"p90_ns\":%lu,\"p99_ns\":%lu,\"p999_ns\":%lu,\"max_ns\":%lu,"
	       "\"tx_frames\":%lu,\"rx_frames\":%lu,\"other_frames\":%lu,\"kicks\":%lu,"
	       "\"tx_kicks\":%lu,\"kicks_suppressed\":%lu,\"reclaim_calls\":%lu,\"reclaimed\":%lu,"
	       "\"ring_full\":%lu",
	       vnet_variant(), cpu_accel(), ap.backend, (unsigned long)ap.rtt.count,
	       (unsigned long)ap.rtt.min, (unsigned long)hist_mean(&ap.rtt),
	       (unsigned long)hist_percentile(&ap.rtt, 50000),
	       (unsigned long)hist_percentile(&ap.rtt, 90000),
	       (unsigned long)hist_percentile(&ap.rtt, 99000),
	       (unsigned long)hist_percentile(&ap.rtt, 99900), (unsigned long)ap.rtt.max,
	       (unsigned long)frames, (unsigned long)(rx.frames - rx0->frames),
	       (unsigned long)ap.other_frames, (unsigned long)kicks,
	       (unsigned long)(tx.kicks - tx0->kicks),
	       (unsigned long)((tx.kicks_suppressed - tx0->kicks_suppressed) +
	                       (rx.kicks_suppressed - rx0->kicks_suppressed)),
	       (unsigned long)reclaims, (unsigned long)(tx.reclaimed - tx0->reclaimed),
	       (unsigned long)(tx.ring_full - tx0->ring_full));
	arpping_ratio("kicks_per_frame", kicks, frames);
	arpping_ratio("reclaims_per_frame", reclaims, frames);
	printf("}\n");
}

int arpping_main(void)
{
	struct vnet_counters rx0, tx0;
	uint8_t peer_mac[6];
	char err[192];

	ap.vn = vnet_open(err, sizeof(err));
	if (!ap.vn)
		kernel_error("virtio-net", "%s", err);
	vnet_set_tx_done(ap.vn, arpping_tx_done, NULL);
	ap.slots = pmm_alloc((size_t)ARP_SLOTS * ARP_SLOT_SIZE, 64);
	hist_reset(&ap.rtt);
	printf("arpping: target=%s count=%lu warmup=%lu timeout_ms=%lu\n", ap.target_str,
	       (unsigned long)ap.count, (unsigned long)ap.warmup,
	       (unsigned long)(ap.timeout_ns / 1000000));

	for (uint64_t i = 0; i < ap.warmup; i++)
		arpping_exchange(i, peer_mac);
	vnet_counters(ap.vn, &rx0, &tx0);
	ap.other_frames = 0;
	for (uint64_t i = 0; i < ap.count; i++) {
		hist_add(&ap.rtt, arpping_exchange(ap.warmup + i, peer_mac));
		if (i == 0)
			printf("arpping: %s is at %02x:%02x:%02x:%02x:%02x:%02x\n", ap.target_str,
			       peer_mac[0], peer_mac[1], peer_mac[2], peer_mac[3], peer_mac[4],
			       peer_mac[5]);
	}
	arpping_result(&rx0, &tx0);
	vnet_print_counters(ap.vn);
	return EXIT_OK;
}
