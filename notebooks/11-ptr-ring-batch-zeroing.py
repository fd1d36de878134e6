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
# from 1.84 to 2.00 Mpps.  The review asked whether batching really removes the false sharing.
#
# Here `prebatch` (NULL on every consume) is set against `batch` in the **near-full** mode
# (`-m 2`: the producer keeps the ring full, so each freed slot is refilled at once), over a
# sweep of ring sizes, with the batch size as a parameter (ringtest's `--param`).  Small rings
# fall back to batch = 1, where the two variants should not differ; large rings are where
# batching should help.  Throughput is set against the core-to-core latency bound of each pair.

# %% tags=["parameters"]
profile: str = "quick"  # smoke (seconds) | quick (minutes) | full (what we commit)
variants: str = "prebatch,batch"  # rings to compare (prebatch is the baseline)
baseline: str = "prebatch"  # the variant every other one is compared against
modes: str = "2"  # 2: near-full SPSC (seed 003); 1: free-running SPSC
sizes: str = "16,64,256,1024,4096"  # ring sizes to sweep (comma-separated)
batch: int = 0  # consumer batch in slots; 0: the ring's default (16, or 1 when 16 > size/2)
count: int = 0  # operations per trial; 0: the profile's default
trials: int = 0  # measured trials per configuration; 0: the profile's default
target_ci: float = 0  # stop when every comparison's 95% CI half-width is at most this many percent (0: fixed trials)
budget: float = 0  # seconds of trial time the target may spend (0: no limit)
cpus: str = "auto"  # producer:consumer placement: auto | all | none | "1:2,3:4"
seed: int = 1  # seed of the randomized interleaved trial order
out_dir: str = ""  # run folder; empty: scratch/ptr-ring-batch-zeroing/<host>/<run-id> (ringlab reproduce passes a folder under results/)
host: str = ""  # machine id for the results path; empty: $RINGLAB_HOST or the hostname

# %%
from ringlab.lab import notebook as rn
from ringlab.report import vs_published as vp

P = rn.params("ptr_ring", profile=profile, variants=variants, modes=modes, sizes=sizes,
              batch=batch, count=count or None, trials=trials or None,
              target_ci=target_ci or None, budget=budget or None, cpus=cpus, seed=seed,
              icount=True)   # callgrind counts where the PMU cannot (single-threaded mode 0 rows only)
rn.check_choice("baseline", baseline, P["variants"])
RUN = rn.run_dir(out_dir, "ptr-ring-batch-zeroing", host)
print("run folder:", RUN)

# %% [markdown]
# ## Run

# %%
result = rn.run("ptr_ring", P, RUN)
rn.markdown(rn.run_overview(RUN))

# %% [markdown]
# ## Where batching helps, and where it does not
# One row per ring size and CPU pair: medians, the difference with its CI, and a verdict.

# %%
R = rn.report(RUN, baseline=baseline, labels={baseline: "prebatch", "batch": "batch zeroing"})
rn.table(vp.size_sweep_table(RUN, baseline=baseline))

# %%
rn.show_figures(R, "size_sweep")

# %% [markdown]
# ## Throughput against the core-to-core latency bound
# An SPSC ring moves at most one cache line per item between the two cores, so the one-way
# cache-line latency of the pair bounds its throughput; the bar shows how close each variant
# gets.

# %%
rn.show_figures(R, "spsc")

# %% [markdown]
# ## Full summary and the remaining figures

# %%
rn.markdown(R.markdown)
rn.show_figures(R, "box", "ecdf", "order", "cpu_pairs", "counters")

# %% [markdown]
# ## Published vs reproduced
# Jason Wang's vhost numbers, as ratios to the unbatched ring, beside ours (ns/op turned into
# a throughput ratio).  vhost adds a whole virtio path around the ring, so only the direction
# and rough size can be compared.

# %%
rn.table(vp.published_vs_reproduced_batch(RUN, baseline=baseline))

# %% [markdown]
# ## The reply
# The run as plain text for the mailing list, in the kernel test robot's shape (72 columns, one
# `%change` row per configuration, + = better): `ringlab mail RUN` prints the same text.  It is
# also saved as `mail.txt` in the run folder.

# %%
NB_PARAMS = dict(profile=profile, variants=variants, baseline=baseline, modes=modes, sizes=sizes, batch=batch,
                 count=count, trials=trials, target_ci=target_ci, budget=budget, cpus=cpus, seed=seed)
print(rn.write_mail(RUN, baseline=baseline, notebook=("11-ptr-ring-batch-zeroing.ipynb", NB_PARAMS)))
