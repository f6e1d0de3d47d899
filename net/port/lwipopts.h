/*
 * lwipopts.h: lwIP configuration for vnetlab. lwIP's opt.h supplies every
 * default; this file overrides only what differs, each with its reason.
 * The model is a NO_SYS=1 (raw API, one thread, polled) stack sized for the
 * benchmarks: up to 128+ concurrent TCP connections, 1500-byte MTU on the
 * wire, 64 KB TCP segments to and from the device when it offers TSO and
 * large receive (net/offload.c), and windows for a >= 1 MB bandwidth-delay
 * product.
 */
#ifndef VNETLAB_LWIPOPTS_H
#define VNETLAB_LWIPOPTS_H

/* ---- platform ---- */
#define NO_SYS                1 /* no threads: the poll loop drives everything */
#define SYS_LIGHTWEIGHT_PROT  0 /* interrupts only end a HLT, no preemption: nothing to protect */
#define LWIP_NETCONN          0 /* sequential APIs need threads */
#define LWIP_SOCKET           0
#define MEM_ALIGNMENT         8 /* x86-64: keep 64-bit fields aligned */
#define LWIP_ERRNO_STDINCLUDE 1 /* picolibc's errno.h */
#define LWIP_TIMERS           1

/* ---- memory: from picolibc's malloc, so pools are sized only by the heap ---- */
#define MEM_LIBC_MALLOC 1 /* one heap for everything; lwIP's own heap would be a 2nd fixed cap */
#define MEMP_MEM_MALLOC 0 /* pools stay fixed so exhaustion is visible in stats */
#define PBUF_POOL_SIZE                                                                             \
	1024 /* RX is zero-copy (custom pbufs); the pool feeds TX copies and reassembly */
#define MEMP_NUM_PBUF 4096 /* PBUF_ROM headers for no-copy tcp_write: ~1 per segment */
/* The driver writes the 12-byte virtio-net header in front of every frame
 * it sends without a copy (vnet_tx_headroom): lwIP reserves it in every
 * pbuf it allocates for output, so TCP segments are never cloned. */
#define PBUF_LINK_ENCAPSULATION_HLEN 12

/* ---- protocols ---- */
#define LWIP_IPV4                     1
#define LWIP_IPV6                     0 /* the benchmarks are IPv4; IPv6 would only add ND chatter */
#define LWIP_ARP                      1
#define LWIP_ICMP                     1
#define LWIP_RAW                      0
#define LWIP_DHCP                     1 /* ip=dhcp under slirp */
#define LWIP_UDP                      1
#define LWIP_TCP                      1
#define LWIP_DNS                      0
#define LWIP_IGMP                     0
#define IP_REASSEMBLY                 1
#define IP_FRAG                       1
#define LWIP_NETIF_LINK_CALLBACK      1 /* link status from the device */
#define LWIP_NETIF_STATUS_CALLBACK    1 /* print the address once DHCP binds */
#define ETHARP_SUPPORT_STATIC_ENTRIES 0
/* Room for resolved peers beside the pending entries net/flood.c allows
 * (FLOOD_ARP_PENDING_MAX), which may only take free slots. */
#define ARP_TABLE_SIZE 32
#define ETH_PAD_SIZE   0

/* ---- full-size IP datagrams both ways (a stock guest answers `ping -s 65507`) ----
 * A 64 KB datagram is 45 fragments at a 1500-byte MTU. Reassembly holds each
 * fragment's zero-copy RX buffer: room for two such datagrams at once stays
 * below the half of the RX ring after which netif.c copies frames instead.
 * The oldest incomplete datagram is evicted first (counted: LWIPSTATS
 * reasm_fails); a lost fragment pins buffers until its datagram ages out,
 * 5 s instead of lwIP's 15. */
#define IP_REASS_MAX_PBUFS 96
#define MEMP_NUM_REASSDATA 8
#define IP_REASS_MAXAGE    5
/* ip4_frag() references the datagram from one pbuf per fragment, held until
 * the device has sent it (zero-copy TX): two datagrams' worth. */
#define MEMP_NUM_FRAG_PBUF 96
/* Frames waiting for an ARP reply are queued, not replaced: lwIP's default
 * (ARP_QUEUEING 0) frees the previous frame for the same address without a
 * counter, and ARP_QUEUE_LEN would drop the oldest the same way. net/flood.c
 * bounds the addresses pending at once and the frames queued on each
 * (counted), and the pool holds them all, so it never runs dry.
 * test_robust: five replies waiting for one ARP answer all go out (1 of 5
 * with lwIP's default). */
#define ARP_QUEUEING          1
#define ARP_QUEUE_LEN         0
#define FLOOD_ARP_PENDING_MAX 8
#define FLOOD_ARP_QUEUE_MAX   8
#define MEMP_NUM_ARP_QUEUE    (FLOOD_ARP_PENDING_MAX * FLOOD_ARP_QUEUE_MAX)
/* A SYN flood (net/flood.c): half-open pcbs per listener before the oldest
 * is evicted (a quarter of MEMP_NUM_TCP_PCB short of the pool: established
 * connections keep room), and RSTs / ICMP errors per second (burst). */
#define FLOOD_SYNQ_MAX    128
#define FLOOD_REPLY_RATE  1000
#define FLOOD_REPLY_BURST 250

