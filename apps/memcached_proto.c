/*
 * memcached_proto.c: memcached's text protocol (protocol.txt of memcached
 * 1.6), one streaming parser per connection. Bytes arrive in whatever
 * pieces TCP delivers; a command line is gathered up to its "\n" (a lone
 * "\r" before it is dropped), a value block is copied straight into its
 * item. Nothing here knows lwIP: replies go through struct mc_out.
 *
 * Errors are memcached's own replies and never end the connection:
 *   ERROR                                  unknown command, empty line
 *   CLIENT_ERROR bad command line format   bad numbers, key over 250 bytes
 *   CLIENT_ERROR bad data chunk            a value not followed by "\r\n"
 *   CLIENT_ERROR line too long             a line over MC_LINE_MAX bytes
 *                                          (discarded up to its "\n")
 *   SERVER_ERROR object too large for cache  value over MC_ITEM_MAX (its
 *                                          bytes are read and discarded)
 *   SERVER_ERROR out of memory storing object
 * A connection whose first byte is 0x80 (a binary-protocol request) gets
 * "SERVER_ERROR binary protocol not supported" and is closed.
 * A storage command whose key is too long still has its value block
 * discarded, so the block is not read as commands.
 *
 * Back-pressure: a command runs only when its whole reply fits (a get
 * writes value by value, and a value as far as it fits); otherwise the
 * parser stops taking input until mc_conn_resume(), so a client that does
 * not read its replies is slowed down by TCP, never answered partially.
 */
#include <stdio.h>
#include <string.h>
#include "apps/memcached.h"
#include "kernel/kernel.h"

#define ROOM_SMALL 512 /* any reply but stats and get values */
#define ROOM_STATS 4096
#define TOKENS_MAX 8 /* for every command but get/gets */

struct mc_proto_stats mc_st;

struct tok {
	const char *p;
	uint32_t n;
};

void mc_conn_init(struct mc_conn *c, const struct mc_out *out, void *user)
{
	memset(c, 0, offsetof(struct mc_conn, line));
	c->out = out;
	c->user = user;
	c->state = MC_S_LINE;
	c->it = c->sending = NULL;
	c->dlen = c->soff = c->kpos = 0;
	c->swallow = 0;
	c->ready = false;
	mc_st.curr_conns++;
	mc_st.total_conns++;
}

void mc_conn_release(struct mc_conn *c)
{
	if (c->it)
		mc_free_unlinked(c->it);
	if (c->sending)
		mc_unref(c->sending);
	c->it = c->sending = NULL;
	mc_st.curr_conns--;
}

/* Hit (MC_STORED), bad value (MC_EXISTS) or miss (MC_NOT_FOUND) counters. */
static void count3(uint64_t *hit, uint64_t *bad, uint64_t *miss, enum mc_result r)
{
	if (r == MC_STORED)
		++*hit;
	else if (r == MC_EXISTS && bad)
		++*bad;
	else if (r == MC_NOT_FOUND)
		++*miss;
}

static void reply(struct mc_conn *c, const char *s)
{
	uint32_t n = (uint32_t)strlen(s);
	c->out->write(c, s, n);
	c->out->write(c, "\r\n", 2);
	mc_st.bytes_written += n + 2;
}

static void client_error(struct mc_conn *c, const char *what)
{
	mc_st.client_errors++;
	reply(c, what);
}

static uint32_t tokenize(char *line, uint32_t len, struct tok *t, uint32_t max)
{
	uint32_t n = 0, i = 0;
	while (i < len && n < max) {
		while (i < len && line[i] == ' ')
			i++;
		if (i == len)
			break;
		uint32_t b = i;
		while (i < len && line[i] != ' ')
			i++;
		t[n++] = (struct tok){line + b, i - b};
	}
	return n;
}

static bool is(const struct tok *t, const char *s)
{
	return t->n == strlen(s) && !memcmp(t->p, s, t->n);
}

