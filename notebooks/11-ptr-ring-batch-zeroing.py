# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 11 · ptr_ring: batch ring zeroing (seed 003)
#
# In April 2017 Michael Tsirkin changed the consumer to write NULL into consumed slots in
# batches of two cache lines, in reverse order, so that it stops writing the cache line the
# producer is about to reuse when the ring is almost full.  Jason Wang measured vhost going
# from 1.84 to 2.00 Mpps.  The review asked three more things: whether dropping the consumer
# spinlock helps (the lock arm), whether the batch size matters (the batch sweep), and whether
# batching really removes the false sharing (perf c2c: `ringlab import-perf` reads a recorded
# `perf c2c report` from bare metal; a VM has no PMU for it).
#
# Here `prebatch` (NULL on every consume) is set against `batch` in the **near-full** mode
# (`-m 2`: the producer keeps the ring full, so each freed slot is refilled at once), over a
# sweep of ring sizes.  Small rings fall back to batch = 1; large rings are where batching
# should help.  Every effect is stated in one sign: **+ = batch better (less time per
# operation)**, with its 95% CI (the verdicts Holm-adjusted per family), beside
# the host's A/A band (its noise floor, from its calibration): an effect inside the band cannot
# be told from noise on that host.

# %% tags=["parameters"]
profile: str = "quick"  # smoke (seconds) | quick (±0.5% in mode 0, ±1% in mode 1, 60 s budget) | full (±0.25% / ±0.75%, 300 s)
variants: str = "prebatch,batch"  # rings to compare (prebatch is the baseline)
baseline: str = "prebatch"  # the variant every other one is compared against
modes: str = "2"  # 2: near-full SPSC (seed 003); 1: free-running SPSC
sizes: str = "16,64,256,1024,4096"  # ring sizes to sweep (comma-separated)
batch: int = 0  # consumer batch in slots for the size sweep; 0: the ring's default (16, or 1 when 16 > size/2)
lock_sizes: str = "16,1024"  # the lock arm: these sizes again with the spinlocked produce/consume (empty: no lock arm)
batches: str = "1,4,16,64"  # the batch sweep: consumer batch values, each a run at batch_ring_size (empty: none)
batch_ring_size: int = 1024  # ring size of the batch sweep
icount_sizes: str = "16,1024"  # callgrind instructions/op in mode 0 at these sizes (empty: no count)
count: int = 0  # operations per trial; 0: the profile's default
trials: int = 0  # measured trials per configuration; 0: the profile's default
target_ci: float = 0  # stop when every comparison's 95% CI half-width is at most this many percent (0: the profile's)
budget: float = 0  # seconds of builds and trials the target may spend (0: the profile's, else no limit); the lock arm and the batch sweep share as much again
cpus: str = "auto"  # producer:consumer placement: auto | all | none | "1:2,3:4"
seed: int = -1  # seed of the layouts and trial order (-1: drawn each run, recorded in env.json)
interleave: bool = False  # the arms of a round take turns loop by loop, each in its own process (csrc/harness/turns.h)
out_dir: str = ""  # run folder; empty: scratch/ptr-ring-batch-zeroing/<host>/<run-id> (ringlab reproduce passes a folder under results/)
host: str = ""  # machine id for the results path; empty: $RINGLAB_HOST or the hostname

# %%
from ringlab.lab import notebook as rn
from ringlab.report import figures as rf
from ringlab.report import vs_published as vp
from ringlab.rundir import RunOutput
from ringlab.studies import batch_zeroing as bz

common = dict(profile=profile, variants=variants, count=count or None, trials=trials or None,
              target_ci=target_ci or None, budget=budget or None, cpus=cpus, seed=seed, icount=False, baseline=baseline,
              interleave=interleave)
P = rn.params("ptr_ring", modes=modes, sizes=sizes, batch=batch, **common)
RUN = rn.run_dir(out_dir, "ptr-ring-batch-zeroing", host)
ARMS = {}   # sub-folder -> parameters of the runs that answer the thread's other questions
BATCHES = [int(x) for x in batches.split(",") if x.strip()]
# the lock arm and the batch sweep share one budget, the one the size sweep has
further = dict(common, budget=rn.shared_budget(P, len(BATCHES) + bool(lock_sizes.strip())) or budget or None)
if lock_sizes.strip():
    ARMS[bz.LOCK_DIR] = rn.params("ptr_ring", modes=modes, sizes=lock_sizes, batch=batch, lock=True, **further)
for b in BATCHES:
    ARMS[bz.batch_dir(b)] = rn.params("ptr_ring", modes=modes, sizes=str(batch_ring_size), batch=b, **further)
if icount_sizes.strip():
    # callgrind's count is exact and the same in every layout: one layout and two timed rounds
    # (a fixed design) carry it; the timing questions are the size sweep's
    ARMS[bz.ICOUNT_DIR] = rn.params("ptr_ring", **dict(common, icount=True, trials=2, layouts=1), modes="0",
                                    sizes=icount_sizes, batch=batch)
print("run folder:", RUN, "| further runs:", ", ".join(ARMS) or "none")

# %% [markdown]
# ## Run
# The size sweep, then the lock arm, the batch sweep and the instruction count, each its own
# run in a sub-folder (its own interleaved rounds: arms are compared only within a run).

# %%
result = rn.run("ptr_ring", P, RUN)
for sub, values in ARMS.items():
    rn.run("ptr_ring", values, RUN / sub)
