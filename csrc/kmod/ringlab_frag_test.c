// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * ringlab_frag_test: a page_frag-style push/pop timing loop for the kmod experiment.
 *
 * A push thread on test_push_cpu allocates nr_test fragments of test_alloc_len bytes and hands
 * them through a ptr_ring to a pop thread on test_pop_cpu, which frees them.  init waits for both
 * and logs "N of iterations for aligned|non-aligned testing took: Xus", then returns 0 (the
 * module stays loaded until rmmod).  test_fail=1 makes init fail with -EINVAL; test_hang_s=N makes
 * init sleep N seconds first (a module that hangs in init).
 */
#include <linux/module.h>
#include <linux/kthread.h>
#include <linux/completion.h>
#include <linux/ptr_ring.h>
#include <linux/slab.h>
#include <linux/delay.h>
#include <linux/ktime.h>
#include <linux/cpumask.h>

static int test_push_cpu;
module_param(test_push_cpu, int, 0);
MODULE_PARM_DESC(test_push_cpu, "CPU of the push thread (-1: not bound)");
static int test_pop_cpu;
module_param(test_pop_cpu, int, 0);
MODULE_PARM_DESC(test_pop_cpu, "CPU of the pop thread (-1: not bound)");
static int test_alloc_len = 2048;
module_param(test_alloc_len, int, 0);
MODULE_PARM_DESC(test_alloc_len, "fragment size in bytes, 1..4096");
static int nr_test = 2000000;
module_param(nr_test, int, 0);
MODULE_PARM_DESC(nr_test, "fragments to pass");
static bool test_align;
module_param(test_align, bool, 0);
MODULE_PARM_DESC(test_align, "64-byte aligned fragments");
static int test_fail;
module_param(test_fail, int, 0);
MODULE_PARM_DESC(test_fail, "1: init fails with -EINVAL");
static int test_hang_s;
module_param(test_hang_s, int, 0);
MODULE_PARM_DESC(test_hang_s, "seconds init sleeps before the test");

static struct ptr_ring ring;
static struct completion pop_done;
static atomic_t push_failed;

static void free_frag(void *p)
{
	kfree(p);
}

static int push_thread(void *arg)
{
	int i;

	for (i = 0; i < nr_test; i++) {
		void *p = test_align ? kmalloc(ALIGN(test_alloc_len, 64), GFP_KERNEL)
				     : kmalloc(test_alloc_len, GFP_KERNEL);

		if (!p) {
			atomic_set(&push_failed, 1);
			break;
		}
		while (ptr_ring_produce(&ring, p))
			cond_resched();
	}
	return 0;
}

static int pop_thread(void *arg)
{
	int n = 0;

	while (n < nr_test && !atomic_read(&push_failed)) {
		void *p = ptr_ring_consume(&ring);

		if (!p) {
			cond_resched();
			continue;
		}
		kfree(p);
		n++;
	}
	complete(&pop_done);
	return 0;
}

static struct task_struct *start(int (*fn)(void *), int cpu, const char *name)
{
	struct task_struct *t = kthread_create(fn, NULL, "%s", name);

	if (IS_ERR(t))
		return t;
	if (cpu >= 0)
		kthread_bind(t, cpu);
	wake_up_process(t);
	return t;
}

static int __init ringlab_frag_test_init(void)
{
	struct task_struct *push, *pop;
	ktime_t t0;
	int err;

	if (test_hang_s > 0)
		msleep(test_hang_s * 1000);
	if (test_fail)
		return -EINVAL;
	if (test_alloc_len < 1 || test_alloc_len > 4096 || nr_test < 1)
		return -EINVAL;
	if ((test_push_cpu >= 0 && !cpu_online(test_push_cpu)) ||
	    (test_pop_cpu >= 0 && !cpu_online(test_pop_cpu)))
		return -EINVAL;
	err = ptr_ring_init(&ring, 512, GFP_KERNEL);
	if (err)
		return err;
	init_completion(&pop_done);
	atomic_set(&push_failed, 0);
	t0 = ktime_get();
	/*
	 * A thread is not started when the loading process has a fatal signal pending
	 * (a trial killed while init slept): say so, so that the log shows init returned.
	 */
	pop = start(pop_thread, test_pop_cpu, "rl_frag_pop");
	if (IS_ERR(pop)) {
		pr_info("ringlab_frag_test: pop thread not started (%ld)\n", PTR_ERR(pop));
		ptr_ring_cleanup(&ring, free_frag);
		return PTR_ERR(pop);
	}
	push = start(push_thread, test_push_cpu, "rl_frag_push");
	if (IS_ERR(push)) {
		pr_info("ringlab_frag_test: push thread not started (%ld)\n", PTR_ERR(push));
		atomic_set(&push_failed, 1);
		wait_for_completion(&pop_done);
		ptr_ring_cleanup(&ring, free_frag);
		return PTR_ERR(push);
	}
	wait_for_completion(&pop_done);
	pr_info("%d of iterations for %s testing took: %lldus\n", nr_test,
		test_align ? "aligned" : "non-aligned", ktime_us_delta(ktime_get(), t0));
	ptr_ring_cleanup(&ring, free_frag);
	return atomic_read(&push_failed) ? -ENOMEM : 0;
}

static void __exit ringlab_frag_test_exit(void)
{
}

module_init(ringlab_frag_test_init);
module_exit(ringlab_frag_test_exit);
MODULE_LICENSE("Dual MIT/GPL");
MODULE_DESCRIPTION("page_frag-style push/pop timing loop for ringlab's kmod experiment");
