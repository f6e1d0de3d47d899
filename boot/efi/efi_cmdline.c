/*
 * efi_cmdline.c: find the appliance command line and turn it into ASCII.
 *
 * Sources, first match wins:
 *  1. The loaded image's LoadOptions (UEFI 2.10 section 9.1, EFI Loaded
 *     Image Protocol), when they are UCS-2 text. The UEFI Shell passes the
 *     whole command as typed, image path first ("fs0:\EFI\BOOT\BOOTX64.EFI
 *     key=val"), so a leading word that names the image is dropped.
 *     LoadOptions are opaque bytes by definition (section 3.1.3, Load
 *     Options: OptionalData is "a binary data buffer"), and EDK2's boot
 *     manager indeed passes a 16-byte GUID for the boot options it creates
 *     for removable media, so anything that is not printable text is
 *     ignored rather than reported.
 *  2. \EFI\BOOT\CMDLINE.TXT on the volume the image was loaded from, which
 *     host/mkimage.sh writes, so a disk image can carry its command line.
 *  3. Otherwise the command line is empty.
 *
 * Whitespace runs (including CR/LF of a text file) become one space, and
 * leading/trailing whitespace is dropped. A command line that does not fit
 * BOOT_CMDLINE_MAX is an error, never silently truncated.
 */
#include "boot/efi/efiboot.h"

static bool is_space(unsigned c)
{
	return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

static bool is_text(unsigned c)
{
	return is_space(c) || (c >= 0x20 && c < 0x7f);
}

/* n characters of UCS-2 (wide) or ASCII text, possibly NUL-terminated early. */
struct text_src {
	const void *p;
	UINTN n;
	bool wide;
};

static unsigned src_get(const struct text_src *s, UINTN i)
{
	return s->wide ? ((const CHAR16 *)s->p)[i] : ((const unsigned char *)s->p)[i];
}

/*
 * Copies s into out, normalising whitespace. Returns false if a character is
 * neither printable ASCII nor whitespace. *len is the normalised length; if
 * it is >= max the text did not fit and out holds only its beginning. out
 * is NUL-terminated either way (max > 0).
 */
static bool text_copy(const struct text_src *s, char *out, UINTN max, UINTN *len)
{
	UINTN i, o = 0;
	bool pending_space = false;

	for (i = 0; i < s->n; i++) {
		unsigned c = src_get(s, i);

		if (c == 0)
			break;
		if (!is_text(c))
			return false;
		if (is_space(c)) {
			pending_space = o > 0;
			continue;
		}
		if (pending_space) {
			if (o < max)
				out[o] = ' ';
			o++;
			pending_space = false;
		}
		if (o < max)
			out[o] = (char)c;
		o++;
	}
	out[o < max ? o : max - 1] = '\0';
	*len = o;
	return true;
}

static bool word_names_image(const char *w, UINTN n)
{
	UINTN i;

	for (i = 0; i < n; i++) {
		if (w[i] == '=')
			return false;
	}
	for (i = 0; i < n; i++) {
		if (w[i] == '\\')
			return true;
	}
	return n >= 4 && w[n - 4] == '.' && (w[n - 3] | 0x20) == 'e' && (w[n - 2] | 0x20) == 'f' &&
	       (w[n - 1] | 0x20) == 'i';
}

/* Drops a leading image path ("fs0:\EFI\BOOT\BOOTX64.EFI") from out. */
static void drop_image_word(char *out, UINTN *len)
{
	UINTN w = 0, i;

	while (w < *len && out[w] != ' ')
		w++;
	if (!word_names_image(out, w))
		return;
	if (w < *len)
		w++; /* the separating space */
	for (i = w; i <= *len; i++)
		out[i - w] = out[i];
	*len -= w;
}

/* Returns true if LoadOptions held a non-empty text command line. */
static bool from_load_options(EFI_LOADED_IMAGE *li, char *out, UINTN max, EFI_STATUS *status)
{
	struct text_src s = {li->LoadOptions, li->LoadOptionsSize / sizeof(CHAR16), true};
	UINTN len;

	*status = EFI_SUCCESS;
	if (!li->LoadOptions || s.n == 0)
		return false;
	if (!text_copy(&s, out, max, &len))
		return false;
	if (len >= max) {
		*status =
		    efi_con_fail("LoadOptions longer than BOOT_CMDLINE_MAX", EFI_BUFFER_TOO_SMALL);
		return true;
	}
	drop_image_word(out, &len);
	return len > 0;
}

static EFI_STATUS from_file(EFI_BOOT_SERVICES *bs, EFI_LOADED_IMAGE *li, char *out, UINTN max)
{
	static CHAR16 path[] = L"\\EFI\\BOOT\\CMDLINE.TXT";
	EFI_GUID fs_guid = EFI_SIMPLE_FILE_SYSTEM_PROTOCOL_GUID;
	EFI_SIMPLE_FILE_SYSTEM_PROTOCOL *fs;
	EFI_FILE_HANDLE root, file;
	char buf[BOOT_CMDLINE_MAX + 1]; /* one more byte detects a longer file */
	struct text_src s = {buf, sizeof(buf), false};
	UINTN n = sizeof(buf), len;
	EFI_STATUS st;

	out[0] = '\0';
	/* Loaded from something that is not a file system (e.g. network):
	 * there is no file to read, and that is not an error. */
	st = bs->HandleProtocol(li->DeviceHandle, &fs_guid, (void **)&fs);
	if (st == EFI_UNSUPPORTED)
		return EFI_SUCCESS;
	if (EFI_ERROR(st))
		return efi_con_fail("HandleProtocol(SimpleFileSystem)", st);
	st = fs->OpenVolume(fs, &root);
	if (EFI_ERROR(st))
		return efi_con_fail("OpenVolume", st);
	st = root->Open(root, &file, path, EFI_FILE_MODE_READ, 0);
	root->Close(root);
	if (st == EFI_NOT_FOUND)
		return EFI_SUCCESS;
	if (EFI_ERROR(st))
		return efi_con_fail("open CMDLINE.TXT", st);
	st = file->Read(file, &n, buf);
	file->Close(file);
	if (EFI_ERROR(st))
		return efi_con_fail("read CMDLINE.TXT", st);
	s.n = n;
	if (!text_copy(&s, out, max, &len))
		return efi_con_fail("CMDLINE.TXT is not printable ASCII", EFI_INVALID_PARAMETER);
	if (len >= max || n == sizeof(buf))
		return efi_con_fail("CMDLINE.TXT longer than BOOT_CMDLINE_MAX",
		                    EFI_BUFFER_TOO_SMALL);
	return EFI_SUCCESS;
}

EFI_STATUS efi_cmdline_get(EFI_BOOT_SERVICES *bs, EFI_LOADED_IMAGE *li, char *out, UINTN max)
{
	EFI_STATUS st;

	if (from_load_options(li, out, max, &st))
		return st;
	return from_file(bs, li, out, max);
}
