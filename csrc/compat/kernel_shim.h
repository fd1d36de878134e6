/*
 * kernel_shim.h - just enough of the kernel's internal API, in user space, to
 * compile a real include/linux/ptr_ring.h (v4.8 .. current mainline) as-is.
 *
 * Written for ringlab from the documented semantics of each primitive; no
 * kernel code is copied.  What the header needs, and how we model it:
 *
 *   spinlock_t + spin_lock{,_irq,_bh,_irqsave}/unlock...  pthread spinlocks.
 *        There are no interrupts or softirqs in user space, so the _irq/_bh/
 *        _irqsave flavours are the plain lock; `flags` is assigned so that the
 *        header's "unsigned long flags;" is not reported as unused.
 *   kmalloc & friends  64-byte aligned allocations (the kernel's slab objects
 *        of these sizes are cache-line aligned, and the slot array must be, or
 *        our layout would differ from the kernel's).  __GFP_ZERO zero-fills.
 *        The *_noprof allocators and alloc_hooks() of 6.10+ (memory
 *        allocation profiling) map onto the same functions.
 *   READ_ONCE/WRITE_ONCE  relaxed __atomic loads/stores.  On x86 and arm64
 *        this generates exactly the single plain load/store that the kernel's
 *        volatile access does, and ThreadSanitizer understands it.
 *   smp_wmb/smp_rmb  On x86 (TSO) the kernel defines these as compiler
 *        barriers only, and so do we, so that the generated code matches the
 *        kernel's.  Elsewhere they are release/acquire fences, the C11
 *        mapping of "order earlier stores/loads before later ones".
 *   ____cacheline_aligned_in_smp  aligned(SMP_CACHE_BYTES), 64 (x86; see the
 *        note below for 128-byte-line arm64 parts).
 *
 * Every definition is guarded with #ifndef so that a harness that already
 * defines a generic macro (barrier, likely, READ_ONCE...) keeps its own.
 */
#ifndef RINGLAB_KERNEL_SHIM_H
#define RINGLAB_KERNEL_SHIM_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <assert.h>

/* ---- types (linux/types.h) --------------------------------------------- */
typedef uint8_t  u8;
typedef uint16_t u16;
typedef uint32_t u32;
typedef uint64_t u64;
typedef int8_t   s8;
typedef int16_t  s16;
typedef int32_t  s32;
typedef int64_t  s64;
typedef unsigned int gfp_t;   /* the kernel's is a __bitwise unsigned int */

/* ---- compiler.h -------------------------------------------------------- */
#ifndef likely
#define likely(x)   __builtin_expect(!!(x), 1)
#endif
#ifndef unlikely
#define unlikely(x) __builtin_expect(!!(x), 0)
#endif
#ifndef barrier
#define barrier() __asm__ __volatile__("" ::: "memory")
#endif
#ifndef __always_inline
#define __always_inline inline __attribute__((__always_inline__))
#endif
/* No `noinline` macro: ptr_ring.h never uses it, and defining it breaks any
 * harness code that writes __attribute__((noinline)). */
#ifndef __must_check
#define __must_check __attribute__((__warn_unused_result__))
#endif
#ifndef __maybe_unused
#define __maybe_unused __attribute__((__unused__))
#endif
#ifndef __user
#define __user
#endif
#ifndef __rcu
#define __rcu
#endif
#ifndef __force
#define __force
#endif
#ifndef __bitwise
#define __bitwise
#endif

/* READ_ONCE/WRITE_ONCE: one untorn access the compiler may not merge, split
 * or elide.  A relaxed atomic gives exactly that (see the file comment). */
#ifndef READ_ONCE
#define READ_ONCE(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)
#endif
#ifndef WRITE_ONCE
#define WRITE_ONCE(x, val) __atomic_store_n(&(x), (val), __ATOMIC_RELAXED)
#endif

