"""bench/bench.py's side-by-side ratios: which rounds judge which target.

F32's fraction of its ceiling is judged by F32's own read sample; Q8_0 / F32 only where both
decodes' samples were in the same regime. The rounds below are a real run's (2026-12-05):
the bandwidth moved from 82-87 GB/s to 49-52 between F32's decode and Q8_0's in the last
two, whose ratios (2.41x, 2.55x) compare one regime with the other."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bench"))
import bench  # noqa: E402

F32_BYTES, Q8_BYTES = 494.6e6, 131.7e6
# (F32 sample GB/s, F32 tokens/s, Q8_0 sample GB/s, Q8_0 tokens/s)
ROUNDS = [(50.8, 101.6, 50.9, 363.9), (50.5, 95.5, 50.4, 366.7), (48.2, 95.2, 48.6, 342.8),
          (81.6, 157.0, 51.6, 378.5), (86.6, 144.6, 49.4, 368.4),
          (80.0, 150.0, 79.0, 470.0), (84.0, 155.0, 83.0, 480.0), (82.0, 152.0, 81.0, 465.0)]


def sbs(rounds):
    ids = [1, 2, 3]
    return {"rounds": len(rounds),
            "f32": {"read_bytes_per_s": [r[0] * 1e9 for r in rounds],
                    "decode_tokens_per_s": [r[1] for r in rounds], "generated_ids": ids},
            "q8_0": {"read_bytes_per_s": [r[2] * 1e9 for r in rounds],
                     "decode_tokens_per_s": [r[3] for r in rounds], "generated_ids": ids}}


def ratios(rounds):
    separate = {"f32": {"generated_ids": [1, 2, 3]}, "q8_0": {"generated_ids": [1, 2, 3]}}
    return bench.side_by_side_ratios(sbs(rounds), {"f32": F32_BYTES, "q8_0": Q8_BYTES},
                                     separate)["f32_fast_rounds"]


def test_a_round_whose_bandwidth_moved_between_its_decodes_judges_no_ratio():
    r = ratios(ROUNDS)
    assert (r["q8_0_fast_rounds"], r["q8_0_slow_rounds"], r["q8_0_mixed_rounds"]) == (3, 3, 2)
    assert abs(r["q8_0_over_f32_median"] - 480.0 / 155.0) < 1e-9   # of 3.13, 3.10, 3.06
    assert abs(r["slow_rounds_q8_0_over_f32_median"] - 342.8 / 95.2) < 1e-9  # of 3.58, 3.84, 3.60


def test_f32s_fraction_is_judged_by_its_own_sample():
    r = ratios(ROUNDS)
    assert r["rounds"] == 5  # every round whose F32 sample was fast, mixed ones included
    fractions = sorted(f / (g * 1e9 / F32_BYTES) for g, f, _, _ in ROUNDS if g > 55)
    assert abs(r["f32_fraction_of_ceiling_median"] - fractions[2]) < 1e-9


def test_no_round_in_a_regime_gives_no_figure():
    r = ratios(ROUNDS[:3])
    assert r["rounds"] == 0 and r["q8_0_fast_rounds"] == 0
    assert r["q8_0_over_f32_median"] is None and r["f32_fraction_of_ceiling_median"] is None
