/*
 * net.c: bring the network up and run lwIP's NO_SYS main loop
 * (doc/NO_SYS_SampleCode.c): poll the device, feed lwIP, run its timers,
 * run the application, end the burst.
 *
 * Keys: ip=dhcp|A.B.C.D/PREFIX (default dhcp), gw=A.B.C.D,
 *       net.dhcp_timeout=SECONDS (default 10), backend=LABEL (for RESULT lines),
 *       net.rx_hold_max=N (RX buffers the stack may hold before frames are
 *       copied; default half the ring, 0 = copy every frame: receive
 *       without zero copy, for the 2010 comparison),
 *       mq=N (apps that call net_configure_mq(): one copy of lwIP per queue
 *       pair, each on its own vCPU; net/inst.h, docs/multiqueue.md).
 */
#include <stdio.h>
#include <string.h>
#include "drivers/virtio/vnet.h"
#include "kernel/arch.h"
#include "kernel/kernel.h"
#include "kernel/prof.h"
#include "lwip/dhcp.h"
#include "lwip/init.h"
#include "lwip/priv/memp_priv.h"
#include "lwip/priv/tcp_priv.h"
#include "lwip/tcp.h"
#include "lwip/stats.h"
#include "lwip/timeouts.h"
#include "lwip/udp.h"
#include "net/inst.h"
#include "net/net.h"
#include "netif/ethernet.h"

static struct netif netif;
static struct vnet *vn;
static const char *ip_arg, *gw_arg, *backend;
static uint64_t dhcp_timeout_s;
static bool use_dhcp;
static ip4_addr_t addr, mask, gw;
static unsigned queues = 1; /* mq=N: copies of this layer running, one per pair */
static struct vnet *pair0;  /* copy k > 0: the device copy 0 opened */

#define INST_READY_NS 10000000000ull /* every copy polls its queue by then */
#define INST_JOIN_NS  10000000000ull /* and has ended its run by then */

/* "A.B.C.D/P": a malformed address is a usage error naming the key. */
static void parse_ip(void)
{
	char buf[32];
	const char *slash = strchr(ip_arg, '/');
	size_t n = slash ? (size_t)(slash - ip_arg) : 0;
	char *end;
	unsigned long prefix = slash ? strtoul(slash + 1, &end, 10) : 0;
	if (!slash || n >= sizeof(buf) || !slash[1] || *end || prefix < 1 || prefix > 30)
		kernel_usage_error("cmdline",
		                   "bad value '%s' for key 'ip' (expected dhcp or A.B.C.D/PREFIX)",
		                   ip_arg);
	memcpy(buf, ip_arg, n);
	buf[n] = 0;
	if (!ip4addr_aton(buf, &addr))
		kernel_usage_error("cmdline", "bad value '%s' for key 'ip' (not an IPv4 address)",
		                   ip_arg);
	ip4_addr_set_u32(&mask, lwip_htonl(0xffffffffu << (32 - prefix)));
	if (gw_arg && !ip4addr_aton(gw_arg, &gw))
		kernel_usage_error("cmdline", "bad value '%s' for key 'gw' (not an IPv4 address)",
		                   gw_arg);
}

void net_configure_link(void)
{
	/* A label only: the host says which backend it gave us, so result
	 * lines are self-describing (the guest cannot tell tap from vhost). */
	backend = cmdline_str("backend", "unknown");
	vnet_rss_set_peer_kick(cmdline_bool("rss.peer_kick", true));
	vnet_set_status_period(
	    (uint32_t)cmdline_u64("vnet.status_ms", VNET_STATUS_MS_DEFAULT, 1, 60000));
}

