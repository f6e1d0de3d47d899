/*
 * vnet_rss.c: receive-side scaling (VIRTIO_NET_F_RSS, virtio 1.2 5.1.6.5.7)
 * for mq=N > 1. Without it the device (tun, for QEMU's tap) picks the
 * receive queue of a flow itself: a flow the host opens stays where its
 * first frame landed, which is all a server needs, but the replies of a
 * connection the guest opens on queue k may land on any queue. With RSS
 * the driver decides: a Toeplitz hash (5.1.6.4.3.1) of the IPv4 addresses
 * and TCP/UDP ports under the key below indexes an indirection table whose
 * entry i is receiveq (i mod N) + 1, so a client copy can pick a local
 * port whose replies hash to its own queue (net.c net_bind_local_port()).
 *
 * The table and key are written once, by pair 0 before the copies start,
 * and only read afterwards. On the data path the receivers check where
 * each TCP/UDP frame landed (vnet_rss_frame_queue()): that hash is twelve
 * look-ups in a table built from the key at bring-up, not 96 steps of
 * the bitwise vnet_toeplitz() (issue 39; the cost in docs/multiqueue.md).
 */
#include <stdio.h>
#include <string.h>
#include "drivers/virtio/vnet_priv.h"
#include "drivers/virtio/virtio.h"

#define RSS_TABLE_MAX 128 /* entries we use at most: a power of two */
#define RSS_HASH_TYPES                                                                             \
	(VIRTIO_NET_RSS_HASH_TYPE_IPv4 | VIRTIO_NET_RSS_HASH_TYPE_TCPv4 |                          \
	 VIRTIO_NET_RSS_HASH_TYPE_UDPv4)

/* The key of Microsoft's RSS verification suite: any 40 bytes would do;
 * this one has published test vectors (tests/unit/test_vnet_mq.c). */
static const uint8_t rss_key[VNET_RSS_KEY_LEN] = {
    0x6d, 0x5a, 0x56, 0xda, 0x25, 0x5b, 0x0e, 0xc2, 0x41, 0x67, 0x25, 0x3d, 0x43, 0xa3,
    0x8f, 0xb0, 0xd0, 0xca, 0x2b, 0xcb, 0xae, 0x7b, 0x30, 0xb4, 0x77, 0xcb, 0x2d, 0xa3,
    0x80, 0x30, 0xf2, 0x0c, 0x6a, 0x42, 0xb7, 0x3b, 0xbe, 0xac, 0x01, 0xfa};

static bool peer_kick = true; /* vnet_rss_set_peer_kick(), before bring-up */

static struct {
	bool on;
	unsigned pairs;
	uint16_t len; /* table entries: a power of two */
	uint32_t hash_types;
	uint16_t table[RSS_TABLE_MAX];
	/* lut[i][v]: the hash of a 12-byte input that is v at byte i and 0
	 * elsewhere. Toeplitz is linear over XOR in the input's bits, so an
	 * input's hash is the XOR of its bytes' entries. */
	uint32_t lut[VNET_RSS_INPUT_LEN][256];
} rss;

/* Toeplitz: for every set bit of the input, most significant first, XOR
 * in the 32 key bits that start at that bit's position. */
uint32_t vnet_toeplitz(const uint8_t *key, size_t keylen, const uint8_t *in, size_t n)
{
	uint32_t h = 0;
	uint32_t win =
	    (uint32_t)key[0] << 24 | (uint32_t)key[1] << 16 | (uint32_t)key[2] << 8 | key[3];

	for (size_t i = 0; i < n; i++)
		for (int b = 7; b >= 0; b--) {
			if (in[i] >> b & 1)
				h ^= win;
			win = win << 1 | (i + 4 < keylen ? (uint32_t)(key[i + 4] >> b & 1) : 0);
		}
	return h;
}

/* rss.lut from the key: the 96 one-bit inputs by vnet_toeplitz(), every
 * other value as its lowest set bit's entry XOR the rest's (built in
 * increasing order, so the rest's is there). */
