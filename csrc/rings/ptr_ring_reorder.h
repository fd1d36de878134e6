/* SPDX-License-Identifier: MIT */
/*
 * ptr_ring_reorder.h - ringlab's ptr_ring, 2021 proposal (Yunsheng Lin,
 * "ptr_ring: move r->queue[] clearing after r->consumer_head updating",
 * v2 and v3 patch 2/3, "opt1"; never merged).  Same as ptr_ring_batch.h
 * except __ptr_ring_discard_one, which PUBLISHES consumer_head/consumer_tail
 * FIRST and NULLs the consumed slots AFTERWARDS.  Implemented from the
 * published description; kernel names kept.  The v3 3/3 extra barriers
 * (store-release of a wrapped head, smp_wmb after the end-of-array NULLs)
 * are not included: this is the variant the +4..10% claim was about.
 *
 * Protocol, invariants and layout: as ptr_ring_batch.h.  Between calls:
 *   0 <= consumer_tail <= consumer_head < size, and the slots
 *   [consumer_tail, consumer_head) are consumed but not yet NULL.
 *   During a flush the indices already point past slots that are NULLed a
 *   moment later; only the consumer reads those slots, after the flush.
 *
 * Why the order matters:
 *   - Mainline NULLs first, so a lockless __ptr_ring_empty() on another CPU
 *     can read the NULLed old head before consumer_head moves and report
 *     "empty" although entries are queued.  Publishing first closes that
 *     window (MST: it "shifts races around"; __ptr_ring_empty stays
 *     documented as unreliable while another CPU consumes).
 *   - The end-of-array test folds into the rare flush branch, so the common
 *     path has one compare fewer: the claimed source of the speed-up.
 *
 * Everything but __ptr_ring_discard_one comes from ptr_ring_batch.h (one
 * struct, one producer side, one peek/empty/init), so this file is the patch.
 *
 * Memory ordering: [P0] [P1] [C1] [C4] as in ptr_ring_batch.h.
 *   [C3'] consumer_head is published with a relaxed store (WRITE_ONCE)
 *         BEFORE the NULLs [C2]; pairs with the READ_ONCE in
 *         __ptr_ring_empty.  There is no ordering between [C3'] and [C2]
 *         for other CPUs (v3 3/3 added barriers for that; not here).
 *   [C2]  relaxed NULL stores, seen by the producer's [P0] load.
 */
#ifndef RINGLAB_PTR_RING_REORDER_H
#define RINGLAB_PTR_RING_REORDER_H

#define RINGLAB_RING_NAME "reorder"
#define RINGLAB_PTR_RING_OWN_DISCARD 1

struct ptr_ring;
static inline void __ptr_ring_discard_one(struct ptr_ring *r);

#include "ptr_ring_batch.h"

/* Only after __ptr_ring_peek returned non-NULL. */
static inline void __ptr_ring_discard_one(struct ptr_ring *r)
{
	int consumer_head = r->consumer_head + 1;

	/* Rare path: a flush is due (batch reached or end of array).  The
	 * wrap test lives only here, off the common path. */
	if (unlikely(consumer_head - r->consumer_tail >= r->batch ||
		     consumer_head >= r->size)) {
		int tail = r->consumer_tail;
		int head = consumer_head - 1;

		/* [C3'] publish first ... */
		if (unlikely(consumer_head >= r->size)) {
			r->consumer_tail = 0;
			__atomic_store_n(&r->consumer_head, 0, __ATOMIC_RELAXED);
		} else {
			r->consumer_tail = consumer_head;
			__atomic_store_n(&r->consumer_head, consumer_head, __ATOMIC_RELAXED);
		}
		/* [C2] ... then NULL, still newest first (see ptr_ring_batch.h
		 * for why reverse order). */
		while (likely(head >= tail))
			__atomic_store_n(&r->queue[head--], NULL, __ATOMIC_RELAXED);
		return;
	}
	/* Common path: consumer_head + 1 < size here, so it stays valid. */
	__atomic_store_n(&r->consumer_head, consumer_head, __ATOMIC_RELAXED);
}

#endif /* RINGLAB_PTR_RING_REORDER_H */
