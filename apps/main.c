/*
 * main.c: choose what the appliance does this boot (app=...). Each app
 * claims its own keys in its configure step, before the kernel rejects
 * unknown ones.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include "apps/apps.h"
#include "apps/memcached.h"
#include "kernel/kernel.h"
#include "net/net.h"

static int app_none(void)
{
	printf("vnetlab app=none: nothing to run\n");
	return EXIT_OK;
}

static const struct app {
	const char *name;
	void (*configure)(void);
	int (*run)(void);
} apps[] = {
    {"none", NULL, app_none},
    {"arpping", arpping_configure, arpping_main},
    {"echo", echo_configure, echo_main},
    {"memcached", memcached_configure, memcached_main},
    {"pkt", pkt_configure, pkt_main},
    {"rr", rr_configure, rr_main},
    {"stream", stream_configure, stream_main},
    {"tcpcheck", tcpcheck_configure, tcpcheck_main},
};

static const struct app *chosen;

void app_configure(void)
{
	const char *names[ARRAY_SIZE(apps) + 1];
	for (size_t i = 0; i < ARRAY_SIZE(apps); i++)
		names[i] = apps[i].name;
	names[ARRAY_SIZE(apps)] = NULL;
	chosen = &apps[cmdline_choice("app", names, 0)];
	/* Claimed whatever the app, so a harness may pass ctl.token= to every
	 * boot; only serving apps open the port. */
	ctl_configure();
	if (chosen->configure)
		chosen->configure();
}

int app_main(void)
{
	int r = chosen->run();
	net_join_copies(); /* mq=N (copy 0): every other copy has ended too */
	return r;
}
