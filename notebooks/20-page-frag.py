# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.7
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 20 · page_frag before and after Part-1 (seed 002)
#
# Yunsheng Lin's `page_frag_test.ko` pushes fragments of `test_alloc_len` bytes into a
# 512-slot ptr_ring from one CPU and pops and frees them on another.  Alexander Duyck asked
# whether the "after" numbers had really been re-measured (they were identical across several
# revisions), and why the aligned case fell from 3.4 s to 0.9 s.  On a single CPU the
# difference vanished: the scheduler dominated.
#
# We run our own user-space page_frag cache, *before* (offset counts down, alignment rounds
# down) and *after* (offset counts up, alignment rounds up, page/order/pfmemalloc packed in one
# word), aligned and non-aligned, over three fragment sizes, with push and pop on the same CPU
# and on each CPU-pair class, and answer the thread's questions with data.

# %% tags=["parameters"]
profile: str = "quick"  # smoke (seconds) | quick (minutes) | full (the committed run)
variants: str = "before,after"  # page_frag variants
baseline: str = "before"  # the variant every other one is compared against
aligns: str = "0,1"  # 0: non-aligned, 1: 64-byte aligned (test_align)
alloc_lens: str = "12,64,2048"  # fragment sizes in bytes (test_alloc_len)
nr_test: int = 0  # fragments per trial; 0: the profile's default
trials: int = 0  # measured trials per configuration; 0: the profile's default
target_ci: float = 0  # stop when every comparison's 95% CI half-width is at most this many percent (0: fixed trials)
budget: float = 0  # seconds of trial time the target may spend (0: no limit)
cpus: str = "auto"  # push:pop placement: auto (incl. same CPU) | all | none | "1:2,3:4"
seed: int = -1  # seed of the layouts and trial order (-1: drawn each run, recorded in env.json)
out_dir: str = ""  # run folder; empty: scratch/page-frag/<host>/<run-id> (ringlab reproduce passes a folder under results/)
host: str = ""  # machine id for the results path; empty: $RINGLAB_HOST or the hostname

# %%
from ringlab.lab import notebook as rn
from ringlab.report import vs_published as vp

P = rn.params("page_frag", profile=profile, variants=variants, aligns=aligns, alloc_lens=alloc_lens,
              nr_test=nr_test or None, trials=trials or None,
              target_ci=target_ci or None, budget=budget or None, cpus=cpus, seed=seed, baseline=baseline)
RUN = rn.run_dir(out_dir, "page-frag", host)
print("run folder:", RUN)

# %%
result = rn.run("page_frag", P, RUN)
rn.markdown(rn.run_overview(RUN))

# %% [markdown]
# ## Is the gain real?
# Every configuration, after against before: %change (+ = faster) with its CI in the same sign,
# beside the arms' centers it is computed from, and a verdict.

# %%
R = rn.report(RUN, baseline=baseline, labels={"before": "before", "after": "after"})
rn.markdown(R.markdown)

# %% [markdown]
# ## Does it vanish on one CPU?
# The same comparison split by where push and pop ran.  When both run on one CPU every item
# waits for a context switch, so the ring and the allocator hardly matter.

# %%
rn.table(vp.by_placement_table(R, baseline=baseline))
rn.show_figures(R, "forest", "box", "order")

# %% [markdown]
# ## Were "before" and "after" really different binaries, measured at different times?

# %%
rn.markdown(vp.provenance_text(RUN))

# %% [markdown]
# ## Published vs reproduced
# The thread's `perf stat -r 200` blocks (kernel module, 2 CPUs 16/17 and 1 CPU), parsed, and
# set beside ours as after/before ratios.  The kernel module allocates real pages through the
# page allocator, so only ratios are comparable.

# %%
rn.table(vp.published_vs_reproduced_page_frag(R, baseline=baseline))

# %% [markdown]
# ## The reply
# The run as plain text for the mailing list, in the kernel test robot's shape (72 columns, one
# `%change` row per configuration, + = better): `ringlab mail RUN` prints the same text.  It is
# also saved as `mail.txt` in the run folder.

# %%
NB_PARAMS = dict(profile=profile, variants=variants, baseline=baseline, aligns=aligns, alloc_lens=alloc_lens,
                 nr_test=nr_test, trials=trials, target_ci=target_ci, budget=budget, cpus=cpus, seed=seed)
print(rn.write_mail(R, baseline=baseline, notebook=("20-page-frag.ipynb", NB_PARAMS)))
