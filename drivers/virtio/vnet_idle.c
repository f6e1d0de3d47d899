/*
 * vnet_idle.c: what the main loop does when a pass found nothing to do
 * (vnet_policy.h VNET_IDLE, VNET_RELAX_PAUSE).
 *
 * A pass "did work" when the driver's own counters moved: a frame received
 * or sent, or a TX completion taken back. The halt policies then go to
 * sleep in four steps, in this order:
 *   1. nothing may stay unkicked or unreclaimed while we wait
 *      (vnet_before_wait(), vnet_tx_reclaim_before_halt());
 *   2. re-arm used-buffer notifications on RX (always) and on TX (only
 *      when the ring is nearly full: a sender waits for room), re-checking
 *      each ring after arming (virtq_enable_cb(), barrier D): a completion
 *      that slipped in means "do not halt";
 *   3. halt until an interrupt or the earliest of the caller's deadline,
 *      VNET_IDLE_HALT_MAX_US, (TX frames still in flight) the TX
 *      liveness bound VNET_TX_IDLE_RECLAIM_US, and (kick=timer) the end
 *      of the kick hold;
 *   4. suppress notifications again: the next passes poll.
 * Notifications are re-armed only in step 2, never while polling, so a
 * busy guest takes no interrupts at all.
 */
#include <stdio.h>
#include <string.h>
#include "kernel/arch.h"
#include "kernel/kernel.h"
#include "drivers/virtio/vnet_priv.h"

const char *vnet_idle_policy(void)
{
	static char buf[64];

	if (VNET_IS_IDLE_ADAPTIVE)
		snprintf(buf, sizeof(buf), "adaptive:%dus", VNET_IDLE_POLL_US);
	else
		snprintf(buf, sizeof(buf), "%s", VNET_IS_IDLE_POLL ? "poll" : "halt");
	if (VNET_RX_COALESCE > 1)
		snprintf(buf + strlen(buf), sizeof(buf) - strlen(buf), ",rx_coalesce=%d:%dus",
		         VNET_RX_COALESCE, VNET_RX_COALESCE_US);
	if (VNET_RELAX_PAUSE)
		snprintf(buf + strlen(buf), sizeof(buf) - strlen(buf), ",relax=pause");
	return buf;
}

static void vnet_idle_relax(void)
{
	if (VNET_RELAX_PAUSE)
		cpu_relax();
}

/* A sender blocked on a full ring needs the TX completion to go on. */
static bool vnet_idle_tx_waits(const struct vnet *vn)
{
	return virtq_num_free(&vn->txq) < VNET_TX_MAX_SEGS + 2;
}

/* The interrupts that can end this pair's halt: its own queues', and on
 * pair 0 (which owns the device-wide ones) config and the rest. Another
 * pair's interrupts reach another CPU. */
static uint64_t vnet_idle_irqs(const struct vnet *vn)
{
	const volatile uint64_t *irqs = virtio_dev_irqs(&vn->vd);
	uint64_t n = irqs[vnet_irq_slot(vn, VNET_RXQ)] + irqs[vnet_irq_slot(vn, VNET_TXQ)];

	if (vn->qp == 0)
		n += irqs[0] + irqs[VIRTIO_PCI_IRQ_QUEUES + 1];
	return n;
}

/* Long enough for an interrupt the device has decided to send but not yet
 * delivered (QEMU's I/O thread between its used-ring write and the MSI),
 * short enough to cost nothing that matters in the rare case it is lost. */
#define VNET_IDLE_LATE_IRQ_US 2000

/* Let latched interrupts in until one more has come or the grace time is
 * over (bounded in passes too: the host unit-test clock may stand still). */
static bool vnet_idle_irq_arrives(const struct vnet *vn, uint64_t irqs)
{
	uint64_t t0 = clock_ns();

	for (unsigned i = 0; i < 100000; i++) {
		halt_let_pending_in();
		if (vnet_idle_irqs(vn) != irqs)
			return true;
		if (clock_ns() - t0 >= VNET_IDLE_LATE_IRQ_US * 1000ull)
			break;
	}
	return false;
}

