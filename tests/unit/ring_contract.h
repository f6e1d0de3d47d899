/*
 * ring_contract.h: the virtqueue contract tests (test_ring_contract.c)
 * are written once against virtq.h and linked into one binary per ring
 * layout (unit.mk): test_virtq with virtq.c and test_virtq.c (split),
 * test_virtq_packed with virtq_packed.c and test_virtq_packed.c (packed).
 * The layout's file gives the contract its struct ring_layout: schedules
 * and fault classes that exist in that layout, checks of the layout's own
 * shared memory at named points of the contract tests, and the tests
 * only that layout has.
 */
#ifndef VNETLAB_RING_CONTRACT_H
#define VNETLAB_RING_CONTRACT_H

#include <stdio.h>
#include <string.h>
#include "drivers/virtio/virtq.h"
#include "tests/unit/check.h"
#include "tests/unit/host_shim.h"
#include "tests/unit/sim_dev.h"

/* test_ring_contract.c: one queue (index 1) on the simulated device */
extern struct virtq vq;
extern struct sim_queue *dq;
extern uint8_t payload[64];
void ring_notify(void *ctx, uint16_t qidx, uint16_t avail_idx);
/* A fresh queue of the given size, device attached, device live. */
void ring_setup(uint16_t size, bool event_idx, enum sim_mode mode);
/* One chain of n descriptors (12-byte header + frame), device-readable
 * (TX) or device-writable (RX). */
int ring_add_dir(unsigned n, uintptr_t token, bool writable);
int ring_add(unsigned n, uintptr_t token);
void ring_kick(void);
/* A one-descriptor chain added and published, the kick decided (and made). */
void ring_send(uintptr_t token);
/* n one-descriptor chains (tokens 1..n) added, published, kicked and
 * taken by the device, none completed; used-buffer notifications off. */
void ring_post_taken(unsigned n);
/* The device takes and completes up to n chains; the driver takes back
 * every completion. */
void ring_device_round(unsigned n);

/* A wraparound run: random chains, reordered completions, many laps. */
struct ring_wrap_case {
	uint16_t size;
	bool event_idx;
	unsigned rounds;
	uint32_t seed;
	bool late_publish; /* publish only some rounds (else after every add) */
	uint64_t min_chains;
};

/* A device fault the layout can show, and what the driver must call it. */
struct ring_fault_case {
	enum sim_fault sf;
	enum virtq_fault expect;
	const char *name;
	unsigned rounds; /* how many rounds the fault may take to show */
};

struct ring_layout {
	const char *name;   /* the binary, as its summary line names it */
	bool packed;        /* what virtq_init() must report */
	uint16_t second_id; /* virtq_add()'s id for a second chain after one of 2 descriptors */
	const struct ring_wrap_case *wraps;
	unsigned nwraps;
	const struct ring_fault_case
	    *faults; /* besides SIM_FAULT_LEN, each run read-only and writable */
	unsigned nfaults;
	/* Checks of the layout's own memory at points of the contract tests
	 * (NULL: nothing there to check). */
	void (*round_trip_fresh)(void);     /* queue set up, nothing added */
	void (*round_trip_added)(void);     /* chains of 2 and 1 added, not published */
	void (*round_trip_published)(void); /* ... and published */
	void (*round_trip_completed)(void); /* ... completed by the device, not taken */
	void (*round_trip_first_taken)(void);
	void (*wrap_done)(const struct ring_wrap_case *c);
	void (*full_ring_full)(unsigned n);     /* 16 / n chains of n in a queue of 16 */
	void (*full_ring_refilled)(unsigned n); /* one completed and a chain of n added again */
	void (*bad_requests)(void); /* invalid adds refused: the layout's own refusals */
	void (*flags_fresh)(void);  /* no EVENT_IDX, nothing added */
	void (*flags_busy)(void);   /* ... one chain kicked, the device has not run */
	void (*flags_end)(void);    /* ... the device ran and was kicked again */
	void (*event_idx_fresh)(void);
	void (*device_asks)(uint16_t entry); /* EVENT_IDX: the device re-armed for this chain */
	void (*cb_armed)(bool event_idx);    /* virtq_enable_cb(), nothing waiting */
	void (*cb_disarmed)(bool event_idx); /* virtq_disable_cb() after it */
	void (*cb_armed_after)(
	    uint16_t k);     /* EVENT_IDX: virtq_enable_cb_after(k), nothing waiting */
	void (*tests)(void); /* RUN() each of the layout's own tests */
};

/* test_virtq.c or test_virtq_packed.c */
extern const struct ring_layout layout;

#endif
