#!/usr/bin/env python3
"""tests/mutants.py: deliberate driver bugs that the unit tests must catch.

    python3 tests/mutants.py [-k SUBSTRING] [-j N]

Each mutant below is one source edit (an exact string, which must occur
exactly once, and its replacement) and the unit-test binaries that must
fail with it. The script copies the tracked sources into a scratch
directory (the working tree is never edited), builds and runs the listed
binaries there unmutated (they must pass), then once per mutant (at least
one must fail: checks failed, a sanitizer report or a crash; a mutant that
no longer applies is an error too, so the list stays honest when the code
moves). Prints one line per mutant and ends with "mutants: N caught, N
missed"; exit status 1 if any was missed or did not apply.

A mutant's build is a compile or two and a link, mostly serial, so -j N
scratch trees (copies of the first, built) take the mutants in turn; the
default is one per CPU, at most two (-j 1: one tree, the list's order).

Grow the list with every driver bug fixed: the mutant is the bug put back.
"""

import argparse
import concurrent.futures
import os
import queue
import shutil
import subprocess
import sys
import tempfile

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TIMEOUT = 30
WORKERS = min(2, os.cpu_count() or 1)

# (name, file, find, replace, binaries): a binary is "virtq", "virtq_packed", "virtio_pci",
# "virtio_mmio", "virtio_mmio_packed", "pci", "paging", "inst_table", "result", "trap", a unit
# variant name from tests/unit/unit.mk (UNIT_VARIANTS: its test_vnet), or
# "offload:" + a name from UNIT_OFFLOAD_VARIANTS (its test_offload), or "rxc:" + a name
# from UNIT_RXC_VARIANTS (its test_rx_contract).
LRO = "offload:base-every-ei1-eager-inline-zc1"
PK = "drivers/virtio/virtq_packed.c"
PACKED = "base-every-ei1-eager-inline-zc1-packed"
POLL = "base-every-ei1-eager-inline-zc1"
MQ = "drivers/virtio/vnet_mq.c"
RSS = "drivers/virtio/vnet_rss.c"
IRQ = "drivers/virtio/virtio_irq.c"
HALT = "base-every-ei1-eager-inline-zc1-idle_halt"
RX = "drivers/virtio/vnet_rx.c"
RXC = ["rxc:base-every-ei1-eager-inline-zc1", "rxc:base-every-ei1-eager-inline-zc1-packed"]
MUTANTS = [
    # Barrier B under an emulator (virtq_set_sync()): the TX stall.
    ("kick_prepare trusts a no without the register read", "drivers/virtio/virtq.c",
     "\tif (!need && vq->sync) {", "\tif (0 && vq->sync) {", ["virtq"]),
    ("kick_prepare does not read the answer again after the sync", "drivers/virtio/virtq.c",
     "\t\tvq->sync(vq->sync_ctx);\n\t\tneed = virtq_device_asks(vq, new_idx, old_idx);",
     "\t\tvq->sync(vq->sync_ctx);", ["virtq"]),
    # Barrier B under an emulator that drops MFENCE (QEMU 7.2 TCG, one
    # vCPU): a suppression read before our publish reached the device is a
    # kick lost for good; the register read before it is the fix.
    ("packed: no register read before a suppressed kick (stale Device Area, lost kick)", PK,
     "if (!need && vq->sync) {", "if (!need && vq->sync && 0) {", ["virtq_packed"]),
    ("kick-side register read only for the halt policies (poll builds lose kicks under TCG)",
     "drivers/virtio/vnet.c", "\tif (!vnet_fences_reach_device()) {",
     "\tif (!VNET_IS_IDLE_POLL && !vnet_fences_reach_device()) {",
     ["base-every-ei1-eager-inline-zc1", "base-every-ei1-eager-inline-zc1-packed"]),
    # The packed ring (issue 15, virtio 1.2 2.8): wrap counters, the first
    # descriptor last, skipping a used chain, the two event structures.
    ("packed: enable_cb_after arms DESC k past the used position, not k - 1 (a late interrupt)", PK,
     "uint32_t pos = vq->used_pos + (uint32_t)k - 1u;",
     "uint32_t pos = vq->used_pos + (uint32_t)k;",
     ["virtq_packed"]),
    ("packed: used_count does not follow a used chain's length", PK,
     "\t\tpos = (uint16_t)(pos + vq->chain_len[id]);",
     "\t\tpos = (uint16_t)(pos + 1);",
     ["virtq_packed"]),
    ("packed: Driver Ring Wrap Counter not toggled at the end", PK,
     "\t\t\twrap = !wrap;\n\t\t}\n\t}\n\tvq->next_avail = pos;",
     "\t\t}\n\t}\n\tvq->next_avail = pos;",
     ["virtq_packed", PACKED]),
    ("packed: used wrap counter not toggled at the end", PK,
     "\t\tvq->used_wrap = !vq->used_wrap;", "",
     ["virtq_packed", PACKED]),
    ("packed: later descriptors of a chain not marked available", PK,
     "\t\telse\n\t\t\tvirtq_store16(&d->flags, flags);", "",
     ["virtq_packed", PACKED]),
    ("packed: first descriptor made available at add, not at publish", PK,
     "\t\t\tvq->head_flags[id] = flags;\n\t\telse\n", "\t\t\tvq->head_flags[id] = flags;\n\t\tif (1)\n",
     ["virtq_packed", "base-burst-ei1-batched-inline-zc1-packed"]),
    ("packed: used chain skipped by one descriptor, not its length", PK,
     "vq->used_pos = (uint16_t)(vq->used_pos + n);", "vq->used_pos = (uint16_t)(vq->used_pos + 1);",
     ["virtq_packed", PACKED]),
    ("packed: DESC event wrap counter ignored", PK,
     "\t\tif (!!(ev & VIRTQ_EVENT_WRAP) != vq->pub_wrap)", "\t\tif (0)",
     ["virtq_packed"]),
    ("packed: Device Area DISABLE ignored", PK,
     "need = flags != VIRTQ_EVENT_F_DISABLE;", "need = true;",
     ["virtq_packed", "base-every-ei0-eager-inline-zc1-packed"]),
    ("packed: no forced kick after a whole undecided lap", PK,
     "if (vq->unkicked_desc >= vq->size) {", "if (0) {",
     ["virtq_packed"]),
    ("packed: notification data without next_wrap", PK,
     "virtq_off_wrap(vq->pub_pos, vq->pub_wrap));", "virtq_off_wrap(vq->pub_pos, true));",
     ["virtq_packed"]),
    ("packed: enable_cb does not re-check the ring", PK,
     "\tif (k == 1)\n\t\treturn virtq_used_pending(vq);", "\tif (k == 1)\n\t\treturn false;",
     ["virtq_packed", "base-every-ei1-eager-inline-zc1-idle_halt-packed"]),
    ("packed: enable_cb DESC without the used wrap counter", PK,
     "\t\tbool wrap = vq->used_wrap;\n\n\t\tif (pos >= vq->size) {", "\t\tbool wrap = true;\n\n\t\tif (pos >= vq->size) {",
     ["virtq_packed"]),
    ("packed: disable_cb leaves notifications on", PK,
     "\tvirtq_driver_event(vq, 0, VIRTQ_EVENT_F_DISABLE);\n}", "\t(void)vq;\n}",
     ["virtq_packed", "base-deferred-ei0-eager-inline-zc1-idle_halt-packed"]),
    ("packed: wrong wrap counter in a used descriptor accepted", PK,
     "return virtq_chains_published(vq) ? VIRTQ_SLOT_BAD : VIRTQ_SLOT_WAIT;",
     "return VIRTQ_SLOT_WAIT;",
     ["virtq_packed", PACKED]),
    ("packed: id not in flight (used twice) accepted", PK,
     "\tif (vq->chain_len[id] == 0)\n", "\tif (0)\n",
     ["virtq_packed", PACKED]),
    ("packed: used descriptor in a free slot not checked", PK,
     "if (!!(virtq_load16(&d->flags) & VIRTQ_DESC_F_AVAIL) == wrap)", "if (0)",
     ["virtq_packed", "lazy-every-ei1-eager-inline-zc1-packed"]),
    ("packed: completion of an unpublished chain accepted", PK,
     "\t    (uint16_t)(vq->avail_idx - vq->avail_pub))\n", "\t    (uint16_t)(vq->avail_idx - vq->avail_pub) && 0)\n",
     ["virtq_packed"]),
    ("packed: used length beyond the writable bytes accepted", PK,
     "} else if (l > vq->write_len[id]) {", "} else if (0) {",
     ["virtq_packed", PACKED]),
    ("packed build does not ask for RING_PACKED", "drivers/virtio/vnet.c",
     "\tif (VNET_IS_RING_PACKED)\n\t\tf |= VIRTIO_BIT(VIRTIO_F_RING_PACKED);", "",
     [PACKED]),

    # The idle policy (issue 12): re-arm, re-check, bounded halts.
    ("enable_cb does not re-check the ring", "drivers/virtio/virtq.c",
     "\t\tvq->sync(vq->sync_ctx);\n\t}\n\treturn virtq_used_count(vq) >= k;",
     "\t\tvq->sync(vq->sync_ctx);\n\t}\n\treturn false;",
     ["virtq", "base-every-ei1-eager-inline-zc1-idle_halt"]),
    ("enable_cb does not move used_event", "drivers/virtio/virtq.c",
     "\t\tvirtq_store16(vq->used_event, (uint16_t)(vq->last_used + k - 1));\n\telse\n\t\tvirtq_store16(&vq->avail->flags, 0);",
     "\t\t(void)0;\n\telse\n\t\tvirtq_store16(&vq->avail->flags, 0);",
     ["virtq", "base-every-ei1-eager-inline-zc1-idle_halt"]),
    ("disable_cb leaves notifications on", "drivers/virtio/virtq.c",
     "\telse\n\t\tvirtq_store16(&vq->avail->flags, VIRTQ_AVAIL_F_NO_INTERRUPT);\n}",
     "\telse\n\t\t(void)0;\n}",
     ["virtq", "base-deferred-ei0-eager-inline-zc1-idle_halt"]),
    ("halt without flushing pending kicks", "drivers/virtio/vnet_idle.c",
     "\tvnet_before_wait(vn);\n\tvnet_tx_reclaim_before_halt(vn);",
     "\tvnet_tx_reclaim_before_halt(vn);",
     ["base-deferred-ei0-eager-inline-zc1-idle_halt"]),
    ("halt without reclaiming completions", "drivers/virtio/vnet_idle.c",
     "\tvnet_before_wait(vn);\n\tvnet_tx_reclaim_before_halt(vn);",
     "\tvnet_before_wait(vn);",
     ["base-every-ei1-eager-inline-zc1-idle_halt"]),
    ("halt ignores the TX liveness bound", "drivers/virtio/vnet_idle.c",
     "\tif (virtq_chains_in_flight(&vn->txq) && now +", "\tif (0 && now +",
     ["base-every-ei1-eager-inline-zc1-idle_halt"]),
    ("halt ignores the kick=timer hold", "drivers/virtio/vnet_idle.c",
     "\tif (VNET_IS_KICK_TIMER && vn->tx_holding &&", "\tif (0 &&",
     ["base-timer-ei1-eager-chain-zc0-idle_halt"]),
    ("halt ignores the caller's deadline", "drivers/virtio/vnet_idle.c",
     "\tif (deadline_ns && deadline_ns < until)", "\tif (0)",
     ["base-every-ei1-eager-inline-zc1-idle_halt"]),
    ("RX not armed before halting", "drivers/virtio/vnet_idle.c",
     "\tif (virtq_enable_cb_after(&vn->rxq, rx_k) ||", "\tif (false ||",
     ["base-every-ei1-eager-inline-zc1-idle_halt"]),
    ("adaptive halts without polling first", "drivers/virtio/vnet_idle.c",
     "now - vn->idle_last_work < VNET_IDLE_POLL_US * 1000ull", "0",
     ["base-every-ei1-eager-inline-zc1-idle_adaptive"]),
    # RX interrupt moderation (RX_COALESCE): used_event k ahead, adapted.
    ("enable_cb_after interrupts one entry late", "drivers/virtio/virtq.c",
     "(uint16_t)(vq->last_used + k - 1)", "(uint16_t)(vq->last_used + k)",
     ["virtq", "base-every-ei1-eager-inline-zc1-idle_halt-rxc64"]),
    ("enable_cb_after halts with k entries waiting", "drivers/virtio/virtq.c",
     "\treturn virtq_used_count(vq) >= k;", "\treturn virtq_used_count(vq) > k;",
     ["virtq"]),
    ("moderation ignores the posted-buffer cap", "drivers/virtio/vnet_idle.c",
     "\tif (k > cap)\n", "\tif (0)\n",
     ["base-every-ei1-eager-inline-zc1-off_none-idle_halt-rxc256"]),
    ("moderation waits without the bound", "drivers/virtio/vnet_idle.c",
     "\tif (rx_k > 1 && now + VNET_RX_COALESCE_US * 1000ull < until) {", "\tif (0) {",
     ["base-every-ei1-eager-inline-zc1-idle_halt-rxc64"]),
    ("moderation keeps k after the bound", "drivers/virtio/vnet_idle.c",
     "\t\tnext = got ? got : 1;", "\t\t(void)0;",
     ["base-every-ei1-eager-inline-zc1-idle_halt-rxc64", "base-burst-ei1-eager-inline-zc1-idle_adaptive-rxc16"]),
    ("moderation never grows k", "drivers/virtio/vnet_idle.c",
     "\telse if (got >= 2u * k)", "\telse if (0)",
     ["base-every-ei1-eager-inline-zc1-idle_halt-rxc64"]),
    ("lost wake-ups never counted", "drivers/virtio/vnet_idle.c",
     "\t\t\t\tvn->idle.lost_wakeups++;", "\t\t\t\t(void)0;",
     ["base-every-ei1-eager-inline-zc1-idle_halt", "base-every-ei1-eager-inline-zc1-idle_halt-rxc64"]),
    # The lost wake-up under QEMU 7.2 TCG (fences elided): the re-arm's register read.
    ("re-arm without the device register read", "drivers/virtio/virtq.c",
     "\tif (vq->sync) {\n\t\tvq->stats.syncs++;\n\t\tvq->sync(vq->sync_ctx);\n\t}",
     "\tif (0) {\n\t}",
     ["virtq", "base-every-ei1-eager-inline-zc1-idle_halt", "base-every-ei1-eager-inline-zc1-idle_adaptive"]),
    ("fences trusted under TCG (no re-arm read)", "drivers/virtio/vnet.c",
     "\tif (!vnet_fences_reach_device()) {",
     "\tif (!vnet_fences_reach_device() && 0) {",
     ["base-every-ei1-eager-inline-zc1-idle_adaptive", "base-deferred-ei0-eager-inline-zc1-idle_halt"]),
    ("moderation used without EVENT_IDX", "drivers/virtio/vnet_idle.c",
     "\tif (VNET_RX_COALESCE == 1 || !vn->rxq.event_idx)\n\t\treturn 1;", "\tif (VNET_RX_COALESCE == 1)\n\t\treturn 1;",
     ["base-every-ei0-eager-inline-zc1-idle_halt-rxc64"]),

    ("end-of-burst kick removed", "drivers/virtio/vnet_tx.c",
     "\tif (VNET_IS_KICK_BURST && vnet_tx_kick_pending(vn))\n\t\tvnet_tx_kick(vn);\n}",
     "}",
     ["base-burst-ei1-eager-inline-zc1", "v2-burst-ei1-batched-inline-zc1"]),
    ("vnet_drain() does not kick", "drivers/virtio/vnet_tx.c",
     "\tif (vnet_tx_kick_pending(vn))\n\t\tvnet_tx_kick(vn);\n\tuint64_t end",
     "\tuint64_t end",
     ["base-deferred-ei1-eager-inline-zc1", "lazy-timer-ei1-eager-inline-zc1"]),
    ("vnet_tx_poll() safety-net flush removed", "drivers/virtio/vnet_tx.c",
     "\t} else if (vnet_tx_kick_pending(vn)) {\n\t\tvnet_tx_kick(vn);\n\t}\n\tif (VNET_IS_RECLAIM_POLL)",
     "\t}\n\tif (VNET_IS_RECLAIM_POLL)",
     ["base-burst-ei1-eager-inline-zc1"]),
    ("used-index bound loosened to the ring size", "drivers/virtio/virtq.c",
     "if (pending > virtq_chains_published(vq))",
     "if (pending > vq->size)",
     ["virtq", "base-every-ei1-eager-inline-zc1"]),
    ("used-index bound counts unpublished chains", "drivers/virtio/virtq.c",
     "if (pending > virtq_chains_published(vq))",
     "if (pending > vq->chains)",
     ["virtq"]),
    ("completion of an unpublished chain accepted", "drivers/virtio/virtq.c",
     "\t    (uint16_t)(vq->avail_idx - vq->avail_pub))\n\t\treturn virtq_fault(vq, VIRTQ_FAULT_NOT_PUBLISHED,",
     "\t    (uint16_t)(vq->avail_idx - vq->avail_pub) && 0)\n\t\treturn virtq_fault(vq, VIRTQ_FAULT_NOT_PUBLISHED,",
     ["virtq", "base-burst-ei1-batched-inline-zc1"]),
    ("TX used length fatal again", "drivers/virtio/virtq.c",
     "if (vq->write_len[id16] == 0 && l) {",
     "if (vq->write_len[id16] == 0 && l && 0) {",
     ["virtq", "base-every-ei1-eager-inline-zc1"]),
    ("used length beyond the writable bytes accepted", "drivers/virtio/virtq.c",
     "} else if (l > vq->write_len[id16]) {",
     "} else if (l > vq->write_len[id16] + 1) {",
     ["virtq"]),
    ("lazy threshold: < becomes <=", "drivers/virtio/vnet_tx.c",
     "if (VNET_IS_RECLAIM_LAZY && virtq_num_free(&vn->txq) < vn->lazy_thresh)",
     "if (VNET_IS_RECLAIM_LAZY && virtq_num_free(&vn->txq) <= vn->lazy_thresh)",
     ["lazy-every-ei1-eager-inline-zc1"]),
    ("v1 without its final free", "drivers/virtio/vnet_tx.c",
     "if ((VNET_IS_RECLAIM_BASE_V0 || VNET_IS_RECLAIM_V1 || VNET_IS_RECLAIM_V2_V3) &&",
     "if ((VNET_IS_RECLAIM_BASE_V0 || VNET_IS_RECLAIM_V2_V3) &&",
     ["v1-every-ei1-eager-inline-zc1"]),
    ("v2 without its first free", "drivers/virtio/vnet_tx.c",
     "\tif (VNET_IS_RECLAIM_BASE_V0 || VNET_IS_RECLAIM_V2_V3)\n\t\tvnet_tx_reclaim(vn, VNET_RECLAIM_ALL);",
     "\tif (VNET_IS_RECLAIM_BASE_V0)\n\t\tvnet_tx_reclaim(vn, VNET_RECLAIM_ALL);",
     ["v2-every-ei1-eager-inline-zc1"]),
    ("v3 delays the avail index update like v2", "drivers/virtio/vnet_tx.c",
     "\tif (VNET_IS_RECLAIM_V3)\n\t\tvnet_tx_publish(vn);",
     "",
     ["v3-every-ei1-eager-chain-zc1"]),
    ("v2 publishes before its frees (as v3)", "drivers/virtio/vnet_tx.c",
     "\tif (VNET_IS_RECLAIM_V3)\n\t\tvnet_tx_publish(vn);",
     "\tif (VNET_IS_RECLAIM_V2_V3)\n\t\tvnet_tx_publish(vn);",
     ["v2-burst-ei1-eager-inline-zc1"]),
    ("bounded reclaim takes all (2*free = free)", "drivers/virtio/vnet_tx.c",
     "\tif (VNET_IS_RECLAIM_V1 || VNET_IS_RECLAIM_V2_V3)\n\t\tvnet_tx_reclaim(vn, VNET_RECLAIM_K);",
     "\tif (VNET_IS_RECLAIM_V1 || VNET_IS_RECLAIM_V2_V3)\n\t\tvnet_tx_reclaim(vn, VNET_RECLAIM_ALL);",
     ["v1-every-ei1-eager-inline-zc1"]),
    ("no idle reclaim (TX liveness bug)", "drivers/virtio/vnet_tx.c",
     "\tvnet_tx_idle_reclaim(vn);\n}",
     "\t(void)vnet_tx_idle_reclaim;\n}",
     ["lazy-every-ei1-eager-inline-zc1", "base-every-ei1-eager-inline-zc1"]),
    ("idle reclaim fires while TX is busy", "drivers/virtio/vnet_tx.c",
     "\tif (vn->tx_activity != vn->tx_activity_seen) {",
     "\tif (vn->tx_activity != vn->tx_activity_seen && 0) {",
     ["lazy-every-ei1-eager-inline-zc1"]),
    ("idle reclaim counted as the policy's reclaim", "drivers/virtio/vnet_tx.c",
     "\tif (why == VNET_TAKE_IDLE) {\n\t\tvn->tx.idle_reclaim_calls++;",
     "\tif (why == VNET_TAKE_IDLE && 0) {\n\t\tvn->tx.idle_reclaim_calls++;",
     ["lazy-every-ei1-eager-inline-zc1"]),
    ("event index ignored (flag protocol always)", "drivers/virtio/virtq.c",
     "\tif (vq->event_idx)\n\t\treturn virtq_need_event(",
     "\tif (0)\n\t\treturn virtq_need_event(",
     ["base-every-ei1-eager-inline-zc1"]),
    ("link down ignored", "drivers/virtio/vnet.c",
     "\tif (vnet_check(vn) == 0)\n\t\tvnet_check_link(vn);",
     "\tif (vnet_check(vn) == 0)\n\t\t(void)vnet_check_link;",
     ["base-every-ei1-eager-inline-zc1"]),
    ("device status checked by pass count only (unbounded time)", "drivers/virtio/vnet.c",
     "clock_ns() - vn->status_checked >= status_check_ns)",
     "clock_ns() - vn->status_checked >= status_check_ns && vn->poll_passes % 65536 == 0)",
     ["base-every-ei1-eager-inline-zc1"]),
    ("forwarded RX buffers left on TX until the policy reclaims (lazy starves the RX ring)",
     "drivers/virtio/vnet_tx.c",
     "\tif (vn->rx_in_tx && vn->rx_posted < vn->rxq.size / 2 && virtq_used_pending(&vn->txq))",
     "\tif (0 && vn->rx_in_tx && vn->rx_posted < vn->rxq.size / 2 && virtq_used_pending(&vn->txq))",
     ["lazy-burst-ei1-eager-inline-zc1"]),
    ("forwarded RX buffers reclaimed only when the RX ring is nearly empty", "drivers/virtio/vnet_tx.c",
     "\tif (vn->rx_in_tx && vn->rx_posted < vn->rxq.size / 2 && virtq_used_pending(&vn->txq))",
     "\tif (vn->rx_in_tx && vn->rx_posted < vn->rxq.size / 8 && virtq_used_pending(&vn->txq))",
     ["lazy-burst-ei1-eager-inline-zc1"]),
    ("device status read every 10 ms again (593 exits a second under KVM)", "drivers/virtio/vnet.c",
     "static uint64_t status_check_ns = VNET_STATUS_MS_DEFAULT * 1000000ull;",
     "static uint64_t status_check_ns = VNET_STATUS_MS_DEFAULT * 10000ull;",
     ["base-every-ei1-eager-inline-zc1"]),
    ("no RX budget", "drivers/virtio/vnet_rx.c",
     "\tif (!vn->rx_quota)\n\t\treturn 0;",
     "\tif (!vn->rx_quota && 0)\n\t\treturn 0;",
     ["base-every-ei1-eager-inline-zc1"]),
    # virtio_cfg.h: the one config-field helper of both transports.
    ("16-bit config fields read byte by byte (4.1.3.1, 4.2.2.2)", "drivers/virtio/virtio_cfg.h",
     "if (len == 2 && off % 2 == 0) {",
     "if (len == 2 && off % 2 == 0 && 0) {",
     ["virtio_pci", "virtio_mmio"]),
    ("virtio-mmio version 1 (legacy) accepted", "drivers/virtio/virtio_mmio.c",
     "if (version != 2) {", "if (version != 2 && version != 1) {", ["virtio_mmio"]),
    ("virtio-mmio QueueReady before the queue addresses (4.2.3.2)", "drivers/virtio/virtio_mmio.c",
     "\tmmio_write64_split(vm->base + VM_QUEUE_DESC_LO, vq->area_desc);",
     "\tvm_write(vm, VM_QUEUE_READY, 1);\n\tmmio_write64_split(vm->base + VM_QUEUE_DESC_LO, vq->area_desc);",
     ["virtio_mmio"]),
    # virtio-mmio with the packed ring (4.2.3.2 step 6 takes the layout's
    # three areas: descriptor ring, driver and device event suppression).
    ("virtio-mmio QueueDriver gets the split ring's avail (packed: no such part)", "drivers/virtio/virtio_mmio.c",
     "mmio_write64_split(vm->base + VM_QUEUE_DRIVER_LO, vq->area_driver);",
     "mmio_write64_split(vm->base + VM_QUEUE_DRIVER_LO, (uintptr_t)vq->avail);",
     ["virtio_mmio_packed"]),
    ("virtio-mmio Driver and Device Areas swapped", "drivers/virtio/virtio_mmio.c",
     "mmio_write64_split(vm->base + VM_QUEUE_DEVICE_LO, vq->area_device);",
     "mmio_write64_split(vm->base + VM_QUEUE_DEVICE_LO, vq->area_driver);",
     ["virtio_mmio", "virtio_mmio_packed"]),
    ("virtio-mmio NOTIFICATION_DATA ignored (bare queue index)", "drivers/virtio/virtio_mmio.c",
     "vm->notify_data ? (uint32_t)qidx | (uint32_t)avail_idx << 16 : qidx);",
     "vm->notify_data && 0 ? (uint32_t)qidx | (uint32_t)avail_idx << 16 : qidx);",
     ["virtio_mmio_packed"]),
    ("virtio-mmio GSI routed edge-triggered though the DSDT says level", "drivers/virtio/virtio_mmio.c",
     "irq_alloc_gsi(gsi, !w->edge, w->active_low,", "irq_alloc_gsi(gsi, w->edge, w->active_low,",
     ["virtio_mmio"]),
    ("virtio-mmio I/O APIC not tried first (microvm,acpi=on GSIs refused)", "drivers/virtio/virtio_mmio.c",
     "\tif (ioapic_has(gsi)) {", "\tif (0 && ioapic_has(gsi)) {", ["virtio_mmio"]),
    ("RX double release accepted (state check removed)", "drivers/virtio/vnet_rx.c",
     "if (i < 0 || vn->rx_state[i] != VNET_RXB_UP) {",
     "if (i < 0) {",
     ["base-every-ei1-eager-inline-zc1"]),
    # The bulk data path (issue 9): merged receive, offload headers, features.
    ("num_buffers 0 accepted", "drivers/virtio/vnet_rx.c",
     "if (nbufs == 0 || nbufs > VNET_RX_MAX_BUFS",
     "if (nbufs > VNET_RX_MAX_BUFS",
     [LRO]),
    ("num_buffers beyond what is posted: off by one", "drivers/virtio/vnet_rx.c",
     "nbufs > vn->rx_posted + 1u)",
     "nbufs > vn->rx_posted + 2u)",
     [LRO]),
    ("merged buffers read at the first buffer's frame offset", "drivers/virtio/vnet_rx.c",
     "(struct vnet_rx_buf){b + VNET_RX_HDR_OFF, len, b, b};",
     "(struct vnet_rx_buf){b + VNET_RX_FRAME_OFF, len, b, b};",
     [LRO]),
    ("buffers of one frame not required on the used ring together", "drivers/virtio/vnet_rx.c",
     "return vnet_rx_fault(vn, \"num_buffers_unused\", nbufs);",
     "break;",
     [LRO]),
    ("RX checksum flags: DATA_VALID ignored", "drivers/virtio/vnet_rx.c",
     "(h->flags & (VIRTIO_NET_HDR_F_NEEDS_CSUM | VIRTIO_NET_HDR_F_DATA_VALID)))",
     "(h->flags & VIRTIO_NET_HDR_F_NEEDS_CSUM))",
     [LRO]),
    ("RX checksum flags believed without GUEST_CSUM", "drivers/virtio/vnet_rx.c",
     "if ((vn->offloads & VNET_OFF_RX_CSUM) &&\n\t    (h->flags",
     "if ((vn->offloads | VNET_OFF_RX_CSUM) &&\n\t    (h->flags",
     [LRO]),
    ("RX gso_size 0 accepted", "drivers/virtio/vnet_rx.c",
     "if (h->gso_size == 0 || h->gso_size > total)",
     "if (h->gso_size > total)",
     [LRO]),
    ("TX gso_size written from hdr_len", "drivers/virtio/vnet_tx.c",
     "hdr->gso_size = o->gso_size;",
     "hdr->gso_size = o->hdr_len;",
     [LRO]),
    ("TX gso_size 0 accepted", "drivers/virtio/vnet_tx.c",
     "o->gso_size == 0 ||",
     "o->gso_size == 1 ||",
     [LRO]),
    ("GUEST_TSO4 accepted without MRG_RXBUF", "drivers/virtio/vnet.c",
     "if (!(f & VIRTIO_BIT(VIRTIO_NET_F_GUEST_CSUM)) || !(f & VIRTIO_BIT(VIRTIO_NET_F_MRG_RXBUF)))",
     "if (!(f & VIRTIO_BIT(VIRTIO_NET_F_GUEST_CSUM)))",
     [LRO]),
    ("device MTU above the RX buffers accepted", "drivers/virtio/vnet.c",
     "if (v16 > 1500)",
     "if (v16 > 9000)",
     [LRO]),
    # Issue 23 finding 4: PCI configuration writes and the virtio-pci set-up.
    ("pci: 16-bit config write through byte lanes 0-1 whatever the offset", "kernel/pci.c",
     "outw((uint16_t)(CFG_DATA + (off & 2)), v);", "outw((uint16_t)CFG_DATA, v);",
     ["pci"]),
    ("pci: 16-bit config write as a dword read-modify-write (STATUS W1C bits written back)", "kernel/pci.c",
     "outw((uint16_t)(CFG_DATA + (off & 2)), v);",
     "outl(CFG_DATA, (inl(CFG_DATA) & ~(0xffffu << (off & 2) * 8)) | (uint32_t)v << (off & 2) * 8);",
     ["pci"]),
    # Issue 37: every configuration read is an exit under KVM; none twice.
    ("pci: the scan reads function 0's header type again per function", "kernel/pci.c",
     "			uint8_t ht = fn ? header_type(bus, dev, fn) : ht0;",
     "			uint8_t ht = header_type(bus, dev, fn);", ["pci"]),
    ("pci: the scan reads each function's ids before the ready line (two exits more under KVM)",
     "kernel/pci.c", "			probe(bus, dev, fn);",
     "			probe(bus, dev, fn);\n			(void)raw_read32(bus, dev, fn, PCI_VENDOR);", ["pci"]),
    ("pci: an absent slot (all ones) taken for a function", "kernel/pci.c",
     "		if (ht0 == 0xff)\n			continue;", "		if (ht0 == 0xff && 0)\n			continue;",
     ["pci"]),
    ("pci: the slots scanned where CONFIG_ADDRESS does not hold its value (microvm)", "kernel/pci.c",
     "	return inl(CFG_ADDR) == 0x80000000u;", "	(void)inl(CFG_ADDR);\n	return true;", ["pci"]),
    ("pci: a function's class never read (pci lines print a stale class)", "kernel/pci.c",
     "		d->class_rev = raw_read32(d->bus, d->dev, d->fn, PCI_CLASS_REV);", "		(void)0;", ["pci"]),
    ("pci: a driver's pci_get() before pci_print() sees no ids", "kernel/pci.c",
     "const struct pci_dev *pci_get(int i)\n{\n	pci_identify();", "const struct pci_dev *pci_get(int i)\n{", ["pci"]),
    # A BAR firmware left unassigned (qboot): placed by the kernel.
    ("pci: a placed BAR not aligned to its size", "kernel/pci_place.c",
     "	uint64_t a = (lo + size - 1) & ~(size - 1);", "	uint64_t a = lo;", ["pci"]),
    ("pci: placement over a busy range (another BAR, a reserved range)", "kernel/pci_place.c",
     "			if (busy[i].len && overlaps(a, size, &busy[i])) {",
     "			if (busy[i].len && overlaps(a, size, &busy[i]) && 0) {", ["pci"]),
    ("pci: the boot map's reserved ranges not kept clear", "kernel/pci.c",
     "	nbusy = nreserved;", "	nbusy = 0;", ["pci"]),
    ("pci: other BARs not kept clear", "kernel/pci.c",
     "				busy[nbusy++] = (struct pci_range){base, sz};", "				(void)base;", ["pci"]),
    ("pci: an unimplemented 32-bit BAR sized 4 GiB (and placed)", "kernel/pci.c",
     "		sz = 0; /* no bit took the ones: the BAR is not implemented */", "		(void)0;", ["pci"]),
    ("virtio-pci: a capability in an unusable BAR kept (4.1.4.1: the first the driver can use)",
     "drivers/virtio/virtio_pci.c",
     "if (virtio_pci_map_cap(d, &c, what[type], why[type], sizeof(why[type]))) {",
     "if (virtio_pci_map_cap(d, &c, what[type], why[type], sizeof(why[type])) && 0) {",
     ["virtio_pci"]),
    ("virtio-pci: MSI-X left enabled and masked when irq_alloc fails part way (no INTx)",
     "drivers/virtio/virtio_pci.c",
     "\t\t\tvirtio_pci_msix_off(d, cap, ctrl);\n\t\t\treturn -1;", "\t\t\treturn -1;",
     ["virtio_pci"]),
    # Issue 23 finding 5: no large page over the first 2 MiB (SDM 11.11.9).
    ("paging: entries without Accessed/Dirty (a shadow fault per page under kvm_pvm)", "kernel/paging.c",
     "#define PTE_RWU  (PTE_P | PTE_W | PTE_U | PTE_A | PTE_D)", "#define PTE_RWU  (PTE_P | PTE_W | PTE_U)",
     ["paging"]),
    ("paging: the first 2 MiB one write-back large page again", "kernel/paging.c",
     "\tmap_low_4k(bi);", "\tmap_low_4k(bi);\n\tmap_2m(0, false);", ["paging"]),
    ("trap: #UD's gate present before pvm_init (emulated writes, and #NP no longer names the vector)",
     "kernel/trap.c", "static const uint8_t early[] = {8, 11, 13};",
     "static const uint8_t early[] = {6, 8, 11, 13};", ["trap"]),
    ("trap: no #NP gate before pvm_init (a missing gate becomes #DF)", "kernel/trap.c",
     "static const uint8_t early[] = {8, 11, 13};", "static const uint8_t early[] = {8, 13};", ["trap"]),
    ("paging: the VGA hole and BIOS area mapped write-back", "kernel/paging.c",
     "bool uc = !is_memory(bi, a, a + PAGE_4K);", "bool uc = false && !is_memory(bi, a, a + PAGE_4K);",
     ["paging"]),
    # Found by fuzz_vnet_dev: gso_type NONE|ECN passed the check, then the
    # frame went up as GSO with an unchecked gso_size.
    ("RX gso_type checked with the ECN bit masked off", "drivers/virtio/vnet_rx.c",
     "if (!(vn->offloads & VNET_OFF_LRO4) || h->gso_type != VIRTIO_NET_HDR_GSO_TCPV4)",
     "if ((h->gso_type & 0x7f) != VIRTIO_NET_HDR_GSO_NONE &&\n\t\t    (!(vn->offloads & VNET_OFF_LRO4) || h->gso_type != VIRTIO_NET_HDR_GSO_TCPV4))",
     [LRO]),
    # Issue 23 finding 6: a completed frame's wait for reclaim is bounded
    # while TX stays busy (lazy under a steady stream).
    ("TX liveness: no stale reclaim while TX is busy (lazy keeps a completed frame)",
     "drivers/virtio/vnet_tx.c", "\tvnet_tx_stale_reclaim(vn, now);\n", "\t(void)vnet_tx_stale_reclaim;\n",
     ["lazy-every-ei1-eager-inline-zc1", "lazy-burst-ei1-eager-inline-zc1-packed"]),
    # Issue 25: vnet_tx_forward() (app=pkt macswap/reflect) sends the RX
    # buffer itself and gives it back to RX at reclaim.
    ("forward: a forwarded RX buffer is never given back to RX (tx_done gets it)",
     "drivers/virtio/vnet_tx.c", "\t\tif (s->rx_handle)\n\t\t\tvnet_rx_tx_done(vn, s->rx_handle);",
     "\t\tif (0)\n\t\t\tvnet_rx_tx_done(vn, s->rx_handle);",
     ["base-every-ei1-eager-inline-zc1", "lazy-timer-ei1-eager-inline-zc1"]),
    ("forward: the buffer is re-posted to RX while the TX ring still points at it",
     "drivers/virtio/vnet_tx.c", "\tif (rx_handle && VNET_ZEROCOPY) {", "\tif (rx_handle && 0) {",
     ["base-every-ei1-eager-inline-zc1", "base-every-ei1-eager-inline-zc1-packed"]),
    ("forward: the caller may still release a buffer on the TX ring",
     "drivers/virtio/vnet_rx.c", "\tvn->rx_state[i] = VNET_RXB_TX;\n", "\t(void)i;\n",
     ["base-every-ei1-eager-inline-zc1"]),
    # net/inst_table.c: what the copies of the TCP/IP side share (mq=N).
    ("inst: an ARP frame is posted back to the copy that received it",
     "net/inst_table.c", "\t\tif (to == from)\n\t\t\tcontinue;\n\t\tif (m->head", "\t\tif (m->head",
     ["inst_table"]),
    ("inst: a full ARP mailbox overwrites its oldest frame uncounted",
     "net/inst_table.c", "if (m->head - m->tail >= MBOX_SLOTS) {", "if (m->head - m->tail > MBOX_SLOTS) {",
     ["inst_table"]),
    ("inst: every copy makes up its own control token (a stop is refused on the other queues)",
     "net/inst_table.c", "\tif (!token[0])\n", "\tif (1)\n",
     ["inst_table"]),
    ("inst: copy 0 goes on before every copy polls its queue",
     "net/inst_table.c", "\t\tif (!ready[k])\n\t\t\treturn false;", "\t\tif (!ready[k] && 0)\n\t\t\treturn false;",
     ["inst_table"]),
    ("inst: the total's interval is the copies' sum, not the longest",
     "net/inst_table.c", "\t\tif (totals[k].ns > sum->ns)\n\t\t\tsum->ns = totals[k].ns;",
     "\t\tsum->ns += totals[k].ns;", ["inst_table"]),
    ("inst: the total leaves out the echo's connections",
     "net/inst_table.c", "\t\tsum->conns += totals[k].conns;\n", "", ["inst_table"]),
    # Issue 26: multiqueue (vnet_mq.c, virtio 1.2 5.1.6.5.5) against the
    # two-pair simulated device (tests/unit/test_vnet_mq.c, in every
    # variant).
    ("mq: control queue at 2 x max_virtqueue_pairs - 1 (transmitq2's index)", MQ,
     "&ctrlq, (uint16_t)(2u * vn->max_pairs),", "&ctrlq, (uint16_t)(2u * vn->max_pairs - 1),",
     [POLL, PACKED]),
    ("mq: control queue at 2 x pairs in use, not 2 x max_virtqueue_pairs", MQ,
     "&ctrlq, (uint16_t)(2u * vn->max_pairs),", "&ctrlq, (uint16_t)(2u * vn->pairs),",
     [POLL]),
    ("mq: pair k's receiveq at 2k + 1, not 2k", "drivers/virtio/vnet.c",
     "virtio_dev_queue_setup(&q->vd, &q->rxq, (uint16_t)(2 * k),",
     "virtio_dev_queue_setup(&q->vd, &q->rxq, (uint16_t)(2 * k + 1),",
     [POLL, PACKED]),
    ("mq: VQ_PAIRS_SET carries pairs - 1", MQ,
     "uint16_t pairs = (uint16_t)vn->pairs;", "uint16_t pairs = (uint16_t)(vn->pairs - 1);",
     [POLL]),
    ("mq: the control queue's ack is not checked (VIRTIO_NET_ERR taken for OK)", MQ,
     "if (ctrl_buf[CTRL_ACK] != VIRTIO_NET_OK) {", "if (0) {",
     [POLL, PACKED]),
    ("mq: MQ and CTRL_VQ asked for with one pair too", MQ,
     "return pairs > 1 ? VIRTIO_BIT(VIRTIO_NET_F_MQ)", "return pairs > 0 ? VIRTIO_BIT(VIRTIO_NET_F_MQ)",
     [POLL, "base-every-ei1-eager-inline-zc1-idle_halt"]),
    ("mq: vnet_queue() gives pair 0 for every k", "drivers/virtio/vnet.c",
     "return qp < vn->pairs ? &vnet_dev[qp] : NULL;", "return qp < vn->pairs ? &vnet_dev[0] : NULL;",
     [POLL, PACKED]),
    # RSS (vnet_rss.c, 5.1.6.5.7.1) against the same device offering it.
    ("rss: the Toeplitz window takes the wrong key byte", RSS,
     "(uint32_t)(key[i + 4] >> b & 1)", "(uint32_t)(key[i + 3] >> b & 1)", [POLL]),
    ("rss: every table entry names receiveq1", RSS,
     "rss.table[i] = (uint16_t)(i % vn->pairs);", "rss.table[i] = 0;", [POLL]),
    ("rss: RSS_CONFIG's max_tx_vq is 1", RSS,
     "p = put16(p, (uint16_t)rss.pairs); /* max_tx_vq */", "p = put16(p, 1);", [POLL]),
    ("rss: a key shorter than 40 bytes is taken", RSS,
     "key_max < VNET_RSS_KEY_LEN ||", "key_max < 1 ||", [POLL]),
    ("rss: the flow's ports go in swapped", RSS,
     "in[8] = (uint8_t)(sport >> 8);\n\tin[9] = (uint8_t)sport;\n\tin[10] = (uint8_t)(dport >> 8);\n\tin[11] = (uint8_t)dport;",
     "in[8] = (uint8_t)(dport >> 8);\n\tin[9] = (uint8_t)dport;\n\tin[10] = (uint8_t)(sport >> 8);\n\tin[11] = (uint8_t)sport;",
     [POLL]),
    # Issue 39: the receivers' check hashes by a look-up table built from
    # the key at bring-up (test_rss_lookup against the bitwise hash and
    # the published vectors; frames of each kind).
    ("rss: the look-up table's one-bit entries take the byte's bits in reverse", RSS,
     "in[i] = (uint8_t)(1u << b);", "in[i] = (uint8_t)(0x80u >> b);", [POLL]),
    ("rss: a look-up entry leaves out its lowest set bit", RSS,
     "rss.lut[i][v] = rss.lut[i][low] ^ rss.lut[i][v ^ low];", "rss.lut[i][v] = rss.lut[i][v ^ low];", [POLL]),
    ("rss: a received frame's ports read 20 bytes in, whatever its IP header length", RSS,
     "memcpy(in + 8, ip + ihl, 4);", "memcpy(in + 8, ip + 20, 4);", [POLL]),
    ("rss: a fragment is hashed as if it carried ports", RSS,
     "(ip[6] & 0x3f) || ip[7] || ihl < 20", "ihl < 20", [POLL]),
    # Issue 40: QEMU 7.2's software RSS parks a frame for a full receiveq on
    # the queue it arrived on; only that queue's doorbell flushes it.
    ("rss: peer kick: an RX kick rings no other receiveq", RSS,
     "virtq_doorbell_foreign(&p->rxq);\n\t\tvn->rx.peer_kicks++;", "vn->rx.peer_kicks++;", [POLL, PACKED]),
    ("rss: peer kick: an RX kick rings its own receiveq again, not the others", RSS,
     "virtq_doorbell_foreign(&p->rxq);", "virtq_doorbell_foreign(&vn->rxq);", [POLL]),
    ("rss: peer kick: rings without RSS too", RSS,
     "if (!rss.on || !peer_kick || vn->pairs < 2 ||", "if (!peer_kick || vn->pairs < 2 ||", [POLL]),
    ("rss: peer kick: rss.peer_kick=0 is ignored", RSS,
     "if (!rss.on || !peer_kick || vn->pairs < 2 ||", "if (!rss.on || vn->pairs < 2 ||", [POLL]),
    ("rx: peer kick: the refill's kick does not ring the peers", RX,
     "\t\tvirtq_notify(&vn->rxq);\n\t\tvnet_rss_kick_peers(vn);", "\t\tvirtq_notify(&vn->rxq);", [POLL]),
    # Caught as a hang (TIMEOUT): one binary only.
    ("mq: the wait for the control queue's ack is unbounded", MQ,
     "if (clock_ns() - t0 > CTRL_WAIT_NS) {", "if (clock_ns() - t0 > CTRL_WAIT_NS && 0) {",
     [POLL]),
    # Issue 26: an MSI-X vector per queue, aimed at the CPU that polls its
    # pair (drivers/virtio/virtio_irq.c's layout, virtio_pci.c's
    # queue_msix_vector, vnet.c's plan and per-pair counters).
    ("msix: every pair's queues aimed at CPU 0", "drivers/virtio/vnet.c",
     "plan.dest[q] = smp_apic_id(q / 2);", "plan.dest[q] = smp_apic_id(0);", [HALT]),
    ("msix: queue q's entry aimed at the config CPU", IRQ,
     "l->entry_dest[1 + q] = p->dest[q];", "l->entry_dest[1 + q] = p->cfg_dest;", ["virtio_pci"]),
    ("msix: a short table puts two CPUs' queues on one entry", IRQ,
     'if (virtio_irq_single_line(p, "a single MSI-X entry", err, errlen) == 0) {', "if (1) {",
     ["virtio_pci"]),
    ("msix: queue_msix_vector not read back (a NO_VECTOR refusal goes unseen)", "drivers/virtio/virtio_pci.c",
     "if (mmio_read16(virtio_pci_common(vp, VIRTIO_PCI_COMMON_Q_MSIX)) != want) {", "if (0) {",
     ["virtio_pci"]),
    ("msix: the control queue gets a vector, not NO_VECTOR", "drivers/virtio/virtio_pci.c",
     "uint16_t want = qidx < vp->msix_queues ?", "uint16_t want = qidx <= vp->msix_queues ?",
     ["virtio_pci"]),
    ("msix: virtio-mmio's one line taken for queues on two CPUs", "drivers/virtio/virtio_mmio.c",
     "if (virtio_irq_single_line(plan, \"virtio-mmio's one", "if (0 && virtio_irq_single_line(plan, \"virtio-mmio's one",
     ["virtio_mmio"]),
    ("msix: every pair reports pair 0's RX interrupts", "drivers/virtio/vnet.c",
     "rx->irqs = virtio_dev_irqs(&vn->vd)[vnet_irq_slot(vn, VNET_RXQ)];",
     "rx->irqs = virtio_dev_irqs(&vn->vd)[1 + VNET_RXQ];", [HALT]),
    ("msix: every pair reports the config interrupts", "drivers/virtio/vnet_idle.c",
     "s->irq_cfg = vn->qp == 0 ? virtio_dev_irqs(&vn->vd)[0] : 0;",
     "s->irq_cfg = virtio_dev_irqs(&vn->vd)[0];", [HALT]),
    # Issue 36 item 3: the RX path against QEMU 7.2's receive side
    # (test_rx_contract): a parked device is woken only by a kick.
    ("rx: low-water refill (fewer than a batch free) without its kick decision", RX,
     "\t\tvnet_rx_refill(vn, true);\n}\n\n/* A frame header",
     "\t\tvnet_rx_refill(vn, vn->rx_nfree >= VNET_RX_REFILL_BATCH);\n}\n\n/* A frame header", RXC),
    ("rx: vnet_rx_poll refills without kicking", RX,
     "\t\tvnet_rx_refill(vn, true);\n}\n\n/* A frame header",
     "\t\tvnet_rx_refill(vn, false);\n}\n\n/* A frame header", RXC),
    ("rx: no low-water refill (free buffers kept from a parked device)", RX,
     "(vn->rx_nfree && virtq_chains_in_flight(&vn->rxq) < VNET_RX_REFILL_BATCH)", "(0)", RXC),
    ("rx: forwarded buffers home from reclaim re-posted without a kick", RX,
     "\tvn->rx_in_tx--;\n\tvnet_rx_recycle(vn, (uint16_t)i);\n\tif (vn->rx_nfree >= VNET_RX_REFILL_BATCH)\n\t\tvnet_rx_refill(vn, true);",
     "\tvn->rx_in_tx--;\n\tvnet_rx_recycle(vn, (uint16_t)i);\n\tif (vn->rx_nfree >= VNET_RX_REFILL_BATCH)\n\t\tvnet_rx_refill(vn, false);", RXC),
    ("rx: a release's batch re-posted without a kick", RX,
     "\t\tvnet_rx_refill(vn, true);\n}\n\nint vnet_rx_held_index",
     "\t\tvnet_rx_refill(vn, false);\n}\n\nint vnet_rx_held_index", RXC),
    ("rx: kick decided before the refill is published (old index taken after it)", RX,
     "\tvirtq_publish(&vn->rxq);\n\tif (kick && virtq_kick_prepare(&vn->rxq)) {\n\t\tvirtq_notify(&vn->rxq);\n"
     "\t\tvnet_rss_kick_peers(vn);\n\t}",
     "\tif (kick && virtq_kick_prepare(&vn->rxq)) {\n\t\tvirtq_notify(&vn->rxq);\n\t\tvnet_rss_kick_peers(vn);\n\t}\n"
     "\tvirtq_publish(&vn->rxq);", RXC),
    # The same edit as the first barrier B mutant above (virtq catches it),
    # through the RX path: a parked device that read avail->idx before the
    # refill's store drained. (The re-read after the register read is not
    # covered here: the model's device answers are never read stale.)
    ("rx (TCG): a refill's suppression trusted without the register read", "drivers/virtio/virtq.c",
     "\tif (!need && vq->sync) {", "\tif (0 && vq->sync) {", RXC[:1]),
    # apps/lib/result.c: one CPU per RESULT line (the builders of two CPUs
    # must never interleave in one line's state).
    ("result: a begin takes over a line another CPU holds (two builders interleave)", "apps/lib/result.c",
     "\tif (!__sync_bool_compare_and_swap(&result_line.cpu, 0, me)) {",
     "\tif ((result_line.cpu = me) == 0) {", ["result"]),
    ("result: a field from a CPU that does not hold the line is accepted", "apps/lib/result.c",
     "\tif (cpu == me)\n\t\treturn;\n\tif (cpu)\n", "\tif (cpu == me || cpu)\n\t\treturn;\n\tif (cpu)\n",
     ["result"]),
    ("result: result_end keeps the line (the next CPU's begin is refused)", "apps/lib/result.c",
     "\t__atomic_store_n(&result_line.cpu, 0, __ATOMIC_RELEASE);\n", "", ["result"]),
]


