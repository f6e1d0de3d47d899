# vnetlab: build the appliance (PVH ELF and UEFI application), its disk
# image, and run it or its tests. `make help` lists the targets.
#
# Dependencies are installed and fetched by host/deps.sh on first use
# (Debian packages as root; lwIP and picolibc sources from Debian's archive).

# PROFILE=1: cycle accounting per data-path stage (kernel/prof.h), built
# apart in build/profile/ because it changes every object.
PROFILE ?= 0
ifeq ($(filter 0 1,$(PROFILE)),)
$(error PROFILE=$(PROFILE): expected 0 or 1)
endif
O       ?= $(if $(filter 1,$(PROFILE)),build/profile,build)
DEPS    ?= deps
PICOLIBC := $(DEPS)/picolibc
LWIP    := $(DEPS)/lwip
DEPS_STAMP := $(PICOLIBC)/.stamp $(LWIP)/.stamp

CC      := gcc
OBJCOPY := objcopy

# Compiled once, linked into both boot front-ends: -fPIC because the EFI
# application is a relocatable PE image; hidden visibility keeps the static
# PVH link free of GOT indirection. General registers only: the kernel never
# needs FP/SSE state, so exception entry saves none.
CFLAGS_BASE := -std=gnu11 -O2 -g -Wall -Wextra -Werror \
	-ffreestanding -fno-stack-protector -fno-asynchronous-unwind-tables \
	-fno-omit-frame-pointer -mno-red-zone -mgeneral-regs-only \
	-fPIC -fvisibility=hidden -fno-common --param=min-pagesize=0 \
	-nostdinc -isystem $(PICOLIBC)/include -isystem $(shell $(CC) -print-file-name=include) \
	-I. -Inet/port -I$(LWIP)/src/include -MMD -MP
CFLAGS  := $(CFLAGS_BASE) $(POLICY_CFLAGS) $(EXTRA_CFLAGS) $(if $(filter 1,$(PROFILE)),-DVNETLAB_PROFILE=1)

# How picolibc is linked: the integer-only printf (no floating point
# anywhere in the guest), and the allocator's entry points through
# kernel/heap.c's lock (picolibc is single-threaded; with smp=N the copies
# of net/inst.h allocate at once).
LIBS := $(PICOLIBC)/lib/libc.a $(shell $(CC) -print-libgcc-file-name)
LDLIBC := -Wl,--defsym=vfprintf=__l_vfprintf -Wl,--defsym=vfscanf=__l_vfscanf \
	$(foreach f,malloc calloc realloc free memalign mallinfo,-Wl,--wrap=$(f))

# The static PVH link (also used for every linked variant in mk/variants.mk).
PVH_LINK = $(CC) -nostdlib -static -no-pie -Wl,-T,linker/pvh.ld -Wl,--no-dynamic-linker \
	-Wl,--build-id=none -Wl,-z,noexecstack -Wl,--no-warn-rwx-segments $(LDLIBC)

