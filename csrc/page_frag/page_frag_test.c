/* SPDX-License-Identifier: MIT */
/*
 * page_frag_test.c - user-space counterpart of the page_frag_test kernel
 * module (seed 002; kernel-rings.md section 4).  Written for ringlab from the
 * module's published description; no kernel code copied.
 *
 * BUILD (ringlab/build.py; one binary per variant, VARIANT = before | after):
 *   gcc -std=gnu11 -O2 -pthread -I csrc \
 *       csrc/page_frag/page_frag_test.c csrc/page_frag/page_frag_VARIANT.c \
 *       csrc/page_frag/page_pool.c csrc/harness/counters.c \
 *       -o build/bin/page_frag_test-VARIANT
 *
 * A push thread allocates fragments of test_alloc_len bytes from one shared
 * page_frag cache (64-byte aligned with test_align=1) and produces them into
 * a 512-slot ptr_ring (batch variant, lockless __ primitives).  A pop thread
 * consumes and frees them.  When the ring is full, push frees the fragment
 * and calls sched_yield() (the module: page_frag_free + cond_resched); when
 * it is empty, pop yields.  NOTE: sched_yield always enters the scheduler,
 * cond_resched only when a reschedule is pending, so with both threads on
 * one CPU the two differ in how often they switch (that is measured, not
 * hidden: ring_full / ring_empty / ctx switches are reported).
 *
 *   page_frag_test-VARIANT test_push_cpu=16 test_pop_cpu=17 test_alloc_len=12 \
 *                          nr_test=51200000 [test_align=1] [--json]
 *                          [--counters LIST|none] [--ring-offset BYTES] [--selftest]
 *   -> "51200000 of iterations for aligned testing took: 935300us"
 *
 * Timing: CLOCK_MONOTONIC around the measured region only; the threads are
 * created, pinned and have their counters open before the start flag.
 * A side that makes no progress for --stall-timeout seconds (10, as the
 * module's completion timeout) aborts the run (exit 3) instead of hanging.
 * Exit codes: 0 ok, 1 failure (pinning, leak, selftest), 2 usage, 3 stall.
 *
 * Layouts (ringlab.build.layouts): -DRINGLAB_LAYOUT_PAD=N emits N bytes of
 * code that never runs ahead of the measured functions (code layout, one per
 * build); --ring-offset BYTES places the ring struct BYTES into its own page
 * and a spacer of the same size moves its slot array through the heap (data
 * layout, one per trial).  Neither changes an executed instruction of the
 * measured loops.
 *
 * Test knobs: RINGLAB_PAGE_FRAG_ORDER0=1 (or --order0) forces the 4 KiB
 * fallback; RINGLAB_PAGE_FRAG_PFMEMALLOC=1 flags every page pfmemalloc;
 * --inject-stall=push|pop stops that side after its first item (tests the
 * watchdog).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "harness/counters.h"
#include "page_frag/page_frag.h"
/* The pop side dereferences what it takes from the ring (page_frag_free
 * reads the page's header), so the ring's peek must be an acquire load: C11
 * and ThreadSanitizer do not recognise the address dependency that the
 * default, kernel-like relaxed peek relies on (see rings/ring_common.h). */
#define RLR_PEEK_ORDER __ATOMIC_ACQUIRE
#include "rings/ptr_ring_batch.h"

#define RING_SLOTS      512     /* the module's nr_objs */
#define TEST_ALIGN      64      /* SMP_CACHE_BYTES */
#define RL_MAX_NR_TEST  1000000000000LL /* 1e12, as ptr_ring_test -N and syscall_loop -N */
#define RL_MAX_RING_OFFSET 4032 /* --ring-offset: a multiple of 64 in [0, 4032], as ptr_ring_test */

/* ------------------------------------------------------------------------ */
/* options                                                                   */

struct opts {
	long push_cpu, pop_cpu;         /* -1: not pinned (ringlab extension) */
	long alloc_len;
	unsigned long long nr_test;
	bool align, json, selftest, selftest_threads, order0;
	const char *counters;           /* NULL: all */
	double stall_timeout;
	int inject_stall;               /* 0 none, 1 push, 2 pop */
	int ring_offset;                /* bytes of the ring struct into its page */
};