/* Decimal only, as memcached's safe_strto*: no sign unless allowed. */
static bool num_u64(const struct tok *t, uint64_t max, uint64_t *v)
{
	uint64_t x = 0;
	if (!t->n || t->n > 20)
		return false;
	for (uint32_t i = 0; i < t->n; i++) {
		if (t->p[i] < '0' || t->p[i] > '9')
			return false;
		uint64_t d = (uint64_t)(t->p[i] - '0');
		if (x > (UINT64_MAX - d) / 10)
			return false;
		x = x * 10 + d;
	}
	if (x > max)
		return false;
	*v = x;
	return true;
}

static bool num_i64(const struct tok *t, int64_t *v)
{
	uint64_t x;
	if (t->n && t->p[0] == '-') {
		struct tok r = {t->p + 1, t->n - 1};
		if (!num_u64(&r, (uint64_t)INT64_MAX, &x))
			return false;
		*v = -(int64_t)x;
		return true;
	}
	if (!num_u64(t, (uint64_t)INT64_MAX, &x))
		return false;
	*v = (int64_t)x;
	return true;
}

static bool noreply_tok(const struct tok *t, uint32_t nt, uint32_t at)
{
	return nt > at && is(&t[at], "noreply");
}

/* ---- storage: set add replace append prepend cas ---- */

static void storage(struct mc_conn *c, const struct tok *t, uint32_t nt, enum mc_store_mode mode)
{
	uint32_t want = mode == MC_CAS ? 6 : 5;
	uint64_t flags, cas = 0;
	int64_t exptime, bytes;
	if (nt < want || nt > want + 1 || (nt == want + 1 && !is(&t[want], "noreply")) ||
	    !num_u64(&t[2], UINT32_MAX, &flags) || !num_i64(&t[3], &exptime) ||
	    !num_i64(&t[4], &bytes) || bytes < 0 || bytes > INT32_MAX - 2 ||
	    (mode == MC_CAS && !num_u64(&t[5], UINT64_MAX, &cas))) {
		client_error(c, "CLIENT_ERROR bad command line format");
		return;
	}
	c->noreply = nt == want + 1;
	mc_st.cmd_set++;
	if (t[1].n > MC_KEY_MAX) {
		client_error(c, "CLIENT_ERROR bad command line format");
		c->swallow = (uint64_t)bytes + 2;
		c->state = MC_S_SWALLOW;
		return;
	}
	uint32_t exp_s;
	if (!mc_exptime(exptime, &exp_s)) {
		client_error(c, "CLIENT_ERROR absolute exptime needs memcached.epoch= at boot");
		c->swallow = (uint64_t)bytes + 2;
		c->state = MC_S_SWALLOW;
		return;
	}
	enum mc_result why = MC_NO_MEMORY;
	struct mc_item *it =
	    mc_alloc(t[1].p, t[1].n, (uint32_t)flags, exp_s, (uint32_t)bytes, &why);
	if (!it) {
		mc_st.server_errors++;
		if (!c->noreply)
			reply(c, why == MC_TOO_LARGE ? "SERVER_ERROR object too large for cache"
			                             : "SERVER_ERROR out of memory storing object");
		c->swallow = (uint64_t)bytes + 2;
		c->state = MC_S_SWALLOW;
		return;
	}
	c->it = it;
	c->dlen = 0;
	c->mode = mode;
	c->cas = cas;
	c->state = MC_S_DATA;
}

static void data_done(struct mc_conn *c)
{
	struct mc_item *it = c->it;
	char *v = mc_item_value(it);
	c->it = NULL;
	c->state = MC_S_LINE;
	if (v[it->nbytes] != '\r' || v[it->nbytes + 1] != '\n') {
		mc_free_unlinked(it);
		client_error(c, "CLIENT_ERROR bad data chunk");
		return;
	}
	enum mc_result r = mc_store(it, c->mode, c->cas);
	if (c->mode == MC_CAS)
		count3(&mc_st.cas_hits, &mc_st.cas_badval, &mc_st.cas_misses, r);
	if (r == MC_TOO_LARGE || r == MC_NO_MEMORY) {
		mc_st.server_errors++;
		reply(c, r == MC_TOO_LARGE ? "SERVER_ERROR object too large for cache"
		                           : "SERVER_ERROR out of memory storing object");
		return;
	}
	if (c->noreply)
		return;
	static const char *const words[] = {"STORED", "NOT_STORED", "EXISTS", "NOT_FOUND"};
	reply(c, words[r]);
}

