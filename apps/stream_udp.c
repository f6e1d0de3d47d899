/*
 * stream_udp.c: the stream server's UDP side, `iperf -u -c` (2.1.8) on
 * stream.port (netperf's UDP_STREAM, the appliance receiving). Every
 * datagram starts with struct UDP_datagram (include/payloads.h: id,
 * tv_sec, tv_usec, the id's upper 32 bits; big endian), which a 2.1.x
 * client follows with its test header (client_hdr_v1 at byte 16: flags,
 * numThreads, ...; client_hdrext's upper flags at byte 48) in every
 * datagram. Ids count from 1; the client ends with FIN datagrams carrying
 * the negated next id (one more per retry) until the server answers one
 * with its report: a zeroed UDP_datagram, then struct server_hdr (bytes,
 * the flow's duration, lost, out of order, datagrams, jitter; 128 bytes
 * like `iperf -s -u`). A flow is one client address and port.
 *
 * Counted as iperf's server counts: an id above the next expected adds
 * the gap to lost; one below it is out of order and fills a gap counted
 * before; the first FIN's id counts as a datagram (so its report says
 * datagrams = that id). Jitter is RFC 1889's: the running mean (gain 1/16)
 * of the change in transit time (arrival on the guest clock minus the
 * client's timestamp) between successive datagrams.
 *
 * Dropped and counted, never a flow: datagrams shorter than 12 bytes
 * (malformed), and every datagram of a flow whose header asks for what
 * this server does not do (HEADER_VERSION1: a UDP dual test; bounce-back;
 * upper flags reverse, full duplex, isochronous), which is refused: a note
 * is printed and its FIN is not answered.
 */
#include <stdio.h>
#include <string.h>
#include "apps/apps.h"
#include "apps/lib/result.h"
#include "apps/stream.h"
#include "kernel/kernel.h"
#include "lwip/udp.h"
#include "net/net.h"

#define MAX_FLOWS   64
#define MIN_LEN     12  /* id, tv_sec, tv_usec: iperf 2.0's UDP_datagram */
#define PEEK_LEN    52  /* UDP_datagram, client_hdr_v1, client_hdrext up to its flags */
#define REPORT_LEN  128 /* UDP_datagram + struct server_hdr, as iperf -s -u sends */
#define JITTER_GAIN 16

struct flow {
	ip_addr_t ip;
	u16_t port;
	bool refused, seq64, fin;
	uint64_t next; /* id expected next */
	uint64_t datagrams, bytes, lost, ooo;
	uint64_t total; /* the first FIN's id */
	int64_t last_transit;
	uint64_t jitter_ns;
	uint64_t first_ns, fin_ns;
	uint8_t report[REPORT_LEN];
};

static struct udp_pcb *pcb;
static struct flow flows[MAX_FLOWS];
static unsigned nflows, accepted, expected;
static uint64_t malformed, refused, last_fin_ns;

static bool has_header(uint32_t flags)
{
	return flags & (IPERF_HEADER_VERSION1 | IPERF_HEADER_EXTEND | IPERF_HEADER_VERSION2);
}

/* What the first datagram of a flow asks for: accepted or refused. */
static void open_flow(struct flow *f, const uint8_t *h, uint32_t len)
{
	uint32_t flags = len >= 20 ? stream_be32(h + 16) : 0;
	uint16_t upper = len >= PEEK_LEN ? (uint16_t)(h[48] << 8 | h[49]) : 0;
	const char *no = NULL;
	f->next = 1;
	if (!has_header(flags))
		return (void)accepted++;
	f->seq64 = flags & IPERF_HEADER_SEQNO64B;
	if (flags & IPERF_HEADER_VERSION1)
		no = "dual test (iperf -u -d/-r)";
	else if (flags & IPERF_HEADER_BOUNCEBACK)
		no = "bounce-back";
	else if (upper & (IPERF_UPPER_REVERSE | IPERF_UPPER_FULLDUPLEX | IPERF_UPPER_ISOCH))
		no = "reverse, full-duplex or isochronous UDP";
	if (no) {
		f->refused = true;
		printf("stream: refusing a UDP flow: %s not supported (flags %08x upper %04x)\n",
		       no, flags, upper);
		return;
	}
	accepted++;
	uint32_t threads = len >= 24 ? stream_be32(h + 20) : 0;
	if (threads > expected)
		expected = threads < MAX_FLOWS ? threads : MAX_FLOWS;
}

