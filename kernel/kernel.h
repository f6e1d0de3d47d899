/*
 * kernel.h: the whole surface of kernel/, grouped by the file that owns it.
 * Upper layers (drivers/, net/, apps/) include this and arch.h; kernel/
 * includes nothing above itself.
 */
#ifndef VNETLAB_KERNEL_H
#define VNETLAB_KERNEL_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>
#include "boot_info.h"

#define ARRAY_SIZE(a)     (sizeof(a) / sizeof((a)[0]))
#define ALIGN_UP(x, a)    (((x) + ((a)-1)) & ~((uint64_t)(a)-1))
#define PRINTF_LIKE(f, a) __attribute__((format(printf, f, a)))

/* Exit statuses of the appliance. Under QEMU with isa-debug-exit a status s
 * becomes QEMU's exit code 2*s+1; host/qemu-run.sh maps it back. */
enum {
	EXIT_OK = 0,
	EXIT_FAIL = 1,  /* a run that could not complete (ERROR line printed) */
	EXIT_USAGE = 2, /* bad command line */
	EXIT_PANIC = 3, /* CPU exception or kernel bug */
};

/* serial.c: COM1 16550, polled */
void serial_init(void);
void serial_putc(char c);
void serial_flush(void); /* write out bytes held for the FIFO */

/* console.c: picolibc stdio on the serial port; machine-readable error lines */
void console_init(void);
void kernel_error(const char *where, const char *fmt, ...) PRINTF_LIKE(2, 3)
    __attribute__((noreturn));
void kernel_usage_error(const char *where, const char *fmt, ...) PRINTF_LIKE(2, 3)
    __attribute__((noreturn)); /* same line, exit status EXIT_USAGE */
void panic(const char *fmt, ...) PRINTF_LIKE(1, 2) __attribute__((noreturn));
/* Run fn once before a kernel_error() ERROR line (state a failed run
 * should still report, e.g. the idle counters). */
void kernel_set_error_hook(void (*fn)(void));

/* exit.c: leave the appliance */
void exit_init(void);
void kernel_exit(int status) __attribute__((noreturn));

/* cpu.c: GDT, SSE enable, CPU identification, accelerator detection */
void cpu_init(void);
void cpu_ap_init(void);             /* an application processor: our GDT and SSE, nothing else */
void cpu_configure(void);           /* claims accel= (an override) */
const char *cpu_accel(void);        /* "kvm", "tcg", "hw" or "unknown" */
uint32_t cpu_hypervisor_leaf(void); /* CPUID leaf of the signature; 0 if none */
const char *cpu_model(void);

/* pvm.c: native execution under this machine kind's kvm_pvm (its ABI is
 * known to this file only). pvm_init() needs the IDT (rdmsr_safe) and
 * enters native mode at once when the current page tables are user-
 * accessible at every level, else pvm_after_paging() does. */
void pvm_init(bool tables_user);
void pvm_after_paging(void);
void pvm_configure(void);   /* claims pvm=auto|off */
const char *pvm_mode(void); /* "native", "emulated" or "none" (not kvm_pvm) */
uint64_t pvm_tsc_khz(void); /* the hypervisor's TSC kHz; 0 if none */
/* Around the only places interrupts are enabled (halt.c): a native vCPU
 * is given no interrupts, so it runs emulated in between. open does
 * nothing and returns false unless native; close follows an open that
 * returned true. */
bool pvm_irq_window_open(void);
void pvm_irq_window_close(void);
bool pvm_irq_needs_halt(void); /* interrupts come in only at a halt */
bool pvm_apic_extras_ok(void); /* false: xAPIC and its one-shot timer only */

/* trap.c: exception vectors -> report and exit; the IDT */
void trap_init_early(void); /* #DF, #NP, #GP gates and lidt: what pvm_init() needs */
void trap_init(void);       /* the other exception gates */
void trap_load(void);       /* load the IDT trap_init() filled (an application processor) */
void trap_set_gate(uint8_t vector, uint64_t handler); /* 64-bit interrupt gate */