static void configure_ip(void)
{
	ip_arg = cmdline_str("ip", "dhcp");
	gw_arg = cmdline_str("gw", NULL);
	dhcp_timeout_s = cmdline_u64("net.dhcp_timeout", 10, 1, 600);
	vnetif_rx_hold_max = (long)cmdline_u64("net.rx_hold_max", (uint64_t)-1 >> 1, 0, 32768);
	net_configure_link();
	use_dhcp = !strcmp(ip_arg, "dhcp");
	if (use_dhcp && gw_arg)
		kernel_usage_error("cmdline", "key 'gw' needs a static ip=A.B.C.D/PREFIX");
	if (!use_dhcp)
		parse_ip();
}

static void configure_queues(bool supported)
{
	if (!supported) {
		cmdline_only_if("mq", false, "app=echo, app=pkt, app=rr and app=stream");
		return;
	}
	queues = (unsigned)cmdline_u64("mq", 1, 1, VNET_MQ_MAX);
	if (queues == 1 || net_inst_index())
		return;
	if (queues > net_inst_count())
		kernel_usage_error("cmdline",
		                   "key 'mq': mq=%u but this build links %u copies of the TCP/IP "
		                   "side (make NET_INSTANCES=%u)",
		                   queues, net_inst_count(), queues);
	if (queues > smp_requested())
		kernel_usage_error(
		    "cmdline",
		    "key 'mq': mq=%u needs smp=%u or more (one vCPU per queue pair), "
		    "got smp=%u",
		    queues, queues, smp_requested());
	if (use_dhcp)
		kernel_usage_error("cmdline",
		                   "key 'mq': mq=%u needs a static ip=A.B.C.D/PREFIX (one address "
		                   "for every copy; DHCP would lease one per copy)",
		                   queues);
	for (unsigned k = 1; k < queues; k++)
		net_inst_get(k)->configure(k);
}

void net_configure(void)
{
	configure_ip();
	configure_queues(false);
}

void net_configure_mq(void)
{
	configure_ip();
	configure_queues(true);
}

unsigned net_inst_queues(void)
{
	return queues;
}

const char *net_backend(void)
{
	return backend;
}

struct netif *net_netif(void)
{
	return &netif;
}

struct vnet *net_vnet(void)
{
	return vn;
}

static void fail_if_device_broken(void)
{
	if (vnet_check(vn) < 0) {
		kernel_set_error_hook(NULL); /* the counters below include the IDLE line */
		vnet_print_counters(vn);
		vnet_print_rings(vn); /* as every other ERROR's dump (print_counters_on_error) */
		kernel_error("virtio-net", "%s (backend %s)", vnet_error(vn), backend);
	}
}

void net_poll(void)
{
	prof_enter(PROF_POLL);
	int r = vnet_poll(vn);
	prof_exit();
	if (r < 0)
		fail_if_device_broken();
	vnetif_input_all(&netif);
	if (queues > 1)
		vnetif_input_shared_arp(&netif);
	prof_enter(PROF_TIMERS);
	sys_check_timeouts();
	prof_exit();
}

void net_end_pass(void)
{
	vnet_tx_end_burst(vn);
}

/* The end of a run counts as a wait: nothing may stay unkicked, and the
 * device must have sent everything before the caller prints and exits. */
#define DRAIN_NS 100000000ull

void net_drain(void)
{
	if (vnet_drain(vn, DRAIN_NS) == -1) {
		printf("net warning: TX not drained within %llu ms\n", DRAIN_NS / 1000000);
		vnet_print_rings(vn);
	}
}

/* The halt policies' deadline: the end of this run or lwIP's next timer,
 * whichever comes first. */
static uint64_t net_deadline(void *arg)
{
	uint64_t end = *(const uint64_t *)arg;
	u32_t ms = sys_timeouts_sleeptime();

	if (ms != SYS_TIMEOUTS_SLEEPTIME_INFINITE) {
		uint64_t t = clock_ns() + (uint64_t)ms * 1000000ull;
		if (t < end)
			end = t;
	}
	return end;
}

