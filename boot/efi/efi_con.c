/*
 * efi_con.c: report a front-end failure on the firmware console.
 *
 * Only for failures before ExitBootServices(): afterwards ConOut is gone,
 * and from kernel_main() on the kernel's own serial console reports. On
 * OVMF the firmware console is mirrored to COM1, so these lines reach the
 * same place the kernel's banner would.
 */
#include "boot/efi/efiboot.h"

static SIMPLE_TEXT_OUTPUT_INTERFACE *con_out;

void efi_con_init(EFI_SYSTEM_TABLE *st)
{
	con_out = st->ConOut;
}

/* Appends ASCII s to the UCS-2 buffer at *pos, keeping room for the NUL. */
static void con_append(CHAR16 *buf, UINTN cap, UINTN *pos, const char *s)
{
	while (*s && *pos + 1 < cap)
		buf[(*pos)++] = (CHAR16)*s++;
}

/*
 * Prints the kernel's machine-readable error line,
 *   ERROR {"where":"efi","msg":"<what> (EFI status 0x...)"}
 * and returns status so callers can `return efi_con_fail(...)` straight back
 * to the firmware. what is one of our literals: no quotes or backslashes,
 * so it needs no JSON escaping.
 */
EFI_STATUS efi_con_fail(const char *what, EFI_STATUS status)
{
	static const char hex[] = "0123456789abcdef";
	char num[2 + 16 + 1];
	CHAR16 line[160];
	UINTN pos = 0;
	int i;

	num[0] = '0';
	num[1] = 'x';
	for (i = 0; i < 16; i++)
		num[2 + i] = hex[(status >> (60 - 4 * i)) & 0xf];
	num[18] = '\0';

	con_append(line, ARRAY_SIZE(line), &pos, "ERROR {\"where\":\"efi\",\"msg\":\"");
	con_append(line, ARRAY_SIZE(line), &pos, what);
	con_append(line, ARRAY_SIZE(line), &pos, " (EFI status ");
	con_append(line, ARRAY_SIZE(line), &pos, num);
	con_append(line, ARRAY_SIZE(line), &pos, ")\"}\r\n");
	line[pos] = 0;
	if (con_out)
		con_out->OutputString(con_out, line);
	return status;
}
