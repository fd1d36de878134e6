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

/*
 * Sense-reversing spin barrier for the worker threads (no futex wake-up
 * latency between the two starts), with a timeout so that a thread that never
 * arrives cannot hang the harness.
 *
 * Ordering: the last arriver's release store of `sense` pairs with the
 * acquire loads of the waiters, so everything a thread did before the
 * barrier is visible to every thread after it.  `broken` is set once (a wait
 * timed out, or the run could not start all threads) and never cleared:
 * every wait then returns at once, so no thread waits for a peer that is
 * gone.  A waiter spins (cpu_relax, then sched_yield, see rl_wait_step) and
 * reads the clock only once it yields, so a normal barrier costs no syscall.
 */
#define RL_BARRIER_OK		0
#define RL_BARRIER_TIMEOUT	(-1)	/* this wait timed out and broke the barrier */
#define RL_BARRIER_BROKEN	(-2)	/* broken before or by another thread */

struct rl_spin_barrier {
	int n;
	int count;
	int sense;
	int broken;
};

static inline void rl_spin_barrier_init(struct rl_spin_barrier *b, int n)
{
	b->n = n;
	b->count = 0;
	b->sense = 0;
	b->broken = 0;
}

/* Wake every waiter with RL_BARRIER_BROKEN, now and for all later waits. */
static inline void rl_spin_barrier_break(struct rl_spin_barrier *b)
{
	__atomic_store_n(&b->broken, 1, __ATOMIC_RELEASE);
}

static inline int rl_spin_barrier_broken(struct rl_spin_barrier *b)
{
	return __atomic_load_n(&b->broken, __ATOMIC_ACQUIRE);
}

/* Wait until all n threads have arrived, at most timeout_ns (> 0) once the
 * wait has started to yield.  Returns RL_BARRIER_OK, RL_BARRIER_TIMEOUT or
 * RL_BARRIER_BROKEN. */
static inline int rl_spin_barrier_wait(struct rl_spin_barrier *b, int *local_sense,
				       int64_t timeout_ns)
{
	struct rl_waiter w = { 0, 0 };
	int64_t deadline = 0;

	if (rl_spin_barrier_broken(b))
		return RL_BARRIER_BROKEN;
	*local_sense = !*local_sense;
	if (__atomic_add_fetch(&b->count, 1, __ATOMIC_ACQ_REL) == b->n) {
		__atomic_store_n(&b->count, 0, __ATOMIC_RELAXED);
		__atomic_store_n(&b->sense, *local_sense, __ATOMIC_RELEASE);
		return RL_BARRIER_OK;
	}
	while (__atomic_load_n(&b->sense, __ATOMIC_ACQUIRE) != *local_sense) {
		if (rl_spin_barrier_broken(b))
			return RL_BARRIER_BROKEN;
		rl_wait_step(&w);
		if (w.yields) {
			int64_t now = rl_now_ns();

			if (!deadline) {
				deadline = now + timeout_ns;
			} else if (now > deadline) {
				rl_spin_barrier_break(b);
				return RL_BARRIER_TIMEOUT;
			}
		}
	}
	return RL_BARRIER_OK;
}

#endif /* RINGLAB_UTIL_H */
