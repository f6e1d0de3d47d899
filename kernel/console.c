/*
 * console.c: picolibc's stdio on the serial port, and the two ways a run
 * ends badly: kernel_error() (a clean, machine-readable ERROR line) and
 * panic() (a kernel bug or CPU exception).
 */
#include <stdarg.h>
#include <stdio.h>
#include "kernel/kernel.h"

static int console_putc(char c, FILE *f)
{
	(void)f;
	if (c == '\n')
		serial_putc('\r');
	serial_putc(c);
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
	printf("PANIC: ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	kernel_exit(EXIT_PANIC);
}
