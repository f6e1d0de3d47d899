/*
 * tcpcheck.c: an outgoing TCP connection with end-to-end verification,
 * for testing the stack against a host listener (e.g. over slirp, where
 * the host is reachable but cannot reach us).
 *
 * The appliance connects to tcpcheck.peer:tcpcheck.port, sends
 * tcpcheck.bytes bytes of a deterministic pattern (pattern_byte below; the
 * host test computes the same), and expects the peer to echo them back. It
 * verifies every returned byte, then prints a RESULT line and exits 0 only
 * if all bytes came back intact within tcpcheck.seconds.
 */
#include <stdio.h>
#include "apps/apps.h"
#include "kernel/kernel.h"
#include "lwip/ip_addr.h"
#include "lwip/tcp.h"
#include "net/net.h"

static ip_addr_t peer;
static uint64_t port, total, seconds;
static uint64_t sent, received, mismatches, first_bad = UINT64_MAX;
static bool connected, failed;
static const char *fail_reason = "";

/* Byte i of the stream: a 32-bit LCG of the byte's 4 KiB block, mixed with
 * the offset, so shifted or repeated blocks never verify by accident. */
static uint8_t pattern_byte(uint64_t i)
{
	uint32_t x = (uint32_t)(i >> 12) * 1103515245u + 12345u;
	return (uint8_t)((x >> 16) ^ (uint8_t)i);
}

void tcpcheck_configure(void)
{
	net_configure();
	const char *p = cmdline_str("tcpcheck.peer", "10.0.2.2");
	if (!ipaddr_aton(p, &peer))
		kernel_usage_error(
		    "cmdline", "bad value '%s' for key 'tcpcheck.peer' (not an IPv4 address)", p);
	port = cmdline_u64("tcpcheck.port", 5001, 1, 65535);
	total = cmdline_u64("tcpcheck.bytes", 1 << 20, 1, 1ull << 36);
	seconds = cmdline_u64("tcpcheck.seconds", 30, 1, 3600);
}

static void push(struct tcp_pcb *pcb)
{
	uint8_t buf[1024];
	while (sent < total) {
		uint32_t n = tcp_sndbuf(pcb);
		if (n > sizeof(buf))
			n = sizeof(buf);
		if (n > total - sent)
			n = (uint32_t)(total - sent);
		if (!n)
			break;
		for (uint32_t i = 0; i < n; i++)
			buf[i] = pattern_byte(sent + i);
		if (tcp_write(pcb, buf, (u16_t)n, TCP_WRITE_FLAG_COPY) != ERR_OK)
			break;
		sent += n;
	}
	tcp_output(pcb);
}

static err_t on_recv(void *arg, struct tcp_pcb *pcb, struct pbuf *p, err_t err)
{
	(void)arg;
	if (!p || err != ERR_OK) {
		if (p)
			pbuf_free(p);
		if (received < total) {
			failed = true;
			fail_reason = "peer closed before all data came back";
		}
		return ERR_OK;
	}
	for (struct pbuf *q = p; q; q = q->next) {
		const uint8_t *d = q->payload;
		for (uint16_t i = 0; i < q->len; i++, received++) {
			if (d[i] != pattern_byte(received)) {
				if (!mismatches++)
					first_bad = received;
			}
		}
	}
	tcp_recved(pcb, p->tot_len);
	pbuf_free(p);
	return ERR_OK;
}

static err_t on_sent(void *arg, struct tcp_pcb *pcb, u16_t len)
{
	(void)arg;
	(void)len;
	push(pcb);
	return ERR_OK;
}

static void on_err(void *arg, err_t err)
{
	(void)arg;
	failed = true;
	fail_reason = err == ERR_RST ? "connection reset" : "connection failed or aborted";
}

static err_t on_connected(void *arg, struct tcp_pcb *pcb, err_t err)
{
	(void)arg;
	(void)err;
	offload_tcp_established(pcb);
	connected = true;
	push(pcb);
	return ERR_OK;
}

static bool finished(void *unused)
{
	(void)unused;
	return failed || received >= total;
}

int tcpcheck_main(void)
{
	net_up();
	struct tcp_pcb *pcb = tcp_new();
	if (!pcb)
		kernel_error("tcpcheck", "tcp_new failed");
	tcp_nagle_disable(pcb);
	tcpconn_attach(pcb, NULL, on_recv, on_sent, on_err);
	if (tcp_connect(pcb, &peer, (u16_t)port, on_connected) != ERR_OK)
		kernel_error("tcpcheck", "tcp_connect to %s:%lu failed", ipaddr_ntoa(&peer), port);
	uint64_t t0 = clock_ns();
	int r = net_run(finished, NULL, seconds * 1000000000ull, NULL);
	uint64_t ns = clock_ns() - t0;
	printf("RESULT {\"test\":\"tcpcheck\",\"peer\":\"%s:%lu\",\"bytes\":%lu,\"sent\":%lu,"
	       "\"received\":%lu,\"mismatches\":%lu,\"elapsed_ms\":%lu}\n",
	       ipaddr_ntoa(&peer), port, total, sent, received, mismatches, ns / 1000000);
	net_print_counters();
	if (!failed && r < 0)
		kernel_error("tcpcheck", "timeout after %lu s (%s, %lu of %lu bytes back)", seconds,
		             connected ? "connected" : "never connected", received, total);
	if (failed)
		kernel_error("tcpcheck", "%s after %lu of %lu bytes back", fail_reason, received,
		             total);
	if (mismatches)
		kernel_error("tcpcheck", "%lu corrupted bytes, first at offset %lu", mismatches,
		             first_bad);
	tcp_close(pcb);
	return EXIT_OK;
}
