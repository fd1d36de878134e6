/* SPDX-License-Identifier: MIT */
/* counters.c - see counters.h.  Linux perf_event_open(2) only. */
#define _GNU_SOURCE
#include "counters.h"

#include <errno.h>
#include <linux/perf_event.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

struct rl_event_def {
	const char *name;
	uint32_t type;
	uint64_t config;
};

/* Order = ringlab.schema.COUNTER_EVENTS.  Hardware events first: they form
 * one group so that ratios (IPC, miss rates) come from the same intervals. */
static const struct rl_event_def rl_events[RL_COUNTERS_MAX] = {
	{ "cycles", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES },
	{ "instructions", PERF_TYPE_HARDWARE, PERF_COUNT_HW_INSTRUCTIONS },
	{ "branches", PERF_TYPE_HARDWARE, PERF_COUNT_HW_BRANCH_INSTRUCTIONS },
	{ "branch_misses", PERF_TYPE_HARDWARE, PERF_COUNT_HW_BRANCH_MISSES },
	{ "cache_misses", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CACHE_MISSES },
	{ "task_clock", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_TASK_CLOCK },
	{ "context_switches", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CONTEXT_SWITCHES },
	{ "cpu_migrations", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CPU_MIGRATIONS },
	{ "page_faults", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS },
};

static int rl_event_index(const char *name, size_t len)
{
	for (int i = 0; i < RL_COUNTERS_MAX; i++)
		if (strlen(rl_events[i].name) == len && !strncmp(rl_events[i].name, name, len))
			return i;
	return -1;
}

static void rl_allowed(char *buf, size_t len)
{
	size_t o = 0;

	buf[0] = 0;
	for (int i = 0; i < RL_COUNTERS_MAX && o < len; i++)
		o += snprintf(buf + o, len - o, "%s%s", i ? ", " : "", rl_events[i].name);
}

/* want[i] = 1 for requested events.  Returns -1 on an unknown name. */
static int rl_parse_list(const char *list, int want[RL_COUNTERS_MAX], int *none,
			 char *err, size_t errlen)
{
	const char *p = list;

	memset(want, 0, sizeof(int) * RL_COUNTERS_MAX);
	*none = 0;
	if (!list || !*list || !strcmp(list, "all")) {
		for (int i = 0; i < RL_COUNTERS_MAX; i++)
			want[i] = 1;
		return 0;
	}
	if (!strcmp(list, "none")) {
		*none = 1;
		return 0;
	}
	while (*p) {
		const char *e = strchr(p, ',');
		size_t len = e ? (size_t)(e - p) : strlen(p);
		int idx = rl_event_index(p, len);

		if (idx < 0) {
			char allowed[256];

			rl_allowed(allowed, sizeof(allowed));
			snprintf(err, errlen,
				 "--counters: unknown event '%.*s'; allowed: all, none, or a comma-separated list of %s",
				 (int)(len > 40 ? 40 : len), p, allowed);
			return -1;
		}
		want[idx] = 1;
		p += len;
		if (*p == ',')
			p++;
	}
	return 0;
}

int rl_counters_check_list(const char *list, char *err, size_t errlen)
{
	int want[RL_COUNTERS_MAX], none;

	return rl_parse_list(list, want, &none, err, errlen);
}

static int rl_paranoid(void)
{
	FILE *f = fopen("/proc/sys/kernel/perf_event_paranoid", "r");
	int v = -100;

	if (f) {
		if (fscanf(f, "%d", &v) != 1)
			v = -100;
		fclose(f);
	}
	return v;
}

static const char *rl_errno_name(int e)
{
	switch (e) {
	case ENOENT: return "ENOENT";
	case EOPNOTSUPP: return "EOPNOTSUPP";
	case EACCES: return "EACCES";
	case EPERM: return "EPERM";
	case ENOSYS: return "ENOSYS";
	case ENODEV: return "ENODEV";
	case EINVAL: return "EINVAL";
	case EMFILE: return "EMFILE";
	case EBUSY: return "EBUSY";
	case E2BIG: return "E2BIG";
	default: return NULL;
	}
}

static void rl_reason(char *buf, size_t len, int e)
{
	const char *n = rl_errno_name(e);
	char en[32];

	if (!n) {
		snprintf(en, sizeof(en), "errno %d", e);
		n = en;
	}
	switch (e) {
	case ENOENT:
	case EOPNOTSUPP:
	case ENODEV:
		snprintf(buf, len, "not supported (%s)", n);
		break;
	case EACCES:
	case EPERM: {
		int p = rl_paranoid();

		if (p == -100)
			snprintf(buf, len, "permission denied (%s)", n);
		else
			snprintf(buf, len, "permission denied (%s, perf_event_paranoid=%d)", n, p);
		break;
	}
	case ENOSYS:
		snprintf(buf, len, "perf_event_open not available (%s)", n);
		break;
	case EINVAL:
		snprintf(buf, len, "invalid for this PMU (%s)", n);
		break;
	case EMFILE:
		snprintf(buf, len, "too many open files (%s)", n);
		break;
	default:
		snprintf(buf, len, "cannot open (%s: %s)", n, strerror(e));
	}
}

