/*
 * main.c: choose what the appliance does this boot (app=...). Each app
 * claims its own keys in its configure step, before the kernel rejects
 * unknown ones.
 */
#include <stdio.h>
#include "kernel/kernel.h"

enum { APP_NONE };
static const char *const apps[] = {"none", NULL};
static int app;

void app_configure(void)
{
	app = cmdline_choice("app", apps, APP_NONE);
}

int app_main(void)
{
	switch (app) {
	default:
		printf("vnetlab app=none: nothing to run\n");
		return EXIT_OK;
	}
}
