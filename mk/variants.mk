# mk/variants.mk: the virtio-net driver's compile-time policies
# (drivers/virtio/vnet_policy.h, which holds the defaults and rejects
# illegal combinations) as make variables, and the targets that build and
# test every combination. Included by the top-level Makefile after
# COMMON_OBJS and PVH_OBJS are defined.
#
#   make TX_RECLAIM=after TX_KICK=burst ...   the whole appliance in one variant
#     TX_RECLAIM=base|v0|v1|v2|v3|after|lazy|poll (before = base)
#     TX_KICK=every|burst|deferred|timer
#     EVENT_IDX=0|1   AVAIL_PUBLISH=eager|batched   TXHDR=inline|chain   ZEROCOPY=0|1
#     RECLAIM_K=N  LAZY_THRESH=N  TX_IDLE_RECLAIM_US=N  TX_STALE_RECLAIM_US=N  RX_BUDGET=N  KICK_BURST_MAX=N  KICK_TIMER_US=N  QUEUE_MAX=N
#     OFFLOAD=lro|tso|csum|none  MRG_RXBUF=0|1  NOTIFICATION_DATA=0|1
#     IDLE=poll|halt|adaptive  IDLE_POLL_US=N  IDLE_HALT_MAX_US=N  RELAX=none|pause
#     RING=split|packed (the Makefile links virtq.c or virtq_packed.c)
#     (unset variables keep the header's defaults; changing them rebuilds
#     the driver objects, see VARIANT_STAMP)
#   make variants   every legal TX_RECLAIM x TX_KICK x EVENT_IDX x AVAIL_PUBLISH
#                   x TXHDR x ZEROCOPY combination compiled (-Werror), and a
#                   representative set linked into $(O)/v/<name>/vnetlab.elf
#   make unit       host unit tests (tests/unit/unit.mk)
#
# A variant's name spells its choices in that order, plus optional extras:
#   base-every-ei1-eager-inline-zc1[-off_none|-off_csum|-off_tso][-mrg][-nd]
#     [-idle_halt|-idle_adaptive][-relax_pause][-packed]
# (no -off_ word: the default, offload=tso+lro; no -idle_ word: idle=poll;
# -idle_adaptive polls IDLE_POLL_US=50 before it halts; -packed: the packed
# virtqueue layout, virtio 1.2 2.8, instead of the split one)

# The 2011 thread's variants first (vnet_policy.h quotes their definition),
# then this project's extra policies.
VARIANT_RECLAIMS := base v0 v1 v2 v3 after lazy poll
VARIANT_KICKS    := every burst deferred timer
VARIANT_UC_base := BASE
VARIANT_UC_before := BASE
VARIANT_UC_v0 := V0
VARIANT_UC_v1 := V1
VARIANT_UC_v2 := V2
VARIANT_UC_v3 := V3
VARIANT_UC_after := AFTER
VARIANT_UC_lazy := LAZY
VARIANT_UC_poll := POLL
VARIANT_UC_every := EVERY
VARIANT_UC_burst := BURST
VARIANT_UC_deferred := DEFERRED
VARIANT_UC_timer := TIMER
VARIANT_OFFLOADS := lro tso csum none
VARIANT_UC_off_lro := LRO
VARIANT_UC_off_tso := TSO
VARIANT_UC_off_csum := CSUM
VARIANT_UC_off_none := NONE

variant_pick = $(if $(filter $(2),$(3)),$(2),$(error $(1)=$(2): expected one of $(3)))
variant_01 = $(if $(filter 0 1,$(2)),$(2),$(error $(1)=$(2): expected 0 or 1))