/* irq.c: external interrupts (vectors 32-255). Handlers run only while the
 * CPU is halted in halt_until() (the one place interrupts are on), so they
 * share nothing with the interrupted code but the counters they bump. */
#define IRQ_SPURIOUS_VECTOR 0xff
typedef void (*irq_fn)(void *arg);
int irq_init(char *err, size_t errlen); /* LAPIC, legacy PIC masked; idempotent */
/* A LAPIC-delivered vector (MSI-X, LAPIC timer) for fn; -1 when none left. */
int irq_alloc(irq_fn fn, void *arg);
/* A legacy PCI INTx line (0-15) through the 8259 PIC in virtual-wire mode;
 * the vector, or -1. fn must make the device drop the line (level). */
int irq_alloc_legacy(unsigned line, irq_fn fn, void *arg);
/* A GSI routed through the I/O APIC that has it (ioapic.c) to a LAPIC
 * vector; the vector, or -1 with err filled. fn must make a level-triggered
 * device drop the line. */
int irq_alloc_gsi(uint32_t gsi, bool level, bool active_low, irq_fn fn, void *arg, char *err,
                  size_t errlen);
uint64_t irq_count(int vector); /* taken on the calling CPU */
/* On CPU cpu (smp_cpu_index()'s numbering): interrupts on vectors nobody
 * allocated, and LAPIC / PIC spurious interrupts. */
uint64_t irq_unexpected(unsigned cpu);
uint64_t irq_spurious(unsigned cpu);

/* ioapic.c: the MADT's I/O APICs */
bool ioapic_has(uint32_t gsi);
int ioapic_route(uint32_t gsi, uint8_t vector, bool level, bool active_low, char *err,
                 size_t errlen);

/* apic.c: the local APIC (x2APIC when the CPU has it) and its timer */
int apic_init(char *err, size_t errlen);
void apic_eoi(void);
uint32_t apic_id(void);
bool apic_x2(void);
/* MSI address/data for a fixed, edge interrupt on this CPU (PCI 3.0 6.8.2;
 * Intel SDM 11.11). */
uint64_t apic_msi_addr(void);
uint64_t apic_msi_addr_to(uint32_t apic_id); /* ... for the CPU with that id */
const char *apic_timer_mode(void);           /* "tsc-deadline" or "oneshot" */
void apic_timer_init(int vector);            /* BSP: calibrates the one-shot mode */
void apic_timer_local_init(void);            /* this CPU's timer LVT, after apic_timer_init */
void apic_timer_arm(uint64_t deadline_ns);   /* clock_ns() time; replaces any earlier */
void apic_timer_cancel(void);
/* smp.c's: an application processor's own LAPIC (the BSP's mode, LINT0
 * masked, timer masked); INIT, STARTUP (SIPI, vector = the trampoline's
 * 4 KiB page number) and fixed IPIs to a destination APIC id. -1 when an
 * xAPIC ICR stays busy. */
void apic_ap_init(void);
int apic_send_init(uint32_t dest);
int apic_send_startup(uint32_t dest, uint8_t page);
int apic_send_ipi(uint32_t dest, uint8_t vector);

/* halt.c: sleep until an interrupt or a deadline */
struct halt_stats {
	uint64_t halts;       /* HLTs executed */
	uint64_t halted_ns;   /* time spent in them */
	uint64_t timer_wakes; /* halts during which the timer fired */
};
int halt_init(char *err, size_t errlen); /* irq_init + timer; idempotent */
/* Halt until an interrupt or deadline_ns (clock_ns() time). The caller has
 * armed its wake-up sources and re-checked for work with interrupts off.
 * Returns the ns halted. */
uint64_t halt_until(uint64_t deadline_ns);
/* The same, with busy(arg) (the caller's re-check) asked once more where
 * the platform takes interrupts only inside a window halt.c must open
 * first (kvm_pvm native); true there: no halt, returns 0. */
