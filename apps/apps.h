/*
 * apps.h: the applications, one file each. configure() claims the app's
 * command-line keys (it runs before the kernel rejects unknown keys);
 * run() executes after the ready line and returns the exit status.
 */
#ifndef VNETLAB_APPS_H
#define VNETLAB_APPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "lwip/ip_addr.h"
#include "lwip/tcp.h"

/* arpping.c: driver-only ARP request/response against the host */
void arpping_configure(void);
int arpping_main(void);

/* echo.c: TCP and UDP echo on port 7, stopped by time or the control port */
void echo_configure(void);
int echo_main(void);

/* tcpcheck.c: outgoing TCP connection, data echoed back and verified */
void tcpcheck_configure(void);
int tcpcheck_main(void);

/* tcpconn.c: a connection's raw-API callbacks, set and cleared together */
void tcpconn_attach(struct tcp_pcb *pcb, void *arg, tcp_recv_fn recv, tcp_sent_fn sent,
                    tcp_err_fn err);
void tcpconn_detach(struct tcp_pcb *pcb);
/* Move bytes from (*d, *n) into buf until it holds need; true once it does. */
bool tcpconn_gather(uint8_t *buf, uint32_t *have, uint32_t need, const uint8_t **d, uint32_t *n);

/* tcpsrv.c: the TCP server skeleton of every serving app. An app's
 * connection begins with a struct tcpsrv_conn; its ops say what differs. */
struct tcpsrv_conn {
	struct tcp_pcb *pcb;
	struct pbuf *in; /* received, not yet consumed (ops->recv NULL) */
	const struct tcpsrv_ops *ops;
};
struct tcpsrv_ops {
	size_t conn_size; /* of the app's connection, allocated zeroed */
	bool nagle;       /* keep Nagle's algorithm (bulk senders) */
	/* A new connection (pcb and ops set): false refuses it (aborted). */
	bool (*accept)(struct tcpsrv_conn *c);
	void (*refused)(void); /* no memory for a connection; may be NULL */
	/* Data: NULL queues it on c->in and calls serve(); else owns p. */
	err_t (*recv)(struct tcpsrv_conn *c, struct pbuf *p);
	/* Consume c->in as far as room allows; again from the sent callback. */
	err_t (*serve)(struct tcpsrv_conn *c);
	err_t (*sent)(struct tcpsrv_conn *c, u16_t len); /* NULL: serve() */
	/* c is about to be freed (either side closed, or a reset); may be NULL. */
	void (*release)(struct tcpsrv_conn *c);
};
/* The listening pcb, or NULL if the port cannot be had. */
struct tcp_pcb *tcpsrv_listen(uint16_t port, const struct tcpsrv_ops *ops);
/* Close (or abort) and free c; ERR_ABRT when the pcb was aborted, which an
 * lwIP callback must then return. */
err_t tcpsrv_close(struct tcpsrv_conn *c, bool abort);

/* ctl.c: UDP control port: "stop TOKEN" ends a serving app cleanly */
#define CTL_PORT     9999
#define CTL_PORT_STR "9999"
void ctl_configure(void);    /* ctl=on|off, ctl.token= (every app claims them) */
void ctl_start(void);        /* serving apps: open the port unless ctl=off */
const char *ctl_label(void); /* "udp:9999" or "off", for the listening line */
bool ctl_stop_requested(void);
void ctl_print_counters(void); /* CTL {...}: requests, ok, unknown, denied */

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

/* peer.c: the host peer of a client role */
void peer_parse(const char *key, const char *def, ip_addr_t *out); /* claims key */
void peer_resolve(const ip_addr_t *peer, uint64_t timeout_s);      /* ARP, or ERROR */

#endif
