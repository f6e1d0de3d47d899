# mk/variants.mk: the virtio-net driver's compile-time policies as make
# variables, and the targets that build and test every combination. The
# policies are declared once, in mk/policies.def (make variable, C macro,
# values, default, variant-name word, help); drivers/virtio/vnet_policy.h
# holds the defaults and rejects illegal combinations. Included by the
# top-level Makefile after COMMON_OBJS and PVH_OBJS are defined.
#
#   make TX_RECLAIM=after TX_KICK=burst ...   the whole appliance in one variant
#     (the variables and their values: mk/policies.def, or the table
#     `python3 host/bench/variants.py --table` prints; unset variables keep
#     the header's defaults; changing them rebuilds the driver objects, see
#     VARIANT_STAMP)
#   make variants   every legal TX_RECLAIM x TX_KICK x EVENT_IDX x AVAIL_PUBLISH
#                   x TXHDR x ZEROCOPY combination compiled (-Werror), and a
#                   representative set linked into $(O)/v/<name>/vnetlab.elf
#   make unit       host unit tests (tests/unit/unit.mk)
#
# A variant's name spells its choices (the policies.def WORD column): the
# pos: words in order, then optional extras, e.g.
#   base-every-ei1-eager-inline-zc1[-off_none|-off_csum|-off_tso][-mrg][-nd]
#     [-idle_halt|-idle_adaptive][-relax_pause][-rxcN][-packed]
# (no -off_ word: the default, offload=tso+lro; no -idle_ word: idle=poll;
# -idle_adaptive polls IDLE_POLL_US=50 before it halts; -packed: the packed
# virtqueue layout, virtio 1.2 2.8, instead of the split one)

include mk/policies.def
POLICIES := $(shell sed -n 's/^POLICY\.\([A-Z0-9_]*\) *:=.*/\1/p' mk/policies.def)
comma := ,
pol_field = $(word $(2),$(POLICY.$(1)))
pol_macro = $(call pol_field,$(1),1)
pol_choices = $(if $(findstring =,$(call pol_field,$(1),2)),$(subst $(comma), ,$(call pol_field,$(1),2)))
pol_words = $(foreach c,$(call pol_choices,$(1)),$(firstword $(subst =, ,$(c))))
pol_cval = $(patsubst $(2)=%,%,$(filter $(2)=%,$(call pol_choices,$(1))))
pol_pat = $(patsubst pos:%,%,$(patsubst opt:%,%,$(call pol_field,$(1),4)))
variant_pick = $(if $(filter $(2),$(3)),$(2),$(error $(1)=$(2): expected one of $(3)))
# -DMACRO=C-value for VAR=value: a choice is checked against its words; a
# number is passed on (vnet_policy.h's #errors range-check it).
pol_flag = -D$(call pol_macro,$(1))=$(if $(call pol_choices,$(1)),$(call pol_cval,$(1),$(call variant_pick,$(1),$(2),$(call pol_words,$(1)))),$(2))

# The value lists the combinations below iterate over.
VARIANT_RECLAIMS := $(filter-out before,$(call pol_words,TX_RECLAIM))
VARIANT_KICKS    := $(call pol_words,TX_KICK)
VARIANT_OFFLOADS := $(call pol_words,OFFLOAD)
VARIANT_IDLES    := $(call pol_words,IDLE)

# ---- one variant of the whole appliance, from command-line variables ----
VARIANT_CFLAGS := $(strip $(foreach p,$(POLICIES),$(if $($(p)),$(call pol_flag,$(p),$($(p))))))
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
# A name's flags: the i-th word is the i-th pos: policy's value; each
# opt:PAT word (PAT with %, or WORD=VALUE) sets its policy.
POLICY_POS := $(foreach p,$(POLICIES),$(if $(filter pos:%,$(call pol_field,$(p),4)),$(p)))
POLICY_OPT := $(foreach p,$(POLICIES),$(if $(filter opt:%,$(call pol_field,$(p),4)),$(p)))
variant_extra = $(wordlist $(words x $(POLICY_POS)),999,$(subst -, ,$(1)))
variant_opt_flag = $(if $(findstring =,$(2)),\
	$(if $(filter $(firstword $(subst =, ,$(2))),$(3)),$(call pol_flag,$(1),$(lastword $(subst =, ,$(2))))),\
	$(foreach w,$(filter $(2),$(3)),$(call pol_flag,$(1),$(patsubst $(2),%,$(w)))))
variant_flags = $(foreach i,$(wordlist 1,$(words $(POLICY_POS)),1 2 3 4 5 6 7 8 9 10 11 12),\
	$(call pol_flag,$(word $(i),$(POLICY_POS)),$(patsubst $(call pol_pat,$(word $(i),$(POLICY_POS))),%,$(call variant_word,$(1),$(i))))) \
	$(foreach p,$(POLICY_OPT),$(call variant_opt_flag,$(p),$(call pol_pat,$(p)),$(call variant_extra,$(1))))
variant_packed = $(filter packed,$(subst -, ,$(1)))
# `make -s print-variant-flags NAMES="..."`: each name and its -D flags (for
# tests/cases/test_policies.py, which checks them against the harness's parser).
.PHONY: print-variant-flags
print-variant-flags:
	@$(foreach v,$(NAMES),echo "$(v): $(strip $(call variant_flags,$(v)))";)

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
	drivers/virtio/vnet_idle.c drivers/virtio/vnet_mq.c
variant_objs = $(patsubst drivers/virtio/%.c,$(VARIANT_DIR)/$(1)/%.o,$(VARIANT_SRCS) \
	$(if $(call variant_packed,$(1)),$(call ring_file,packed)))
# A linked variant gets all its driver objects (with its ring file), so
# nothing of the main build's variant (e.g. QUEUE_MAX, RING) leaks in.
variant_all_objs = $(patsubst drivers/virtio/%.c,$(VARIANT_DIR)/$(1)/%.o,\
	$(call driver_srcs,$(if $(call variant_packed,$(1)),packed,split)))

define VARIANT_RULES
$(VARIANT_DIR)/$(1)/%.o: drivers/virtio/%.c | $(DEPS_STAMP)
	@mkdir -p $$(@D)
	@$(CC) $(CFLAGS_BASE) $$(call variant_flags,$(1)) -c $$< -o $$@ || \
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