/* Fault injection for tests: RINGLAB_COUNTERS_FAIL="name:ERRNO,...". */
static int rl_injected_errno(const char *name)
{
	const char *s = getenv("RINGLAB_COUNTERS_FAIL");
	size_t nl = strlen(name);
	static const struct { const char *n; int e; } map[] = {
		{ "ENOENT", ENOENT }, { "EOPNOTSUPP", EOPNOTSUPP }, { "EACCES", EACCES },
		{ "EPERM", EPERM }, { "ENOSYS", ENOSYS }, { "ENODEV", ENODEV },
		{ "EINVAL", EINVAL }, { "EMFILE", EMFILE },
	};

	while (s && *s) {
		const char *colon = strchr(s, ':');
		const char *comma = strchr(s, ',');

		if (!colon || (comma && comma < colon))
			return 0;
		if ((size_t)(colon - s) == nl && !strncmp(s, name, nl)) {
			size_t el = comma ? (size_t)(comma - colon - 1) : strlen(colon + 1);

			for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
				if (strlen(map[i].n) == el && !strncmp(colon + 1, map[i].n, el))
					return map[i].e;
			return EINVAL;
		}
		s = comma ? comma + 1 : NULL;
	}
	return 0;
}

static int rl_perf_open(const struct rl_event_def *d, int group_fd, int exclude_kernel)
{
	struct perf_event_attr a;

	memset(&a, 0, sizeof(a));
	a.size = sizeof(a);
	a.type = d->type;
	a.config = d->config;
	a.disabled = group_fd < 0;	/* members follow their leader */
	a.exclude_hv = 1;
	a.exclude_kernel = exclude_kernel;
	a.read_format = PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING;
	return (int)syscall(SYS_perf_event_open, &a, 0 /* this thread */, -1, group_fd,
			    PERF_FLAG_FD_CLOEXEC);
}

/* Open one event, first with kernel counting, then user-only on EACCES/EPERM
 * (perf_event_paranoid >= 2 forbids kernel counting for unprivileged users). */
static int rl_open_one(struct rl_counter *c, const struct rl_event_def *d, int group_fd)
{
	int e = rl_injected_errno(d->name);
	int fd = -1;

	if (!e) {
		fd = rl_perf_open(d, group_fd, 0);
		if (fd < 0 && (errno == EACCES || errno == EPERM)) {
			fd = rl_perf_open(d, group_fd, 1);
			if (fd >= 0)
				c->user_only = 1;
		}
		if (fd < 0)
			e = errno;
	}
	if (fd < 0) {
		rl_reason(c->error, sizeof(c->error), e);
		return -e;
	}
	c->fd = fd;
	c->ok = 1;
	c->error[0] = 0;
	return fd;
}

int rl_counters_open(struct rl_counters *cs, const char *list, char *err, size_t errlen)
{
	int want[RL_COUNTERS_MAX], none, leader = -1;

	memset(cs, 0, sizeof(*cs));
	for (int i = 0; i < RL_COUNTERS_MAX; i++)
		cs->c[i].fd = -1;
	if (rl_parse_list(list, want, &none, err, errlen))
		return -1;
	cs->disabled = none;
	if (none)
		return 0;
	for (int i = 0; i < RL_COUNTERS_MAX; i++) {
		struct rl_counter *c = &cs->c[cs->n];
		const struct rl_event_def *d = &rl_events[i];
		int fd;

		if (!want[i])
			continue;
		c->name = d->name;
		cs->n++;
		if (d->type == PERF_TYPE_HARDWARE) {
			fd = rl_open_one(c, d, leader);
			/* A member the group cannot hold (EINVAL from group
			 * validation): count it on its own, multiplexed. */
			if (fd < 0 && leader >= 0 && fd == -EINVAL && !rl_injected_errno(d->name))
				fd = rl_open_one(c, d, -1);
			if (fd >= 0 && leader < 0)
				leader = fd;
		} else {
			rl_open_one(c, d, -1);
		}
	}
	return 0;
}

void rl_counters_enable(struct rl_counters *cs)
{
	for (int i = 0; i < cs->n; i++)
		if (cs->c[i].ok)
			ioctl(cs->c[i].fd, PERF_EVENT_IOC_RESET, 0);
	for (int i = 0; i < cs->n; i++)
		if (cs->c[i].ok)	/* group members: no-op until the leader runs */
			ioctl(cs->c[i].fd, PERF_EVENT_IOC_ENABLE, 0);
}