static void rss_lut_build(void)
{
	for (unsigned i = 0; i < VNET_RSS_INPUT_LEN; i++) {
		uint8_t in[VNET_RSS_INPUT_LEN] = {0};

		rss.lut[i][0] = 0;
		for (unsigned b = 0; b < 8; b++) {
			in[i] = (uint8_t)(1u << b);
			rss.lut[i][1u << b] =
			    vnet_toeplitz(rss_key, sizeof(rss_key), in, sizeof(in));
		}
		for (unsigned v = 3; v < 256; v++) {
			unsigned low = v & (0u - v);
			if (low != v)
				rss.lut[i][v] = rss.lut[i][low] ^ rss.lut[i][v ^ low];
		}
	}
}

uint32_t vnet_rss_hash(const uint8_t in[VNET_RSS_INPUT_LEN])
{
	uint32_t h = 0;

	for (unsigned i = 0; i < VNET_RSS_INPUT_LEN; i++)
		h ^= rss.lut[i][in[i]];
	return h;
}

uint32_t vnet_rss_hash_bitwise(const uint8_t in[VNET_RSS_INPUT_LEN])
{
	return vnet_toeplitz(rss_key, sizeof(rss_key), in, VNET_RSS_INPUT_LEN);
}

uint64_t vnet_rss_feature(unsigned pairs)
{
	return pairs > 1 ? VIRTIO_BIT(VIRTIO_NET_F_RSS) : 0;
}

/* Before FEATURES_OK (5.1.4): a key of 40 bytes, a table of at least the
 * pairs, and the IPv4, TCPv4 and UDPv4 hash types, or RSS is dropped from the features
 * (the device's own steering then, as without the feature). */
void vnet_rss_check(struct vnet *vn)
{
	uint8_t key_max = 0;
	uint16_t table_max = 0;
	uint32_t types = 0;

	rss.on = false;
	if (!(vn->features & VIRTIO_BIT(VIRTIO_NET_F_RSS)))
		return;
	if (virtio_dev_cfg_read(&vn->vd, VIRTIO_NET_CFG_RSS_MAX_KEY, &key_max, 1) ||
	    virtio_dev_cfg_read(&vn->vd, VIRTIO_NET_CFG_RSS_MAX_TABLE, &table_max, 2) ||
	    virtio_dev_cfg_read(&vn->vd, VIRTIO_NET_CFG_RSS_HASH_TYPES, &types, 4) ||
	    key_max < VNET_RSS_KEY_LEN || table_max < vn->pairs ||
	    (types & RSS_HASH_TYPES) != RSS_HASH_TYPES) {
		printf("virtio-net: rss not used (key max %u, table max %u, hash types 0x%x)\n",
		       key_max, table_max, types);
		vn->features &= ~VIRTIO_BIT(VIRTIO_NET_F_RSS);
		return;
	}
	rss.len = 1;
	while (rss.len * 2u <= table_max && rss.len * 2u <= RSS_TABLE_MAX)
		rss.len = (uint16_t)(rss.len * 2u);
	for (unsigned i = 0; i < rss.len; i++)
		rss.table[i] = (uint16_t)(i % vn->pairs);
	rss.hash_types = types & RSS_HASH_TYPES;
	rss.pairs = vn->pairs;
	rss_lut_build();
	rss.on = true;
}

static uint8_t *put16(uint8_t *p, uint16_t v)
{
	memcpy(p, &v, 2); /* le16 (x86) */
	return p + 2;
}

/* 5.1.6.5.7.1 struct virtio_net_rss_config into buf (at least
 * VNET_RSS_CONFIG_MAX bytes); its length, 0 without RSS. */
size_t vnet_rss_config(uint8_t *buf)
{
	uint8_t *p = buf;

	if (!rss.on)
		return 0;
	memcpy(p, &rss.hash_types, 4);             /* le32 */
	p = put16(p + 4, (uint16_t)(rss.len - 1)); /* indirection_table_mask */
	p = put16(p, 0);                           /* unclassified_queue: ARP & co. */
	for (unsigned i = 0; i < rss.len; i++)
		p = put16(p, rss.table[i]);
	p = put16(p, (uint16_t)rss.pairs); /* max_tx_vq */
	*p++ = VNET_RSS_KEY_LEN;
	memcpy(p, rss_key, VNET_RSS_KEY_LEN);
	return (size_t)(p + VNET_RSS_KEY_LEN - buf);
}