KERNEL_SRCS := $(wildcard kernel/*.c kernel/*.S)
# RING=split|packed picks the one virtqueue file a build links: virtq.c or
# virtq_packed.c (mk/variants.mk checks the value and sets VNET_RING).
ring_file = drivers/virtio/$(if $(filter packed,$(1)),virtq_packed.c,virtq.c)
RING_FILES := drivers/virtio/virtq.c drivers/virtio/virtq_packed.c
driver_srcs = $(filter-out $(filter-out $(call ring_file,$(1)),$(RING_FILES)),$(wildcard drivers/virtio/*.c))
DRIVER_SRCS := $(call driver_srcs,$(RING))
NET_SRCS    := $(if $(wildcard drivers/virtio/vnet.c),$(wildcard net/*.c))
# lwIP 2.1.3 from deps/ (fetched by host/deps.sh): NO_SYS core, IPv4,
# Ethernet, lwiperf. Listed, not globbed, so a fresh clone parses before
# the fetch has run.
LWIP_FILES := core/def.c core/inet_chksum.c core/init.c core/ip.c core/mem.c \
	core/memp.c core/netif.c core/pbuf.c core/stats.c core/sys.c core/tcp.c \
	core/tcp_in.c core/tcp_out.c core/timeouts.c core/udp.c \
	core/ipv4/dhcp.c core/ipv4/etharp.c core/ipv4/icmp.c core/ipv4/ip4.c \
	core/ipv4/ip4_addr.c core/ipv4/ip4_frag.c netif/ethernet.c \
	apps/lwiperf/lwiperf.c
LWIP_OBJS := $(patsubst %.c,$(O)/obj/lwip/%.o,$(LWIP_FILES))
APP_SRCS    := $(wildcard apps/*.c apps/lib/*.c)
COMMON_SRCS := $(KERNEL_SRCS) $(DRIVER_SRCS) $(NET_SRCS) $(APP_SRCS)
PVH_SRCS    := $(wildcard boot/pvh/*.c boot/pvh/*.S)

obj = $(patsubst %,$(O)/obj/%.o,$(basename $(1)))
# The TCP/IP side (lwIP, net/, the apps) is linked NET_INSTANCES times, one
# copy per queue pair for mq=N (net/inst.h, docs/multiqueue.md): net_inst0.o
# is those objects in one relocatable object; copy k is it with every
# symbol made local but net_inst_ops, renamed net_inst_ops_k, so each copy
# has its own globals. apps/pkt*.c drive the queue pairs themselves and
# net/inst_table.c is what the copies share: both are linked once.
NET_INSTANCES ?= 2
ifeq ($(filter 1 2 3 4 5 6 7 8,$(NET_INSTANCES)),)
$(error NET_INSTANCES=$(NET_INSTANCES): expected 1..8)
endif
INST_SRCS := $(filter-out net/inst_table.c apps/pkt.c apps/pkt_frame.c,$(NET_SRCS) $(APP_SRCS))
INST_OBJS := $(call obj,$(INST_SRCS)) $(if $(NET_SRCS),$(LWIP_OBJS))
INST_COPIES := $(foreach k,$(shell seq 0 $$(($(NET_INSTANCES) - 1))),$(O)/obj/net_inst$(k).o)
COMMON_OBJS := $(call obj,$(filter-out $(INST_SRCS),$(COMMON_SRCS))) $(INST_COPIES)
PVH_OBJS    := $(call obj,$(PVH_SRCS))
# mk/variants.mk defines rules; without this its first one would be the default.
.DEFAULT_GOAL := all
include mk/variants.mk

.PHONY: all deps pvh efi image run test bench soak variants clean distclean help format host-tools
all: pvh efi host-tools

help:
	@echo "make            build build/vnetlab.elf (PVH) and build/BOOTX64.EFI"
	@echo "make run        benchmark the appliance against host peers (TEST=, ROLE=, REQ=, ...)"
	@echo "make test       install what is missing, build, run all tests"
	@echo "make soak       RR and STREAM 30 min each: pools and p99 at the end vs after warm-up"
	@echo "make fuzz       the receive path under libFuzzer, 10 min per target (FUZZ_SECONDS=)"
	@echo "make bench      benchmark matrix (BENCH_ARGS=\"--matrix FILE ...\"), see host/bench/README.md"
	@echo "make variants   compile every driver policy combination; make unit: host unit tests"
	@echo "make image      GPT disk image with an EFI system partition"
	@echo "make deps       install packages and fetch/build lwIP + picolibc"
	@echo "make format     clang-format every C file"

deps: $(DEPS_STAMP)
# One grouped target (GNU make 4.3 &:): with -j a plain two-target rule ran
# host/deps.sh twice at once on a fresh clone (apt's lock, then no lwIP).
$(DEPS_STAMP) &:
	bash host/deps.sh

pvh: $(O)/vnetlab.elf

# V=1 shows full command lines.
Q := $(if $(V),,@)

$(O)/obj/%.o: %.c | $(DEPS_STAMP)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC      $<")
	$(Q)$(CC) $(CFLAGS) -c $< -o $@

# On a fresh clone the lwIP sources appear only when host/deps.sh has
# run: this says so, else make rejects the rule below for a missing
# prerequisite before the order-only stamp could fetch it.
$(LWIP)/src/%.c: | $(DEPS_STAMP) ;

$(O)/obj/lwip/%.o: $(LWIP)/src/%.c | $(DEPS_STAMP)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC      lwip/$*.c")
	$(Q)$(CC) $(CFLAGS) -c $< -o $@

$(O)/obj/net/inst_table.o: CFLAGS += -DNET_INSTANCES=$(NET_INSTANCES)
# Rebuilt when NET_INSTANCES changes (the file holds the last value).
$(O)/obj/net/inst_table.o: $(O)/net_instances
$(O)/net_instances: FORCE
	@mkdir -p $(@D)
	@[ "$$(cat $@ 2>/dev/null)" = "$(NET_INSTANCES)" ] || echo $(NET_INSTANCES) > $@
.PHONY: FORCE

$(O)/obj/net_inst0.o: $(INST_OBJS)
	@$(if $(Q),echo "  LD -r   $@")
	$(Q)ld -r -o $@ $^

$(O)/obj/net_inst%.o: $(O)/obj/net_inst0.o
	@$(if $(Q),echo "  COPY    $@")
	$(Q)$(OBJCOPY) -G net_inst_ops $< $@.tmp
	$(Q)$(OBJCOPY) --redefine-sym net_inst_ops=net_inst_ops_$* $@.tmp $@
	$(Q)rm -f $@.tmp

$(O)/obj/%.o: %.S | $(DEPS_STAMP)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  AS      $<")
	$(Q)$(CC) $(CFLAGS) -D__ASSEMBLY__ -c $< -o $@

$(O)/vnetlab.elf: $(PVH_OBJS) $(COMMON_OBJS) linker/pvh.ld
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(PVH_LINK) -o $@ $(PVH_OBJS) $(COMMON_OBJS) $(LIBS)

# Host-side tools, built with the host's compiler for the host: the paced
# frame generators (host/pktgen/, docs/packet-path.md), on an AF_PACKET
# socket (pacegen) and on DPDK's vhost PMD (vupacegen: Debian's dpdk-dev,
# which host/deps.sh installs; pkg-config libdpdk).
HOSTCC      ?= cc
HOST_CFLAGS := -std=gnu11 -O2 -g -Wall -Wextra -Werror
host-tools: $(O)/host/pacegen $(O)/host/vupacegen
$(O)/host/pacegen: host/pktgen/pacegen.c host/pktgen/pktgen.h
	@mkdir -p $(@D)
	@$(if $(Q),echo "  HOSTCC  $<")
	$(Q)$(HOSTCC) $(HOST_CFLAGS) -o $@ $< -lm
$(O)/host/vupacegen: host/pktgen/vupacegen.c host/pktgen/pktgen.h | $(DEPS_STAMP)
	@mkdir -p $(@D)
	@$(if $(Q),echo "  HOSTCC  $<")
	$(Q)$(HOSTCC) $(HOST_CFLAGS) $$(pkg-config --cflags libdpdk) -o $@ $< $$(pkg-config --libs libdpdk) -lm

-include boot/efi/efi.mk
# make fuzz, make fuzz-build: libFuzzer targets for the receive path
# (optional: tests/mutants.py builds a tree without tests/fuzz/).
-include tests/fuzz/fuzz.mk

# The main job: benchmarks against host peers (host/run.sh lists the
# settings: TEST= ROLE= REQ= RESP= INSTANCES= BURST= MSG= DURATION= WARMUP=
# NET= ARGS=; make passes command-line variables on in the environment).
run: pvh
	bash host/run.sh --kernel $(O)/vnetlab.elf

test: deps
	bash tests/run.sh

# Soak (not in CI): RR and STREAM 30 minutes each; pools at the end equal
# those after warm-up, last 5-minute window within 10 % of the first.
SOAK_ARGS ?= --seconds 1800 --window 300
soak: pvh
	python3 tests/soak.py $(SOAK_ARGS)

# Benchmark matrix (host/bench/vnetbench.py; results in results/<timestamp>/):
#   make bench BENCH_ARGS="--matrix host/bench/matrices/small.txt"
BENCH_ARGS ?= --matrix host/bench/matrices/small.txt
bench: deps
	python3 host/bench/vnetbench.py $(BENCH_ARGS)

format:
	clang-format -i $$(git ls-files '*.c' '*.h')

clean:
	rm -rf $(O)

distclean: clean
	rm -rf $(DEPS)

-include $(shell find $(O)/obj -name '*.d' 2>/dev/null)

# `make -s print-VAR`: a make variable's value, for tests and tooling that
# must agree with the lists kept here (e.g. print-VARIANT_IDLE_LINKED).
print-%:
	@echo $($*)