/* ---- retrieval: get gets, key by key ---- */

/* Continue the get at line[kpos]; false while it waits for room. */
static bool get_continue(struct mc_conn *c)
{
	for (;;) {
		if (c->sending) {
			struct mc_item *it = c->sending;
			uint32_t total = it->nbytes + 2;
			while (c->soff < total) {
				uint32_t n = c->out->write_some(c, mc_item_value(it) + c->soff,
				                                total - c->soff);
				if (!n)
					return false;
				c->soff += n;
				mc_st.bytes_written += n;
			}
			mc_unref(it);
			c->sending = NULL;
		}
		while (c->kpos < c->llen && c->line[c->kpos] == ' ')
			c->kpos++;
		if (c->kpos >= c->llen)
			break;
		uint32_t b = c->kpos;
		while (c->kpos < c->llen && c->line[c->kpos] != ' ')
			c->kpos++;
		uint32_t n = c->kpos - b;
		if (n > MC_KEY_MAX) {
			/* memcached ends the reply here, without END */
			client_error(c, "CLIENT_ERROR bad command line format");
			return true;
		}
		if (!c->out->room(c, ROOM_SMALL)) {
			c->kpos = b;
			return false;
		}
		mc_st.cmd_get++;
		struct mc_item *it = mc_find(c->line + b, n);
		if (!it) {
			mc_st.get_misses++;
			continue;
		}
		mc_st.get_hits++;
		char hdr[MC_KEY_MAX + 80];
		int h = c->with_cas ? snprintf(hdr, sizeof(hdr), "VALUE %.*s %lu %lu %lu\r\n",
		                               (int)n, c->line + b, (unsigned long)it->flags,
		                               (unsigned long)it->nbytes, (unsigned long)it->cas)
		                    : snprintf(hdr, sizeof(hdr), "VALUE %.*s %lu %lu\r\n", (int)n,
		                               c->line + b, (unsigned long)it->flags,
		                               (unsigned long)it->nbytes);
		c->out->write(c, hdr, (uint32_t)h);
		mc_st.bytes_written += (uint64_t)h;
		mc_ref(it);
		c->sending = it;
		c->soff = 0;
	}
	if (!c->out->room(c, 5))
		return false;
	reply(c, "END");
	return true;
}

static void get(struct mc_conn *c, const struct tok *t, uint32_t nt, bool with_cas)
{
	if (nt < 2) {
		mc_st.unknown_commands++;
		reply(c, "ERROR");
		return;
	}
	c->with_cas = with_cas;
	c->kpos = (uint32_t)(t[1].p - c->line);
	c->state = MC_S_SENDING;
	if (get_continue(c))
		c->state = MC_S_LINE;
}

/* ---- the rest ---- */

