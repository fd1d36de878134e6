/* SPDX-License-Identifier: MIT */
/*
 * turns.c - arms that take turns (see turns.h for the design and the ring of
 * pipes).  Nothing here runs inside a timed region: a turn is waited for and
 * passed on between two timed loops.
 */
#define _GNU_SOURCE
#include "turns.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* poll() slices while the leader waits for the arms to be ready, so that
 * one that died before it was ready is noticed at once */
#define RL_READY_SLICE_MS 50

int rl_turns_parse(const char *s, struct rl_turns *t)
{
	int r, w, ready = -1, n = 0;

	if (sscanf(s, "%d,%d%n", &r, &w, &n) != 2)
		return -1;
	if (s[n] == ',') {
		int m = 0;

		if (sscanf(s + n + 1, "%d%n", &ready, &m) != 1 || s[n + 1 + m])
			return -1;
	} else if (s[n]) {
		return -1;
	}
	if (r < 0 || w < 0 || (ready < -1))
		return -1;
	t->rfd = r;
	t->wfd = w;
	t->readyfd = ready;
	return 0;
}

static int rl_write_byte(int fd, const char *what, char *err, size_t errlen)
{
	char b = 't';

	for (;;) {
		ssize_t k = write(fd, &b, 1);

		if (k == 1)
			return 0;
		if (k < 0 && errno == EINTR)
			continue;
		snprintf(err, errlen, "%s: %s", what,
			 k < 0 && errno == EPIPE ? "the next arm in the turn order ended" : strerror(errno));
		return -1;
	}
}

int rl_turns_ready(struct rl_turns *t, char *err, size_t errlen)
{
	/* a dead peer shows as EPIPE on write, not as a silent SIGPIPE death */
	signal(SIGPIPE, SIG_IGN);
	if (t->readyfd < 0)
		return 0;
	if (rl_write_byte(t->readyfd, "turns: ready", err, errlen))
		return -1;
	close(t->readyfd);
	t->readyfd = -1;
	return 0;
}

int rl_turns_wait(struct rl_turns *t, char *err, size_t errlen)
{
	struct pollfd p = { .fd = t->rfd, .events = POLLIN };
	long long ms = (long long)(t->timeout_s > 0 ? t->timeout_s : 60) * 1000;
	char b;

	for (;;) {
		int k = poll(&p, 1, (int)ms);

		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0) {
			snprintf(err, errlen, "turns: waiting for the turn: %s", strerror(errno));
			return -1;
		}
		if (k == 0) {
			snprintf(err, errlen, "turns: no turn came within %d s (the arm before this one "
				 "in the turn order is stuck)", t->timeout_s > 0 ? t->timeout_s : 60);
			return -1;
		}
		break;
	}
	for (;;) {
		ssize_t k = read(t->rfd, &b, 1);

		if (k == 1)
			return 0;
		if (k < 0 && errno == EINTR)
			continue;
		snprintf(err, errlen, "turns: %s", k == 0 ? "the arm before this one in the turn order ended"
			 : strerror(errno));
		return -1;
	}
}

int rl_turns_pass(struct rl_turns *t, char *err, size_t errlen)
{
	return rl_write_byte(t->wfd, "turns: passing the turn", err, errlen);
}

static void rl_close_all(int (*fds)[2], int n, int keep1, int keep2, int keep3)
{
	for (int i = 0; i < n; i++)
		for (int e = 0; e < 2; e++) {
			int fd = fds[i][e];

			if (fd >= 0 && fd != keep1 && fd != keep2 && fd != keep3)
				close(fd);
		}
}

void rl_turns_abort(struct rl_turns_arm *arms, int n)
{
	for (int j = 0; j < n; j++) {
		if (arms[j].pid > 0) {
			kill(arms[j].pid, SIGKILL);
			while (waitpid(arms[j].pid, NULL, 0) < 0 && errno == EINTR)
				;
			arms[j].pid = -1;
		}
		if (arms[j].outfd >= 0) {
			close(arms[j].outfd);
			arms[j].outfd = -1;
		}
	}
}

