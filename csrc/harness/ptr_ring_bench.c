/* SPDX-License-Identifier: MIT */
/*
 * ptr_ring_bench.c - timed loops of ptr_ring_test (see ptr_ring_bench.h).
 *
 * Thread layout: every mode runs in worker threads created, pinned and given
 * their counters BEFORE timing.  Per iteration each worker: spin barrier ->
 * counters on -> sched_getcpu -> rl_measured_*() (clock_gettime inside, at
 * both ends of the loop) -> sched_getcpu -> counters off -> barrier.  Nothing
 * is allocated and no thread is started inside a measured region.
 *
 * Values are 1..N cast to pointers (never NULL, never dereferenced).
 */
#define _GNU_SOURCE
#include "ring_api.h"
#include "ptr_ring_bench.h"
#include "util.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#define RL_NOINLINE __attribute__((noinline, noclone))

struct rl_ctx;

struct rl_worker {
	struct rl_ctx *ctx;
	int role;		/* 0 producer (or mode-0 thread), 1 consumer */
	int cpu;
	long long ctx_vol, ctx_invol;
	int exited;		/* set under ctx->lock when the thread returns */
};

/* Heap-allocated, so that a worker abandoned after a barrier timeout never
 * points into the stack of a returned rl_bench_run. */
struct rl_ctx {
	const struct rl_bench_opts *o;
	struct ptr_ring *r;
	struct rl_bench_result *res;
	struct rl_spin_barrier bar;
	int64_t barrier_timeout_ns;
	int abort;		/* set by a failing thread; polled only while waiting */
	int failed;		/* first failure claims err */
	char *err;
	size_t errlen;
	struct rl_worker wk[2];
	pthread_mutex_t lock;	/* protects wk[].exited; cond: a worker exited or */
	pthread_cond_t cond;	/* broke the barrier (CLOCK_MONOTONIC timeouts) */
};

static const char *const rl_role_name[2] = { "producer", "consumer" };

const char *rl_bench_variant(void)
{
	return RINGLAB_VARIANT;
}

/* Record the first failure (printf-style) and make every waiting loop stop.
 * The release store of abort pairs with the acquire in rl_aborted. */