int net_run(bool (*done)(void *), void *arg, uint64_t timeout_ns, void (*tick)(void *))
{
	uint64_t end = clock_ns() + timeout_ns;
	if (net_inst_index())
		net_inst_set_ready(net_inst_index()); /* its app set up what it serves */
	for (;;) {
		net_poll();
		if (tick) {
			prof_enter(PROF_APP);
			tick(arg);
			prof_exit();
		}
		net_end_pass();
		int r = done && done(arg) ? 0 : clock_ns() > end ? -1 : 1;
		if (r <= 0) {
			/* Whatever the caller does next (print, exit, wait on
			 * something else), no kick may stay pending: a deferred
			 * or timer-held frame, e.g. the reply to "stop", must
			 * reach the device now. */
			net_drain();
			return r;
		}
		prof_enter(PROF_IDLE);
		vnet_idle(vn, net_deadline, &end);
		prof_exit();
	}
}

static bool dhcp_bound(void *unused)
{
	(void)unused;
	return dhcp_supplied_address(&netif);
}

/* The negotiated offloads as "tx_csum,rx_csum,tso4,lro4" (only those
 * present; "" for none), for the memory line and every RESULT. */
const char *net_offloads(void)
{
	static const struct {
		unsigned bit;
		const char *name;
	} names[] = {{VNET_OFF_TX_CSUM, "tx_csum"},
	             {VNET_OFF_RX_CSUM, "rx_csum"},
	             {VNET_OFF_TSO4, "tso4"},
	             {VNET_OFF_LRO4, "lro4"}};
	static char buf[40];
	size_t used = 0;

	buf[0] = 0;
	for (size_t i = 0; i < ARRAY_SIZE(names); i++)
		if (vnet_offloads(vn) & names[i].bit)
			used += (size_t)snprintf(buf + used, sizeof(buf) - used, "%s%s",
			                         used ? "," : "", names[i].name);
	return buf;
}

/* Once at boot: what this build set aside for the data path, so a run's
 * memory footprint is on record next to its results. */
static void print_memory(void)
{
	size_t rx, tx, rings, pools = 0;

	vnet_memory(vn, &rx, &tx, &rings);
	for (int i = 0; i < MEMP_MAX; i++)
		pools += (size_t)memp_pools[i]->num * memp_pools[i]->size;
	printf("memory {\"rx_buffers\":%lu,\"tx_slots\":%lu,\"rings\":%lu,\"lwip_pools\":%lu,"
	       "\"heap\":%lu,\"tcp_wnd\":%lu,\"tcp_snd_buf\":%lu,\"offloads\":\"%s\"}\n",
	       (unsigned long)rx, (unsigned long)tx, (unsigned long)rings, (unsigned long)pools,
	       (unsigned long)heap_size(), (unsigned long)TCP_WND, (unsigned long)TCP_SND_BUF,
	       net_offloads());
}

/* A failed run still says what its rings and stack saw and how it waited
 * (COUNTERS, NETIF, LWIPSTATS, POOLS and the IDLE line), e.g. a server
 * whose client never came: halted, woken by its timer; a pair whose frames
 * stopped arriving: which side and which queue. */
static void print_counters_on_error(void)
{
	if (netif.state)
		net_print_counters();
	else
		vnet_print_counters(vn); /* the netif never came up */
	if (vn)
		vnet_print_rings(vn);
}

struct vnet *net_open(void)
{
	return net_open_mq(1);
}

struct vnet *net_open_mq(unsigned pairs)
{
	char err[256];
	vn = vnet_open_mq(pairs, err, sizeof(err));
	if (!vn)
		kernel_error("virtio-net", "%s", err);
	kernel_set_error_hook(print_counters_on_error);
	return vn;
}

void net_attach_pair0(void *vn0)
{
	pair0 = vn0;
}

/* mq=N, copy 0: the other copies start on their vCPUs, each on its pair,
 * and copy 0 goes on only when every one of them polls its queue. */
