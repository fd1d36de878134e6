/* SPDX-License-Identifier: MIT */
/*
 * ring_locked.h - the spinlocked wrappers around the lockless __ primitives.
 *
 * Included at the end of each ring header, after it has defined struct
 * ptr_ring (with producer_lock and consumer_lock) and the __ptr_ring_*
 * primitives.  Locks are pthread spinlocks, like the ringtest and
 * ptr_ring_test shims map spin_lock*(); the _irq/_bh/_any flavours make no
 * sense in user space and are not provided.
 *
 * Lock nesting (as in the kernel): consumer_lock may be taken outside
 * producer_lock, never the reverse.  Nothing here takes both.
 */
#ifndef RINGLAB_RING_LOCKED_H
#define RINGLAB_RING_LOCKED_H

static inline int ptr_ring_produce(struct ptr_ring *r, void *ptr)
{
	int ret;

	pthread_spin_lock(&r->producer_lock);
	ret = __ptr_ring_produce(r, ptr);
	pthread_spin_unlock(&r->producer_lock);
	return ret;
}

static inline int ptr_ring_full(struct ptr_ring *r)
{
	int ret;

	pthread_spin_lock(&r->producer_lock);
	ret = __ptr_ring_full(r);
	pthread_spin_unlock(&r->producer_lock);
	return ret;
}

static inline void *ptr_ring_consume(struct ptr_ring *r)
{
	void *ptr;

	pthread_spin_lock(&r->consumer_lock);
	ptr = __ptr_ring_consume(r);
	pthread_spin_unlock(&r->consumer_lock);
	return ptr;
}

static inline int ptr_ring_empty(struct ptr_ring *r)
{
	int ret;

	pthread_spin_lock(&r->consumer_lock);
	ret = __ptr_ring_empty(r);
	pthread_spin_unlock(&r->consumer_lock);
	return ret;
}

/* Lockless batched consume: n single consumes (the kernel does not memcpy;
 * every entry goes through discard_one), stops at the first NULL. */
static inline int __ptr_ring_consume_batched(struct ptr_ring *r, void **array, int n)
{
	void *ptr;
	int i;

	for (i = 0; i < n; i++) {
		ptr = __ptr_ring_consume(r);
		if (!ptr)
			break;
		array[i] = ptr;
	}
	return i;
}

static inline int ptr_ring_consume_batched(struct ptr_ring *r, void **array, int n)
{
	int ret;

	pthread_spin_lock(&r->consumer_lock);
	ret = __ptr_ring_consume_batched(r, array, n);
	pthread_spin_unlock(&r->consumer_lock);
	return ret;
}

/*
 * Drain with the locked consume and free the slot array.  @destroy (may be
 * NULL) is called on every entry still queued.  Not concurrent-safe with
 * producers: the caller has stopped them.
 */
static inline void ptr_ring_cleanup(struct ptr_ring *r, void (*destroy)(void *))
{
	void *ptr;

	if (destroy)
		while ((ptr = ptr_ring_consume(r)))
			destroy(ptr);
	free(r->queue);
	r->queue = NULL;
	pthread_spin_destroy(&r->producer_lock);
	pthread_spin_destroy(&r->consumer_lock);
}

#endif /* RINGLAB_RING_LOCKED_H */