static void usage(FILE *f)
{
	fprintf(f,
		"usage: page_frag_test-%s [test_push_cpu=N] [test_pop_cpu=N] [test_alloc_len=N]\n"
		"         [nr_test=N] [test_align=0|1] [--json] [--counters LIST|none]\n"
		"         [--selftest | --selftest-threads] [--order0] [--stall-timeout SEC] [--inject-stall push|pop]\n"
		"         [--ring-offset BYTES]\n"
		"  test_push_cpu, test_pop_cpu  CPU of the push/pop thread, online and allowed [0]\n"
		"                               (-1: not pinned)\n"
		"  test_alloc_len               fragment size in (0, %lu] [2048]\n"
		"  nr_test                      fragments to pass, 1..1000000000000 [2000000]\n"
		"  test_align                   1: 64-byte aligned fragments [0]\n"
		"  --ring-offset BYTES          the ring struct BYTES into its page, a multiple of 64\n"
		"                               in [0, %d] [0]\n",
		page_frag_variant, RL_PAGE_SIZE, RL_MAX_RING_OFFSET);
}

static _Noreturn void bad_arg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static _Noreturn void bad_arg(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "page_frag_test: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\n");
	usage(stderr);
	exit(2);
}

static bool parse_ll(const char *s, long long *out)
{
	char *end;

	errno = 0;
	*out = strtoll(s, &end, 0);
	return *s && !*end && !errno;
}

/* The CPUs this process may run on: offline CPUs are never in the mask. */
static void allowed_cpus(cpu_set_t *set, char *buf, size_t len)
{
	int first = -1, n = 0;

	CPU_ZERO(set);
	if (sched_getaffinity(0, sizeof(*set), set))
		CPU_ZERO(set);
	buf[0] = 0;
	for (int c = 0; c <= CPU_SETSIZE; c++) {
		bool in = c < CPU_SETSIZE && CPU_ISSET(c, set);

		if (in && first < 0)
			first = c;
		if (!in && first >= 0) {
			n += snprintf(buf + n, len > (size_t)n ? len - n : 0, "%s%d", n ? "," : "", first);
			if (c - 1 > first)
				n += snprintf(buf + n, len > (size_t)n ? len - n : 0, "-%d", c - 1);
			first = -1;
		}
	}
}

