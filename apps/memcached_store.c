/*
 * memcached_store.c: the item store of app=memcached, in one fixed block
 * of memory given at start-up (memcached.mem=MiB): nothing is allocated
 * afterwards, so a full store evicts instead of failing.
 *
 * Layout as memcached's slab allocator: the block holds the hash table and
 * then pages of PAGE bytes. Items live in chunks of one size class (96
 * bytes growing by 5/4 up to a whole page); a class takes a free page when
 * it runs out of chunks, and once no page is left it evicts from the tail
 * of its own LRU (least recently stored or fetched first). An item a reply
 * is still sending (refs > 0) is never reused: it is unlinked and freed
 * when the last reader lets go.
 *
 * Expiry is lazy: an item is checked when it is found (and preferred for
 * reuse at the LRU tail). Times are seconds since boot (mc_now_s() >= 1, so
 * 0 can mean "never"); unix exptimes need the host's time at boot.
 */
#include <string.h>
#include "apps/memcached.h"
#include "kernel/kernel.h"

#define CLASS_MIN   96
#define CLASSES_MAX 64
#define HDR         sizeof(struct mc_item)
#define PAGE        ((HDR + MC_KEY_MAX + MC_ITEM_MAX + 2 + 7) & ~(size_t)7)
#define EVICT_TRIES 50 /* LRU tail items looked at before giving up */

struct mc_class {
	uint32_t size;            /* chunk bytes */
	struct mc_item *free;     /* free chunks, chained through hnext */
	struct mc_item *lru_head; /* most recent */
	struct mc_item *lru_tail;
};

static struct mc_class classes[CLASSES_MAX];
static unsigned nclasses;
static struct mc_item **hash;
static uint32_t hash_mask;
static char *pages, *pages_end, *next_page;
static uint64_t cas_seq, epoch_s, flush_at_ns;
static struct mc_store_stats st;

uint32_t mc_now_s(void)
{
	return (uint32_t)(clock_ns() / 1000000000ull) + 1;
}

void mc_store_set_epoch(uint64_t unix_s)
{
	epoch_s = unix_s;
}

bool mc_exptime(int64_t exptime, uint32_t *exp_s)
{
	uint32_t now = mc_now_s();
	if (exptime == 0) {
		*exp_s = 0;
		return true;
	}
	if (exptime < 0) { /* memcached: already expired */
		*exp_s = now;
		return true;
	}
	if (exptime <= MC_REL_MAX) {
		*exp_s = now + (uint32_t)exptime;
		return true;
	}
	if (!epoch_s)
		return false;
	/* unix time: how far past our boot, on our own clock */
	uint64_t boot_unix = epoch_s;
	*exp_s =
	    (uint64_t)exptime <= boot_unix ? now : (uint32_t)((uint64_t)exptime - boot_unix) + 1;
	if (*exp_s < now)
		*exp_s = now;
	return true;
}

/* FNV-1a: cheap, no multiply tables, good enough for a power-of-two table */
static uint32_t hash_key(const char *key, size_t n)
{
	uint32_t h = 2166136261u;
	for (size_t i = 0; i < n; i++)
		h = (h ^ (uint8_t)key[i]) * 16777619u;
	return h;
}

bool mc_store_init(void *mem, size_t bytes)
{
	uint32_t buckets = 1024;
	while ((uint64_t)buckets * 2 * 512 <= bytes && buckets < (1u << 24))
		buckets *= 2;
	size_t hbytes = (size_t)buckets * sizeof(*hash);
	if (bytes < hbytes + PAGE)
		return false;
	hash = mem;
	memset(hash, 0, hbytes);
	hash_mask = buckets - 1;
	pages = next_page = (char *)mem + ((hbytes + 63) & ~(size_t)63);
	pages_end = pages + (bytes - (size_t)(pages - (char *)mem)) / PAGE * PAGE;

	uint32_t size = CLASS_MIN;
	nclasses = 0;
	while (nclasses < CLASSES_MAX - 1 && size < PAGE / 2) {
		classes[nclasses++] = (struct mc_class){.size = size};
		size = ((size * 5 / 4) + 7) & ~7u;
	}
	classes[nclasses++] = (struct mc_class){.size = (uint32_t)PAGE};

	memset(&st, 0, sizeof(st));
	cas_seq = flush_at_ns = 0;
	st.limit_bytes = bytes;
	st.classes = nclasses;
	st.pages_total = (uint64_t)(pages_end - pages) / PAGE;
	st.hash_buckets = buckets;
	return true;
}

static struct mc_item **bucket(const char *key, size_t n)
{
	return &hash[hash_key(key, n) & hash_mask];
}

static void lru_unlink(struct mc_item *it)
{
	struct mc_class *c = &classes[it->cls];
	if (it->prev)
		it->prev->next = it->next;
	else
		c->lru_head = it->next;
	if (it->next)
		it->next->prev = it->prev;
	else
		c->lru_tail = it->prev;
	it->prev = it->next = NULL;
}

