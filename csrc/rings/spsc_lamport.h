/* SPDX-License-Identifier: MIT */
/*
 * spsc_lamport.h - the peer ring a user would pick instead of ptr_ring:
 * a Lamport single-producer/single-consumer index ring with cached indices
 * (the rigtorp/SPSCQueue and MCRingBuffer idea), written for ringlab in C11
 * atomics and exposed through ptr_ring's kernel names so the same harness
 * drives it.  It gives ptr_ring numbers context; it is not a ptr_ring.
 *
 * Protocol: two free-standing indices instead of slot-as-flag.
 *   producer (write index)  written by the producer, read by the consumer
 *   consumer (read index)   written by the consumer, read by the producer
 *   The ring has size + 1 slots so that `size` entries fit and
 *   producer == consumer means empty, next(producer) == consumer means full.
 *   Each side keeps a private cached copy of the other side's index and
 *   only reloads it (touching the other side's cache line) when the cached
 *   value says full/empty.  The slots themselves carry no state: NULL could
 *   be queued, but the ptr_ring API returns NULL for "empty", so callers
 *   must still not queue NULL.
 *
 * Invariants: 0 <= producer, consumer <= size (slot numbers in [0, size+1)),
 *   wrap by compare-and-reset (no power-of-two requirement).
 *
 * Memory ordering:
 *   [P1] producer: plain store of the slot, then release store of producer.
 *        Pairs with [C1].
 *   [C1] consumer: acquire load of producer when the cache says empty, then
 *        plain load of the slot.
 *   [C2] consumer: release store of consumer after reading the slot, so the
 *        slot is free to overwrite.  Pairs with [P0].
 *   [P0] producer: acquire load of consumer when the cache says full.
 *
 * Layout: each shared index on its own 64-byte line, the cached copy on the
 * line of the side that owns it:
 *   {producer} {consumer_cache, producer_lock}   producer-owned
 *   {consumer} {producer_cache, consumer_lock}   consumer-owned
 *   {size, slots, queue}                          read-mostly
 * (rigtorp also pads the slot array at both ends; our array is a separate
 * 64-byte aligned allocation rounded up to whole lines, which has the same
 * effect for the tail and needs nothing for the head.)
 */
#ifndef RINGLAB_SPSC_LAMPORT_H
#define RINGLAB_SPSC_LAMPORT_H

#include "ring_common.h"

#define RINGLAB_RING_NAME "spsc"
/* No batch: publication is per entry through the index. */

struct ptr_ring {
	int producer rlr_cacheline_aligned;		/* next slot to write */
	int consumer_cache rlr_cacheline_aligned;	/* producer's copy of consumer */
	pthread_spinlock_t producer_lock;
	int consumer rlr_cacheline_aligned;		/* next slot to read */
	int producer_cache rlr_cacheline_aligned;	/* consumer's copy of producer */
	pthread_spinlock_t consumer_lock;
	int size rlr_cacheline_aligned;			/* capacity in entries */
	int slots;					/* size + 1 */
	void **queue;
};

static inline int rlr_spsc_next(const struct ptr_ring *r, int i)
{
	return ++i >= r->slots ? 0 : i;
}

/* Producer only. */
static inline int __ptr_ring_full(struct ptr_ring *r)
{
	int next = rlr_spsc_next(r, r->producer);

	if (next == r->consumer_cache) {
		r->consumer_cache = __atomic_load_n(&r->consumer, __ATOMIC_ACQUIRE);	/* [P0] */
		return next == r->consumer_cache;
	}
	return 0;
}

static inline int __ptr_ring_produce(struct ptr_ring *r, void *ptr)
{
	int p = r->producer;
	int next = rlr_spsc_next(r, p);

	if (unlikely(!r->size))
		return -ENOSPC;
	if (unlikely(next == r->consumer_cache)) {
		r->consumer_cache = __atomic_load_n(&r->consumer, __ATOMIC_ACQUIRE);	/* [P0] */
		if (next == r->consumer_cache)
			return -ENOSPC;
	}
	r->queue[p] = ptr;
	__atomic_store_n(&r->producer, next, __ATOMIC_RELEASE);	/* [P1] */
	return 0;
}

/* Consumer only. */
static inline int __ptr_ring_empty(struct ptr_ring *r)
{
	int c = r->consumer;

	if (c == r->producer_cache) {
		r->producer_cache = __atomic_load_n(&r->producer, __ATOMIC_ACQUIRE);	/* [C1] */
		return c == r->producer_cache;
	}
	return 0;
}

static inline void *__ptr_ring_peek(struct ptr_ring *r)
{
	if (unlikely(!r->size) || __ptr_ring_empty(r))
		return NULL;
	return r->queue[r->consumer];
}

static inline void *__ptr_ring_consume(struct ptr_ring *r)
{
	void *ptr = __ptr_ring_peek(r);

	if (ptr)	/* [C2] slot read before it is handed back */
		__atomic_store_n(&r->consumer, rlr_spsc_next(r, r->consumer), __ATOMIC_RELEASE);
	return ptr;
}

static inline int ptr_ring_init(struct ptr_ring *r, int size, int gfp)
{
	(void)gfp;
	if (size < 0 || size >= RLR_MAX_SLOTS)
		return -ENOMEM;
	r->queue = size ? rlr_alloc_slots((size_t)size + 1) : NULL;
	if (size && !r->queue)
		return -ENOMEM;
	r->size = size;
	r->slots = size + 1;
	r->producer = r->consumer = r->consumer_cache = r->producer_cache = 0;
	pthread_spin_init(&r->producer_lock, PTHREAD_PROCESS_PRIVATE);
	pthread_spin_init(&r->consumer_lock, PTHREAD_PROCESS_PRIVATE);
	return 0;
}

#include "ring_locked.h"

#endif /* RINGLAB_SPSC_LAMPORT_H */