static void parse_args(int argc, char **argv, struct opts *o)
{
	*o = (struct opts){ .push_cpu = 0, .pop_cpu = 0, .alloc_len = 2048, .nr_test = 2000000,
			    .stall_timeout = 10.0 };
	for (int i = 1; i < argc; i++) {
		char *a = argv[i], *eq = strchr(a, '=');
		long long v;

		if (a[0] == '-') {
			const char *val = NULL;
			char name[32];
			size_t nl = eq ? (size_t)(eq - a) : strlen(a);

			snprintf(name, sizeof(name), "%.*s", (int)(nl < 31 ? nl : 31), a);
			if (!strcmp(name, "--json")) { o->json = true; continue; }
			if (!strcmp(name, "--selftest")) { o->selftest = true; continue; }
			/* only the checking two-thread run (for TSan, which is slow) */
			if (!strcmp(name, "--selftest-threads")) {
				o->selftest = o->selftest_threads = true;
				continue;
			}
			if (!strcmp(name, "--order0")) { o->order0 = true; continue; }
			if (!strcmp(name, "--help") || !strcmp(name, "-h")) { usage(stdout); exit(0); }
			if (strcmp(name, "--counters") && strcmp(name, "--stall-timeout") &&
			    strcmp(name, "--inject-stall") && strcmp(name, "--ring-offset"))
				bad_arg("unknown option '%s'", a);
			val = eq ? eq + 1 : (i + 1 < argc ? argv[++i] : NULL);
			if (!val)
				bad_arg("option '%s' needs a value", name);
			if (!strcmp(name, "--counters")) {
				char err[256];

				if (rl_counters_check_list(val, err, sizeof(err)))
					bad_arg("--counters: %s", err);
				o->counters = val;
			} else if (!strcmp(name, "--ring-offset")) {
				long long off;

				if (!parse_ll(val, &off) || off < 0 || off > RL_MAX_RING_OFFSET || off % 64)
					bad_arg("--ring-offset: invalid value '%s'; allowed: a multiple of 64 "
						"in [0, %d]", val, RL_MAX_RING_OFFSET);
				o->ring_offset = (int)off;
			} else if (!strcmp(name, "--stall-timeout")) {
				char *end;

				o->stall_timeout = strtod(val, &end);
				if (*end || !(o->stall_timeout > 0))
					bad_arg("--stall-timeout: invalid value '%s'; allowed: seconds > 0", val);
			} else {
				if (!strcmp(val, "push"))
					o->inject_stall = 1;
				else if (!strcmp(val, "pop"))
					o->inject_stall = 2;
				else
					bad_arg("--inject-stall: unknown value '%s'; allowed: push, pop", val);
			}
			continue;
		}
		if (!eq)
			bad_arg("unknown argument '%s'; expected NAME=VALUE or an option", a);
		{
			/* split a copy: argv stays intact for /proc/PID/cmdline readers */
			static char key[64];

			snprintf(key, sizeof(key), "%.*s", (int)(eq - a < 63 ? eq - a : 63), a);
			a = key;
		}
		if (!parse_ll(eq + 1, &v))
			bad_arg("%s: not an integer: '%s'", a, eq + 1);
		if (!strcmp(a, "test_push_cpu") || !strcmp(a, "test_pop_cpu")) {
			if (v < -1 || v >= CPU_SETSIZE)
				bad_arg("%s=%s: not a CPU number; allowed: online CPUs (or -1: not pinned)", a, eq + 1);
			*(a[6] == 'u' ? &o->push_cpu : &o->pop_cpu) = (long)v;
		} else if (!strcmp(a, "test_alloc_len")) {
			/* The module: 0 < test_alloc_len <= PAGE_SIZE. */
			if (v <= 0 || v > (long long)RL_PAGE_SIZE) {
				char allowed[64];

				snprintf(allowed, sizeof(allowed), "1..%lu (0 < len <= PAGE_SIZE)", RL_PAGE_SIZE);
				bad_arg("test_alloc_len=%s out of range; allowed: %s", eq + 1, allowed);
			}
			o->alloc_len = (long)v;
		} else if (!strcmp(a, "nr_test")) {
			if (v <= 0 || v > RL_MAX_NR_TEST)
				bad_arg("nr_test=%s: out of range; allowed: an integer in [1, %lld]", eq + 1,
					RL_MAX_NR_TEST);
			o->nr_test = (unsigned long long)v;
		} else if (!strcmp(a, "test_align")) {
			if (v != 0 && v != 1)
				bad_arg("test_align=%s: allowed: 0, 1", eq + 1);
			o->align = v;
		} else {
			bad_arg("unknown parameter '%s'; allowed: test_push_cpu, test_pop_cpu, "
				"test_alloc_len, nr_test, test_align", a);
		}
	}
	{
		cpu_set_t set;
		char list[256];

		allowed_cpus(&set, list, sizeof(list));
		if (o->push_cpu >= 0 && !CPU_ISSET(o->push_cpu, &set)) {
			char c[32];

			snprintf(c, sizeof(c), "%ld", o->push_cpu);
			bad_arg("test_push_cpu=%s: CPU not online or not allowed for this process; allowed: %s", c, list);
		}
		if (o->pop_cpu >= 0 && !CPU_ISSET(o->pop_cpu, &set)) {
			char c[32];

			snprintf(c, sizeof(c), "%ld", o->pop_cpu);
			bad_arg("test_pop_cpu=%s: CPU not online or not allowed for this process; allowed: %s", c, list);
		}
	}
	if (getenv("RINGLAB_PAGE_FRAG_ORDER0") && !strcmp(getenv("RINGLAB_PAGE_FRAG_ORDER0"), "1"))
		o->order0 = true;
}

/* ------------------------------------------------------------------------ */
/* shared test state                                                         */

struct side {
	/* written by the owning thread, read by the watchdog */
	_Atomic unsigned long long progress __attribute__((aligned(64)));
	atomic_int ready, done;
	/* results, read after join */
	uint64_t t_end_ns, events;      /* events: ring full (push) / ring empty (pop) */
	int cpu_start, cpu_end;
	long nvcsw, nivcsw;
	struct rl_counters ctr;
	char err[300];
	int failed;
};

static struct test {
	struct ptr_ring *ring;          /* ring_offset bytes into ring_page */
	void *ring_page, *ring_spacer;
	struct page_frag_cache *nc;
	struct rl_page_pool *pool;
	const struct opts *o;
	atomic_int start __attribute__((aligned(64)));
	atomic_int force_exit;
	char fail_msg[256];
	atomic_int check_failed;
	struct side push __attribute__((aligned(64)));
	struct side pop __attribute__((aligned(64)));
} T;

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void check_fail(const char *msg, const void *va)
{
	if (!atomic_exchange(&T.check_failed, 1))
		snprintf(T.fail_msg, sizeof(T.fail_msg), "%s (fragment %p)", msg, va);
	atomic_store(&T.force_exit, 1);
}

/*
 * Code layout of this build: RINGLAB_LAYOUT_PAD bytes of code that never runs.
 * It is cold, so it lands in .text.unlikely, which the linker places ahead of
 * .text: the measured functions below, and the page_frag and pool code they
 * call, move by the pad without one executed instruction changing.
 * 0 or undefined: no pad.
 */
