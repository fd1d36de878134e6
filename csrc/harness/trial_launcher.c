/*
 * trial_launcher: starts ringlab's trial processes, one request at a time, so that a trial
 * costs one fork and one exec of the trial binary, not the runner's spawn of a privilege
 * wrapper as well (ringlab.run.launcher).
 *
 * ringlab starts one launcher per run, as the unprivileged user when it runs as root
 * (setpriv: the user's uid and gid, no groups, no capabilities, no_new_privs), so each trial
 * inherits exactly those credentials.  The launcher is the parent of every trial: each
 * trial gets PR_SET_PDEATHSIG SIGKILL towards the launcher, and the launcher gets it towards
 * ringlab (--parent PID), so no trial outlives a killed ringlab.
 *
 * Protocol (stdin: requests; stdout: replies):
 *   "READY trial_launcher 1\n"                              once, at the start
 *   request  "RUN <nargs> <nenv> <bytes>\n" then <bytes> bytes: nargs argv strings, then nenv
 *            environment strings, each NUL-terminated
 *   reply    "PID <pid>\n" once the trial is forked (its own session and process group),
 *            then "END <exit|signal> <code> <wall_ns> <outlen> <errlen>\n", its stdout and its
 *            stderr, once it ended and its process group was killed (leftover children)
 *            or "ERR <text>\n" when the request is malformed or fork fails
 * An exec failure is exit 127 with the reason on the trial's stderr.  EOF on stdin ends it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_REQUEST (64u << 20)

static int write_all(int fd, const void *buf, size_t n)
{
	const char *p = buf;
	while (n) {
		ssize_t w = write(fd, p, n);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

static int read_all(int fd, void *buf, size_t n)
{
	char *p = buf;
	while (n) {
		ssize_t r = read(fd, p, n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		p += r;
		n -= (size_t)r;
	}
	return 0;
}

/* One line from fd 0, byte by byte (requests are rare and short), without the newline. */
static int read_line(char *buf, size_t cap)
{
	size_t n = 0;
	for (;;) {
		char c;
		ssize_t r = read(0, &c, 1);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		if (c == '\n')
			break;
		if (n + 1 >= cap)
			return -2;
		buf[n++] = c;
	}
	buf[n] = '\0';
	return 0;
}

static void reply(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void reply(const char *fmt, ...)
{
	char line[256];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (n < 0 || write_all(1, line, (size_t)n < sizeof(line) ? (size_t)n : sizeof(line) - 1) < 0)
		_exit(3);
}

struct buf {
	char *p;
	size_t n, cap;
};

static int buf_read(struct buf *b, int fd)
{
	if (b->cap - b->n < 65536) {
		size_t cap = b->cap ? 2 * b->cap : 131072;
		char *p = realloc(b->p, cap);
		if (!p)
			return -1;
		b->p = p;
		b->cap = cap;
	}
	ssize_t r = read(fd, b->p + b->n, b->cap - b->n);
	if (r < 0)
		return errno == EINTR ? 1 : -1;
	b->n += (size_t)r;
	return r == 0 ? 0 : 1;
}

static long long now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void run_one(char **argv, char **envp, pid_t self)
{
	int out[2], err[2];
	if (pipe2(out, O_CLOEXEC) < 0 || pipe2(err, O_CLOEXEC) < 0) {
		reply("ERR pipe: %s\n", strerror(errno));
		return;
	}
	long long t0 = now_ns();
	pid_t pid = fork();
	if (pid < 0) {
		reply("ERR fork: %s\n", strerror(errno));
		close(out[0]), close(out[1]), close(err[0]), close(err[1]);
		return;
	}
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
		if (getppid() != self)
			_exit(127);
		setsid();
		signal(SIGPIPE, SIG_DFL);
		int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
		if (null < 0 || dup2(null, 0) < 0 || dup2(out[1], 1) < 0 || dup2(err[1], 2) < 0)
			_exit(127);
		execve(argv[0], argv, envp);
		dprintf(2, "trial_launcher: exec %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	close(out[1]);
	close(err[1]);
	reply("PID %d\n", (int)pid);
	struct buf bo = {0}, be = {0};
	struct pollfd fds[2] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}};
	int open_fds = 2;
	while (open_fds) {
		if (poll(fds, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		for (int i = 0; i < 2; i++) {
			if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
			int r = buf_read(i ? &be : &bo, fds[i].fd);
			if (r <= 0) {
				close(fds[i].fd);
				fds[i].fd = -1;
				open_fds--;
			}
		}
	}
	for (int i = 0; i < 2; i++)
		if (fds[i].fd >= 0)
			close(fds[i].fd);
	int status = 0;
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	long long wall = now_ns() - t0;
	kill(-pid, SIGKILL); /* children the trial left in its group */
	if (WIFSIGNALED(status))
		reply("END signal %d %lld %zu %zu\n", WTERMSIG(status), wall, bo.n, be.n);
	else
		reply("END exit %d %lld %zu %zu\n", WEXITSTATUS(status), wall, bo.n, be.n);
	if ((bo.n && write_all(1, bo.p, bo.n) < 0) || (be.n && write_all(1, be.p, be.n) < 0))
		_exit(3);
	free(bo.p);
	free(be.p);
}

int main(int argc, char **argv)
{
	pid_t self = getpid();
	if (argc == 3 && strcmp(argv[1], "--parent") == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
		if (getppid() != (pid_t)atol(argv[2]))
			return 1; /* the parent is gone already */
	} else if (argc != 1) {
		fprintf(stderr, "usage: trial_launcher [--parent PID] (requests on stdin; ringlab.run.launcher)\n");
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	reply("READY trial_launcher 1\n");
	char line[128];
	for (;;) {
		int r = read_line(line, sizeof(line));
		if (r == -1)
			return 0;
		unsigned long nargs, nenv, bytes;
		if (r < 0 || sscanf(line, "RUN %lu %lu %lu", &nargs, &nenv, &bytes) != 3 || nargs < 1 ||
		    bytes > MAX_REQUEST || nargs + nenv > bytes) {
			reply("ERR bad request\n");
			return 2;
		}
		char *data = malloc(bytes + 1);
		char **vec = calloc(nargs + nenv + 2, sizeof(char *));
		if (!data || !vec || read_all(0, data, bytes) < 0) {
			reply("ERR request truncated\n");
			return 2;
		}
		data[bytes] = '\0';
		size_t off = 0, k = 0;
		for (; k < nargs + nenv && off < bytes; k++) {
			vec[k + (k >= nargs)] = data + off;
			off += strlen(data + off) + 1;
		}
		if (k != nargs + nenv || off != bytes) {
			reply("ERR bad request\n");
			return 2;
		}
		vec[nargs] = NULL;
		vec[nargs + 1 + nenv] = NULL;
		run_one(vec, vec + nargs + 1, self);
		free(vec);
		free(data);
	}
}
