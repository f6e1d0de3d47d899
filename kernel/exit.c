/*
 * exit.c: end the run. Under QEMU, isa-debug-exit (port 0x501) turns the
 * status s into QEMU's exit code 2*s+1. On hardware without that device the
 * write is ignored and we reset the machine (ACPI reset register, then the
 * keyboard controller), unless halt=1 asked to stay up for reading the
 * console.
 */
#include <stdio.h>
#include "kernel/arch.h"
#include "kernel/kernel.h"

#define DEBUG_EXIT_PORT 0x501
#define KBC_STATUS      0x64
#define KBC_CMD_RESET   0xfe

static bool halt_on_exit;

void exit_init(void)
{
	halt_on_exit = cmdline_bool("halt", false);
}

/* picolibc's exit()/abort() end here. */
void _exit(int status) __attribute__((noreturn));
void _exit(int status)
{
	kernel_exit(status);
}

void kernel_exit(int status)
{
	static int exiting;
	cpu_cli();
	if (!exiting++) {
		printf("vnetlab exit status=%d\n", status);
		fflush(stdout);
	}
	if (halt_on_exit) {
		printf("vnetlab halted (halt=1)\n");
		for (;;)
			cpu_hlt();
	}
	outb(DEBUG_EXIT_PORT, (uint8_t)status);
	/* Still here: no isa-debug-exit, so this is real hardware (or another
	 * VMM). Reset rather than leave the machine spinning. */
	acpi_reset();
	for (int i = 0; i < 100000 && (inb(KBC_STATUS) & 0x02); i++)
		cpu_relax();
	outb(KBC_STATUS, KBC_CMD_RESET);
	for (;;)
		cpu_hlt();
}
