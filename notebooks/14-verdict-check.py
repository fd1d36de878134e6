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
# # 14 · Is a verdict about the code change?
#
# A compiled binary is one sample from the space of code layouts: the same source with its
# functions a few bytes further on can run several percent faster or slower.  So a verdict
# from one build pair may be about where the code landed, not about the change.  This
# notebook checks ringlab's verdicts on changes whose effect we know before measuring, made
# to the real `include/linux/ptr_ring.h` of the distro's kernel headers (**base**):
#
# * `pad48`: `builtin:pad:48`, 48 bytes of code that is never called, placed ahead of the
#   ring code.  Exactly the same instructions run (callgrind counts are equal); only the
#   layout changes.
# * `d2`: `builtin:flush-spin:N`, N iterations of a loop over a volatile counter after each
#   batch flush (`for (volatile int i = 0; i < N; i++);`, which gcc can neither remove nor
#   unroll), N the whole number of iterations whose added instructions per operation come
#   nearest **+2.5%** of the base's;
# * `d8`: the same, nearest **+7.7%**.
#
# N is whole, so an arm adds a little more or less than its target: the table under "What we
# expect, before measuring" gives, before anything is timed, the figure that N adds on this
# header ("expected extra %").
#
# N is sized by counting, not by assuming: callgrind counts the base and two probe builds
# (1 and 8 iterations), and the line through them gives the cost of the loop's set-up and of
# one iteration.  The run then counts every arm exactly (`icount`), and the table of
# instructions below shows by how much each arm really differs.
#
# Each arm is built `layouts` times with seeded pads and function alignments, and the verdict
# comes from a t interval across the layout-pair estimates (design `layouts`, see
# docs/verdicts.md), so it speaks for the code, not for one binary.  A second run builds
# `base` and `d8` with `-falign-functions=64 -falign-loops=64 -falign-jumps=64`.
#
# ## What we expect, before measuring
#
# * **pad48 is not called**: "no significant difference" or "inconclusive", never faster or
#   slower (any call would be about the layout);
# * **d2 is never called faster** (it may be too small to see: inconclusive is fine);
# * **d8 is called slower**;
# * **d8 gets the same call in the aligned build, and its aligned estimate lies inside the
#   default build's 95% next-run interval**: both builds describe the same change, so the
#   aligned one may move the estimate as much as another run on this host would, not more
#   (docs/verdicts.md states this criterion; narrow CIs of two layouts need not overlap).
#
# At `profile=smoke` (the tests) the trials are far too few for any of this: the run only
# shows that the pipeline works, and most verdicts are inconclusive.

# %% tags=["parameters"]
profile: str = "quick"  # smoke (seconds, tests) | quick (minutes) | full (the committed run)
base: str = ""  # header source of every arm: ptr_ring.h, kernel tree or headers package; empty: the newest kernel header tree
layouts: int = 0  # builds (code layouts) per arm; 0: the profile's default
rounds_per_layout: int = 0  # rounds per layout pair; 0: 20 at profile full (the design bench power sizes), else the profile's trials
seed: int = -1  # seed of the layouts and trial order (-1: drawn each run, recorded in env.json)
out_dir: str = ""  # run folder; empty: scratch/verdict-check/<host>/<run-id> (ringlab reproduce passes one under results/)
host: str = ""  # machine id for the results path; empty: $RINGLAB_HOST or the hostname

# %% [markdown]
# The arms are generated against the base now (patches into `build/patches/`).  d2's and
# d8's N come from callgrind counts of the base and of the two probe builds (mode 0, ring of
# 1000).  An empty `base` on a machine without a kernel header tree records the run folder as
# skipped, with the reason and how to get the headers, and every later cell says so.

# %%
from ringlab.lab import notebook as rn
from ringlab.report.figures import forest, host_noise_floor
from ringlab.rundir import RunOutput
from ringlab.studies import verdict_check as vc

RUN = rn.run_dir(out_dir, "verdict-check", host)
rn.skip_rest_if(vc.missing_default_base(base), "ptr_ring", RUN)

# %%
CHECK = vc.plan(base)
ALIGNED = RUN / "aligned"
common = dict(profile=profile, modes="0", icount=True, seed=seed, layouts=layouts or None)
common["trials"] = vc.rounds(rn.params("ptr_ring", **common)["layouts"], rounds_per_layout, profile)
P = rn.params("ptr_ring", variants=CHECK.variants(CHECK.default_arms),
              kernel_headers=CHECK.kernel_headers(CHECK.default_arms), **common)
PA = rn.params("ptr_ring", variants=CHECK.variants(CHECK.aligned_arms),
               kernel_headers=CHECK.kernel_headers(CHECK.aligned_arms), cflags=vc.ALIGN_CFLAGS, **common)
print("run folder:", RUN, "(aligned build:", ALIGNED, ")")
print("base:", CHECK.base, f"({CHECK.base_per_op:.3f} instructions/op, {CHECK.count_source})")
if CHECK.spin_cost:
    print("flush-spin costs (callgrind, per op): %.3f set-up + %.3f per iteration" % CHECK.spin_cost)
print("layouts per arm:", P["layouts"], "| rounds:", P["trials"])
rn.table(CHECK.expected())

# %% [markdown]
# ## Run: the default build, then the aligned build
# One interleaved run of all four arms in mode 0, with callgrind counts after the timed
# rounds; then `base` and `d8` again with the aligned flags.

# %%
rn.run("ptr_ring", P, RUN)
rn.run("ptr_ring", PA, ALIGNED)
R = rn.report(RUN, baseline=vc.BASELINE)
rn.markdown(rn.run_overview(RUN))

# %% [markdown]
# ## Verdicts
# Each arm against `base`: %change (+ = faster) with its CI (t interval across the layout pairs), the
# layout spread and its share of the CI, and the verdict.  The forest shows the same rows per
# build and ring size in the + = better sign (an arm that costs time is negative), with the
# interval the next run is expected in, the host's A/A band shaded, each row's expected call in
# its label (called rows filled and coloured by direction), and the extra instructions each arm
# was stated to add, as -%, as an x: a count, not a time prediction (a spin loop's instructions
# cost more time than the ring's average one); the x axis states the CI level.

# %%
CMP, CMP_ALIGNED = vc.compare_run(RUN), vc.compare_run(ALIGNED)
rn.table(vc.verdict_table(CMP, "default"))
rn.table(vc.verdict_table(CMP_ALIGNED, "aligned"))
HOST = RunOutput(RUN).host
STATED = CHECK.expected()
EXPECTED = dict(zip(STATED["arm"], STATED["expected extra %"]))
CALLS = dict(zip(STATED["arm"], STATED["expected verdict"]))
rn.figures(forest(vc.forest_rows(CMP, CMP_ALIGNED, host=HOST, expected=EXPECTED, calls=CALLS), RUN / "figures",
                  "verdict_check", "each arm against base, per build and ring size (CI across layouts; "
                  "x: the extra instructions stated before measuring)", noise={HOST: host_noise_floor(HOST)}))

# %% [markdown]
# ## Instructions per operation, exactly
# Callgrind counts of the measured region, per arm and build, beside the extra stated before
# measuring.  pad48 must count exactly what base counts.

# %%
rn.table(vc.instruction_table({"default": RUN, "aligned": ALIGNED}, CHECK))

# %% [markdown]
# ## Did the expectations hold?

# %%
rn.table(vc.expectations(CMP, CMP_ALIGNED))
