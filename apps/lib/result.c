/*
 * result.c: the RESULT line (format in result.h) and counter snapshots.
 *
 * Counters are taken for the measured interval only: a snapshot when the
 * measurement starts (after warm-up), one when it ends, and the line
 * reports the difference. Kicks and suppressed kicks are summed over both
 * queues (RX refills notify too); reclaims and ring-full events are TX.
 */
#include <stdio.h>
#include <string.h>
#include "apps/lib/result.h"
#include "kernel/kernel.h"
#include "net/net.h"

void result_snap(struct result_snap *s)
{
	result_snap_of(s, net_vnet());
}

void result_snap_of(struct result_snap *s, const struct vnet *vn)
{
	vnet_counters(vn, &s->rx, &s->tx);
	s->netif = *vnetif_stats();
	s->off = offload_st;
	vnet_idle_counters(vn, &s->idle);
	if (VNETLAB_PROFILE)
		prof_snap(&s->prof);
	s->lwip_drops = net_lwip_drops() + vnetif_tx_drops();
	s->ns = clock_ns();
}

void result_measure_begin(struct result_window *w)
{
	result_snap(&w->a);
	w->t_start = w->a.ns;
}

void result_measure_end(struct result_window *w, uint64_t end_ns)
{
	result_snap(&w->b);
	w->t_end = end_ns > w->t_start ? end_ns : w->b.ns;
}

/*
 * The line being built. No lock guards it, because no two CPUs share it:
 *
 * - the lwIP apps that run as copies with mq=N (echo, the rr and stream
 *   servers and clients; net/inst.h) link this file into every copy
 *   (Makefile INST_SRCS), so copy k's RESULT line, printed on CPU k while
 *   the others print theirs, is built in copy k's own result_line; the
 *   console keeps each CPU's line whole (kernel/console.c);
 * - app=pkt, linked once, uses copy 0's: its queue loops on the other
 *   CPUs only take snapshots (result_snap_of(), into their own struct
 *   pkt_q), and the BSP prints every line after smp_join().
 *
 * So that this stays true, result_begin() takes the line for the calling
 * CPU and result_end() gives it back; any other CPU that begins a line
 * while one is open, adds to it or ends it panics (result_own()), and so
 * does a second begin on the same CPU: a change that shares the line
 * (this file linked once, a pkt loop printing its own line) stops the run
 * instead of printing one test's HIST line and t_line_us under another's
 * name. tests/unit/test_result.c interleaves two CPUs on one line;
 * tests/cases/test_result.py checks that the ELF has one result_line per
 * copy.
 */
static struct {
	uint32_t cpu; /* smp_cpu_index() + 1 of the CPU building the line; 0: none open */
	const char *test, *role;
	const char *lat; /* "lat" or, for an RR server, "cycle" */
	uint64_t t_line_ns;
	uint64_t rate_ns;        /* the interval result_rates() divided by */
	const struct hist *hist; /* printed on the HIST line after RESULT */
	/* result_counters()' snapshots, for the PROFILE line after RESULT */
	const struct result_snap *prof_a, *prof_b;
} result_line;

/* The calling CPU must be the one whose line is open (what: the call). */
static void result_own(const char *what)
{
	uint32_t me = smp_cpu_index() + 1,
	         cpu = __atomic_load_n(&result_line.cpu, __ATOMIC_ACQUIRE);

	if (cpu == me)
		return;
	if (cpu)
		panic("result: %s on cpu %u while cpu %u's RESULT line is open", what, me - 1,
		      cpu - 1);
	panic("result: %s on cpu %u with no RESULT line open", what, me - 1);
}

void result_begin(const char *test, const char *role)
{
	uint32_t me = smp_cpu_index() + 1;
	size_t n = strlen(test);

	if (!__sync_bool_compare_and_swap(&result_line.cpu, 0, me)) {
		uint32_t cpu = result_line.cpu;
		if (cpu == me)
			printf("\n"); /* the open line ends before the PANIC line */
		panic("result: %s RESULT line begun on cpu %u while cpu %u's is open", test, me - 1,
		      cpu - 1);
	}
	result_line.test = test;
	result_line.role = role;
	result_line.lat =
	    !strcmp(role, "server") && n > 3 && !strcmp(test + n - 3, "_rr") ? "cycle" : "lat";
	result_line.t_line_ns = clock_since_entry_ns(clock_ns());
	result_line.hist = NULL;
	result_line.rate_ns = 0;
	printf("RESULT {\"test\":\"%s\",\"role\":\"%s\",\"variant\":\"%s\",\"accel\":\"%s\","
	       "\"backend\":\"%s\",\"boot\":\"%s\",\"features\":\"0x%llx\",\"offloads\":\"%s\"",
	       test, role, vnet_variant(), cpu_accel(), net_backend(), kernel_boot_protocol(),
	       (unsigned long long)vnet_features(net_vnet()), net_offloads());
}

