/*
 * apps.h: the applications, one file each. configure() claims the app's
 * command-line keys (it runs before the kernel rejects unknown keys);
 * run() executes after the ready line and returns the exit status. What
 * they share lives in apps/lib/ (lib.h, hist.h, result.h).
 */
#ifndef VNETLAB_APPS_H
#define VNETLAB_APPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "lwip/ip_addr.h"
#include "lwip/tcp.h"
#include "apps/lib/lib.h"

/* arpping.c: driver-only ARP request/response against the host */
void arpping_configure(void);
int arpping_main(void);

/* echo.c: TCP and UDP echo on port 7, stopped by time or the control port */
void echo_configure(void);
int echo_main(void);

/* tcpcheck.c: outgoing TCP connection, data echoed back and verified */
void tcpcheck_configure(void);
int tcpcheck_main(void);

/* pkt.c (+ pkt_frame.c): packet-level benchmark on the driver alone (no
 * lwIP): txonly, rxonly, macswap, reflect */
void pkt_configure(void);
int pkt_main(void);

/* rr.c (+ rr_client.c, rr_server.c): TCP_RR / UDP_RR, sockperf-compatible */
void rr_configure(void);
int rr_main(void);

/* stream.c (+ stream_client.c, stream_server.c): TCP_STREAM / TCP_MAERTS,
 * iperf 2 compatible */
void stream_configure(void);
int stream_main(void);

#endif