void rl_counters_disable(struct rl_counters *cs)
{
	/* Reverse order: the software task_clock stops last, so it covers the
	 * hardware disables rather than the other way round. */
	for (int i = cs->n - 1; i >= 0; i--)
		if (cs->c[i].ok)
			ioctl(cs->c[i].fd, PERF_EVENT_IOC_DISABLE, 0);
}

void rl_counters_read(struct rl_counters *cs)
{
	for (int i = 0; i < cs->n; i++) {
		struct rl_counter *c = &cs->c[i];
		uint64_t buf[3];

		c->have_value = 0;
		c->multiplexed = 0;
		if (!c->ok)
			continue;
		if (read(c->fd, buf, sizeof(buf)) != (ssize_t)sizeof(buf)) {
			snprintf(c->error, sizeof(c->error), "read failed (%s)",
				 rl_errno_name(errno) ? rl_errno_name(errno) : "short read");
			continue;
		}
		c->raw = buf[0];
		c->enabled = buf[1];
		c->running = buf[2];
		if (c->running == 0) {
			/* Enabled but never on a PMU: unknown, not zero. */
			snprintf(c->error, sizeof(c->error), "never scheduled (multiplexed out)");
			continue;
		}
		c->error[0] = 0;
		c->multiplexed = c->running < c->enabled;
		c->value = c->multiplexed
			? (double)c->raw * (double)c->enabled / (double)c->running
			: (double)c->raw;
		c->have_value = 1;
	}
}

void rl_counters_close(struct rl_counters *cs)
{
	for (int i = 0; i < cs->n; i++) {
		if (cs->c[i].fd >= 0)
			close(cs->c[i].fd);
		cs->c[i].fd = -1;
		cs->c[i].ok = 0;
	}
}

void rl_counters_sum_init(struct rl_counters *dst, const struct rl_counters *src)
{
	*dst = *src;
	for (int i = 0; i < dst->n; i++) {
		struct rl_counter *c = &dst->c[i];

		c->fd = -1;
		c->raw = c->enabled = c->running = 0;
		c->value = 0;
		c->multiplexed = 0;
	}
}

void rl_counters_add(struct rl_counters *dst, const struct rl_counters *src)
{
	for (int i = 0; i < dst->n && i < src->n; i++) {
		struct rl_counter *d = &dst->c[i];
		const struct rl_counter *s = &src->c[i];

		if (!s->have_value) {
			/* Unknown in one thread => unknown in the sum. */
			if (d->have_value || !d->error[0]) {
				snprintf(d->error, sizeof(d->error), "%s",
					 s->error[0] ? s->error : "no value");
			}
			d->have_value = 0;
			d->ok = 0;
			continue;
		}
		if (!d->ok && d->error[0])
			continue;
		d->raw += s->raw;
		d->enabled += s->enabled;
		d->running += s->running;
		d->value += s->value;
		d->multiplexed |= s->multiplexed;
		d->user_only |= s->user_only;
		d->have_value = 1;
		d->ok = 1;
	}
}

static void rl_json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			fputc('\\', f);
		if ((unsigned char)*s < 0x20)
			fprintf(f, "\\u%04x", *s);
		else
			fputc(*s, f);
	}
	fputc('"', f);
}

void rl_counters_json(FILE *f, const struct rl_counters *const *sets, int nsets)
{
	struct rl_counters sum;

	if (nsets <= 0 || sets[0]->disabled) {
		fputs("{}", f);
		return;
	}
	rl_counters_sum_init(&sum, sets[0]);
	for (int i = 0; i < sum.n; i++) {
		sum.c[i].ok = 0;
		sum.c[i].have_value = 0;
		sum.c[i].error[0] = 0;
	}
	for (int k = 0; k < nsets; k++)
		rl_counters_add(&sum, sets[k]);
	fputc('{', f);
	for (int i = 0; i < sum.n; i++) {
		const struct rl_counter *c = &sum.c[i];

		fprintf(f, "%s\"%s\": {", i ? ", " : "", c->name);
		if (c->have_value)
			fprintf(f, "\"value\": %.17g, \"raw\": %llu, ", c->value,
				(unsigned long long)c->raw);
		else
			fputs("\"value\": null, \"raw\": null, ", f);
		fprintf(f, "\"enabled\": %llu, \"running\": %llu, \"multiplexed\": %s, \"error\": ",
			(unsigned long long)c->enabled, (unsigned long long)c->running,
			c->multiplexed ? "true" : "false");
		if (c->have_value)
			fputs("null", f);
		else
			rl_json_str(f, c->error[0] ? c->error : "no value");
		fprintf(f, ", \"scope\": %s}", !c->have_value ? "null"
			: c->user_only ? "\"user\"" : "\"user+kernel\"");
	}
	fputc('}', f);
}
