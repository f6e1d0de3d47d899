/*
 * test_result.c: the RESULT line builder (apps/lib/result.c) on the host,
 * and who may use it. Each line is built by one CPU: with mq=N every lwIP
 * copy has its own builder and app=pkt prints from the BSP after the join
 * (result.c says why). Here two "CPUs" (smp_cpu_index() as the test sets
 * it) interleave on one builder, step by step, deterministically: a second
 * CPU that begins, adds to or ends a line the first holds must panic and
 * leave the first line as it was (its test name on its HIST line), and
 * CPUs that take turns get whole lines of their own.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "apps/lib/result.h"
#include "kernel/kernel.h"
#include "tests/unit/check.h"

int check_failed, check_total;

/* ---- what result.c calls: the calling CPU, a clock, labels, counters ---- */

static unsigned cpu_now; /* the CPU the next call runs on */

unsigned smp_cpu_index(void)
{
	return cpu_now;
}

uint64_t clock_ns(void)
{
	return 5000000; /* t_line_us 5000 */
}

uint64_t clock_since_entry_ns(uint64_t clock)
{
	return clock;
}

uint64_t clock_tsc_khz(void)
{
	return 1000000;
}

const char *cpu_accel(void)
{
	return "tcg";
}

const char *kernel_boot_protocol(void)
{
	return "pvh";
}

const char *vnet_variant(void)
{
	return "unit";
}

uint64_t vnet_features(const struct vnet *vn)
{
	(void)vn;
	return 0x1;
}

const char *vnet_irq_mode(const struct vnet *vn)
{
	(void)vn;
	return "none";
}

void vnet_counters(const struct vnet *vn, struct vnet_counters *rx, struct vnet_counters *tx)
{
	(void)vn;
	memset(rx, 0, sizeof(*rx));
	memset(tx, 0, sizeof(*tx));
}

void vnet_idle_counters(const struct vnet *vn, struct vnet_idle_stats *s)
{
	(void)vn;
	memset(s, 0, sizeof(*s));
}

struct vnet *net_vnet(void)
{
	return NULL;
}

const char *net_backend(void)
{
	return "tap";
}

const char *net_offloads(void)
{
	return "none";
}

uint64_t net_lwip_drops(void)
{
	return 0;
}

uint64_t vnetif_tx_drops(void)
{
	return 0;
}

static struct vnetif_stats netif_st;

const struct vnetif_stats *vnetif_stats(void)
{
	return &netif_st;
}

struct offload_stats offload_st;

void prof_snap(struct prof_snap *s)
{
	memset(s, 0, sizeof(*s));
}

const char *prof_name(enum prof_stage s)
{
	(void)s;
	return "stage";
}

/* panic(): back to on_cpu(), the message kept. */
static jmp_buf panic_jmp;
static bool panic_armed;
static char panic_msg[256];

void panic(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(panic_msg, sizeof(panic_msg), fmt, ap);
	va_end(ap);
	if (!panic_armed) {
		printf("FAIL panic outside on_cpu(): %s\n", panic_msg);
		exit(1);
	}
	longjmp(panic_jmp, 1);
}

/* ---- the console: what the builder printed ---- */

static char out[65536];
static FILE *cap;
static int saved_fd = -1;

static void capture(void)
{
	fflush(stdout);
	saved_fd = dup(1);
	cap = tmpfile();
	if (saved_fd < 0 || !cap || dup2(fileno(cap), 1) < 0) {
		perror("test_result: capture");
		exit(1);
	}
}

/* Everything printed since capture(), in out. */
static const char *captured(void)
{
	fflush(stdout);
	dup2(saved_fd, 1);
	close(saved_fd);
	rewind(cap);
	size_t n = fread(out, 1, sizeof(out) - 1, cap);
	out[n] = 0;
	fclose(cap);
	return out;
}

/* Run fn on CPU cpu: true if it panicked (the message in panic_msg). */
static bool on_cpu(unsigned cpu, void (*fn)(void))
{
	volatile bool panicked = false;

	cpu_now = cpu;
	panic_msg[0] = 0;
	panic_armed = true;
	if (setjmp(panic_jmp))
		panicked = true;
	else
		fn();
	panic_armed = false;
	return panicked;
}

/* ---- the steps the tests interleave ---- */

static struct hist h_rr;

static void begin_tcp_client(void)
{
	result_begin("tcp_rr", "client");
}

static void begin_udp_server(void)
{
	result_begin("udp_rr", "server");
}

static void add_fields(void)
{
	result_u64("queue", cpu_now);
	result_rates(6400, 100, 1000000000);
	result_latency(&h_rr);
}

static void add_u64(void)
{
	result_u64("queue", cpu_now);
}

static void add_str(void)
{
	result_str("framing", "raw");
}

static void add_ratio(void)
{
	result_ratio("seconds", 1, 1);
}

static void add_rates(void)
{
	result_rates(1, 1, 1);
}

static void add_latency(void)
{
	result_latency(&h_rr);
}

static void add_counters(void)
{
	static struct result_snap a, b;

	result_counters(&a, &b, 1);
}

static void end_line(void)
{
	result_end();
}

