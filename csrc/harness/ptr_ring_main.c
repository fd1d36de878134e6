/* SPDX-License-Identifier: MIT */
/*
 * ptr_ring_main.c - seed-compatible command line of ptr_ring_test.
 *
 *   ptr_ring_test-batch -s 1000 -m 0 -N 100000000
 *   ptr_ring(size:1000) perf simple test for 100000000 times, took 2385198 us
 *
 * Same -s/-m/-N as Yunsheng Lin's 2021 ptr_ring_test, plus pinning (-p/-c),
 * batch override (-b), locked wrappers (-l), in-process repeats (-r),
 * counters, JSON output and a barrier timeout.  Exit codes: 0 ok, 1 test failure (order
 * violation, ring not empty), 2 usage error naming the argument.
 */
#define _GNU_SOURCE
#include "ptr_ring_bench.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *prog = "ptr_ring_test";

/* The copies of ptr_ring_bench.c this binary holds, in link order (see
 * struct rl_bench_entry); `--copy K` picks one, 0 by default. */
extern const struct rl_bench_entry __start_rl_bench_copies[];
extern const struct rl_bench_entry __stop_rl_bench_copies[];
static const struct rl_bench_entry *B;

static int rl_copies(void)
{
	return (int)(__stop_rl_bench_copies - __start_rl_bench_copies);
}

#define RING_OFFSET_ALLOWED "a multiple of 64 in [0, 4032] (bytes into a page)"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: %s [-s SIZE] [-m MODE] [-N COUNT] [-p CPU] [-c CPU] [-b BATCH] [-l]\n"
		"          [-r REPEATS] [--counters LIST|none] [--json] [--barrier-timeout S]\n"
		"          [--ring-offset BYTES] [--copy K] [--selftest]\n"
		"  -s SIZE     ring size, 2..10000000 (default 1000)\n"
		"  -m MODE     0 simple (one thread), 1 spsc, 2 near-full (default 0)\n"
		"  -N COUNT    items per timed loop, 1..1000000000000 (default 1000000)\n"
		"  -p CPU      pin the producer (mode 0: the only) thread\n"
		"  -c CPU      pin the consumer thread (modes 1, 2)\n"
		"  -b BATCH    override the ring's batch, 1..SIZE (batch/reorder rings)\n"
		"  -l          use the spinlocked ptr_ring_produce/consume wrappers\n"
		"  -r REPEATS  timed loops in this process, each reported (default 1)\n"
		"  --counters  perf events: all, none, or a comma list of cycles,instructions,\n"
		"              branches,branch_misses,cache_misses,task_clock,context_switches,\n"
		"              cpu_migrations,page_faults (default: all with --json, else none)\n"
		"  --json      print one JSON object instead of the seed's lines\n"
		"  --barrier-timeout S  abort when a thread waits longer than S seconds for\n"
		"              its peer at a barrier, 1..86400 (default 60)\n"
		"  --ring-offset BYTES  place the ring BYTES into its page, a multiple of 64\n"
		"              in [0, 4032] (default 0); the slot array moves as much\n"
		"  --copy K    run copy K of the measured code, 0..%d (layout copies;\n"
		"              default 0)\n"
		"  --selftest  run the full/empty/FIFO unit test and exit\n"
		"variant: %s\n", prog, rl_copies() - 1, B->variant());
}

static int bad_arg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static int bad_arg(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: error: ", prog);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	fprintf(stderr, "run '%s --help' for usage\n", prog);
	return 2;
}

/* Strict integer parse: the whole string, in [lo, hi]. */
static int parse_ll(const char *opt, const char *s, long long lo, long long hi,
		    const char *allowed, long long *out)
{
	char *end;
	long long v;

	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno || end == s || *end || v < lo || v > hi) {
		fprintf(stderr, "%s: error: %s: invalid value '%s'; allowed: %s\n", prog, opt, s, allowed);
		fprintf(stderr, "run '%s --help' for usage\n", prog);
		return -1;
	}
	*out = v;
	return 0;
}