uint64_t halt_until_idle(uint64_t deadline_ns, bool (*busy)(void *), void *arg);
const struct halt_stats *halt_stats(void); /* the calling CPU's */
void halt_let_pending_in(void);            /* deliver interrupts already latched, then off again */

/* clock.c: TSC-based monotonic clock */
void clock_init(void);
uint64_t clock_ns(void);
uint64_t clock_tsc_khz(void);
const char *clock_method(void); /* "cpuid15", "cpuid16", "pit" */
uint64_t clock_err_ppm(void);   /* bound on the PIT calibration's error; 0 for CPUID */
uint64_t clock_cal_us(void);    /* length of the PIT window; 0 for CPUID */
uint64_t clock_tsc_to_ns(uint64_t tsc_delta);
/* A clock_ns() value as ns since the boot front-end's first instruction,
 * the clock of the ready line's boot_us. */
uint64_t clock_since_entry_ns(uint64_t clock);
void clock_delay_us(uint64_t us);

/* pmm.c: physical memory from the boot map; identity-mapped, never freed */
void pmm_init(const struct boot_info *bi);
void *pmm_alloc(size_t size, size_t align); /* zeroed; panics when out of memory */
void *pmm_alloc_uninit(size_t size, size_t align);
uint64_t pmm_total_bytes(void);
uint64_t pmm_free_bytes(void);

/* paging.c: our own page tables; RAM write-back, MMIO uncached */
void paging_init(const struct boot_info *bi);
void paging_map_mmio(uint64_t phys, uint64_t len);

/* heap.c: sbrk() for picolibc's malloc */
void heap_init(size_t bytes);
size_t heap_size(void); /* bytes malloc may use in all */

/* acpi.c: find tables from the RSDP */
void acpi_init(uint64_t rsdp);
const void *acpi_find_table(const char sig[4]);
const void *acpi_dsdt(void); /* the DSDT (header + AML), NULL if none */
uint64_t acpi_ecam_base(uint8_t *bus_start, uint8_t *bus_end); /* 0 if no MCFG */
void acpi_reset(void);                                         /* FADT reset register, if any */

/* pci.c: enumeration and configuration space (legacy ports or ECAM) */
struct pci_dev {
	uint8_t bus, dev, fn;
	uint16_t vendor, device;
	uint32_t class_rev; /* class << 8 | revision; ids and class read after ready */
};
void pci_init(void);
void pci_print(void);                /* one "pci ..." line per function found */
const char *pci_access_method(void); /* "ecam" or "ports" */
int pci_count(void);
const struct pci_dev *pci_get(int i);
uint8_t pci_cfg_read8(const struct pci_dev *d, uint16_t off);
uint16_t pci_cfg_read16(const struct pci_dev *d, uint16_t off);
uint32_t pci_cfg_read32(const struct pci_dev *d, uint16_t off);
void pci_cfg_write16(const struct pci_dev *d, uint16_t off, uint16_t v);
void pci_cfg_write32(const struct pci_dev *d, uint16_t off, uint32_t v);
uint64_t pci_bar(const struct pci_dev *d, int bar, uint64_t *size, bool *is_io);
/* pci_place.c: the lowest size-aligned address in [lo, hi) clear of every
 * busy range, 0 if none (size a power of two). */
struct pci_range {
	uint64_t base, len;
};
uint64_t pci_place(const struct pci_range *busy, int nbusy, uint64_t lo, uint64_t hi,
                   uint64_t size);
/* The boot memory map: RAM and firmware memory are never a BAR's place. */
void pci_note_memory(const struct boot_info *bi);
unsigned pci_bars_assigned(void);
void pci_enable_mmio_busmaster(const struct pci_dev *d);

