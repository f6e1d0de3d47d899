# tests/unit/unit.mk: host unit tests of the ring, the transports, the net
# driver and the memcached parser, built with the host compiler
# (AddressSanitizer + UBSan unless UNIT_SAN= is given), one test_vnet
# binary per policy variant; included by
# mk/variants.mk (variant names and variant_flags come from there).
#
#   make unit        build everything, run every binary (bounded by
#                    UNIT_TIMEOUT each), print one line per binary and exit
#                    non-zero if any failed, showing what it expected and saw

UNIT_DIR     := $(O)/unit
UNIT_CC      := gcc
UNIT_SAN     ?= -fsanitize=address,undefined -fno-sanitize-recover=all
UNIT_CFLAGS  := -std=gnu11 -O1 -g -Wall -Wextra -Werror -fno-omit-frame-pointer -I. $(UNIT_SAN)
UNIT_TIMEOUT ?= 120
UNIT_DEPS    := $(wildcard drivers/virtio/*.h tests/unit/*.h) tests/unit/unit.mk

# Policy-free parts, compiled once; each binary links one of the two ring
# files (unit_ring_obj: virtq_packed.o for names with a -packed word).
UNIT_SHARED_SRCS := tests/unit/sim_dev.c tests/unit/sim_rx.c tests/unit/host_shim.c
UNIT_SHARED_OBJS := $(patsubst %.c,$(UNIT_DIR)/obj/%.o,$(UNIT_SHARED_SRCS))
unit_ring_obj = $(patsubst %.c,$(UNIT_DIR)/obj/%.o,$(call ring_file,$(if $(call variant_packed,$(1)),packed)))
UNIT_SPLIT_OBJS := $(UNIT_SHARED_OBJS) $(call unit_ring_obj,split)
UNIT_PACKED_OBJS := $(UNIT_SHARED_OBJS) $(call unit_ring_obj,x-packed)
# Compiled per variant.
# test_vnet: one binary from these files (vnet_fixture.h lists their tests).
UNIT_VNET_TESTS := $(addprefix tests/unit/,test_vnet.c test_vnet_kick.c test_vnet_tx.c \
	test_vnet_reclaim.c test_vnet_rx.c test_vnet_faults.c test_vnet_idle.c test_vnet_fwd.c test_vnet_mq.c \
	vnet_fixture.c)
UNIT_VNET_SRCS := $(UNIT_VNET_TESTS) tests/unit/sim_pci.c drivers/virtio/virtio_dev.c drivers/virtio/vnet.c \
	drivers/virtio/vnet_tx.c drivers/virtio/vnet_rx.c drivers/virtio/vnet_idle.c drivers/virtio/vnet_mq.c drivers/virtio/vnet_rss.c

# The packed ring (RING=packed) through the whole driver: every TX_RECLAIM x
# TX_KICK with EVENT_IDX, the flag protocol per TX_KICK, and the other
# policies over a spread, the idle policies included.
UNIT_PACKED_VARIANTS := \
	$(foreach r,$(VARIANT_RECLAIMS),$(foreach k,$(VARIANT_KICKS),$(r)-$(k)-ei1-eager-inline-zc1-packed)) \
	$(foreach k,$(VARIANT_KICKS),base-$(k)-ei0-eager-inline-zc1-packed) \
	$(foreach r,base v2,$(foreach k,burst timer,$(r)-$(k)-ei1-batched-inline-zc1-packed)) \
	v3-every-ei1-eager-chain-zc0-packed lazy-deferred-ei0-eager-chain-zc1-packed \
	base-every-ei1-eager-inline-zc1-off_none-packed \
	base-every-ei1-eager-inline-zc1-idle_halt-packed base-deferred-ei0-eager-inline-zc1-idle_halt-packed \
	base-timer-ei1-eager-chain-zc0-idle_halt-packed v2-burst-ei0-eager-inline-zc1-idle_adaptive-packed \
	base-every-ei1-eager-inline-zc1-idle_halt-rxc64-packed
# Every TX_RECLAIM x TX_KICK with EVENT_IDX on and off (at the default
# offload level, tso+lro), then the other policies (avail=batched,
# txhdr=chain, zero-copy off, optional features, the lower offload levels)
# over a spread of the first two.
UNIT_VARIANTS := \
	$(foreach r,$(VARIANT_RECLAIMS),$(foreach k,$(VARIANT_KICKS),$(foreach e,1 0,\
		$(r)-$(k)-ei$(e)-eager-inline-zc1))) \
	$(foreach r,base v1 v2 poll,$(foreach k,burst deferred timer,$(r)-$(k)-ei1-batched-inline-zc1)) \
	$(foreach r,base v3 after lazy,$(r)-every-ei1-eager-chain-zc1) poll-deferred-ei0-eager-chain-zc1 \
	$(foreach r,base v1 v2 lazy poll,$(r)-burst-ei1-eager-inline-zc0) after-every-ei1-eager-chain-zc0 \
	base-every-ei1-eager-inline-zc1-off_csum-mrg-nd poll-timer-ei0-batched-chain-zc0-off_none-mrg-nd \
	$(foreach o,none csum tso,base-every-ei1-eager-inline-zc1-off_$(o) v2-burst-ei0-eager-chain-zc0-off_$(o)) \
	base-every-ei1-eager-inline-zc1-idle_halt base-deferred-ei0-eager-inline-zc1-idle_halt \
	base-timer-ei1-eager-chain-zc0-idle_halt base-every-ei1-eager-inline-zc1-idle_adaptive \
	v2-burst-ei0-eager-inline-zc1-idle_adaptive \
	base-every-ei1-eager-inline-zc1-idle_halt-rxc64 base-burst-ei1-eager-inline-zc1-idle_adaptive-rxc16 \
	base-every-ei0-eager-inline-zc1-idle_halt-rxc64 base-every-ei1-eager-inline-zc1-off_none-idle_halt-rxc256 \
	$(UNIT_PACKED_VARIANTS)
# The offload paths (test_offload.c) at every OFFLOAD level, plus copy +
# chained header, and merged buffers without large receive.
UNIT_OFFLOAD_VARIANTS := base-every-ei1-eager-inline-zc1 \
	$(foreach o,none csum tso,base-every-ei1-eager-inline-zc1-off_$(o)) \
	v2-burst-ei0-eager-chain-zc0 poll-timer-ei0-batched-chain-zc0-off_none-mrg-nd \
	base-every-ei1-eager-inline-zc1-off_csum-mrg-nd base-every-ei1-eager-inline-zc1-packed \
	base-every-ei1-eager-inline-zc1-off_csum-mrg-nd-packed
UNIT_OFFLOAD_SRCS := tests/unit/test_offload.c tests/unit/sim_pci.c drivers/virtio/virtio_dev.c drivers/virtio/vnet.c \
	drivers/virtio/vnet_tx.c drivers/virtio/vnet_rx.c drivers/virtio/vnet_idle.c drivers/virtio/vnet_mq.c drivers/virtio/vnet_rss.c
# The RX contract (test_rx_contract.c): the driver's RX path against QEMU
# 7.2's receive side (sim_rx.c), both layouts, EVENT_IDX on and off, at
# the default offload level (large receive over merged 4 KiB buffers,
# where a frame can need more than the device has).
UNIT_RXC_VARIANTS := base-every-ei1-eager-inline-zc1 base-every-ei1-eager-inline-zc1-packed \
	base-every-ei0-eager-inline-zc1 base-every-ei0-eager-inline-zc1-packed
UNIT_RXC_SRCS := tests/unit/test_rx_contract.c tests/unit/vnet_fixture.c tests/unit/sim_pci.c \
	drivers/virtio/virtio_dev.c drivers/virtio/vnet.c drivers/virtio/vnet_tx.c drivers/virtio/vnet_rx.c \
	drivers/virtio/vnet_idle.c drivers/virtio/vnet_mq.c drivers/virtio/vnet_rss.c
UNIT_BINS := $(UNIT_DIR)/test_virtq $(UNIT_DIR)/test_virtq_packed $(UNIT_DIR)/test_virtio_pci $(UNIT_DIR)/test_pci $(UNIT_DIR)/test_paging \
	$(UNIT_DIR)/test_mc_unit \
	$(UNIT_DIR)/test_virtio_mmio $(UNIT_DIR)/test_virtio_mmio_packed \
	$(foreach v,$(UNIT_VARIANTS),$(UNIT_DIR)/$(v)/test_vnet) \
	$(foreach v,$(UNIT_OFFLOAD_VARIANTS),$(UNIT_DIR)/$(v)/test_offload) \
	$(foreach v,$(UNIT_RXC_VARIANTS),$(UNIT_DIR)/$(v)/test_rx_contract)

$(UNIT_DIR)/obj/%.o: %.c $(UNIT_DEPS)
	@mkdir -p $(@D)
	@$(UNIT_CC) $(UNIT_CFLAGS) -c $< -o $@

# The ring contract (test_ring_contract.c), one binary per ring file, each
# with its layout's own tests (ring_contract.h).
$(UNIT_DIR)/test_virtq: tests/unit/test_ring_contract.c tests/unit/test_virtq.c $(UNIT_SPLIT_OBJS) \
		$(UNIT_DEPS)
	@echo "  HOSTCC  $@"
	@$(UNIT_CC) $(UNIT_CFLAGS) $(filter %.c,$^) $(UNIT_SPLIT_OBJS) -o $@

$(UNIT_DIR)/test_virtq_packed: tests/unit/test_ring_contract.c tests/unit/test_virtq_packed.c \
		$(UNIT_PACKED_OBJS) $(UNIT_DEPS)
	@echo "  HOSTCC  $@"
	@$(UNIT_CC) $(UNIT_CFLAGS) $(filter %.c,$^) $(UNIT_PACKED_OBJS) -o $@

# The transport's config reads, with MMIO accesses traced (mmio_trace.h
# replaces kernel/arch.h for virtio_pci.c only).
$(UNIT_DIR)/test_virtio_pci: tests/unit/test_virtio_pci.c drivers/virtio/virtio_pci.c \
		drivers/virtio/virtio_irq.c $(UNIT_SPLIT_OBJS) $(UNIT_DEPS)
	@echo "  HOSTCC  $@"
	@$(UNIT_CC) $(UNIT_CFLAGS) -include tests/unit/mmio_trace.h -c drivers/virtio/virtio_pci.c \
		-o $(UNIT_DIR)/obj/virtio_pci_traced.o
	@$(UNIT_CC) $(UNIT_CFLAGS) -include tests/unit/mmio_trace.h tests/unit/test_virtio_pci.c \
		drivers/virtio/virtio_irq.c $(UNIT_DIR)/obj/virtio_pci_traced.o $(UNIT_SPLIT_OBJS) -o $@

# kernel/pci.c's configuration accesses against a modelled function
# (cfg_model.h replaces kernel/arch.h: ports and ECAM decoded, STATUS W1C).
$(UNIT_DIR)/test_pci: tests/unit/test_pci.c kernel/pci.c kernel/pci_place.c tests/unit/cfg_model.h $(UNIT_DEPS)
	@mkdir -p $(@D)
	@echo "  HOSTCC  $@"
	@$(UNIT_CC) $(UNIT_CFLAGS) -include tests/unit/cfg_model.h tests/unit/test_pci.c kernel/pci.c \
		kernel/pci_place.c -o $@

# kernel/paging.c's tables walked on the host (cr3_shim.h replaces arch.h).
$(UNIT_DIR)/test_paging: tests/unit/test_paging.c kernel/paging.c tests/unit/cr3_shim.h \
		$(UNIT_SPLIT_OBJS) $(UNIT_DEPS)
	@mkdir -p $(@D)
	@echo "  HOSTCC  $@"
	@$(UNIT_CC) $(UNIT_CFLAGS) -include tests/unit/cr3_shim.h tests/unit/test_paging.c kernel/paging.c \
		$(UNIT_SPLIT_OBJS) -o $@

# kernel/trap.c's IDT read back on the host (idt_shim.h replaces arch.h).
UNIT_BINS += $(UNIT_DIR)/test_trap
$(UNIT_DIR)/test_trap: tests/unit/test_trap.c kernel/trap.c tests/unit/idt_shim.h $(UNIT_DEPS)
	@mkdir -p $(@D)
	@echo "  HOSTCC  $@"
	@$(UNIT_CC) $(UNIT_CFLAGS) -include tests/unit/idt_shim.h tests/unit/test_trap.c kernel/trap.c -o $@

# The MMIO transport against a register window in host memory, traced the
# same way; once per ring file (the three area registers take the split
# ring's parts or the packed ring's, 4.2.3.2 step 6).
$(UNIT_DIR)/obj/virtio_mmio_traced.o: drivers/virtio/virtio_mmio.c $(UNIT_DEPS)
	@mkdir -p $(@D)
	@$(UNIT_CC) $(UNIT_CFLAGS) -include tests/unit/mmio_trace.h -c $< -o $@

$(UNIT_DIR)/test_virtio_mmio: tests/unit/test_virtio_mmio.c $(UNIT_DIR)/obj/virtio_mmio_traced.o \
		drivers/virtio/virtio_irq.c $(UNIT_SPLIT_OBJS) $(UNIT_DEPS)
	@echo "  HOSTCC  $@"
	@$(UNIT_CC) $(UNIT_CFLAGS) -include tests/unit/mmio_trace.h tests/unit/test_virtio_mmio.c \
		drivers/virtio/virtio_irq.c $(UNIT_DIR)/obj/virtio_mmio_traced.o $(UNIT_SPLIT_OBJS) -o $@

$(UNIT_DIR)/test_virtio_mmio_packed: tests/unit/test_virtio_mmio.c \
		$(UNIT_DIR)/obj/virtio_mmio_traced.o drivers/virtio/virtio_irq.c $(UNIT_PACKED_OBJS) $(UNIT_DEPS)
	@echo "  HOSTCC  $@"
	@$(UNIT_CC) $(UNIT_CFLAGS) -include tests/unit/mmio_trace.h tests/unit/test_virtio_mmio.c \
		drivers/virtio/virtio_irq.c $(UNIT_DIR)/obj/virtio_mmio_traced.o $(UNIT_PACKED_OBJS) -o $@

# app=memcached's protocol parser and store (policy-free; also built by
# tests/cases/test_memcached.py).
UNIT_MC_SRCS := tests/unit/test_mc_unit.c apps/memcached_proto.c apps/memcached_store.c
$(UNIT_DIR)/test_mc_unit: $(UNIT_MC_SRCS) apps/memcached.h $(UNIT_DEPS)
	@mkdir -p $(@D)
	@echo "  HOSTCC  $@"
	@$(UNIT_CC) $(UNIT_CFLAGS) $(UNIT_MC_SRCS) -o $@

# Each variant's sources are compiled one object at a time (a static
# pattern rule per variant), so an edit rebuilds one object per variant,
# not the whole binary (tests/mutants.py builds after every one-line edit).
# test_vnet's objects carry VNET_TRACE (its own directory, t/); test_offload
# and test_rx_contract share one set without it (o/).
unit_objs = $(patsubst %.c,$(UNIT_DIR)/$(1)/$(2)/%.o,$(3))
UNIT_PLAIN_SRCS := $(sort $(UNIT_OFFLOAD_SRCS) $(UNIT_RXC_SRCS))

define UNIT_OBJ_RULE
$(call unit_objs,$(1),$(2),$(3)): $(UNIT_DIR)/$(1)/$(2)/%.o: %.c $(UNIT_DEPS)
	@mkdir -p $$(@D)
	@$(UNIT_CC) $(UNIT_CFLAGS) $(4) $$(call variant_flags,$(1)) -c $$< -o $$@
endef
$(foreach v,$(UNIT_VARIANTS),$(eval $(call UNIT_OBJ_RULE,$(v),t,$(UNIT_VNET_SRCS),-DVNET_TRACE=1)))
$(foreach v,$(sort $(UNIT_OFFLOAD_VARIANTS) $(UNIT_RXC_VARIANTS)),\
	$(eval $(call UNIT_OBJ_RULE,$(v),o,$(UNIT_PLAIN_SRCS),)))

# One binary: the kind's objects of this variant, the shared ones and the
# variant's ring file.
define UNIT_LINK_RULE
$(UNIT_DIR)/$(1)/$(2): $(call unit_objs,$(1),$(3),$(4)) $(UNIT_SHARED_OBJS) $(call unit_ring_obj,$(1))
	@echo "  HOSTCC  $$@"
	@$(UNIT_CC) $(UNIT_CFLAGS) $$^ -o $$@
endef
$(foreach v,$(UNIT_VARIANTS),$(eval $(call UNIT_LINK_RULE,$(v),test_vnet,t,$(UNIT_VNET_SRCS))))
$(foreach v,$(UNIT_OFFLOAD_VARIANTS),$(eval $(call UNIT_LINK_RULE,$(v),test_offload,o,$(UNIT_OFFLOAD_SRCS))))
$(foreach v,$(UNIT_RXC_VARIANTS),$(eval $(call UNIT_LINK_RULE,$(v),test_rx_contract,o,$(UNIT_RXC_SRCS))))

.PHONY: unit
# net/inst_table.c (what the copies of the TCP/IP side share) with three
# copies' placeholders.
UNIT_BINS += $(UNIT_DIR)/test_inst_table
$(UNIT_DIR)/test_inst_table: tests/unit/test_inst_table.c net/inst_table.c net/inst.h $(UNIT_DEPS)
	@mkdir -p $(@D)
	@echo "  HOSTCC  $@"
	@$(UNIT_CC) $(UNIT_CFLAGS) -DNET_INSTANCES=3 tests/unit/test_inst_table.c net/inst_table.c -o $@

# apps/lib/result.c's RESULT line builder and which CPU may use it; the
# lwIP types net/net.h names come from tests/unit/lwip_shim (a unit build
# has no deps/).
UNIT_BINS += $(UNIT_DIR)/test_result
UNIT_RESULT_SRCS := tests/unit/test_result.c apps/lib/result.c apps/lib/hist.c
$(UNIT_DIR)/test_result: $(UNIT_RESULT_SRCS) apps/lib/result.h apps/lib/hist.h net/net.h \
		$(wildcard tests/unit/lwip_shim/lwip/*.h) $(UNIT_DEPS)
	@mkdir -p $(@D)
	@echo "  HOSTCC  $@"
	@$(UNIT_CC) $(UNIT_CFLAGS) -Itests/unit/lwip_shim $(UNIT_RESULT_SRCS) -o $@

unit: $(UNIT_BINS)
	@bash tests/unit/run.sh $(UNIT_TIMEOUT) $(UNIT_BINS)

