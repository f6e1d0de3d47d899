/*
 * tcpconn.c: attach and detach one TCP connection's raw-API callbacks, the
 * same four calls every TCP app makes. Detaching before tcp_close() matters:
 * lwIP may still deliver data or an error for a closing pcb, and the app's
 * per-connection state is about to be freed. Also the gathering of a
 * fixed-size header that TCP may deliver split across segments.
 */
#include <string.h>
#include "apps/lib/lib.h"
#include "lwip/tcp.h"

void tcpconn_attach(struct tcp_pcb *pcb, void *arg, tcp_recv_fn recv, tcp_sent_fn sent,
                    tcp_err_fn err)
{
	tcp_arg(pcb, arg);
	tcp_recv(pcb, recv);
	tcp_sent(pcb, sent);
	tcp_err(pcb, err);
}

void tcpconn_detach(struct tcp_pcb *pcb)
{
	/* A NULL recv callback is lwIP's default: discard, close on FIN. */
	tcpconn_attach(pcb, NULL, NULL, NULL, NULL);
}

bool tcpconn_gather(uint8_t *buf, uint32_t *have, uint32_t need, const uint8_t **d, uint32_t *n)
{
	uint32_t take = need - *have;
	if (take > *n)
		take = *n;
	memcpy(buf + *have, *d, take);
	*have += take;
	*d += take;
	*n -= take;
	return *have == need;
}
