/* SPDX-License-Identifier: MIT */
/*
 * ptr_ring_prebatch.h - ringlab's ptr_ring, 2016 generation (v4.8 era):
 * a single consumer index, and every consume NULLs its slot at once.
 * Implemented from the published description, kernel names kept.
 *
 * Protocol: NULL slot = empty; full <=> queue[producer] != NULL;
 * empty <=> queue[consumer] == NULL.  No shared count.
 * Invariant: 0 <= producer, consumer < size; wrap by compare-and-reset.
 *
 * Known weakness (what batch zeroing fixed, seed 003): on an almost-full
 * ring the consumer's NULL store goes to the very slot the producer polls
 * next, so both CPUs keep writing the same cache line.
 *
 * Memory ordering:
 *   [P1] release of the slot in __ptr_ring_produce (rlr_slot_publish); pairs with [C1].
 *        (The 4.9-era header had a plain store and no smp_wmb here; the
 *        barrier came later.  C11 needs at least release to be race-free,
 *        and on x86 it compiles to the same plain mov.)
 *   [C1] load of queue[consumer] in __ptr_ring_peek with RLR_PEEK_ORDER
 *        (relaxed = READ_ONCE, address dependency; see ring_common.h);
 *        pairs with [P1].
 *   [C2] relaxed NULL store on consume; observed by the producer's relaxed
 *        load [P0] (control dependency, as in the kernel).
 *   consumer is written by the consumer only, with a relaxed store so that
 *   a lockless __ptr_ring_empty elsewhere reads a valid index.
 *
 * Layout: {producer, producer_lock} {consumer, consumer_lock}
 * {size, queue}, each on its own 64-byte line; no batch field.
 */
#ifndef RINGLAB_PTR_RING_PREBATCH_H
#define RINGLAB_PTR_RING_PREBATCH_H

#include "ring_common.h"

#define RINGLAB_RING_NAME "prebatch"
/* No batch field: NULLing is per entry, i.e. an effective batch of 1. */
#define RINGLAB_RING_BATCH(r) ((void)(r), 1)

struct ptr_ring {
	int producer rlr_cacheline_aligned;
	pthread_spinlock_t producer_lock;
	int consumer rlr_cacheline_aligned;
	pthread_spinlock_t consumer_lock;
	int size rlr_cacheline_aligned;
	void **queue;
};

static inline int __ptr_ring_full(struct ptr_ring *r)	/* [P0] producer only */
{
	return rlr_slot_busy(&r->queue[r->producer]);
}

static inline int __ptr_ring_produce(struct ptr_ring *r, void *ptr)
{
	if (unlikely(!r->size) || rlr_slot_busy(&r->queue[r->producer]))	/* [P0] */
		return -ENOSPC;
	rlr_slot_publish(&r->queue[r->producer++], ptr);	/* [P1] */
	if (unlikely(r->producer >= r->size))
		r->producer = 0;
	return 0;
}

static inline void *__ptr_ring_peek(struct ptr_ring *r)
{
	if (likely(r->size))	/* [C1] */
		return __atomic_load_n(&r->queue[r->consumer], RLR_PEEK_ORDER);
	return NULL;
}

/* In 2016 this was simply !peek. */
static inline int __ptr_ring_empty(struct ptr_ring *r)
{
	if (likely(r->size))
		return !__atomic_load_n(&r->queue[__atomic_load_n(&r->consumer,
								  __ATOMIC_RELAXED)],
					__ATOMIC_RELAXED);
	return 1;
}

static inline void __ptr_ring_discard_one(struct ptr_ring *r)
{
	int consumer = r->consumer;

	__atomic_store_n(&r->queue[consumer++], NULL, __ATOMIC_RELAXED);	/* [C2] */
	if (unlikely(consumer >= r->size))
		consumer = 0;
	__atomic_store_n(&r->consumer, consumer, __ATOMIC_RELAXED);
}

static inline void *__ptr_ring_consume(struct ptr_ring *r)
{
	void *ptr = __ptr_ring_peek(r);

	if (ptr)
		__ptr_ring_discard_one(r);
	return ptr;
}

static inline int ptr_ring_init(struct ptr_ring *r, int size, int gfp)
{
	(void)gfp;
	if (size < 0 || size > RLR_MAX_SLOTS)
		return -ENOMEM;
	r->queue = size ? rlr_alloc_slots((size_t)size) : NULL;
	if (size && !r->queue)
		return -ENOMEM;
	r->size = size;
	r->producer = r->consumer = 0;
	pthread_spin_init(&r->producer_lock, PTHREAD_PROCESS_PRIVATE);
	pthread_spin_init(&r->consumer_lock, PTHREAD_PROCESS_PRIVATE);
	return 0;
}

#include "ring_locked.h"

#endif /* RINGLAB_PTR_RING_PREBATCH_H */
