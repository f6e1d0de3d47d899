/*
 * net.h: the network layer (lwIP on the virtio-net driver) as the apps see
 * it, grouped by owning file. Apps use lwIP's raw API for sockets-like work
 * and these calls for bring-up, the main loop and counters.
 */
#ifndef VNETLAB_NET_H
#define VNETLAB_NET_H

#include <stdbool.h>
#include <stdint.h>
#include "lwip/ip_addr.h"
#include "lwip/netif.h"

/* net.c: configuration, bring-up and the NO_SYS main loop */
void net_configure(void);      /* claims ip=, gw= (before cmdline_finish) */
void net_configure_link(void); /* backend= alone, for a driver-only app (net_configure has it) */
/* net_configure() plus mq=N: the app runs as N copies, one per queue pair
 * and vCPU (net/inst.h); net_up() in copy 0 starts the others. */
void net_configure_mq(void);
void net_attach_pair0(void *vn0); /* copy k > 0, before its app_main() */
/* Copy 0, after its run: stop every other copy and wait for it (bounded). */
void net_join_copies(void);
/* mq=N, a client: this copy's share of `total` connections given by key
 * (the first total % N copies one more); fewer than N is a usage error. */
unsigned net_client_share(const char *key, unsigned total);
struct udp_pcb;
struct tcp_pcb;
/* A client's socket (one of the two, the other NULL), before it connects
 * to peer:peer_port: mq=N binds it to a free local port in 49152..65535
 * whose replies the device's RSS puts on this copy's queue (so no two
 * copies, which share one address, pick the same port either); without
 * RSS an ERROR. mq=1 leaves the choice to lwIP. False: no such port free. */
bool net_bind_local_port(struct udp_pcb *udp, struct tcp_pcb *tcp, const ip_addr_t *peer,
                         uint16_t peer_port);
/* Open the NIC without lwIP (driver-only apps, app=pkt): an ERROR line
 * then prints the driver's counters and rings; net_vnet() and the result
 * line's labels work as with net_up(). */
struct vnet *net_open(void);
struct vnet *net_open_mq(unsigned pairs); /* app=pkt mq=N: the first pair (vnet_queue()) */
/* Open the NIC, add the netif, configure IPv4 (static or DHCP, bounded
 * wait). Prints "net ip=... gw=... mac=..." or an ERROR line and exits. */
void net_up(void);
struct netif *net_netif(void);
struct vnet *net_vnet(void); /* the driver under the netif, for counter snapshots */
/* A snapshot for a stalled run: RING lines of both queues, a TCP {...}
 * line per active connection (lwIP's send/receive state), POOLS. */
void net_print_state(void);
const char *net_backend(void);  /* backend= label from the host, for RESULT lines */
const char *net_offloads(void); /* negotiated offloads, "tx_csum,rx_csum,tso4,lro4" or less */
/* One pass of the loop: poll the device, feed lwIP, run its timers. */
void net_poll(void);
/* End of a pass: the burst point for kick batching. */
void net_end_pass(void);
/* Run passes until done(arg) is true (0), the timeout passes (-1), or the
 * device fails (-2: ERROR line already printed by the caller's choice). */
int net_run(bool (*done)(void *), void *arg, uint64_t timeout_ns, void (*tick)(void *));
/* Flush every pending kick (the end of a run counts as a wait). */
void net_drain(void);
void net_print_counters(void); /* driver COUNTERS lines + LWIPSTATS line */
uint64_t net_lwip_drops(void); /* frames/segments lwIP dropped (all layers) */