static void start_copies(void)
{
	for (unsigned k = 1; k < queues; k++)
		if (smp_run(k, net_inst_get(k)->run, vn))
			kernel_error("net", "mq=%u: vCPU %u is not idle for copy %u", queues, k, k);
	uint64_t t0 = clock_ns();
	while (!net_inst_all_ready(queues)) {
		if (clock_ns() - t0 > INST_READY_NS)
			kernel_error("net",
			             "mq=%u: a copy of the TCP/IP side was not polling its "
			             "queue within %llu s",
			             queues, INST_READY_NS / 1000000000ull);
		cpu_relax();
	}
}

unsigned net_client_share(const char *key, unsigned total)
{
	unsigned k = net_inst_index();

	if (total < queues)
		kernel_usage_error("cmdline",
		                   "key '%s': %u connections cannot give each of mq=%u queues one "
		                   "(%s=%u or more)",
		                   key, total, queues, key, queues);
	return total / queues + (k < total % queues);
}

#define LOCAL_PORT_FIRST 49152u /* IANA's dynamic ports, lwIP's own range */
#define LOCAL_PORTS      16384u

bool net_bind_local_port(struct udp_pcb *udp, struct tcp_pcb *tcp, const ip_addr_t *peer,
                         uint16_t peer_port)
{
	static unsigned next;
	uint8_t from[4], to[4];

	if (queues == 1)
		return true;
	if (!vnet_rss())
		kernel_error("net",
		             "mq=%u: a client's replies reach its copy's queue only with "
		             "VIRTIO_NET_F_RSS, which the device does not offer (QEMU: "
		             "virtio-net-pci,rss=on; host/qemu-run.sh --queues sets it)",
		             queues);
	memcpy(from, &ip_2_ip4(peer)->addr, 4);
	memcpy(to, &addr.addr, 4);
	if (!next)
		next = LWIP_RAND(); /* a start of its own per boot */
	for (unsigned i = 0; i < LOCAL_PORTS; i++) {
		u16_t port = (u16_t)(LOCAL_PORT_FIRST + next++ % LOCAL_PORTS);
		if (vnet_rss_rx_queue(from, to, peer_port, port) != (int)net_inst_index())
			continue;
		err_t e = udp ? udp_bind(udp, IP_ANY_TYPE, port) : tcp_bind(tcp, IP_ANY_TYPE, port);
		if (e == ERR_OK)
			return true;
	}
	return false;
}

void net_join_copies(void)
{
	if (queues == 1 || net_inst_index())
		return;
	net_inst_stop();
	for (unsigned k = 1; k < queues; k++) {
		int ret;
		if (smp_join(k, INST_JOIN_NS, &ret))
			kernel_error("net", "mq=%u: copy %u did not end within %llu s of the stop",
			             queues, k, INST_JOIN_NS / 1000000000ull);
		if (ret != EXIT_OK)
			kernel_error("net", "mq=%u: copy %u ended with status %d", queues, k, ret);
	}
}

/* Copy k > 0 on vCPU k: pair k of the device copy 0 brought up, the same
 * address, its own lwIP. It prints nothing before the run's end. */
static void up_copy(void)
{
	unsigned k = net_inst_index();
	vn = vnet_queue(pair0, k);
	if (!vn)
		kernel_error("net", "copy %u: the device has no queue pair %u", k, k);
	lwip_init();
	if (!netif_add(&netif, &addr, &mask, &gw, vn, vnetif_init, ethernet_input))
		kernel_error("net", "copy %u: netif_add failed", k);
	netif_set_default(&netif);
	netif_set_up(&netif);
	netif_set_link_up(&netif);
}