#if defined(RINGLAB_LAYOUT_PAD) && RINGLAB_LAYOUT_PAD > 0
#define RL_STR_(x) #x
#define RL_STR(x) RL_STR_(x)
__attribute__((used, noinline, cold)) void rl_layout_pad(void)
{
	__asm__ volatile(".skip " RL_STR(RINGLAB_LAYOUT_PAD));
}
#endif

/* ------------------------------------------------------------------------ */
/* the measured loops.  always_inline + a constant `check` gives one plain
 * and one checking copy; only the plain one runs in benchmark mode.        */

static inline __attribute__((always_inline)) void push_loop(bool check)
{
	struct page_frag_cache *nc = T.nc;
	unsigned int len = (unsigned int)T.o->alloc_len;
	unsigned long long nr = T.o->nr_test, pushed = 0;
	bool align = T.o->align;
	uint64_t full = 0;

	while (pushed < nr &&
	       !atomic_load_explicit(&T.force_exit, memory_order_relaxed)) {
		void *va = align ? page_frag_alloc_align(nc, len, TEST_ALIGN)
				 : page_frag_alloc(nc, len);

		if (unlikely(!va))
			continue;       /* the module retries; the watchdog catches a dry pool */
		if (check) {
			uintptr_t a = (uintptr_t)va, last = a + len - 1;
			struct rl_page *pg = rl_virt_to_page(va);

			if (align && (a & (TEST_ALIGN - 1)))
				check_fail("aligned fragment not 64-byte aligned", va);
			if (pg != rl_virt_to_page((void *)last) ||
			    last >= (uintptr_t)pg->va + (RL_PAGE_SIZE << pg->order))
				check_fail("fragment crosses its page boundary", va);
			/* sequence number for the pop side's FIFO/visibility check */
			memcpy(va, &pushed, len < sizeof(pushed) ? len : sizeof(pushed));
		}
		if (__ptr_ring_produce(T.ring, va)) {
			page_frag_free(va);
			full++;
			sched_yield();          /* stands in for cond_resched() */
		} else {
			pushed++;
			atomic_store_explicit(&T.push.progress, pushed, memory_order_relaxed);
			if (unlikely(T.o->inject_stall == 1))
				while (!atomic_load(&T.force_exit))
					sched_yield();
		}
	}
	T.push.events = full;
}

static inline __attribute__((always_inline)) void pop_loop(bool check)
{
	unsigned long long nr = T.o->nr_test, popped = 0;
	unsigned int len = (unsigned int)T.o->alloc_len;
	uint64_t empty = 0;

	while (popped < nr) {
		void *obj = __ptr_ring_consume(T.ring);

		if (likely(obj)) {
			if (check) {
				unsigned long long seq = 0, want = popped;

				memcpy(&seq, obj, len < sizeof(seq) ? len : sizeof(seq));
				if (len < sizeof(want))
					want &= (1ull << (8 * len)) - 1;
				if (seq != want)
					check_fail("fragment content changed in flight (overlap or lost order)", obj);
			}
			popped++;
			atomic_store_explicit(&T.pop.progress, popped, memory_order_relaxed);
			page_frag_free(obj);
			if (unlikely(T.o->inject_stall == 2))
				while (!atomic_load(&T.force_exit))
					sched_yield();
		} else {
			if (atomic_load_explicit(&T.force_exit, memory_order_relaxed))
				break;
			empty++;
			sched_yield();
		}
	}
	T.pop.events = empty;
}

__attribute__((noinline)) void rl_measured_push(void) { push_loop(false); }
__attribute__((noinline)) void rl_measured_pop(void) { pop_loop(false); }
__attribute__((noinline)) static void checked_push(void) { push_loop(true); }
__attribute__((noinline)) static void checked_pop(void) { pop_loop(true); }

static bool check_mode;

static void *thread_main(void *arg)
{
	struct side *s = arg;
	bool is_push = s == &T.push;
	struct rusage r0, r1;
	char err[256];

	if (rl_counters_open(&s->ctr, T.o->counters, err, sizeof(err))) {
		snprintf(s->err, sizeof(s->err), "counters: %s", err);
		s->failed = 1;
	}
	atomic_store(&s->ready, 1);
	while (!atomic_load_explicit(&T.start, memory_order_acquire))
		sched_yield();  /* yield: the other side may share this CPU */
	if (s->failed)
		return NULL;
	getrusage(RUSAGE_THREAD, &r0);
	s->cpu_start = sched_getcpu();
	rl_counters_enable(&s->ctr);
	if (is_push)
		check_mode ? checked_push() : rl_measured_push();
	else
		check_mode ? checked_pop() : rl_measured_pop();
	s->t_end_ns = now_ns();
	rl_counters_disable(&s->ctr);
	s->cpu_end = sched_getcpu();
	getrusage(RUSAGE_THREAD, &r1);
	s->nvcsw = r1.ru_nvcsw - r0.ru_nvcsw;
	s->nivcsw = r1.ru_nivcsw - r0.ru_nivcsw;
	rl_counters_read(&s->ctr);
	atomic_store(&s->done, 1);
	return NULL;
}