static struct flow *flow_for(const ip_addr_t *ip, u16_t port, const uint8_t *h, uint32_t len)
{
	for (unsigned i = 0; i < nflows; i++)
		if (flows[i].port == port && ip_addr_cmp(&flows[i].ip, ip))
			return &flows[i];
	if (nflows == MAX_FLOWS)
		return NULL;
	struct flow *f = &flows[nflows++];
	ip_addr_copy(f->ip, *ip);
	f->port = port;
	open_flow(f, h, len);
	return f;
}

static void data(struct flow *f, uint64_t id, uint32_t len, uint64_t now, const uint8_t *h)
{
	if (f->fin)
		return; /* a straggler after the report: iperf's server has stopped too */
	if (id == f->next)
		f->next++;
	else if (id > f->next) {
		f->lost += id - f->next;
		f->next = id + 1;
	} else if (f->datagrams || id) { /* an iperf 2.0 client counts from 0 */
		f->ooo++;
		f->lost -= f->lost ? 1 : 0;
	}
	uint64_t sent = (uint64_t)stream_be32(h + 4) * 1000000000ull + stream_be32(h + 8) * 1000ull;
	int64_t transit = (int64_t)(now - sent);
	if (f->datagrams) {
		int64_t d = transit - f->last_transit;
		uint64_t ad = (uint64_t)(d < 0 ? -d : d);
		f->jitter_ns = ad >= f->jitter_ns
		                   ? f->jitter_ns + (ad - f->jitter_ns) / JITTER_GAIN
		                   : f->jitter_ns - (f->jitter_ns - ad) / JITTER_GAIN;
	} else {
		f->first_ns = now;
	}
	f->last_transit = transit;
	f->datagrams++;
	f->bytes += len;
	if (!stream_st.peer_msg)
		stream_st.peer_msg = len;
	stream_st.last_data_ns = now;
	if (stream_st.measuring) {
		stream_st.rx_bytes += len;
		stream_st.rx_datagrams++;
	}
}

static void put64(uint8_t *hi, uint8_t *lo, uint64_t v)
{
	stream_put_be32(hi, (uint32_t)(v >> 32));
	stream_put_be32(lo, (uint32_t)v);
}

/* struct server_hdr: base (flags, total_len1/2, stop_sec/usec, error_cnt,
 * outorder_cnt, datagrams, jitter1/2) at 16, extend2 (the counts' upper
 * halves) at 116; the transit extension stays zero (no
 * SERVER_HEADER_EXTEND). */
static void make_report(struct flow *f, uint32_t fin_len)
{
	uint8_t *r = f->report;
	uint64_t bytes = f->bytes + fin_len, dur = f->datagrams ? f->fin_ns - f->first_ns : 0;
	memset(r, 0, REPORT_LEN);
	stream_put_be32(r + 16, IPERF_HEADER_VERSION1 | IPERF_HEADER_SEQNO64B);
	put64(r + 20, r + 24, bytes);
	stream_put_be32(r + 28, (uint32_t)(dur / 1000000000ull));
	stream_put_be32(r + 32, (uint32_t)(dur % 1000000000ull / 1000));
	put64(r + 116, r + 36, f->lost);
	put64(r + 120, r + 40, f->ooo);
	put64(r + 124, r + 44, f->total);
	stream_put_be32(r + 48, (uint32_t)(f->jitter_ns / 1000000000ull));
	stream_put_be32(r + 52, (uint32_t)(f->jitter_ns % 1000000000ull / 1000));
}

