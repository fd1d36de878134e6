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
# # 13 · Which commit made ptr_ring slower? `ringlab bisect` on a series with a known answer
#
# "ptr_ring got slower between these two revisions": `ringlab bisect` finds the first commit
# that changed what the experiment measures, with three-arm steps (good, bad, candidate in the
# same rounds) and a CI for every call (docs/bisect.md).  To see that it names the right commit,
# and that it does not blame commits that only move code, this notebook bisects a **test
# repository whose answer is known**: built at run time from this machine's real
# `include/linux/ptr_ring.h` (the newest `/usr/src/*` header tree), under `build/`, with a
# series of commits touching the header:
#
# * **comment-only** edits (several): the compiled code is the same;
# * a **layout-only** edit: an unused function ahead of the ring code (48 bytes of `.text`), which
#   moves the code after it and runs nothing;
# * a **reordering**: two independent functions' definitions swapped, no cost;
# * an **unrelated** commit (another file), which the bisect skips;
# * exactly **one commit that adds a cost**: ringlab's `builtin:flush-delay:N` patch, a spin loop
#   of N iterations after the batch flush in `__ptr_ring_discard_one()`.
#
# Set `tree`, `good` and `bad` to bisect your own kernel tree instead.

# %% tags=["parameters"]
profile: str = "quick"  # smoke (seconds per step) | quick (minutes) | full
tree: str = ""  # git tree to bisect; empty: build the test repository from this machine's kernel headers
good: str = ""  # good revision; empty: the test repository's first commit (required with tree)
bad: str = ""  # bad revision; empty: the test repository's last commit (required with tree)
threshold: float = 2.0  # smallest bad-vs-good change (percent) worth bisecting
layouts: int = 4  # code layouts per arm (4 or more: with 2 the t interval has 1 degree of freedom)
modes: str = "0"  # ptr_ring modes measured in every step (0: one thread alternates produce/consume)
trials: int = 0  # rounds per step run; 0: the profile's, at least 2 per layout
count: int = 0  # operations per timed trial; 0: the profile's, at least 2000000 (shorter trials are start-up noise)
spins: int = 24  # iterations of the planted spin loop (test repository only)
icount: bool = True  # also count instructions per op under callgrind in every step (when valgrind is here)
seed: int = -1  # seed of the layouts and trial order (-1: drawn each run, recorded in env.json)
out_dir: str = ""  # bisect folder; empty: scratch/bisect/<host>/<run-id> (ringlab reproduce passes a folder under results/)
host: str = ""  # machine id for the results path; empty: $RINGLAB_HOST or the hostname

# %% [markdown]
# Parameters and the range are checked before anything runs; without `tree`, the test repository
# is built (or reused: the same header and `spins` give the same commits).

# %%
from ringlab.lab import notebook as rn
from ringlab.lab.bisect import notebook as nb

RUN = rn.run_dir(out_dir, "bisect", host)
B = nb.plan(RUN, tree=tree, good=good, bad=bad, threshold=threshold, profile=profile, layouts=layouts,
            modes=modes, trials=trials, count=count, icount=icount, seed=seed, spins=spins)
print("bisect folder:", RUN)
if not rn.skip_rest_if(None if B.config else B.why_not, "bisect", RUN):
    print("tree:", B.config.tree, f"\ngood: {B.config.good}\nbad:  {B.config.bad}")
    print("each step runs ptr_ring with", B.config.params)

# %% [markdown]
# ## The series, and what we expect
# The planted commit adds, per flush, N iterations of two instructions (gcc counts down: sub,
# jne); with a ring of 1000 and the default batch of 16, 63 flushes per 1000 operations.  It is
# the first bad commit; the commits after it carry its cost and are bad too; every commit before
# it, comment-only, layout-only or reordered, is good.

# %%
if B.repo is None:
    rn.markdown("*The series: not available here because " + (B.why_not or "a tree was given") + ".*")
else:
    rn.table(nb.series_table(B.repo))
    print(nb.expectation(B.repo))

# %% [markdown]
# ## The bisection
# Step 00 checks the endpoints (bad against good); each further step measures one candidate in
# three arms and calls it good, bad or unclear.

# %%
state = nb.run(B.config) if B.config else None
if state:
    rn.markdown(nb.result_text(state))
else:
    rn.not_available("the bisection", B.why_not)

# %% [markdown]
# ## Every step
# `vs good` and `vs bad`: the candidate's change in ns/op against each endpoint with its CI;
# `expected`: the call the series implies.  The figure lists every commit of the range in
# history order by short hash and subject, with each measured one's effect against good in
# the + = better sign (a regression is negative) and the endpoints' effect shaded.

# %%
if state:
    rn.table(nb.step_table(state, B.repo))
    rn.figures([RUN / "figures" / "effect.png"])
else:
    rn.not_available("the steps", B.why_not)

# %% [markdown]
# ## Instructions per operation (callgrind)
# Exact counts of each step's arms in mode 0: `bad - good` of step 00 is what the planted commit
# added (the only commit that changes the code that runs), to compare with the expectation above.

# %%
IC = nb.instructions_table(RUN, state) if state else None
if IC is not None and len(IC):
    rn.table(IC)
else:
    rn.not_available("callgrind counts", "icount is off or valgrind is missing" if B.config else B.why_not)

# %% [markdown]
# ## Did it find the planted commit?

# %%
if state and B.repo is not None:
    rn.markdown(nb.check(state, B.repo))
else:
    rn.not_available("the check against the series", B.why_not or "a tree of your own has no known answer")