void result_u64(const char *key, uint64_t v)
{
	result_own("result_u64");
	printf(",\"%s\":%lu", key, v);
}

void result_str(const char *key, const char *v)
{
	result_own("result_str");
	printf(",\"%s\":\"%s\"", key, v);
}

/* num * 1000 / den rounded to nearest, in 128 bits so byte and
 * transaction counts of any realistic run cannot overflow. */
static uint64_t milli(uint64_t num, uint64_t den, uint64_t scale)
{
	if (!den)
		return 0;
	unsigned __int128 n = (unsigned __int128)num * scale * 1000;
	return (uint64_t)((n + den / 2) / den);
}

static void print_milli(const char *key, uint64_t m)
{
	result_own("a ratio");
	printf(",\"%s\":%lu.%03lu", key, m / 1000, m % 1000);
}

void result_ratio(const char *key, uint64_t num, uint64_t den)
{
	print_milli(key, milli(num, den, 1));
}

void result_rates(uint64_t bytes, uint64_t transactions, uint64_t ns)
{
	result_own("result_rates");
	result_line.rate_ns = ns;
	print_milli("tps", milli(transactions, ns, 1000000000ull));
	/* bits per microsecond = Mbit/s */
	print_milli("mbps", milli(bytes * 8, ns, 1000));
}

static void latency_u64(const char *what, uint64_t v)
{
	result_own("result_latency");
	printf(",\"%s_%s_ns\":%lu", result_line.lat, what, v);
}

void result_latency(const struct hist *h)
{
	latency_u64("mean", hist_mean(h));
	latency_u64("p50", hist_percentile(h, 50000));
	latency_u64("p90", hist_percentile(h, 90000));
	latency_u64("p99", hist_percentile(h, 99000));
	latency_u64("p999", hist_percentile(h, 99900));
	latency_u64("max", h->count ? h->max : 0);
	result_line.hist = h;
}

void result_counters(const struct result_snap *a, const struct result_snap *b,
                     uint64_t transactions)
{
	result_own("result_counters");
	result_line.prof_a = a;
	result_line.prof_b = b;
	uint64_t kicks = (b->tx.kicks - a->tx.kicks) + (b->rx.kicks - a->rx.kicks);
	uint64_t suppressed = (b->tx.kicks_suppressed - a->tx.kicks_suppressed) +
	                      (b->rx.kicks_suppressed - a->rx.kicks_suppressed);
	uint64_t reclaim_calls = b->tx.reclaim_calls - a->tx.reclaim_calls;
	/* The figures' interval starts at the first snapshot and lasts what the
	 * rates were computed over; a server's ends at its last transaction,
	 * before the second snapshot (taken once the clients are gone). */
	uint64_t end = result_line.rate_ns ? a->ns + result_line.rate_ns : b->ns;
	result_u64("t_begin_us", clock_since_entry_ns(a->ns) / 1000);
	result_u64("t_end_us", clock_since_entry_ns(end) / 1000);
	result_u64("tx_frames", b->tx.frames - a->tx.frames);
	result_u64("rx_frames", b->rx.frames - a->rx.frames);
	result_u64("kicks", kicks);
	result_u64("kicks_suppressed", suppressed);
	result_u64("kick_rescues", (b->tx.kick_rescues - a->tx.kick_rescues) +
	                               (b->rx.kick_rescues - a->rx.kick_rescues));
	result_u64("rx_peer_kicks", b->rx.peer_kicks - a->rx.peer_kicks);
	result_u64("reclaim_calls", reclaim_calls);
	result_u64("reclaimed", b->tx.reclaimed - a->tx.reclaimed);
	result_u64("ring_full", b->tx.ring_full - a->tx.ring_full);
	result_u64("lwip_drops", b->lwip_drops - a->lwip_drops);
	result_ratio("kicks_per_txn", kicks, transactions);
	result_ratio("reclaims_per_txn", reclaim_calls, transactions);

	/* The bulk path: how big the frames were and what they cost, per
	 * 64 KiB of frame bytes (headers included) in each direction. */
	uint64_t tx_bytes = b->tx.bytes - a->tx.bytes, rx_bytes = b->rx.bytes - a->rx.bytes;
	uint64_t tx_kicks = b->tx.kicks - a->tx.kicks, acks = b->off.tx_acks - a->off.tx_acks;
	result_u64("tx_bytes", tx_bytes);
	result_u64("rx_bytes", rx_bytes);
	result_u64("tx_tso", b->off.tx_tso - a->off.tx_tso);
	result_u64("rx_lro", b->rx.gso - a->rx.gso);
	result_u64("tx_acks", acks);
	result_u64("tx_clones", b->netif.tx_clones - a->netif.tx_clones);
	result_u64("rx_copies", b->netif.rx_copies - a->netif.rx_copies);
	result_ratio("tx_kicks_per_64k_sent", tx_kicks * 65536, tx_bytes);
	result_ratio("acks_per_64k_received", acks * 65536, rx_bytes);

	/* The idle policy, between the two snapshots: interrupts per queue,
	 * halts, and the guest CPU's busy share (TSC time not halted). */
	uint64_t span = b->ns - a->ns, halted = b->idle.halted_ns - a->idle.halted_ns;
	result_str("irq", vnet_irq_mode(net_vnet()));
	result_u64("irqs_rx", b->rx.irqs - a->rx.irqs);
	result_u64("irqs_tx", b->tx.irqs - a->tx.irqs);
	result_u64("polls", b->idle.polls - a->idle.polls);
	result_u64("idle_polls", b->idle.idle_polls - a->idle.idle_polls);
	result_u64("halts", b->idle.halts - a->idle.halts);
	result_u64("halted_us", halted / 1000);
	result_u64("timer_wakes", b->idle.timer_wakes - a->idle.timer_wakes);
	result_u64("lost_wakeups", b->idle.lost_wakeups - a->idle.lost_wakeups);
	result_ratio("busy_pct", (span > halted ? span - halted : 0) * 100, span);
	result_ratio("irqs_per_txn", (b->rx.irqs - a->rx.irqs) + (b->tx.irqs - a->tx.irqs),
	             transactions);
}