void net_up(void)
{
	if (net_inst_index()) {
		up_copy();
		return;
	}
	net_open_mq(queues);
	lwip_init();
	if (!netif_add(&netif, use_dhcp ? NULL : &addr, use_dhcp ? NULL : &mask,
	               use_dhcp ? NULL : &gw, vn, vnetif_init, ethernet_input))
		kernel_error("net", "netif_add failed");
	netif_set_default(&netif);
	netif_set_up(&netif);
	print_memory();
	if (vnet_link_up(vn))
		netif_set_link_up(&netif);
	else
		kernel_error("net", "link is down (device STATUS says no carrier)");
	if (use_dhcp) {
		if (dhcp_start(&netif) != ERR_OK)
			kernel_error("net", "dhcp_start failed");
		if (net_run(dhcp_bound, NULL, dhcp_timeout_s * 1000000000ull, NULL) < 0)
			kernel_error("net", "no DHCP lease within %lu s", dhcp_timeout_s);
	}
	const uint8_t *m = netif.hwaddr;
	printf("net ip=%s", ip4addr_ntoa(netif_ip4_addr(&netif)));
	printf(" mask=%s", ip4addr_ntoa(netif_ip4_netmask(&netif)));
	printf(" gw=%s mac=%02x:%02x:%02x:%02x:%02x:%02x mtu=%u config=%s\n",
	       ip4addr_ntoa(netif_ip4_gw(&netif)), m[0], m[1], m[2], m[3], m[4], m[5], vnet_mtu(vn),
	       use_dhcp ? "dhcp" : "static");
	if (queues > 1)
		start_copies();
}

uint64_t net_lwip_drops(void)
{
	return (uint64_t)lwip_stats.link.drop + lwip_stats.etharp.drop + lwip_stats.ip.drop +
	       lwip_stats.icmp.drop + lwip_stats.udp.drop + lwip_stats.tcp.drop +
	       vnetif_arpq_drops() + net_tcp_ooseq_drops() + flood_frame_drops();
}

void net_print_state(void)
{
	vnet_print_rings(vn);
	for (struct tcp_pcb *p = tcp_active_pcbs; p; p = p->next) {
		unsigned unsent = 0, unacked = 0;
		unsigned long first = p->unsent ? p->unsent->len : 0;

		for (struct tcp_seg *s = p->unsent; s; s = s->next)
			unsent++;
		for (struct tcp_seg *s = p->unacked; s; s = s->next)
			unacked++;
		printf(
		    "TCP {\"local\":%u,\"remote\":%u,\"state\":\"%s\",\"in_flight\":%lu,"
		    "\"snd_wnd\":%lu,\"snd_wnd_max\":%lu,\"cwnd\":%lu,\"mss\":%u,\"unsent\":%u,"
		    "\"first_unsent_len\":%lu,\"unacked\":%u,\"snd_queuelen\":%u,\"snd_buf\":%lu,"
		    "\"rcv_wnd\":%lu,\"rcv_ann_wnd\":%lu,\"persist_backoff\":%u,\"nrtx\":%u,"
		    "\"rtime\":%d,\"rto\":%d,\"refused\":%d,\"ooseq\":%d}\n",
		    p->local_port, p->remote_port, tcp_debug_state_str(p->state),
		    (unsigned long)(p->snd_nxt - p->lastack), (unsigned long)p->snd_wnd,
		    (unsigned long)p->snd_wnd_max, (unsigned long)p->cwnd, p->mss, unsent, first,
		    unacked, p->snd_queuelen, (unsigned long)p->snd_buf, (unsigned long)p->rcv_wnd,
		    (unsigned long)p->rcv_ann_wnd, p->persist_backoff, p->nrtx, p->rtime, p->rto,
		    p->refused_data != NULL, p->ooseq != NULL);
	}
	vnetif_print_pool_line(vn);
}