# ---- one variant of the whole appliance, from command-line variables ----
VARIANT_CFLAGS :=
ifdef TX_RECLAIM
VARIANT_CFLAGS += -DVNET_TX_RECLAIM=VNET_RECLAIM_$(VARIANT_UC_$(call variant_pick,TX_RECLAIM,$(TX_RECLAIM),$(VARIANT_RECLAIMS) before))
endif
ifdef TX_KICK
VARIANT_CFLAGS += -DVNET_TX_KICK=VNET_KICK_$(VARIANT_UC_$(call variant_pick,TX_KICK,$(TX_KICK),$(VARIANT_KICKS)))
endif
ifdef EVENT_IDX
VARIANT_CFLAGS += -DVNET_EVENT_IDX=$(call variant_01,EVENT_IDX,$(EVENT_IDX))
endif
ifdef AVAIL_PUBLISH
VARIANT_CFLAGS += -DVNET_AVAIL_BATCHED=$(if $(filter batched,$(call variant_pick,AVAIL_PUBLISH,$(AVAIL_PUBLISH),eager batched)),1,0)
endif
ifdef TXHDR
VARIANT_CFLAGS += -DVNET_TXHDR_INLINE=$(if $(filter inline,$(call variant_pick,TXHDR,$(TXHDR),inline chain)),1,0)
endif
ifdef ZEROCOPY
VARIANT_CFLAGS += -DVNET_ZEROCOPY=$(call variant_01,ZEROCOPY,$(ZEROCOPY))
endif
ifdef MRG_RXBUF
VARIANT_CFLAGS += -DVNET_MRG_RXBUF=$(call variant_01,MRG_RXBUF,$(MRG_RXBUF))
endif
ifdef OFFLOAD
VARIANT_CFLAGS += -DVNET_OFFLOAD=VNET_OFFLOAD_$(VARIANT_UC_off_$(call variant_pick,OFFLOAD,$(OFFLOAD),$(VARIANT_OFFLOADS)))
endif
ifdef NOTIFICATION_DATA
VARIANT_CFLAGS += -DVNET_NOTIFICATION_DATA=$(call variant_01,NOTIFICATION_DATA,$(NOTIFICATION_DATA))
endif
VARIANT_IDLES := poll halt adaptive
VARIANT_UC_idle_poll := POLL
VARIANT_UC_idle_halt := HALT
VARIANT_UC_idle_adaptive := ADAPTIVE
ifdef IDLE
VARIANT_CFLAGS += -DVNET_IDLE=VNET_IDLE_$(VARIANT_UC_idle_$(call variant_pick,IDLE,$(IDLE),$(VARIANT_IDLES)))
endif
ifdef RELAX
VARIANT_CFLAGS += -DVNET_RELAX_PAUSE=$(if $(filter pause,$(call variant_pick,RELAX,$(RELAX),none pause)),1,0)
endif
ifdef RING
VARIANT_CFLAGS += -DVNET_RING=VNET_RING_$(if $(filter packed,$(call variant_pick,RING,$(RING),split packed)),PACKED,SPLIT)
endif
# Numbers: range-checked by vnet_policy.h's #errors.
VARIANT_CFLAGS += $(if $(RECLAIM_K),-DVNET_RECLAIM_K=$(RECLAIM_K)) \
	$(if $(LAZY_THRESH),-DVNET_LAZY_THRESH=$(LAZY_THRESH)) \
	$(if $(TX_IDLE_RECLAIM_US),-DVNET_TX_IDLE_RECLAIM_US=$(TX_IDLE_RECLAIM_US)) \
	$(if $(TX_STALE_RECLAIM_US),-DVNET_TX_STALE_RECLAIM_US=$(TX_STALE_RECLAIM_US)) \
	$(if $(RX_BUDGET),-DVNET_RX_BUDGET=$(RX_BUDGET)) \
	$(if $(KICK_BURST_MAX),-DVNET_KICK_BURST_MAX=$(KICK_BURST_MAX)) \
	$(if $(KICK_TIMER_US),-DVNET_KICK_TIMER_US=$(KICK_TIMER_US)) \
	$(if $(QUEUE_MAX),-DVIRTQ_MAX_SIZE=$(QUEUE_MAX)) \
	$(if $(IDLE_POLL_US),-DVNET_IDLE_POLL_US=$(IDLE_POLL_US)) \
	$(if $(IDLE_HALT_MAX_US),-DVNET_IDLE_HALT_MAX_US=$(IDLE_HALT_MAX_US)) \
	$(if $(RX_COALESCE),-DVNET_RX_COALESCE=$(RX_COALESCE)) \
	$(if $(RX_COALESCE_US),-DVNET_RX_COALESCE_US=$(RX_COALESCE_US))