/* ---- barriers (asm/barrier.h) ------------------------------------------ */
#if defined(__x86_64__) || defined(__i386__)
/* x86 is TSO: stores are not reordered with stores, loads not with loads. */
#  ifndef smp_wmb
#  define smp_wmb() barrier()
#  endif
#  ifndef smp_rmb
#  define smp_rmb() barrier()
#  endif
#else
#  ifndef smp_wmb
#  define smp_wmb() __atomic_thread_fence(__ATOMIC_RELEASE)
#  endif
#  ifndef smp_rmb
#  define smp_rmb() __atomic_thread_fence(__ATOMIC_ACQUIRE)
#  endif
#endif
#ifndef smp_mb
#define smp_mb() __atomic_thread_fence(__ATOMIC_SEQ_CST)
#endif
#ifndef mb
#define mb()  smp_mb()
#define wmb() smp_wmb()
#define rmb() smp_rmb()
#endif
/* Only Alpha ever needed a barrier for address dependencies; removed in 4.15. */
#ifndef smp_read_barrier_depends
#define smp_read_barrier_depends() do { } while (0)
#endif
#ifndef smp_store_release
#define smp_store_release(p, v) __atomic_store_n((p), (v), __ATOMIC_RELEASE)
#endif
#ifndef smp_load_acquire
#define smp_load_acquire(p) __atomic_load_n((p), __ATOMIC_ACQUIRE)
#endif
#ifndef smp_mb__before_atomic
#define smp_mb__before_atomic() smp_mb()
#define smp_mb__after_atomic()  smp_mb()
#endif

#ifndef cpu_relax
#  if defined(__x86_64__) || defined(__i386__)
#    define cpu_relax() __asm__ __volatile__("pause" ::: "memory")
#  elif defined(__aarch64__)
#    define cpu_relax() __asm__ __volatile__("yield" ::: "memory")
#  else
#    define cpu_relax() barrier()
#  endif
#endif

/* ---- cache.h ----------------------------------------------------------- */
/* 64 is right for x86 and most arm64; 128-byte-line parts would also make the
 * mainline batch 32.  Override with -DSMP_CACHE_BYTES=128 to model those. */
#ifndef SMP_CACHE_BYTES
#define SMP_CACHE_BYTES 64
#endif
#ifndef L1_CACHE_BYTES
#define L1_CACHE_BYTES SMP_CACHE_BYTES
#endif
#ifndef ____cacheline_aligned
#define ____cacheline_aligned __attribute__((__aligned__(SMP_CACHE_BYTES)))
#endif
#ifndef ____cacheline_aligned_in_smp
#define ____cacheline_aligned_in_smp ____cacheline_aligned
#endif
#ifndef __cacheline_aligned_in_smp
#define __cacheline_aligned_in_smp ____cacheline_aligned
#endif
static inline int cache_line_size(void) { return SMP_CACHE_BYTES; }

/* ---- kernel.h / math ---------------------------------------------------- */
#ifndef ALIGN
#define ALIGN(x, a) (((x) + ((__typeof__(x))(a) - 1)) & ~((__typeof__(x))(a) - 1))
#endif
#ifndef ARRAY_SIZE
#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#endif
#ifndef BUG_ON
#define BUG_ON(c) assert(!(c))
#endif
#ifndef BUG
#define BUG() assert(0)
#endif
#ifndef WARN_ON
#define WARN_ON(c) ({ int __w = !!(c); __w; })
#endif
#ifndef WARN_ON_ONCE
#define WARN_ON_ONCE(c) WARN_ON(c)
#endif
#ifndef might_sleep
#define might_sleep() do { } while (0)
#endif
#ifndef might_sleep_if
#define might_sleep_if(c) do { (void)(c); } while (0)
#endif

/* ---- errors (asm/errno.h, linux/err.h) --------------------------------- */
/* ENOSPC/ENOMEM/EINVAL come from <errno.h>; the values are the kernel's. */
#ifndef MAX_ERRNO
#define MAX_ERRNO 4095
#endif
static inline void *ERR_PTR(long error) { return (void *)error; }
static inline long PTR_ERR(const void *ptr) { return (long)ptr; }
static inline bool IS_ERR(const void *ptr)
{
	return (unsigned long)ptr >= (unsigned long)-MAX_ERRNO;
}

/* ---- spinlock.h: pthread spinlocks ---------------------------------------- */
typedef pthread_spinlock_t spinlock_t;
#define spin_lock_init(l)              pthread_spin_init((l), PTHREAD_PROCESS_PRIVATE)
#define spin_lock(l)                   pthread_spin_lock(l)
#define spin_unlock(l)                 pthread_spin_unlock(l)
#define spin_lock_irq(l)               spin_lock(l)
#define spin_unlock_irq(l)             spin_unlock(l)
#define spin_lock_bh(l)                spin_lock(l)
#define spin_unlock_bh(l)              spin_unlock(l)
#define spin_lock_irqsave(l, flags)    do { (flags) = 0; spin_lock(l); } while (0)
#define spin_unlock_irqrestore(l, flags) do { (void)(flags); spin_unlock(l); } while (0)
#define spin_lock_nested(l, sub)       spin_lock(l)

