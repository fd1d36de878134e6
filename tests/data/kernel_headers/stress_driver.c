/* SPDX-License-Identifier: MIT */
/*
 * stress_driver.c - ringlab's own minimal correctness driver for a ring
 * header compiled through -DRINGLAB_RING_HEADER (kernel-header mode or a
 * built-in ring).  Independent of the benchmark harness on purpose, so the
 * shim can be tested on its own.
 *
 *   stress_driver SIZE COUNT LOCKED
 *
 * 1. single thread: fill until -ENOSPC (exactly SIZE slots), drain in order,
 *    then the ring is empty;
 * 2. SPSC: a producer thread pushes 1..COUNT, the consumer checks that each
 *    value arrives in order (nothing lost, duplicated or reordered);
 * 3. the ring is empty at the end.
 * Prints one JSON line; exits 1 naming the failed check.
 */
#define _GNU_SOURCE 1
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include RINGLAB_RING_HEADER

#ifndef RINGLAB_GEN_BATCH
#define RINGLAB_GEN_BATCH 1
#endif

static struct ptr_ring ring;
static long count;
static int locked;

#define FAIL(...) do { fprintf(stderr, "stress_driver: FAIL: " __VA_ARGS__); \
		       fputc('\n', stderr); exit(1); } while (0)

static int produce(void *p)
{
	return locked ? ptr_ring_produce(&ring, p) : __ptr_ring_produce(&ring, p);
}

static void *consume(void)
{
	return locked ? ptr_ring_consume(&ring) : __ptr_ring_consume(&ring);
}

/* Spin, then yield: on a loaded or small machine (CI, 2 vCPUs, sanitizers)
 * a pure spin can burn whole time slices waiting for a descheduled peer. */
static void wait_step(unsigned *spins)
{
	if (++*spins < 1024)
		__asm__ __volatile__("" ::: "memory");
	else
		sched_yield();
}

static void *producer(void *arg)
{
	(void)arg;
	for (long i = 1; i <= count; i++) {
		unsigned spins = 0;

		while (produce((void *)(uintptr_t)i))
			wait_step(&spins);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_t t;
	int size;

	if (argc != 4)
		FAIL("usage: stress_driver SIZE COUNT LOCKED");
	size = atoi(argv[1]);
	count = atol(argv[2]);
	locked = atoi(argv[3]);
	if (size < 1 || count < 1)
		FAIL("bad SIZE or COUNT");
	if (ptr_ring_init(&ring, size, GFP_KERNEL))
		FAIL("ptr_ring_init(%d) failed", size);

	/* 1. full and empty behave */
	if (!__ptr_ring_empty(&ring) || __ptr_ring_peek(&ring))
		FAIL("new ring is not empty");
	for (long i = 1; i <= size; i++)
		if (produce((void *)(uintptr_t)i))
			FAIL("produce %ld of %d failed on a ring that is not full", i, size);
	if (!__ptr_ring_full(&ring) || produce((void *)1) != -ENOSPC)
		FAIL("ring of %d not full after %d produces", size, size);
	for (long i = 1; i <= size; i++) {
		void *p = consume();
		if (p != (void *)(uintptr_t)i)
			FAIL("drain: expected %ld got %ld", i, (long)(uintptr_t)p);
	}
	if (!__ptr_ring_empty(&ring) || consume())
		FAIL("ring not empty after drain");

	/* 2. SPSC stress with FIFO check */
	if (pthread_create(&t, NULL, producer, NULL))
		FAIL("pthread_create");
	for (long i = 1; i <= count; i++) {
		void *p;
		unsigned spins = 0;

		while (!(p = consume()))
			wait_step(&spins);
		if (p != (void *)(uintptr_t)i)
			FAIL("FIFO order violated at index %ld: got %ld", i, (long)(uintptr_t)p);
	}
	pthread_join(t, NULL);

	/* 3. empty at the end */
	if (!__ptr_ring_empty(&ring) || consume())
		FAIL("ring not empty at the end");
#if RINGLAB_GEN_BATCH
	int batch = ring.batch;
#else
	int batch = -1;
#endif
	ptr_ring_cleanup(&ring, NULL);
	printf("{\"ok\": true, \"size\": %d, \"count\": %ld, \"locked\": %d, \"batch\": %d}\n",
	       size, count, locked, batch);
	return 0;
}
