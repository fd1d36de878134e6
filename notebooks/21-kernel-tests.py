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
# # 21 · The kernel's own tests: ringtest and page_frag_test.ko
#
# The threads measured the real kernel code with the kernel's own tests: Michael Tsirkin's
# `tools/virtio/ringtest` (seed 003's authors maintain it; its `ptr_ring` program builds from a
# tree unchanged) and Yunsheng Lin's `page_frag_test.ko`, loaded under `perf stat -r 200`
# (seed 002).  ringlab models both in user space; here the real tests run with the same rigour
# (pinning, rounds, interleaving, provenance), beside ringlab's own harness.
#
# **ringtest `ptr_ring` beside ringlab's SPSC.**  Both compile the same
# `include/linux/ptr_ring.h` of one tree, with the same ring size, on the same CPU pairs.  They
# do not do the same work: ringtest's guest thread adds a buffer *and* waits for the host to
# hand it back through the used ring, while ringlab's producer only produces.  The ratio says
# how much of ringtest's per-item time the bare ring accounts for.

# %% tags=["parameters"]
profile: str = "quick"  # smoke (seconds) | quick (minutes) | full (the committed run)
tree: str = "debian:linux-source-6.1"  # kernel tree: a folder, a source tarball, git:TREE@REV, debian:linux-source-X.Y
ring_size: int = 256  # ring entries for both harnesses (ringtest --ring-size, ptr_ring -s)
items: int = 0  # items per trial for both; 0: the profile's default
trials: int = 0  # measured trials per configuration; 0: the profile's default
cpus: str = "auto"  # producer:consumer pairs for both (ringtest guest:host): auto | none | "0:1"
seed: int = -1  # seed of the layouts and trial order (-1: drawn each run, recorded in env.json)
kmod_module: str = ""  # page_frag_test.ko to load (bare metal, root, built for this kernel); empty: not run
kmod_alloc_len: int = 12  # test_alloc_len of page_frag_test.ko (fragment bytes)
kmod_nr_test: int = 512000  # nr_test of page_frag_test.ko (fragments per load)
kmod_align: int = 0  # test_align of page_frag_test.ko: 0 non-aligned, 1 aligned
out_dir: str = ""  # run folder; empty: scratch/kernel-tests/<host>/<run-id> (ringlab reproduce passes a folder under results/)
host: str = ""  # machine id for the results path; empty: $RINGLAB_HOST or the hostname

# %%
from ringlab.studies import harness_compare as hc
from ringlab.tools import kmod_perf
from ringlab.system import modules
from ringlab.lab import notebook as rn

P = rn.params("ringtest", profile=profile, tree=tree, rings="ptr_ring", ring_sizes=str(ring_size),
              run_cycles=items or None, trials=trials or None, cpus=cpus, seed=seed)
RUN = rn.run_dir(out_dir, "kernel-tests", host)
print("run folder:", RUN)

# %% [markdown]
# ## ringtest `ptr_ring`, built from the tree
# The tree's `tools/virtio/ringtest` is copied with the headers it includes into `build/` and
# built there with its own Makefile; each trial is one run, pinned with `--guest-affinity`
# (producer) and `--host-affinity` (consumer), timed by ringlab.

# %%
result = rn.run("ringtest", P, RUN)
rn.markdown(rn.run_overview(RUN))
status, reason = hc.run_status(RUN)

# %% [markdown]
# ## ringlab's SPSC on the same header
# The same `ptr_ring.h`, compiled through ringlab's shim as a `kernel_headers` variant of the
# `ptr_ring` experiment in mode 1, same ring size, items, trials and CPU pairs.

# %%
SPSC = RUN / "ringlab-spsc"
if status == "skipped":
    rn.markdown(f"**Not run here:** {reason}")
else:
    name, header = hc.tree_header(P["tree"])
    PS = rn.params("ptr_ring", profile=profile, variants=name, kernel_headers=f"{name}={header}", modes="1",
                   sizes=str(ring_size), count=P["run_cycles"], trials=P["trials"], warmup=P["warmup"],
                   cpus=P["cpus"], seed=seed, icount=False)
    rn.run("ptr_ring", PS, SPSC)
    rn.markdown(rn.run_overview(SPSC))

# %% [markdown]
# ## Side by side
# Medians per ring size and CPU pair with their ratio, and ringtest / SPSC as a Hodges-Lehmann
# ratio with its Mann-Whitney CI (level in `ci_level`; empty, with a note, when too few trials).

# %%
if status == "skipped":
    hc.write_skipped_summary(RUN, f"ringtest: {reason}")
    rn.not_available("the side-by-side table", f"ringtest did not run here ({reason})")
else:
    rn.table(hc.side_by_side(RUN, SPSC), floatfmt=".3g")
    rn.figures(hc.figure(RUN, SPSC, RUN / "figures"))
    rn.markdown(rn.report(RUN).markdown)

# %% [markdown]
# ## The reply
# ringtest beside ringlab's SPSC as plain text for the mailing list (72 columns, one row per ring
# size and CPU pair with their ratio and its CI): `ringlab mail RUN` prints the same text.  It is
# also saved as `mail.txt` in the run folder.

# %%
NB_PARAMS = dict(profile=profile, tree=tree, ring_size=ring_size, items=items, trials=trials, cpus=cpus, seed=seed)
if status == "skipped":
    rn.markdown(f"**No reply:** ringtest did not run here ({reason}).")
else:
    print(rn.write_harness_mail(RUN, notebook=("21-kernel-tests.ipynb", NB_PARAMS)))

# %% [markdown]
# ## page_frag_test.ko (seed 002), through `insmod`
# Each trial loads the module with the arguments and the placement's `test_push_cpu` /
# `test_pop_cpu`, reads its "N of iterations for ... testing took: Xus" line from the kernel
# log, and unloads it (on every path, timeouts and signals included).  It needs root, module
# loading enabled, and a module built for the running kernel; otherwise it says why and runs
# nothing.  On bare metal set `kmod_module` to your `page_frag_test.ko`.

# %%
why = modules.cannot_run_reasons(kmod_module)
if why:
    rn.markdown("**kmod not run here:** " + "; ".join(why))
else:
    args = f"test_alloc_len={kmod_alloc_len} nr_test={kmod_nr_test} test_align={kmod_align}"
    PK = rn.params("kmod", profile=profile, module=kmod_module, args=args, trials=trials or None, seed=seed)
    rn.run("kmod", PK, RUN / "kmod")
    rn.markdown(rn.run_overview(RUN / "kmod"))
    rn.markdown(rn.report(RUN / "kmod").markdown)

# %% [markdown]
# ## The published `perf stat -r N insmod` blocks
# Seed 002's blocks, parsed by `ringlab import-perf --kmod`, as after/before ratios of the
# elapsed time per configuration.  Your own `perf stat -r N insmod ./page_frag_test.ko ...`
# output goes through the same command and `kmod_perf.compare_blocks` to set it beside these.

# %%
rn.table(kmod_perf.published_ratios(), floatfmt=".4g")
