/*
 * cmdline.c: the kernel command line, "key=value" words separated by
 * blanks (from PVH's cmdline or the EFI load options / CMDLINE.TXT).
 *
 * Each layer claims the keys it understands with cmdline_u64/str/bool/
 * choice while it configures itself; a bad value is an error on the spot.
 * After every layer has configured, cmdline_finish() rejects any key nobody
 * claimed, so a typo never silently runs the default benchmark.
 */
#include <stdlib.h>
#include <string.h>
#include "kernel/kernel.h"

#define MAX_WORDS 64

struct word {
	const char *key, *val;
	bool claimed;
};

static char buf[BOOT_CMDLINE_MAX];
static char raw[BOOT_CMDLINE_MAX];
static struct word words[MAX_WORDS];
static int nwords;

void cmdline_init(const char *s)
{
	strncpy(raw, s, sizeof(raw) - 1);
	strncpy(buf, s, sizeof(buf) - 1);
	char *p = buf;
	for (;;) {
		while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
			*p++ = 0;
		if (!*p)
			break;
		char *w = p;
		while (*p && *p != ' ' && *p != '\t' && *p != '\n' && *p != '\r')
			p++;
		if (*p)
			*p++ = 0;
		char *eq = strchr(w, '=');
		if (!eq || eq == w)
			kernel_usage_error("cmdline", "malformed word '%s' (expected key=value)",
			                   w);
		*eq = 0;
		if (nwords == MAX_WORDS)
			kernel_usage_error("cmdline", "more than %d words", MAX_WORDS);
		words[nwords++] = (struct word){w, eq + 1, false};
	}
}

const char *cmdline_raw(void)
{
	return raw;
}

/* A key is given once, except where its owner reads it with cmdline_nth()
 * (a list, e.g. virtio_mmio.device); any other repeat is an error. */
static const char *lookup(const char *key)
{
	const char *v = cmdline_nth(key, 0);
	if (v && cmdline_nth(key, 1))
		kernel_usage_error("cmdline", "key '%s' given twice", key);
	return v;
}

const char *cmdline_nth(const char *key, int n)
{
	for (int i = 0; i < nwords; i++) {
		if (!strcmp(words[i].key, key) && n-- == 0) {
			words[i].claimed = true;
			return words[i].val;
		}
	}
	return NULL;
}

uint64_t cmdline_u64(const char *key, uint64_t def, uint64_t min, uint64_t max)
{
	const char *v = lookup(key);
	if (!v)
		return def;
	char *end;
	unsigned long long n = strtoull(v, &end, 0);
	if (!*v || *end || *v == '-' || n < min || n > max)
		kernel_usage_error("cmdline",
		                   "bad value '%s' for key '%s' (expected an integer %lu..%lu)", v,
		                   key, min, max);
	return n;
}

const char *cmdline_str(const char *key, const char *def)
{
	const char *v = lookup(key);
	return v ? v : def;
}

void cmdline_only_if(const char *key, bool applies, const char *when)
{
	if (cmdline_str(key, NULL) && !applies)
		kernel_usage_error("cmdline", "key '%s' applies to %s only", key, when);
}

bool cmdline_bool(const char *key, bool def)
{
	static const char *const yes_no[] = {"0", "1", NULL};
	return cmdline_choice(key, yes_no, def ? 1 : 0) == 1;
}

int cmdline_choice(const char *key, const char *const *choices, int def)
{
	const char *v = lookup(key);
	if (!v)
		return def;
	char list[200] = "";
	for (int i = 0; choices[i]; i++) {
		if (!strcmp(v, choices[i]))
			return i;
		if (strlen(list) + strlen(choices[i]) + 2 < sizeof(list)) {
			strcat(list, i ? "|" : "");
			strcat(list, choices[i]);
		}
	}
	kernel_usage_error("cmdline", "bad value '%s' for key '%s' (expected %s)", v, key, list);
}

void cmdline_finish(void)
{
	for (int i = 0; i < nwords; i++) {
		if (words[i].claimed)
			continue;
		for (int j = 0; j < i; j++)
			if (!strcmp(words[j].key, words[i].key))
				kernel_usage_error("cmdline", "key '%s' given twice", words[i].key);
		kernel_usage_error("cmdline", "unknown key '%s'", words[i].key);
	}
}