static int start_thread(pthread_t *th, struct side *s, long cpu)
{
	pthread_attr_t attr;
	int err;

	pthread_attr_init(&attr);
	if (cpu >= 0) {
		cpu_set_t set;

		CPU_ZERO(&set);
		CPU_SET(cpu, &set);
		/* Pinned before it runs, so it never starts on another CPU. */
		pthread_attr_setaffinity_np(&attr, sizeof(set), &set);
	}
	err = pthread_create(th, &attr, thread_main, s);
	pthread_attr_destroy(&attr);
	return err;
}

/* Runs one push/pop test.  Returns 0, or an exit code (message printed). */
static int run_pair(const struct opts *o, uint64_t *elapsed_ns, uint64_t *t0_out)
{
	pthread_t tp, tc;
	uint64_t t0, last_change[2];
	unsigned long long last[2] = { 0, 0 };
	int err;

	if ((err = start_thread(&tp, &T.push, o->push_cpu)) ||
	    (err = start_thread(&tc, &T.pop, o->pop_cpu))) {
		fprintf(stderr, "page_frag_test: cannot start/pin thread: %s\n", strerror(err));
		return 1;
	}
	while (!atomic_load(&T.push.ready) || !atomic_load(&T.pop.ready))
		sched_yield();
	t0 = now_ns();
	atomic_store_explicit(&T.start, 1, memory_order_release);

	/* Watchdog: like the module's 10 s completion timeout, but it aborts
	 * instead of warning, so a stuck run never hangs the runner. */
	last_change[0] = last_change[1] = t0;
	while (!atomic_load(&T.push.done) || !atomic_load(&T.pop.done)) {
		struct timespec ts = { 0, 20 * 1000 * 1000 };
		struct side *sides[2] = { &T.push, &T.pop };
		uint64_t t;

		nanosleep(&ts, NULL);
		t = now_ns();
		for (int i = 0; i < 2; i++) {
			unsigned long long p = atomic_load_explicit(&sides[i]->progress, memory_order_relaxed);

			if (p != last[i] || atomic_load(&sides[i]->done) || p >= o->nr_test) {
				last[i] = p;
				last_change[i] = t;
			} else if ((double)(t - last_change[i]) / 1e9 >= o->stall_timeout) {
				unsigned long long pu = atomic_load(&T.push.progress);
				unsigned long long po = atomic_load(&T.pop.progress);
				/* Both sides stop when one does; name the one that
				 * holds the other up: a full ring means pop, an
				 * empty one push. */
				/* (full: within two NULL-flush batches of RING_SLOTS,
				 * consumed slots are freed 16 at a time) */
				const char *who = pu - po + 32 >= RING_SLOTS ? "pop side (ring full)"
						  : pu == po ? "push side (ring empty)"
						  : i ? "pop side" : "push side";

				fprintf(stderr, "page_frag_test: stalled: no progress for %g s on the %s "
					"(pushed=%llu popped=%llu of nr_test=%llu); aborting\n",
					o->stall_timeout, who, pu, po, o->nr_test);
				fflush(stderr);
				/* The stuck thread may never return: do not join. */
				_exit(3);
			}
		}
	}
	pthread_join(tp, NULL);
	pthread_join(tc, NULL);
	for (struct side *s = &T.push; s; s = s == &T.push ? &T.pop : NULL)
		if (s->failed) {
			fprintf(stderr, "page_frag_test: %s\n", s->err);
			return 2;
		}
	*t0_out = t0;
	*elapsed_ns = (T.push.t_end_ns > T.pop.t_end_ns ? T.push.t_end_ns : T.pop.t_end_ns) - t0;
	return 0;
}

static void free_frag(void *va)
{
	page_frag_free(va);
}

/*
 * The ring struct gets its own cache lines, offset bytes into a page; a spacer
 * of the same size is allocated just before ptr_ring_init, so the slot array
 * moves through the heap too.  Neither is touched inside the measured loops.
 */
