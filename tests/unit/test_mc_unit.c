/*
 * test_mc_unit.c: host unit test of app=memcached's protocol parser and
 * store (apps/memcached_proto.c, apps/memcached_store.c) with a fake clock
 * and an output sink whose room the test controls. Built and run by
 * tests/cases/test_memcached.py with AddressSanitizer and UBSan:
 *
 *   - a scripted conversation fed whole, byte by byte and in random pieces
 *     gives the same replies (the parser is a stream parser);
 *   - expiry, touch, negative exptimes and flush_all with a delay follow
 *     the fake clock;
 *   - a 1 MiB value through a sink that takes 1000 bytes at a time comes
 *     out whole, and input is not taken while a reply waits for room;
 *   - incr wraps at 2^64, decr stops at 0;
 *   - an item a reply is still sending survives eviction pressure.
 *
 * Prints "mc_unit: N checks, 0 failed" or what it expected and saw.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "apps/memcached.h"
#include "kernel/kernel.h"

static uint64_t now_ns = 5000000000ull;
static int checks, failed;

uint64_t clock_ns(void)
{
	return now_ns;
}

struct sink {
	char *buf;
	size_t len, cap;
	uint32_t room; /* bytes the "send buffer" takes before draining */
	uint32_t used;
};

static struct sink out;

static bool s_room(struct mc_conn *c, uint32_t n)
{
	(void)c;
	return out.room - out.used >= n;
}

static void put(const void *p, uint32_t n)
{
	if (out.len + n + 1 > out.cap) {
		out.cap = (out.len + n + 1) * 2;
		out.buf = realloc(out.buf, out.cap);
	}
	memcpy(out.buf + out.len, p, n);
	out.len += n;
	out.buf[out.len] = 0;
	out.used += n;
}

static bool s_write(struct mc_conn *c, const void *p, uint32_t n)
{
	(void)c;
	put(p, n);
	return true;
}

static uint32_t s_write_some(struct mc_conn *c, const void *p, uint32_t n)
{
	(void)c;
	uint32_t k = out.room - out.used;
	if (k > n)
		k = n;
	put(p, k);
	return k;
}

static const struct mc_out sink_out = {s_room, s_write, s_write_some};

static void check(bool ok, const char *fmt, ...)
{
	checks++;
	if (ok)
		return;
	failed++;
	va_list ap;
	va_start(ap, fmt);
	printf("mc_unit FAIL: ");
	vprintf(fmt, ap);
	printf("\n");
	va_end(ap);
}

static void reset_store(size_t mib)
{
	static void *mem;
	static size_t have;
	size_t bytes = mib << 20;
	if (have < bytes) {
		free(mem);
		mem = malloc(bytes);
		have = bytes;
	}
	if (!mc_store_init(mem, bytes)) {
		printf("mc_unit FAIL: mc_store_init(%zu MiB)\n", mib);
		exit(1);
	}
}

static void sink_reset(uint32_t room)
{
	out.len = 0;
	out.used = 0;
	out.room = room;
	if (out.buf)
		out.buf[0] = 0;
}

/* Feed everything, draining the sink whenever the parser waits for room. */
static void feed_all(struct mc_conn *c, const char *p, size_t n, size_t piece)
{
	size_t i = 0;
	int stuck = 0;
	while (i < n && stuck < 1000000) {
		size_t k = piece ? (n - i < piece ? n - i : piece) : n - i;
		size_t took = mc_conn_feed(c, p + i, k);
		i += took;
		if (took < k) {
			if (c->state == MC_S_QUIT)
				return;
			out.used = 0; /* the peer read everything: room again */
			mc_conn_resume(c);
			stuck++;
		}
	}
	for (int j = 0; j < 100000 && (c->state == MC_S_SENDING || c->ready); j++) {
		out.used = 0;
		if (mc_conn_resume(c))
			mc_conn_feed(c, "", 0);
	}
}

