/*
 * harness.h: what the libFuzzer targets share (harness.c): reading the
 * input as a script, the invariant check that aborts (so libFuzzer keeps
 * the input), the driver opened on a simulated QEMU virtio-net, and the
 * checks every receive-path target makes of the frames handed up.
 */
#ifndef VNETLAB_FUZZ_HARNESS_H
#define VNETLAB_FUZZ_HARNESS_H

#include <stdio.h>
#include <stdlib.h>
#include "drivers/virtio/vnet_priv.h"

/* The target's name, for its invariant lines (each target defines it). */
extern const char fuzz_target[];

#define REQUIRE(cond, what)                                                                        \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "%s: invariant broken: %s (%s:%d)\n", fuzz_target, what,   \
			        __FILE__, __LINE__);                                               \
			abort();                                                                   \
		}                                                                                  \
	} while (0)

/* What the targets' device offers: QEMU's virtio-net on a tap with a
 * vnet header, split ring. */
#define FUZZ_OFFERED                                                                               \
	((1ull << VIRTIO_F_VERSION_1) | (1ull << VIRTIO_NET_F_MAC) |                               \
	 (1ull << VIRTIO_NET_F_STATUS) | (1ull << VIRTIO_F_EVENT_IDX) |                            \
	 (1ull << VIRTIO_NET_F_MRG_RXBUF) | (1ull << VIRTIO_NET_F_CSUM) |                          \
	 (1ull << VIRTIO_NET_F_GUEST_CSUM) | (1ull << VIRTIO_NET_F_MTU) |                          \
	 (1ull << VIRTIO_NET_F_HOST_TSO4) | (1ull << VIRTIO_NET_F_GUEST_TSO4))

/* The input, consumed from the front; past its end it reads as zeros. */
struct in {
	const uint8_t *p;
	size_t n;
};
/* The next bytes (1..4), big-endian. */
unsigned take(struct in *in, unsigned bytes);
/* A virtio-net header, every field but num_buffers (0) from the input. */
void take_hdr(struct in *in, struct virtio_net_hdr *h);

/* LLVMFuzzerInitialize(): the driver's console lines (a DEVICE_FAULT per
 * fault) go nowhere unless FUZZ_VERBOSE is set. */
void fuzz_quiet(void);
/* The driver on a fresh simulated device (FUZZ_OFFERED, MTU 1500, link
 * up, completing at once); the caller resets the shim first. */
struct vnet *fuzz_vnet_open(void);
/* A frame handed up: 1..VNET_RX_MAX_BUFS buffers, each inside its own RX
 * buffer, lengths adding up to the frame's. */
void check_frame_bufs(const struct vnet *vn, const struct vnet_rx *f);
/* The driver's held count is what the caller holds (unless a device fault
 * ended the run: no accounting then). */
void check_held(const struct vnet *vn, const struct vnet_rx *held, unsigned nheld, bool failed);

/* The driver receives up to n frames (no more than fit in held[max]), each
 * through rx(out, ctx) and checked by check(); true once a device fault
 * ended the run, after checking that the fault is sticky. */
bool fuzz_receive(struct vnet *vn, struct vnet_rx *held, unsigned *nheld, unsigned max, unsigned n,
                  int (*rx)(struct vnet_rx *out, void *ctx), void *ctx,
                  void (*check)(const struct vnet_rx *f));

/* A poll pass, the input's count of milliseconds later; true on a device
 * fault. */
bool fuzz_poll(struct vnet *vn, struct in *in);

#endif
