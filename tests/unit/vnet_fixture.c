/*
 * vnet_fixture.c: the test_vnet binary's fixture (vnet_fixture.h): a
 * simulated device configured like QEMU's virtio-net, the driver opened on
 * it, and numbered frames whose completions are counted.
 */
#include "tests/unit/test_vnet.h"
#include "tests/unit/vnet_fixture.h"

struct vnet *vn;
struct sim_queue *txd = &sim.q[VNET_TXQ], *rxd = &sim.q[VNET_RXQ];
uint8_t pool[POOL][HEADROOM + FRAME_LEN];
uint8_t done_count[COOKIES];
unsigned done_total, done_twice;
uint64_t sent_sum;
unsigned next_cookie;

static void on_tx_done(void *arg, void *cookie)
{
	uintptr_t c = (uintptr_t)cookie;

	(void)arg;
	if (c >= COOKIES || done_count[c]++)
		done_twice++;
	done_total++;
}

void dev_config(uint64_t offered, enum sim_mode mode)
{
	shim_reset();
	sim_net_reset(offered, 1500);
	sim.mode = mode;
	memset(done_count, 0, sizeof(done_count));
	done_total = done_twice = 0;
	sent_sum = 0;
	next_cookie = 1;
}

struct vnet *dev_open(enum sim_mode mode)
{
	char err[256] = "";

	dev_config(SIM_FEATURES, mode);
	vn = vnet_open(err, sizeof(err));
	CHECK(vn != NULL, "vnet_open");
	if (!vn)
		printf("     vnet_open: %s\n", err);
	else
		vnet_set_tx_done(vn, on_tx_done, NULL);
	return vn;
}

int send_frame(void)
{
	unsigned c = next_cookie;
	uint8_t *f = pool[c % POOL] + HEADROOM;
	struct vnet_seg segs[2] = {{f, 14}, {f + 14, FRAME_LEN - 14}};
	int rc;

	if (c > POOL && VNET_ZEROCOPY && !done_count[c - POOL])
		printf("     test bug: pool slot reused while in flight\n");
	for (unsigned i = 0; i < FRAME_LEN; i++)
		f[i] = (uint8_t)(c * 7 + i);
	rc = vnet_tx(vn, segs, 2, NULL, (void *)(uintptr_t)c);
	if (rc == 0) {
		for (unsigned i = 0; i < FRAME_LEN; i++)
			sent_sum += f[i];
		next_cookie++;
	}
	return rc;
}

unsigned descs_per_frame(void)
{
	if (!VNET_ZEROCOPY)
		return VNET_TXHDR_INLINE ? 1 : 2;
	return VNET_TXHDR_INLINE ? 2 : 3;
}

void counters(struct vnet_counters *rx, struct vnet_counters *tx)
{
	vnet_counters(vn, rx, tx);
}

void settle(void)
{
	vnet_poll(vn);
	if (VNET_IS_KICK_TIMER) {
		shim_now_ns += VNET_KICK_TIMER_US * 1000ull;
		vnet_poll(vn);
	}
}

unsigned test_vnet_done_total(void)
{
	return done_total;
}