VARIANT_CFLAGS := $(strip $(VARIANT_CFLAGS))
CFLAGS += $(VARIANT_CFLAGS)

# Objects do not record the flags they were built with: a stamp holding the
# policy flags, rewritten only when they change, makes the driver objects
# (the only ones that read vnet_policy.h) rebuild when the variant changes.
VARIANT_STAMP := $(O)/policy.cflags
VARIANT_STAMP_TEXT := $(strip $(VARIANT_CFLAGS) $(POLICY_CFLAGS))
$(shell mkdir -p $(O) && (printf '%s\n' '$(VARIANT_STAMP_TEXT)' | cmp -s - $(VARIANT_STAMP) || \
	printf '%s\n' '$(VARIANT_STAMP_TEXT)' > $(VARIANT_STAMP)))
$(call obj,$(DRIVER_SRCS)): $(VARIANT_STAMP)

# ---- every combination ----
variant_word = $(word $(2),$(subst -, ,$(1)))
variant_flags = -DVNET_TX_RECLAIM=VNET_RECLAIM_$(VARIANT_UC_$(call variant_word,$(1),1)) \
	-DVNET_TX_KICK=VNET_KICK_$(VARIANT_UC_$(call variant_word,$(1),2)) \
	-DVNET_EVENT_IDX=$(patsubst ei%,%,$(call variant_word,$(1),3)) \
	-DVNET_AVAIL_BATCHED=$(if $(filter batched,$(call variant_word,$(1),4)),1,0) \
	-DVNET_TXHDR_INLINE=$(if $(filter inline,$(call variant_word,$(1),5)),1,0) \
	-DVNET_ZEROCOPY=$(patsubst zc%,%,$(call variant_word,$(1),6)) \
	$(foreach o,none csum tso,$(if $(filter off_$(o),$(subst -, ,$(1))),-DVNET_OFFLOAD=VNET_OFFLOAD_$(VARIANT_UC_off_$(o)))) \
	$(if $(filter mrg,$(subst -, ,$(1))),-DVNET_MRG_RXBUF=1) \
	$(if $(filter nd,$(subst -, ,$(1))),-DVNET_NOTIFICATION_DATA=1) \
	$(foreach i,halt adaptive,$(if $(filter idle_$(i),$(subst -, ,$(1))),-DVNET_IDLE=VNET_IDLE_$(VARIANT_UC_idle_$(i)))) \
	$(if $(filter relax_pause,$(subst -, ,$(1))),-DVNET_RELAX_PAUSE=1) \
	$(foreach w,$(filter rxc%,$(subst -, ,$(1))),-DVNET_RX_COALESCE=$(patsubst rxc%,%,$(w))) \
	$(if $(call variant_packed,$(1)),-DVNET_RING=VNET_RING_PACKED)
variant_packed = $(filter packed,$(subst -, ,$(1)))

VARIANT_CROSS := $(foreach r,$(VARIANT_RECLAIMS),$(foreach k,$(VARIANT_KICKS),$(foreach e,0 1,\
	$(foreach a,eager batched,$(foreach h,inline chain,$(foreach z,0 1,\
	$(r)-$(k)-ei$(e)-$(a)-$(h)-zc$(z)))))))
# kick=every with avail=batched, and v3 with avail=batched, are rejected by
# vnet_policy.h (#error).
variant_illegal = $(or $(and $(findstring -every-,$(1)),$(findstring -batched-,$(1))),\
	$(and $(filter v3-%,$(1)),$(findstring -batched-,$(1))))
