/*
 * fuzz_vnet_dev.c: libFuzzer target for the driver's receive path against
 * a device that rewrites the memory it can write while the driver reads it
 * (issue 23 finding 2): the RX headers and frames, and the used ring. The
 * driver may trust only what it fetched once and checked (Linux virtio
 * hardening for confidential guests); a value fetched again after its
 * check is one the device chose after the check.
 *
 * How the device gets a turn between any two driver accesses: while
 * vnet_rx() runs, the RX buffer area and the RX used ring are PROT_NONE.
 * Every driver access to them faults (SIGSEGV); the handler opens the
 * pages and sets the trap flag, the access completes, and at the
 * single-step trap (SIGTRAP) the device takes its turn (the next byte of
 * the script: nothing, a header of the input's choosing or a hostile
 * canned one into the buffer just read, or new bytes over the used ring
 * word just read), then the pages close again. Linux x86-64 only.
 *
 * Input: a script of ops. 0: a frame, every header field from the input
 * (as fuzz_vnet_rx); 1: the driver receives up to N frames under the
 * rewriting device, whose turns come from the rest of the input; 2: the
 * caller releases frames; 3: a poll pass.
 *
 * Invariants for every frame handed up: 1..VNET_RX_MAX_BUFS buffers inside
 * the RX area adding up to its length; GSO only if large receive was
 * negotiated, then 1 <= gso_size <= length; no gso_size without GSO; the
 * length within the limits for its kind; the checksum-valid flag only with
 * GUEST_CSUM. The driver's held count matches the caller's, and the
 * simulated device saw no ring rule broken. A violation aborts.
 */
#define _GNU_SOURCE
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>
#include "tests/fuzz/harness.h"
#include "tests/unit/host_shim.h"
#include "tests/unit/sim_dev.h"

#define HOLD_MAX 256
#define PAGE     4096ul
#define X86_TF   0x100ul /* EFLAGS trap flag: one instruction, then #DB */

const char fuzz_target[] = "fuzz_vnet_dev";

static struct vnet *vn;
static struct vnet_rx held[HOLD_MAX];
static unsigned nheld;

/* The device-writable regions: [start, end) page-rounded. */
static struct {
	uintptr_t start, end;
} region[2];
static volatile sig_atomic_t armed;
static uintptr_t trap_addr, trap_page;
static struct in *dev_script;
static struct sigaction old_segv;
static unsigned long turns;

static bool in_region(uintptr_t a, unsigned *r)
{
	for (unsigned i = 0; i < 2; i++)
		if (a >= region[i].start && a < region[i].end) {
			*r = i;
			return true;
		}
	return false;
}

static void regions_protect(int prot)
{
	for (unsigned i = 0; i < 2; i++)
		if (mprotect((void *)region[i].start, region[i].end - region[i].start, prot))
			abort();
}

/* Hostile headers a device might switch to after the driver looked. */
static const struct virtio_net_hdr canned[] = {
    {.gso_type = VIRTIO_NET_HDR_GSO_TCPV4, .gso_size = 0, .num_buffers = 1},
    {.gso_type = VIRTIO_NET_HDR_GSO_TCPV4, .gso_size = 0xffff, .hdr_len = 0xffff, .num_buffers = 1},
    {.gso_type = VIRTIO_NET_HDR_GSO_UDP, .gso_size = 1000, .num_buffers = 1},
    {.gso_type = VIRTIO_NET_HDR_GSO_TCPV4 | VIRTIO_NET_HDR_GSO_ECN,
     .gso_size = 1448,
     .num_buffers = 1},
    {.flags = VIRTIO_NET_HDR_F_NEEDS_CSUM,
     .csum_start = 0xffff,
     .csum_offset = 0xffff,
     .num_buffers = 1},
    {.flags = VIRTIO_NET_HDR_F_DATA_VALID, .num_buffers = 0},
    {.num_buffers = 0xffff},
    {.flags = 0xff,
     .gso_type = 0xff,
     .hdr_len = 0xffff,
     .gso_size = 0xffff,
     .csum_start = 0xffff,
     .csum_offset = 0xffff,
     .num_buffers = 0xffff},
};

/* The device's turn, just after the driver's access at a (pages open). */
static void device_turn(uintptr_t a)
{
	unsigned r, op = take(dev_script, 1);

	turns++;
	if (!in_region(a, &r) || (op & 3) == 0)
		return;
	if (r == 0) { /* an RX buffer: its header */
		uint8_t *b =
		    vn->rx_mem + (a - (uintptr_t)vn->rx_mem) / VNET_RX_BUF_SIZE * VNET_RX_BUF_SIZE;
		struct virtio_net_hdr h;

		if ((op & 3) == 3) {
			h = canned[(op >> 2) % (sizeof(canned) / sizeof(canned[0]))];
		} else {
			for (unsigned i = 0; i < sizeof(h); i++)
				((uint8_t *)&h)[i] = (uint8_t)take(dev_script, 1);
		}
		memcpy(b + VNET_RX_HDR_OFF, &h, sizeof(h));
	} else { /* the used ring: the aligned word just read */
		uint32_t v = take(dev_script, 4);
		uintptr_t w = a & ~(uintptr_t)3;

		if ((op & 3) == 3)
			v = 0xffffffffu;
		if (w + 4 <= (uintptr_t)vn->rxq.used + sizeof(struct virtq_used) +
		                 sizeof(struct virtq_used_elem) * vn->rxq.size + 2)
			memcpy((void *)w, &v, 4);
	}
}