static void lru_push(struct mc_item *it)
{
	struct mc_class *c = &classes[it->cls];
	it->prev = NULL;
	it->next = c->lru_head;
	if (c->lru_head)
		c->lru_head->prev = it;
	c->lru_head = it;
	if (!c->lru_tail)
		c->lru_tail = it;
}

static void chunk_free(struct mc_item *it)
{
	struct mc_class *c = &classes[it->cls];
	it->hnext = c->free;
	c->free = it;
}

/* Out of the hash table and the LRU; freed now or by the last reader. */
static void unlink_item(struct mc_item *it)
{
	struct mc_item **pp = bucket(mc_item_key(it), it->nkey);
	while (*pp && *pp != it)
		pp = &(*pp)->hnext;
	if (*pp)
		*pp = it->hnext;
	lru_unlink(it);
	it->linked = false;
	st.curr_items--;
	st.bytes -= (uint64_t)it->nkey + it->nbytes + 2;
	if (!it->refs)
		chunk_free(it);
}

static bool dead(const struct mc_item *it, uint32_t now)
{
	if (it->exp_s && it->exp_s <= now)
		return true;
	return flush_at_ns && clock_ns() >= flush_at_ns && it->set_ns < flush_at_ns;
}

static void link_item(struct mc_item *it)
{
	struct mc_item **b = bucket(mc_item_key(it), it->nkey);
	it->hnext = *b;
	*b = it;
	it->linked = true;
	it->cas = ++cas_seq;
	it->set_ns = clock_ns();
	lru_push(it);
	st.curr_items++;
	st.total_items++;
	st.bytes += (uint64_t)it->nkey + it->nbytes + 2;
}

static struct mc_item *lookup(const char *key, size_t n)
{
	for (struct mc_item *it = *bucket(key, n); it; it = it->hnext)
		if (it->nkey == n && !memcmp(mc_item_key(it), key, n))
			return it;
	return NULL;
}

struct mc_item *mc_find(const char *key, size_t nkey)
{
	struct mc_item *it = lookup(key, nkey);
	if (!it)
		return NULL;
	if (dead(it, mc_now_s())) {
		unlink_item(it);
		st.reclaimed++;
		return NULL;
	}
	lru_unlink(it);
	lru_push(it);
	return it;
}

static void carve_page(struct mc_class *c)
{
	char *p = next_page;
	next_page += PAGE;
	st.pages_used++;
	for (size_t off = 0; off + c->size <= PAGE; off += c->size) {
		struct mc_item *it = (struct mc_item *)(p + off);
		it->cls = (uint8_t)(c - classes);
		chunk_free(it);
	}
}

/* A chunk of class c: free list, a new page, or the LRU tail. */
static struct mc_item *chunk_get(struct mc_class *c)
{
	if (!c->free && next_page + PAGE <= pages_end)
		carve_page(c);
	if (!c->free) {
		uint32_t now = mc_now_s();
		struct mc_item *it = c->lru_tail;
		for (int i = 0; it && i < EVICT_TRIES; i++, it = it->prev) {
			if (it->refs)
				continue;
			if (dead(it, now))
				st.reclaimed++;
			else
				st.evictions++;
			unlink_item(it);
			break;
		}
	}
	struct mc_item *it = c->free;
	if (it)
		c->free = it->hnext;
	return it;
}

struct mc_item *mc_alloc(const char *key, size_t nkey, uint32_t flags, uint32_t exp_s,
                         uint32_t nbytes, enum mc_result *why)
{
	size_t need = HDR + nkey + (size_t)nbytes + 2;
	if (nbytes > MC_ITEM_MAX || nkey > MC_KEY_MAX || need > PAGE) {
		*why = MC_TOO_LARGE;
		return NULL;
	}
	unsigned ci = 0;
	while (classes[ci].size < need)
		ci++;
	struct mc_item *it = chunk_get(&classes[ci]);
	if (!it) {
		st.outofmemory++;
		*why = MC_NO_MEMORY;
		return NULL;
	}
	it->hnext = it->prev = it->next = NULL;
	it->cas = 0;
	it->exp_s = exp_s;
	it->flags = flags;
	it->nbytes = nbytes;
	it->refs = 0;
	it->nkey = (uint8_t)nkey;
	it->cls = (uint8_t)ci;
	it->linked = false;
	memcpy(it->data, key, nkey);
	return it;
}

void mc_free_unlinked(struct mc_item *it)
{
	if (!it->linked && !it->refs)
		chunk_free(it);
}

static void replace(struct mc_item *old, struct mc_item *it)
{
	if (old)
		unlink_item(old);
	link_item(it);
}

/* append/prepend: a new item holding both values, the old one's flags and
 * expiry (memcached ignores the new ones). */