# Linked for the idle-policy tests (tests/cases/test_idle.py): each IDLE
# policy x each TX_KICK, and the pause relax.
VARIANT_IDLE_LINKED := $(foreach i,halt adaptive,$(foreach k,$(VARIANT_KICKS),\
	base-$(k)-ei1-eager-inline-zc1-idle_$(i))) base-every-ei0-eager-inline-zc1-idle_halt \
	base-every-ei1-eager-inline-zc1-relax_pause base-every-ei1-eager-inline-zc1-idle_adaptive-relax_pause \
	base-every-ei1-eager-inline-zc1-idle_halt-rxc64 base-burst-ei1-eager-inline-zc1-idle_adaptive-rxc64
# Linked for the packed-ring tests (tests/cases/test_packed.py): each
# TX_KICK, each other TX_RECLAIM (with the kicks in turn), the flag
# protocol (no EVENT_IDX), and a halting build.
VARIANT_PACKED_LINKED := $(foreach k,$(VARIANT_KICKS),base-$(k)-ei1-eager-inline-zc1-packed) \
	v0-burst-ei1-eager-inline-zc1-packed v1-deferred-ei1-eager-inline-zc1-packed \
	v2-timer-ei1-eager-inline-zc1-packed v3-every-ei1-eager-inline-zc1-packed \
	after-burst-ei1-eager-inline-zc1-packed lazy-deferred-ei1-eager-inline-zc1-packed \
	poll-timer-ei1-eager-inline-zc1-packed \
	base-every-ei0-eager-inline-zc1-packed base-every-ei1-eager-inline-zc1-idle_halt-packed
# Packed: every TX_RECLAIM x TX_KICK x EVENT_IDX, then the other policies
# over a spread (the ring file is compiled with each).
VARIANT_PACKED_LEGAL := $(foreach r,$(VARIANT_RECLAIMS),$(foreach k,$(VARIANT_KICKS),$(foreach e,0 1,\
	$(r)-$(k)-ei$(e)-eager-inline-zc1-packed))) \
	$(foreach r,base v1 v2 poll,$(foreach k,burst deferred timer,$(r)-$(k)-ei1-batched-inline-zc1-packed)) \
	$(foreach r,base v3 after lazy,$(r)-every-ei1-eager-chain-zc0-packed) \
	$(foreach o,none csum tso,base-every-ei1-eager-inline-zc1-off_$(o)-packed) \
	base-every-ei1-eager-inline-zc1-off_csum-mrg-nd-packed \
	$(foreach i,halt adaptive,$(foreach k,$(VARIANT_KICKS),base-$(k)-ei1-eager-inline-zc1-idle_$(i)-packed)) \
	base-every-ei0-eager-inline-zc1-idle_halt-packed \
	base-every-ei1-eager-inline-zc1-idle_halt-rxc64-packed base-burst-ei1-eager-inline-zc1-idle_adaptive-rxc16-packed
VARIANT_LEGAL := $(VARIANT_PACKED_LEGAL) $(foreach v,$(VARIANT_CROSS),$(if $(call variant_illegal,$(v)),,$(v))) \
	$(foreach o,none csum tso,$(foreach k,$(VARIANT_KICKS),base-$(k)-ei1-eager-inline-zc1-off_$(o))) \
	base-every-ei1-eager-inline-zc1-off_csum-mrg-nd poll-burst-ei0-batched-chain-zc0-off_none-mrg-nd \
	$(foreach r,$(VARIANT_RECLAIMS),$(foreach i,halt adaptive,$(r)-every-ei1-eager-inline-zc1-idle_$(i) \
		$(r)-deferred-ei0-eager-chain-zc0-idle_$(i))) \
	$(filter-out base-every-ei1-eager-inline-zc1-idle_halt base-every-ei1-eager-inline-zc1-idle_adaptive,$(VARIANT_IDLE_LINKED))
# Linked and booted (tests/cases/test_driver.py): each TX_RECLAIM, each
# TX_KICK, EVENT_IDX both ways, and both values of the other three.
VARIANT_LINKED := base-every-ei1-eager-inline-zc1 after-burst-ei0-batched-chain-zc1 \
	v1-deferred-ei1-batched-inline-zc0 v2-every-ei0-eager-chain-zc0 \
	lazy-timer-ei1-eager-inline-zc1 poll-deferred-ei0-eager-inline-zc1 \
	v0-burst-ei1-eager-inline-zc1 v3-every-ei1-eager-chain-zc1
