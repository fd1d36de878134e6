/* SPDX-License-Identifier: MIT */
/* util.h - harness helpers: cpu_relax, monotonic ns, a spinning start barrier. */
#ifndef RINGLAB_UTIL_H
#define RINGLAB_UTIL_H

#include <sched.h>
#include <stdint.h>
#include <time.h>

/* Busy-wait hint: pause on x86 (ringtest's "rep; nop"), yield on arm64,
 * otherwise just a compiler barrier (the polled loads are atomic anyway). */
static inline void rl_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__asm__ __volatile__("pause" ::: "memory");
#elif defined(__aarch64__)
	__asm__ __volatile__("yield" ::: "memory");
#else
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
#endif
}

static inline int64_t rl_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/*
 * Spin-then-yield.  Two threads spinning on one CPU (both pinned to the same
 * CPU, or a 1-CPU container) would each burn a whole time slice waiting for
 * the other: a livelock in all but name.  After RL_SPIN_LIMIT failed polls we
 * call sched_yield() on every further poll and count it, so the results show
 * when it happened.  This is only reached when a wait is already long
 * (~tens of microseconds of pause), never on the fast path.
 */
#define RL_SPIN_LIMIT 4096

struct rl_waiter {
	unsigned spins;
	long long yields;
};

static inline void rl_wait_step(struct rl_waiter *w)
{
	if (w->spins < RL_SPIN_LIMIT) {
		w->spins++;
		rl_cpu_relax();
	} else {
		w->yields++;
		sched_yield();
	}
}

/* Sense-reversing spin barrier for the worker threads (no futex wake-up
 * latency between the two starts). */
struct rl_spin_barrier {
	int n;
	int count;
	int sense;
};

static inline void rl_spin_barrier_init(struct rl_spin_barrier *b, int n)
{
	b->n = n;
	b->count = 0;
	b->sense = 0;
}

static inline void rl_spin_barrier_wait(struct rl_spin_barrier *b, int *local_sense)
{
	struct rl_waiter w = { 0, 0 };

	*local_sense = !*local_sense;
	if (__atomic_add_fetch(&b->count, 1, __ATOMIC_ACQ_REL) == b->n) {
		__atomic_store_n(&b->count, 0, __ATOMIC_RELAXED);
		__atomic_store_n(&b->sense, *local_sense, __ATOMIC_RELEASE);
	} else {
		while (__atomic_load_n(&b->sense, __ATOMIC_ACQUIRE) != *local_sense)
			rl_wait_step(&w);
	}
}

#endif /* RINGLAB_UTIL_H */
