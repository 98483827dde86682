"""`iolearn eval mittcfq` (issue 13): MittOS's evaluation on disks behind bfq and mq-deadline."""

import numpy as np
import pytest

from iolearn import _native, mittcfq


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("mcfq")
    rc = mittcfq.main(["--scenario", "high", "mix", "--seeds", "31", "32", "--duration", "600", "--out", str(out)])
    import pyarrow.parquet as pq

    return rc, out, pq.read_table(out / "results.parquet").to_pylist()


def test_every_strategy_on_every_setting_and_seed_with_its_outputs(run):
    rc, out, rows = run
    assert rc == 0
    labels = {"NoNoise", *(s for s, _ in mittcfq.STRATEGIES)}
    for sc in ("high", "mix"):
        for sched in mittcfq.SCHEDULERS:
            mine = [r for r in rows if r["scenario"] == sc and r["sched"] == sched]
            assert {(r["strategy"], r["seed"]) for r in mine} == {(s, k) for s in labels for k in (31, 32)}
            assert all(r["gets"] > 400 and r["unfinished"] == 0 for r in mine)
            assert (out / f"cdf-{sc}-{sched}.png").stat().st_size > 1000
    table = (out / "table.md").read_text()
    assert "### mix, mq-deadline" in table and "MittOS vs Hedged: up to" in table


def test_mittos_beats_hedged_at_p95_on_held_out_seeds(run):
    # The seeds are not those the defaults were chosen with; the microbenchmark's deadline
    # is MittOS's 20 ms, the mix's Base p95 under EC2 noise on a seed of its own. In the mix
    # the read whose every replica is busy goes to the least busy one (MittOS-wait): plain
    # MittOS sends it to the last replica whatever its load, and some seeds lose at p95.
    _, _, rows = run
    for sc, ours in (("high", "MittOS"), ("mix", "MittOS-wait")):
        for sched in mittcfq.SCHEDULERS:

            def p(label, q, sc=sc, sched=sched):
                v = [r[q] for r in rows if (r["scenario"], r["sched"], r["strategy"]) == (sc, sched, label)]
                return float(np.median(v))

            assert p(ours, "p95_ms") < 0.8 * p("Hedged", "p95_ms"), (
                sc,
                sched,
                p(ours, "p95_ms"),
                p("Hedged", "p95_ms"),
            )
            assert p(ours, "p99_ms") < p("Hedged", "p99_ms"), (sc, sched)
            assert p(ours, "p95_ms") < 0.5 * p("Base", "p95_ms")


def test_the_predictor_is_scored_on_base_runs(run):
    _, _, rows = run
    base = [r for r in rows if r["strategy"] == "Base"]
    assert all(0 < r["pred_mae_ms"] < 100 and r["pred_wrong"] < 0.2 for r in base)
    assert all("pred_mae_ms" not in r or r["pred_mae_ms"] is None for r in rows if r["strategy"] != "Base")


def test_the_binding_refuses_bad_arguments_by_name():
    for kwargs, want in [
        ({"scenario": "loud"}, "scenario"),
        ({"scenario": "mix", "sched": "cfq"}, "sched"),
        ({"scenario": "mix", "strategy": "mitt:-1"}, "above 0"),
        ({"scenario": "mix", "duration_s": float("inf")}, "duration_s"),
    ]:
        with pytest.raises(ValueError, match=want):
            _native.mix_run(**kwargs)
