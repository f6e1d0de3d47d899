/*
 * instance.c: this copy's identity among the copies of the TCP/IP side
 * (net/inst.h). The Makefile links one copy of this file per copy; copy
 * k's net_inst_ops is renamed net_inst_ops_k and is the only way in.
 */
#include "apps/apps.h"
#include "kernel/kernel.h"
#include "net/inst.h"
#include "net/net.h"

static unsigned index; /* 0 in the copy the kernel calls */

unsigned net_inst_index(void)
{
	return index;
}

/* Copy k > 0: the same keys as copy 0 (claiming a key twice is allowed),
 * read into this copy's own variables. */
static void inst_configure(unsigned k)
{
	index = k;
	app_configure();
}

/* On vCPU k: net_up() attaches to pair k of the device copy 0 opened. */
static int inst_run(void *pair0)
{
	net_attach_pair0(pair0);
	return app_main();
}

const struct net_inst_ops net_inst_ops = {
    .configure = inst_configure,
    .run = inst_run,
};
