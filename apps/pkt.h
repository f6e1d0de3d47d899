/*
 * pkt.h: the packet-level benchmark (app=pkt), frames straight on the
 * driver with no IP stack; shared by pkt.c (keys, the burst loops, the
 * result) and pkt_frame.c (what a frame holds).
 *
 * A generated frame (txonly, and what a host generator sends the receive
 * modes) is Ethernet + IPv4 (no options) + UDP, UDP checksum 0 as DPDK
 * testpmd's txonly sends it, and a payload that begins
 *
 *	offset 42  "VNPK"               magic
 *	offset 46  u64 sequence number  big endian, 0 for the first frame
 *
 * then zeros to the end. Frame sizes are RFC 2544's, the 4-byte FCS
 * included (pkt.size 64..1518; imix cycles through pkt_imix): the device
 * gets size - 4 bytes and adds the FCS on a real wire, so pkt.size=1518 is
 * a full 1500-byte IP packet and 64 the 60-byte minimum. Frame counts and
 * the app's bytes and Mbit/s use these sizes; the driver's tx_bytes and
 * rx_bytes have no FCS. The receive modes count a sequence gap for every
 * number skipped and a reorder for every number below the one expected.
 *
 * A trial marker (the NDR search's, host/bench/ndr.py) is the same frame
 * with "VNPT" and the trial's number: the receive modes then print one
 * PKT_TRIAL line with what they counted since the previous marker, expect
 * sequence number 0 next, and neither forward nor count it as a frame.
 */
#ifndef VNETLAB_PKT_H
#define VNETLAB_PKT_H

#include <stdbool.h>
#include <stdint.h>

#define PKT_HDR_LEN    42 /* Ethernet 14 + IPv4 20 + UDP 8 */
#define PKT_SEQ_OFF    46
#define PKT_FCS        4 /* counted in a frame's size, never handed to the device */
#define PKT_MIN        64
#define PKT_MAX        1518
#define PKT_IMIX_N     12 /* 7 x 64, 4 x 570, 1 x 1518 (the simple IMIX, 7:4:1) */
#define PKT_SPORT_BASE 1024

enum pkt_mode { PKT_TXONLY, PKT_RXONLY, PKT_MACSWAP, PKT_REFLECT, PKT_RR };

/* One flow's addresses for the generator. */
struct pkt_addrs {
	uint8_t dmac[6], smac[6];
	uint8_t src[4], dst[4];
	uint16_t dport;
};

/* What the receive side saw of the generator's numbering. */
struct pkt_seq {
	uint64_t next;    /* the number expected next */
	uint64_t frames;  /* frames that carried one */
	uint64_t gaps;    /* numbers skipped */
	uint64_t reorder; /* numbers below the one expected (late or duplicated) */
};

/* pkt_frame.c */
extern const uint16_t pkt_imix[PKT_IMIX_N];
/* Write the headers of a frame of len bytes (its size less the FCS) of flow
 * sport carrying seq into f (the rest of f is left as it is: zeros from the
 * caller). */
void pkt_frame_build(uint8_t *f, uint32_t len, const struct pkt_addrs *a, uint16_t sport,
                     uint64_t seq);
/* Count f's sequence number into s if it carries one; false if not. */
bool pkt_seq_count(struct pkt_seq *s, const uint8_t *f, uint32_t len);
/* f's sequence number in *seq, if it carries one. */
bool pkt_seq_of(const uint8_t *f, uint32_t len, uint64_t *seq);
/* Is f a trial marker? Its trial number in *trial. */
bool pkt_is_marker(const uint8_t *f, uint32_t len, uint64_t *trial);
void pkt_macswap(uint8_t *f);
/* reflect: swap Ethernet, IPv4 and UDP source and destination so the
 * sender's own socket receives it; false (frame untouched) unless it is
 * UDP/IPv4. */
bool pkt_reflect(uint8_t *f, uint32_t len);
/* The IPv4 header length of f if it is a whole UDP/IPv4 frame (Ethernet,
 * IPv4, UDP header), else 0. */
unsigned pkt_udp4_ihl(const uint8_t *f, uint32_t len);

#endif
