/*
 * tcpsrv.c: the TCP server skeleton every serving app uses (echo, rr,
 * stream, memcached). It listens, accepts, allocates the app's connection
 * (which begins with a struct tcpsrv_conn), and owns lwIP's four raw-API
 * callbacks: received data is queued on c->in (or handed over whole) and
 * the app's serve() called, as it is again when send room frees up; a FIN,
 * an error or a reset frees the connection once, through the app's
 * release(). The app keeps only what differs: its ops (apps.h).
 */
#include <stdlib.h>
#include "apps/lib/lib.h"
#include "lwip/tcp.h"

static void tcpsrv_free(struct tcpsrv_conn *c)
{
	if (c->ops->release)
		c->ops->release(c);
	if (c->in)
		pbuf_free(c->in);
	free(c);
}

err_t tcpsrv_close(struct tcpsrv_conn *c, bool abort)
{
	struct tcp_pcb *pcb = c->pcb;
	tcpconn_detach(pcb);
	tcpsrv_free(c);
	if (!abort && tcp_close(pcb) == ERR_OK)
		return ERR_OK;
	tcp_abort(pcb);
	return ERR_ABRT;
}

static err_t tcpsrv_recv(void *arg, struct tcp_pcb *pcb, struct pbuf *p, err_t err)
{
	struct tcpsrv_conn *c = arg;
	(void)pcb;
	if (!p || err != ERR_OK) {
		if (p)
			pbuf_free(p);
		return tcpsrv_close(c, false);
	}
	if (c->ops->recv)
		return c->ops->recv(c, p);
	if (c->in)
		pbuf_cat(c->in, p);
	else
		c->in = p;
	return c->ops->serve(c);
}

static err_t tcpsrv_sent(void *arg, struct tcp_pcb *pcb, u16_t len)
{
	struct tcpsrv_conn *c = arg;
	(void)pcb;
	return c->ops->sent ? c->ops->sent(c, len) : c->ops->serve(c);
}

static void tcpsrv_err(void *arg, err_t err)
{
	(void)err;
	if (arg)
		tcpsrv_free(arg); /* lwIP has freed the pcb */
}

static err_t tcpsrv_accept(void *arg, struct tcp_pcb *pcb, err_t err)
{
	const struct tcpsrv_ops *ops = arg;
	if (err != ERR_OK || !pcb)
		return ERR_VAL;
	struct tcpsrv_conn *c = calloc(1, ops->conn_size);
	if (c) {
		c->pcb = pcb;
		c->ops = ops;
	}
	if (!c || (ops->accept && !ops->accept(c))) {
		if (!c && ops->refused)
			ops->refused();
		free(c);
		tcp_abort(pcb);
		return ERR_ABRT;
	}
	if (!ops->nagle)
		tcp_nagle_disable(pcb); /* a reply goes out the moment it is written */
	tcpconn_attach(pcb, c, tcpsrv_recv, tcpsrv_sent, tcpsrv_err);
	return ERR_OK;
}

struct tcp_pcb *tcpsrv_listen(uint16_t port, const struct tcpsrv_ops *ops)
{
	struct tcp_pcb *l = tcp_new();
	if (!l || tcp_bind(l, IP_ANY_TYPE, port) != ERR_OK || !(l = tcp_listen(l)))
		return NULL;
	tcp_arg(l, (void *)ops);
	tcp_accept(l, tcpsrv_accept);
	return l;
}
