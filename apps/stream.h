/*
 * stream.h: bulk TCP benchmark (app=stream), shared by stream.c (keys,
 * iperf header, data path, result), stream_client.c and stream_server.c.
 *
 * Wire compatible with iperf 2.1.8: a connection starts with the client's
 * test header (include/payloads.h: struct client_hdr_v1, 24 bytes, then
 * struct client_hdrext, 36 bytes, all big endian), whose first word says
 * how long it is (HEADER_LEN_BIT, length << 1 in HEADER_LEN_MASK). With
 * HEADER_VERSION2 and HEADER_REVERSE in the extension's upper flags
 * (`iperf -c -R`) the server sends on the same connection for the time
 * (negative mAmount, 10 ms units) or bytes (positive) asked; otherwise the
 * client sends until it closes. Data is iperf's pattern: byte r of each
 * write is '0' + r % 10, iperf's client overwriting the start of every
 * write with its header area (STREAM_HDR_AREA bytes).
 */
#ifndef VNETLAB_STREAM_H
#define VNETLAB_STREAM_H

#include <stdbool.h>
#include <stdint.h>
#include "lwip/ip_addr.h"

#define STREAM_MSG_MAX   65535
#define STREAM_INSTANCES 32
#define STREAM_HDR_LEN   60     /* client_hdr_v1 + client_hdrext, as iperf 2.1.8 sends it */
#define STREAM_HDR_MAX   400    /* longest header accepted: HEADER_LEN_MASK + a permit key */
#define STREAM_HDR_AREA  244    /* sizeof(struct client_tcp_testhdr): iperf zeroes it per write */
#define STREAM_IPERF_BUF 131072 /* iperf 2's default TCP write length (-l) */

/* iperf 2.1.8 include/payloads.h */
#define IPERF_HEADER_VERSION1   0x80000000u
#define IPERF_HEADER_EXTEND     0x40000000u
#define IPERF_HEADER_VERSION2   0x04000000u
#define IPERF_HEADER_KEYCHECK   0x10000000u
#define IPERF_HEADER_LEN_BIT    0x00010000u
#define IPERF_HEADER_LEN_MASK   0x000001feu
#define IPERF_HEADER_SEQNO64B   0x08000000u
#define IPERF_HEADER_BOUNCEBACK 0x00800000u
#define IPERF_RUN_NOW           0x00000001u
#define IPERF_UPPER_ISOCH       0x0001u
#define IPERF_UPPER_REVERSE     0x0400u
#define IPERF_UPPER_FULLDUPLEX  0x0800u
#define IPERF_VERSION_U         0x00020001u /* 2.1.8 as IPERF_VERSION_MAJORHEX/MINORHEX */
#define IPERF_VERSION_L         0x00080003u
#define IPERF_CLIENTHDRACK      2
#define IPERF_ACK_LEN           28 /* struct client_hdr_ack without timestamps */

struct stream_config {
	bool server;
	bool maerts; /* client: the appliance receives (iperf -R semantics) */
	bool check;
	uint32_t msg;
	unsigned instances;
	uint64_t seconds, warmup;
	ip_addr_t peer;
	uint16_t port;
	uint64_t timeout_s; /* client: longest stall; server: wait for a client */
	uint64_t idle_s;    /* server: end this long after the last data */
};

/* One TCP connection's data path, either direction. */
struct sconn {
	struct tcp_pcb *pcb;
	bool up;                /* connected (client) or header received (server) */
	bool sending;           /* we send on this connection */
	uint64_t send_until_ns; /* stop sending then (0: when told) */
	uint64_t send_left;     /* bytes still to send (iperf -n), UINT64_MAX: no limit */
	uint32_t rec_off;       /* offset in the record being written */
	uint32_t hdr_unacked;   /* bytes of our header the next acks cover first */
	/* receiving */
	uint32_t rec_len;             /* record length for the pattern check */
	uint64_t rx_data;             /* data bytes received (header excluded) */
	uint8_t ref[STREAM_HDR_AREA]; /* start of the first record, to compare the rest with */
};

struct stream_stats {
	bool measuring;
	uint64_t tx_bytes, rx_bytes; /* data acknowledged by the peer / received */
	uint64_t rx_datagrams;       /* UDP: data datagrams received */
	uint64_t last_data_ns;
	uint64_t check_errors, first_bad; /* pattern check: bytes wrong, offset of the first */
	uint32_t peer_msg;                /* server: the client's write length, if it said */
	unsigned peers;
	char dual; /* server: 'd' (iperf -d) or 'r' (-r) once a client asked for one */
	/* first and last data of each direction inside the measured interval */
	uint64_t rx_first_ns, rx_last_ns, tx_first_ns, tx_last_ns;
};

extern struct stream_config stream_cfg;
extern struct stream_stats stream_st;

/* stream.c */
uint32_t stream_be32(const uint8_t *b);
void stream_put_be32(uint8_t *b, uint32_t v);
void stream_send(struct sconn *s);                                   /* write what fits */
void stream_acked(struct sconn *s, uint32_t len);                    /* sent callback */
void stream_received(struct sconn *s, const uint8_t *d, uint32_t n); /* data bytes */
void stream_measure_begin(void);
void stream_measure_end(uint64_t end_ns);

/* stream_client.c, stream_server.c: set up, warm up, measure (bracketed by
 * stream_measure_begin/end), tear down. ERROR lines exit. */
void stream_client_run(void);
void stream_server_run(void);

/* stream_back.c: iperf 2's dual (-d) and tradeoff (-r) tests, where the
 * server connects back to the client's listening port and sends for the
 * time (amount < 0, 10 ms units) or bytes it asked. */
void stream_back_start(const ip_addr_t *ip, uint16_t port, int32_t amount);
unsigned stream_back_open(void); /* back connections connecting or sending */
void stream_back_tick(void);     /* resume senders whose time ran out */

/* stream_udp.c: iperf 2's UDP test (`iperf -u -c`) on stream.port: the
 * client's datagrams counted per flow, its FIN answered with the server
 * report. */
void stream_udp_listen(void);
unsigned stream_udp_started(void);            /* flows accepted so far */
bool stream_udp_finished(uint64_t linger_ns); /* every flow sent its FIN that long ago */
unsigned stream_udp_unfinished(void);         /* accepted flows without a FIN yet */
const char *stream_udp_drops(void);           /* "" or " (N malformed, M refused datagrams)" */
void stream_udp_result(void);                 /* its udp_* RESULT keys */
void stream_udp_close(void);

#endif