/* RX_COALESCE: how many used RX entries the next halt waits for. */
static uint16_t vnet_idle_rx_k(struct vnet *vn)
{
	uint16_t k = vn->idle.coal_k;
	uint16_t cap = (uint16_t)(virtq_chains_published(&vn->rxq) / 2);

	if (VNET_RX_COALESCE == 1 || !vn->rxq.event_idx)
		return 1;
	/* Waiting for more than half of what is posted could starve the
	 * device (and the TCP sender behind it) until the bound. */
	if (k > cap)
		k = cap ? cap : 1;
	return k;
}

/* After a wait for k entries found `got` waiting: grow k while wake-ups
 * cannot keep up, shrink it to the arrival count when the bound ended the
 * wait first. */
static void vnet_idle_rx_adapt(struct vnet *vn, uint16_t k, uint16_t got, bool bound_hit)
{
	uint16_t next = k;

	/* (k stays 1 where vnet_idle_rx_k() says so: it is the one gate.) */
	if (bound_hit && got < k)
		next = got ? got : 1;
	else if (got >= 2u * k)
		next = (uint16_t)(2u * k > VNET_RX_COALESCE ? VNET_RX_COALESCE : 2u * k);
	vn->idle.coal_k = next;
}

struct vnet_idle_armed {
	struct vnet *vn;
	uint16_t rx_k;
	bool tx_arm;
};

/* Step 2's re-check, once more for halt_until_idle(): work that arrived
 * after the re-arm, whose interrupt may not come (kernel/halt.c). */
static bool vnet_idle_busy(void *arg)
{
	struct vnet_idle_armed *a = arg;

	if (virtq_used_count(&a->vn->rxq) >= a->rx_k ||
	    (a->tx_arm && virtq_used_count(&a->vn->txq)) || virtio_dev_config_changed(&a->vn->vd)) {
		a->vn->idle.arm_races++;
		return true;
	}
	return false;
}

static void vnet_idle_halt(struct vnet *vn, uint64_t now, vnet_deadline_fn deadline, void *arg)
{
	uint16_t rx_k = vnet_idle_rx_k(vn);
	bool bound_hit = false;
	uint64_t until = now + VNET_IDLE_HALT_MAX_US * 1000ull;
	uint64_t deadline_ns;
	bool tx_arm;

	/* 1. */
	vnet_before_wait(vn);
	vnet_tx_reclaim_before_halt(vn);
	if (vn->failed)
		return;
	deadline_ns = deadline ? deadline(arg) : 0;
	if (deadline_ns && deadline_ns < until)
		until = deadline_ns;
	if (virtq_chains_in_flight(&vn->txq) && now + VNET_TX_IDLE_RECLAIM_US * 1000ull < until)
		until = now + VNET_TX_IDLE_RECLAIM_US * 1000ull;
	/* kick=timer keeps its hold across waits (vnet_tx_before_wait()); the
	 * halt must end when the hold does. */
	if (VNET_IS_KICK_TIMER && vn->tx_holding &&
	    vn->tx_hold_since + VNET_KICK_TIMER_US * 1000ull < until)
		until = vn->tx_hold_since + VNET_KICK_TIMER_US * 1000ull;
	/* RX_COALESCE: waiting for k > 1 entries delays the first by at most
	 * the bound. */
	if (rx_k > 1 && now + VNET_RX_COALESCE_US * 1000ull < until) {
		until = now + VNET_RX_COALESCE_US * 1000ull;
		bound_hit = true; /* if the timer is what ends this halt */
	}
	/* 2. */
	tx_arm = vnet_idle_tx_waits(vn);
	if (virtq_enable_cb_after(&vn->rxq, rx_k) || (tx_arm && virtq_enable_cb(&vn->txq)) ||
	    virtio_dev_config_changed(&vn->vd)) {
		vn->idle.arm_races++;
		bound_hit = false;
	} else {
		/* 3. */
		uint64_t timer = halt_stats()->timer_wakes, halts = halt_stats()->halts;
		uint64_t irqs = vnet_idle_irqs(vn);
		struct vnet_idle_armed armed = {vn, rx_k, tx_arm};

		vn->idle.halted_ns += halt_until_idle(until, vnet_idle_busy, &armed);
		vn->idle.halts += halt_stats()->halts - halts; /* 0 if the deadline had passed */
		if (rx_k > 1)
			vn->idle.coal_halts++;
		if (halt_stats()->timer_wakes == timer) {
			bound_hit = false;
		} else {
			vn->idle.timer_wakes++;
			if (bound_hit && virtq_used_count(&vn->rxq) < rx_k)
				vn->idle.coal_timeouts++;
			/* The timer ended the halt, no device interrupt came, yet
			 * a frame is waiting: its interrupt was lost, or is still
			 * on its way (the device has written the used ring but
			 * not yet raised the interrupt: a host thread preempted
			 * in between). Give it VNET_IDLE_LATE_IRQ_US to arrive. */
			if (vnet_idle_irqs(vn) == irqs && virtq_used_count(&vn->rxq) >= rx_k &&
			    !vnet_idle_irq_arrives(vn, irqs))
				vn->idle.lost_wakeups++;
		}
	}
	/* 4. */
	vnet_idle_rx_adapt(vn, rx_k, virtq_used_count(&vn->rxq), bound_hit);
	virtq_disable_cb(&vn->rxq);
	if (tx_arm)
		virtq_disable_cb(&vn->txq);
}

