/* SPDX-License-Identifier: MIT */
/*
 * ptr_ring_main.c - seed-compatible command line of ptr_ring_test.
 *
 *   ptr_ring_test-batch -s 1000 -m 0 -N 100000000
 *   ptr_ring(size:1000) perf simple test for 100000000 times, took 2385198 us
 *
 * Same -s/-m/-N as Yunsheng Lin's 2021 ptr_ring_test, plus pinning (-p/-c),
 * batch override (-b), locked wrappers (-l), in-process repeats (-r),
 * counters, JSON output and a barrier timeout.  With --with, the arms of one
 * round take turns loop by loop (turns.h).  Exit codes: 0 ok, 1 test failure
 * (order violation, ring not empty, an arm that failed), 2 usage error naming
 * the argument.
 */
#define _GNU_SOURCE
#include "ptr_ring_bench.h"
#include "turns.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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
		"          [--ring-offset BYTES] [--copy K] [--with PATH [--with-copy K]]...\n"
		"          [--selftest]\n"
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
		"  --with PATH another arm's ptr_ring_test binary: it runs in its own process\n"
		"              with these options, and the arms take turns loop by loop (-r\n"
		"              loops each, this one first); needs --json; up to %d arms\n"
		"  --with-copy K  the --copy of the --with before it (default 0)\n"
		"  --turns R,W[,READY]  take turns on these pipe descriptors (what --with\n"
		"              gives the other arms)\n"
		"  --selftest  run the full/empty/FIFO unit test and exit\n"
		"variant: %s\n", prog, rl_copies() - 1, RL_TURNS_MAX_ARMS - 1, B->variant());
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

/* The other arms of an interleaved round (--with). */
static struct rl_turns_arm arms[RL_TURNS_MAX_ARMS - 1];
static int n_arms;

/* argv of another arm: this process's options (opts), its own --copy, --turns, --json. */
static char **arm_argv(const struct rl_turns_arm *arm, const char *turns, void *opts)
{
	static char num[12][32];
	static char *av[40];
	const struct rl_bench_opts *o = opts;
	int i = 0, k = 0;

#define NUM(fmt, v) (snprintf(num[k], sizeof(num[k]), fmt, v), num[k++])
	av[i++] = (char *)arm->path;
	av[i++] = "--copy";
	av[i++] = NUM("%d", arm->copy);
	av[i++] = "-s";
	av[i++] = NUM("%d", o->size);
	av[i++] = "-m";
	av[i++] = NUM("%d", o->mode);
	av[i++] = "-N";
	av[i++] = NUM("%lld", o->count);
	av[i++] = "-r";
	av[i++] = NUM("%d", o->repeats);
	if (o->cpu_producer >= 0) {
		av[i++] = "-p";
		av[i++] = NUM("%d", o->cpu_producer);
	}
	if (o->cpu_consumer >= 0) {
		av[i++] = "-c";
		av[i++] = NUM("%d", o->cpu_consumer);
	}
	if (o->batch > 0) {
		av[i++] = "-b";
		av[i++] = NUM("%d", o->batch);
	}
	if (o->lock)
		av[i++] = "-l";
	if (o->barrier_timeout_s > 0) {
		av[i++] = "--barrier-timeout";
		av[i++] = NUM("%d", o->barrier_timeout_s);
	}
	av[i++] = "--ring-offset";
	av[i++] = NUM("%d", o->ring_offset);
	av[i++] = "--counters";
	av[i++] = (char *)(o->counters ? o->counters : "all");
	av[i++] = "--turns";
	av[i++] = (char *)turns;
	av[i++] = "--json";
	av[i] = NULL;
#undef NUM
	return av;
}

/*
 * The timed loops: one B->run of o->repeats loops, or, taking turns (t), one
 * loop per turn: wait for the turn (the leader takes the first without
 * waiting), run one loop, pass the turn on.  res gathers the loops either way.
 */
