/*
 * inst_table.c: what the copies of the TCP/IP side share (net/inst.h).
 * Linked once, outside every copy. Nothing here is on the data path but
 * the ARP mailboxes, which see a frame only when ARP does.
 */
#include <string.h>
#include "kernel/arch.h"
#include "net/inst.h"

#ifndef NET_INSTANCES
#error "NET_INSTANCES: the Makefile says how many copies it links"
#endif
#if NET_INSTANCES < 1 || NET_INSTANCES > 8
#error "NET_INSTANCES: 1..8"
#endif

/* Copy 0 keeps the name; the Makefile renames copy k's to net_inst_ops_k. */
extern const struct net_inst_ops net_inst_ops;
#define COPY(k) extern const struct net_inst_ops net_inst_ops_##k;
COPY(1)
COPY(2)
COPY(3)
COPY(4)
COPY(5)
COPY(6)
COPY(7)

static const struct net_inst_ops *const table[NET_INSTANCES] = {
    &net_inst_ops,
#if NET_INSTANCES > 1
    &net_inst_ops_1,
#endif
#if NET_INSTANCES > 2
    &net_inst_ops_2,
#endif
#if NET_INSTANCES > 3
    &net_inst_ops_3,
#endif
#if NET_INSTANCES > 4
    &net_inst_ops_4,
#endif
#if NET_INSTANCES > 5
    &net_inst_ops_5,
#endif
#if NET_INSTANCES > 6
    &net_inst_ops_6,
#endif
#if NET_INSTANCES > 7
    &net_inst_ops_7,
#endif
};

unsigned net_inst_count(void)
{
	return NET_INSTANCES;
}

const struct net_inst_ops *net_inst_get(unsigned index)
{
	return index < NET_INSTANCES ? table[index] : NULL;
}

static volatile uint32_t stopping;
static volatile uint32_t ready[NET_INSTANCES];

void net_inst_stop(void)
{
	stopping = 1;
}

bool net_inst_stopping(void)
{
	return stopping;
}

void net_inst_set_ready(unsigned index)
{
	/* Whatever the copy set up (its netif, its listening pcbs) is stored
	 * before copy 0 may read "ready" and print the line the host waits for. */
	arch_wmb();
	if (index < NET_INSTANCES)
		ready[index] = 1;
}

bool net_inst_all_ready(unsigned n)
{
	for (unsigned k = 1; k < n && k < NET_INSTANCES; k++)
		if (!ready[k])
			return false;
	return true;
}

static char token[65];

const char *net_inst_token(const char *mine)
{
	if (!token[0])
		strncpy(token, mine, sizeof(token) - 1);
	return token;
}

/* mbox[from][to]: written by copy `from` only (head), read by copy `to`
 * only (tail): one producer, one consumer, no lock. */
#define MBOX_SLOTS 8
struct mbox {
	volatile uint32_t head, tail;
	uint16_t len[MBOX_SLOTS];
	uint8_t frame[MBOX_SLOTS][NET_ARP_FRAME_MAX];
};
static struct mbox mbox[NET_INSTANCES][NET_INSTANCES];
static uint64_t dropped[NET_INSTANCES];

void net_inst_arp_post(unsigned from, unsigned ncopies, const void *frame, size_t len)
{
	if (NET_INSTANCES == 1 || from >= NET_INSTANCES)
		return; /* (one copy: nobody to tell, and no out-of-bounds warning) */
	if (len > NET_ARP_FRAME_MAX)
		len = NET_ARP_FRAME_MAX; /* ARP over Ethernet is 42 bytes plus padding */
	for (unsigned to = 0; to < ncopies && to < NET_INSTANCES; to++) {
		struct mbox *m = &mbox[from][to];
		if (to == from)
			continue;
		if (m->head - m->tail >= MBOX_SLOTS) {
			dropped[from]++;
			continue;
		}
		unsigned slot = m->head % MBOX_SLOTS;
		memcpy(m->frame[slot], frame, len);
		m->len[slot] = (uint16_t)len;
		/* The frame is stored before head says the consumer may read it. */
		arch_wmb();
		m->head++;
	}
}

size_t net_inst_arp_take(unsigned to, unsigned ncopies, void *frame)
{
	if (NET_INSTANCES == 1 || to >= NET_INSTANCES)
		return 0;
	for (unsigned from = 0; from < ncopies && from < NET_INSTANCES; from++) {
		struct mbox *m = &mbox[from][to];
		if (from == to || m->head == m->tail)
			continue;
		/* head was read before the slot it covers. */
		arch_rmb();
		unsigned slot = m->tail % MBOX_SLOTS;
		size_t len = m->len[slot];
		memcpy(frame, m->frame[slot], len);
		/* The slot is copied out before tail gives it back. */
		arch_mb();
		m->tail++;
		return len;
	}
	return 0;
}

uint64_t net_inst_arp_dropped(unsigned from)
{
	return from < NET_INSTANCES ? dropped[from] : 0;
}

struct slot {
	volatile uint64_t v[NET_SLOT_MAX];
} __attribute__((aligned(64)));
static struct slot slots[NET_INSTANCES];

void net_inst_slot_set(unsigned index, unsigned which, uint64_t v)
{
	if (index < NET_INSTANCES && which < NET_SLOT_MAX)
		slots[index].v[which] = v;
}

uint64_t net_inst_slot_sum(unsigned which, unsigned ncopies)
{
	uint64_t sum = 0;
	for (unsigned k = 0; k < ncopies && k < NET_INSTANCES && which < NET_SLOT_MAX; k++)
		sum += slots[k].v[which];
	return sum;
}

uint64_t net_inst_slot_max(unsigned which, unsigned ncopies)
{
	uint64_t max = 0;
	for (unsigned k = 0; k < ncopies && k < NET_INSTANCES && which < NET_SLOT_MAX; k++)
		if (slots[k].v[which] > max)
			max = slots[k].v[which];
	return max;
}

static struct net_inst_total totals[NET_INSTANCES];

void net_inst_post_total(unsigned index, const struct net_inst_total *t)
{
	if (index < NET_INSTANCES)
		totals[index] = *t;
}

/* After the join: every copy's stores were done before its run returned
 * (smp_join() reads "done" after them). */
void net_inst_sum_totals(unsigned ncopies, struct net_inst_total *sum)
{
	*sum = (struct net_inst_total){0};
	for (unsigned k = 0; k < ncopies && k < NET_INSTANCES; k++) {
		sum->transactions += totals[k].transactions;
		sum->messages += totals[k].messages;
		sum->bytes += totals[k].bytes;
		sum->rx_bytes += totals[k].rx_bytes;
		sum->tx_bytes += totals[k].tx_bytes;
		sum->conns += totals[k].conns;
		sum->datagrams += totals[k].datagrams;
		sum->datagram_bytes += totals[k].datagram_bytes;
		if (totals[k].ns > sum->ns)
			sum->ns = totals[k].ns;
	}
}