/* mmiodev.c: virtio-mmio windows from the command line and the DSDT */
struct mmio_dev {
	uint64_t base, size;
	uint32_t irq;       /* the GSI it raises */
	bool edge;          /* trigger mode (QEMU's: level) */
	bool active_low;    /* polarity (QEMU's: active high) */
	const char *source; /* "cmdline" or "acpi" */
};
void mmiodev_init(void);
void mmiodev_print(void); /* one "mmio ..." line per window, after the ready line */
int mmiodev_count(void);
const struct mmio_dev *mmiodev_get(int i);

/* cmdline.c: "key=value" words; every key must be claimed by some layer */
void cmdline_init(const char *s);
const char *cmdline_raw(void);
uint64_t cmdline_u64(const char *key, uint64_t def, uint64_t min, uint64_t max);
const char *cmdline_str(const char *key, const char *def);
bool cmdline_bool(const char *key, bool def);
int cmdline_choice(const char *key, const char *const *choices, int def);
/* Claim a key that only some settings take (when: "rr.role=client"): given
 * where it does not apply, a usage error that says so, not "unknown key". */
void cmdline_only_if(const char *key, bool applies, const char *when);
/* The n-th value (from 0) of a key that may be given more than once; NULL
 * past the last. The other getters refuse a repeated key. */
const char *cmdline_nth(const char *key, int n);
void cmdline_finish(void); /* error on any key nobody claimed */

/* smp.c: application processors (smp=N), each with its own stack, GDT and
 * IDT loaded, local APIC on, and a per-CPU block; they run a function
 * handed to them. What they may share with the BSP is locked where it is:
 * the console writes a line whole (console.c), the heap takes a lock
 * (heap.c); everything else on the data path is per CPU (net/inst.h). */
#define SMP_MAX 16
typedef int (*smp_fn)(void *arg);
struct smp_cpu {
	unsigned index; /* 0 = the BSP */
	uint32_t apic_id;
	uint32_t apic_id_seen; /* what the AP read from its own LAPIC */
	uintptr_t stack_top;
	int wake_vector;
	uint64_t up_ns;         /* INIT to "up" */
	volatile uint32_t up;   /* the AP: on its own stack, LAPIC on */
	volatile uint32_t go;   /* the BSP: fn/arg hold a new call */
	volatile uint32_t done; /* the AP: the call numbered go returned ret */
	smp_fn fn;
	void *arg;
	int ret;
} __attribute__((aligned(64)));
void smp_configure(const struct boot_info *bi); /* claims smp=, smp.sipi= */
void smp_start(void);                           /* after cmdline_finish() */
unsigned smp_cpus(void);                        /* CPUs running, the BSP included */
unsigned smp_requested(void);                   /* smp=N as configured (smp_configure() on) */
/* The calling CPU's index (0 = the BSP; from GS base once smp_start() ran
 * with smp > 1, else 0), for per-CPU state without locks. */
unsigned smp_cpu_index(void);
/* CPU cpu's local APIC id (an MSI's destination); the BSP's for a CPU
 * that is not running. */
uint32_t smp_apic_id(unsigned cpu);
/* Run fn(arg) on application processor cpu (1..smp_cpus()-1); -1 if it is
 * not idle. smp_join() waits at most timeout_ns for it: 0 and *ret, or -1. */
int smp_run(unsigned cpu, smp_fn fn, void *arg);
int smp_join(unsigned cpu, uint64_t timeout_ns, int *ret);

/* selftest.c: test=fault|clock kernel self-tests */
void selftest_configure(void);
bool selftest_run(void); /* true if a self-test ran */

/* main.c */
uint64_t kernel_boot_tsc(void);
void kernel_banner(void); /* once: after the ready line, or before an early ERROR/PANIC */
const char *kernel_boot_protocol(void); /* "pvh" or "efi", for result lines */

/* apps/main.c: the application. app_configure() claims its command-line
 * keys before the kernel checks for unknown ones; app_main() runs after the
 * ready line and returns the exit status. */
void app_configure(void);
int app_main(void);

#endif