static int rl_exited_early(struct rl_turns_arm *arms, int n, char *err, size_t errlen)
{
	for (int j = 0; j < n; j++) {
		int st;

		if (arms[j].pid > 0 && waitpid(arms[j].pid, &st, WNOHANG) == arms[j].pid) {
			arms[j].pid = -1;
			snprintf(err, errlen, "turns: arm %s ended before it was ready (%s %d)", arms[j].path,
				 WIFEXITED(st) ? "exit status" : "signal", WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
			return 1;
		}
	}
	return 0;
}

int rl_turns_start(struct rl_turns_arm *arms, int n,
		   char **(*argv_of)(const struct rl_turns_arm *, const char *turns, void *arg),
		   void *arg, struct rl_turns *t, int timeout_s, char *err, size_t errlen)
{
	/* ring[i]: process i's turn (0: the leader, j + 1: arms[j]); out[j]: arms[j]'s stdout */
	int ring[RL_TURNS_MAX_ARMS][2], out[RL_TURNS_MAX_ARMS][2], ready[1][2];
	int procs = n + 1, got = 0;
	long long waited_ms = 0;

	if (n < 1 || procs > RL_TURNS_MAX_ARMS) {
		snprintf(err, errlen, "turns: %d other arms; allowed: 1..%d", n, RL_TURNS_MAX_ARMS - 1);
		return -1;
	}
	signal(SIGPIPE, SIG_IGN);
	for (int i = 0; i < RL_TURNS_MAX_ARMS; i++)
		ring[i][0] = ring[i][1] = out[i][0] = out[i][1] = -1;
	ready[0][0] = ready[0][1] = -1;
	for (int j = 0; j < n; j++) {
		arms[j].pid = -1;
		arms[j].outfd = -1;
	}
	for (int i = 0; i < procs; i++)
		if (pipe(ring[i]) || (i < n && pipe(out[i]))) {
			snprintf(err, errlen, "turns: pipe: %s", strerror(errno));
			goto fail;
		}
	if (pipe(ready[0])) {
		snprintf(err, errlen, "turns: pipe: %s", strerror(errno));
		goto fail;
	}
	fflush(NULL);
	for (int j = 0; j < n; j++) {
		int me = j + 1, rfd = ring[me][0], wfd = ring[(me + 1) % procs][1];
		pid_t pid = fork();

		if (pid < 0) {
			snprintf(err, errlen, "turns: fork: %s", strerror(errno));
			goto fail;
		}
		if (pid == 0) {
			char turns[64];
			char **argv;

			if (dup2(out[j][1], STDOUT_FILENO) < 0)
				_exit(127);
			rl_close_all(ring, procs, rfd, wfd, -1);
			rl_close_all(out, n, -1, -1, -1);
			close(ready[0][0]);
			snprintf(turns, sizeof(turns), "%d,%d,%d", rfd, wfd, ready[0][1]);
			argv = argv_of(&arms[j], turns, arg);
			if (argv)
				execv(arms[j].path, argv);
			fprintf(stderr, "turns: cannot run %s: %s\n", arms[j].path, strerror(errno));
			_exit(127);
		}
		arms[j].pid = pid;
	}
	/* the leader keeps its own ends of the ring, the read ends of the arms' stdout and
	 * the read end of the ready pipe */
	t->rfd = ring[0][0];
	t->wfd = ring[1 % procs][1];
	t->readyfd = -1;
	t->timeout_s = timeout_s;
	rl_close_all(ring, procs, t->rfd, t->wfd, -1);
	for (int j = 0; j < n; j++) {
		close(out[j][1]);
		arms[j].outfd = out[j][0];
	}
	close(ready[0][1]);
	while (got < n) {
		struct pollfd p = { .fd = ready[0][0], .events = POLLIN };
		int k = poll(&p, 1, RL_READY_SLICE_MS);
		char b;

		if (k < 0 && errno != EINTR) {
			snprintf(err, errlen, "turns: waiting for the arms: %s", strerror(errno));
			goto fail_started;
		}
		if (k > 0) {
			ssize_t r = read(ready[0][0], &b, 1);

			if (r == 1) {
				got++;
				continue;
			}
			if (r == 0) {
				/* every arm not ready has ended: name the first one reaped
				 * (it may take a moment to become reapable) */
				for (int tries = 0; tries < 100; tries++) {
					if (rl_exited_early(arms, n, err, errlen))
						goto fail_started;
					usleep(10000);
				}
				snprintf(err, errlen, "turns: an arm ended before it was ready");
				goto fail_started;
			}
		}
		if (rl_exited_early(arms, n, err, errlen))
			goto fail_started;
		waited_ms += RL_READY_SLICE_MS;
		if (waited_ms > (long long)(timeout_s > 0 ? timeout_s : 60) * 1000) {
			snprintf(err, errlen, "turns: %d of %d arms were ready within %d s", got, n,
				 timeout_s > 0 ? timeout_s : 60);
			goto fail_started;
		}
	}
	close(ready[0][0]);
	return 0;

fail_started:
	close(ready[0][0]);
	close(t->rfd);
	close(t->wfd);
	rl_turns_abort(arms, n);
	return -1;
fail:
	rl_close_all(ring, procs, -1, -1, -1);
	rl_close_all(out, n, -1, -1, -1);
	rl_close_all(ready, 1, -1, -1, -1);
	for (int j = 0; j < n; j++)
		arms[j].outfd = -1;
	rl_turns_abort(arms, n);
	return -1;
}

static char *rl_read_all(int fd)
{
	size_t len = 0, cap = 4096;
	char *buf = malloc(cap);

	if (!buf)
		return NULL;
	for (;;) {
		ssize_t k;

		if (len + 1 >= cap) {
			char *nb = realloc(buf, cap * 2);

			if (!nb) {
				free(buf);
				return NULL;
			}
			buf = nb;
			cap *= 2;
		}
		k = read(fd, buf + len, cap - len - 1);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			break;
		len += (size_t)k;
	}
	buf[len] = 0;
	return buf;
}

int rl_turns_finish(struct rl_turns_arm *arms, int n, char **out, char *err, size_t errlen)
{
	int rc = 0;

	for (int j = 0; j < n; j++) {
		int st = 0;

		out[j] = arms[j].outfd >= 0 ? rl_read_all(arms[j].outfd) : NULL;
		if (arms[j].outfd >= 0)
			close(arms[j].outfd);
		arms[j].outfd = -1;
		if (arms[j].pid > 0) {
			while (waitpid(arms[j].pid, &st, 0) < 0 && errno == EINTR)
				;
			arms[j].pid = -1;
		}
		if (!rc && (!WIFEXITED(st) || WEXITSTATUS(st) != 0)) {
			snprintf(err, errlen, "turns: arm %s %s %d", arms[j].path,
				 WIFEXITED(st) ? "exited with status" : "was killed by signal",
				 WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
			rc = -1;
		} else if (!rc && !out[j]) {
			snprintf(err, errlen, "turns: out of memory reading arm %s", arms[j].path);
			rc = -1;
		}
	}
	return rc;
}
