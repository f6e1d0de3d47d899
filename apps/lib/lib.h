/*
 * lib.h: what the apps share and no app owns (apps/lib/): TCP connection
 * chores, the TCP server skeleton, the control port, the host peer. The
 * histogram and the RESULT line have their own headers (hist.h, result.h).
 */
#ifndef VNETLAB_APPS_LIB_H
#define VNETLAB_APPS_LIB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "lwip/ip_addr.h"
#include "lwip/tcp.h"

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
/* A serving app's phase is over: a stop request, or more than idle_s
 * seconds since last_ns (the last request or data). */
bool ctl_stop_or_idle(uint64_t last_ns, uint64_t idle_s);
void ctl_print_counters(void); /* CTL {...}: requests, ok, unknown, denied */

/* peer.c: the host peer of a client role */
void peer_parse(const char *key, const char *def, ip_addr_t *out); /* claims key */
void peer_resolve(const ip_addr_t *peer, uint64_t timeout_s);      /* ARP, or ERROR */

#endif