static int alloc_ring(int offset)
{
	if (posix_memalign(&T.ring_page, 4096, (size_t)offset + sizeof(*T.ring)))
		return -1;
	T.ring_spacer = malloc((size_t)offset + 1);
	if (!T.ring_spacer)
		return -1;
	T.ring = (struct ptr_ring *)((char *)T.ring_page + offset);
	memset(T.ring, 0, sizeof(*T.ring));
	return ptr_ring_init(T.ring, RING_SLOTS, 0);
}

static struct rl_page_pool *make_pool(bool order0)
{
	unsigned int flags = order0 ? RL_POOL_NO_HIGH_ORDER : 0;
	const char *pf = getenv("RINGLAB_PAGE_FRAG_PFMEMALLOC");

	if (pf && !strcmp(pf, "1"))
		flags |= RL_POOL_PFMEMALLOC;
	return rl_pool_create(flags, 0);
}

/* ------------------------------------------------------------------------ */
/* selftest (single-threaded part): exact overlap check with a shadow bitmap */

struct shadow { uintptr_t base; uint8_t *bits; };
static struct shadow shadows[256];

static uint8_t *shadow_for(uintptr_t a)
{
	uintptr_t base = a & ~(uintptr_t)(RL_REGION_SIZE - 1);

	for (int i = 0; i < 256; i++) {
		if (shadows[i].base == base)
			return shadows[i].bits;
		if (!shadows[i].base) {
			shadows[i].base = base;
			shadows[i].bits = calloc(RL_REGION_SIZE / 8, 1);
			return shadows[i].bits;
		}
	}
	fprintf(stderr, "selftest: too many regions\n");
	exit(1);
}

/* Mark [va, va+len) live (on=1) or dead; false if a byte was already in that state. */
static bool shadow_mark(void *va, size_t len, bool on)
{
	uintptr_t a = (uintptr_t)va;
	uint8_t *bits = shadow_for(a);
	size_t off = a & (RL_REGION_SIZE - 1);

	for (size_t i = off; i < off + len; i++) {
		bool set = bits[i / 8] & (1u << (i % 8));

		if (set == on)
			return false;
		bits[i / 8] ^= (uint8_t)(1u << (i % 8));
	}
	return true;
}

