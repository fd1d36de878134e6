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
# # 00 · What this machine can and cannot do
#
# Before a number is trusted, a reviewer wants to know where it was measured: how many CPUs
# and how they share caches, whether the governor could be set, whether boost was on, whether
# hardware counters exist, whether the machine is a VM with steal time.  Every feature that is
# not available here is listed with the reason, so that nothing is silently missing.

# %% tags=["parameters"]
profile: str = "quick"  # smoke | quick | full (same probes in every profile)
probe_counters: bool = True  # open each perf counter with perf_event_open to see which really work
out_dir: str = ""  # run folder; empty: scratch/environment/<host>/<run-id> (ringlab reproduce passes a folder under results/)
host: str = ""  # machine id for the results path; empty: $RINGLAB_HOST or the hostname

# %%
from ringlab.lab import notebook as rn
from ringlab.studies import envreport

rn.check_choice("profile", profile, ["smoke", "quick", "full"])
RUN = rn.run_dir(out_dir, "environment", host)
print("run folder:", RUN)

# %%
env = envreport.write_environment_run(RUN, probe_counters=probe_counters)

# %% [markdown]
# ## The machine

# %%
rn.table(envreport.machine_table(env))

# %% [markdown]
# ## What works here, and why not where it does not

# %%
rn.table(envreport.capabilities_table(env))

# %% [markdown]
# ## Topology
# Packages, last-level-cache groups, cores and SMT siblings, as read from sysfs, and the
# CPU-pair classes the runner can use (`cpus=auto` takes one representative pair per class).

# %%
rn.figures([RUN / "figures" / "topology.png"])
rn.table(envreport.pair_classes_table(env))

# %% [markdown]
# ## The full report (`ringlab env`)

# %%
print(envreport.text(env))
