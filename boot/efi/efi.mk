# boot/efi/efi.mk: the UEFI front-end ($(O)/BOOTX64.EFI) and a bootable GPT
# disk image ($(O)/vnetlab.img). Included by the top-level Makefile, which
# provides CC, OBJCOPY, CFLAGS, COMMON_OBJS, LIBS, LDLIBC and obj().
#
# How the EFI application is made (the GNU-EFI recipe):
#  1. boot/efi/*.c are compiled with the kernel's CFLAGS plus GNU-EFI's
#     headers. -fshort-wchar makes L"..." UCS-2 (CHAR16);
#     GNU_EFI_USE_MS_ABI marks every firmware function pointer ms_abi, so
#     firmware calls are plain calls (no uefi_call_wrapper thunk).
#  2. ld links GNU-EFI's crt0 (entry _start: applies our own relocations
#     with _relocate from libgnuefi, then calls efi_main), the front-end,
#     the kernel objects and picolibc into an ELF shared object laid out by
#     GNU-EFI's linker script: one .text, one .data holding .rodata, .got,
#     .data and .bss (the script zero-fills .bss into .data because PE
#     loaders do not like a bare .bss), .dynamic and .rela.
#     -Bsymbolic and hidden visibility leave only R_X86_64_RELATIVE
#     relocations, the one kind _relocate handles. libefi is not linked:
#     nothing here needs it, and its init.o defines memset/memcpy, which
#     would fight picolibc's.
#  3. efi-sections.sh fails the build if the link produced an allocated
#     section that step 4 would drop (e.g. a .bss.* or .init_array the
#     script does not collect): the kernel would run without it.
#  4. objcopy keeps the run-time sections and writes a PE32+ EFI
#     application (subsystem 10).

GNUEFI_INC  := /usr/include/efi
GNUEFI_LIB  := /usr/lib
EFI_LDS     := $(GNUEFI_LIB)/elf_x86_64_efi.lds
EFI_CRT0    := $(GNUEFI_LIB)/crt0-efi-x86_64.o

EFI_SRCS    := $(wildcard boot/efi/*.c)
EFI_OBJS    := $(call obj,$(EFI_SRCS))

# After picolibc's include directories, so efibind.h's <stdint.h> is
# picolibc's, the same one kernel/boot_info.h sees.
$(EFI_OBJS): CFLAGS += -isystem $(GNUEFI_INC) -isystem $(GNUEFI_INC)/x86_64 \
	-fshort-wchar -DGNU_EFI_USE_MS_ABI

# ld directly (not the gcc driver, which would add --eh-frame-hdr and a
# build-id that GNU-EFI's script does not expect); LDLIBC is written for
# the driver, so its -Wl, prefixes are stripped.
comma := ,
EFI_LDFLAGS := -nostdlib -shared -Bsymbolic -znocombreloc --no-undefined \
	-z noexecstack --no-warn-rwx-segments -T $(EFI_LDS) $(subst -Wl$(comma),,$(LDLIBC))
EFI_SECTIONS := .text .sdata .data .dynamic .dynsym .rel .rela .rel.* .rela.* .reloc

$(O)/BOOTX64.so: $(EFI_CRT0) $(EFI_OBJS) $(COMMON_OBJS) $(EFI_LDS) boot/efi/efi-sections.sh \
		boot/efi/efi.mk
	@$(if $(Q),echo "  LD      $@")
	$(Q)ld $(EFI_LDFLAGS) -o $@ $(EFI_CRT0) $(EFI_OBJS) $(COMMON_OBJS) $(LIBS) \
		-L$(GNUEFI_LIB) -lgnuefi
	$(Q)bash boot/efi/efi-sections.sh $@ $(foreach s,$(EFI_SECTIONS),'$(s)')

$(O)/BOOTX64.EFI: $(O)/BOOTX64.so
	@$(if $(Q),echo "  EFI     $@")
	$(Q)$(OBJCOPY) $(foreach s,$(EFI_SECTIONS),-j '$(s)') \
		--target efi-app-x86_64 --subsystem=10 $< $@

efi: $(O)/BOOTX64.EFI

# The image's \EFI\BOOT\CMDLINE.TXT comes from CMDLINE (make image
# CMDLINE="key=val ..."). The stamp changes only when CMDLINE does, so the
# image is rebuilt exactly when its contents would differ.
CMDLINE ?=
EFI_CMDLINE_SQ := '$(subst ','\'',$(CMDLINE))'
EFI_CMDLINE_STAMP := $(O)/obj/boot/efi/cmdline.stamp

$(EFI_CMDLINE_STAMP): efi-cmdline-check
	@mkdir -p $(dir $@)
	@printf '%s\n' $(EFI_CMDLINE_SQ) | cmp -s - $@ 2>/dev/null || \
		printf '%s\n' $(EFI_CMDLINE_SQ) >$@

.PHONY: efi-cmdline-check
efi-cmdline-check:

$(O)/vnetlab.img: $(O)/BOOTX64.EFI $(EFI_CMDLINE_STAMP) host/mkimage.sh
	@$(if $(Q),echo "  IMAGE   $@")
	$(Q)bash host/mkimage.sh $@ $(O)/BOOTX64.EFI $(EFI_CMDLINE_SQ)

image: $(O)/vnetlab.img
