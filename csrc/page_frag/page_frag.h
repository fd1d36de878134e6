/* SPDX-License-Identifier: MIT */
/*
 * page_frag.h - API of ringlab's user-space page_frag cache.
 *
 * Written for ringlab from the published description of mm/page_frag_cache.c
 * before and after the "Replace page_frag with page_frag_cache (Part-1)"
 * series (kernel-rings.md section 4.1); no kernel code copied.
 *
 * Two implementations of the same API, one per binary:
 *   page_frag_before.c  offset counts DOWN from the end of the page, alignment
 *                       rounds down; va, size and pfmemalloc in separate fields
 *   page_frag_after.c   offset counts UP from 0, alignment rounds up; page
 *                       address | order | pfmemalloc packed in one word
 *
 * Shared by both (the point of the cache):
 *   - pages of 32 KiB (order 3) from the page pool, falling back to 4 KiB;
 *   - the refcount bias: on refill the page refcount is raised by a large
 *     bias once; each fragment only decrements the cache-private
 *     pagecnt_bias, so the shared atomic refcount is written on refill,
 *     on recycle and on free, never per allocation;
 *   - when the page is used up: subtract the remaining bias; if that leaves
 *     zero, no fragment is in flight and the page is reused from scratch;
 *     otherwise the cache drops its claim and takes a fresh page (the
 *     fragments still in flight free the old one);
 *   - page_frag_free(): an atomic decrement of the page refcount on whichever
 *     thread frees; at zero the page goes back to the pool.
 *
 * Concurrency: a cache belongs to ONE allocating thread (the push thread);
 * page_frag_free may run on any thread.
 */
#ifndef RINGLAB_PAGE_FRAG_H
#define RINGLAB_PAGE_FRAG_H

#include <stdint.h>

#include "page_frag/page_pool.h"

/* Bias added on refill: the largest number of fragments a page can hold
 * (1-byte fragments of a 32 KiB page) so the bias can never run out. */
#define PAGE_FRAG_CACHE_MAX_SIZE  RL_FRAG_MAX_SIZE

struct page_frag_cache;     /* layout is each variant's own */

/* Slow-path bookkeeping, kept outside the hot fields. */
struct page_frag_stats {
	uint64_t refills;           /* fresh pages taken from the pool */
	uint64_t refills_order0;    /* ... of which fell back to 4 KiB */
	uint64_t reuses;            /* exhausted page reused (no fragment in flight) */
	uint64_t abandons;          /* exhausted page left to its in-flight fragments */
	uint64_t pfmemalloc_drops;  /* exhausted pfmemalloc page returned, not reused */
	uint64_t failed;            /* allocations that returned NULL */
};

/* "before" or "after". */
extern const char page_frag_variant[];

struct page_frag_cache *page_frag_cache_new(struct rl_page_pool *pool);
/* Drop the cache's remaining bias; the page goes back to the pool once all
 * its fragments are freed.  The cache stays usable (it refills). */
void page_frag_cache_drain(struct page_frag_cache *nc);
void page_frag_cache_delete(struct page_frag_cache *nc);   /* drain + free */
void page_frag_cache_stats(const struct page_frag_cache *nc, struct page_frag_stats *out);

/* align_mask: ~0u for no alignment, -align for a power-of-two alignment.
 * Returns NULL when fragsz does not fit any page or no page is available. */
void *__page_frag_alloc_align(struct page_frag_cache *nc, unsigned int fragsz,
			      unsigned int align_mask);

static inline void *page_frag_alloc(struct page_frag_cache *nc, unsigned int fragsz)
{
	return __page_frag_alloc_align(nc, fragsz, ~0u);
}

/* @align must be a power of two <= RL_PAGE_SIZE (the caller checks; the
 * kernel only WARNs). */
static inline void *page_frag_alloc_align(struct page_frag_cache *nc, unsigned int fragsz,
					  unsigned int align)
{
	return __page_frag_alloc_align(nc, fragsz, -align);
}

/* Refill policy shared by both variants: try a 32 KiB page, fall back to
 * 4 KiB (the kernel tries the high order without retrying or reclaiming,
 * then order 0). */
static inline struct rl_page *page_frag_refill_page(struct rl_page_pool *pool,
						    struct page_frag_stats *st)
{
	struct rl_page *pg = rl_pool_alloc(pool, RL_FRAG_MAX_ORDER);

	if (!pg) {
		pg = rl_pool_alloc(pool, 0);
		if (pg)
			st->refills_order0++;
	}
	if (pg)
		st->refills++;
	return pg;
}

/* Free one fragment from any thread. */
static inline void page_frag_free(void *va)
{
	rl_put_page(rl_virt_to_page(va));
}

#endif /* RINGLAB_PAGE_FRAG_H */
