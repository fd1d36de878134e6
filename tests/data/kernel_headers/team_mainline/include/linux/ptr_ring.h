/* SPDX-License-Identifier: MIT */
/*
 * ringlab test fixture: a ptr_ring.h of the CURRENT generation (batched
 * zeroing, consumer_head/consumer_tail/batch) in the 6.10+ spelling
 * (ptr_ring_init is alloc_hooks(ptr_ring_init_noprof(...)), allocation via
 * kvmalloc_array_noprof).  Written by the ringlab team from the published
 * description of the algorithm; it is not the kernel's file.  It exercises
 * the compat shim's newer API: READ_ONCE/WRITE_ONCE, smp_wmb, the _noprof
 * allocators, alloc_hooks(), kvfree, spin_lock_bh/_irqsave, KMALLOC_MAX_SIZE.
 *
 * Model: a bounded FIFO of non-NULL pointers, one producer CPU and one
 * consumer CPU.  A NULL slot is free.  The producer reads only
 * queue[producer]; the consumer reads only queue[consumer_head].
 * The consumer frees slots `batch` at a time (two cache lines of pointers),
 * newest first, so that on a nearly full ring it stays away from the line
 * the producer is about to reuse.
 *
 * Unlike the kernel, the NULL stores and the producer's slot test are
 * WRITE_ONCE/READ_ONCE here, so the fixture is race free for
 * ThreadSanitizer without suppressions.
 */
#ifndef _LINUX_PTR_RING_H
#define _LINUX_PTR_RING_H 1

#include <linux/spinlock.h>
#include <linux/cache.h>
#include <linux/types.h>
#include <linux/compiler.h>
#include <linux/slab.h>
#include <linux/mm.h>
#include <asm/errno.h>

struct ptr_ring {
	/* producer group */
	int producer ____cacheline_aligned_in_smp;
	spinlock_t producer_lock;
	/* consumer group */
	int consumer_head ____cacheline_aligned_in_smp;	/* next entry to read */
	int consumer_tail;		/* oldest consumed slot not yet NULLed */
	spinlock_t consumer_lock;
	/* read-mostly group */
	int size ____cacheline_aligned_in_smp;
	int batch;			/* slots NULLed per flush */
	void **queue;
};

/* Producer: the slot we would write next is still in use.  Loops must
 * cpu_relax().  Pairs with the WRITE_ONCE(NULL) in __ptr_ring_discard_one. */
static inline bool __ptr_ring_full(struct ptr_ring *r)
{
	return READ_ONCE(r->queue[r->producer]) != NULL;
}

static inline bool ptr_ring_full_bh(struct ptr_ring *r)
{
	bool full;

	spin_lock_bh(&r->producer_lock);
	full = __ptr_ring_full(r);
	spin_unlock_bh(&r->producer_lock);
	return full;
}