static void fin(struct flow *f, uint64_t id, uint32_t len, uint64_t now, const ip_addr_t *addr,
                u16_t port)
{
	if (!f->fin) {
		f->fin = true;
		f->fin_ns = last_fin_ns = now;
		if (id > f->next)
			f->lost += id - f->next;
		f->total = id;
		make_report(f, len);
	}
	struct pbuf *q = pbuf_alloc(PBUF_TRANSPORT, REPORT_LEN, PBUF_RAM);
	if (!q)
		return; /* the client's next FIN asks again */
	memcpy(q->payload, f->report, REPORT_LEN);
	udp_sendto(pcb, q, addr, port);
	pbuf_free(q);
}

static void on_udp(void *arg, struct udp_pcb *upcb, struct pbuf *p, const ip_addr_t *addr,
                   u16_t port)
{
	uint8_t h[PEEK_LEN] = {0};
	uint32_t len = p->tot_len;
	uint64_t now = clock_ns();
	(void)arg;
	(void)upcb;
	if (len < MIN_LEN) {
		malformed++;
		pbuf_free(p);
		return;
	}
	pbuf_copy_partial(p, h, (u16_t)(len < PEEK_LEN ? len : PEEK_LEN), 0);
	pbuf_free(p);
	struct flow *f = flow_for(addr, port, h, len);
	if (!f || f->refused) {
		refused++;
		return;
	}
	uint32_t lo = stream_be32(h), hi = len >= 16 ? stream_be32(h + 12) : 0;
	int64_t id = f->seq64 ? (int64_t)((uint64_t)hi << 32 | lo) : (int32_t)lo;
	if (id < 0)
		fin(f, (uint64_t) - (id + 1) + 1, len, now, addr, port);
	else
		data(f, (uint64_t)id, len, now, h);
}

void stream_udp_listen(void)
{
	pcb = udp_new();
	if (!pcb || udp_bind(pcb, IP_ANY_TYPE, stream_cfg.port) != ERR_OK)
		kernel_error("stream", "cannot listen on UDP port %u", stream_cfg.port);
	udp_recv(pcb, on_udp, NULL);
}

unsigned stream_udp_started(void)
{
	return accepted;
}

unsigned stream_udp_unfinished(void)
{
	unsigned n = 0;
	for (unsigned i = 0; i < nflows; i++)
		n += !flows[i].refused && !flows[i].fin;
	return n;
}

bool stream_udp_finished(uint64_t linger_ns)
{
	return accepted && accepted >= expected && !stream_udp_unfinished() &&
	       clock_ns() - last_fin_ns >= linger_ns;
}

const char *stream_udp_drops(void)
{
	static char s[80];
	s[0] = 0;
	if (malformed || refused)
		snprintf(s, sizeof(s), " (%lu malformed, %lu refused UDP datagrams)", malformed,
		         refused);
	return s;
}

/* The whole flows' figures, as the reports sent (FINs excluded); jitter:
 * the largest of the flows'. */
void stream_udp_result(void)
{
	uint64_t dg = 0, bytes = 0, lost = 0, ooo = 0, jitter = 0, fins = 0;
	for (unsigned i = 0; i < nflows; i++) {
		const struct flow *f = &flows[i];
		if (f->refused)
			continue;
		dg += f->datagrams;
		bytes += f->bytes;
		lost += f->lost;
		ooo += f->ooo;
		fins += f->fin;
		if (f->jitter_ns > jitter)
			jitter = f->jitter_ns;
	}
	result_u64("udp_datagrams", dg);
	result_u64("udp_bytes", bytes);
	result_u64("udp_lost", lost);
	result_u64("udp_out_of_order", ooo);
	result_ratio("udp_jitter_us", jitter, 1000);
	result_u64("udp_fins", fins);
	result_u64("udp_malformed", malformed);
	result_u64("udp_refused", refused);
}

void stream_udp_close(void)
{
	udp_remove(pcb);
	pcb = NULL;
}
