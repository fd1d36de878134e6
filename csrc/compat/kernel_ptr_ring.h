/*
 * kernel_ptr_ring.h - ring header wrapper for kernel-header mode.
 *
 * The harness is compiled once per ring with
 *   -DRINGLAB_RING_HEADER="compat/kernel_ptr_ring.h"
 *   -DRINGLAB_KERNEL_HEADER="/abs/path/to/include/linux/ptr_ring.h"
 *   -I csrc/compat/include -I csrc
 * (ringlab.kernel_header.compile_flags builds exactly this).  We include our
 * user-space shim of the kernel API first, then the user's real, unmodified
 * ptr_ring.h.  Its own #include <linux/...> lines resolve to the empty stubs
 * in csrc/compat/include.
 *
 * RINGLAB_GEN_BATCH (0 or 1) says which generation the header is:
 *   0  v4.8-v4.11: one `consumer` index, NULL on every consume
 *   1  v4.12+    : consumer_head/consumer_tail/batch (batch ring zeroing)
 * ringlab.kernel_header.detect_generation() decides it from the struct.
 */
#ifndef RINGLAB_KERNEL_PTR_RING_H
#define RINGLAB_KERNEL_PTR_RING_H

#ifndef RINGLAB_KERNEL_HEADER
#error "kernel-header mode needs -DRINGLAB_KERNEL_HEADER=\"/path/to/ptr_ring.h\" (use ringlab.kernel_header.compile_flags)"
#endif
#ifndef RINGLAB_GEN_BATCH
#define RINGLAB_GEN_BATCH 1
#endif

#include "kernel_shim.h"

/* The kernel builds with -Wall but not -Wextra; its headers are foreign code
 * here, so the harness's stricter warnings (and -Werror, if used) must not
 * fail on them.  Errors still stop the build. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#pragma GCC diagnostic ignored "-Wsign-compare"
#pragma GCC diagnostic ignored "-Wtype-limits"
#pragma GCC diagnostic ignored "-Wunused-function"
#include RINGLAB_KERNEL_HEADER
#pragma GCC diagnostic pop

/*
 * The harness contract (csrc/harness/ring_api.h) includes the spinlocked
 * ptr_ring_consume_batched(), which the first generation of ptr_ring.h did
 * not have yet.  For such headers (ringlab.kernel_header detects it and sets
 * RINGLAB_KERNEL_HAS_CONSUME_BATCHED=0) we add one with the kernel's
 * semantics, built only from the header's own __ptr_ring_consume: N single
 * consumes under consumer_lock, stopping at the first empty slot.
 */
#if defined(RINGLAB_KERNEL_HAS_CONSUME_BATCHED) && !RINGLAB_KERNEL_HAS_CONSUME_BATCHED
static inline int ptr_ring_consume_batched(struct ptr_ring *r, void **array, int n)
{
	int i;

	spin_lock(&r->consumer_lock);
	for (i = 0; i < n; i++) {
		void *ptr = __ptr_ring_consume(r);

		if (!ptr)
			break;
		array[i] = ptr;
	}
	spin_unlock(&r->consumer_lock);
	return i;
}
#endif

/* Tell the harness this ring came from a kernel header. */
#define RINGLAB_RING_IS_KERNEL_HEADER 1

#endif /* RINGLAB_KERNEL_PTR_RING_H */
