/*
 * memcached.h: app=memcached, a memcached-compatible server (text
 * protocol) on lwIP's raw API, grouped by owning file:
 *
 *   memcached_store.c  fixed-memory item store: hash table, size classes,
 *                      per-class LRU eviction, expiry, CAS
 *   memcached_proto.c  the text protocol: a streaming parser per
 *                      connection that calls the store and writes replies
 *                      through struct mc_out (no lwIP in it)
 *   memcached.c        keys, the lwIP server, the measured interval and
 *                      the RESULT line
 *
 * Integer-only: no floating point anywhere (the guest builds with
 * -mgeneral-regs-only).
 */
#ifndef VNETLAB_MEMCACHED_H
#define VNETLAB_MEMCACHED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define MC_KEY_MAX  250        /* memcached's KEY_MAX_LENGTH */
#define MC_LINE_MAX 8192       /* longest command line (a get of ~32 long keys) */
#define MC_ITEM_MAX (1u << 20) /* largest value, memcached's default -I 1m */
#define MC_REL_MAX  2592000u   /* exptimes up to 30 days are relative */
#define MC_VERSION  "1.6.0-vnetlab"
#define MC_PORT     11211

/* ---- memcached_store.c ---- */

struct mc_item {
	struct mc_item *hnext;       /* hash chain */
	struct mc_item *prev, *next; /* LRU of the item's class, most recent first */
	uint64_t cas;
	uint64_t set_ns; /* when stored, for flush_all with a delay */
	uint32_t exp_s;  /* expiry in seconds since boot, 0 = never */
	uint32_t flags;  /* client flags */
	uint32_t nbytes; /* value length without the trailing "\r\n" */
	uint16_t refs;   /* readers still sending it (a reply in progress) */
	uint8_t nkey;
	uint8_t cls; /* size class */
	bool linked; /* in the hash table and LRU */
	char data[]; /* key, then value and "\r\n" */
};

static inline char *mc_item_key(struct mc_item *it)
{
	return it->data;
}

static inline char *mc_item_value(struct mc_item *it)
{
	return it->data + it->nkey;
}

enum mc_store_mode { MC_SET, MC_ADD, MC_REPLACE, MC_APPEND, MC_PREPEND, MC_CAS };
enum mc_result { MC_STORED, MC_NOT_STORED, MC_EXISTS, MC_NOT_FOUND, MC_TOO_LARGE, MC_NO_MEMORY };

struct mc_store_stats {
	uint64_t limit_bytes, bytes, curr_items, total_items, evictions, expired_unfetched;
	uint64_t reclaimed, outofmemory, classes, pages_total, pages_used, hash_buckets;
};

/* Carve the store out of `bytes` of memory (pages of MC_ITEM_MAX rounded up
 * to the largest class); false when that is not enough for one page. */
bool mc_store_init(void *mem, size_t bytes);
uint32_t mc_now_s(void); /* seconds since boot: the store's clock */
/* Absolute exptimes (> 30 days) are unix times: the host's time at boot
 * (memcached.epoch=) converts them; 0 = unknown. */
void mc_store_set_epoch(uint64_t unix_s);
/* The store's expiry for a protocol exptime; false when the exptime is
 * absolute and no epoch is known. */
bool mc_exptime(int64_t exptime, uint32_t *exp_s);
/* A live item (not expired, not flushed), moved to its LRU head; NULL. */
struct mc_item *mc_find(const char *key, size_t nkey);
/* A new unlinked item with room for nbytes + "\r\n", evicting from the
 * class's LRU tail when it has no free chunk; NULL and *why otherwise. */
struct mc_item *mc_alloc(const char *key, size_t nkey, uint32_t flags, uint32_t exp_s,
                         uint32_t nbytes, enum mc_result *why);
void mc_free_unlinked(struct mc_item *it); /* an item never linked (bad data chunk) */
/* Store a filled item by the mode's rules; the store owns it afterwards. */
enum mc_result mc_store(struct mc_item *it, enum mc_store_mode mode, uint64_t cas);
bool mc_delete(const char *key, size_t nkey);
bool mc_touch(const char *key, size_t nkey, uint32_t exp_s);
/* incr/decr: MC_STORED with *value set, MC_NOT_FOUND, MC_NOT_STORED for a
 * value that is not a decimal number below 2^64, MC_NO_MEMORY. */
enum mc_result mc_arith(const char *key, size_t nkey, bool incr, uint64_t delta, uint64_t *value);
void mc_flush(uint32_t delay_s); /* every item stored before now + delay is gone then */
void mc_ref(struct mc_item *it);
void mc_unref(struct mc_item *it);
const struct mc_store_stats *mc_store_stats(void);

/* ---- memcached_proto.c ---- */

struct mc_conn;
/* Where a connection's replies go; the server implements it on lwIP. */
struct mc_out {
	/* room for at least n more bytes of reply now */
	bool (*room)(struct mc_conn *c, uint32_t n);
	/* queue bytes (copied); false on failure (the connection is closed) */
	bool (*write)(struct mc_conn *c, const void *p, uint32_t n);
	/* queue up to n bytes of p (copied); how many were taken (0..n) */
	uint32_t (*write_some)(struct mc_conn *c, const void *p, uint32_t n);
};

struct mc_proto_stats {
	uint64_t cmd_get, cmd_set, cmd_touch, cmd_flush, get_hits, get_misses, get_expired;
	uint64_t delete_hits, delete_misses, incr_hits, incr_misses, decr_hits, decr_misses;
	uint64_t cas_hits, cas_misses, cas_badval, touch_hits, touch_misses;
	uint64_t bytes_read, bytes_written, client_errors, server_errors, unknown_commands;
	uint64_t binary_refused; /* connections that spoke the binary protocol: closed */
	uint64_t commands;       /* every complete command line: the transaction count */
	uint64_t curr_conns, total_conns;
};
extern struct mc_proto_stats mc_st;

enum mc_state { MC_S_LINE, MC_S_DATA, MC_S_SWALLOW, MC_S_TOOLONG, MC_S_SENDING, MC_S_QUIT };

struct mc_conn {
	const struct mc_out *out;
	void *user; /* the server's per-connection state */
	enum mc_state state;
	bool seen; /* any byte yet: a first byte 0x80 is a binary-protocol client */
	/* MC_S_LINE: the command line so far */
	uint32_t llen;
	char line[MC_LINE_MAX];
	/* MC_S_DATA: the value being received */
	struct mc_item *it;
	uint32_t dlen; /* bytes of value + "\r\n" received */
	enum mc_store_mode mode;
	uint64_t cas;
	bool noreply;
	/* MC_S_SWALLOW: bytes of a refused value still to discard */
	uint64_t swallow;
	/* MC_S_LINE with ready: a whole line waiting for reply room */
	bool ready;
	/* MC_S_SENDING: a get in progress: next key at line[kpos], the value
	 * of `sending` from offset soff */
	uint32_t kpos;
	bool with_cas;
	struct mc_item *sending;
	uint32_t soff;
};

void mc_conn_init(struct mc_conn *c, const struct mc_out *out, void *user);
void mc_conn_release(struct mc_conn *c); /* drop items a closing connection held */
/* Feed received bytes: how many were consumed. Fewer than n means the
 * connection waits for reply room (call mc_conn_resume when there is) or
 * asked to quit (state MC_S_QUIT). */
size_t mc_conn_feed(struct mc_conn *c, const char *p, size_t n);
/* Continue a reply that waited for room; true when input may be fed again. */
bool mc_conn_resume(struct mc_conn *c);

/* ---- memcached.c ---- */
void memcached_configure(void);
int memcached_main(void);

#endif
