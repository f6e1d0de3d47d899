/*
 * lwipopts.h: lwIP configuration for vnetlab. lwIP's opt.h supplies every
 * default; this file overrides only what differs, each with its reason.
 * The model is a NO_SYS=1 (raw API, one thread, polled) stack sized for the
 * benchmarks: up to 128+ concurrent TCP connections and 1500-byte MTU.
 */
#ifndef VNETLAB_LWIPOPTS_H
#define VNETLAB_LWIPOPTS_H

/* ---- platform ---- */
#define NO_SYS                1 /* no threads: the poll loop drives everything */
#define SYS_LIGHTWEIGHT_PROT  0 /* no interrupts, no preemption: nothing to protect */
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
#define MEMP_NUM_PBUF 1024 /* PBUF_REF/ROM headers for zero-copy TX */

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
#define ARP_TABLE_SIZE                16
#define ETH_PAD_SIZE                  0

/* ---- TCP sized for RR with 100+ instances and 16K streams ---- */
#define TCP_MSS                 1460 /* 1500 MTU - 40 */
#define MEMP_NUM_TCP_PCB        160  /* >= 128 concurrent RR connections + echo + spare */
#define MEMP_NUM_TCP_PCB_LISTEN 8
#define MEMP_NUM_UDP_PCB        160            /* UDP_RR instances */
#define TCP_WND                 (44 * TCP_MSS) /* ~64 KB: fills a host-guest path without scaling */
#define TCP_SND_BUF             (44 * TCP_MSS) /* same as the window so STREAM never waits on us */
#define TCP_SND_QUEUELEN        (4 * TCP_SND_BUF / TCP_MSS)
#define MEMP_NUM_TCP_SEG        2048    /* segments queued across all connections */
#define TCP_OVERSIZE            TCP_MSS /* fewer, fuller segments for small writes */
#define LWIP_TCP_TIMESTAMPS     0
#define TCP_QUEUE_OOSEQ         1
#define LWIP_WND_SCALE          0
#define TCP_LISTEN_BACKLOG      0

/* ---- checksums: computed in software (CSUM offload is a driver variant) ---- */
#define CHECKSUM_GEN_IP       1
#define CHECKSUM_GEN_UDP      1
#define CHECKSUM_GEN_TCP      1
#define CHECKSUM_CHECK_IP     1 /* malformed-frame tests count these drops */
#define CHECKSUM_CHECK_UDP    1
#define CHECKSUM_CHECK_TCP    1
#define LWIP_CHECKSUM_ON_COPY 0

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