void vnet_idle(struct vnet *vn, vnet_deadline_fn deadline, void *arg)
{
	uint64_t sig = vn->rx.frames + vn->tx.frames + vn->tx.reclaimed + vn->tx.idle_reclaimed +
	               vn->tx.rx_reclaimed;
	uint64_t now;

	vn->idle.polls++;
	if (sig != vn->idle_sig) {
		vn->idle_sig = sig;
		if (VNET_IS_IDLE_ADAPTIVE)
			vn->idle_last_work = clock_ns();
		return;
	}
	vn->idle.idle_polls++;
	if (VNET_IS_IDLE_POLL || vn->failed) {
		vnet_idle_relax();
		return;
	}
	now = clock_ns();
	if (VNET_IS_IDLE_ADAPTIVE && now - vn->idle_last_work < VNET_IDLE_POLL_US * 1000ull) {
		vnet_idle_relax();
		return;
	}
	vnet_idle_halt(vn, now, deadline, arg);
}

void vnet_idle_counters(const struct vnet *vn, struct vnet_idle_stats *s)
{
	*s = vn->idle;
	s->dev_syncs = vn->rxq.stats.syncs + vn->txq.stats.syncs;
	/* Pair k's own: config and the transport's "nothing to say" count
	 * are pair 0's (it owns the device), unexpected and spurious ones
	 * CPU k's, the CPU that polls pair k. */
	s->irq_cfg = vn->qp == 0 ? virtio_dev_irqs(&vn->vd)[0] : 0;
	s->irq_other = vn->qp == 0 ? virtio_dev_irqs(&vn->vd)[VIRTIO_PCI_IRQ_QUEUES + 1] : 0;
	if (!VNET_IS_IDLE_POLL)
		s->irq_other += irq_unexpected(vn->qp) + irq_spurious(vn->qp);
}

void vnet_idle_print(const struct vnet *vn)
{
	struct vnet_idle_stats s;

	vnet_idle_counters(vn, &s);
	printf("IDLE {\"policy\":\"%s\",\"irq_mode\":\"%s\",\"polls\":%llu,\"idle_polls\":%llu,"
	       "\"halts\":%llu,\"halted_us\":%llu,\"timer_wakes\":%llu,\"lost_wakeups\":%llu,"
	       "\"arm_races\":%llu,\"dev_syncs\":%llu,\"coal_halts\":%llu,\"coal_timeouts\":%llu,"
	       "\"coal_k\":%u,"
	       "\"irqs_rx\":%llu,\"irqs_tx\":%llu,\"irqs_cfg\":%llu,\"irqs_other\":%llu,"
	       "\"queue\":%u}\n",
	       vnet_idle_policy(), vnet_irq_mode(vn), (unsigned long long)s.polls,
	       (unsigned long long)s.idle_polls, (unsigned long long)s.halts,
	       (unsigned long long)(s.halted_ns / 1000), (unsigned long long)s.timer_wakes,
	       (unsigned long long)s.lost_wakeups, (unsigned long long)s.arm_races,
	       (unsigned long long)s.dev_syncs, (unsigned long long)s.coal_halts,
	       (unsigned long long)s.coal_timeouts, (unsigned)s.coal_k,
	       (unsigned long long)virtio_dev_irqs(&vn->vd)[vnet_irq_slot(vn, VNET_RXQ)],
	       (unsigned long long)virtio_dev_irqs(&vn->vd)[vnet_irq_slot(vn, VNET_TXQ)],
	       (unsigned long long)s.irq_cfg, (unsigned long long)s.irq_other, vn->qp);
}
