"""OMP_PLACES / OMP_PROC_BIND / KMP_AFFINITY: accepted as runtimes do, refused otherwise."""

from __future__ import annotations

import pytest

from kernels_ext.triad import affinity as af


@pytest.mark.parametrize("value", ["threads", "cores", "sockets", "ll_caches", "numa_domains",
                                   "cores(4)", "CORES", "{0,1},{2,3}", "{0:4}:4:4",
                                   "{0:2:2},{1:2:2}", "!{0}", " {0, 1} , {2} ", "unset"])
def test_places_accepted(value):
    af.check_places(value)


@pytest.mark.parametrize("value", ["cors", "", "core", "{0,1", "{a}", "cores(x)", "0,1,2"])
def test_places_refused(value):
    with pytest.raises(af.AffinityError, match="unknown OMP_PLACES value"):
        af.check_places(value)


@pytest.mark.parametrize("value", ["true", "false", "close", "spread", "primary", "master",
                                   "spread,close", "SPREAD", "unset"])
def test_bind_accepted(value):
    af.check_bind(value)


@pytest.mark.parametrize("value", ["spreadd", "", "true,close", "yes", "close;spread"])
def test_bind_refused(value):
    with pytest.raises(af.AffinityError, match="unknown OMP_PROC_BIND value"):
        af.check_bind(value)


@pytest.mark.parametrize("value,label", [
    ("granularity=core,compact", "core+compact"),
    ("granularity=thread,scatter", "thread+scatter"),
    ("granularity=fine,compact,1,0", "fine+compact"),
    ("compact", "compact"),
    ("verbose,granularity=core,balanced", "core+balanced"),
    ("granularity=core,proclist=[0,2,{4,5}],explicit", "core+explicit"),
    ("none", "none"),
])
def test_kmp_accepted_with_the_studys_label(value, label):
    assert af.parse_kmp_affinity(value).label == label


@pytest.mark.parametrize("value,why", [
    ("granularity=core,compactt", "compactt"),
    ("granularity=cores,compact", "granularity 'cores'"),
    ("granularity=core", "no affinity type"),
    ("compact,scatter", "two types"),
    ("explicit", "proclist"),
    ("compact,1,2,3", "more than two numbers"),
    ("", "empty item"),
])
def test_kmp_refused(value, why):
    with pytest.raises(af.AffinityError, match="unknown KMP_AFFINITY value") as err:
        af.parse_kmp_affinity(value)
    assert why in str(err.value)


def test_affinity_env_and_labels():
    a = af.Affinity("cores", "spread")
    assert a.label == "cores+spread"
    assert a.env() == {"OMP_PLACES": "cores", "OMP_PROC_BIND": "spread"}
    assert af.Affinity().env() == {} and af.Affinity().label == "unset+unset"
    k = af.Affinity(kmp_affinity="granularity=core,scatter")
    assert k.env() == {"KMP_AFFINITY": "granularity=core,scatter"}
    assert k.label == "core+scatter"