rn.markdown(rn.run_overview(RUN))

# %% [markdown]
# ## Where batching helps, and where it does not
# One row per ring size and CPU pair: the arms' centers the effect is computed from, %change
# (+ = faster) with its CI in the same sign, and a verdict.

# %%
HOST = RunOutput(RUN).host
R = rn.report(RUN, baseline=baseline, labels={baseline: "prebatch", "batch": "batch zeroing"})
rn.table(vp.size_sweep_table(R, baseline=baseline))

# %%
rn.show_figures(R, "size_sweep")

# %% [markdown]
# ## Both hosts side by side
# This run's sweep beside the latest committed sweep of every other host under results/: the
# paired effect (+ = batch faster) per size, each host's A/A band shaded in its colour, the
# published effect (8% less time per packet) as an open diamond.

# %%
ROWS, NOISE = bz.host_effects(RUN, HOST, baseline=baseline)
rn.table(bz.hosts_table(ROWS, NOISE))
rn.figures(rf.paired_size_sweep(ROWS, RUN / "figures", "size_sweep_hosts",
                                "batch against prebatch, paired effect per ring size and host", noise=NOISE))

# %% [markdown]
# ## The lock arm and the batch sweep
# One forest: every comparison of this host's runs (the size sweep, the same sizes with the
# spinlocked produce/consume, one ring size with the consumer batch forced to each value),
# rows = configuration, the host's A/A band shaded, the published effect as a diamond.

# %%
EFFECTS = bz.effects(RUN, HOST, baseline=baseline)
rn.figures(rf.forest(EFFECTS, RUN / "figures", "forest", "batch against prebatch: size sweep, lock arm, "
                     "batch sweep", noise={HOST: rf.host_noise_floor(HOST)}))
if not any(a != "sweep" for a in bz.arm_runs(RUN)):
    rn.not_available("the lock arm and the batch sweep", "this run folder holds no lock/ or batch-N/ run "
                     "(lock_sizes and batches were empty, or the run predates them)")

# %% [markdown]
# ## Batch 1 at size 16: the same stores, more instructions
# At size 16 the default batch (16) is more than half the ring, so the batch ring falls back to
# batch 1 and NULLs each slot as it consumes it, as prebatch does: the stores the producer sees
# are the same.  The code that makes them is not.  `csrc/rings/ptr_ring_batch.h`'s
# `__ptr_ring_discard_one` with batch 1 takes the flush branch on every consume: it reads
# `consumer_tail`, runs the reverse NULL loop once, writes `consumer_tail` and then
# `consumer_head`; `ptr_ring_prebatch.h` stores one NULL and one index.  The callgrind counts
# below (mode 0: one produce and one consume per operation, one thread) measure that extra
# work per operation at each size; a batch-1 row next to a batch-16 row shows where it comes
# from.  The counts show work done, not time: where the batch ring counts more instructions at
# batch 1 and the size sweep calls it slower there, the extra work is one difference between
# the two rings that the code shows; no measurement here splits the timed difference into its
# causes.

# %%
IC = bz.instruction_table(RUN, baseline=baseline)
if len(IC):
    rn.table(IC)
    rn.markdown(bz.batch_one_text(IC, EFFECTS, baseline=baseline) or
                "*No ring size of this run ran the batch ring with batch 1 in both the count and the sweep.*")
else:
    rn.not_available("instructions per operation", "this run has no callgrind rows (icount_sizes was empty, "
                     "valgrind is missing, or the run predates the count)")

# %% [markdown]
# ## Throughput and the core-to-core latency
# Bars: median throughput with its 95% bootstrap CI; lines: two references from the pair's
# one-way cache-line latency (one item per round trip; eight slots per line transfer).  They
# are references, not bounds: a ring pipelines several lines at once, so a bar can pass them.

# %%
rn.show_figures(R, "spsc")

# %% [markdown]
# ## Full summary and the remaining figures

# %%
rn.markdown(R.markdown)
rn.show_figures(R, "box", "order", "cpu_pairs", "counters")

# %% [markdown]
# ## Published vs reproduced
# Jason Wang's vhost numbers, as ratios to the unbatched ring, beside ours (ns/op turned into
# a throughput ratio) at every ring size with its effective batch, this run's lock arm and batch
# sweep, then the latest committed sweep of each other host.  vhost adds a whole virtio path
# around the ring, so only the direction and rough size can be compared.

# %%
MORE = [d for a, d in bz.arm_runs(RUN).items() if a != "sweep"] + \
    list(bz.committed_sweeps(exclude=HOST).values())
rn.table(vp.published_vs_reproduced_batch(R, baseline=baseline, more=MORE))

# %% [markdown]
# ## The reply
# The run as plain text for the mailing list, in the kernel test robot's shape (72 columns, one
# `%change` row per configuration, + = better): `ringlab mail RUN` prints the same text.  It is
# also saved as `mail.txt` in the run folder.

# %%
NB_PARAMS = dict(profile=profile, variants=variants, baseline=baseline, modes=modes, sizes=sizes, batch=batch,
                 count=count, trials=trials, target_ci=target_ci, budget=budget, cpus=cpus, seed=seed,
                 interleave=interleave)
print(rn.write_mail(R, baseline=baseline, notebook=("11-ptr-ring-batch-zeroing.ipynb", NB_PARAMS)))