void net_print_counters(void)
{
	kernel_set_error_hook(NULL); /* an ERROR after this needs no second IDLE line */
	vnet_print_counters(vn);
	const struct stats_mem *pool = lwip_stats.memp[MEMP_PBUF_POOL];
	const struct stats_mem *seg = lwip_stats.memp[MEMP_TCP_SEG];
	const struct vnetif_stats *ns = vnetif_stats();
	printf("NETIF {\"tx_clones\":%lu,\"tx_csum\":%lu,\"tx_tso\":%lu,\"tx_acks\":%lu,"
	       "\"tso_conns\":%lu,\"tso_no_pcb\":%lu,\"rx_copies\":%lu,\"rx_nomem\":%lu,"
	       "\"rx_big\":%lu,\"rx_drops\":%lu,\"ip_frags\":%lu,\"arpq_queued\":%lu,"
	       "\"arpq_sent\":%lu,\"arp_posted\":%lu,\"arp_taken\":%lu,\"arp_post_drops\":%llu,"
	       "\"rss_misses\":%lu,\"queue\":%u}\n",
	       ns->tx_clones, offload_st.tx_csum, offload_st.tx_tso, offload_st.tx_acks,
	       offload_st.tso_conns, offload_st.tso_no_pcb, ns->rx_copies, ns->rx_nomem, ns->rx_big,
	       ns->rx_drops, ns->ip_frags, ns->arpq_queued, ns->arpq_sent, ns->arp_posted,
	       ns->arp_taken, (unsigned long long)net_inst_arp_dropped(net_inst_index()),
	       ns->rss_misses, net_inst_index());
	const struct flood_stats *fs = flood_stats();
	printf("FLOOD {\"synq_max\":%u,\"synq_peak\":%lu,\"synq_evicted\":%lu,"
	       "\"arp_pending_max\":%u,\"arp_pending\":%lu,\"arp_pending_full\":%lu,"
	       "\"arp_queue_max\":%u,\"arp_queue_full\":%lu,\"reply_rate\":%u,"
	       "\"reply_limited\":%lu}\n",
	       FLOOD_SYNQ_MAX, fs->synq_peak, fs->synq_evicted, FLOOD_ARP_PENDING_MAX,
	       fs->arp_pending, fs->arp_pending_full, FLOOD_ARP_QUEUE_MAX, fs->arp_queue_full,
	       FLOOD_REPLY_RATE, fs->reply_limited);
	printf("LWIPSTATS {\"link_drop\":%u,\"link_err\":%u,\"link_memerr\":%u,\"tx_drops\":%lu,"
	       "\"etharp_drop\":%u,\"ip_drop\":%u,\"ip_chkerr\":%u,\"ip_lenerr\":%u,"
	       "\"icmp_drop\":%u,\"udp_drop\":%u,\"udp_chkerr\":%u,\"tcp_drop\":%u,"
	       "\"tcp_chkerr\":%u,\"tcp_rexmit\":%u,\"mem_err\":%u,"
	       "\"pbuf_pool_used\":%lu,\"pbuf_pool_max\":%lu,\"pbuf_pool_err\":%u,"
	       "\"tcp_seg_max\":%lu,\"tcp_seg_err\":%u,\"tcp_ooseq_drop\":%llu,"
	       "\"tcp_ooseq_drop_bytes\":%llu",
	       lwip_stats.link.drop, lwip_stats.link.err, lwip_stats.link.memerr, vnetif_tx_drops(),
	       lwip_stats.etharp.drop, lwip_stats.ip.drop, lwip_stats.ip.chkerr,
	       lwip_stats.ip.lenerr, lwip_stats.icmp.drop, lwip_stats.udp.drop,
	       lwip_stats.udp.chkerr, lwip_stats.tcp.drop, lwip_stats.tcp.chkerr,
	       lwip_stats.mib2.tcpretranssegs, lwip_stats.mem.err, (unsigned long)pool->used,
	       (unsigned long)pool->max, pool->err, (unsigned long)seg->max, seg->err,
	       (unsigned long long)net_tcp_ooseq_drops(),
	       (unsigned long long)net_tcp_ooseq_drop_bytes());
	vnetif_print_pools(&netif); /* the rest of LWIPSTATS, POOLS, a warning per exhausted pool */
}