/* netif.c: the lwIP netif on the driver (zero-copy RX, burst TX) */
struct vnet;
struct vnet_txo;
struct tcp_pcb;
struct vnetif_stats {
	uint64_t tx_drops;    /* frames dropped after bounded back-pressure, or unsendable */
	uint64_t tx_clones;   /* frames flattened into a copy before sending (zero copy lost) */
	uint64_t rx_copies;   /* frames copied because the stack held half the RX ring */
	uint64_t rx_nomem;    /* frames dropped: no memory for that copy */
	uint64_t rx_big;      /* frames over 64 KB handed to IP without the Ethernet header */
	uint64_t rx_drops;    /* frames over 64 KB that are not IPv4 to our MAC */
	uint64_t ip_frags;    /* datagrams netif.c fragmented at the link MTU */
	uint64_t arpq_queued; /* IPv4 frames lwIP queued on an unresolved ARP entry */
	uint64_t arpq_sent;   /* of those, sent once the entry resolved */
	uint64_t arp_posted;  /* mq=N: ARP frames this copy passed to the others */
	uint64_t arp_taken;   /* mq=N: ARP frames the others passed to this copy */
	uint64_t rss_misses;  /* mq=N, RSS: TCP/UDP frames on a queue RSS did not name */
};
extern long vnetif_rx_hold_max;             /* net.rx_hold_max (net.c sets it before net_up) */
err_t vnetif_init(struct netif *netif);     /* netif_add() init callback; state = struct vnet * */
void vnetif_input_all(struct netif *netif); /* hand every received frame to lwIP */
/* mq=N: the ARP frames the other copies received (net/inst.h mailboxes). */
void vnetif_input_shared_arp(struct netif *netif);
uint64_t vnetif_tx_drops(void);
/* Frames lwIP queued on an ARP entry and freed unsent (the entry expired
 * unresolved or was recycled): lwIP counts nothing there. */
uint64_t vnetif_arpq_drops(void);
uint64_t net_tcp_ooseq_drops(void);      /* out-of-order segments lwIP discarded (ooseq.c) */
uint64_t net_tcp_ooseq_drop_bytes(void); /* their payload bytes */
/* "backend tap: no frame received for N ms", for the ERROR line of a run
 * whose peer went silent: says whether the wire itself went quiet. */
const char *vnetif_silence(void);
/* The end of LWIPSTATS (fragments, reassembly, pool errors), then POOLS {...}:
 * what is in use now (RX buffers held, every lwIP pool, heap), so a run's end
 * can be compared with its warm-up; a warning per exhausted pool. */
void vnetif_print_pools(struct netif *netif);
void vnetif_print_pool_line(struct vnet *vn); /* the POOLS line alone, any time */
const struct vnetif_stats *vnetif_stats(void);

/* flood.c: bounds on what a flood of unanswerable requests may hold */
struct flood_stats {
	uint64_t synq_evicted;     /* half-open pcbs abandoned for a newer SYN */
	uint64_t synq_peak;        /* most half-open pcbs one listener had */
	uint64_t arp_pending;      /* addresses pending ARP now (shadowed) */
	uint64_t arp_pending_full; /* frames dropped: no free ARP slot for their address */
	uint64_t arp_queue_full;   /* frames dropped: their address already has a full queue */
	uint64_t reply_limited;    /* RSTs and ICMP errors over the reply rate, dropped */
};
/* netif->output: may this IPv4 datagram to dst leave now? false = drop it,
 * counted (a pending ARP entry would recycle a resolved one, its queue is
 * full, or it is an RST / ICMP error over the rate). */
bool flood_output_admit(struct netif *netif, const struct pbuf *p, const ip4_addr_t *dst);
const struct flood_stats *flood_stats(void);
uint64_t flood_frame_drops(void); /* every frame flood.c dropped */

/* offload.c: checksum offload and TSO on the lwIP side */
struct offload_stats {
	uint64_t tx_csum;    /* TCP frames sent NEEDS_CSUM */
	uint64_t tx_tso;     /* of those, GSO frames (larger than the MTU) */
	uint64_t tx_acks;    /* TCP frames without payload, SYN, FIN or RST: pure ACKs */
	uint64_t tso_no_pcb; /* TSO frames whose connection was not found (MTU-based MSS) */
	uint64_t tso_conns;  /* connections sized for TSO */
};
extern struct offload_stats offload_st;
void offload_init(struct netif *netif, unsigned vnet_offloads, uint16_t link_mtu);
bool offload_tso(void);                         /* the device takes 64 KB TCP segments */
uint16_t offload_rx_flags(uint32_t vnet_flags); /* lwIP checksum flags for one received frame */
/* Fill o for the Ethernet frame p: 1 = offload requested (TCP checksum
 * field now holds the pseudo-header sum), 0 = none, -1 = headers not in
 * the first pbuf (flatten, then ask again). */
int offload_tx(struct pbuf *p, struct vnet_txo *o, uint16_t max_frame);
/* From a connected callback: size an established connection for TSO now
 * (the input hook does it on the connection's next segment otherwise). */
void offload_tcp_established(struct tcp_pcb *pcb);

#endif
