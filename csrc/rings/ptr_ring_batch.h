/* SPDX-License-Identifier: MIT */
/*
 * ptr_ring_batch.h - ringlab's ptr_ring, 2017 mainline generation
 * ("ptr_ring: batch ring zeroing"): consumer_head/consumer_tail and batched,
 * reverse-order NULLing.  Implemented from the published description, with
 * the kernel's names so it reads side by side with include/linux/ptr_ring.h.
 *
 * Protocol (slot-as-flag): a NULL slot is empty, so NULL is never queued.
 *   full  <=> queue[producer]      != NULL   (read by the producer only)
 *   empty <=> queue[consumer_head] == NULL   (read by the consumer side only)
 * There is no shared count: the producer never reads consumer_head/tail and
 * the consumer never reads producer.
 *
 * Invariants (consumer side, between calls):
 *   0 <= consumer_tail <= consumer_head < size
 *   slots [consumer_tail, consumer_head) were consumed but are not NULL yet;
 *   they are NULLed in one flush when consumer_head - consumer_tail reaches
 *   batch, or when consumer_head reaches the end of the array.
 *   Indices are int slot numbers wrapped by compare-and-reset: size need not
 *   be a power of two (the benchmarks use 1000).
 *
 * Memory ordering (C11 mapping of the kernel's barriers):
 *   [P1] __ptr_ring_produce: release fence, then a relaxed store of
 *        queue[producer] (rlr_slot_publish; kernel: smp_wmb();
 *        WRITE_ONCE(slot, ptr)).  Pairs with [C1].
 *   [C1] __ptr_ring_peek: load of queue[consumer_head] with RLR_PEEK_ORDER,
 *        relaxed by default = the kernel's READ_ONCE, whose address
 *        dependency orders the data behind the pointer after it (see
 *        ring_common.h for why not acquire).  Pairs with [P1]: the data
 *        behind the pointer is visible once the pointer is.
 *   [C2] flush: relaxed stores of NULL (kernel: plain stores).  The producer
 *        sees them through its relaxed load in __ptr_ring_full /
 *        __ptr_ring_produce [P0]; the kernel relies on the control
 *        dependency from that load to the following store, and so do we.
 *   [C3] consumer_head is published LAST with a relaxed atomic store
 *        (WRITE_ONCE), after the NULLs and the wrap reset, and is kept valid
 *        (< size) at all times.  Pairs with the READ_ONCE in
 *        __ptr_ring_empty [C4].
 *   [C4] __ptr_ring_empty is lockless-safe only against a ring that is never
 *        resized, and is not reliable while another CPU consumes (the race
 *        the 2021 "reorder" proposal is about): a NULLed old head can be
 *        seen before consumer_head moves.
 *
 * Layout: three 64-byte aligned groups, each owned by one side:
 *   {producer, producer_lock}                        written by the producer
 *   {consumer_head, consumer_tail, consumer_lock}    written by the consumer
 *   {size, batch, queue}                             read-mostly, shared
 * The slot array is a separate zeroed, 64-byte aligned allocation.
 */
#ifndef RINGLAB_PTR_RING_BATCH_H
#define RINGLAB_PTR_RING_BATCH_H

#include "ring_common.h"

#ifndef RINGLAB_RING_NAME
#define RINGLAB_RING_NAME "batch"
#endif
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
static inline int __ptr_ring_full(struct ptr_ring *r)	/* [P0] producer only */
{
	return rlr_slot_busy(&r->queue[r->producer]);
}

/* Returns 0, or -ENOSPC when the slot at producer is still in use. */
static inline int __ptr_ring_produce(struct ptr_ring *r, void *ptr)
{
	if (unlikely(!r->size) || rlr_slot_busy(&r->queue[r->producer]))	/* [P0] */
		return -ENOSPC;

	/* [P1] release: what ptr points to is visible before ptr itself
	 * (kernel: smp_wmb(); WRITE_ONCE; see rlr_slot_publish).  Pairs with
	 * the load in __ptr_ring_peek [C1]. */
	rlr_slot_publish(&r->queue[r->producer++], ptr);
	if (unlikely(r->producer >= r->size))
		r->producer = 0;
	return 0;
}

/* Consumer only.  NULL when empty. */
static inline void *__ptr_ring_peek(struct ptr_ring *r)
{
	if (likely(r->size))	/* [C1] pairs with [P1] */
		return __atomic_load_n(&r->queue[r->consumer_head], RLR_PEEK_ORDER);
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

/*
 * A variant that differs only in how the consumer retires entries (the 2021
 * "reorder" proposal, ptr_ring_reorder.h) defines
 * RINGLAB_PTR_RING_OWN_DISCARD, declares its own __ptr_ring_discard_one and
 * includes this header: everything else is shared, so the two files differ
 * exactly as the patch did.
 */
#ifndef RINGLAB_PTR_RING_OWN_DISCARD
/* Only after __ptr_ring_peek returned non-NULL. */
static inline void __ptr_ring_discard_one(struct ptr_ring *r)
{
	/* Work on a local copy: consumer_head must stay < size at all times
	 * for a lockless __ptr_ring_empty on another CPU. */
	int consumer_head = r->consumer_head;
	int head = consumer_head++;

	/*
	 * Flush once we are batch slots past the tail, or at the end of the
	 * array (which keeps the wrap simple).  NULL in reverse order, newest
	 * consumed slot first: the line the producer may be polling (the
	 * oldest, at consumer_tail) is written last, and the producer cannot
	 * advance into the other lines before all of them are written.  [C2]
	 */
	if (unlikely(consumer_head - r->consumer_tail >= r->batch ||
		     consumer_head >= r->size)) {
		/* consumer_tail is written by this thread only: read it once.
		 * (The kernel's plain NULL stores let gcc keep it in a register;
		 * our relaxed atomic stores would make it reload it on every
		 * slot if we tested r->consumer_tail in the loop.) */
		int tail = r->consumer_tail;

		while (likely(head >= tail))
			__atomic_store_n(&r->queue[head--], NULL, __ATOMIC_RELAXED);
		r->consumer_tail = consumer_head;
	}
	if (unlikely(consumer_head >= r->size)) {
		consumer_head = 0;
		r->consumer_tail = 0;
	}
	/* [C3] published last; pairs with the READ_ONCE in __ptr_ring_empty. */
	__atomic_store_n(&r->consumer_head, consumer_head, __ATOMIC_RELAXED);
}
#endif /* !RINGLAB_PTR_RING_OWN_DISCARD */

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

#endif /* RINGLAB_PTR_RING_BATCH_H */