static int run_loops(const struct rl_bench_opts *o, struct rl_bench_result *res, struct rl_turns *t,
		     int leader, long long *turn_ns, char *err, size_t errlen)
{
	struct rl_bench_opts one = *o;
	int rc = RL_BENCH_OK;

	if (!t)
		return B->run(o, res, err, errlen);
	one.repeats = 1;
	res->n_iters = 0;
	res->ctx_voluntary = res->ctx_involuntary = 0;
	for (int k = 0; k < o->repeats; k++) {
		struct rl_bench_result r1 = { .iters = &res->iters[k], .iters_cap = 1 };

		if ((k > 0 || !leader) && rl_turns_wait(t, err, errlen))
			return RL_BENCH_FAIL;
		{
			struct timespec ts;

			clock_gettime(CLOCK_MONOTONIC, &ts);
			turn_ns[k] = (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
		}
		rc = B->run(&one, &r1, err, errlen);
		if (rc)
			return rc;
		memcpy(res->variant, r1.variant, sizeof(res->variant));
		res->batch = r1.batch;
		res->ctx_voluntary += r1.ctx_voluntary;
		res->ctx_involuntary += r1.ctx_involuntary;
		res->n_iters = k + 1;
		if (rl_turns_pass(t, err, errlen))
			return RL_BENCH_FAIL;
	}
	return rc;
}

/*
 * An arm that took turns: its JSON object with "turn_start_ns" (CLOCK_MONOTONIC
 * at the start of each of its turns, comparable between the arms of a round)
 * and, for the leader, the other arms' objects in "interleaved": [...].
 */
static int print_turns(const char *own, const long long *turn_ns, int loops, char **others, int n)
{
	size_t len = strlen(own);

	while (len && (own[len - 1] == '\n' || own[len - 1] == ' '))
		len--;
	if (!len || own[len - 1] != '}')
		return -1;
	printf("%.*s, \"turn_start_ns\": [", (int)(len - 1), own);
	for (int k = 0; k < loops; k++)
		printf("%s%lld", k ? ", " : "", turn_ns[k]);
	if (!n) {
		puts("]}");
		return 0;
	}
	printf("], \"interleaved\": [");
	for (int j = 0; j < n; j++) {
		const char *s = others[j];
		size_t m;

		while (*s == ' ' || *s == '\n')
			s++;
		m = strlen(s);
		while (m && (s[m - 1] == '\n' || s[m - 1] == ' '))
			m--;
		if (!m || s[0] != '{')
			return -1;
		printf("%s%.*s", j ? ", " : "", (int)m, s);
	}
	puts("]}");
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
		{ "with", required_argument, NULL, 'W' },
		{ "with-copy", required_argument, NULL, 'Y' },
		{ "turns", required_argument, NULL, 'U' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct rl_bench_result res;
	const char *counters = NULL;
	char err[512];
	struct rl_turns turns = { .rfd = -1, .wfd = -1, .readyfd = -1 }, *tp = NULL;
	int json = 0, selftest = 0, follower = 0, opt, rc;
	long long *turn_ns = NULL;
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
		case 'W':
			if (n_arms >= RL_TURNS_MAX_ARMS - 1)
				return bad_arg("--with: more than %d other arms; allowed: 1..%d --with",
					       RL_TURNS_MAX_ARMS - 1, RL_TURNS_MAX_ARMS - 1);
			if (!*optarg)
				return bad_arg("--with: empty path; allowed: the path of a ptr_ring_test binary");
			arms[n_arms].path = optarg;
			arms[n_arms].copy = 0;
			n_arms++;
			break;
		case 'Y':
			if (!n_arms)
				return bad_arg("--with-copy: no --with before it; allowed: --with PATH --with-copy K");
			if (parse_ll("--with-copy", optarg, 0, 1 << 20, "an integer >= 0 (a copy of the --with binary)", &v))
				return 2;
			arms[n_arms - 1].copy = (int)v;
			break;
		case 'U':
			if (rl_turns_parse(optarg, &turns))
				return bad_arg("--turns: invalid value '%s'; allowed: RFD,WFD or RFD,WFD,READYFD "
					       "(file descriptors >= 0)", optarg);
			follower = 1;
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
					       "; allowed: -s -m -N -p -c -b -l -r --counters --json --barrier-timeout --ring-offset --copy --with --with-copy --turns --selftest");
			return bad_arg("unknown option %s%s", argv[optind - 1],
				       "; allowed: -s -m -N -p -c -b -l -r --counters --json --barrier-timeout --ring-offset --copy --with --with-copy --turns --selftest");
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
	if (n_arms && follower)
		return bad_arg("--with: not with --turns; allowed: one of them (the leader gives --turns to its arms)");
	if (n_arms && !json)
		return bad_arg("--with: needs --json (the arms report as one JSON object)");
	turns.timeout_s = o.barrier_timeout_s > 0 ? o.barrier_timeout_s : RL_BARRIER_TIMEOUT_S;
	memset(&res, 0, sizeof(res));
	res.iters = calloc((size_t)o.repeats, sizeof(*res.iters));
	res.iters_cap = o.repeats;
	if (!res.iters) {
		fprintf(stderr, "%s: out of memory\n", prog);
		return 1;
	}
	if (follower) {
		tp = &turns;
		if (rl_turns_ready(tp, err, sizeof(err))) {
			fprintf(stderr, "%s: FAILED: %s\n", prog, err);
			free(res.iters);
			return 1;
		}
	} else if (n_arms) {
		if (rl_turns_start(arms, n_arms, arm_argv, &o, &turns, turns.timeout_s, err, sizeof(err))) {
			fprintf(stderr, "%s: FAILED: %s\n", prog, err);
			free(res.iters);
			return 1;
		}
		tp = &turns;
	}
	turn_ns = calloc((size_t)o.repeats, sizeof(*turn_ns));
	if (!turn_ns) {
		fprintf(stderr, "%s: out of memory\n", prog);
		if (n_arms)
			rl_turns_abort(arms, n_arms);
		free(res.iters);
		return 1;
	}
	rc = run_loops(&o, &res, tp, !follower, turn_ns, err, sizeof(err));
	if (tp) {
		char *others[RL_TURNS_MAX_ARMS - 1] = { NULL };
		char err2[512];

		if (rc)
			rl_turns_abort(arms, n_arms);
		else if (rl_turns_finish(arms, n_arms, others, err2, sizeof(err2))) {
			snprintf(err, sizeof(err), "%s", err2);
			rc = RL_BENCH_FAIL;
		}
		if (!rc && json) {
			char *s = B->json(&o, &res);

			if (!s || print_turns(s, turn_ns, res.n_iters, others, n_arms)) {
				snprintf(err, sizeof(err), "turns: an arm's JSON object could not be joined");
				rc = RL_BENCH_FAIL;
			}
			if (s)
				B->free(s);
		}
		for (int j = 0; j < n_arms; j++)
			free(others[j]);
	}
	free(turn_ns);
	if (rc == RL_BENCH_EINVAL) {
		fprintf(stderr, "%s: error: %s\n", prog, err);
		free(res.iters);
		return 2;
	}
	if (tp && json) {
		/* printed above, with the turns (and the other arms' objects) */
	} else if (json) {
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
