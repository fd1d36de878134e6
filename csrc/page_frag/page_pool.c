/* SPDX-License-Identifier: MIT */
/*
 * page_pool.c - the aligned page allocator under ringlab's page_frag cache.
 * See page_pool.h for the model and the locking choice.
 */
#define _GNU_SOURCE
#include "page_frag/page_pool.h"

#include <assert.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

struct rl_page_pool {
	pthread_mutex_t lock;
	unsigned int flags;
	size_t max_bytes;
	size_t mapped;
	struct rl_page *free_list[2];     /* [0] order 0, [1] order 3 */
	struct rl_region *regions;
	struct rl_pool_stats st;
};

static int order_slot(unsigned int order)
{
	return order == 0 ? 0 : 1;
}

struct rl_page_pool *rl_pool_create(unsigned int flags, size_t max_bytes)
{
	struct rl_page_pool *pool = calloc(1, sizeof(*pool));

	if (!pool)
		return NULL;
	pthread_mutex_init(&pool->lock, NULL);
	pool->flags = flags;
	pool->max_bytes = max_bytes ? max_bytes : (size_t)1 << 30;
	return pool;
}

/* An mmap'd region aligned to its own size: over-map by one region and trim
 * the unaligned head and tail.  MAP_POPULATE: the kernel's pages are already
 * backed, so first-touch page faults should not land in the measured loop. */
static void *map_aligned_region(void)
{
	size_t len = 2 * RL_REGION_SIZE;
	char *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	uintptr_t start, end;

	if (p == MAP_FAILED)
		return NULL;
	start = ((uintptr_t)p + RL_REGION_SIZE - 1) & ~(uintptr_t)(RL_REGION_SIZE - 1);
	end = start + RL_REGION_SIZE;
	if (start > (uintptr_t)p)
		munmap(p, start - (uintptr_t)p);
	if ((uintptr_t)p + len > end)
		munmap((void *)end, (uintptr_t)p + len - end);
	return (void *)start;
}

/* Carve a new region for @order and put its data pages on the free list.
 * Called with the pool lock held. */
static int grow(struct rl_page_pool *pool, unsigned int order)
{
	size_t page_bytes = RL_PAGE_SIZE << order;
	unsigned int nr = (unsigned int)(RL_REGION_SIZE / page_bytes);
	size_t meta = sizeof(struct rl_region) + nr * sizeof(struct rl_page);
	unsigned int first = (unsigned int)((meta + page_bytes - 1) / page_bytes);
	struct rl_region *r;
	int slot = order_slot(order);

	if (pool->mapped + RL_REGION_SIZE > pool->max_bytes)
		return -1;
	r = map_aligned_region();
	if (!r)
		return -1;
	pool->mapped += RL_REGION_SIZE;
	r->magic = RL_REGION_MAGIC;
	r->pool = pool;
	r->order = order;
	r->nr_pages = nr;
	r->first_page = first;
	r->next_region = pool->regions;
	pool->regions = r;
	/* Push in reverse so the free list hands out pages in address order. */
	for (unsigned int i = nr; i-- > first;) {
		struct rl_page *pg = &r->pages[i];

		atomic_init(&pg->refcount, 0);
		pg->order = (uint8_t)order;
		pg->pfmemalloc = (pool->flags & RL_POOL_PFMEMALLOC) ? 1 : 0;
		pg->in_pool = 1;
		pg->va = (char *)r + (size_t)i * page_bytes;
		pg->next = pool->free_list[slot];
		pool->free_list[slot] = pg;
	}
	pool->st.regions++;
	pool->st.pages_total[slot] += nr - first;
	pool->st.pages_free[slot] += nr - first;
	return 0;
}

struct rl_page *rl_pool_alloc(struct rl_page_pool *pool, unsigned int order)
{
	struct rl_page *pg = NULL;
	int slot = order_slot(order);

	if (order != 0 && order != RL_FRAG_MAX_ORDER)
		return NULL;
	pthread_mutex_lock(&pool->lock);
	if (order != 0 && (pool->flags & RL_POOL_NO_HIGH_ORDER))
		goto fail;
	if (!pool->free_list[slot] && grow(pool, order))
		goto fail;
	pg = pool->free_list[slot];
	pool->free_list[slot] = pg->next;
	pg->next = NULL;
	pg->in_pool = 0;
	rl_set_page_count(pg, 1);
	pool->st.pages_free[slot]--;
	pool->st.allocs++;
	pthread_mutex_unlock(&pool->lock);
	return pg;
fail:
	pool->st.alloc_failed++;
	pthread_mutex_unlock(&pool->lock);
	return NULL;
}

void rl_pool_free(struct rl_page *pg)
{
	struct rl_region *r = (struct rl_region *)((uintptr_t)pg->va & ~(uintptr_t)(RL_REGION_SIZE - 1));
	struct rl_page_pool *pool = r->pool;
	int slot = order_slot(pg->order);

	if (rl_page_count(pg) != 0 || r->magic != RL_REGION_MAGIC) {
		/* A double free or a wild pointer: die loudly, never corrupt the list. */
		fprintf(stderr, "page_pool: bad free of page %p (refcount %d)\n", pg->va, rl_page_count(pg));
		abort();
	}
	pthread_mutex_lock(&pool->lock);
	if (pg->in_pool) {
		pthread_mutex_unlock(&pool->lock);
		fprintf(stderr, "page_pool: page %p freed twice\n", pg->va);
		abort();
	}
	pg->in_pool = 1;
	pg->next = pool->free_list[slot];
	pool->free_list[slot] = pg;
	pool->st.pages_free[slot]++;
	pool->st.frees++;
	pthread_mutex_unlock(&pool->lock);
}

void rl_pool_get_stats(struct rl_page_pool *pool, struct rl_pool_stats *out)
{
	pthread_mutex_lock(&pool->lock);
	*out = pool->st;
	pthread_mutex_unlock(&pool->lock);
}

uint64_t rl_pool_check(struct rl_page_pool *pool)
{
	uint64_t bad = 0;

	pthread_mutex_lock(&pool->lock);
	for (struct rl_region *r = pool->regions; r; r = r->next_region)
		for (unsigned int i = r->first_page; i < r->nr_pages; i++)
			if (!r->pages[i].in_pool || rl_page_count(&r->pages[i]) != 0)
				bad++;
	pthread_mutex_unlock(&pool->lock);
	return bad;
}

void rl_pool_destroy(struct rl_page_pool *pool)
{
	struct rl_region *r, *next;

	if (!pool)
		return;
	for (r = pool->regions; r; r = next) {
		next = r->next_region;
		munmap(r, RL_REGION_SIZE);
	}
	pthread_mutex_destroy(&pool->lock);
	free(pool);
}
