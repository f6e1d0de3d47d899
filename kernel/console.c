/*
 * console.c: picolibc's stdio on the serial port, and the two ways a run
 * ends badly: kernel_error() (a clean, machine-readable ERROR line) and
 * panic() (a kernel bug or CPU exception).
 */
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include "kernel/arch.h"
#include "kernel/kernel.h"

/* With more than one CPU running (smp=N; the copies of net/inst.h print
 * their own RESULT and counters), a line is written whole: a CPU's first
 * character takes the line, its '\n' gives it back. One that holds it
 * unfinished for LINE_WAIT_NS loses it, so no CPU waits without bound. */
#define LINE_WAIT_NS 2000000000ull   /* a HIST line is long, and TCG's UART slow */
static volatile uint32_t line_owner; /* LAPIC ID + 1; 0: free */
/* Held for each character whoever owns the line: serial.c's buffer is
 * never written by two CPUs at once, even after a line was taken over. */
static volatile uint32_t uart_busy;

static void line_take(void)
{
	uint32_t me = apic_id() + 1;
	uint64_t t0;

	if (line_owner == me)
		return;
	t0 = clock_ns();
	while (!__sync_bool_compare_and_swap(&line_owner, 0, me)) {
		if (clock_ns() - t0 > LINE_WAIT_NS) {
			line_owner = me;
			break;
		}
		cpu_relax();
	}
}

static int console_putc(char c, FILE *f)
{
	bool shared = smp_cpus() > 1;

	(void)f;
	if (shared) {
		line_take();
		while (!__sync_bool_compare_and_swap(&uart_busy, 0, 1))
			cpu_relax();
	}
	if (c == '\n')
		serial_putc('\r');
	serial_putc(c);
	if (shared)
		/* serial.c's stores are done before another CPU may write. */
		__atomic_store_n(&uart_busy, 0, __ATOMIC_RELEASE);
	if (shared && c == '\n')
		/* The line's bytes are out (port writes are ordered) before the
		 * release; a locked CAS on the other side sees it. */
		__atomic_store_n(&line_owner, 0, __ATOMIC_RELEASE);
	return (unsigned char)c;
}

static FILE console_file = FDEV_SETUP_STREAM(console_putc, NULL, NULL, _FDEV_SETUP_WRITE);
FILE *const stdin = &console_file;
FILE *const stdout = &console_file;
FILE *const stderr = &console_file;

void console_init(void)
{
	serial_init();
}

/* ERROR lines are JSON so the harness parses them like RESULT lines;
 * messages are formatted by us and never contain a double quote. */
static void __attribute__((noreturn))
verror(int status, const char *where, const char *fmt, va_list ap)
{
	char msg[256];
	kernel_banner();
	vsnprintf(msg, sizeof(msg), fmt, ap);
	for (char *p = msg; *p; p++)
		if (*p == '"' || *p == '\\')
			*p = '\'';
	printf("ERROR {\"where\":\"%s\",\"msg\":\"%s\"}\n", where, msg);
	kernel_exit(status);
}

static void (*error_hook)(void);

void kernel_set_error_hook(void (*fn)(void))
{
	error_hook = fn;
}

void kernel_error(const char *where, const char *fmt, ...)
{
	va_list ap;
	void (*hook)(void) = error_hook;

	error_hook = NULL; /* once, even if the hook itself fails */
	if (hook)
		hook();
	va_start(ap, fmt);
	verror(EXIT_FAIL, where, fmt, ap);
}

void kernel_usage_error(const char *where, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	verror(EXIT_USAGE, where, fmt, ap);
}

void panic(const char *fmt, ...)
{
	va_list ap;
	kernel_banner();
	printf("PANIC: ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	kernel_exit(EXIT_PANIC);
}
