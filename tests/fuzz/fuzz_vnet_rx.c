/*
 * fuzz_vnet_rx.c: libFuzzer target for the driver's receive path
 * (vnet_rx.c, virtq.c) against the simulated device. The input is a script
 * of device and driver actions: frames with every virtio-net header field
 * taken from the input (flags, GSO type and size, checksum offsets,
 * num_buffers claimed and buffers completed), raw used-ring entries with
 * any id, length and index step, armed sim_dev faults, link flaps, and the
 * driver receiving, holding, releasing (twice, too) and polling.
 *
 * Invariants checked after every step (a violation aborts, so libFuzzer
 * records the input): every frame handed up has 1..VNET_RX_MAX_BUFS
 * buffers, each inside its own RX buffer, whose lengths add up to the
 * frame's; the driver's held count is what the caller holds; a fault is
 * sticky; a double release changes nothing; at the end every held buffer
 * goes back (rx_held == 0; after a fault the run ends, so not then) and the
 * simulated device saw no driver rule break. ASan/UBSan catch the rest.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "drivers/virtio/vnet_priv.h"
#include "tests/unit/host_shim.h"
#include "tests/unit/sim_dev.h"

#define HOLD_MAX 256

struct in {
	const uint8_t *p;
	size_t n;
};

static unsigned take(struct in *in, unsigned bytes)
{
	unsigned v = 0;

	for (unsigned i = 0; i < bytes; i++) {
		v = v << 8 | (in->n ? *in->p : 0);
		if (in->n) {
			in->p++;
			in->n--;
		}
	}
	return v;
}

#define REQUIRE(cond, what)                                                                        \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "fuzz_vnet_rx: invariant broken: %s (%s:%d)\n", what,      \
			        __FILE__, __LINE__);                                               \
			abort();                                                                   \
		}                                                                                  \
	} while (0)

static struct vnet *vn;
static struct vnet_rx held[HOLD_MAX];
static unsigned nheld;
static void *released[8]; /* recently released handles, for double releases */
static unsigned nreleased;

static void check_frame(const struct vnet_rx *f)
{
	uint32_t sum = 0;

	REQUIRE(f->nbufs >= 1 && f->nbufs <= VNET_RX_MAX_BUFS, "buffers per frame");
	for (unsigned k = 0; k < f->nbufs; k++) {
		const uint8_t *d = f->buf[k].data, *base = vn->rx_mem;
		uintptr_t off = (uintptr_t)(d - base);
		size_t buf = off / VNET_RX_BUF_SIZE;

		REQUIRE(d >= base && buf < vn->rxq.size, "buffer inside the RX area");
		REQUIRE(off % VNET_RX_BUF_SIZE + f->buf[k].len <= VNET_RX_BUF_SIZE,
		        "buffer length within its buffer");
		volatile uint8_t x = 0;
		for (uint32_t i = 0; i < f->buf[k].len; i++) /* ASan sees every byte */
			x ^= d[i];
		(void)x;
		sum += f->buf[k].len;
	}
	REQUIRE(sum == f->len, "buffer lengths add up to the frame");
}