static void rl_fail(struct rl_ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void rl_fail(struct rl_ctx *c, const char *fmt, ...)
{
	va_list ap;

	if (__atomic_exchange_n(&c->failed, 1, __ATOMIC_ACQ_REL) == 0) {
		va_start(ap, fmt);
		vsnprintf(c->err, c->errlen, fmt, ap);
		va_end(ap);
	}
	__atomic_store_n(&c->abort, 1, __ATOMIC_RELEASE);
}

static int rl_aborted(struct rl_ctx *c)
{
	return __atomic_load_n(&c->abort, __ATOMIC_ACQUIRE);
}

/*
 * Code layout of this build: RINGLAB_LAYOUT_PAD bytes of code that never runs,
 * emitted ahead of the measured regions, so that a layout seed moves them (and
 * the ring code inlined into them) to another address and alignment without
 * changing one executed instruction.  0 or undefined: no pad.
 */
#if defined(RINGLAB_LAYOUT_PAD) && RINGLAB_LAYOUT_PAD > 0
#define RL_STR_(x) #x
#define RL_STR(x) RL_STR_(x)
__attribute__((used, noinline, cold)) void rl_layout_pad(void)
{
	__asm__ volatile(".skip " RL_STR(RINGLAB_LAYOUT_PAD));
}
#endif

/* ---- measured regions (callgrind: --toggle-collect='rl_measured_*') ---- */

/* Mode 0: one thread, produce then consume, N times.  Returns the index of
 * the first failure (0 if none) in *bad; elapsed ns as the return value. */
static inline __attribute__((always_inline)) int64_t
rl_simple_loop(struct ptr_ring *r, long long n, int locked, long long *bad)
{
	int64_t t0, t1;
	long long i;

	t0 = rl_now_ns();
	for (i = 1; i <= n; i++) {
		void *p = (void *)(uintptr_t)i;
		void *q;

		if (unlikely(locked ? ptr_ring_produce(r, p) : __ptr_ring_produce(r, p)))
			break;
		q = locked ? ptr_ring_consume(r) : __ptr_ring_consume(r);
		if (unlikely(q != p))
			break;
	}
	t1 = rl_now_ns();
	*bad = i <= n ? i : 0;
	return t1 - t0;
}

RL_NOINLINE int64_t rl_measured_simple(struct ptr_ring *r, long long n, long long *bad)
{
	return rl_simple_loop(r, n, 0, bad);
}

RL_NOINLINE int64_t rl_measured_simple_locked(struct ptr_ring *r, long long n, long long *bad)
{
	return rl_simple_loop(r, n, 1, bad);
}

/* Producer of modes 1 and 2: values first..n.  Lockless: the seed's
 * "while (__ptr_ring_full) cpu_relax(); __ptr_ring_produce" with the wait
 * moved out of line.  Locked: retry ptr_ring_produce. */
static inline __attribute__((always_inline)) int64_t
rl_producer_loop(struct rl_ctx *c, long long first, long long n, int locked,
		 struct rl_waiter *w)
{
	struct ptr_ring *r = c->r;
	int64_t t0, t1;
	long long i;

	t0 = rl_now_ns();
	for (i = first; i <= n; i++) {
		void *p = (void *)(uintptr_t)i;

		if (locked) {
			while (unlikely(ptr_ring_produce(r, p))) {
				rl_wait_step(w);
				if (unlikely(rl_aborted(c)))
					goto out;
			}
		} else {
			while (unlikely(__ptr_ring_full(r))) {
				rl_wait_step(w);
				if (unlikely(rl_aborted(c)))
					goto out;
			}
			__ptr_ring_produce(r, p);
		}
		/* reset the spin budget only after a wait, off the fast path */
		if (unlikely(w->spins))
			w->spins = 0;
	}
out:
	t1 = rl_now_ns();
	return t1 - t0;
}

RL_NOINLINE int64_t rl_measured_producer(struct rl_ctx *c, long long first, long long n,
					 struct rl_waiter *w)
{
	return rl_producer_loop(c, first, n, 0, w);
}

RL_NOINLINE int64_t rl_measured_producer_locked(struct rl_ctx *c, long long first, long long n,
						struct rl_waiter *w)
{
	return rl_producer_loop(c, first, n, 1, w);
}

/* Consumer of modes 1 and 2: expects 1..n in order. */
static inline __attribute__((always_inline)) int64_t
rl_consumer_loop(struct rl_ctx *c, long long n, int locked, struct rl_waiter *w,
		 long long *bad, void **got)
{
	struct ptr_ring *r = c->r;
	int64_t t0, t1;
	long long i;
	void *p = NULL;

	*bad = 0;
	t0 = rl_now_ns();
	for (i = 1; i <= n; i++) {
		if (locked) {
			while (unlikely(!(p = ptr_ring_consume(r)))) {
				rl_wait_step(w);
				if (unlikely(rl_aborted(c)))
					goto out;
			}
		} else {
			while (unlikely(__ptr_ring_empty(r))) {
				rl_wait_step(w);
				if (unlikely(rl_aborted(c)))
					goto out;
			}
			p = __ptr_ring_consume(r);
		}
		if (unlikely(p != (void *)(uintptr_t)i)) {
			*bad = i;
			*got = p;
			break;
		}
		if (unlikely(w->spins))
			w->spins = 0;
	}
out:
	t1 = rl_now_ns();
	return t1 - t0;
}

RL_NOINLINE int64_t rl_measured_consumer(struct rl_ctx *c, long long n, struct rl_waiter *w,
					 long long *bad, void **got)
{
	return rl_consumer_loop(c, n, 0, w, bad, got);
}

RL_NOINLINE int64_t rl_measured_consumer_locked(struct rl_ctx *c, long long n,
						struct rl_waiter *w, long long *bad, void **got)
{
	return rl_consumer_loop(c, n, 1, w, bad, got);
}

/* ---- workers ---- */

static int rl_pin_self(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	return pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

/* A worker tells the main thread that it returned, or that it broke the
 * barrier, under c->lock (pairs with the wait in rl_join_workers). */
static void rl_notify(struct rl_ctx *c, struct rl_worker *wk, int exiting)
{
	pthread_mutex_lock(&c->lock);
	if (exiting)
		__atomic_store_n(&wk->exited, 1, __ATOMIC_RELEASE);
	pthread_cond_signal(&c->cond);
	pthread_mutex_unlock(&c->lock);
}

/* One barrier of the worker loop.  0 when every thread arrived; -1 when the
 * barrier timed out here (the run is failed with the reason) or was broken
 * elsewhere: the caller leaves its loop. */
static int rl_barrier(struct rl_worker *wk, int *sense, const char *where, int k)
{
	struct rl_ctx *c = wk->ctx;
	int rc = rl_spin_barrier_wait(&c->bar, sense, c->barrier_timeout_ns);

	if (rc == RL_BARRIER_TIMEOUT) {
		rl_fail(c, "barrier %s (iteration %d): the %s thread did not arrive within %lld s; "
			"aborted (it is stuck, or starved of CPU time; the limit is --barrier-timeout)",
			where, k, rl_role_name[!wk->role],
			(long long)(c->barrier_timeout_ns / 1000000000LL));
		rl_notify(c, wk, 0);
	}
	return rc == RL_BARRIER_OK ? 0 : -1;
}

static void *rl_worker_main(void *arg)
{
	struct rl_worker *wk = arg;
	struct rl_ctx *c = wk->ctx;
	const struct rl_bench_opts *o = c->o;
	int nthreads = o->mode == 0 ? 1 : 2;
	long long prefill = o->mode == 2 ? (o->count < o->size ? o->count : o->size) : 0;
	struct rl_counters cs;
	char cerr[256];
	int sense = 0, e;
	const char *stall = getenv("RINGLAB_STALL_THREAD");

	if (wk->cpu >= 0 && (e = rl_pin_self(wk->cpu)) != 0) {
		rl_fail(c, "cannot pin the %s thread to CPU %d: %s", rl_role_name[wk->role], wk->cpu,
			strerror(e));
		/* still take part in the barriers so the peer is not stuck */
	}
	if (rl_counters_open(&cs, o->counters, cerr, sizeof(cerr)))
		rl_fail(c, "counters: %s", cerr);
	/* Test hook (modes 1 and 2): RINGLAB_STALL_THREAD=producer|consumer
	 * makes that thread never reach its first barrier and never return, to
	 * test the barrier timeout and the abandoning of a worker. */
	if (stall && nthreads == 2 && !strcmp(stall, rl_role_name[wk->role]))
		for (;;)
			pause();

	for (int k = 0; k < o->repeats; k++) {
		struct rl_bench_iter *it = &c->res->iters[k];
		struct rl_waiter w = { 0, 0 };
		struct rusage ru0, ru1;
		long long bad = 0;
		void *got = NULL;
		int64_t ns;
		int cpu0, cpu1;

		/* Mode 2: fill the ring outside the measured region. */
		if (wk->role == 0 && prefill) {
			for (long long i = 1; i <= prefill; i++) {
				int rc = o->lock ? ptr_ring_produce(c->r, (void *)(uintptr_t)i)
						 : __ptr_ring_produce(c->r, (void *)(uintptr_t)i);
				if (rc) {
					rl_fail(c, "near-full prefill: produce %lld of %lld failed (%d)",
						i, prefill, rc);
					break;
				}
			}
		}
		if (rl_barrier(wk, &sense, "before the measured loop", k) || rl_aborted(c))
			break;

		getrusage(RUSAGE_THREAD, &ru0);
		rl_counters_enable(&cs);
		cpu0 = sched_getcpu();
		if (o->mode == 0) {
			ns = o->lock ? rl_measured_simple_locked(c->r, o->count, &bad)
				     : rl_measured_simple(c->r, o->count, &bad);
		} else if (wk->role == 0) {
			ns = o->lock ? rl_measured_producer_locked(c, prefill + 1, o->count, &w)
				     : rl_measured_producer(c, prefill + 1, o->count, &w);
		} else {
			ns = o->lock ? rl_measured_consumer_locked(c, o->count, &w, &bad, &got)
				     : rl_measured_consumer(c, o->count, &w, &bad, &got);
		}
		cpu1 = sched_getcpu();
		rl_counters_disable(&cs);
		getrusage(RUSAGE_THREAD, &ru1);

		rl_counters_read(&cs);
		it->cnt[wk->role] = cs;
		wk->ctx_vol += ru1.ru_nvcsw - ru0.ru_nvcsw;
		wk->ctx_invol += ru1.ru_nivcsw - ru0.ru_nivcsw;
		if (wk->role == 0) {
			it->ns_producer = (double)ns;
			it->cpu_producer_start = cpu0;
			it->cpu_producer_end = cpu1;
			it->yields_producer = w.yields;
		} else {
			it->ns_consumer = (double)ns;
			it->cpu_consumer_start = cpu0;
			it->cpu_consumer_end = cpu1;
			it->yields_consumer = w.yields;
		}
		if (bad) {
			if (o->mode == 0)
				rl_fail(c, "order violation at index %lld: produce/consume round trip failed",
					bad);
			else
				rl_fail(c, "order violation at index %lld: expected %lld, got %lld",
					bad, bad, (long long)(uintptr_t)got);
		}
		/* Both sides done: now __ptr_ring_empty is reliable. */
		if (rl_barrier(wk, &sense, "after the measured loop", k))
			break;
		if (!rl_aborted(c) && wk->role == nthreads - 1 && !__ptr_ring_empty(c->r))
			rl_fail(c, "ring not empty after iteration %d of %lld items", k, o->count);
		if (rl_barrier(wk, &sense, "after the empty check", k) || rl_aborted(c))
			break;
	}
	rl_counters_close(&cs);
	rl_notify(c, wk, 1);
	return NULL;
}

/* ---- validation ---- */

static void rl_allowed_cpus(char *buf, size_t len, const cpu_set_t *set)
{
	size_t o = 0;
	int first = 1;

	buf[0] = 0;
	for (int i = 0; i < CPU_SETSIZE && o + 16 < len; i++) {
		int j = i;

		if (!CPU_ISSET(i, set))
			continue;
		while (j + 1 < CPU_SETSIZE && CPU_ISSET(j + 1, set))
			j++;
		o += snprintf(buf + o, len - o, "%s%d", first ? "" : ",", i);
		if (j > i)
			o += snprintf(buf + o, len - o, "-%d", j);
		first = 0;
		i = j;
	}
}

static int rl_check_cpu(const char *opt, int cpu, char *err, size_t errlen)
{
	cpu_set_t set;
	char allowed[256];

	if (cpu < 0)
		return 0;
	CPU_ZERO(&set);
	if (sched_getaffinity(0, sizeof(set), &set)) {
		snprintf(err, errlen, "%s %d: cannot read the allowed CPUs (sched_getaffinity)", opt, cpu);
		return -1;
	}
	if (cpu >= CPU_SETSIZE || !CPU_ISSET(cpu, &set)) {
		rl_allowed_cpus(allowed, sizeof(allowed), &set);
		snprintf(err, errlen,
			 "%s %d: not an online CPU this process may run on; allowed: %s",
			 opt, cpu, allowed);
		return -1;
	}
	return 0;
}

int rl_bench_check(const struct rl_bench_opts *o, char *err, size_t errlen)
{
	if (o->size < RL_MIN_RING_SIZE || o->size > RL_MAX_RING_SIZE) {
		snprintf(err, errlen, "-s (size) %d: allowed: an integer in [%d, %d]",
			 o->size, RL_MIN_RING_SIZE, RL_MAX_RING_SIZE);
		return RL_BENCH_EINVAL;
	}
	if (o->mode < 0 || o->mode > 2) {
		snprintf(err, errlen, "-m (mode) %d: allowed: 0 (simple), 1 (spsc), 2 (near-full)", o->mode);
		return RL_BENCH_EINVAL;
	}
	if (o->count <= 0 || o->count > RL_MAX_COUNT) {
		snprintf(err, errlen, "-N (count) %lld: allowed: an integer in [1, %lld]", o->count,
			 RL_MAX_COUNT);
		return RL_BENCH_EINVAL;
	}
	if (o->barrier_timeout_s < 0 || o->barrier_timeout_s > 86400) {
		snprintf(err, errlen, "--barrier-timeout %d: allowed: an integer in [1, 86400] (0 = %d)",
			 o->barrier_timeout_s, RL_BARRIER_TIMEOUT_S);
		return RL_BENCH_EINVAL;
	}
	if (o->ring_offset < 0 || o->ring_offset > RL_MAX_RING_OFFSET || o->ring_offset % 64) {
		snprintf(err, errlen, "--ring-offset %d: allowed: a multiple of 64 in [0, %d]",
			 o->ring_offset, RL_MAX_RING_OFFSET);
		return RL_BENCH_EINVAL;
	}
	if (o->repeats < 1 || o->repeats > 1000000) {
		snprintf(err, errlen, "-r (repeats) %d: allowed: an integer in [1, 1000000]", o->repeats);
		return RL_BENCH_EINVAL;
	}
	if (o->batch < 0 || o->batch > o->size) {
		snprintf(err, errlen, "-b (batch) %d: allowed: an integer in [1, size=%d] (0 = ring default)",
			 o->batch, o->size);
		return RL_BENCH_EINVAL;
	}
#ifndef RINGLAB_HAS_SET_BATCH
	if (o->batch > 0) {
		snprintf(err, errlen, "-b (batch) %d: variant '%s' has no batch to override; allowed: omit -b",
			 o->batch, RINGLAB_VARIANT);
		return RL_BENCH_EINVAL;
	}
#endif
	if (o->cpu_producer < -1 || o->cpu_consumer < -1) {
		snprintf(err, errlen, "%s %d: allowed: a CPU number >= 0",
			 o->cpu_producer < -1 ? "-p (cpu_producer)" : "-c (cpu_consumer)",
			 o->cpu_producer < -1 ? o->cpu_producer : o->cpu_consumer);
		return RL_BENCH_EINVAL;
	}
	if (o->mode == 0 && o->cpu_consumer >= 0) {
		snprintf(err, errlen, "-c (cpu_consumer) %d: mode 0 has no consumer thread; allowed: omit -c, or use -p",
			 o->cpu_consumer);
		return RL_BENCH_EINVAL;
	}
	if (rl_check_cpu("-p (cpu_producer)", o->cpu_producer, err, errlen) ||
	    rl_check_cpu("-c (cpu_consumer)", o->cpu_consumer, err, errlen))
		return RL_BENCH_EINVAL;
	if (rl_counters_check_list(o->counters, err, errlen))
		return RL_BENCH_EINVAL;
	if ((unsigned long long)o->count >= (unsigned long long)(UINTPTR_MAX >> 1)) {
		snprintf(err, errlen, "-N (count) %lld: too large for pointer values on this machine",
			 o->count);
		return RL_BENCH_EINVAL;
	}
	return RL_BENCH_OK;
}

/* ---- run ---- */

/*
 * Join the workers th[i] (roles given by c->wk[first + i]).  Normally a
 * plain wait, with no periodic wake-ups that could disturb the measured
 * threads.  Once the barrier is broken (a worker timed out waiting for its
 * peer, or a thread could not be created), the others get the barrier
 * timeout to return; a worker still running after that is detached and
 * abandoned, and err says which.  Returns the number abandoned.
 */
static int rl_join_workers(struct rl_ctx *c, pthread_t *th, int first, int n)
{
	struct timespec deadline;
	int running, abandoned = 0;

	pthread_mutex_lock(&c->lock);
	for (;;) {
		running = 0;
		for (int i = 0; i < n; i++)
			running += !__atomic_load_n(&c->wk[first + i].exited, __ATOMIC_ACQUIRE);
		if (!running || rl_spin_barrier_broken(&c->bar))
			break;
		pthread_cond_wait(&c->cond, &c->lock);
	}
	if (running) {
		clock_gettime(CLOCK_MONOTONIC, &deadline);
		deadline.tv_sec += c->barrier_timeout_ns / 1000000000LL;
		for (;;) {
			running = 0;
			for (int i = 0; i < n; i++)
				running += !__atomic_load_n(&c->wk[first + i].exited, __ATOMIC_ACQUIRE);
			if (!running || pthread_cond_timedwait(&c->cond, &c->lock, &deadline) == ETIMEDOUT)
				break;
		}
	}
	pthread_mutex_unlock(&c->lock);
	for (int i = 0; i < n; i++) {
		struct rl_worker *wk = &c->wk[first + i];

		if (__atomic_load_n(&wk->exited, __ATOMIC_ACQUIRE)) {
			pthread_join(th[i], NULL);
			continue;
		}
		pthread_detach(th[i]);
		abandoned++;
		size_t len = strlen(c->err);

		if (len + 1 < c->errlen)
			snprintf(c->err + len, c->errlen - len,
				 "; the %s thread did not stop within %lld s and was abandoned",
				 rl_role_name[wk->role], (long long)(c->barrier_timeout_ns / 1000000000LL));
	}
	return abandoned;
}

int rl_bench_run(const struct rl_bench_opts *o, struct rl_bench_result *res,
		 char *err, size_t errlen)
{
	struct rl_ctx *c;
	pthread_t th[2];
	struct ptr_ring *r = NULL;
	void *page = NULL, *spacer = NULL;
	int n, rc, started = 0;

	if (errlen)
		err[0] = 0;
	rc = rl_bench_check(o, err, errlen);
	if (rc)
		return rc;
	if (!res->iters || res->iters_cap < o->repeats) {
		snprintf(err, errlen, "result has room for %d iterations, -r (repeats) is %d",
			 res->iters_cap, o->repeats);
		return RL_BENCH_EINVAL;
	}
	snprintf(res->variant, sizeof(res->variant), "%s", RINGLAB_VARIANT);
	res->n_iters = 0;
	res->ctx_voluntary = res->ctx_involuntary = 0;
	for (int k = 0; k < o->repeats; k++) {
		struct rl_bench_iter *it = &res->iters[k];

		memset(it, 0, sizeof(*it));
		it->ns_consumer = NAN;
		it->cpu_producer_start = it->cpu_producer_end = -1;
		it->cpu_consumer_start = it->cpu_consumer_end = -1;
	}

	c = calloc(1, sizeof(*c));
	/*
	 * The ring gets its own cache lines, like the seed's static aligned one,
	 * ring_offset bytes into a page.  A spacer of the same size is allocated
	 * just before ptr_ring_init, so the slot array moves through the heap
	 * too.  Neither is touched inside the measured loops.
	 */
	if (!c || posix_memalign(&page, 4096, (size_t)o->ring_offset + sizeof(*r)) ||
	    !(spacer = malloc((size_t)o->ring_offset + 1))) {
		free(page);
		free(c);
		snprintf(err, errlen, "out of memory allocating the ring");
		return RL_BENCH_FAIL;
	}
	r = (struct ptr_ring *)((char *)page + o->ring_offset);
	memset(r, 0, sizeof(*r));
	if (ptr_ring_init(r, o->size, 0)) {
		free(spacer);
		free(page);
		free(c);
		snprintf(err, errlen, "ptr_ring_init(size=%d) failed: out of memory", o->size);
		return RL_BENCH_FAIL;
	}
#ifdef RINGLAB_HAS_SET_BATCH
	if (o->batch > 0)
		__ptr_ring_set_batch(r, o->batch);
#endif
	res->batch = RL_RING_BATCH(r);

	c->o = o;
	c->r = r;
	c->res = res;
	c->err = err;
	c->errlen = errlen;
	c->barrier_timeout_ns = (int64_t)(o->barrier_timeout_s > 0 ? o->barrier_timeout_s
							     : RL_BARRIER_TIMEOUT_S) * 1000000000LL;
	{
		pthread_condattr_t ca;

		pthread_condattr_init(&ca);
		pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
		pthread_cond_init(&c->cond, &ca);
		pthread_condattr_destroy(&ca);
		pthread_mutex_init(&c->lock, NULL);
	}
	n = o->mode == 0 ? 1 : 2;
	rl_spin_barrier_init(&c->bar, n);
	for (int i = 0; i < n; i++) {
		c->wk[i].ctx = c;
		c->wk[i].role = i;
		c->wk[i].cpu = i == 0 ? o->cpu_producer : o->cpu_consumer;
		c->wk[i].ctx_vol = c->wk[i].ctx_invol = 0;
		c->wk[i].exited = 0;
	}
	/* Consumer first, like a server waiting for work; start order does
	 * not matter because of the barrier. */
	for (int i = n - 1; i >= 0; i--) {
		if (pthread_create(&th[i], NULL, rl_worker_main, &c->wk[i])) {
			/* cannot run with a missing peer: release the ones that
			 * started (they return from their first barrier) */
			rl_fail(c, "pthread_create of the %s thread failed", rl_role_name[i]);
			rl_spin_barrier_break(&c->bar);
			break;
		}
		started++;
	}
	/* th[n-started] .. th[n-1] are running */
	if (rl_join_workers(c, th + (n - started), n - started, started)) {
		/* a worker may still use r, c and res: leave r and c allocated */
		return RL_BENCH_FAIL;
	}
	if (started < n) {
		rc = RL_BENCH_FAIL;
		goto out;
	}
	for (int i = 0; i < n; i++) {
		res->ctx_voluntary += c->wk[i].ctx_vol;
		res->ctx_involuntary += c->wk[i].ctx_invol;
	}
	for (int k = 0; k < o->repeats; k++) {
		struct rl_bench_iter *it = &res->iters[k];

		if (c->failed && it->cpu_producer_start < 0)
			break;
		it->elapsed_ns = it->ns_producer;
		if (n == 2 && it->ns_consumer > it->elapsed_ns)
			it->elapsed_ns = it->ns_consumer;
		it->ns_per_op = it->elapsed_ns / (double)o->count;
		res->n_iters = k + 1;
	}
	rc = c->failed ? RL_BENCH_FAIL : RL_BENCH_OK;
out:
	pthread_cond_destroy(&c->cond);
	pthread_mutex_destroy(&c->lock);
	ptr_ring_cleanup(r, NULL);
	free(spacer);
	free(page);
	free(c);
	return rc;
}

/* ---- JSON ---- */

static void rl_json_num(FILE *f, double v)
{
	if (isnan(v))
		fputs("null", f);
	else
		fprintf(f, "%.17g", v);
}

static void rl_json_cpu(FILE *f, int cpu)
{
	if (cpu < 0)
		fputs("null", f);
	else
		fprintf(f, "%d", cpu);
}

char *rl_bench_json(const struct rl_bench_opts *o, const struct rl_bench_result *res)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	if (!f)
		return NULL;
	fprintf(f, "{\"schema\": 1, \"binary\": \"ptr_ring_test\", \"variant\": \"%s\", "
		"\"mode\": %d, \"size\": %d, \"batch\": ", res->variant, o->mode, o->size);
	if (res->batch < 0)
		fputs("null", f);
	else
		fprintf(f, "%d", res->batch);
	fprintf(f, ", \"count\": %lld, \"lock\": %s, \"repeats\": %d, \"ring_offset\": %d, "
		"\"cpu_req_producer\": %d, \"cpu_req_consumer\": %d, "
		"\"ctx_voluntary\": %lld, \"ctx_involuntary\": %lld, \"iterations\": [",
		o->count, o->lock ? "true" : "false", o->repeats, o->ring_offset, o->cpu_producer,
		o->mode == 0 ? -1 : o->cpu_consumer, res->ctx_voluntary, res->ctx_involuntary);
	for (int k = 0; k < res->n_iters; k++) {
		const struct rl_bench_iter *it = &res->iters[k];
		const struct rl_counters *sets[2] = { &it->cnt[0], &it->cnt[1] };

		fputs(k ? ", {\"ns_producer\": " : "{\"ns_producer\": ", f);
		rl_json_num(f, it->ns_producer);
		fputs(", \"ns_consumer\": ", f);
		rl_json_num(f, o->mode == 0 ? NAN : it->ns_consumer);
		fputs(", \"elapsed_ns\": ", f);
		rl_json_num(f, it->elapsed_ns);
		fputs(", \"ns_per_op\": ", f);
		rl_json_num(f, it->ns_per_op);
		fputs(", \"cpu_producer_start\": ", f);
		rl_json_cpu(f, it->cpu_producer_start);
		fputs(", \"cpu_producer_end\": ", f);
		rl_json_cpu(f, it->cpu_producer_end);
		fputs(", \"cpu_consumer_start\": ", f);
		rl_json_cpu(f, it->cpu_consumer_start);
		fputs(", \"cpu_consumer_end\": ", f);
		rl_json_cpu(f, it->cpu_consumer_end);
		fprintf(f, ", \"yields_producer\": %lld, \"yields_consumer\": ", it->yields_producer);
		if (o->mode == 0)
			fputs("null", f);
		else
			fprintf(f, "%lld", it->yields_consumer);
		fputs(", \"counters\": ", f);
		rl_counters_json(f, sets, o->mode == 0 ? 1 : 2);
		fputc('}', f);
	}
	fputs("]}", f);
	fclose(f);
	return buf;
}

void rl_bench_free(void *p)
{
	free(p);
}

/* ---- selftest ---- */

#define RL_ST(cond, ...) do { if (!(cond)) { snprintf(err, errlen, __VA_ARGS__); goto fail; } } while (0)

static int rl_selftest_size(int size, char *err, size_t errlen)
{
	struct ptr_ring *r = NULL;
	void *arr[8];
	long long next_in = 1, next_out = 1;
	int batch, freed;

	if (posix_memalign((void **)&r, 64, sizeof(*r)))
		return snprintf(err, errlen, "ENOMEM"), 1;
	memset(r, 0, sizeof(*r));
	RL_ST(!ptr_ring_init(r, size, 0), "size %d: ptr_ring_init failed", size);
	batch = RL_RING_BATCH(r);
#if RINGLAB_GEN_BATCH && !defined(RINGLAB_RING_BATCH)
	{
		int want = (int)(2 * 64 / sizeof(void *));

		if (want > size / 2)
			want = 1;
		RL_ST(batch == want, "size %d: batch %d, expected %d", size, batch, want);
	}
#endif
	RL_ST(__ptr_ring_empty(r), "size %d: new ring not empty", size);
	RL_ST(!__ptr_ring_full(r), "size %d: new ring full", size);
	RL_ST(__ptr_ring_consume(r) == NULL, "size %d: consume on empty ring returned non-NULL", size);
	RL_ST(__ptr_ring_peek(r) == NULL, "size %d: peek on empty ring returned non-NULL", size);
	/* fill: exactly size entries fit */
	for (int i = 0; i < size; i++)
		RL_ST(!__ptr_ring_produce(r, (void *)(uintptr_t)next_in++),
		      "size %d: produce %d of %d failed", size, i + 1, size);
	RL_ST(__ptr_ring_full(r), "size %d: not full after %d produces", size, size);
	RL_ST(__ptr_ring_produce(r, (void *)1) == -ENOSPC, "size %d: produce on full ring did not return -ENOSPC", size);
	RL_ST(!__ptr_ring_empty(r), "size %d: full ring reports empty", size);
	RL_ST(__ptr_ring_peek(r) == (void *)(uintptr_t)next_out, "size %d: peek did not return the oldest", size);
	/* With batched NULLing a consume no longer guarantees room for the
	 * next produce: room appears after at most `batch` consumes. */
	freed = 0;
	while (__ptr_ring_full(r)) {
		RL_ST(__ptr_ring_consume(r) == (void *)(uintptr_t)next_out, "size %d: FIFO broken at %lld", size, next_out);
		next_out++;
		freed++;
		RL_ST(freed <= (batch > 0 ? batch : 1), "size %d: still full after %d consumes (batch %d)", size, freed, batch);
	}
	/* laps with varying fill levels, through every wrap position */
	for (int lap = 0; lap < 3 * size + 7; lap++) {
		int k = 1 + lap % (size > 5 ? 5 : size);

		for (int i = 0; i < k; i++) {
			if (__ptr_ring_full(r))
				break;
			RL_ST(!__ptr_ring_produce(r, (void *)(uintptr_t)next_in), "size %d: produce failed while not full", size);
			next_in++;
		}
		for (int i = 0; i < k; i++) {
			void *p = (lap & 1) ? ptr_ring_consume(r) : __ptr_ring_consume(r);

			if (!p)
				break;
			RL_ST(p == (void *)(uintptr_t)next_out, "size %d: FIFO broken: got %lld, expected %lld",
			      size, (long long)(uintptr_t)p, next_out);
			next_out++;
		}
	}
	/* locked produce + consume_batched drain */
	while (!ptr_ring_produce(r, (void *)(uintptr_t)next_in))
		next_in++;
	for (;;) {
		int got = ptr_ring_consume_batched(r, arr, 8);

		for (int i = 0; i < got; i++) {
			RL_ST(arr[i] == (void *)(uintptr_t)next_out, "size %d: consume_batched out of order", size);
			next_out++;
		}
		if (got < 8)
			break;
	}
	RL_ST(next_in == next_out, "size %d: lost entries (%lld produced, %lld consumed)", size, next_in - 1, next_out - 1);
	RL_ST(__ptr_ring_empty(r), "size %d: not empty after draining", size);
	RL_ST(__ptr_ring_consume(r) == NULL, "size %d: consume after drain returned non-NULL", size);
	ptr_ring_cleanup(r, NULL);
	free(r);
	return 0;
fail:
	free(r->queue);	/* the slot array only: locks may be uninitialised */
	free(r);
	return 1;
}

int rl_bench_selftest(char *err, size_t errlen)
{
	static const int sizes[] = { 2, 3, 4, 16, 17, 31, 32, 33, 1000, 1024 };

	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
		if (rl_selftest_size(sizes[i], err, errlen))
			return 1;
	return 0;
}

/* ---- this copy's entry (ptr_ring_bench.h: struct rl_bench_entry) ----
 *
 * Written in assembly, not as a C initializer: a C reference to the functions'
 * addresses would make gcc emit them in another order, moving the measured code
 * of every build.  The fields are in the order of struct rl_bench_entry. */
_Static_assert(sizeof(struct rl_bench_entry) == 7 * sizeof(void *),
	       "struct rl_bench_entry: seven pointers, as the table below writes it");
#define RL_ASTR_(x) #x
#define RL_ASTR(x) RL_ASTR_(x)
__asm__(".pushsection rl_bench_copies,\"aw\"\n"
	"\t.balign " RL_ASTR(__SIZEOF_POINTER__) "\n"
	"\t.dc.a rl_bench_run, rl_bench_check, rl_bench_selftest, rl_bench_json\n"
	"\t.dc.a rl_bench_free, rl_bench_variant, rl_measured_simple\n"
	".popsection\n");
