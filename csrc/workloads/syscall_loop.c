/*
 * syscall_loop: the seed-004 workload (Wang Nan's test-ring-buffer, 2016).
 *
 * It calls close(-1) N times and times the loop.  Every call is one syscall
 * entry and one exit, so under `perf record -e 'raw_syscalls:*'` each call
 * puts two records into perf's kernel ring buffer; (time under perf - time
 * alone) / N is the cost of those two records.
 *
 * Differences from the seed, on purpose:
 *   - CLOCK_MONOTONIC instead of gettimeofday(): immune to NTP steps;
 *   - only the loop is timed (rl_measured_syscall_loop), not process start;
 *   - the CPU is read with sched_getcpu() before and after the loop, so a
 *     migration during the measured region is visible in the data;
 *   - getrusage() context-switch deltas over the loop: when perf shares the
 *     CPU with the workload, perf's wake-ups show up here.
 *
 * Usage: syscall_loop -N COUNT [-c CPU] [-r REPEATS] [--json] [--counters LIST|none]
 *
 * Plain output, one line per repeat (the format ringlab parses; keep stable):
 *   syscall_loop: 3000000 close(-1) calls took 800214.950 us, cpu 6 -> 6
 * --json: one object in the docs/architecture.md shape (consumer fields null).
 *
 * Exit codes: 0 ok, 1 runtime failure (e.g. pinning to an offline CPU),
 * 2 usage error (the message names the argument).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#define MAX_COUNT 1000000000000LL /* 1e12: sanity bound, hours of syscalls */
#define MAX_REPEATS 1000

static void usage(FILE *f)
{
	fprintf(f,
		"usage: syscall_loop -N COUNT [-c CPU] [-r REPEATS] [--json] [--counters LIST|none]\n"
		"  -N COUNT     close(-1) calls in the timed loop (1..%lld)\n"
		"  -c CPU       pin this process to CPU before the loop (default: not pinned)\n"
		"  -r REPEATS   timed loops in this process (1..%d, default 1)\n"
		"  --json       one JSON object on stdout instead of text lines\n"
		"  --counters   accepted for harness compatibility; in-region perf_event\n"
		"               counters are not linked into this binary (reported as absent)\n",
		MAX_COUNT, MAX_REPEATS);
}

static void usage_error(const char *arg, const char *why, const char *val)
{
	fprintf(stderr, "syscall_loop: %s: %s%s%s%s\n", arg, why,
		val ? " '" : "", val ? val : "", val ? "'" : "");
	usage(stderr);
	exit(2);
}

/* Strict integer parse: the whole string must be a number within [lo, hi]. */
static long long parse_ll(const char *arg, const char *s, long long lo, long long hi)
{
	char *end;
	long long v;

	if (!s)
		usage_error(arg, "missing value", NULL);
	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno || end == s || *end != '\0')
		usage_error(arg, "not an integer", s);
	if (v < lo || v > hi) {
		char why[96];
		snprintf(why, sizeof(why), "out of range [%lld, %lld]", lo, hi);
		usage_error(arg, why, s);
	}
	return v;
}

static double now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/*
 * The measured region.  noinline and named rl_measured_* so callgrind's
 * --toggle-collect can count only this (docs/architecture.md).  close(-1)
 * is an external call the compiler cannot drop; it fails with EBADF
 * after a full syscall entry/exit, which is exactly what is traced.
 */
__attribute__((noinline)) long long rl_measured_syscall_loop(long long n)
{
	long long failed = 0;

	for (long long i = 0; i < n; i++)
		failed += (close(-1) != 0);
	return failed;
}

struct iteration {
	double elapsed_ns;
	int cpu_start, cpu_end;
};

int main(int argc, char **argv)
{
	long long count = -1;
	long long cpu = -1;
	long long repeats = 1;
	int json = 0;
	struct iteration *it;
	struct rusage ru0, ru1;

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char *v = (i + 1 < argc) ? argv[i + 1] : NULL;

		if (!strcmp(a, "-N")) {
			count = parse_ll("-N", v, 1, MAX_COUNT);
			i++;
		} else if (!strcmp(a, "-c")) {
			cpu = parse_ll("-c", v, 0, CPU_SETSIZE - 1);
			i++;
		} else if (!strcmp(a, "-r")) {
			repeats = parse_ll("-r", v, 1, MAX_REPEATS);
			i++;
		} else if (!strcmp(a, "--json")) {
			json = 1;
		} else if (!strcmp(a, "--counters")) {
			if (!v)
				usage_error("--counters", "missing value (LIST or none)", NULL);
			i++; /* see usage(): no in-region counters in this binary */
		} else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			usage(stdout);
			return 0;
		} else {
			usage_error(a, "unknown argument", NULL);
		}
	}
	if (count < 0)
		usage_error("-N", "required", NULL);

	if (cpu >= 0) {
		cpu_set_t set;

		CPU_ZERO(&set);
		CPU_SET((int)cpu, &set);
		if (sched_setaffinity(0, sizeof(set), &set) != 0) {
			fprintf(stderr, "syscall_loop: -c %lld: cannot pin: %s\n", cpu, strerror(errno));
			return 1;
		}
		/* As in the seed (pthread_yield after setaffinity): get moved now,
		 * not at the first tick inside the measured region. */
		sched_yield();
	}

	it = calloc((size_t)repeats, sizeof(*it));
	if (!it) {
		fprintf(stderr, "syscall_loop: out of memory\n");
		return 1;
	}

	getrusage(RUSAGE_SELF, &ru0);
	for (long long r = 0; r < repeats; r++) {
		double t0, t1;
		long long failed;

		it[r].cpu_start = sched_getcpu();
		t0 = now_ns();
		failed = rl_measured_syscall_loop(count);
		t1 = now_ns();
		it[r].cpu_end = sched_getcpu();
		it[r].elapsed_ns = t1 - t0;
		if (failed != count) {
			/* close(-1) succeeding would mean we measured something else. */
			fprintf(stderr, "syscall_loop: close(-1) succeeded %lld times\n", count - failed);
			return 1;
		}
	}
	getrusage(RUSAGE_SELF, &ru1);

	if (!json) {
		for (long long r = 0; r < repeats; r++)
			printf("syscall_loop: %lld close(-1) calls took %.3f us, cpu %d -> %d\n",
			       count, it[r].elapsed_ns / 1e3, it[r].cpu_start, it[r].cpu_end);
	} else {
		printf("{\"schema\": 1, \"binary\": \"syscall_loop\", \"count\": %lld, \"cpu_req\": %lld, "
		       "\"ctx_voluntary\": %ld, \"ctx_involuntary\": %ld, \"iterations\": [",
		       count, cpu, ru1.ru_nvcsw - ru0.ru_nvcsw, ru1.ru_nivcsw - ru0.ru_nivcsw);
		for (long long r = 0; r < repeats; r++)
			printf("%s{\"ns_producer\": %.1f, \"ns_consumer\": null, \"elapsed_ns\": %.1f, "
			       "\"ns_per_op\": %.4f, \"cpu_producer_start\": %d, \"cpu_producer_end\": %d, "
			       "\"cpu_consumer_start\": null, \"cpu_consumer_end\": null}",
			       r ? ", " : "", it[r].elapsed_ns, it[r].elapsed_ns,
			       it[r].elapsed_ns / (double)count, it[r].cpu_start, it[r].cpu_end);
		printf("]}\n");
	}
	fflush(stdout);
	free(it);
	return 0;
}
