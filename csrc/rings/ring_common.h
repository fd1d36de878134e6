/* SPDX-License-Identifier: MIT */
/*
 * ring_common.h - small helpers shared by ringlab's own ring headers.
 *
 * Written for ringlab from the published description of the kernel's
 * ptr_ring (no kernel code copied).  Only the pieces that every ring needs:
 * the cache-line constant, the aligned attribute, a zeroed 64-byte aligned
 * slot allocator and the kernel-ish names for likely()/unlikely().
 *
 * Everything here is prefixed rlr_ so it cannot collide with the harness or
 * with the kernel compat shim (which defines the kernel's own names).
 */
#ifndef RINGLAB_RING_COMMON_H
#define RINGLAB_RING_COMMON_H

#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* The user-space shims of ringtest and ptr_ring_test hard-code 64; so do we,
 * so that batch = 2 * 64 / sizeof(void *) = 16 exactly as in the mails. */
#define RLR_CACHE_BYTES 64
#define rlr_cacheline_aligned __attribute__((aligned(RLR_CACHE_BYTES)))

#ifndef likely
#define likely(x)   __builtin_expect(!!(x), 1)
#endif
#ifndef unlikely
#define unlikely(x) __builtin_expect(!!(x), 0)
#endif

/*
 * Memory order of the consumer's slot load in __ptr_ring_peek ([C1] in each
 * ring header).  Default: relaxed, the C11 spelling of the kernel's
 * READ_ONCE.  What the pointer points to is then ordered after the pointer
 * by the address dependency of every later access through it (the kernel's
 * memory model; C11 calls it memory_order_consume), as in the kernel, which
 * pairs this READ_ONCE with the producer's smp_wmb.  Not acquire, because
 * gcc must then reload r->size and r->consumer_head after the load instead
 * of reusing the registers it already holds them in (one more instruction
 * per consume on x86, and ldar instead of ldr on arm64): the kernel's code
 * does not pay that, and our rings must run the kernel's instruction stream
 * to be a fair stand-in for it.  The ringlab harness never dereferences the
 * values it queues.  Code that does, and wants ordering that C11 and
 * ThreadSanitizer recognise, defines RLR_PEEK_ORDER as __ATOMIC_ACQUIRE
 * before including the ring (page_frag_test does: it frees what it pops).
 */
#ifndef RLR_PEEK_ORDER
#define RLR_PEEK_ORDER __ATOMIC_RELAXED
#endif

/* Built with ThreadSanitizer (gcc says so with __SANITIZE_THREAD__, clang with __has_feature). */
#if defined(__SANITIZE_THREAD__)
#define RLR_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define RLR_TSAN 1
#endif
#endif

/*
 * The producer's check that its slot is still in use ([P0] of
 * __ptr_ring_full and __ptr_ring_produce).  The kernel reads the slot with a
 * plain load, which x86 folds into the compare (cmpq $0, slot), and which gcc
 * merges when __ptr_ring_produce follows __ptr_ring_full; gcc does neither
 * with an atomic load, so a relaxed one costs instructions the kernel does
 * not run.  The racing write is the consumer's NULL store of an aligned
 * pointer, so the load cannot tear; a caller that waits for the slot must
 * put a compiler barrier in its loop, as the kernel's callers do with
 * cpu_relax() (the harness's wait step is "pause" with a memory clobber, or
 * sched_yield).  ThreadSanitizer would report the plain load as a race, so
 * under it this is the relaxed atomic load, the C11 spelling of the same
 * access.
 */
#ifdef RLR_TSAN
#define rlr_slot_busy(slot) (__atomic_load_n((slot), __ATOMIC_RELAXED) != NULL)
#else
#define rlr_slot_busy(slot) (*(slot) != NULL)
#endif

/*
 * The producer's publication of a new entry ([P1] of __ptr_ring_produce):
 * a release fence, then a relaxed store of the slot: the kernel's smp_wmb();
 * WRITE_ONCE().  The fence is also a full compiler barrier, so the slot's
 * address (r->queue, r->producer) is loaded again after it, as in the
 * kernel's code; a C11 release store would let gcc reuse the registers of
 * the [P0] check, a different instruction stream at the same count (4% faster
 * on one machine).  ThreadSanitizer does not support fences (gcc refuses
 * them under -fsanitize=thread), so under it this is a release store,
 * which orders the same.  @slot is evaluated once.
 */
#ifdef RLR_TSAN
#define rlr_slot_publish(slot, ptr) __atomic_store_n((slot), (ptr), __ATOMIC_RELEASE)
#else
#define rlr_slot_publish(slot, ptr)					\
	do {								\
		__atomic_thread_fence(__ATOMIC_RELEASE);		\
		__atomic_store_n((slot), (ptr), __ATOMIC_RELAXED);	\
	} while (0)
#endif

/* Largest ring we accept: the slot array must fit in size_t and in int. */
#define RLR_MAX_SLOTS ((int)((SIZE_MAX / sizeof(void *)) < (size_t)INT32_MAX \
			? (SIZE_MAX / sizeof(void *)) : (size_t)INT32_MAX))

/*
 * Zero-filled, 64-byte aligned array of @n pointer slots (the kernel uses
 * kvmalloc_array(..., __GFP_ZERO); the user shims memalign(64) + memset).
 * Rounded up to whole cache lines so the last slot never shares a line with
 * an unrelated heap object.  Returns NULL on overflow or ENOMEM.
 */
static inline void **rlr_alloc_slots(size_t n)
{
	void *p = NULL;
	size_t bytes;

	if (n == 0 || n > SIZE_MAX / sizeof(void *) - RLR_CACHE_BYTES)
		return NULL;
	bytes = n * sizeof(void *);
	bytes = (bytes + RLR_CACHE_BYTES - 1) & ~(size_t)(RLR_CACHE_BYTES - 1);
	if (posix_memalign(&p, RLR_CACHE_BYTES, bytes))
		return NULL;
	memset(p, 0, bytes);
	return (void **)p;
}

#endif /* RINGLAB_RING_COMMON_H */
