/* SPDX-License-Identifier: MIT */
/*
 * counters.h - per-thread perf_event_open counters around a measured region.
 *
 * Shared by ptr_ring_test, page_frag_test and syscall_loop.  Usage, in the
 * thread that runs the measured region:
 *
 *	struct rl_counters c;
 *	char err[256];
 *	if (rl_counters_open(&c, list, err, sizeof(err)))   // before the loop
 *		usage error (err names the bad event)
 *	rl_counters_enable(&c);          // reset + enable, right before t0
 *	... measured region ...
 *	rl_counters_disable(&c);         // right after t1
 *	rl_counters_read(&c);            // values for this region
 *	rl_counters_json(stdout, &c, 1); // or rl_counters_add() over threads
 *	rl_counters_close(&c);
 *
 * Events (names of ringlab.schema.COUNTER_EVENTS): cycles, instructions,
 * branches, branch_misses, cache_misses (hardware, one group so their ratios
 * are consistent), task_clock, context_switches, cpu_migrations, page_faults
 * (software, each opened on its own so a missing PMU never takes them down).
 *
 * Honest numbers: an event that does not open has ok == 0 and a reason such
 * as "not supported (ENOENT)" or "permission denied (EACCES,
 * perf_event_paranoid=3)"; it is printed as null, never 0.  When the kernel
 * multiplexed an event (time_running < time_enabled) the value is scaled and
 * flagged.  Counts include kernel mode when allowed (scope "user+kernel"),
 * otherwise they are retried user-only (scope "user").
 *
 * list: NULL, "" or "all" = every event; "none" = nothing (all calls become
 * no-ops); otherwise a comma-separated subset.  An unknown name is an error.
 *
 * Testing hook: RINGLAB_COUNTERS_FAIL="cycles:EACCES,task_clock:ENOENT"
 * makes those events fail as if perf_event_open had returned that errno.
 */
#ifndef RINGLAB_COUNTERS_H
#define RINGLAB_COUNTERS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define RL_COUNTERS_MAX 9

struct rl_counter {
	const char *name;	/* schema name, e.g. "branch_misses" */
	int fd;			/* -1 when not open */
	int ok;			/* opened successfully */
	int user_only;		/* fell back to exclude_kernel=1 */
	char error[96];		/* reason when !ok (or never scheduled) */
	/* from the last rl_counters_read(): */
	uint64_t raw, enabled, running;
	double value;		/* raw * enabled / running */
	int multiplexed;	/* running < enabled */
	int have_value;		/* read succeeded and running > 0 */
};

struct rl_counters {
	int n;			/* events requested */
	int disabled;		/* "none" */
	struct rl_counter c[RL_COUNTERS_MAX];
};

/* Open the requested events for the calling thread (disabled).  Returns 0,
 * or -1 with err naming the unknown event (the only hard error: an event the
 * machine cannot count is recorded with its reason, not an error). */
int rl_counters_open(struct rl_counters *cs, const char *list, char *err, size_t errlen);
/* Validate a list without opening anything (for argument parsing). */
int rl_counters_check_list(const char *list, char *err, size_t errlen);
void rl_counters_enable(struct rl_counters *cs);	/* reset + enable */
void rl_counters_disable(struct rl_counters *cs);
void rl_counters_read(struct rl_counters *cs);
void rl_counters_close(struct rl_counters *cs);
/* dst += src, event by event (summing threads); dst must have been opened
 * with the same list, or zeroed by rl_counters_sum_init(dst, src). */
void rl_counters_sum_init(struct rl_counters *dst, const struct rl_counters *src);
void rl_counters_add(struct rl_counters *dst, const struct rl_counters *src);
/* Write {"cycles": {"value":..,"raw":..,"enabled":..,"running":..,
 * "multiplexed":..,"error":..,"scope":..}, ...} for the sum of sets[0..n). */
void rl_counters_json(FILE *f, const struct rl_counters *const *sets, int nsets);

#endif /* RINGLAB_COUNTERS_H */