int main(int argc, char **argv)
{
	struct rl_bench_opts o = {
		.size = 1000, .mode = 0, .count = 1000000, .lock = 0, .batch = 0,
		.repeats = 1, .cpu_producer = -1, .cpu_consumer = -1, .counters = NULL,
	};
	static const struct option longopts[] = {
		{ "json", no_argument, NULL, 'J' },
		{ "counters", required_argument, NULL, 'C' },
		{ "selftest", no_argument, NULL, 'T' },
		{ "barrier-timeout", required_argument, NULL, 'B' },
		{ "ring-offset", required_argument, NULL, 'O' },
		{ "copy", required_argument, NULL, 'K' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct rl_bench_result res;
	const char *counters = NULL;
	char err[512];
	int json = 0, selftest = 0, opt, rc;
	long long v;

	if (argv[0] && strrchr(argv[0], '/'))
		prog = strrchr(argv[0], '/') + 1;
	else if (argv[0])
		prog = argv[0];
	if (rl_copies() < 1) {
		fprintf(stderr, "%s: no copy of the measured code was linked in\n", prog);
		return 1;
	}
	B = &__start_rl_bench_copies[0];
	opterr = 0;
	while ((opt = getopt_long(argc, argv, ":s:m:N:p:c:b:lr:h", longopts, NULL)) != -1) {
		switch (opt) {
		case 's':
			if (parse_ll("-s", optarg, 2, 10000000, "an integer in [2, 10000000]", &v))
				return 2;
			o.size = (int)v;
			break;
		case 'm':
			if (parse_ll("-m", optarg, 0, 2, "0 (simple), 1 (spsc), 2 (near-full)", &v))
				return 2;
			o.mode = (int)v;
			break;
		case 'N':
			if (parse_ll("-N", optarg, 1, RL_MAX_COUNT, "an integer in [1, 1000000000000]", &v))
				return 2;
			o.count = v;
			break;
		case 'p':
			if (parse_ll("-p", optarg, 0, 1 << 20, "a CPU number >= 0", &v))
				return 2;
			o.cpu_producer = (int)v;
			break;
		case 'c':
			if (parse_ll("-c", optarg, 0, 1 << 20, "a CPU number >= 0", &v))
				return 2;
			o.cpu_consumer = (int)v;
			break;
		case 'b':
			if (parse_ll("-b", optarg, 1, 10000000, "an integer in [1, SIZE]", &v))
				return 2;
			o.batch = (int)v;
			break;
		case 'l':
			o.lock = 1;
			break;
		case 'r':
			if (parse_ll("-r", optarg, 1, 1000000, "an integer in [1, 1000000]", &v))
				return 2;
			o.repeats = (int)v;
			break;
		case 'C':
			counters = optarg;
			break;
		case 'B':
			if (parse_ll("--barrier-timeout", optarg, 1, 86400, "an integer in [1, 86400] (seconds)", &v))
				return 2;
			o.barrier_timeout_s = (int)v;
			break;
		case 'O':
			if (parse_ll("--ring-offset", optarg, 0, RL_MAX_RING_OFFSET, RING_OFFSET_ALLOWED, &v))
				return 2;
			if (v % 64)
				return bad_arg("--ring-offset: invalid value '%s'; allowed: %s", optarg,
					       RING_OFFSET_ALLOWED);
			o.ring_offset = (int)v;
			break;
		case 'K':
			if (rl_copies() == 1 && strcmp(optarg, "0"))
				return bad_arg("--copy: invalid value '%s'; allowed: 0 (this binary holds one copy)",
					       optarg);
			{
				char allowed[64];

				snprintf(allowed, sizeof(allowed), "0..%d (the copies this binary holds)",
					 rl_copies() - 1);
				if (parse_ll("--copy", optarg, 0, rl_copies() - 1, allowed, &v))
					return 2;
			}
			B = &__start_rl_bench_copies[v];
			break;
		case 'J':
			json = 1;
			break;
		case 'T':
			selftest = 1;
			break;
		case 'h':
			usage(stdout);
			return 0;
		case ':':
			if (optopt)
				return bad_arg("option -%c needs a value", optopt);
			return bad_arg("option %s needs a value", argv[optind - 1]);
		default:
			if (optopt)
				return bad_arg("unknown option -%c%s", optopt,
					       "; allowed: -s -m -N -p -c -b -l -r --counters --json --barrier-timeout --ring-offset --selftest");
			return bad_arg("unknown option %s%s", argv[optind - 1],
				       "; allowed: -s -m -N -p -c -b -l -r --counters --json --barrier-timeout --ring-offset --selftest");
		}
	}
	if (optind < argc)
		return bad_arg("unexpected argument '%s'%s", argv[optind], "; this program takes options only");

	if (selftest) {
		if (B->selftest(err, sizeof(err))) {
			fprintf(stderr, "%s: selftest FAILED (%s): %s\n", prog, B->variant(), err);
			return 1;
		}
		printf("selftest ok (%s)\n", B->variant());
		return 0;
	}

	/* Own counters only on request in text mode: the seed's users run us
	 * under `perf stat`, and our events would compete for the same PMU. */
	o.counters = counters ? counters : (json ? "all" : "none");

	rc = B->check(&o, err, sizeof(err));
	if (rc) {
		fprintf(stderr, "%s: error: %s\nrun '%s --help' for usage\n", prog, err, prog);
		return 2;
	}
	memset(&res, 0, sizeof(res));
	res.iters = calloc((size_t)o.repeats, sizeof(*res.iters));
	res.iters_cap = o.repeats;
	if (!res.iters) {
		fprintf(stderr, "%s: out of memory\n", prog);
		return 1;
	}
	rc = B->run(&o, &res, err, sizeof(err));
	if (rc == RL_BENCH_EINVAL) {
		fprintf(stderr, "%s: error: %s\n", prog, err);
		free(res.iters);
		return 2;
	}
	if (json) {
		char *s = B->json(&o, &res);

		if (s) {
			puts(s);
			B->free(s);
		}
	} else {
		static const char *names[] = { "simple", "spsc", "near-full" };

		for (int k = 0; k < res.n_iters; k++) {
			const struct rl_bench_iter *it = &res.iters[k];

			if (o.mode == 0)
				printf("ptr_ring(size:%d) perf %s test for %lld times, took %lld us\n",
				       o.size, names[o.mode], o.count, (long long)(it->ns_producer / 1000));
			else
				printf("ptr_ring(size:%d) perf %s test for %lld times, took %lld us + %lld us\n",
				       o.size, names[o.mode], o.count,
				       (long long)(it->ns_producer / 1000), (long long)(it->ns_consumer / 1000));
		}
	}
	fflush(stdout);
	free(res.iters);
	if (rc) {
		fprintf(stderr, "%s: FAILED: %s\n", prog, err);
		return 1;
	}
	return 0;
}
