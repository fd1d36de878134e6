/* SPDX-License-Identifier: MIT */
/*
 * page_frag_after.c - the page_frag cache AFTER the Part-1 series: the
 * offset counts up from 0, alignment rounds the offset up, and the page
 * address, order and pfmemalloc flag are packed into one encoded word.
 * Written for ringlab from the algorithm's description (kernel-rings.md
 * 4.1); no kernel code copied.
 *
 * Why count up: consecutive fragments are adjacent in increasing address
 * order (skb frag coalescing, forward prefetch).  Why one word: va, size
 * and pfmemalloc shrink into 8 bytes; pages are at least 4 KiB aligned so
 * the low 12 bits of the address are free for the order (a whole byte, so
 * the compiler can use a byte load/and) and the flag (bit 8).
 */
#include "page_frag/page_frag.h"

#include <stdbool.h>
#include <stdlib.h>

#define PAGE_FRAG_ORDER_MASK       0xffUL
#define PAGE_FRAG_PFMEMALLOC_BIT   (PAGE_FRAG_ORDER_MASK + 1)

_Static_assert(RL_FRAG_MAX_ORDER <= PAGE_FRAG_ORDER_MASK, "order must fit the mask");
_Static_assert(PAGE_FRAG_PFMEMALLOC_BIT < RL_PAGE_SIZE, "flag must fit below the page address");

struct page_frag_cache {
	/* hot: touched by every allocation (the push thread only) */
	unsigned long encoded_page;  /* va | order | pfmemalloc; 0 when empty */
	uint32_t offset;             /* first free byte */
	uint32_t pagecnt_bias;       /* references we still own on the page */
	/* cold */
	struct rl_page_pool *pool;
	struct page_frag_stats st;
} __attribute__((aligned(64)));

const char page_frag_variant[] = "after";

static inline unsigned long encode_page(void *va, unsigned int order, bool pfmemalloc)
{
	return (unsigned long)va | order | (pfmemalloc ? PAGE_FRAG_PFMEMALLOC_BIT : 0);
}

static inline unsigned int encoded_order(unsigned long e)
{
	return (unsigned int)(e & PAGE_FRAG_ORDER_MASK);
}

static inline void *encoded_va(unsigned long e)
{
	return (void *)(e & RL_PAGE_MASK);
}

static inline bool encoded_pfmemalloc(unsigned long e)
{
	return e & PAGE_FRAG_PFMEMALLOC_BIT;
}

struct page_frag_cache *page_frag_cache_new(struct rl_page_pool *pool)
{
	struct page_frag_cache *nc = aligned_alloc(64, sizeof(*nc));

	if (!nc)
		return NULL;
	*nc = (struct page_frag_cache){ .pool = pool };
	return nc;
}

void *__page_frag_alloc_align(struct page_frag_cache *nc, unsigned int fragsz,
			      unsigned int align_mask)
{
	unsigned long encoded = nc->encoded_page;
	unsigned int size, offset;
	struct rl_page *page;

	if (unlikely(!encoded)) {
refill:
		page = page_frag_refill_page(nc->pool, &nc->st);
		if (!page) {
			nc->st.failed++;
			return NULL;
		}
		encoded = encode_page(rl_page_address(page), page->order, page->pfmemalloc);
		nc->encoded_page = encoded;
		/* One atomic add per page; fragments only touch pagecnt_bias. */
		rl_page_ref_add(page, PAGE_FRAG_CACHE_MAX_SIZE);
		nc->pagecnt_bias = PAGE_FRAG_CACHE_MAX_SIZE + 1;
		nc->offset = 0;
	}

	size = (unsigned int)(RL_PAGE_SIZE << encoded_order(encoded));
	/* align UP (align_mask = -align; ~0u makes this a no-op).  With
	 * align <= RL_PAGE_SIZE (the API's precondition) the result never
	 * exceeds size, which is a multiple of RL_PAGE_SIZE. */
	offset = (nc->offset + ~align_mask) & align_mask;
	/* "fragsz > size - offset" is "offset + fragsz > size" without the
	 * unsigned wrap for a huge fragsz. */
	if (unlikely(fragsz > size - offset)) {
		/* Larger than a base page and not fitting here: the caller asked
		 * for more than the cache promises, fail without touching the page. */
		if (unlikely(fragsz > RL_PAGE_SIZE)) {
			nc->st.failed++;
			return NULL;
		}
		page = rl_virt_to_page(encoded_va(encoded));
		/* Zero left after returning the unused bias: nothing in flight. */
		if (!rl_page_ref_sub_and_test(page, (int)nc->pagecnt_bias)) {
			nc->st.abandons++;
			goto refill;
		}
		if (unlikely(encoded_pfmemalloc(encoded))) {
			rl_pool_free(page);
			nc->st.pfmemalloc_drops++;
			goto refill;
		}
		rl_set_page_count(page, PAGE_FRAG_CACHE_MAX_SIZE + 1);
		nc->pagecnt_bias = PAGE_FRAG_CACHE_MAX_SIZE + 1;
		nc->st.reuses++;
		offset = 0;
	}

	nc->pagecnt_bias--;
	nc->offset = offset + fragsz;
	return (char *)encoded_va(encoded) + offset;
}

void page_frag_cache_drain(struct page_frag_cache *nc)
{
	struct rl_page *page;

	if (!nc->encoded_page)
		return;
	page = rl_virt_to_page(encoded_va(nc->encoded_page));
	if (rl_page_ref_sub_and_test(page, (int)nc->pagecnt_bias))
		rl_pool_free(page);
	nc->encoded_page = 0;
}

void page_frag_cache_delete(struct page_frag_cache *nc)
{
	if (!nc)
		return;
	page_frag_cache_drain(nc);
	free(nc);
}

void page_frag_cache_stats(const struct page_frag_cache *nc, struct page_frag_stats *out)
{
	*out = nc->st;
}
