/* SPDX-License-Identifier: MIT */
/*
 * turns.h - arms that take turns: the processes of one interleaved round.
 *
 * A VM's vCPU runs fast or slow as its host's other work comes and goes, in
 * spells of milliseconds to seconds.  Two arms measured one after the other,
 * each in its own process, are often measured in different spells, and their
 * ratio carries the difference.  Here the arms of a round run as processes
 * that take turns on the same CPUs: arm 0 (the leader, the process the runner
 * started) times one loop of -N items, then arm 1 one loop, ..., then arm 0
 * its second loop, and so on, -r loops each.  Loop k of every arm is timed
 * within a few loops of the others, so each spell slows them alike.  Every
 * arm is still its own binary (its own build and layout), so what is timed is
 * exactly what a process of that arm alone would time.
 *
 * The turn passes round a ring of pipes: arm i waits for one byte on its
 * own pipe before each loop and writes one byte into arm i+1's after it
 * (arm n-1 writes into the leader's).  A waiting arm sleeps in poll(): it
 * takes no CPU from the arm whose turn it is.  The leader takes the first
 * turn once every other arm has said it is ready (one byte each on a ready
 * pipe), so no arm's start-up runs beside a timed loop.  Each process holds
 * only the ends it uses, so when an arm dies the next one reads end-of-file,
 * reports it and ends too, round to the leader: nothing waits forever.
 *
 * Pairs: "arm i wrote into i+1's pipe" happens-before "arm i+1 read it"
 * (a pipe is a kernel-ordered channel between processes); no memory is shared.
 */
#ifndef RINGLAB_TURNS_H
#define RINGLAB_TURNS_H

#include <stddef.h>
#include <sys/types.h>

/* The most arms one interleaved round holds (the leader included). */
#define RL_TURNS_MAX_ARMS 8

/* One process's part in the ring. */
struct rl_turns {
	int rfd;		/* wait here for the turn (-1: not taking turns) */
	int wfd;		/* pass the turn on here */
	int readyfd;		/* a follower's "ready" byte goes here (-1: none) */
	int timeout_s;		/* the longest wait for a turn, seconds */
};

/* Another arm of the round, started by the leader. */
struct rl_turns_arm {
	const char *path;	/* its binary */
	int copy;		/* its --copy */
	pid_t pid;		/* once started */
	int outfd;		/* its stdout, read by the leader */
};

/* Parse "RFD,WFD[,READYFD]" (the follower's --turns); 0 ok, -1 bad. */
int rl_turns_parse(const char *s, struct rl_turns *t);

/* A follower: say "ready" (when it has a ready pipe). 0 ok, -1 with err. */
int rl_turns_ready(struct rl_turns *t, char *err, size_t errlen);

/* Wait for the turn: 0 when it came, -1 with err on end-of-file (an arm
 * ended), a timeout or an error. */
int rl_turns_wait(struct rl_turns *t, char *err, size_t errlen);

/* Pass the turn on: 0 ok, -1 with err. */
int rl_turns_pass(struct rl_turns *t, char *err, size_t errlen);

/*
 * The leader: start arms[0..n-1] (execv of arm->path with the argv that
 * argv_of(arm, turns, arg) returns, NULL-terminated, where turns is the
 * "RFD,WFD,READYFD" its --turns must be given; stdout into a pipe the leader
 * reads, stderr shared), each holding only its ends of the ring; then wait
 * until every one is ready.  t becomes the leader's part.  0 ok; -1 with err
 * (the arms started are killed and reaped).
 */
int rl_turns_start(struct rl_turns_arm *arms, int n,
		   char **(*argv_of)(const struct rl_turns_arm *, const char *turns, void *arg),
		   void *arg, struct rl_turns *t, int timeout_s, char *err, size_t errlen);

/*
 * The leader, after its last loop: read every arm's stdout to the end into
 * out[i] (malloc'd, NUL-terminated) and reap it.  0 when every arm exited 0;
 * -1 with err naming the first that did not (out[] filled as far as read).
 */
int rl_turns_finish(struct rl_turns_arm *arms, int n, char **out, char *err, size_t errlen);

/* The leader, on a failure of its own: kill and reap the arms. */
void rl_turns_abort(struct rl_turns_arm *arms, int n);

#endif /* RINGLAB_TURNS_H */
