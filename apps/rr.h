/*
 * rr.h: request/response benchmark (app=rr), shared by rr.c (keys, run,
 * result), rr_client.c and rr_server.c.
 *
 * Wire format "sockperf" (both sizes >= SP_HDR_LEN, the default): every
 * message starts with sockperf's header (sockperf 3.7 src/message.h,
 * class MsgHeader, packed):
 *
 *	offset 0  u64 sequence number   big endian
 *	offset 8  u16 flags             CLIENT 1, PONG (reply wanted) 2, WARMUP 4
 *	offset 10 u32 length            of the whole message, header included
 *
 * A server answers a message that has CLIENT and PONG and not WARMUP with
 * the same message, CLIENT cleared (sockperf src/server.h,
 * server_receive_then_send); over TCP the length field frames messages.
 * Wire format "raw" (a size below SP_HDR_LEN, e.g. netperf's 1/1): fixed
 * req-byte requests and resp-byte responses, no header; only the
 * appliance's own client and server speak it.
 */
#ifndef VNETLAB_RR_H
#define VNETLAB_RR_H

#include <stdbool.h>
#include <stdint.h>
#include "apps/lib/hist.h"
#include "lwip/ip_addr.h"

#define SP_HDR_LEN   14
#define SP_F_CLIENT  1u
#define SP_F_PONG    2u
#define SP_F_WARMUP  4u
#define RR_UDP_MAX   1472  /* one Ethernet frame: 1500 - IPv4 - UDP headers */
#define RR_TCP_MAX   32768 /* a whole request must fit in half of lwIP's TCP window */
#define RR_BURST_MAX 64    /* outstanding requests per instance (power of two) */
#define RR_INSTANCES 128

struct sp_hdr {
	uint64_t seq;
	uint16_t flags;
	uint32_t len;
};

struct rr_config {
	bool udp, server;
	bool sockperf;   /* framing: sockperf header, or raw fixed sizes */
	bool resp_given; /* server: answer rr.resp bytes instead of echoing */
	uint32_t req, resp;
	unsigned instances, burst;
	uint64_t seconds, warmup;
	ip_addr_t peer;
	uint16_t port;
	uint64_t timeout_s; /* client: longest silence from the peer; server: wait for a client */
	uint64_t idle_s;    /* server: end this long after the last request */
	uint64_t loss_ms;   /* UDP client: a request unanswered this long is lost */
};

/* What the measured interval saw. */
struct rr_stats {
	bool measuring;
	struct hist lat;
	uint64_t transactions; /* request answered (client: reply received) */
	uint64_t messages;     /* server: requests received, answered or not */
	uint64_t bytes;        /* payload both ways */
	uint64_t lost;         /* client: requests given up on (UDP loss) */
	uint64_t late;         /* client: replies to requests given up on or never sent */
	uint64_t errors;       /* protocol errors (malformed or unexpected messages) */
	uint64_t last_txn_ns;
	uint32_t last_req, last_resp; /* sizes actually seen (server: both; client: resp) */
	unsigned peers;               /* server: connections or UDP endpoints seen */
};

extern struct rr_config rr_cfg;
extern struct rr_stats rr_st;
extern uint8_t rr_filler[RR_TCP_MAX]; /* message bodies: iperf's '0'..'9' pattern */

/* rr.c */
void rr_sp_encode(uint8_t *b, const struct sp_hdr *h);
void rr_sp_decode(const uint8_t *b, struct sp_hdr *h);
void rr_count(uint64_t latency_ns, uint64_t bytes); /* one transaction, if measuring */

/* Start counting (counter snapshot, clock); stop counting, the measured
 * interval ending at end_ns (the server's last request, the client's now). */
void rr_measure_begin(void);
void rr_measure_end(uint64_t end_ns);

/* rr_client.c, rr_server.c: set up, run warm-up and the measured interval
 * (bracketed by rr_measure_begin/end), tear down. ERROR lines exit. */
void rr_client_run(void);
void rr_server_run(void);

#endif