static void stats(struct mc_conn *c, const struct tok *t, uint32_t nt)
{
	if (nt > 1) {
		if (nt == 2 && is(&t[1], "reset")) {
			uint64_t cur = mc_st.curr_conns, tot = mc_st.total_conns;
			memset(&mc_st, 0, sizeof(mc_st));
			mc_st.curr_conns = cur;
			mc_st.total_conns = tot;
			reply(c, "RESET");
			return;
		}
		mc_st.unknown_commands++;
		reply(c, "ERROR"); /* memcached: an unknown stats group */
		return;
	}
	const struct mc_store_stats *s = mc_store_stats();
	uint64_t up = mc_now_s() - 1;
	char b[ROOM_STATS];
	int n = snprintf(
	    b, sizeof(b),
	    "STAT pid 1\r\nSTAT uptime %lu\r\nSTAT time %lu\r\nSTAT version %s\r\n"
	    "STAT pointer_size 64\r\nSTAT curr_connections %lu\r\nSTAT total_connections %lu\r\n"
	    "STAT cmd_get %lu\r\nSTAT cmd_set %lu\r\nSTAT cmd_flush %lu\r\nSTAT cmd_touch %lu\r\n"
	    "STAT get_hits %lu\r\nSTAT get_misses %lu\r\nSTAT get_expired %lu\r\n"
	    "STAT delete_misses %lu\r\nSTAT delete_hits %lu\r\nSTAT incr_misses %lu\r\n"
	    "STAT incr_hits %lu\r\nSTAT decr_misses %lu\r\nSTAT decr_hits %lu\r\n"
	    "STAT cas_misses %lu\r\nSTAT cas_hits %lu\r\nSTAT cas_badval %lu\r\n"
	    "STAT touch_hits %lu\r\nSTAT touch_misses %lu\r\nSTAT bytes_read %lu\r\n"
	    "STAT bytes_written %lu\r\nSTAT limit_maxbytes %lu\r\nSTAT threads 1\r\n"
	    "STAT bytes %lu\r\nSTAT curr_items %lu\r\nSTAT total_items %lu\r\n"
	    "STAT evictions %lu\r\nSTAT reclaimed %lu\r\nSTAT outofmemory %lu\r\n"
	    "STAT client_errors %lu\r\nSTAT binary_refused %lu\r\nSTAT slab_classes %lu\r\nSTAT "
	    "pages_total %lu\r\n"
	    "STAT pages_used %lu\r\nSTAT hash_buckets %lu\r\nEND\r\n",
	    up, up, MC_VERSION, mc_st.curr_conns, mc_st.total_conns, mc_st.cmd_get, mc_st.cmd_set,
	    mc_st.cmd_flush, mc_st.cmd_touch, mc_st.get_hits, mc_st.get_misses, mc_st.get_expired,
	    mc_st.delete_misses, mc_st.delete_hits, mc_st.incr_misses, mc_st.incr_hits,
	    mc_st.decr_misses, mc_st.decr_hits, mc_st.cas_misses, mc_st.cas_hits, mc_st.cas_badval,
	    mc_st.touch_hits, mc_st.touch_misses, mc_st.bytes_read, mc_st.bytes_written,
	    s->limit_bytes, s->bytes, s->curr_items, s->total_items, s->evictions, s->reclaimed,
	    s->outofmemory, mc_st.client_errors, mc_st.binary_refused, s->classes, s->pages_total,
	    s->pages_used, s->hash_buckets);
	c->out->write(c, b, (uint32_t)n);
	mc_st.bytes_written += (uint64_t)n;
}

static void arith(struct mc_conn *c, const struct tok *t, uint32_t nt, bool incr)
{
	uint64_t delta, v = 0;
	if (nt < 3 || nt > 4 || (nt == 4 && !is(&t[3], "noreply")) || t[1].n > MC_KEY_MAX) {
		client_error(c, "CLIENT_ERROR bad command line format");
		return;
	}
	if (!num_u64(&t[2], UINT64_MAX, &delta)) {
		client_error(c, "CLIENT_ERROR invalid numeric delta argument");
		return;
	}
	enum mc_result r = mc_arith(t[1].p, t[1].n, incr, delta, &v);
	if (incr)
		count3(&mc_st.incr_hits, NULL, &mc_st.incr_misses, r);
	else
		count3(&mc_st.decr_hits, NULL, &mc_st.decr_misses, r);
	if (r == MC_NOT_STORED) {
		client_error(c, "CLIENT_ERROR cannot increment or decrement non-numeric value");
		return;
	}
	if (r == MC_NO_MEMORY) {
		mc_st.server_errors++;
		reply(c, "SERVER_ERROR out of memory");
		return;
	}
	if (noreply_tok(t, nt, 3))
		return;
	if (r == MC_NOT_FOUND) {
		reply(c, "NOT_FOUND");
		return;
	}
	char b[24];
	snprintf(b, sizeof(b), "%lu", (unsigned long)v);
	reply(c, b);
}

