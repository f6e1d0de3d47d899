/*
 * serial.c: COM1 as a polled 16550 UART, 115200 8N1. The console and all
 * result lines go here; the host reads them from QEMU's -serial.
 */
#include "kernel/arch.h"
#include "kernel/kernel.h"

#define COM1     0x3f8
#define UART_THR 0 /* transmit holding (DLAB=0) */
#define UART_IER 1
#define UART_FCR 2
#define UART_LCR 3
#define UART_MCR 4
#define UART_LSR 5
#define LSR_THRE 0x20
#define LCR_DLAB 0x80
#define LCR_8N1  0x03

/* At 115200 baud one byte takes ~87 us on real hardware; 10 ms without
 * THRE means the UART is absent or wedged, and we drop rather than hang. */
#define TX_SPIN_MAX 100000

void serial_init(void)
{
	outb(COM1 + UART_IER, 0x00); /* polled: no interrupts */
	outb(COM1 + UART_LCR, LCR_DLAB);
	outb(COM1 + 0, 1); /* divisor 1 = 115200 */
	outb(COM1 + 1, 0);
	outb(COM1 + UART_LCR, LCR_8N1);
	outb(COM1 + UART_FCR, 0xc7); /* enable and clear FIFOs */
	outb(COM1 + UART_MCR, 0x03); /* DTR, RTS */
}

void serial_putc(char c)
{
	for (int i = 0; i < TX_SPIN_MAX && !(inb(COM1 + UART_LSR) & LSR_THRE); i++)
		cpu_relax();
	outb(COM1 + UART_THR, (uint8_t)c);
}

void serial_write(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (s[i] == '\n')
			serial_putc('\r');
		serial_putc(s[i]);
	}
}