static void count_lines(const char *s, const char *prefix, int *n)
{
	*n = 0;
	for (const char *p = s; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
		if (!strncmp(p, prefix, strlen(prefix)))
			(*n)++;
}

/* One line, one CPU: its fields in order, the HIST line after it. */
static void test_one_line(void)
{
	int before = check_failed;

	capture();
	bool p = on_cpu(0, begin_udp_server) || on_cpu(0, add_fields) || on_cpu(0, end_line);
	const char *s = captured();

	CHECK(!p, "a line on one CPU does not panic");
	CHECK(
	    !strncmp(s, "RESULT {\"test\":\"udp_rr\",\"role\":\"server\",\"variant\":\"unit\"", 56),
	    "the line opens with test, role, variant");
	CHECK(strstr(s, ",\"queue\":0,\"tps\":100.000,\"mbps\":0.051,\"cycle_mean_ns\":") != NULL,
	      "fields in order, an RR server's latency as cycle_*");
	CHECK(strstr(s, ",\"t_line_us\":5000}\nHIST {\"test\":\"udp_rr\",\"role\":\"server\","
	                "\"metric\":\"cycle\"") != NULL,
	      "the line closes, then its HIST line");
	if (check_failed != before)
		printf("  printed: %s", s);
}

/* CPUs taking turns (each begins after the other's end): whole lines. */
static void test_cpus_in_turn(void)
{
	int results, hists;

	capture();
	bool p = on_cpu(0, begin_tcp_client) || on_cpu(0, add_fields) || on_cpu(0, end_line) ||
	         on_cpu(1, begin_udp_server) || on_cpu(1, add_fields) || on_cpu(1, end_line);
	const char *s = captured();

	CHECK(!p, "a line after another CPU's end does not panic");
	count_lines(s, "RESULT {", &results);
	count_lines(s, "HIST {", &hists);
	CHECK_EQ(2, results, "two RESULT lines");
	CHECK_EQ(2, hists, "two HIST lines");
	CHECK(strstr(s, "HIST {\"test\":\"tcp_rr\",\"role\":\"client\",\"metric\":\"lat\"") != NULL,
	      "CPU 0's HIST line names its test");
	CHECK(strstr(s, "HIST {\"test\":\"udp_rr\",\"role\":\"server\",\"metric\":\"cycle\"") !=
	          NULL,
	      "CPU 1's HIST line names its test");
}

/* Two builders interleaved on one line: CPU 1 begins while CPU 0's line is
 * open. Without the check CPU 1 would take over the state, and CPU 0's
 * HIST line would name CPU 1's test (the race result.c rules out). */
static void test_second_cpu_begin_panics(void)
{
	int before = check_failed;

	capture();
	bool p0 = on_cpu(0, begin_tcp_client) || on_cpu(0, add_fields);
	bool p1 = on_cpu(1, begin_udp_server);
	char msg[256];
	snprintf(msg, sizeof(msg), "%s", panic_msg);
	bool p2 = on_cpu(0, end_line);
	const char *s = captured();

	CHECK(!p0, "CPU 0 builds its line");
	CHECK(p1, "CPU 1's begin while CPU 0's line is open panics");
	CHECK(strstr(msg, "udp_rr RESULT line begun on cpu 1 while cpu 0's is open") != NULL,
	      "the panic names both CPUs");
	CHECK(!p2, "CPU 0 still owns its line and ends it");
	CHECK(strstr(s, "HIST {\"test\":\"tcp_rr\",\"role\":\"client\",\"metric\":\"lat\"") != NULL,
	      "CPU 0's HIST line still names its own test");
	CHECK(strstr(s, "udp_rr") == NULL, "nothing of CPU 1's line was printed");
	if (check_failed != before)
		printf("  panic: %s\n  printed: %s", msg, s);
}

/* Every call that adds to or ends a line, from a CPU that does not hold
 * it: panics, and the holder's line goes on. */
static void test_foreign_calls_panic(void)
{
	static void (*const calls[])(void) = {add_u64,     add_str,      add_ratio, add_rates,
	                                      add_latency, add_counters, end_line};

	capture();
	CHECK(!on_cpu(0, begin_tcp_client), "CPU 0 begins");
	for (size_t i = 0; i < sizeof(calls) / sizeof(calls[0]); i++) {
		CHECK(on_cpu(1, calls[i]), "a call on CPU 1 into CPU 0's open line panics");
		CHECK(strstr(panic_msg, "on cpu 1 while cpu 0's RESULT line is open") != NULL,
		      "... naming both CPUs");
	}
	CHECK(!on_cpu(0, end_line), "CPU 0 ends its line");
	const char *s = captured();
	CHECK(strstr(s, "\"queue\"") == NULL && strstr(s, "framing") == NULL,
	      "no field of CPU 1's calls reached the line");
	/* No line open: any call but begin panics. */
	CHECK(on_cpu(0, add_u64), "a field with no line open panics");
	CHECK(strstr(panic_msg, "with no RESULT line open") != NULL, "... saying so");
	CHECK(on_cpu(1, end_line), "an end with no line open panics");
}

/* A second begin on the same CPU (a line never ended) panics too, after
 * ending the open line so the PANIC line stands on its own. */
static void test_nested_begin_panics(void)
{
	capture();
	CHECK(!on_cpu(0, begin_tcp_client), "CPU 0 begins");
	CHECK(on_cpu(0, begin_udp_server), "a second begin on the same CPU panics");
	CHECK(strstr(panic_msg, "begun on cpu 0 while cpu 0's is open") != NULL,
	      "the panic says the line is its own");
	CHECK(!on_cpu(0, end_line), "the first line can still end");
	const char *s = captured();
	CHECK(!strncmp(s, "RESULT {\"test\":\"tcp_rr\"", 23) && strchr(s, '\n') &&
	          !strncmp(strchr(s, '\n') + 1, ",\"t_line_us\"", 12),
	      "the open line was ended with a newline before the panic");
}

int main(void)
{
	hist_reset(&h_rr);
	for (uint64_t v = 1000; v <= 100000; v += 1000)
		hist_add(&h_rr, v);
	RUN(test_one_line);
	RUN(test_cpus_in_turn);
	RUN(test_second_cpu_begin_panics);
	RUN(test_foreign_calls_panic);
	RUN(test_nested_begin_panics);
	return check_done("test_result");
}