def binary_path(build, b):
    if b.startswith("offload:"):
        return os.path.join(build, "unit", b[8:], "test_offload")
    if b.startswith("rxc:"):
        return os.path.join(build, "unit", b[4:], "test_rx_contract")
    if b in ("virtq", "virtq_packed", "virtio_pci", "virtio_mmio", "virtio_mmio_packed", "pci", "paging", "inst_table",
             "result", "trap"):
        return os.path.join(build, "unit", "test_" + b)
    return os.path.join(build, "unit", b, "test_vnet")


def build_and_run(tree, binaries):
    """Build and run the binaries in tree; return (failed names, detail)."""
    build = os.path.join(tree, "build")
    targets = [binary_path(build, b) for b in binaries]
    # No sanitizers: quicker, and every mutant here is caught by a check.
    r = subprocess.run(["make", "-s", "-j2", f"O={build}", "UNIT_SAN="] + targets, cwd=tree,
                       capture_output=True, text=True, timeout=600)
    if r.returncode:
        return None, "does not build: " + (r.stdout + r.stderr).strip().splitlines()[-1]
    failed, detail = [], ""
    for b, t in zip(binaries, targets):
        try:
            # errors="replace": a mutant may print bytes that are not UTF-8.
            p = subprocess.run([t], capture_output=True, text=True, errors="replace", timeout=TIMEOUT)
            rc, out = p.returncode, p.stdout + p.stderr
        except subprocess.TimeoutExpired:
            rc, out = 124, "hung"
        if rc:
            failed.append(b)
            first = next((l for l in out.splitlines() if l.startswith("FAIL ") or "ERROR" in l
                          or "runtime error" in l), out.strip().splitlines()[-1] if out.strip() else "")
            detail = detail or f"{b}: {first.strip()}"
    return failed, detail