# Linked for the offload integrity tests (tests/cases/test_offload.py):
# every OFFLOAD level x every TX_KICK (the default level: the names above
# without an -off_ word, plus these).
VARIANT_OFFLOAD_LINKED := $(foreach o,none csum tso,$(foreach k,$(VARIANT_KICKS),\
	base-$(k)-ei1-eager-inline-zc1-off_$(o))) \
	base-burst-ei1-eager-inline-zc1 base-deferred-ei1-eager-inline-zc1 \
	base-timer-ei1-eager-inline-zc1
VARIANT_LINKED += $(VARIANT_OFFLOAD_LINKED)
VARIANT_LINKED += $(VARIANT_IDLE_LINKED)
VARIANT_LINKED += $(VARIANT_PACKED_LINKED)

VARIANT_DIR := $(O)/v
# The ring files and the transports (virtio_pci.c, virtio_mmio.c,
# virtio_dev.c) read no policy (only VIRTQ_MAX_SIZE): the main build
# compiles them; these are compiled once per variant (and, for a packed
# variant, virtq_packed.c with them, so it too builds -Werror).
VARIANT_SRCS := drivers/virtio/vnet.c drivers/virtio/vnet_tx.c drivers/virtio/vnet_rx.c \
	drivers/virtio/vnet_idle.c
variant_objs = $(patsubst drivers/virtio/%.c,$(VARIANT_DIR)/$(1)/%.o,$(VARIANT_SRCS) \
	$(if $(call variant_packed,$(1)),$(call ring_file,packed)))
# A linked variant gets all its driver objects (with its ring file), so
# nothing of the main build's variant (e.g. QUEUE_MAX, RING) leaks in.
variant_all_objs = $(patsubst drivers/virtio/%.c,$(VARIANT_DIR)/$(1)/%.o,\
	$(call driver_srcs,$(if $(call variant_packed,$(1)),packed,split)))

define VARIANT_RULES
$(VARIANT_DIR)/$(1)/%.o: drivers/virtio/%.c | $(DEPS_STAMP)
	@mkdir -p $$(@D)
	@$(CC) $(CFLAGS_BASE) $(call variant_flags,$(1)) -c $$< -o $$@ || \
		{ echo "variants: $(1) does not build"; exit 1; }
endef
$(foreach v,$(VARIANT_LEGAL),$(eval $(call VARIANT_RULES,$(v))))

# Linked like $(O)/vnetlab.elf (PVH_LINK in the Makefile), with this
# variant's driver objects.
VARIANT_BASE_OBJS := $(PVH_OBJS) $(filter-out $(call obj,$(DRIVER_SRCS)),$(COMMON_OBJS))
define VARIANT_LINK_RULE
$(VARIANT_DIR)/$(1)/vnetlab.elf: $(VARIANT_BASE_OBJS) $(call variant_all_objs,$(1)) linker/pvh.ld
	@echo "  LD      $$@"
	@$(PVH_LINK) -o $$@ $$(filter %.o,$$^) $(LIBS)
endef
$(foreach v,$(VARIANT_LINKED),$(eval $(call VARIANT_LINK_RULE,$(v))))

.PHONY: variants variants-compile variants-link
variants: variants-compile variants-link
variants-compile: $(foreach v,$(VARIANT_LEGAL),$(call variant_objs,$(v)))
	@echo "variants: $(words $(VARIANT_LEGAL)) driver variants compiled warning-free"
variants-link: $(foreach v,$(VARIANT_LINKED),$(VARIANT_DIR)/$(v)/vnetlab.elf)
	@echo "variants: linked $(VARIANT_LINKED)"

-include $(wildcard $(VARIANT_DIR)/*/*.d)

include tests/unit/unit.mk