static void delete (struct mc_conn *c, const struct tok *t, uint32_t nt)
{
	/* "delete key 0" is accepted for old clients, any other time is not */
	uint32_t at = nt > 2 && is(&t[2], "0") ? 3 : 2;
	if (nt < 2 || nt > at + 1 || (nt == at + 1 && !is(&t[at], "noreply")) ||
	    t[1].n > MC_KEY_MAX) {
		client_error(
		    c, "CLIENT_ERROR bad command line format.  Usage: delete <key> [noreply]");
		return;
	}
	bool hit = mc_delete(t[1].p, t[1].n);
	count3(&mc_st.delete_hits, NULL, &mc_st.delete_misses, hit ? MC_STORED : MC_NOT_FOUND);
	if (!noreply_tok(t, nt, at))
		reply(c, hit ? "DELETED" : "NOT_FOUND");
}

static void touch(struct mc_conn *c, const struct tok *t, uint32_t nt)
{
	int64_t exptime;
	uint32_t exp_s;
	if (nt < 3 || nt > 4 || (nt == 4 && !is(&t[3], "noreply")) || t[1].n > MC_KEY_MAX ||
	    !num_i64(&t[2], &exptime)) {
		client_error(c, "CLIENT_ERROR bad command line format");
		return;
	}
	if (!mc_exptime(exptime, &exp_s)) {
		client_error(c, "CLIENT_ERROR absolute exptime needs memcached.epoch= at boot");
		return;
	}
	mc_st.cmd_touch++;
	bool hit = mc_touch(t[1].p, t[1].n, exp_s);
	count3(&mc_st.touch_hits, NULL, &mc_st.touch_misses, hit ? MC_STORED : MC_NOT_FOUND);
	if (!noreply_tok(t, nt, 3))
		reply(c, hit ? "TOUCHED" : "NOT_FOUND");
}

static void flush_all(struct mc_conn *c, const struct tok *t, uint32_t nt)
{
	uint64_t delay = 0;
	uint32_t at = 1;
	if (nt > 1 && !is(&t[1], "noreply")) {
		if (!num_u64(&t[1], MC_REL_MAX, &delay)) {
			client_error(c, "CLIENT_ERROR bad command line format");
			return;
		}
		at = 2;
	}
	if (nt > at + 1 || (nt == at + 1 && !is(&t[at], "noreply"))) {
		client_error(c, "CLIENT_ERROR bad command line format");
		return;
	}
	mc_st.cmd_flush++;
	mc_flush((uint32_t)delay);
	if (!noreply_tok(t, nt, at))
		reply(c, "OK");
}

static void verbosity(struct mc_conn *c, const struct tok *t, uint32_t nt)
{
	/* accepted and ignored (the console is for RESULT lines) */
	if (!noreply_tok(t, nt, nt - 1))
		reply(c, "OK");
}

/* Run the complete line; false (nothing done) while its reply has no room. */
static bool exec_line(struct mc_conn *c)
{
	struct tok t[TOKENS_MAX];
	uint32_t nt = tokenize(c->line, c->llen, t, TOKENS_MAX);
	bool is_stats = nt && is(&t[0], "stats");
	if (!c->out->room(c, is_stats ? ROOM_STATS : ROOM_SMALL))
		return false;
	c->ready = false;
	mc_st.commands++;
	if (!nt) {
		mc_st.unknown_commands++;
		reply(c, "ERROR");
	} else if (is(&t[0], "get")) {
		get(c, t, nt, false);
	} else if (is(&t[0], "gets")) {
		get(c, t, nt, true);
	} else if (is(&t[0], "set")) {
		storage(c, t, nt, MC_SET);
	} else if (is(&t[0], "add")) {
		storage(c, t, nt, MC_ADD);
	} else if (is(&t[0], "replace")) {
		storage(c, t, nt, MC_REPLACE);
	} else if (is(&t[0], "append")) {
		storage(c, t, nt, MC_APPEND);
	} else if (is(&t[0], "prepend")) {
		storage(c, t, nt, MC_PREPEND);
	} else if (is(&t[0], "cas")) {
		storage(c, t, nt, MC_CAS);
	} else if (is(&t[0], "delete")) {
		delete (c, t, nt);
	} else if (is(&t[0], "incr") || is(&t[0], "decr")) {
		arith(c, t, nt, is(&t[0], "incr"));
	} else if (is(&t[0], "touch")) {
		touch(c, t, nt);
	} else if (is_stats) {
		stats(c, t, nt);
	} else if (is(&t[0], "flush_all")) {
		flush_all(c, t, nt);
	} else if (is(&t[0], "version")) {
		reply(c, "VERSION " MC_VERSION);
	} else if (is(&t[0], "verbosity") && nt >= 2 && nt <= 3) {
		verbosity(c, t, nt);
	} else if (is(&t[0], "quit")) {
		c->state = MC_S_QUIT;
	} else {
		mc_st.unknown_commands++;
		reply(c, "ERROR");
	}
	return true;
}

