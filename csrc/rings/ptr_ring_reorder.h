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
 * Memory ordering: [P0] [P1] [C1] [C4] as in ptr_ring_batch.h.
 *   [C3'] consumer_head is published with a relaxed store (WRITE_ONCE)
 *         BEFORE the NULLs [C2]; pairs with the READ_ONCE in
 *         __ptr_ring_empty.  There is no ordering between [C3'] and [C2]
 *         for other CPUs (v3 3/3 added barriers for that; not here).
 *   [C2]  relaxed NULL stores, seen by the producer's [P0] load.
 */
#ifndef RINGLAB_PTR_RING_REORDER_H
#define RINGLAB_PTR_RING_REORDER_H

#include "ring_common.h"

#define RINGLAB_RING_NAME "reorder"
/* The harness may report r->batch. */
#ifndef RINGLAB_GEN_BATCH
#define RINGLAB_GEN_BATCH 1
#endif
/* ringtest's --param: the harness may override batch (-b) through this. */
#define RINGLAB_HAS_SET_BATCH 1

struct ptr_ring {
	int producer rlr_cacheline_aligned;
	pthread_spinlock_t producer_lock;
	int consumer_head rlr_cacheline_aligned;	/* next valid entry */
	int consumer_tail;	/* first consumed entry not yet NULLed */
	pthread_spinlock_t consumer_lock;
	int size rlr_cacheline_aligned;		/* slots, not necessarily 2^n */
	int batch;				/* slots NULLed per flush */
	void **queue;
};

/* [P0] Producer only (caller holds producer_lock or is the single producer).
 * Loops polling this need cpu_relax() or another compiler barrier; the
 * atomic load already is one. */
static inline int __ptr_ring_full(struct ptr_ring *r)
{
	return __atomic_load_n(&r->queue[r->producer], __ATOMIC_RELAXED) != NULL;
}

/* Returns 0, or -ENOSPC when the slot at producer is still in use. */
static inline int __ptr_ring_produce(struct ptr_ring *r, void *ptr)
{
	if (unlikely(!r->size) ||
	    __atomic_load_n(&r->queue[r->producer], __ATOMIC_RELAXED))	/* [P0] */
		return -ENOSPC;

	/* [P1] release: what ptr points to is visible before ptr itself.
	 * Pairs with the acquire in __ptr_ring_peek [C1]. */
	__atomic_store_n(&r->queue[r->producer++], ptr, __ATOMIC_RELEASE);
	if (unlikely(r->producer >= r->size))
		r->producer = 0;
	return 0;
}

/* Consumer only.  NULL when empty. */
static inline void *__ptr_ring_peek(struct ptr_ring *r)
{
	if (likely(r->size))	/* [C1] pairs with [P1] */
		return __atomic_load_n(&r->queue[r->consumer_head], __ATOMIC_ACQUIRE);
	return NULL;
}

/* [C4] See the header comment: reliable only on the consuming CPU (or with
 * the consumer stopped).  READ_ONCE of consumer_head pairs with [C3]. */
static inline int __ptr_ring_empty(struct ptr_ring *r)
{
	if (likely(r->size))
		return !__atomic_load_n(&r->queue[__atomic_load_n(&r->consumer_head,
								  __ATOMIC_RELAXED)],
					__ATOMIC_RELAXED);
	return 1;
}

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

static inline void *__ptr_ring_consume(struct ptr_ring *r)
{
	void *ptr = __ptr_ring_peek(r);

	if (ptr)
		__ptr_ring_discard_one(r);
	return ptr;
}

/* batch = two cache lines of pointers (16 on 64-bit), or 1 when that would
 * leave a small ring more than half empty ("a lot of burstiness"). */
static inline void __ptr_ring_set_size(struct ptr_ring *r, int size)
{
	r->size = size;
	r->batch = RLR_CACHE_BYTES * 2 / (int)sizeof(*r->queue);
	if (r->batch > size / 2 || !r->batch)
		r->batch = 1;
}

/* ringlab only (ringtest's --param "hacky way to poke at ring internals").
 * Not thread-safe: call before the ring is shared.  n >= 1. */
static inline void __ptr_ring_set_batch(struct ptr_ring *r, int n)
{
	r->batch = n > 0 ? n : 1;
}

/* gfp is accepted for API compatibility and ignored.  0 or -ENOMEM. */
static inline int ptr_ring_init(struct ptr_ring *r, int size, int gfp)
{
	(void)gfp;
	if (size < 0 || size > RLR_MAX_SLOTS)
		return -ENOMEM;
	r->queue = size ? rlr_alloc_slots((size_t)size) : NULL;
	if (size && !r->queue)
		return -ENOMEM;
	__ptr_ring_set_size(r, size);
	r->producer = r->consumer_head = r->consumer_tail = 0;
	pthread_spin_init(&r->producer_lock, PTHREAD_PROCESS_PRIVATE);
	pthread_spin_init(&r->consumer_lock, PTHREAD_PROCESS_PRIVATE);
	return 0;
}

#include "ring_locked.h"

#endif /* RINGLAB_PTR_RING_REORDER_H */
