/*
 * ctl.c: a UDP control port for serving apps (echo, the benchmark
 * servers). A request is one datagram "COMMAND TOKEN". "stop" makes the
 * app finish cleanly: print its result and counters, then exit 0. "pools"
 * prints a POOLS line now (what is in use: RX buffers, TX slots, lwIP
 * pools, heap), for soak runs that compare a run's end with its warm-up.
 * "state" prints where both rings stand, each TCP connection's send and
 * receive state and the POOLS line (net_print_state(): what a host peer
 * that sees no progress asks for, so a stall's console says why). A known
 * command is answered "ok\n", an unknown one with the right token "?".
 *
 * Anyone who can reach the appliance can send a datagram, so every
 * request must carry the shared secret: ctl.token=T on the command line
 * (the harness makes one per run), or, without it, one the appliance makes
 * up at boot and prints on the console, so that only whoever reads the
 * console can use the port. A request without the token or with a wrong
 * one is counted (CTL line: denied) and ignored: no reply, so the port is
 * no oracle for guesses and amplifies nothing. ctl=off opens no port at
 * all; a serving app then ends only at its time limit.
 * docs/network-exposure.md lists what the appliance exposes.
 */
#include <stdio.h>
#include <string.h>
#include "apps/lib/lib.h"
#include "kernel/kernel.h"
#include "lwip/udp.h"
#include "net/inst.h"
#include "net/net.h"

#define TOKEN_MIN 16 /* a guessed token must not be a practical attack */
#define TOKEN_MAX 64

static bool enabled = true, started, stop;
static char token[TOKEN_MAX + 1];
static bool token_made; /* no ctl.token=: made up here, printed on the console */
static uint64_t requests, ok, unknown, denied;

void ctl_configure(void)
{
	static const char *const on_off[] = {"on", "off", NULL};
	enabled = cmdline_choice("ctl", on_off, 0) == 0;
	cmdline_only_if("ctl.token", enabled, "ctl=on");
	if (!enabled)
		return;
	const char *t = cmdline_str("ctl.token", NULL);
	if (!t) {
		/* LWIP_RAND: RDRAND when the CPU has it, else TSC-seeded xorshift;
		 * a harness that wants a real secret passes ctl.token=. */
		for (int i = 0; i < 4; i++)
			snprintf(token + 8 * i, 9, "%08x", (unsigned)LWIP_RAND());
		/* mq=N: every copy takes copy 0's, so a request is accepted on
		 * whichever queue it arrives. */
		memcpy(token, net_inst_token(token), sizeof(token) - 1);
		token_made = true;
		return;
	}
	size_t n = strlen(t);
	if (n < TOKEN_MIN || n > TOKEN_MAX ||
	    strspn(t, "abcdefghijklmnopqrstuvwxyz"
	              "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") != n)
		/* (the value is a secret: not echoed on the console) */
		kernel_usage_error("cmdline",
		                   "bad value for key 'ctl.token' (expected %d..%d characters of "
		                   "A-Z a-z 0-9 . _ -, got %zu)",
		                   TOKEN_MIN, TOKEN_MAX, n);
	memcpy(token, t, n + 1);
}

/* Compares every byte whatever differs first: how long a wrong guess
 * takes says nothing about how much of it was right. */
static bool token_ok(const char *s, size_t n)
{
	size_t want = strlen(token);
	unsigned diff = n != want;
	for (size_t i = 0; i < want; i++)
		diff |= (unsigned char)token[i] ^ (unsigned char)(i < n ? s[i] : 0);
	return !diff;
}

static void ctl_recv(void *arg, struct udp_pcb *pcb, struct pbuf *p, const ip_addr_t *addr,
                     u16_t port)
{
	(void)arg;
	char buf[16 + TOKEN_MAX + 2] = "";
	u16_t n = pbuf_copy_partial(p, buf, sizeof(buf) - 1, 0);
	bool too_long = p->tot_len > n;
	pbuf_free(p);
	requests++;
	while (n && (buf[n - 1] == '\n' || buf[n - 1] == '\r')) /* echo | nc -u */
		buf[--n] = 0;
	char *sp = memchr(buf, ' ', n);
	if (too_long || !sp || !token_ok(sp + 1, n - (size_t)(sp + 1 - buf))) {
		if (!denied++)
			printf(
			    "ctl: request from %s:%u without the right token ignored (counted: CTL "
			    "denied)\n",
			    ipaddr_ntoa(addr), port);
		return;
	}
	*sp = 0;
	bool is_stop = !strcmp(buf, "stop"), is_pools = !strcmp(buf, "pools");
	bool is_state = !strcmp(buf, "state"), known = is_stop || is_pools || is_state;
	ok += known;
	unknown += !known;
	stop |= is_stop;
	if (is_stop)
		net_inst_stop(); /* mq=N: the request reached one copy; all stop */
	if (is_pools)
		vnetif_print_pool_line(net_vnet());
	if (is_state)
		net_print_state();
	struct pbuf *r = pbuf_alloc(PBUF_TRANSPORT, known ? 3 : 1, PBUF_RAM);
	if (r) {
		memcpy(r->payload, known ? "ok\n" : "?", r->len);
		udp_sendto(pcb, r, addr, port);
		pbuf_free(r);
	}
}

void ctl_start(void)
{
	if (!enabled)
		return;
	struct udp_pcb *pcb = udp_new();
	if (!pcb || udp_bind(pcb, IP_ANY_TYPE, CTL_PORT) != ERR_OK)
		kernel_error("ctl", "cannot bind UDP port %d", CTL_PORT);
	udp_recv(pcb, ctl_recv, NULL);
	started = true;
	if (token_made && !net_inst_index()) /* mq=N: once, by copy 0 */
		printf("ctl udp=%d token=%s (made up: no ctl.token= given)\n", CTL_PORT, token);
}

const char *ctl_label(void)
{
	return enabled ? "udp:" CTL_PORT_STR : "off";
}

bool ctl_stop_requested(void)
{
	return stop || net_inst_stopping();
}

bool ctl_stop_or_idle(uint64_t last_ns, uint64_t idle_s)
{
	return ctl_stop_requested() || clock_ns() - last_ns > idle_s * 1000000000ull;
}

void ctl_print_counters(void)
{
	if (started)
		printf("CTL "
		       "{\"port\":%d,\"requests\":%lu,\"ok\":%lu,\"unknown\":%lu,\"denied\":%lu}\n",
		       CTL_PORT, requests, ok, unknown, denied);
}