/* Bytes of a command line; true when the line is complete (and run). */
static size_t feed_line(struct mc_conn *c, const char *p, size_t n)
{
	const char *nl = memchr(p, '\n', n);
	size_t take = nl ? (size_t)(nl - p) + 1 : n;
	size_t text = nl ? take - 1 : take;
	if (c->llen + text > MC_LINE_MAX) {
		c->state = MC_S_TOOLONG;
		c->llen = 0;
		return 0; /* the too-long state discards from here */
	}
	memcpy(c->line + c->llen, p, text);
	c->llen += (uint32_t)text;
	if (nl) {
		if (c->llen && c->line[c->llen - 1] == '\r')
			c->llen--;
		c->ready = true;
	}
	return take;
}

size_t mc_conn_feed(struct mc_conn *c, const char *p, size_t n)
{
	size_t i = 0;
	while (i < n || c->ready) {
		if (c->state == MC_S_QUIT || c->state == MC_S_SENDING)
			break;
		if (c->ready) {
			if (!exec_line(c))
				break;
			if (c->state != MC_S_SENDING) /* a get still reads its keys */
				c->llen = 0;
			continue;
		}
		size_t left = n - i, k;
		if (!c->seen) {
			c->seen = true;
			if ((uint8_t)p[i] == 0x80) {
				mc_st.binary_refused++;
				reply(c, "SERVER_ERROR binary protocol not supported");
				c->state = MC_S_QUIT;
				break;
			}
		}
		switch (c->state) {
		case MC_S_LINE:
			k = feed_line(c, p + i, left);
			break;
		case MC_S_DATA: {
			uint32_t want = c->it->nbytes + 2 - c->dlen;
			k = left < want ? left : want;
			memcpy(mc_item_value(c->it) + c->dlen, p + i, k);
			c->dlen += (uint32_t)k;
			if (c->dlen == c->it->nbytes + 2)
				data_done(c);
			break;
		}
		case MC_S_SWALLOW:
			k = left < c->swallow ? left : (size_t)c->swallow;
			c->swallow -= k;
			if (!c->swallow)
				c->state = MC_S_LINE;
			break;
		case MC_S_TOOLONG: {
			const char *nl = memchr(p + i, '\n', left);
			k = nl ? (size_t)(nl - (p + i)) + 1 : left;
			if (nl) {
				if (!c->out->room(c, ROOM_SMALL))
					return i; /* the newline stays until the error fits */
				client_error(c, "CLIENT_ERROR line too long");
				c->state = MC_S_LINE;
			}
			break;
		}
		default:
			k = 0;
			break;
		}
		i += k;
		mc_st.bytes_read += k;
	}
	return i;
}

bool mc_conn_resume(struct mc_conn *c)
{
	if (c->state == MC_S_SENDING) {
		if (!get_continue(c))
			return false;
		c->state = MC_S_LINE;
		c->llen = 0;
	}
	return c->state != MC_S_QUIT;
}
