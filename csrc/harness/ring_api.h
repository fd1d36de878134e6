/* SPDX-License-Identifier: MIT */
/*
 * ring_api.h - the contract between a ring and the ptr_ring harness.
 *
 * The harness (ptr_ring_bench.c + ptr_ring_main.c) is compiled once per
 * ring with
 *	-DRINGLAB_RING_HEADER="rings/ptr_ring_batch.h"   (quotes included)
 *	-DRINGLAB_VARIANT="batch"
 * or, in kernel-header mode, RINGLAB_RING_HEADER="compat/kernel_ptr_ring.h"
 * which includes the shim and then the user's real header
 * (-DRINGLAB_KERNEL_HEADER="/abs/path/ptr_ring.h").
 *
 * RING IMPLEMENTS (kernel names, SPSC-safe lockless __ versions):
 *	struct ptr_ring;
 *	int   ptr_ring_init(struct ptr_ring *r, int size, gfp_t/int gfp); 0 or -ENOMEM
 *	void  ptr_ring_cleanup(struct ptr_ring *r, void (*destroy)(void *));
 *	int   __ptr_ring_produce(struct ptr_ring *r, void *ptr);  0 or -ENOSPC
 *	void *__ptr_ring_consume(struct ptr_ring *r);             NULL when empty
 *	void *__ptr_ring_peek(struct ptr_ring *r);
 *	int   __ptr_ring_empty(struct ptr_ring *r);   consumer side only
 *	int   __ptr_ring_full(struct ptr_ring *r);    producer side only
 *	int   ptr_ring_produce(r, ptr), void *ptr_ring_consume(r)  (spinlocked)
 *	int   ptr_ring_consume_batched(r, void **array, int n)     (spinlocked)
 *   optional:
 *	RINGLAB_GEN_BATCH 1        struct ptr_ring has an int `batch` field
 *	                           (set by the compat wrapper after detection)
 *	RINGLAB_RING_BATCH(r)      expression giving the effective batch
 *	                           (takes precedence over RINGLAB_GEN_BATCH)
 *	RINGLAB_HAS_SET_BATCH 1    __ptr_ring_set_batch(r, n) exists (-b)
 *	RINGLAB_RING_NAME "name"   default for RINGLAB_VARIANT
 *
 * HARNESS IMPLEMENTS:
 *	the timed loops (modes 0/1/2), placement, counters, JSON; it uses only
 *	the functions above and never touches fields (a kernel header may have
 *	`consumer` or `consumer_head`), except `batch` when RINGLAB_GEN_BATCH.
 *	NULL is never queued: values are 1..N cast to pointers and never
 *	dereferenced.
 */
#ifndef RINGLAB_RING_API_H
#define RINGLAB_RING_API_H

#ifndef RINGLAB_RING_HEADER
#define RINGLAB_RING_HEADER "rings/ptr_ring_batch.h"
#endif
#include RINGLAB_RING_HEADER

#ifndef RINGLAB_VARIANT
#ifdef RINGLAB_RING_NAME
#define RINGLAB_VARIANT RINGLAB_RING_NAME
#else
#define RINGLAB_VARIANT "unknown"
#endif
#endif

#ifndef RINGLAB_GEN_BATCH
#define RINGLAB_GEN_BATCH 0
#endif

/* Effective batch of an initialised ring, or -1 when the ring has none. */
#if defined(RINGLAB_RING_BATCH)
#define RL_RING_BATCH(r) (RINGLAB_RING_BATCH(r))
#elif RINGLAB_GEN_BATCH
#define RL_RING_BATCH(r) ((r)->batch)
#else
#define RL_RING_BATCH(r) ((void)(r), -1)
#endif

#endif /* RINGLAB_RING_API_H */