static const char script[] = "set a 5 0 3\r\nabc\r\n"
                             "get a\r\n"
                             "add a 0 0 1\r\nx\r\n"
                             "add b 0 0 2 noreply\r\nbb\r\n"
                             "gets a b nothere\r\n"
                             "append a 0 0 2\r\nde\r\n"
                             "prepend a 0 0 2\r\nzz\r\n"
                             "get a\r\n"
                             "replace c 0 0 1\r\nc\r\n"
                             "cas a 0 0 1 999\r\nq\r\n"
                             "set n 0 0 20\r\n18446744073709551615\r\n"
                             "incr n 1\r\n"
                             "decr n 5\r\n"
                             "set m 0 0 1\r\n3\r\n"
                             "decr m 10\r\n"
                             "incr a 1\r\n"
                             "delete b\r\n"
                             "delete b\r\n"
                             "touch a 100\r\n"
                             "touch nothere 100\r\n"
                             "bogus command\r\n"
                             "set k 0 0 3\r\nabcde\r\n"
                             "get k\r\n"
                             "verbosity 1\r\n"
                             "version\r\n";

static const char expected[] = "STORED\r\n"
                               "VALUE a 5 3\r\nabc\r\nEND\r\n"
                               "NOT_STORED\r\n"
                               "VALUE a 5 3 1\r\nabc\r\nVALUE b 0 2 2\r\nbb\r\nEND\r\n"
                               "STORED\r\n"
                               "STORED\r\n"
                               "VALUE a 5 7\r\nzzabcde\r\nEND\r\n"
                               "NOT_STORED\r\n"
                               "EXISTS\r\n"
                               "STORED\r\n"
                               "0\r\n"
                               "0\r\n"
                               "STORED\r\n"
                               "0\r\n"
                               "CLIENT_ERROR cannot increment or decrement non-numeric value\r\n"
                               "DELETED\r\n"
                               "NOT_FOUND\r\n"
                               "TOUCHED\r\n"
                               "NOT_FOUND\r\n"
                               "ERROR\r\n"
                               "CLIENT_ERROR bad data chunk\r\nERROR\r\n"
                               "END\r\n"
                               "OK\r\n"
                               "VERSION " MC_VERSION "\r\n";

static void test_pieces(void)
{
	static struct mc_conn c;
	size_t pieces[] = {0, 1, 2, 3, 7, 13, 64};
	for (size_t i = 0; i < ARRAY_SIZE(pieces); i++) {
		reset_store(8);
		sink_reset(1 << 20);
		mc_conn_init(&c, &sink_out, NULL);
		feed_all(&c, script, sizeof(script) - 1, pieces[i]);
		check(out.len == sizeof(expected) - 1 && !memcmp(out.buf, expected, out.len),
		      "script in pieces of %zu: expected\n%s\nsaw\n%s", pieces[i], expected,
		      out.buf ? out.buf : "");
		mc_conn_release(&c);
	}
	/* random pieces, a few seeds */
	for (unsigned seed = 1; seed <= 20; seed++) {
		srand(seed);
		reset_store(8);
		sink_reset(1 << 20);
		mc_conn_init(&c, &sink_out, NULL);
		size_t i = 0, n = sizeof(script) - 1;
		while (i < n) {
			size_t k = 1 + (size_t)rand() % 40;
			if (k > n - i)
				k = n - i;
			size_t took = mc_conn_feed(&c, script + i, k);
			check(took == k, "seed %u: parser took %zu of %zu bytes with room", seed,
			      took, k);
			i += k;
		}
		check(out.len == sizeof(expected) - 1 && !memcmp(out.buf, expected, out.len),
		      "script in random pieces (seed %u): saw\n%s", seed, out.buf ? out.buf : "");
		mc_conn_release(&c);
	}
}

static void run(struct mc_conn *c, const char *s)
{
	sink_reset(1 << 20);
	feed_all(c, s, strlen(s), 0);
}

static void expect(struct mc_conn *c, const char *s, const char *want)
{
	run(c, s);
	check(out.buf && !strcmp(out.buf, want), "sent %s: expected %s, saw %s", s, want,
	      out.buf ? out.buf : "(nothing)");
}