static void release(unsigned i)
{
	for (unsigned k = 0; k < held[i].nbufs; k++)
		released[nreleased++ % 8] = held[i].buf[k].handle;
	vnet_rx_release_frame(vn, &held[i]);
	held[i] = held[--nheld];
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	/* The driver prints a DEVICE_FAULT line per fault: not wanted here. */
	if (!getenv("FUZZ_VERBOSE") && !freopen("/dev/null", "w", stdout))
		abort();
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const uint8_t mac[6] = {0x52, 0x54, 0x00, 0x12, 0x34, 0x56};
	static uint8_t frame[70000];
	struct in in = {data, size};
	char err[256];
	bool failed = false;
	struct sim_queue *rxd = &sim.q[VNET_RXQ];
	uint64_t offered = (1ull << VIRTIO_F_VERSION_1) | (1ull << VIRTIO_NET_F_MAC) |
	                   (1ull << VIRTIO_NET_F_STATUS) | (1ull << VIRTIO_F_EVENT_IDX) |
	                   (1ull << VIRTIO_NET_F_MRG_RXBUF) | (1ull << VIRTIO_NET_F_CSUM) |
	                   (1ull << VIRTIO_NET_F_GUEST_CSUM) | (1ull << VIRTIO_NET_F_MTU) |
	                   (1ull << VIRTIO_NET_F_HOST_TSO4) | (1ull << VIRTIO_NET_F_GUEST_TSO4);

	shim_reset();
	sim_reset(offered);
	sim.mode = SIM_SYNC;
	memcpy(sim.cfg + VIRTIO_NET_CFG_MAC, mac, 6);
	sim.cfg[VIRTIO_NET_CFG_STATUS] = VIRTIO_NET_S_LINK_UP;
	sim.cfg[VIRTIO_NET_CFG_MTU] = 1500 & 0xff;
	sim.cfg[VIRTIO_NET_CFG_MTU + 1] = 1500 >> 8;
	vn = vnet_open(err, sizeof(err));
	REQUIRE(vn, "vnet_open on a sane device");
	nheld = nreleased = 0;

	while (in.n && !failed) {
		unsigned op = take(&in, 1) % 8;

		switch (op) {
		case 0: { /* a frame, every header field from the input */
			struct virtio_net_hdr h;
			h.flags = (uint8_t)take(&in, 1);
			h.gso_type = (uint8_t)take(&in, 1);
			h.hdr_len = (uint16_t)take(&in, 2);
			h.gso_size = (uint16_t)take(&in, 2);
			h.csum_start = (uint16_t)take(&in, 2);
			h.csum_offset = (uint16_t)take(&in, 2);
			h.num_buffers = 0;
			unsigned len = take(&in, 3) % sizeof(frame);
			unsigned claim = take(&in, 1), complete = take(&in, 1);
			unsigned fill = take(&in, 1);
			for (unsigned i = 0; i < len; i++)
				frame[i] = (uint8_t)(fill + i);
			sim_rx_inject_hdr(&h, frame, len, claim == 0xff ? -1 : (int)claim % 40,
			                  complete == 0xff ? -1 : (int)complete % 40);
			break;
		}
		case 1: { /* a raw used entry: any id, any length, any index step */
			uint16_t id = (uint16_t)take(&in, 2);
			uint32_t len = take(&in, 4);
			unsigned step = take(&in, 1) % 4;
			if (!rxd->used)
				break;
			rxd->used->ring[rxd->used_idx % rxd->size] =
			    (struct virtq_used_elem){id, len};
			rxd->used_idx = (uint16_t)(rxd->used_idx + step);
			rxd->used->idx = rxd->used_idx;
			break;
		}
		case 2: /* an armed device fault on the next completion */
			rxd->fault = (enum sim_fault)(take(&in, 1) % SIM_FAULT_KINDS);
			memset(frame, 0x5a, 64);
			sim_rx_inject(frame, 14 + take(&in, 1));
			rxd->fault = SIM_FAULT_NONE;
			break;
		case 3: { /* the driver receives */
			unsigned n = 1 + take(&in, 1) % 64;
			for (unsigned i = 0; i < n && nheld < HOLD_MAX; i++) {
				int r = vnet_rx(vn, &held[nheld]);
				if (r < 0) {
					failed = true;
					REQUIRE(vnet_rx(vn, &held[nheld]) < 0, "a fault is sticky");
					break;
				}
				if (r == 0)
					break;
				check_frame(&held[nheld]);
				nheld++;
			}
			break;
		}
		case 4: /* the caller frees some frames */
			for (unsigned n = take(&in, 1) % 16; n && nheld; n--)
				release(take(&in, 1) % nheld);
			break;
		case 5: { /* a double release is refused */
			uint16_t before = vnet_rx_held(vn);
			if (nreleased)
				vnet_rx_release(
				    vn, released[take(&in, 1) % (nreleased < 8 ? nreleased : 8)]);
			REQUIRE(vnet_rx_held(vn) == before, "double release changed the count");
			break;
		}
		case 6: /* a poll pass, some time later */
			shim_now_ns += (uint64_t)take(&in, 1) * 1000000;
			if (vnet_poll(vn) < 0)
				failed = true;
			break;
		case 7: /* link flap */
			sim.cfg[VIRTIO_NET_CFG_STATUS] =
			    (uint8_t)(take(&in, 1) & VIRTIO_NET_S_LINK_UP);
			break;
		}
		unsigned bufs = 0;
		for (unsigned i = 0; i < nheld; i++)
			bufs += held[i].nbufs;
		/* After a device fault the run ends (ERROR line): no accounting then. */
		REQUIRE(failed || vnet_rx_held(vn) == bufs,
		        "driver's held count is what the caller holds");
	}
	while (nheld)
		release(nheld - 1);
	REQUIRE(failed || vnet_rx_held(vn) == 0, "every buffer back after release");
	REQUIRE(sim.driver_errors == 0, "the driver broke a ring rule");
	return 0;
}