/* ---- TCP sized for RR with 100+ instances and bulk streams ---- */
#define TCP_MSS                 1460 /* 1500 MTU - 40: what we advertise and what SYNs carry */
#define MEMP_NUM_TCP_PCB        320 /* 256 concurrent connections (test_robust) + TIME_WAIT + spare */
#define MEMP_NUM_TCP_PCB_LISTEN 8
#define MEMP_NUM_UDP_PCB        160 /* UDP_RR instances */
/* Windows for a bandwidth-delay product of >= 1 MB (RFC 7323 scaling):
 * 1 MiB receive window advertised with shift 5 (32 KiB .. 2 MiB). */
#define LWIP_WND_SCALE   1
#define TCP_RCV_SCALE    5
#define TCP_WND          (1024 * 1024)
#define TCP_SND_BUF      (1024 * 1024) /* so STREAM never waits on us */
#define TCP_SND_QUEUELEN (4 * TCP_SND_BUF / TCP_MSS)
/* Only the socket API's select() reads it; lwIP's sanity check wants it
 * to fit 16 bits, which its default (half the send buffer) would not. */
#define TCP_SNDLOWAT (32 * 1024)
/* Announce a reopened window after a quarter of it (lwIP's default, 4 MSS,
 * would send a window-update ACK for every 64 KB segment consumed). */
#define TCP_WND_UPDATE_THRESHOLD (TCP_WND / 4)
#define MEMP_NUM_TCP_SEG         4096    /* segments queued across all connections */
#define TCP_OVERSIZE             TCP_MSS /* fewer, fuller segments for small writes */
#define LWIP_TCP_TIMESTAMPS      0
#define TCP_QUEUE_OOSEQ          1
/* Out-of-order data pins zero-copy RX buffers: bound it per connection
 * (a quarter of the RX ring; net/netif.c copies frames once the stack
 * holds half the ring, so the device can never be starved). */
#define TCP_OOSEQ_MAX_PBUFS 64
#define TCP_OOSEQ_MAX_BYTES TCP_WND
/* lwIP's per-pcb form of the same bound: net/ooseq.c counts what it drops. */
#define TCP_OOSEQ_PBUFS_LIMIT(pcb) vnet_tcp_ooseq_pbufs_limit(pcb)
#define TCP_LISTEN_BACKLOG         0
/* net/offload.c keeps each connection's real MSS here while lwIP builds
 * 64 KB segments for TSO; the hook gives it the moment a connection is up. */
#define LWIP_TCP_PCB_NUM_EXT_ARGS 1
#define LWIP_HOOK_FILENAME        "net/port/hooks.h"
/* ... and net/flood.c bounds half-open connections from the same hook,
 * on a listening pcb just before it takes a SYN. */
#define LWIP_HOOK_TCP_INPACKET_PCB(pcb, hdr, optlen, opt1len, opt2, p) flood_tcp_inpacket(pcb, hdr)

/* ---- checksums: per netif and per frame (net/offload.c) ----
 * Software by default; with the device's CSUM lwIP leaves TCP checksums to
 * the device, and a received frame the device vouched for (DATA_VALID,
 * NEEDS_CSUM) skips lwIP's TCP/UDP check. UDP, ICMP and IP checksums are
 * always generated here (a fragmented UDP datagram cannot be offloaded);
 * received ICMP and IP headers are always verified, UDP only when the
 * device did not vouch for the frame (net/offload.c). */
#define LWIP_CHECKSUM_CTRL_PER_NETIF 1
#define CHECKSUM_GEN_IP              1
#define CHECKSUM_GEN_UDP             1
#define CHECKSUM_GEN_TCP             1
#define CHECKSUM_CHECK_IP            1 /* malformed-frame tests count these drops */
#define CHECKSUM_CHECK_UDP           1
#define CHECKSUM_CHECK_TCP           1
#define LWIP_CHECKSUM_ON_COPY        0
/* PROFILE builds time every software checksum (net/offload.c wraps lwIP's
 * own routine, algorithm 2, its default). */
#if defined(VNETLAB_PROFILE) && VNETLAB_PROFILE
#define LWIP_CHKSUM           offload_prof_chksum
#define LWIP_CHKSUM_ALGORITHM 2
unsigned short offload_prof_chksum(const void *data, int len);
#endif
/* ---- statistics: printed with the driver counters at the end of a run ---- */
#define LWIP_STATS         1
#define LWIP_STATS_DISPLAY 0 /* compact LWIPSTATS line from net_print_counters() */
#define LINK_STATS         1
#define ETHARP_STATS       1
#define IP_STATS           1
#define IPFRAG_STATS       1
#define ICMP_STATS         1
#define UDP_STATS          1
#define TCP_STATS          1
#define MEM_STATS          1
#define MEMP_STATS         1
#define SYS_STATS          0
#define MIB2_STATS         1 /* for the TCP retransmission count (tcpretranssegs) */

/* ---- zero-copy RX: custom pbufs wrapping driver buffers ---- */
#define LWIP_SUPPORT_CUSTOM_PBUF 1

#define LWIP_DEBUG 0

#if TCP_SND_BUF > 0xffff && !LWIP_WND_SCALE
#error "TCP_SND_BUF above 64 KiB needs LWIP_WND_SCALE"
#endif
#if TCP_WND > 0xffff && !LWIP_WND_SCALE
#error "TCP_WND above 64 KiB needs LWIP_WND_SCALE"
#endif
#if !NO_SYS
#error "vnetlab has no threads: NO_SYS must be 1"
#endif

#endif