static void test_time(void)
{
	static struct mc_conn c;
	reset_store(8);
	mc_conn_init(&c, &sink_out, NULL);
	now_ns = 10000000000ull;
	expect(&c, "set e 0 2 1\r\nx\r\n", "STORED\r\n");
	now_ns += 1000000000ull;
	expect(&c, "get e\r\n", "VALUE e 0 1\r\nx\r\nEND\r\n");
	now_ns += 1500000000ull;
	expect(&c, "get e\r\n", "END\r\n");
	expect(&c, "set neg 0 -1 1\r\nx\r\nget neg\r\n", "STORED\r\nEND\r\n");
	expect(&c, "set t 0 1 1\r\nx\r\ntouch t 10\r\n", "STORED\r\nTOUCHED\r\n");
	now_ns += 5000000000ull;
	expect(&c, "get t\r\n", "VALUE t 0 1\r\nx\r\nEND\r\n");
	expect(&c, "set abs 0 2000000000 1\r\nx\r\n",
	       "CLIENT_ERROR absolute exptime needs memcached.epoch= at boot\r\n");
	expect(&c, "get abs\r\n", "END\r\n"); /* its value block was not a command */
	/* flush_all with a delay: items stored before then go at that time */
	expect(&c, "set f 0 0 1\r\nx\r\nflush_all 5\r\n", "STORED\r\nOK\r\n");
	now_ns += 4000000000ull;
	expect(&c, "get f\r\n", "VALUE f 0 1\r\nx\r\nEND\r\n");
	now_ns += 2000000000ull;
	expect(&c, "get f\r\nset g 0 0 1\r\ny\r\nget g\r\n",
	       "END\r\nSTORED\r\nVALUE g 0 1\r\ny\r\nEND\r\n");
	expect(&c, "flush_all\r\nget g\r\n", "OK\r\nEND\r\n");
	mc_conn_release(&c);
}

static void test_big_value_backpressure(void)
{
	static struct mc_conn c;
	reset_store(8);
	mc_conn_init(&c, &sink_out, NULL);
	size_t n = MC_ITEM_MAX;
	char *cmd = malloc(n + 64);
	int h = sprintf(cmd, "set big 7 0 %zu\r\n", n);
	for (size_t i = 0; i < n; i++)
		cmd[h + i] = (char)('a' + i % 26);
	memcpy(cmd + h + n, "\r\n", 2);
	run(&c, "");
	sink_reset(1 << 20);
	feed_all(&c, cmd, h + n + 2, 4096);
	check(out.buf && !strcmp(out.buf, "STORED\r\n"), "1 MiB set: saw %.40s",
	      out.buf ? out.buf : "");
	/* a get through a 1000-byte send buffer, with a pipelined version after it */
	const char *g = "get big\r\nversion\r\n";
	sink_reset(1000);
	size_t took = mc_conn_feed(&c, g, strlen(g));
	check(took == 9 && c.state == MC_S_SENDING,
	      "get with no room: took %zu bytes, state %d (expected 9, sending)", took, c.state);
	int rounds = 0;
	while (c.state == MC_S_SENDING && rounds < 100000) {
		out.used = 0;
		mc_conn_resume(&c);
		rounds++;
	}
	out.used = 0;
	mc_conn_feed(&c, g + took, strlen(g) - took);
	char *want = malloc(n + 200);
	int w = sprintf(want, "VALUE big 7 %zu\r\n", n);
	memcpy(want + w, cmd + h, n + 2);
	w += (int)n + 2;
	w += sprintf(want + w, "END\r\nVERSION %s\r\n", MC_VERSION);
	check(out.len == (size_t)w && !memcmp(out.buf, want, (size_t)w),
	      "1 MiB get through 1000-byte room: %zu bytes out, expected %d, %d rounds", out.len, w,
	      rounds);
	check(rounds > 1000, "expected the value to need many rounds of room, took %d", rounds);
	expect(&c, "set toobig 0 0 1048577\r\n", "SERVER_ERROR object too large for cache\r\n");
	check(c.state == MC_S_SWALLOW, "a refused value is swallowed (state %d)", c.state);
	mc_conn_release(&c);
	free(cmd);
	free(want);
}

