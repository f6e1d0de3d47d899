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
#include <string.h>
#include "tests/fuzz/harness.h"
#include "tests/unit/host_shim.h"
#include "tests/unit/sim_dev.h"

#define HOLD_MAX 256

const char fuzz_target[] = "fuzz_vnet_rx";

static struct vnet *vn;
static struct vnet_rx held[HOLD_MAX];
static unsigned nheld;
static void *released[8]; /* recently released handles, for double releases */
static unsigned nreleased;

static void check_frame(const struct vnet_rx *f)
{
	check_frame_bufs(vn, f);
	for (unsigned k = 0; k < f->nbufs; k++) {
		const uint8_t *d = f->buf[k].data;
		volatile uint8_t x = 0;
		for (uint32_t i = 0; i < f->buf[k].len; i++) /* ASan sees every byte */
			x ^= d[i];
		(void)x;
	}
}

static int receive(struct vnet_rx *out, void *ctx)
{
	(void)ctx;
	return vnet_rx(vn, out);
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
	fuzz_quiet();
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t frame[70000];
	struct in in = {data, size};
	bool failed = false;
	struct sim_queue *rxd = &sim.q[VNET_RXQ];

	shim_reset();
	vn = fuzz_vnet_open();
	nheld = nreleased = 0;

	while (in.n && !failed) {
		unsigned op = take(&in, 1) % 8;

		switch (op) {
		case 0: { /* a frame, every header field from the input */
			struct virtio_net_hdr h;
			take_hdr(&in, &h);
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
		case 3: /* the driver receives */
			failed = fuzz_receive(vn, held, &nheld, HOLD_MAX, 1 + take(&in, 1) % 64,
			                      receive, NULL, check_frame);
			break;
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
			failed = fuzz_poll(vn, &in);
			break;
		case 7: /* link flap */
			sim.cfg[VIRTIO_NET_CFG_STATUS] =
			    (uint8_t)(take(&in, 1) & VIRTIO_NET_S_LINK_UP);
			break;
		}
		check_held(vn, held, nheld, failed);
	}
	while (nheld)
		release(nheld - 1);
	REQUIRE(failed || vnet_rx_held(vn) == 0, "every buffer back after release");
	REQUIRE(sim.driver_errors == 0, "the driver broke a ring rule");
	return 0;
}
