/*
 * inst.h: one copy of the TCP/IP side per queue pair (mq=N for the lwIP
 * apps; docs/multiqueue.md "One lwIP per vCPU").
 *
 * lwIP keeps its state in globals, and so do net/ and apps/. The build
 * links NET_INSTANCES copies of those objects (Makefile: net_inst0.o, the
 * others made from it with objcopy, every symbol local but the copy's
 * struct net_inst_ops), so copy k has its own lwIP, netif, pools, ARP table,
 * connections and app state, and runs on vCPU k against queue pair k:
 * shared nothing on the data path. Copy 0 is the one the kernel calls
 * (app_configure(), app_main()); it brings the device up and starts the
 * others.
 *
 * What the copies do share lives in net/inst_table.c, outside every copy:
 * the table of copies, a stop flag, the ready flags, the control token and
 * the ARP mailboxes (an ARP frame reaches one queue, every copy must learn
 * the address).
 */
#ifndef VNETLAB_NET_INST_H
#define VNETLAB_NET_INST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct net_inst_ops {
	void (*configure)(unsigned index); /* on the BSP, before cmdline_finish() */
	int (*run)(void *pair0);           /* on vCPU index: the copy's app_main() */
};

/* inst_table.c (shared) */
unsigned net_inst_count(void); /* copies linked: NET_INSTANCES */
const struct net_inst_ops *net_inst_get(unsigned index);
void net_inst_stop(void); /* any copy: every copy's run ends (ctl "stop") */
bool net_inst_stopping(void);
void net_inst_set_ready(unsigned index);
bool net_inst_all_ready(unsigned n);
/* The control token copy 0 made up: later copies take it, so one "stop"
 * datagram is accepted on whichever queue it arrives. */
const char *net_inst_token(const char *mine);

/* ARP mailboxes: copy `from` posts an ARP frame it received for every other
 * copy (single producer, single consumer per ordered pair; a full mailbox
 * counts the frame as dropped). */
#define NET_ARP_FRAME_MAX 64
void net_inst_arp_post(unsigned from, unsigned ncopies, const void *frame, size_t len);
/* Copy `to` takes the next frame from any other copy: its length, 0 if none. */
size_t net_inst_arp_take(unsigned to, unsigned ncopies, void *frame);
uint64_t net_inst_arp_dropped(unsigned from);

/* Figures a serving app's copies publish for each other (the rr server:
 * whether the clients came, whether they are gone). Each copy writes only
 * its own slot, a cache line of its own; readers sum or take the maximum. */
enum {
	NET_SLOT_FIRST_NS,   /* the first request or header (0: none yet) */
	NET_SLOT_LAST_NS,    /* the last request or data */
	NET_SLOT_CONNS_OPEN, /* TCP connections open now */
	NET_SLOT_CONNS_SEEN, /* TCP connections accepted */
	NET_SLOT_EXPECTED,   /* connections the clients announced (iperf's numThreads) */
	NET_SLOT_MAX
};
void net_inst_slot_set(unsigned index, unsigned which, uint64_t v);
uint64_t net_inst_slot_sum(unsigned which, unsigned ncopies);
uint64_t net_inst_slot_max(unsigned which, unsigned ncopies);

/* What a copy measured, for copy 0's total RESULT line after the join. */
struct net_inst_total {
	uint64_t transactions, messages, bytes;
	uint64_t rx_bytes, tx_bytes;               /* the stream server's two directions */
	uint64_t conns, datagrams, datagram_bytes; /* the echo's TCP connections, UDP */
	uint64_t ns;                               /* its measured interval */
};
void net_inst_post_total(unsigned index, const struct net_inst_total *t);
void net_inst_sum_totals(unsigned ncopies, struct net_inst_total *sum); /* ns: the longest */

/* instance.c (one per copy) */
unsigned net_inst_index(void);  /* this copy's: 0 = the BSP's */
unsigned net_inst_queues(void); /* mq=N as configured (1: no copies run) */
#endif
