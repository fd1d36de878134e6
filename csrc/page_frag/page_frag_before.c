/* SPDX-License-Identifier: MIT */
/*
 * page_frag_before.c - the page_frag cache as it was BEFORE the Part-1
 * series: the offset counts down from the end of the page and alignment
 * rounds the offset down.  Written for ringlab from the algorithm's
 * description (kernel-rings.md 4.1); no kernel code copied.
 *
 * Why count down: one signed compare detects exhaustion, and aligning
 * down is a single AND because the offset is moving down anyway.
 */
#include "page_frag/page_frag.h"

#include <stdbool.h>
#include <stdlib.h>

struct page_frag_cache {
	/* hot: touched by every allocation (the push thread only) */
	void *va;                   /* page address, NULL when the cache is empty */
	uint16_t offset;            /* start of the last fragment; next one ends here */
	uint16_t size;              /* bytes in the page (32 KiB or 4 KiB) */
	unsigned int pagecnt_bias;  /* references we still own on the page */
	bool pfmemalloc;
	/* cold */
	struct rl_page_pool *pool;
	struct page_frag_stats st;
} __attribute__((aligned(64)));

const char page_frag_variant[] = "before";

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
	struct rl_page *page;
	/* long, not int: a huge fragsz must stay negative here, never wrap. */
	long offset;

	if (unlikely(!nc->va)) {
refill:
		page = page_frag_refill_page(nc->pool, &nc->st);
		if (!page) {
			nc->st.failed++;
			return NULL;
		}
		nc->va = rl_page_address(page);
		nc->size = (uint16_t)(RL_PAGE_SIZE << page->order);
		/* One atomic add per page: from now on each fragment only
		 * decrements our private pagecnt_bias. */
		rl_page_ref_add(page, PAGE_FRAG_CACHE_MAX_SIZE);
		nc->pfmemalloc = page->pfmemalloc;
		nc->pagecnt_bias = PAGE_FRAG_CACHE_MAX_SIZE + 1;
		nc->offset = nc->size;
	}

	offset = (long)nc->offset - (long)fragsz;
	if (unlikely(offset < 0)) {
		page = rl_virt_to_page(nc->va);
		/* Give back the references we did not hand out.  Zero left means
		 * no fragment is in flight: the page can be reused as is. */
		if (!rl_page_ref_sub_and_test(page, (int)nc->pagecnt_bias)) {
			nc->st.abandons++;
			goto refill;
		}
		if (unlikely(nc->pfmemalloc)) {
			/* Reserve pages go straight back, never recycled. */
			rl_pool_free(page);
			nc->st.pfmemalloc_drops++;
			goto refill;
		}
		rl_set_page_count(page, PAGE_FRAG_CACHE_MAX_SIZE + 1);
		nc->pagecnt_bias = PAGE_FRAG_CACHE_MAX_SIZE + 1;
		nc->st.reuses++;
		offset = (long)nc->size - (long)fragsz;
		if (unlikely(offset < 0)) {
			/* Bigger than the page: fail, the cache stays valid. */
			nc->st.failed++;
			return NULL;
		}
	}

	nc->pagecnt_bias--;
	offset &= (long)(int)align_mask;   /* align DOWN: free, we move down anyway */
	nc->offset = (uint16_t)offset;
	return (char *)nc->va + offset;
}

void page_frag_cache_drain(struct page_frag_cache *nc)
{
	if (!nc->va)
		return;
	if (rl_page_ref_sub_and_test(rl_virt_to_page(nc->va), (int)nc->pagecnt_bias))
		rl_pool_free(rl_virt_to_page(nc->va));
	nc->va = NULL;
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
