"""`python -m kernels_ext.triad`: JSON records, and one clear line for every bad input."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from kernels_ext.common import sysinfo
from kernels_ext.triad import _triad

FIELDS = {"function", "best_rate_gbs", "avg_time_s", "min_time_s", "max_time_s", "size",
          "threads", "validated", "binding", "variant", "openmp_library"}


def records(proc):
    assert proc.returncode == 0, proc.stderr
    return [json.loads(line) for line in proc.stdout.splitlines()]


def test_one_json_line_per_function(cli):
    recs = records(cli("-m", "kernels_ext.triad", "--size", "300000", "--ntimes", "3",
                       "--threads", "2"))
    assert [r["function"] for r in recs] == ["Copy", "Scale", "Add", "Triad"]
    for r in recs:
        assert FIELDS <= set(r)
        assert r["validated"] is True and r["size"] == 300_000 and r["threads"] == 2
        assert r["min_time_s"] <= r["avg_time_s"] <= r["max_time_s"]
        assert r["best_rate_gbs"] == pytest.approx(
            {"Copy": 16, "Scale": 16, "Add": 24, "Triad": 24}[r["function"]] * 300_000
            / r["min_time_s"] / 1e9)
        assert len(r["times_s"]) == 3
        assert len(r["binding"]) == 2


def test_binding_records_where_threads_ran(cli):
    recs = records(cli("-m", "kernels_ext.triad", "--size", "300000", "--ntimes", "3",
                       "--threads", "2", env={"OMP_PLACES": "cores", "OMP_PROC_BIND": "close"}))
    r = recs[-1]
    assert r["places_requested"] == "cores" and r["bind_requested"] == "close"
    assert r["affinity_label"] == "cores+close"
    assert r["env"]["OMP_PLACES"] == "cores"
    assert r["proc_bind"] == "close"
    cpus = set(range(sysinfo.available_cpus() * 4))
    for b in r["binding"]:
        assert b["place"] >= 0  # bound threads have a place
        assert b["cpu_first"] in cpus and b["cpu_last"] in cpus
        assert b["cpu_first"] in r["places"][b["place"]]  # it ran inside its place
    assert r["openmp_library"]  # the runtime's file, e.g. libgomp.so.1


def test_out_file_is_written_whole(cli, tmp_path):
    out = tmp_path / "triad.jsonl"
    proc = cli("-m", "kernels_ext.triad", "--size", "200000", "--ntimes", "2", "--threads",
               "1", "--out", str(out))
    assert proc.returncode == 0 and proc.stdout == ""
    assert len(out.read_text().splitlines()) == 4


@pytest.mark.parametrize("impl,threads", [("numpy", "1"), ("numba", "2")])
def test_baselines_from_the_cli(cli, impl, threads):
    recs = records(cli("-m", "kernels_ext.triad", "--impl", impl, "--size", "100000",
                       "--ntimes", "2", "--threads", threads))
    assert recs[-1]["variant"].startswith(impl) and recs[-1]["validated"]


BAD = [
    (["--size", "0"], "size must be a positive number"),
    (["--size", "-5"], "size must be a positive number"),
    (["--size", "1.5"], "size must be an integer"),
    (["--size", "ten"], "size must be an integer"),
    (["--size", "1e13"], "of memory is available"),
    (["--ntimes", "1"], "ntimes must be at least 2"),
    (["--threads", "0"], "threads must be at least 1"),
    (["--compiler", "frobnicc"], "unknown compiler 'frobnicc'"),
    (["--impl", "numpy", "--threads", "2"], "NumPy baseline runs on one thread"),
    (["--impl", "numba", "--stores", "streaming"], "the numba baseline has its own (normal"),
    (["--impl", "numpy", "--threads", "1", "--stores", "normal"],
     "the numpy baseline has its own (memmove"),
]


@pytest.mark.parametrize("args,message", BAD)
def test_bad_input_is_one_line_and_exit_2(cli, args, message):
    proc = cli("-m", "kernels_ext.triad", "--size", "100000", *args)
    assert proc.returncode == 2
    assert proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0]


@pytest.mark.parametrize("env,message", [
    ({"OMP_PLACES": "cors"}, "unknown OMP_PLACES value 'cors'"),
    ({"OMP_PROC_BIND": "spreadd"}, "unknown OMP_PROC_BIND value 'spreadd'"),
    ({"KMP_AFFINITY": "granularity=core,compactt"}, "unknown KMP_AFFINITY value"),
])
def test_unknown_affinity_values_are_refused(cli, env, message):
    proc = cli("-m", "kernels_ext.triad", "--size", "100000", env=env)
    assert proc.returncode == 2 and message in proc.stderr and proc.stdout == ""


def test_failed_validation_is_an_error_not_a_number(cli):
    proc = cli("-m", "kernels_ext.triad", "--size", "100000", "--ntimes", "2", "--threads",
               "1", "--inject-fault", "5")
    assert proc.returncode == 3
    assert proc.stdout == ""  # no bandwidth printed for a wrong answer
    assert "failed STREAM validation" in proc.stderr


def test_oversubscription_warns(cli):
    threads = sysinfo.available_cpus() + 1
    proc = cli("-m", "kernels_ext.triad", "--size", "100000", "--ntimes", "2", "--threads",
               str(threads))
    assert proc.returncode == 0
    assert "oversubscribes" in proc.stderr
    assert records(proc)[0]["warnings"]


def test_small_size_warns_about_cache(cli):
    proc = cli("-m", "kernels_ext.triad", "--size", "1000", "--ntimes", "2", "--threads", "1")
    assert proc.returncode == 0 and "last-level cache" in proc.stderr


def test_default_size_is_four_times_the_llc(cli):
    from kernels_ext.triad import default_size

    assert default_size() >= 10_000_000
    assert default_size() * 8 >= 4 * sysinfo.last_level_cache_bytes()


def test_help_explains(cli):
    proc = cli("-m", "kernels_ext.triad", "--help")
    assert proc.returncode == 0 and "OMP_PLACES" in proc.stdout and "examples" in proc.stdout


def test_info_names_the_build(cli):
    info = json.loads(cli("-m", "kernels_ext.triad", "--info").stdout)
    assert info["impl"] == "c" and info["openmp_version"] > 0 and info["flags"]


STREAMING = _triad.info()["streaming_isa"] is not None


@pytest.mark.parametrize("stores", ["normal", "streaming"])
def test_store_policy_and_traffic_in_the_record(cli, stores):
    recs = records(cli("-m", "kernels_ext.triad", "--size", "300001", "--ntimes", "3",
                       "--threads", "2", "--stores", stores))
    used = stores if STREAMING else "normal"
    for r in recs:
        assert r["validated"] is True
        assert r["stores"] == used and r["stores_requested"] == stores
        counted = {"Copy": 16, "Scale": 16, "Add": 24, "Triad": 24}[r["function"]]
        moved = counted + (8 if used == "normal" else 0)
        assert r["traffic_bytes_per_element"] == moved
        assert r["traffic_rate_gbs"] == pytest.approx(r["best_rate_gbs"] * moved / counted)
    assert recs[0]["streaming_isa"] == _triad.info()["streaming_isa"]


@pytest.mark.parametrize("impl", ["c", "numba"])
def test_one_process_measures_each_thread_count_and_store_policy_in_turn(cli, impl):
    """--threads 1,2 (and --stores normal,streaming for the C kernels): four records per
    configuration, stores outermost, each with its own team and environment."""
    args = ["--stores", "normal,streaming"] if impl == "c" else []
    proc = cli("-m", "kernels_ext.triad", "--size", "100000", "--ntimes", "3", "--threads",
               "1,2", "--impl", impl, *args, env={"OMP_PLACES": "cores",
                                                  "OMP_PROC_BIND": "close"})
    assert proc.returncode == 0, proc.stderr
    recs = [json.loads(line) for line in proc.stdout.splitlines()]
    configs = [("normal", 1), ("normal", 2)]
    if impl == "c":
        configs += [("streaming", 1), ("streaming", 2)]
    assert [r["function"] for r in recs] == ["Copy", "Scale", "Add", "Triad"] * len(configs)
    assert [(r["stores_requested"], r["threads_requested"]) for r in recs[::4]] == configs
    assert [r["threads"] for r in recs[::4]] == [t for _, t in configs]
    assert all(len(r["binding"]) == r["threads"] and r["validated"] for r in recs)


def test_unknown_store_policy_is_refused(cli):
    proc = cli("-m", "kernels_ext.triad", "--size", "100000", "--stores", "nt")
    assert proc.returncode == 2 and not proc.stdout
    assert proc.stderr == "error: unknown store policy 'nt' (known: normal, streaming)\n"


def test_streaming_on_a_build_without_them_is_measured_normal_and_said(cli):
    """A variant built without streaming stores (as a compiler or CPU without them would
    be) measures normal stores, says so once on stderr and in the record."""
    proc = cli("-m", "kernels_ext.triad", "--size", "200000", "--ntimes", "2", "--threads",
               "1", "--stores", "streaming", "--compiler", "gcc",
               "--flags=-O2 -fopenmp -DSTREAM_NO_STREAMING", "--tag", "nont")
    recs = records(proc)
    said = [ln for ln in proc.stderr.splitlines() if "streaming stores asked for" in ln]
    assert len(said) == 1 and "has none" in said[0] and "measured with normal stores" in said[0]
    assert all(r["stores"] == "normal" and r["stores_requested"] == "streaming"
               and r["streaming_isa"] is None for r in recs)
    assert recs[-1]["traffic_bytes_per_element"] == 32


@pytest.mark.parametrize("impl", ["c", "numba"])
def test_serve_answers_each_request_as_a_fresh_process_would(impl):
    """--serve: '#done' once ready, then one answer per line read, each the records a
    fresh process prints and then '#done'; end of input ends it with status 0.  Under a
    bound team every answer sees the process's CPUs, not the one its main thread was
    bound to when the runtime loaded, before the first (no warning)."""
    env = dict(os.environ, OMP_PLACES="cores", OMP_PROC_BIND="close")
    env.pop("OMP_NUM_THREADS", None)
    threads = "1,2" if sysinfo.available_cpus() >= 2 else "1"
    proc = subprocess.run([sys.executable, "-m", "kernels_ext.triad", "--size", "20000000",
                           "--ntimes", "2", "--threads", threads, "--impl", impl, "--serve"],
                          input="\n\n", capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr
    answers = proc.stdout.split("#done\n")
    assert answers[0] == "" and answers[-1] == "" and len(answers) == 4  # ready, 2 answers
    for text in answers[1:3]:
        recs = [json.loads(line) for line in text.splitlines()]
        assert [r["threads"] for r in recs] == [int(t) for t in threads.split(",")
                                                for _ in range(4)]
        assert all(r["validated"] for r in recs)
    assert "oversubscribe" not in proc.stderr


def test_serve_ends_at_bad_input_with_its_error_line():
    proc = subprocess.run([sys.executable, "-m", "kernels_ext.triad", "--size", "-5",
                           "--serve"], input="\n", capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and proc.stdout == "#done\n"  # ready, then refused
    assert proc.stderr.strip() == "error: size must be a positive number of elements, not -5"
