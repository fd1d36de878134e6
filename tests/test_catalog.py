"""ringlab.catalog's experiments, variants, notebooks and studies: every entry names things that
exist (headers, sources, notebooks, classes), the lookups refuse an unknown name naming the
allowed ones, and the layers take their tables from it."""
from __future__ import annotations

import importlib
import re

import pytest

from ringlab import catalog, paths
from ringlab.errors import ParamError


def test_lookups_name_the_allowed_values():
    assert catalog.experiment("kmod").name == "kmod"
    assert catalog.variant("spsc").header == "rings/spsc_lamport.h"
    with pytest.raises(ParamError, match="unknown experiment 'nope'; allowed: "
                                         + ", ".join(sorted(catalog.EXPERIMENT_NAMES))):
        catalog.experiment("nope")
    with pytest.raises(ParamError, match="allowed: " + ", ".join(catalog.VARIANT_NAMES)):
        catalog.variant("nope")
    with pytest.raises(ParamError, match="allowed: prebatch, batch"):
        catalog.layout("nope")
    with pytest.raises(ParamError, match="allowed: 00-environment, 10-ptr-ring-reorder"):
        catalog.notebook("nope")
    with pytest.raises(ParamError, match="has no integer parameter column 'lock'; allowed: mode, size, count, batch"):
        catalog.experiment(catalog.RING_EXPERIMENT).bound("lock")


def test_every_variant_header_and_experiment_source_exists():
    for v in catalog.VARIANTS:
        assert (paths.CSRC / v.header).is_file(), v
    ring = catalog.experiment(catalog.RING_EXPERIMENT)
    assert ring.variants == catalog.VARIANT_NAMES
    for e in catalog.EXPERIMENTS:
        arms = e.variants if "{variant}" in e.binary else ("",)
        for src in e.sources:
            for v in arms:
                assert (paths.CSRC / src.format(variant=v)).is_file(), (e.name, src, v)


def test_the_batch_setting_rings_define_it_in_their_header():
    for v in catalog.VARIANTS:
        text = (paths.CSRC / v.header).read_text()
        assert bool(re.search(r"^#define RINGLAB_HAS_SET_BATCH\b", text, re.M)) == v.sets_batch, v.name


def test_each_entry_is_its_class():
    from ringlab.experiments import get, names
    assert names() == sorted(catalog.EXPERIMENT_NAMES)
    for e in catalog.EXPERIMENTS:
        mod, cls = e.implementation.split(":")
        assert getattr(importlib.import_module(mod), cls) is get(e.name)
        c = get(e.name)
        assert c.name == e.name
        assert c.param_columns() == list(e.param_columns)
        assert tuple(c.extra_columns) == e.extra_columns
        assert tuple(c.binaries) == e.binaries()
        params = c.all_params()
        for b in e.bounds:    # the parameter of a bounded column takes the catalog's bounds
            p = params.get(b.column) or params.get(b.column + "s")
            lo, hi = (min(p.choices), max(p.choices)) if p.choices else (p.min, p.max)
            assert (lo, hi) == (b.low, b.high), (e.name, b)


def test_notebooks_exist_and_run_catalogued_experiments():
    from ringlab.lab.reproduce import NOTEBOOKS
    assert list(NOTEBOOKS) == [n.stem for n in catalog.NOTEBOOKS]
    on_disk = sorted(p.stem for p in paths.NOTEBOOKS.glob("*.ipynb"))
    assert sorted(NOTEBOOKS) == on_disk
    for n in catalog.NOTEBOOKS:
        assert set(n.experiments) <= set(catalog.EXPERIMENT_NAMES), n


def test_binaries_and_their_arms():
    ring = catalog.experiment(catalog.RING_EXPERIMENT)
    assert ring.binary_of("batch") == "ptr_ring_test-batch"
    assert ring.arm_of_binary("ptr_ring_test-mine@c0-3-abcdef") == "mine"
    assert ring.arm_of_binary("page_frag_test-before") is None and ring.arm_of_binary("ptr_ring_test-") is None
    assert catalog.experiment("perf_rb").binaries() == ("syscall_loop",)
    assert catalog.experiment("kmod").binaries() == ()


def test_the_studies_arms_are_arms_of_their_experiment():
    for s in catalog.STUDIES:
        assert set(s.arms) <= set(catalog.experiment(s.experiment).variants), s
        if s.counts is not None:
            assert [a for a, _ in s.counts.per_op] == list(s.arms)
            assert [a for a, _ in s.counts.how] == list(s.arms)


def test_the_layers_derive_from_it():
    from ringlab.build.targets import RING_HEADERS, TARGETS
    from ringlab.rundir.rawrows import INT_PARAM_COLUMNS, known_columns
    from ringlab.tools.c2c_ring import LAYOUTS
    assert RING_HEADERS == {v.name: v.header for v in catalog.VARIANTS}
    names = [t.name for t in TARGETS]
    for e in catalog.EXPERIMENTS:
        assert set(e.binaries()) <= set(names), e.name
    assert INT_PARAM_COLUMNS[catalog.RING_EXPERIMENT]["size"] == (2, 10_000_000)
    assert set(catalog.all_extra_columns()) <= known_columns()
    assert set(LAYOUTS) == {v.name for v in catalog.VARIANTS if v.layout is not None}
