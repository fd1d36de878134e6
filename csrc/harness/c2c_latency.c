/*
 * c2c_latency: one-way core-to-core cache-line transfer latency between two CPUs.
 *
 * Two threads, pinned to CPU A and CPU B, take turns on one shared cache line:
 * A publishes an odd sequence number, B waits for it and answers with the next even
 * one, A waits for that.  Each exchange moves the line A->B and back, so one round
 * trip is two transfers and the one-way latency is (round-trip time / 2).  A times
 * ITERS exchanges per round with CLOCK_MONOTONIC; the median over ROUNDS rounds is
 * reported (the first round is a warm-up and is discarded).
 *
 * An SPSC ring cannot move elements between two CPUs faster than its index / slot
 * lines move, so ringlab records this figure next to every two-CPU trial.
 *
 * Usage: c2c_latency -a CPU -b CPU [-n ITERS] [-k ROUNDS] [--json]
 * Exit codes: 0 ok, 1 runtime failure (pinning, threads), 2 usage.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define LINE 64

#if defined(__x86_64__) || defined(__i386__)
#define cpu_relax() __builtin_ia32_pause()
#elif defined(__aarch64__)
#define cpu_relax() __asm__ __volatile__("yield" ::: "memory")
#else
#define cpu_relax() __asm__ __volatile__("" ::: "memory")
#endif

/* The only line that moves.  Padded on both sides so nothing else shares it. */
struct shared {
	char pad0[LINE];
	_Alignas(LINE) _Atomic uint64_t seq;
	char pad1[LINE - sizeof(uint64_t)];
};

static struct shared sh;
static long iters = 20000, rounds = 7;
static int cpu_a = -1, cpu_b = -1;
static double *samples;          /* one-way ns per measured round */
static _Atomic int pin_failed;

static int pin(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	return pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Responder: waits for each odd value and answers with the following even one. */
static void *responder(void *arg)
{
	uint64_t total = (uint64_t)(rounds + 1) * (uint64_t)iters, i;

	(void)arg;
	if (pin(cpu_b)) {
		atomic_store(&pin_failed, 1);
		return NULL;
	}
	for (i = 0; i < total; i++) {
		uint64_t want = 2 * i + 1;

		while (atomic_load_explicit(&sh.seq, memory_order_acquire) != want) {
			if (atomic_load_explicit(&pin_failed, memory_order_relaxed))
				return NULL;
			cpu_relax();
		}
		atomic_store_explicit(&sh.seq, want + 1, memory_order_release);
	}
	return NULL;
}

static int cmp_double(const void *x, const void *y)
{
	double a = *(const double *)x, b = *(const double *)y;

	return (a > b) - (a < b);
}

static void usage(const char *prog)
{
	fprintf(stderr, "usage: %s -a CPU -b CPU [-n ITERS] [-k ROUNDS] [--json]\n", prog);
	exit(2);
}

static long parse_long(const char *s, const char *what, long min)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || *end || end == s || v < min) {
		fprintf(stderr, "c2c_latency: %s must be an integer >= %ld, got '%s'\n", what, min, s);
		exit(2);
	}
	return v;
}

int main(int argc, char **argv)
{
	int json = 0, i, err;
	uint64_t seq = 0;
	pthread_t thr;
	double median;
	long r, k;

	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--json"))
			json = 1;
		else if (i + 1 < argc && !strcmp(argv[i], "-a"))
			cpu_a = (int)parse_long(argv[++i], "-a CPU", 0);
		else if (i + 1 < argc && !strcmp(argv[i], "-b"))
			cpu_b = (int)parse_long(argv[++i], "-b CPU", 0);
		else if (i + 1 < argc && !strcmp(argv[i], "-n"))
			iters = parse_long(argv[++i], "-n ITERS", 1);
		else if (i + 1 < argc && !strcmp(argv[i], "-k"))
			rounds = parse_long(argv[++i], "-k ROUNDS", 1);
		else
			usage(argv[0]);
	}
	if (cpu_a < 0 || cpu_b < 0)
		usage(argv[0]);
	if (cpu_a == cpu_b) {
		/* Two spinners on one CPU only alternate at scheduler ticks: not a cache figure. */
		fprintf(stderr, "c2c_latency: -a and -b must be different CPUs\n");
		return 2;
	}
	samples = calloc((size_t)rounds, sizeof(*samples));
	if (!samples)
		return 1;
	if (pin(cpu_a)) {
		fprintf(stderr, "c2c_latency: cannot pin to CPU %d (offline or not allowed)\n", cpu_a);
		return 1;
	}
	atomic_store(&sh.seq, 0);
	err = pthread_create(&thr, NULL, responder, NULL);
	if (err) {
		fprintf(stderr, "c2c_latency: pthread_create: %s\n", strerror(err));
		return 1;
	}
	for (r = 0; r <= rounds; r++) {          /* round 0 is the warm-up */
		uint64_t t0 = now_ns(), t1;

		for (k = 0; k < iters; k++) {
			seq++;                      /* odd: A -> B */
			atomic_store_explicit(&sh.seq, seq, memory_order_release);
			seq++;                      /* even: B's answer */
			while (atomic_load_explicit(&sh.seq, memory_order_acquire) != seq) {
				if (atomic_load_explicit(&pin_failed, memory_order_relaxed)) {
					fprintf(stderr, "c2c_latency: cannot pin to CPU %d (offline or not allowed)\n",
						cpu_b);
					return 1;
				}
				cpu_relax();
			}
		}
		t1 = now_ns();
		if (r > 0)
			samples[r - 1] = (double)(t1 - t0) / (2.0 * (double)iters);
	}
	pthread_join(thr, NULL);
	qsort(samples, (size_t)rounds, sizeof(*samples), cmp_double);
	median = (rounds % 2) ? samples[rounds / 2]
			      : 0.5 * (samples[rounds / 2 - 1] + samples[rounds / 2]);
	if (json) {
		printf("{\"schema\": 1, \"binary\": \"c2c_latency\", \"a\": %d, \"b\": %d, "
		       "\"iterations\": %ld, \"rounds\": %ld, \"one_way_ns\": %.3f, \"samples_ns\": [",
		       cpu_a, cpu_b, iters, rounds, median);
		for (r = 0; r < rounds; r++)
			printf("%s%.3f", r ? ", " : "", samples[r]);
		printf("]}\n");
	} else {
		printf("c2c latency CPU %d <-> CPU %d: %.1f ns one-way (median of %ld rounds x %ld round trips)\n",
		       cpu_a, cpu_b, median, rounds, iters);
	}
	free(samples);
	return 0;
}
