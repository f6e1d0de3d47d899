/*
 * exit.c: end the run. Under QEMU, isa-debug-exit (port 0x501) turns the
 * value v written to it into QEMU's exit code 2*v+1. We write
 * v = DEBUG_EXIT_OFFSET + status, so the guest's statuses arrive as 65, 67,
 * 69, 71, ... and can never be mistaken for QEMU's own failure (exit code 1:
 * bad netdev, tap that cannot be opened, accelerator init), which is what
 * v = 0 would produce. host/qemu-run.sh maps them back and also requires
 * the "vnetlab exit status=N" line with the same N. On hardware without
 * that device the write is ignored and we reset the machine (ACPI reset
 * register, then the keyboard controller), unless halt=1 asked to stay up
 * for reading the console.
 */
#include <stdio.h>
#include "kernel/arch.h"
#include "kernel/kernel.h"

#define DEBUG_EXIT_PORT   0x501
#define DEBUG_EXIT_OFFSET 0x20 /* keep in sync with host/qemu-run.sh */
#define DEBUG_EXIT_MAX    0x5f /* 2*(0x20+0x5f)+1 = 255, the largest exit code */
#define KBC_STATUS        0x64
#define KBC_CMD_RESET     0xfe

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
	if (status < 0 || status > DEBUG_EXIT_MAX)
		status = DEBUG_EXIT_MAX;
	if (!exiting++) {
		printf("vnetlab exit status=%d\n", status);
		fflush(stdout);
	}
	serial_flush();
	if (halt_on_exit) {
		printf("vnetlab halted (halt=1)\n");
		for (;;)
			cpu_hlt();
	}
	outb(DEBUG_EXIT_PORT, (uint8_t)(DEBUG_EXIT_OFFSET + status));
	/* Still here: no isa-debug-exit, so this is real hardware (or another
	 * VMM). Reset rather than leave the machine spinning. */
	acpi_reset();
	for (int i = 0; i < 100000 && (inb(KBC_STATUS) & 0x02); i++)
		cpu_relax();
	outb(KBC_STATUS, KBC_CMD_RESET);
	for (;;)
		cpu_hlt();
}