/* PROFILE {...}: per stage, cycles in the measured interval, per frame
 * (both directions) and per KiB of frame bytes, and its share in 0.1 %. */
static void result_profile(const struct result_snap *a, const struct result_snap *b)
{
	uint64_t total = 0, c[PROF_STAGES];
	uint64_t frames = (b->tx.frames - a->tx.frames) + (b->rx.frames - a->rx.frames);
	uint64_t kib = ((b->tx.bytes - a->tx.bytes) + (b->rx.bytes - a->rx.bytes)) / 1024;

	for (int i = 0; i < PROF_STAGES; i++)
		total += c[i] = b->prof.cycles[i] - a->prof.cycles[i];
	printf("PROFILE {\"variant\":\"%s\",\"tsc_khz\":%lu,\"cycles\":%lu,\"frames\":%lu,"
	       "\"kib\":%lu",
	       vnet_variant(), clock_tsc_khz(), total, frames, kib);
	for (int i = 0; i < PROF_STAGES; i++)
		printf(
		    ",\"%s\":{\"cycles\":%lu,\"per_frame\":%lu,\"per_kib\":%lu,\"permille\":%lu}",
		    prof_name(i), c[i], frames ? c[i] / frames : 0, kib ? c[i] / kib : 0,
		    total ? c[i] * 1000 / total : 0);
	printf("}\n");
}

static void hist_line(const struct hist *h)
{
	printf("HIST {\"test\":\"%s\",\"role\":\"%s\",\"metric\":\"%s\",\"unit\":\"ns\","
	       "\"count\":%lu,\"buckets\":[",
	       result_line.test, result_line.role, result_line.lat, h->count);
	const char *sep = "";
	for (unsigned i = 0; i < HIST_BUCKETS; i++) {
		if (!h->bucket[i])
			continue;
		uint64_t width, low = hist_bucket_low(i, &width);
		printf("%s[%lu,%lu,%lu]", sep, low, width, h->bucket[i]);
		sep = ",";
	}
	printf("]}\n");
}

void result_end(void)
{
	result_u64("t_line_us", result_line.t_line_ns / 1000);
	printf("}\n");
	if (result_line.hist)
		hist_line(result_line.hist);
	if (VNETLAB_PROFILE && result_line.prof_a && result_line.prof_b)
		result_profile(result_line.prof_a, result_line.prof_b);
	result_line.prof_a = result_line.prof_b = NULL;
	/* The HIST and PROFILE lines are out: another begin may come. */
	__atomic_store_n(&result_line.cpu, 0, __ATOMIC_RELEASE);
}