static void on_segv(int sig, siginfo_t *si, void *ctx)
{
	ucontext_t *uc = ctx;
	unsigned r;

	if (!armed || !in_region((uintptr_t)si->si_addr, &r)) {
		/* A real crash: the sanitizer's / libFuzzer's handler takes it
		 * when the access faults again. */
		sigaction(sig, &old_segv, NULL);
		return;
	}
	/* Only the page touched: the device's turn writes in that page too
	 * (the header of the buffer read, or the used-ring word read). */
	trap_addr = (uintptr_t)si->si_addr;
	trap_page = trap_addr & ~(PAGE - 1);
	if (mprotect((void *)trap_page, PAGE, PROT_READ | PROT_WRITE))
		abort();
	uc->uc_mcontext.gregs[REG_EFL] |= X86_TF;
}

static void on_trap(int sig, siginfo_t *si, void *ctx)
{
	ucontext_t *uc = ctx;

	(void)sig, (void)si;
	uc->uc_mcontext.gregs[REG_EFL] &= ~X86_TF;
	device_turn(trap_addr);
	if (armed && mprotect((void *)trap_page, PAGE, PROT_NONE))
		abort();
}

static void check_frame(const struct vnet_rx *f)
{
	check_frame_bufs(vn, f);
	if (getenv("FUZZ_VERBOSE"))
		fprintf(stderr, "frame len=%u flags=0x%x gso_size=%u nbufs=%u\n", f->len, f->flags,
		        f->gso_size, f->nbufs);
	if (f->flags & VNET_RX_F_GSO) {
		REQUIRE(vn->offloads & VNET_OFF_LRO4, "a GSO frame without large receive");
		REQUIRE(f->gso_size >= 1 && f->gso_size <= f->len,
		        "a GSO frame's gso_size outside 1..length (checked, then fetched again?)");
		REQUIRE(f->len <= VNET_RX_GSO_FRAME_MAX, "GSO frame over the limit");
	} else {
		REQUIRE(f->gso_size == 0, "gso_size without GSO");
		REQUIRE(f->len <= vn->max_frame, "a frame over the MTU without GSO");
	}
	REQUIRE(f->len >= 14, "a runt handed up");
	REQUIRE(!(f->flags & VNET_RX_F_CSUM_VALID) || (vn->offloads & VNET_OFF_RX_CSUM),
	        "checksum vouched for without GUEST_CSUM");
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	struct sigaction sa = {0};

	(void)argc;
	(void)argv;
	fuzz_quiet();
	sa.sa_sigaction = on_trap;
	sa.sa_flags = SA_SIGINFO;
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGTRAP, &sa, NULL))
		abort();
	return 0;
}

/* The driver receives, the device rewriting as it goes. */
static int receive_hostile(struct vnet_rx *out, void *ctx)
{
	struct in *script = ctx;
	struct sigaction sa = {0};
	int r;

	if (!script->n)
		return vnet_rx(vn, out); /* the script is spent: the device takes no more turns */
	sa.sa_sigaction = on_segv;
	sa.sa_flags = SA_SIGINFO;
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGSEGV, &sa, &old_segv))
		abort();
	dev_script = script;
	armed = 1;
	regions_protect(PROT_NONE);
	r = vnet_rx(vn, out);
	armed = 0;
	regions_protect(PROT_READ | PROT_WRITE);
	sigaction(SIGSEGV, &old_segv, NULL);
	return r;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t frame[70000];
	struct in in = {data, size};
	bool failed = false;

	shim_reset();
	vn = fuzz_vnet_open();
	REQUIRE((uintptr_t)vn->rx_mem % PAGE == 0 && (uintptr_t)vn->rxq.used % PAGE == 0,
	        "RX buffers and used ring page-aligned");
	region[0].start = (uintptr_t)vn->rx_mem;
	region[0].end =
	    (region[0].start + (size_t)vn->rxq.size * VNET_RX_BUF_SIZE + PAGE - 1) & ~(PAGE - 1);
	region[1].start = (uintptr_t)vn->rxq.used;
	region[1].end = (region[1].start + sizeof(struct virtq_used) +
	                 sizeof(struct virtq_used_elem) * vn->rxq.size + 2 + PAGE - 1) &
	                ~(PAGE - 1);
	nheld = 0;

	while (in.n && !failed) {
		switch (take(&in, 1) % 4) {
		case 0: { /* a frame, every header field from the input */
			struct virtio_net_hdr h;
			take_hdr(&in, &h);
			unsigned len = take(&in, 3) % sizeof(frame);
			unsigned claim = take(&in, 1);
			for (unsigned i = 0; i < len; i++)
				frame[i] = (uint8_t)i;
			sim_rx_inject_hdr(&h, frame, len, claim == 0xff ? -1 : (int)claim % 40, -1);
			break;
		}
		case 1: /* the driver receives while the device rewrites */
			failed = fuzz_receive(vn, held, &nheld, HOLD_MAX, 1 + take(&in, 1) % 8,
			                      receive_hostile, &in, check_frame);
			break;
		case 2: /* the caller frees some frames */
			for (unsigned n = take(&in, 1) % 16; n && nheld; n--) {
				unsigned i = take(&in, 1) % nheld;
				vnet_rx_release_frame(vn, &held[i]);
				held[i] = held[--nheld];
			}
			break;
		case 3: /* a poll pass, some time later */
			failed = fuzz_poll(vn, &in);
			break;
		}
		check_held(vn, held, nheld, failed);
	}
	while (nheld) {
		vnet_rx_release_frame(vn, &held[nheld - 1]);
		nheld--;
	}
	REQUIRE(sim.driver_errors == 0, "the driver broke a ring rule");
	if (getenv("FUZZ_VERBOSE"))
		fprintf(stderr, "fuzz_vnet_dev: %lu device turns so far\n", turns);
	return 0;
}
