/*
 * test_inst_table.c: what the copies of the TCP/IP side share
 * (net/inst_table.c, built here with NET_INSTANCES=3): the copy table's
 * bounds, the stop and ready flags, the control token, and the ARP
 * mailboxes (every other copy gets the frame once, in order; a full
 * mailbox counts the frame as dropped; a copy never gets its own), and
 * the copies' totals for copy 0's RESULT.
 */
#include <stdio.h>
#include <string.h>
#include "net/inst.h"
#include "tests/unit/check.h"

int check_failed, check_total;

/* The Makefile's copies of net/instance.c; here three placeholders. */
const struct net_inst_ops net_inst_ops, net_inst_ops_1, net_inst_ops_2;

static void test_table_and_flags(void)
{
	CHECK_EQ(3, net_inst_count(), "copies linked");
	CHECK(net_inst_get(0) == &net_inst_ops, "copy 0 is the unrenamed one");
	CHECK(net_inst_get(2) == &net_inst_ops_2, "copy 2 is net_inst_ops_2");
	CHECK(net_inst_get(3) == NULL, "no copy past the last");
	CHECK(net_inst_all_ready(1), "one copy: nobody to wait for");
	CHECK(!net_inst_all_ready(3), "copies 1 and 2 not ready yet");
	net_inst_set_ready(1);
	CHECK(!net_inst_all_ready(3), "copy 2 still not ready");
	CHECK(net_inst_all_ready(2), "mq=2: copy 1 is all it waits for");
	net_inst_set_ready(2);
	CHECK(net_inst_all_ready(3), "every copy ready");
	CHECK(!net_inst_stopping(), "not stopping before a stop");
	net_inst_stop();
	CHECK(net_inst_stopping(), "a stop from any copy is seen by all");
	CHECK(!strcmp(net_inst_token("aaaaaaaaaaaaaaaa"), "aaaaaaaaaaaaaaaa"),
	      "copy 0's token kept");
	CHECK(!strcmp(net_inst_token("bbbbbbbbbbbbbbbb"), "aaaaaaaaaaaaaaaa"),
	      "later copies get copy 0's");
}

static void test_arp_mailboxes(void)
{
	uint8_t f[NET_ARP_FRAME_MAX], out[NET_ARP_FRAME_MAX];

	CHECK_EQ(0, net_inst_arp_take(1, 3, out), "empty mailbox");
	for (int i = 0; i < 3; i++) {
		memset(f, 0x10 + i, sizeof(f));
		net_inst_arp_post(0, 3, f, 42 + i);
	}
	for (int i = 0; i < 3; i++)
		for (unsigned to = 1; to < 3; to++) {
			size_t n = net_inst_arp_take(to, 3, out);
			CHECK_EQ(42 + i, n, "each other copy gets the frame, in order");
			CHECK_EQ(0x10 + i, out[0], "the frame's bytes");
		}
	CHECK_EQ(0, net_inst_arp_take(0, 3, out), "a copy never gets its own frame");
	CHECK_EQ(0, net_inst_arp_take(1, 3, out), "taken once");

	/* mq=2 of 3 copies: copy 2 is not running and gets nothing. */
	net_inst_arp_post(1, 2, f, 60);
	CHECK_EQ(60, net_inst_arp_take(0, 2, out), "copy 0 gets copy 1's frame");
	CHECK_EQ(0, net_inst_arp_take(2, 3, out), "a copy beyond mq gets nothing");

	/* Longer than an ARP frame: cut to the mailbox's slot. */
	net_inst_arp_post(2, 3, f, 1500);
	CHECK_EQ(NET_ARP_FRAME_MAX, net_inst_arp_take(0, 3, out), "cut to NET_ARP_FRAME_MAX");
	CHECK_EQ(NET_ARP_FRAME_MAX, net_inst_arp_take(1, 3, out), "cut to NET_ARP_FRAME_MAX");

	/* Nobody takes: 8 slots, then every frame is counted as dropped. */
	uint64_t before = net_inst_arp_dropped(1);
	for (int i = 0; i < 10; i++)
		net_inst_arp_post(1, 2, f, 42);
	CHECK_EQ(before + 2, net_inst_arp_dropped(1),
	         "a full mailbox counts the frames it refused");
	int got = 0;
	while (net_inst_arp_take(0, 2, out))
		got++;
	CHECK_EQ(8, got, "a full mailbox holds 8 frames");
}

/* Copy 0's total after the join: every figure summed over the first
 * ncopies copies, the interval the longest (the copies end together, but
 * each measured from its own first request). */
static void test_totals(void)
{
	struct net_inst_total t, sum;

	for (unsigned k = 0; k < 3; k++) {
		t = (struct net_inst_total){.transactions = 1 + k,
		                            .messages = 10 + k,
		                            .bytes = 100 + k,
		                            .rx_bytes = 1000 + k,
		                            .tx_bytes = 2000 + k,
		                            .conns = 3 + k,
		                            .datagrams = 20 + k,
		                            .datagram_bytes = 300 + k,
		                            .ns = k == 1 ? 900 : 500 + k};
		net_inst_post_total(k, &t);
	}
	net_inst_post_total(3, &t); /* past the table: ignored */
	net_inst_sum_totals(2, &sum);
	CHECK_EQ(3, sum.transactions, "transactions of copies 0 and 1");
	CHECK_EQ(21, sum.messages, "messages summed");
	CHECK_EQ(201, sum.bytes, "bytes summed");
	CHECK_EQ(2001, sum.rx_bytes, "rx_bytes summed");
	CHECK_EQ(4001, sum.tx_bytes, "tx_bytes summed");
	CHECK_EQ(7, sum.conns, "connections summed");
	CHECK_EQ(41, sum.datagrams, "datagrams summed");
	CHECK_EQ(601, sum.datagram_bytes, "datagram bytes summed");
	CHECK_EQ(900, sum.ns, "the longest interval, not the sum");
	net_inst_sum_totals(3, &sum);
	CHECK_EQ(12, sum.conns, "all three copies");
	CHECK_EQ(900, sum.ns, "still the longest");
	net_inst_sum_totals(5, &sum);
	CHECK_EQ(12, sum.conns, "no copy past the table is read");
}

int main(void)
{
	RUN(test_table_and_flags);
	RUN(test_arp_mailboxes);
	RUN(test_totals);
	return check_done("test_inst_table");
}