bool vnet_rss(void)
{
	return rss.on;
}

int vnet_rss_rx_queue(const uint8_t saddr[4], const uint8_t daddr[4], uint16_t sport,
                      uint16_t dport)
{
	uint8_t in[VNET_RSS_INPUT_LEN];

	if (!rss.on)
		return -1;
	memcpy(in, saddr, 4);
	memcpy(in + 4, daddr, 4);
	in[8] = (uint8_t)(sport >> 8);
	in[9] = (uint8_t)sport;
	in[10] = (uint8_t)(dport >> 8);
	in[11] = (uint8_t)dport;
	return rss.table[vnet_rss_hash(in) & (rss.len - 1u)];
}

/* A received Ethernet frame (its first len bytes): a TCP or UDP segment of
 * an unfragmented IPv4 packet hashes on addresses and ports, which sit in
 * the frame in the order the hash takes them (5.1.6.4.3.1). */
int vnet_rss_frame_queue(const uint8_t *eth, size_t len)
{
	const uint8_t *ip = eth + 14;
	uint8_t in[VNET_RSS_INPUT_LEN];
	unsigned ihl;

	if (!rss.on || len < 14 + 20 + 4 || eth[12] != 0x08 || eth[13] != 0x00)
		return -1;
	ihl = (ip[0] & 0xfu) * 4u;
	if ((ip[9] != 6 && ip[9] != 17) || (ip[6] & 0x3f) || ip[7] || ihl < 20 ||
	    len < 14 + ihl + 4)
		return -1;
	memcpy(in, ip + 12, 8);
	memcpy(in + 8, ip + ihl, 4);
	return rss.table[vnet_rss_hash(in) & (rss.len - 1u)];
}

void vnet_rss_set_peer_kick(bool on)
{
	peer_kick = on;
}

/*
 * QEMU 7.2's software RSS (hw/net/virtio-net.c, used when its eBPF
 * steering program cannot load) leaves a frame stranded when it steers it
 * to a full receiveq. The tap hands the frame to the subqueue tun picked
 * (the arrival queue a); virtio_net_receive_rcu() on a runs
 * virtio_net_process_rss() and calls itself on the target subqueue t,
 * where virtio_net_has_buffers() finds no buffer and returns 0. That 0
 * goes back through a's delivery, so qemu_deliver_packet_iov() sets a's
 * receive_disabled, the frame waits on a's NetQueue (incoming_queue), and
 * tap_send() stops reading a's tap queue (tap_read_poll(false)) until the
 * queued frame is sent. Only a's qemu_flush_queued_packets() releases it,
 * and virtio_net_handle_rx(), the RX doorbell handler, flushes the rung
 * queue's own subqueue: our refill of t rings t and flushes t, while the
 * frame for t waits on a, and a (its ring full of buffers, nothing
 * arriving) never rings. The flow stops after a ring or two
 * (tests/cases/test_mq.py shows it with rss.peer_kick=0, and that a flow
 * whose arrival queue is its target does not stop).
 *
 * So after ringing its own receiveq (the device asks for that kick only
 * when it ran out of buffers there, which is when a frame may be parked
 * elsewhere) a pair rings every other pair's receiveq too: QEMU then
 * flushes those NetQueues, and a parked frame reaches the refilled ring.
 * A doorbell too many is harmless (virtio 1.2 2.9: the device re-reads
 * the ring). Counted in the ringing pair's rx.peer_kicks; the doorbell
 * writes only the queue index, so nothing of the other pair's is
 * touched, and not with NOTIFICATION_DATA (virtq_doorbell_foreign()),
 * which QEMU 7.2 does not offer.
 */
void vnet_rss_kick_peers(struct vnet *vn)
{
	if (!rss.on || !peer_kick || vn->pairs < 2 ||
	    (vn->features & VIRTIO_BIT(VIRTIO_F_NOTIFICATION_DATA)))
		return;
	for (unsigned k = 0; k < vn->pairs; k++) {
		const struct vnet *p = vnet_queue(vn, k);

		if (k == vn->qp || !p)
			continue;
		virtq_doorbell_foreign(&p->rxq);
		vn->rx.peer_kicks++;
	}
}