/* ---- gfp.h / slab.h / mm.h: allocation ----------------------------------- */
#define ___GFP_ZERO_BIT 0x100u
#ifndef __GFP_ZERO
#define __GFP_ZERO   ((gfp_t)___GFP_ZERO_BIT)
#endif
#ifndef __GFP_NOWARN
#define __GFP_NOWARN ((gfp_t)0x200u)
#endif
#ifndef GFP_KERNEL
#define GFP_KERNEL   ((gfp_t)0x1u)
#endif
#ifndef GFP_ATOMIC
#define GFP_ATOMIC   ((gfp_t)0x2u)
#endif
#ifndef GFP_NOWAIT
#define GFP_NOWAIT   ((gfp_t)0x4u)
#endif
/* The kernel caps one kmalloc at a few MiB; kvmalloc (vmalloc fallback) goes
 * further.  The header only uses this as an overflow guard for size*8, so the
 * largest size_t that cannot overflow is the faithful choice here. */
#ifndef KMALLOC_MAX_SIZE
#define KMALLOC_MAX_SIZE ((size_t)SIZE_MAX >> 1)
#endif

static inline void *kmalloc(size_t size, gfp_t gfp)
{
	void *p = NULL;
	size_t bytes;

	/* Cache-line aligned and rounded up to whole lines, like a kmalloc-<2^n>
	 * slab object: the first slot starts a line and the last slot never
	 * shares a line with an unrelated heap object (ringlab's own rings,
	 * csrc/rings/ring_common.h, allocate the same way, so A/B is fair). */
	if (size > SIZE_MAX - SMP_CACHE_BYTES)
		return NULL;
	bytes = ALIGN(size ? size : 1, (size_t)SMP_CACHE_BYTES);
	if (posix_memalign(&p, SMP_CACHE_BYTES, bytes))
		return NULL;
	if (gfp & __GFP_ZERO)
		memset(p, 0, bytes);
	return p;
}
static inline void *kzalloc(size_t size, gfp_t gfp) { return kmalloc(size, gfp | __GFP_ZERO); }
static inline void *kmalloc_array(size_t n, size_t size, gfp_t gfp)
{
	if (size != 0 && n > SIZE_MAX / size)
		return NULL;
	return kmalloc(n * size, gfp);
}
static inline void *kcalloc(size_t n, size_t size, gfp_t gfp)
{
	return kmalloc_array(n, size, gfp | __GFP_ZERO);
}
static inline void *kvmalloc(size_t size, gfp_t gfp) { return kmalloc(size, gfp); }
static inline void *kvzalloc(size_t size, gfp_t gfp) { return kzalloc(size, gfp); }
static inline void *kvmalloc_array(size_t n, size_t size, gfp_t gfp)
{
	return kmalloc_array(n, size, gfp);
}
static inline void *kvcalloc(size_t n, size_t size, gfp_t gfp) { return kcalloc(n, size, gfp); }
static inline void kfree(const void *p) { free((void *)p); }
static inline void kvfree(const void *p) { free((void *)p); }

/* 6.10+ memory allocation profiling: foo() is alloc_hooks(foo_noprof()). */
#ifndef alloc_hooks
#define alloc_hooks(expr) (expr)
#endif
#define kmalloc_noprof         kmalloc
#define kzalloc_noprof         kzalloc
#define kmalloc_array_noprof   kmalloc_array
#define kcalloc_noprof         kcalloc
#define kvmalloc_noprof        kvmalloc
#define kvzalloc_noprof        kvzalloc
#define kvmalloc_array_noprof  kvmalloc_array
#define kvcalloc_noprof        kvcalloc
/* 6.11+ spells kvmalloc_node_noprof(size, flags, node); NUMA node ignored. */
#define kvmalloc_node_noprof(size, gfp, node) kvmalloc((size), (gfp))
#define kmalloc_node_noprof(size, gfp, node)  kmalloc((size), (gfp))

#endif /* RINGLAB_KERNEL_SHIM_H */