static inline int __ptr_ring_produce(struct ptr_ring *r, void *ptr)
{
	if (unlikely(!r->size) || READ_ONCE(r->queue[r->producer]))
		return -ENOSPC;
	/* Barrier A: make *ptr visible before ptr itself.  Pairs with the
	 * address dependency on the READ_ONCE in __ptr_ring_peek. */
	smp_wmb();
	WRITE_ONCE(r->queue[r->producer++], ptr);
	if (unlikely(r->producer >= r->size))
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

static inline int ptr_ring_produce_any(struct ptr_ring *r, void *ptr)
{
	unsigned long flags;
	int ret;

	spin_lock_irqsave(&r->producer_lock, flags);
	ret = __ptr_ring_produce(r, ptr);
	spin_unlock_irqrestore(&r->producer_lock, flags);
	return ret;
}

/* Consumer: Barrier A's partner (address dependency through the load). */
static inline void *__ptr_ring_peek(struct ptr_ring *r)
{
	if (likely(r->size))
		return READ_ONCE(r->queue[r->consumer_head]);
	return NULL;
}

/* Lockless emptiness test; not reliable while another CPU consumes. */
static inline bool __ptr_ring_empty(struct ptr_ring *r)
{
	if (likely(r->size))
		return !READ_ONCE(r->queue[READ_ONCE(r->consumer_head)]);
	return true;
}

static inline void __ptr_ring_discard_one(struct ptr_ring *r)
{
	/* Work on a local copy so that consumer_head is never observed out of
	 * range by a lockless __ptr_ring_empty. */
	int next = r->consumer_head + 1;

	if (unlikely(next - r->consumer_tail >= r->batch || next >= r->size)) {
		int slot = next - 1;

		/* Newest first: the line the producer may be polling is
		 * written last. */
		while (likely(slot >= r->consumer_tail))
			WRITE_ONCE(r->queue[slot--], NULL);
		r->consumer_tail = next;
	}
	if (unlikely(next >= r->size)) {
		next = 0;
		r->consumer_tail = 0;
	}
	/* Published last; pairs with READ_ONCE in __ptr_ring_empty. */
	WRITE_ONCE(r->consumer_head, next);
}

static inline void *__ptr_ring_consume(struct ptr_ring *r)
{
	void *ptr = __ptr_ring_peek(r);

	if (ptr)
		__ptr_ring_discard_one(r);
	return ptr;
}

/* Not a bulk copy: every entry goes through __ptr_ring_consume, so the
 * batched NULLing above is unchanged.  Stops at the first empty slot. */
static inline int __ptr_ring_consume_batched(struct ptr_ring *r, void **array, int n)
{
	int i;

	for (i = 0; i < n; i++) {
		void *ptr = __ptr_ring_consume(r);

		if (!ptr)
			break;
		array[i] = ptr;
	}
	return i;
}

static inline int ptr_ring_consume_batched(struct ptr_ring *r, void **array, int n)
{
	int got;

	spin_lock(&r->consumer_lock);
	got = __ptr_ring_consume_batched(r, array, n);
	spin_unlock(&r->consumer_lock);
	return got;
}

static inline void *ptr_ring_consume(struct ptr_ring *r)
{
	void *ptr;

	spin_lock(&r->consumer_lock);
	ptr = __ptr_ring_consume(r);
	spin_unlock(&r->consumer_lock);
	return ptr;
}

static inline void *ptr_ring_consume_bh(struct ptr_ring *r)
{
	void *ptr;

	spin_lock_bh(&r->consumer_lock);
	ptr = __ptr_ring_consume(r);
	spin_unlock_bh(&r->consumer_lock);
	return ptr;
}

static inline void **__ptr_ring_init_queue_alloc_noprof(unsigned int size, gfp_t gfp)
{
	if (size > KMALLOC_MAX_SIZE / sizeof(void *))
		return NULL;
	return kvmalloc_array_noprof(size, sizeof(void *), gfp | __GFP_ZERO);
}

static inline void __ptr_ring_set_size(struct ptr_ring *r, int size)
{
	r->size = size;
	r->batch = SMP_CACHE_BYTES * 2 / sizeof(*(r->queue));
	/* Too much batching on a tiny ring only makes it bursty. */
	if (r->batch > r->size / 2 || !r->batch)
		r->batch = 1;
}

static inline int ptr_ring_init_noprof(struct ptr_ring *r, int size, gfp_t gfp)
{
	r->queue = __ptr_ring_init_queue_alloc_noprof(size, gfp);
	if (!r->queue)
		return -ENOMEM;
	__ptr_ring_set_size(r, size);
	r->producer = r->consumer_head = r->consumer_tail = 0;
	spin_lock_init(&r->producer_lock);
	spin_lock_init(&r->consumer_lock);
	return 0;
}
#define ptr_ring_init(...) alloc_hooks(ptr_ring_init_noprof(__VA_ARGS__))

static inline void ptr_ring_cleanup(struct ptr_ring *r, void (*destroy)(void *))
{
	void *ptr;

	if (destroy)
		while ((ptr = ptr_ring_consume(r)))
			destroy(ptr);
	kvfree(r->queue);
}

#endif /* _LINUX_PTR_RING_H */
