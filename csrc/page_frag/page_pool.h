/* SPDX-License-Identifier: MIT */
/*
 * page_pool.h - ringlab's user-space stand-in for the page allocator that
 * the kernel's page_frag cache sits on.  Written for ringlab from the
 * algorithm's published description; no kernel code copied.
 *
 * Model
 * -----
 * Memory comes from mmap in 2 MiB "regions", each aligned to 2 MiB and
 * serving ONE page order (order 3 = 32 KiB pages, or order 0 = 4 KiB pages).
 * Every page is aligned to its own size.  Each page has a 64-byte header
 * (struct rl_page: atomic refcount, order, pfmemalloc flag), playing the role
 * of the kernel's struct page.  The headers live in an array at the start of
 * the region, not inside the page: that keeps the whole page usable, so a
 * fragment of exactly PAGE_SIZE fits even in an order-0 page, as in the
 * kernel.  A header is found from any address inside a page by masking:
 *
 *     region = va & ~(RL_REGION_SIZE - 1)
 *     header = &region->pages[(va - region) >> (RL_PAGE_SHIFT + region->order)]
 *
 * A page leaves the pool with refcount 1 and goes back to the pool when a
 * put drops the refcount to zero (rl_put_page), on whichever thread that is.
 *
 * Thread safety: the pool is a pthread mutex around one free list per
 * order.  A lock, not a lock-free stack, because the pool is touched once
 * per page (refill, and the last free of a page), i.e. once every ~2700
 * fragments of 12 bytes; a lock-free LIFO would need ABA protection for no
 * measurable gain.  The per-fragment fast path never touches the pool.
 * The mutex also gives the happens-before edge between the thread that
 * frees a page and the thread that gets it again (TSan sees it).
 *
 * Test knobs (rl_pool_create flags, or the environment of page_frag_test):
 *   RL_POOL_NO_HIGH_ORDER  every order-3 request fails, so the cache falls
 *                          back to 4 KiB pages (env RINGLAB_PAGE_FRAG_ORDER0=1)
 *   RL_POOL_PFMEMALLOC     every page is flagged pfmemalloc (as if taken
 *                          from the emergency reserves), so the cache must
 *                          never recycle it (env RINGLAB_PAGE_FRAG_PFMEMALLOC=1)
 */
#ifndef RINGLAB_PAGE_POOL_H
#define RINGLAB_PAGE_POOL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifndef likely
#define likely(x)   __builtin_expect(!!(x), 1)
#endif
#ifndef unlikely
#define unlikely(x) __builtin_expect(!!(x), 0)
#endif

#define RL_PAGE_SHIFT      12
#define RL_PAGE_SIZE       (1UL << RL_PAGE_SHIFT)          /* the module's PAGE_SIZE */
#define RL_PAGE_MASK       (~(RL_PAGE_SIZE - 1))
#define RL_FRAG_MAX_ORDER  3                                /* 32 KiB cache pages */
#define RL_FRAG_MAX_SIZE   (RL_PAGE_SIZE << RL_FRAG_MAX_ORDER)
#define RL_REGION_SHIFT    21                               /* 2 MiB regions */
#define RL_REGION_SIZE     (1UL << RL_REGION_SHIFT)

#define RL_POOL_NO_HIGH_ORDER  0x1u
#define RL_POOL_PFMEMALLOC     0x2u

/* One per page; 64 bytes so two pages' refcounts never share a cache line
 * (the kernel's struct page is 64 bytes too). */
struct rl_page {
	atomic_int refcount;        /* 0 while in the pool */
	uint8_t order;              /* 0 or RL_FRAG_MAX_ORDER */
	uint8_t pfmemalloc;         /* page "came from the reserves": never recycle */
	uint8_t in_pool;            /* 1 while on the free list (guarded by the pool lock) */
	struct rl_page *next;       /* free-list link (guarded by the pool lock) */
	void *va;                   /* page address (constant) */
} __attribute__((aligned(64)));

struct rl_page_pool;

struct rl_pool_stats {
	uint64_t regions;           /* 2 MiB regions mapped */
	uint64_t pages_total[2];    /* [0] order-0 pages, [1] order-3 pages */
	uint64_t pages_free[2];
	uint64_t allocs;            /* successful rl_pool_alloc */
	uint64_t frees;             /* pages returned */
	uint64_t alloc_failed;      /* requests refused (forced fallback, memory cap, mmap failure) */
};

/* Flags: RL_POOL_*.  max_bytes caps the mapped memory (0: 1 GiB). */
struct rl_page_pool *rl_pool_create(unsigned int flags, size_t max_bytes);
/* Unmaps everything; pages still in use become invalid.  Call rl_pool_check first. */
void rl_pool_destroy(struct rl_page_pool *pool);
/* A page of 2^order base pages with refcount 1, or NULL. */
struct rl_page *rl_pool_alloc(struct rl_page_pool *pool, unsigned int order);
/* Give a page whose refcount is 0 back to its pool. */
void rl_pool_free(struct rl_page *page);
void rl_pool_get_stats(struct rl_page_pool *pool, struct rl_pool_stats *out);
/* Walk every page header: counts pages not back in the pool or with a
 * non-zero refcount (a leak); 0 means clean.  Not thread-safe with users. */
uint64_t rl_pool_check(struct rl_page_pool *pool);

/* Header of the page holding @va (any address inside the page). */
static inline struct rl_page *rl_virt_to_page(const void *va);

/* -- refcount helpers, named after the kernel operations they stand for ---- */
static inline void rl_page_ref_add(struct rl_page *p, int n)
{
	atomic_fetch_add_explicit(&p->refcount, n, memory_order_relaxed);
}

/* True when the count reached zero.  acq_rel: every earlier access to the
 * page by any thread happens before whatever the zero-holder does next. */
static inline bool rl_page_ref_sub_and_test(struct rl_page *p, int n)
{
	return atomic_fetch_sub_explicit(&p->refcount, n, memory_order_acq_rel) == n;
}

static inline void rl_set_page_count(struct rl_page *p, int n)
{
	atomic_store_explicit(&p->refcount, n, memory_order_relaxed);
}

static inline int rl_page_count(struct rl_page *p)
{
	return atomic_load_explicit(&p->refcount, memory_order_relaxed);
}

/* put_page: drop one reference, page back to the pool at zero. */
static inline void rl_put_page(struct rl_page *p)
{
	if (rl_page_ref_sub_and_test(p, 1))
		rl_pool_free(p);
}

static inline void *rl_page_address(const struct rl_page *p)
{
	return p->va;
}

/* -- region layout (exposed only so that rl_virt_to_page can be inline) ---- */
struct rl_region {
	uint64_t magic;
	struct rl_page_pool *pool;
	unsigned int order;
	unsigned int nr_pages;       /* page slots in the region, metadata pages included */
	unsigned int first_page;     /* index of the first data page */
	struct rl_region *next_region;
	struct rl_page pages[] __attribute__((aligned(64)));
};

#define RL_REGION_MAGIC 0x72696e676c616221ULL  /* "ringlab!" */

static inline struct rl_page *rl_virt_to_page(const void *va)
{
	uintptr_t a = (uintptr_t)va;
	struct rl_region *r = (struct rl_region *)(a & ~(uintptr_t)(RL_REGION_SIZE - 1));

	return &r->pages[(a - (uintptr_t)r) >> (RL_PAGE_SHIFT + r->order)];
}

#endif /* RINGLAB_PAGE_POOL_H */