#define ST_FAIL(...) do { fprintf(stderr, "selftest FAIL [%s]: ", page_frag_variant); \
	fprintf(stderr, __VA_ARGS__); fprintf(stderr, "\n"); return 1; } while (0)

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t rng(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

/* Many fragments of one size, freed in random order from a live window. */
static int selftest_sizes(unsigned int pool_flags, const char *what)
{
	static const unsigned int lens[] = { 1, 12, 63, 64, 100, 2048, 4095, 4096 };
	enum { WINDOW = 700 };
	struct { void *va; unsigned int len; } live[WINDOW];

	for (size_t li = 0; li < sizeof(lens) / sizeof(lens[0]); li++)
		for (int align = 0; align <= 1; align++) {
			struct rl_page_pool *pool = rl_pool_create(pool_flags, 64u << 20);
			struct page_frag_cache *nc = page_frag_cache_new(pool);
			struct rl_pool_stats ps;
			/* enough fragments to turn over a dozen 32 KiB pages, bounded so
			 * the byte-wise shadow stays fast under ASan */
			int rounds = (int)(12 * RL_FRAG_MAX_SIZE / lens[li]);
			int window, n = 0;

			rounds = rounds > 6000 ? 6000 : rounds < 1500 ? 1500 : rounds;
			window = rounds / 4 < WINDOW ? rounds / 4 : WINDOW;
			for (int r = 0; r < rounds; r++) {
				unsigned int len = lens[li];
				void *va = align ? page_frag_alloc_align(nc, len, TEST_ALIGN)
						 : page_frag_alloc(nc, len);
				uintptr_t a = (uintptr_t)va;
				struct rl_page *pg;

				if (!va)
					ST_FAIL("%s: alloc(%u, align=%d) returned NULL", what, len, align);
				pg = rl_virt_to_page(va);
				if (align && (a & (TEST_ALIGN - 1)))
					ST_FAIL("%s: aligned alloc(%u) not 64-byte aligned: %p", what, len, va);
				if (a < (uintptr_t)pg->va ||
				    a + len > (uintptr_t)pg->va + (RL_PAGE_SIZE << pg->order))
					ST_FAIL("%s: fragment %p+%u crosses its page", what, va, len);
				if (!shadow_mark(va, len, true))
					ST_FAIL("%s: fragment %p+%u overlaps a live fragment", what, va, len);
				memset(va, 0xa5, len);  /* ASan/valgrind: memory really usable */
				if (n == window) {
					int k = (int)(rng() % (uint64_t)window);

					shadow_mark(live[k].va, live[k].len, false);
					page_frag_free(live[k].va);
					live[k] = live[--n];
				}
				live[n].va = va;
				live[n].len = len;
				n++;
			}
			while (n) {
				n--;
				shadow_mark(live[n].va, live[n].len, false);
				page_frag_free(live[n].va);
			}
			page_frag_cache_delete(nc);
			rl_pool_get_stats(pool, &ps);
			if (rl_pool_check(pool) || ps.pages_free[0] != ps.pages_total[0] ||
			    ps.pages_free[1] != ps.pages_total[1])
				ST_FAIL("%s: len %u align %d: %" PRIu64 " pages leaked", what, lens[li], align,
					rl_pool_check(pool));
			if ((pool_flags & RL_POOL_NO_HIGH_ORDER) && ps.pages_total[1])
				ST_FAIL("%s: order-3 page handed out despite the forced fallback", what);
			for (int i = 0; i < 256 && shadows[i].base; i++) {
				free(shadows[i].bits);
				shadows[i].base = 0;
				shadows[i].bits = NULL;
			}
			rl_pool_destroy(pool);
		}
	return 0;
}

/* Edges: exactly PAGE_SIZE works (also with 4 KiB pages), oversized fails
 * cleanly and leaves the cache usable; the bias recycles an idle page. */
static int selftest_edges(void)
{
	for (int order0 = 0; order0 <= 1; order0++) {
		struct rl_page_pool *pool = rl_pool_create(order0 ? RL_POOL_NO_HIGH_ORDER : 0, 16u << 20);
		struct page_frag_cache *nc = page_frag_cache_new(pool);
		unsigned int too_big = order0 ? RL_PAGE_SIZE + 1 : RL_FRAG_MAX_SIZE + 1;
		struct page_frag_stats st;
		void *a, *b;

		a = page_frag_alloc(nc, RL_PAGE_SIZE);
		if (!a)
			ST_FAIL("order0=%d: fragment of exactly PAGE_SIZE failed", order0);
		memset(a, 1, RL_PAGE_SIZE);
		if (page_frag_alloc(nc, too_big) || page_frag_alloc_align(nc, too_big, TEST_ALIGN))
			ST_FAIL("order0=%d: oversized fragment (%u) did not fail", order0, too_big);
		if (page_frag_alloc(nc, UINT_MAX))
			ST_FAIL("order0=%d: fragsz UINT_MAX did not fail", order0);
		b = page_frag_alloc(nc, 12);
		if (!b)
			ST_FAIL("order0=%d: cache unusable after an oversized request", order0);
		page_frag_free(a);
		page_frag_free(b);
		/* Nothing in flight: filling the page again must reuse it. */
		for (int i = 0; i < 3 * (int)(RL_FRAG_MAX_SIZE / 64); i++) {
			void *v = page_frag_alloc_align(nc, 64, TEST_ALIGN);

			if (!v)
				ST_FAIL("order0=%d: alloc failed in the reuse loop", order0);
			page_frag_free(v);
		}
		page_frag_cache_stats(nc, &st);
		if (!st.reuses)
			ST_FAIL("order0=%d: an idle page was never reused (refills %" PRIu64 ")", order0, st.refills);
		if (order0 && st.refills_order0 != st.refills)
			ST_FAIL("order0=1: refills %" PRIu64 " but order-0 refills %" PRIu64, st.refills,
				st.refills_order0);
		page_frag_cache_delete(nc);
		if (rl_pool_check(pool))
			ST_FAIL("order0=%d: %" PRIu64 " pages leaked", order0, rl_pool_check(pool));
		rl_pool_destroy(pool);
	}
	return 0;
}

/* ------------------------------------------------------------------------ */

static void print_json(const struct opts *o, uint64_t elapsed, uint64_t t0,
		       const struct page_frag_stats *st, uint64_t leaked)
{
	const struct rl_counters *sets[2] = { &T.push.ctr, &T.pop.ctr };
	double n = (double)o->nr_test;

	/* One line: parse_harness_json reads the last line that parses. */
	printf("{\"schema\": 1, \"binary\": \"page_frag_test\", \"variant\": \"%s\", "
	       "\"count\": %llu, \"alloc_len\": %ld, \"align\": %d, \"ring_size\": %d, \"ring_offset\": %d, "
	       "\"push_cpu\": %ld, \"pop_cpu\": %ld, \"force_order0\": %s, "
	       "\"ctx_voluntary\": %ld, \"ctx_involuntary\": %ld, \"pages_leaked\": %" PRIu64 ", "
	       "\"iterations\": [{\"ns_producer\": %" PRIu64 ", \"ns_consumer\": %" PRIu64 ", "
	       "\"elapsed_ns\": %" PRIu64 ", \"ns_per_op\": %.6f, \"elapsed_us\": %.3f, "
	       "\"cpu_producer_start\": %d, \"cpu_producer_end\": %d, "
	       "\"cpu_consumer_start\": %d, \"cpu_consumer_end\": %d, "
	       "\"ctx_voluntary\": %ld, \"ctx_involuntary\": %ld, "
	       "\"ring_full\": %" PRIu64 ", \"ring_empty\": %" PRIu64 ", "
	       "\"page_refills\": %" PRIu64 ", \"page_refills_order0\": %" PRIu64 ", "
	       "\"page_reuses\": %" PRIu64 ", \"page_abandons\": %" PRIu64 ", \"alloc_failed\": %" PRIu64 ", "
	       "\"counters\": ",
	       page_frag_variant, o->nr_test, o->alloc_len, o->align ? 1 : 0, RING_SLOTS, o->ring_offset,
	       o->push_cpu, o->pop_cpu, o->order0 ? "true" : "false",
	       T.push.nvcsw + T.pop.nvcsw, T.push.nivcsw + T.pop.nivcsw, leaked,
	       T.push.t_end_ns - t0, T.pop.t_end_ns - t0, elapsed, (double)elapsed / n,
	       (double)elapsed / 1e3,
	       T.push.cpu_start, T.push.cpu_end, T.pop.cpu_start, T.pop.cpu_end,
	       T.push.nvcsw + T.pop.nvcsw, T.push.nivcsw + T.pop.nivcsw,
	       T.push.events, T.pop.events, st->refills, st->refills_order0, st->reuses,
	       st->abandons, st->failed);
	rl_counters_json(stdout, sets, 2);
	printf("}]}\n");
}

int main(int argc, char **argv)
{
	struct opts o;
	struct page_frag_stats st;
	struct rl_pool_stats ps;
	uint64_t elapsed = 0, t0 = 0, leaked;
	int rc;

	parse_args(argc, argv, &o);
	T.o = &o;
	if (o.selftest) {
		/* Counters are irrelevant to correctness; keep sanitizer runs quiet. */
		o.counters = "none";
		if (!o.selftest_threads && (selftest_edges() || selftest_sizes(0, "order3") ||
		    selftest_sizes(RL_POOL_NO_HIGH_ORDER, "order0") ||
		    selftest_sizes(RL_POOL_PFMEMALLOC, "pfmemalloc")))
			return 1;
		check_mode = true;
	}

	T.pool = make_pool(o.order0);
	T.nc = T.pool ? page_frag_cache_new(T.pool) : NULL;
	if (!T.nc || alloc_ring(o.ring_offset)) {
		fprintf(stderr, "page_frag_test: out of memory\n");
		return 1;
	}
	rc = run_pair(&o, &elapsed, &t0);
	if (rc)
		return rc;
	page_frag_cache_stats(T.nc, &st);
	/* Like the module's cleanup: drain the ring, then the cache. */
	ptr_ring_cleanup(T.ring, free_frag);
	free(T.ring_spacer);
	free(T.ring_page);
	page_frag_cache_delete(T.nc);
	leaked = rl_pool_check(T.pool);
	rl_pool_get_stats(T.pool, &ps);

	if (atomic_load(&T.check_failed)) {
		fprintf(stderr, "selftest FAIL [%s]: two-thread run: %s\n", page_frag_variant, T.fail_msg);
		return 1;
	}
	if (leaked) {
		fprintf(stderr, "page_frag_test: %" PRIu64 " pages not returned to the pool "
			"(refcount leak)\n", leaked);
		return 1;
	}
	if (o.selftest) {
		printf("selftest OK [%s]: %stwo-thread run of %llu fragments (len %ld, align %d); pages %" PRIu64
		       "+%" PRIu64 " all back in the pool\n", page_frag_variant,
		       o.selftest_threads ? "" : "edges, sizes x align x {order3, order0, pfmemalloc}, ",
		       o.nr_test, o.alloc_len,
		       o.align ? 1 : 0, ps.pages_total[1], ps.pages_total[0]);
	} else if (o.json) {
		print_json(&o, elapsed, t0, &st, leaked);
	} else {
		/* The module's line; ktime_us_delta truncates to whole microseconds. */
		printf("%llu of iterations for %s testing took: %" PRIu64 "us\n", o.nr_test,
		       o.align ? "aligned" : "non-aligned", elapsed / 1000);
	}
	rl_counters_close(&T.push.ctr);
	rl_counters_close(&T.pop.ctr);
	rl_pool_destroy(T.pool);
	return 0;
}
