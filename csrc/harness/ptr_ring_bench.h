/* SPDX-License-Identifier: MIT */
/*
 * ptr_ring_bench.h - the timed loops of ptr_ring_test, shared by the
 * standalone binary (ptr_ring_main.c) and the cffi module (ringlab.native).
 *
 * Reentrant: no globals; everything lives in the opts/result the caller
 * passes, so rl_bench_run() may be called with the GIL released.
 * Compiled once per ring (see ring_api.h).
 */
#ifndef RINGLAB_PTR_RING_BENCH_H
#define RINGLAB_PTR_RING_BENCH_H

#include <stddef.h>
#include <stdint.h>
#include "counters.h"

struct ptr_ring;

#define RL_MIN_RING_SIZE 2
#define RL_MAX_RING_SIZE 10000000

/* Largest -N: 10^12 items (hours per trial on any machine; far below the
 * pointer-value limit).  ringlab's `count` parameter has the same bound. */
#define RL_MAX_COUNT 1000000000000LL
/* Default of barrier_timeout_s: how long a worker waits at a barrier for its
 * peer (once it has started to yield) before the run is aborted. */
#define RL_BARRIER_TIMEOUT_S 60

/* --ring-offset: the ring struct stays cache-line aligned, anywhere in a page. */
#define RL_MAX_RING_OFFSET 4032

/* Return codes of rl_bench_run. */
#define RL_BENCH_OK      0
#define RL_BENCH_FAIL    1	/* order violation, ring not empty, system error */
#define RL_BENCH_EINVAL  2	/* bad option: err names it and the allowed values */

struct rl_bench_opts {
	int size;		/* 2 .. 10,000,000 */
	int mode;		/* 0 simple, 1 spsc, 2 near-full */
	long long count;	/* N in [1, RL_MAX_COUNT] */
	int lock;		/* 1: spinlocked ptr_ring_produce/consume */
	int batch;		/* 0: ring default; > 0: __ptr_ring_set_batch */
	int repeats;		/* timed loops in this call, >= 1 */
	int cpu_producer;	/* -1: not pinned */
	int cpu_consumer;	/* -1: not pinned (modes 1, 2 only) */
	const char *counters;	/* NULL/"all", "none", or "cycles,task_clock" */
	int barrier_timeout_s;	/* 0: RL_BARRIER_TIMEOUT_S; else 1 .. 86400 */
	int ring_offset;	/* per-trial data layout: bytes, a multiple of 64 in
				 * [0, RL_MAX_RING_OFFSET], of the ring struct within
				 * its page; the slot array moves by as much */
};

struct rl_bench_iter {
	double ns_producer;	/* producer (mode 0: the only) thread */
	double ns_consumer;	/* NaN in mode 0 */
	double elapsed_ns;	/* max over threads */
	double ns_per_op;	/* elapsed_ns / count */
	int cpu_producer_start, cpu_producer_end;	/* sched_getcpu() */
	int cpu_consumer_start, cpu_consumer_end;	/* -1 in mode 0 */
	long long yields_producer, yields_consumer;	/* spin-then-yield fallbacks */
	struct rl_counters cnt[2];	/* [0] producer, [1] consumer */
};

struct rl_bench_result {
	char variant[64];
	int batch;		/* effective batch, -1 when the ring has none */
	long long ctx_voluntary;	/* getrusage(RUSAGE_THREAD) deltas around */
	long long ctx_involuntary;	/* the measured regions, summed over threads */
	int n_iters;		/* iterations filled */
	int iters_cap;		/* capacity of iters (>= opts.repeats) */
	struct rl_bench_iter *iters;	/* caller-allocated */
};

/* Validate (err names the parameter), set up, run opts->repeats timed loops,
 * verify FIFO order and that the ring is empty after each loop.
 *
 * A worker that waits at a barrier longer than barrier_timeout_s for its
 * peer aborts the run (RL_BENCH_FAIL, err names the barrier and the missing
 * thread).  If a worker then still does not return within that time, it is
 * abandoned: rl_bench_run returns RL_BENCH_FAIL (err says so) without
 * freeing the ring, and the caller should end the process (the CLI does),
 * because the abandoned thread may still write into res. */
int rl_bench_run(const struct rl_bench_opts *o, struct rl_bench_result *res,
		 char *err, size_t errlen);

/* Only the validation part of rl_bench_run. */
int rl_bench_check(const struct rl_bench_opts *o, char *err, size_t errlen);

/* Unit test of full/empty/FIFO/wrap/batch semantics on a few ring sizes.
 * 0 ok, 1 with err describing the first failure. */
int rl_bench_selftest(char *err, size_t errlen);

/* One JSON object (schema of docs/architecture.md), malloc'd; free with
 * rl_bench_free().  NULL on ENOMEM. */
char *rl_bench_json(const struct rl_bench_opts *o, const struct rl_bench_result *res);
void rl_bench_free(void *p);

const char *rl_bench_variant(void);

/*
 * One copy of this file's code, as the standalone binary (ptr_ring_main.c)
 * reaches it.  A binary holds one or more copies (ringlab.build.layouts,
 * "layout copies"): the same object compiled once per function alignment,
 * linked several times with its global symbols made local, each instance after
 * its own pad of unused code.  Every instance puts its entry into the section
 * "rl_bench_copies" (link order = copy order) and `--copy K` runs instance K.  Invariant: every copy runs the same instructions as a
 * separate build of its layout; only the addresses of its code differ.  The
 * cffi module links one instance and calls the functions by name.
 */
struct rl_bench_entry {
	int (*run)(const struct rl_bench_opts *, struct rl_bench_result *, char *, size_t);
	int (*check)(const struct rl_bench_opts *, char *, size_t);
	int (*selftest)(char *, size_t);
	char *(*json)(const struct rl_bench_opts *, const struct rl_bench_result *);
	void (*free)(void *);
	const char *(*variant)(void);
	int64_t (*measured)(struct ptr_ring *, long long, long long *);	/* rl_measured_simple */
};

#endif /* RINGLAB_PTR_RING_BENCH_H */