def try_mutant(tree, mutant):
    """Apply one mutant in tree, build and run its binaries, put the source
    back; return (caught, the line to print)."""
    name, path, find, repl, binaries = mutant
    src = os.path.join(tree, path)
    orig = open(src).read()
    n = orig.count(find)
    if n != 1:
        return False, f"mutant NOT APPLIED {name}: expected the text once in {path}, found it {n} times"
    open(src, "w").write(orig.replace(find, repl))
    try:
        failed, detail = build_and_run(tree, binaries)
    finally:
        open(src, "w").write(orig)
        os.utime(src)
    if failed is None:
        # A mutant that does not compile proves nothing.
        return False, f"mutant BROKEN  {name}: {detail}"
    if failed:
        return True, f"mutant caught  {name}: {detail}"
    return False, f"mutant MISSED  {name}: {', '.join(binaries)} still pass"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-k", default="", help="only mutants whose name contains this")
    ap.add_argument("-j", type=int, default=WORKERS, help=f"scratch trees at work at once (default {WORKERS})")
    a = ap.parse_args()
    mutants = [m for m in MUTANTS if a.k in m[0]]
    if not mutants:
        print(f"mutants: none match {a.k!r}")
        return 1
    if a.j < 1:
        print(f"mutants: -j {a.j}: expected at least 1")
        return 1
    files = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "Makefile", "mk", "drivers", "kernel", "tests/unit",
                            "net/port", "net/inst.h", "net/inst_table.c", "net/net.h", "apps/lib", "boot/efi/efi.mk"],
                           cwd=TOP, capture_output=True, text=True, check=True).stdout.split()
    caught = missed = 0
    with tempfile.TemporaryDirectory(prefix="vnetlab-mutants-") as tmp:
        tree = os.path.join(tmp, "tree0")
        for f in files:
            os.makedirs(os.path.join(tree, os.path.dirname(f)), exist_ok=True)
            shutil.copy2(os.path.join(TOP, f), os.path.join(tree, f))
        everything = sorted({b for m in mutants for b in m[4]})
        failed, detail = build_and_run(tree, everything)
        if failed is None or failed:
            print(f"mutants: the unmutated tree fails {failed}: {detail}")
            return 1
        print(f"mutants: unmutated tree passes {len(everything)} binaries")
        # The other trees are copies of the built one, times kept, so make
        # rebuilds in each only what a mutant touches (O= is per tree).
        trees = queue.Queue()
        trees.put(tree)
        for i in range(1, min(a.j, len(mutants))):
            other = os.path.join(tmp, f"tree{i}")
            subprocess.run(["cp", "-a", tree, other], check=True)
            trees.put(other)

        def work(m):
            t = trees.get()
            try:
                return try_mutant(t, m)
            finally:
                trees.put(t)

        with concurrent.futures.ThreadPoolExecutor(max_workers=trees.qsize()) as pool:
            for ok, line in pool.map(work, mutants):
                print(line, flush=True)
                caught += ok
                missed += not ok
    print(f"mutants: {caught} caught, {missed} missed")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
