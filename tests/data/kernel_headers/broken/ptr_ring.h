/* SPDX-License-Identifier: MIT */
/*
 * ringlab test fixture: a ptr_ring.h that does NOT compile.  It declares the
 * struct with a field type the shim does not provide, so the first compiler
 * error is on the line below; tests check that KernelHeaderError names this
 * file and that line.
 */
#ifndef _LINUX_PTR_RING_H
#define _LINUX_PTR_RING_H 1

#include <linux/spinlock.h>

struct ptr_ring {
	int producer ____cacheline_aligned_in_smp;
	raw_spinlock_with_no_such_type_t producer_lock;
	int consumer_head ____cacheline_aligned_in_smp;
	int consumer_tail;
	int size;
	int batch;
	void **queue;
};

#endif /* _LINUX_PTR_RING_H */