static enum mc_result concat(struct mc_item *old, struct mc_item *it, bool append)
{
	enum mc_result why;
	uint64_t len = (uint64_t)old->nbytes + it->nbytes;
	if (len > MC_ITEM_MAX)
		return MC_TOO_LARGE;
	mc_ref(old); /* not evicted to make room for its own successor */
	struct mc_item *n =
	    mc_alloc(mc_item_key(old), old->nkey, old->flags, old->exp_s, (uint32_t)len, &why);
	mc_unref(old);
	if (!n)
		return why;
	struct mc_item *first = append ? old : it, *second = append ? it : old;
	memcpy(mc_item_value(n), mc_item_value(first), first->nbytes);
	memcpy(mc_item_value(n) + first->nbytes, mc_item_value(second), second->nbytes + 2);
	if (old->linked)
		replace(old, n);
	else
		link_item(n); /* old went while we waited: store the sum anyway */
	mc_free_unlinked(it);
	return MC_STORED;
}

enum mc_result mc_store(struct mc_item *it, enum mc_store_mode mode, uint64_t cas)
{
	struct mc_item *old = mc_find(mc_item_key(it), it->nkey);
	enum mc_result r = MC_STORED;
	switch (mode) {
	case MC_SET:
		break;
	case MC_ADD:
		if (old)
			r = MC_NOT_STORED;
		break;
	case MC_REPLACE:
		if (!old)
			r = MC_NOT_STORED;
		break;
	case MC_APPEND:
	case MC_PREPEND:
		if (!old)
			r = MC_NOT_STORED;
		else
			r = concat(old, it, mode == MC_APPEND);
		if (r != MC_STORED)
			mc_free_unlinked(it);
		return r;
	case MC_CAS:
		if (!old)
			r = MC_NOT_FOUND;
		else if (old->cas != cas)
			r = MC_EXISTS;
		break;
	}
	if (r == MC_STORED)
		replace(old, it);
	else
		mc_free_unlinked(it);
	return r;
}

bool mc_delete(const char *key, size_t nkey)
{
	struct mc_item *it = mc_find(key, nkey);
	if (it)
		unlink_item(it);
	return it != NULL;
}

bool mc_touch(const char *key, size_t nkey, uint32_t exp_s)
{
	struct mc_item *it = mc_find(key, nkey);
	if (it)
		it->exp_s = exp_s;
	return it != NULL;
}

/* The value as memcached reads it for incr/decr: decimal digits, then
 * nothing but the spaces a shorter result may have left. */
static bool parse_counter(const char *p, uint32_t n, uint64_t *v)
{
	uint64_t x = 0;
	uint32_t i = 0;
	if (!n || n > 20 || p[0] < '0' || p[0] > '9')
		return false;
	for (; i < n && p[i] >= '0' && p[i] <= '9'; i++) {
		uint64_t d = (uint64_t)(p[i] - '0');
		if (x > (UINT64_MAX - d) / 10)
			return false;
		x = x * 10 + d;
	}
	for (; i < n; i++)
		if (p[i] != ' ')
			return false;
	*v = x;
	return true;
}

enum mc_result mc_arith(const char *key, size_t nkey, bool incr, uint64_t delta, uint64_t *value)
{
	struct mc_item *it = mc_find(key, nkey);
	uint64_t v;
	if (!it)
		return MC_NOT_FOUND;
	if (!parse_counter(mc_item_value(it), it->nbytes, &v))
		return MC_NOT_STORED;
	v = incr ? v + delta
	         : (v > delta ? v - delta : 0); /* incr wraps at 2^64, decr stops at 0 */
	char buf[24];
	int n = 0;
	char rev[24];
	uint64_t x = v;
	do {
		rev[n++] = (char)('0' + x % 10);
		x /= 10;
	} while (x);
	for (int i = 0; i < n; i++)
		buf[i] = rev[n - 1 - i];
	enum mc_result why;
	mc_ref(it);
	struct mc_item *ni = mc_alloc(key, nkey, it->flags, it->exp_s, (uint32_t)n, &why);
	mc_unref(it);
	if (!ni)
		return MC_NO_MEMORY;
	memcpy(mc_item_value(ni), buf, (size_t)n);
	memcpy(mc_item_value(ni) + n, "\r\n", 2);
	replace(it->linked ? it : NULL, ni);
	*value = v;
	return MC_STORED;
}

void mc_flush(uint32_t delay_s)
{
	if (delay_s) {
		flush_at_ns = clock_ns() + delay_s * 1000000000ull;
		return;
	}
	flush_at_ns = 0;
	for (unsigned i = 0; i < nclasses; i++)
		while (classes[i].lru_head)
			unlink_item(classes[i].lru_head);
}

void mc_ref(struct mc_item *it)
{
	it->refs++;
}

void mc_unref(struct mc_item *it)
{
	if (!--it->refs && !it->linked)
		chunk_free(it);
}

const struct mc_store_stats *mc_store_stats(void)
{
	return &st;
}
