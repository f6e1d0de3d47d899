# tests/fuzz/fuzz.mk: libFuzzer targets for the receive path, built for the
# host with clang (-fsanitize=fuzzer,address,undefined; Debian clang +
# libclang-rt-14-dev); included by the top Makefile.
#
#   make fuzz-build   build $(O)/fuzz/fuzz_vnet_rx, fuzz_vnet_dev and fuzz_netif
#   make fuzz         run each target FUZZ_SECONDS (600) from its seed corpus
#                     (tests/fuzz/corpus/<target>/) plus the regression inputs
#                     (tests/fuzz/regress/<target>/), print executions,
#                     coverage and crashes; non-zero exit on any crash
#   tests/fuzz/run.sh SECONDS   what make test runs (a bounded run)

FUZZ_DIR    := $(O)/fuzz
FUZZ_CC     := clang
FUZZ_CFLAGS := -std=gnu11 -O1 -g -Wall -Wextra -Werror -fno-omit-frame-pointer -I. \
	-fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all
FUZZ_SECONDS ?= 600
FUZZ_DEPS   := $(wildcard drivers/virtio/*.h tests/unit/*.h tests/fuzz/*.h net/*.h net/port/*.h net/port/arch/*.h) \
	tests/fuzz/fuzz.mk

# The driver as the unit tests link it: every file but the two transports
# and their probe, which sim_pci.c replaces, with the split ring
# (driver_srcs: one ring file); and what every target shares (harness.c).
FUZZ_DRIVER_SRCS := tests/fuzz/harness.c tests/unit/sim_dev.c tests/unit/host_shim.c tests/unit/sim_pci.c \
	$(filter-out drivers/virtio/virtio_pci.c drivers/virtio/virtio_mmio.c drivers/virtio/virtio_probe.c,\
	$(call driver_srcs,split))

$(FUZZ_DIR)/fuzz_vnet_rx: tests/fuzz/fuzz_vnet_rx.c $(FUZZ_DRIVER_SRCS) $(FUZZ_DEPS)
	@mkdir -p $(@D)
	@echo "  FUZZCC  $@"
	@$(FUZZ_CC) $(FUZZ_CFLAGS) tests/fuzz/fuzz_vnet_rx.c $(FUZZ_DRIVER_SRCS) -o $@

# The receive path against a device that rewrites its memory between the
# driver's reads (page protection + single-step). FUZZ_VNET_RX_SRC lets
# tests/cases/test_fuzz.py build it with a mutant vnet_rx.c.
FUZZ_VNET_RX_SRC ?= drivers/virtio/vnet_rx.c
FUZZ_VNET_DEV_OUT ?= $(FUZZ_DIR)/fuzz_vnet_dev
$(FUZZ_VNET_DEV_OUT): tests/fuzz/fuzz_vnet_dev.c $(FUZZ_DRIVER_SRCS) $(FUZZ_VNET_RX_SRC) $(FUZZ_DEPS)
	@mkdir -p $(@D)
	@echo "  FUZZCC  $@"
	@$(FUZZ_CC) $(FUZZ_CFLAGS) tests/fuzz/fuzz_vnet_dev.c \
		$(filter-out drivers/virtio/vnet_rx.c,$(FUZZ_DRIVER_SRCS)) $(FUZZ_VNET_RX_SRC) -o $@

# The netif + lwIP input path: lwIP's core from deps/ with our lwipopts.h
# (compiled with clang's warnings off: upstream code, not ours), and
# net/netif.c, net/offload.c on the driver and the simulated device.
FUZZ_LWIP_INC  := -Inet/port -I$(LWIP)/src/include
FUZZ_LWIP_OBJS := $(patsubst %.c,$(FUZZ_DIR)/lwip/%.o,$(filter-out apps/%,$(LWIP_FILES)))

$(FUZZ_DIR)/lwip/%.o: $(LWIP)/src/%.c net/port/lwipopts.h net/port/hooks.h | $(DEPS_STAMP)
	@mkdir -p $(@D)
	@$(FUZZ_CC) $(FUZZ_CFLAGS) $(FUZZ_LWIP_INC) -w -Wno-error -c $< -o $@

# glibc marks mallinfo() deprecated (picolibc's is not). FUZZ_NETIF_SRC and
# FUZZ_NETIF_OUT let tests/cases/test_fuzz.py build a mutant netif.c.
FUZZ_NETIF_SRC ?= net/netif.c
FUZZ_NETIF_OUT ?= $(FUZZ_DIR)/fuzz_netif
# One copy of the TCP/IP side (net/inst.h): net/inst_table.c built for one,
# and fuzz_netif.c says it is copy 0 of 1.
$(FUZZ_NETIF_OUT): tests/fuzz/fuzz_netif.c $(FUZZ_NETIF_SRC) net/offload.c net/flood.c net/ooseq.c \
		net/inst_table.c $(FUZZ_DRIVER_SRCS) $(FUZZ_LWIP_OBJS) $(FUZZ_DEPS)
	@mkdir -p $(@D)
	@echo "  FUZZCC  $@"
	@$(FUZZ_CC) $(FUZZ_CFLAGS) $(FUZZ_LWIP_INC) -Wno-deprecated-declarations -DNET_INSTANCES=1 \
		tests/fuzz/fuzz_netif.c $(FUZZ_NETIF_SRC) net/offload.c net/flood.c net/ooseq.c net/inst_table.c \
		$(FUZZ_DRIVER_SRCS) $(FUZZ_LWIP_OBJS) -o $@

FUZZ_BINS := $(FUZZ_DIR)/fuzz_vnet_rx $(FUZZ_DIR)/fuzz_vnet_dev $(FUZZ_DIR)/fuzz_netif

.PHONY: fuzz fuzz-build
fuzz-build: $(FUZZ_BINS)
fuzz: $(FUZZ_BINS)
	@bash tests/fuzz/run.sh $(FUZZ_SECONDS) $(FUZZ_BINS)