static void test_eviction_spares_sending(void)
{
	static struct mc_conn a, b;
	reset_store(4); /* 3 pages */
	mc_conn_init(&a, &sink_out, NULL);
	mc_conn_init(&b, &sink_out, NULL);
	char cmd[1200];
	char val[1001];
	memset(val, 'v', 1000);
	val[1000] = 0;
	snprintf(cmd, sizeof(cmd), "set k0 0 0 1000\r\n%s\r\n", val);
	run(&a, cmd);
	/* a starts sending k0 and stalls once 600 bytes are out */
	sink_reset(600);
	mc_conn_feed(&a, "get k0\r\n", 8);
	size_t first = out.len; /* "VALUE k0 0 1000\r\n" and the start of the value */
	check(a.state == MC_S_SENDING && a.sending && first == 600,
	      "get k0 stalled mid-value (state %d, %zu bytes out)", a.state, first);
	/* b fills the store many times over: k0 goes from the table, not from a */
	for (int i = 1; i < 12000; i++) {
		snprintf(cmd, sizeof(cmd), "set k%d 0 0 1000 noreply\r\n%s\r\n", i, val);
		out.used = 0;
		out.room = 1 << 20;
		mc_conn_feed(&b, cmd, strlen(cmd));
	}
	check(mc_store_stats()->evictions > 5000 && !mc_store_stats()->outofmemory,
	      "expected evictions and every set stored, saw %lu evictions, %lu out of memory",
	      (unsigned long)mc_store_stats()->evictions,
	      (unsigned long)mc_store_stats()->outofmemory);
	sink_reset(1 << 20);
	while (a.state == MC_S_SENDING)
		mc_conn_resume(&a);
	size_t rest = 1000 - (600 - strlen("VALUE k0 0 1000\r\n"));
	char want[1100];
	snprintf(want, sizeof(want), "%.*s\r\nEND\r\n", (int)rest, val);
	check(out.buf && !strcmp(out.buf, want),
	      "the stalled reply's rest: expected %zu v's and END, saw %.60s", rest,
	      out.buf ? out.buf : "");
	mc_conn_release(&a);
	mc_conn_release(&b);
}

/* A get of many keys through a send buffer smaller than two values: every
 * value comes out, in order, each whole. */
static void test_multiget_backpressure(void)
{
	static struct mc_conn c;
	reset_store(8);
	mc_conn_init(&c, &sink_out, NULL);
	char cmd[1024], want[8192] = "";
	size_t wl = 0;
	for (int i = 0; i < 6; i++) {
		char v[301];
		memset(v, 'a' + i, 300);
		v[300] = 0;
		snprintf(cmd, sizeof(cmd), "set m%d %d 0 300\r\n%s\r\n", i, i, v);
		run(&c, cmd);
		wl += (size_t)sprintf(want + wl, "VALUE m%d %d 300\r\n%s\r\n", i, i, v);
	}
	wl += (size_t)sprintf(want + wl, "END\r\n");
	const char *g = "get m0 m1 nothere m2 m3 m4 m5\r\n";
	sink_reset(600);
	mc_conn_feed(&c, g, strlen(g));
	for (int r = 0; r < 1000 && c.state == MC_S_SENDING; r++) {
		out.used = 0;
		mc_conn_resume(&c);
	}
	check(out.len == wl && !memcmp(out.buf, want, wl),
	      "get of 7 keys through 600 bytes of room: expected %zu bytes, saw %zu:\n%s", wl,
	      out.len, out.buf ? out.buf : "");
	mc_conn_release(&c);
}

int main(void)
{
	test_pieces();
	test_time();
	test_big_value_backpressure();
	test_eviction_spares_sending();
	test_multiget_backpressure();
	printf("mc_unit: %d checks, %d failed\n", checks, failed);
	return failed != 0;
}
