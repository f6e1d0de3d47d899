/*
 * harness.c: what the libFuzzer targets share (harness.h).
 */
#include "tests/fuzz/harness.h"
#include "tests/unit/host_shim.h"
#include "tests/unit/sim_dev.h"

unsigned take(struct in *in, unsigned bytes)
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

void take_hdr(struct in *in, struct virtio_net_hdr *h)
{
	h->flags = (uint8_t)take(in, 1);
	h->gso_type = (uint8_t)take(in, 1);
	h->hdr_len = (uint16_t)take(in, 2);
	h->gso_size = (uint16_t)take(in, 2);
	h->csum_start = (uint16_t)take(in, 2);
	h->csum_offset = (uint16_t)take(in, 2);
	h->num_buffers = 0;
}

void fuzz_quiet(void)
{
	if (!getenv("FUZZ_VERBOSE") && !freopen("/dev/null", "w", stdout))
		abort();
}

struct vnet *fuzz_vnet_open(void)
{
	char err[256];
	struct vnet *vn;

	sim_net_reset(FUZZ_OFFERED, 1500);
	sim.mode = SIM_SYNC;
	vn = vnet_open(err, sizeof(err));
	REQUIRE(vn, "vnet_open on a sane device");
	return vn;
}

void check_frame_bufs(const struct vnet *vn, const struct vnet_rx *f)
{
	uint32_t sum = 0;

	REQUIRE(f->nbufs >= 1 && f->nbufs <= VNET_RX_MAX_BUFS, "buffers per frame");
	for (unsigned k = 0; k < f->nbufs; k++) {
		const uint8_t *d = f->buf[k].data, *base = vn->rx_mem;
		uintptr_t off = (uintptr_t)(d - base);

		REQUIRE(d >= base && off / VNET_RX_BUF_SIZE < vn->rxq.size,
		        "buffer inside the RX area");
		REQUIRE(off % VNET_RX_BUF_SIZE + f->buf[k].len <= VNET_RX_BUF_SIZE,
		        "buffer length within its buffer");
		sum += f->buf[k].len;
	}
	REQUIRE(sum == f->len, "buffer lengths add up to the frame");
}

void check_held(const struct vnet *vn, const struct vnet_rx *held, unsigned nheld, bool failed)
{
	unsigned bufs = 0;

	for (unsigned i = 0; i < nheld; i++)
		bufs += held[i].nbufs;
	REQUIRE(failed || vnet_rx_held(vn) == bufs, "driver's held count is what the caller holds");
}

bool fuzz_receive(struct vnet *vn, struct vnet_rx *held, unsigned *nheld, unsigned max, unsigned n,
                  int (*rx)(struct vnet_rx *out, void *ctx), void *ctx,
                  void (*check)(const struct vnet_rx *f))
{
	for (unsigned i = 0; i < n && *nheld < max; i++) {
		int r = rx(&held[*nheld], ctx);
		if (r < 0) {
			REQUIRE(vnet_rx(vn, &held[*nheld]) < 0, "a fault is sticky");
			return true;
		}
		if (r == 0)
			break;
		check(&held[*nheld]);
		(*nheld)++;
	}
	return false;
}

bool fuzz_poll(struct vnet *vn, struct in *in)
{
	shim_now_ns += (uint64_t)take(in, 1) * 1000000;
	return vnet_poll(vn) < 0;
}
