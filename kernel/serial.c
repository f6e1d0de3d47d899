/*
 * serial.c: COM1 as a polled 16550A UART, 115200 8N1. The console and all
 * result lines go here; the host reads them from QEMU's -serial.
 *
 * Output is written a transmit FIFO at a time: one LSR read, then up to 16
 * bytes with one `rep outsb`. Under KVM each port access leaves the guest
 * (a nested exit to QEMU on this machine kind): a byte at a time cost an
 * LSR read and a THR write per character, and the console was most of a
 * native boot. The FIFO halves that; the THR writes stay one exit each
 * (kvm_pvm emulates `rep outsb` a byte at a time: test=exits measures it,
 * docs/kvm.md). Bytes are held until a newline or a full FIFO; every
 * console line ends with one, and kernel_exit() flushes what is left.
 */
#include "kernel/arch.h"
#include "kernel/kernel.h"

#define COM1     0x3f8
#define UART_THR 0 /* transmit holding (DLAB=0) */
#define UART_IER 1
#define UART_IIR 2 /* read */
#define UART_FCR 2 /* write */
#define UART_LCR 3
#define UART_MCR 4
#define UART_LSR 5
#define LSR_THRE 0x20 /* 16550A with FIFO: the transmit FIFO is empty */
#define IIR_FIFO 0xc0 /* both bits set: FIFOs enabled (a 16550A) */
#define LCR_DLAB 0x80
#define LCR_8N1  0x03
#define FIFO_MAX 16 /* 16550A transmit FIFO depth */

/* At 115200 baud a FIFO of 16 bytes drains in ~1.4 ms on real hardware;
 * 10 ms without THRE means the UART is absent or wedged, and we write
 * anyway rather than hang (an absent UART loses the bytes either way). */
#define TX_SPIN_MAX 100000

static char buf[FIFO_MAX];
static unsigned len, fifo = 1; /* bytes held; bytes per THRE */

void serial_init(void)
{
	outb(COM1 + UART_IER, 0x00); /* polled: no interrupts */
	outb(COM1 + UART_LCR, LCR_DLAB);
	outb(COM1 + 0, 1); /* divisor 1 = 115200 */
	outb(COM1 + 1, 0);
	outb(COM1 + UART_LCR, LCR_8N1);
	outb(COM1 + UART_FCR, 0xc7); /* enable and clear FIFOs */
	outb(COM1 + UART_MCR, 0x03); /* DTR, RTS */
	/* An 8250/16450 has no FIFO and leaves IIR's top bits clear: one byte
	 * per THRE there. */
	fifo = (inb(COM1 + UART_IIR) & IIR_FIFO) == IIR_FIFO ? FIFO_MAX : 1;
}

void serial_flush(void)
{
	for (unsigned off = 0; off < len;) {
		unsigned n = len - off < fifo ? len - off : fifo;
		for (int i = 0; i < TX_SPIN_MAX && !(inb(COM1 + UART_LSR) & LSR_THRE); i++)
			cpu_relax();
		outsb(COM1 + UART_THR, buf + off, n);
		off += n;
	}
	len = 0;
}

void serial_putc(char c)
{
	buf[len++] = c;
	if (c == '\n' || len >= sizeof(buf))
		serial_flush();
}
