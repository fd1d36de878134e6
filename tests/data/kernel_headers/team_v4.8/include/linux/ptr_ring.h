/* SPDX-License-Identifier: MIT */
/*
 * ringlab test fixture: a ptr_ring.h of the FIRST generation (v4.8 era),
 * written by the ringlab team from the published description of the API
 * (one `consumer` index, the slot is NULLed on every consume).  It is not
 * the kernel's file; it only uses the kernel's names, includes and internal
 * API so that kernel-header mode is tested on something we may commit.
 *
 * Model: a bounded FIFO of non-NULL pointers, one producer CPU and one
 * consumer CPU.  A NULL slot is free.  The producer only looks at
 * queue[producer], the consumer only at queue[consumer]; no count is shared.
 *
 * Unlike the v4.8 original, every cross-thread slot access here is a
 * READ_ONCE/WRITE_ONCE, so this fixture is data-race free for
 * ThreadSanitizer without suppressions.
 */
#ifndef _LINUX_PTR_RING_H
#define _LINUX_PTR_RING_H 1

#include <linux/spinlock.h>
#include <linux/cache.h>
#include <linux/types.h>
#include <linux/compiler.h>
#include <linux/slab.h>
#include <asm/errno.h>

struct ptr_ring {
	int producer ____cacheline_aligned_in_smp;	/* producer-owned */
	spinlock_t producer_lock;
	int consumer ____cacheline_aligned_in_smp;	/* consumer-owned */
	spinlock_t consumer_lock;
	/* read-mostly, shared by both sides */
	int size ____cacheline_aligned_in_smp;
	void **queue;
};

/* Producer side: is the next slot still occupied?  Loops must cpu_relax(). */
static inline bool __ptr_ring_full(struct ptr_ring *r)
{
	return READ_ONCE(r->queue[r->producer]) != NULL;
}

static inline bool ptr_ring_full(struct ptr_ring *r)
{
	bool full;

	spin_lock(&r->producer_lock);
	full = __ptr_ring_full(r);
	spin_unlock(&r->producer_lock);
	return full;
}

/* The slot store is the publication.  The release orders the caller's writes
 * to *ptr before it; pairs with the acquire in __ptr_ring_peek. */
static inline int __ptr_ring_produce(struct ptr_ring *r, void *ptr)
{
	if (READ_ONCE(r->queue[r->producer]))
		return -ENOSPC;
	smp_store_release(&r->queue[r->producer], ptr);
	r->producer++;
	if (r->producer >= r->size)
		r->producer = 0;
	return 0;
}

static inline int ptr_ring_produce(struct ptr_ring *r, void *ptr)
{
	int ret;

	spin_lock(&r->producer_lock);
	ret = __ptr_ring_produce(r, ptr);
	spin_unlock(&r->producer_lock);
	return ret;
}

static inline int ptr_ring_produce_bh(struct ptr_ring *r, void *ptr)
{
	int ret;

	spin_lock_bh(&r->producer_lock);
	ret = __ptr_ring_produce(r, ptr);
	spin_unlock_bh(&r->producer_lock);
	return ret;
}

/* Consumer side.  Pairs with the release in __ptr_ring_produce. */
static inline void *__ptr_ring_peek(struct ptr_ring *r)
{
	return smp_load_acquire(&r->queue[r->consumer]);
}

static inline bool __ptr_ring_empty(struct ptr_ring *r)
{
	return !__ptr_ring_peek(r);
}

static inline bool ptr_ring_empty(struct ptr_ring *r)
{
	bool empty;

	spin_lock(&r->consumer_lock);
	empty = __ptr_ring_empty(r);
	spin_unlock(&r->consumer_lock);
	return empty;
}

/* Free the slot at once: this is the store the 2017 batching later delays,
 * because on a nearly full ring it lands on the producer's cache line. */
static inline void __ptr_ring_discard_one(struct ptr_ring *r)
{
	WRITE_ONCE(r->queue[r->consumer], NULL);
	r->consumer++;
	if (r->consumer >= r->size)
		r->consumer = 0;
}

static inline void *__ptr_ring_consume(struct ptr_ring *r)
{
	void *ptr = __ptr_ring_peek(r);

	if (ptr)
		__ptr_ring_discard_one(r);
	return ptr;
}

static inline void *ptr_ring_consume(struct ptr_ring *r)
{
	void *ptr;

	spin_lock(&r->consumer_lock);
	ptr = __ptr_ring_consume(r);
	spin_unlock(&r->consumer_lock);
	return ptr;
}

static inline void *ptr_ring_consume_irq(struct ptr_ring *r)
{
	void *ptr;

	spin_lock_irq(&r->consumer_lock);
	ptr = __ptr_ring_consume(r);
	spin_unlock_irq(&r->consumer_lock);
	return ptr;
}

static inline void *ptr_ring_consume_any(struct ptr_ring *r)
{
	unsigned long flags;
	void *ptr;

	spin_lock_irqsave(&r->consumer_lock, flags);
	ptr = __ptr_ring_consume(r);
	spin_unlock_irqrestore(&r->consumer_lock, flags);
	return ptr;
}

/* The v4.8 generation allocated a zeroed array padded to whole cache lines. */
static inline int ptr_ring_init(struct ptr_ring *r, int size, gfp_t gfp)
{
	r->queue = kzalloc(ALIGN(size * sizeof(*r->queue), SMP_CACHE_BYTES), gfp);
	if (!r->queue)
		return -ENOMEM;
	r->size = size;
	r->producer = r->consumer = 0;
	spin_lock_init(&r->producer_lock);
	spin_lock_init(&r->consumer_lock);
	return 0;
}

static inline void ptr_ring_cleanup(struct ptr_ring *r, void (*destroy)(void *))
{
	void *ptr;

	if (destroy)
		while ((ptr = ptr_ring_consume(r)))
			destroy(ptr);
	kfree(r->queue);
}

#endif /* _LINUX_PTR_RING_H */
