"""How well a predicted wait fits the waits that came: the rank correlation of its median
with the real wait, its pinball loss, and its calibration: for each level q, the share of
jobs whose real wait fell at or below their predicted q-quantile, counted by the
probability integral transform (drawn within a pile of equal values, at 0 s above all: a
calibrated predictor then covers q at every level)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from burstbench.wait import history

#: The levels a calibration table reports.
CALIBRATION_LEVELS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)


def rank_correlation(predicted: np.ndarray, real: np.ndarray) -> float:
    """Spearman's rank correlation (ties at their mean rank), over the jobs both know."""
    ok = ~(np.isnan(predicted) | np.isnan(real))
    if ok.sum() < 2:
        return float("nan")
    a = pd.Series(predicted[ok]).rank()
    b = pd.Series(real[ok]).rank()
    return float(a.corr(b))


def calibration(q: np.ndarray, real: np.ndarray, seed: int = 0,
                levels=CALIBRATION_LEVELS) -> pd.DataFrame:
    """Columns quantile, coverage, jobs: per level, the share of the jobs with a prediction
    whose probability integral transform is at most the level."""
    u = history.pit(q, real, seed=seed)
    ok = ~np.isnan(u)
    n = int(ok.sum())
    return pd.DataFrame({"quantile": list(levels),
                         "coverage": [float(np.mean(u[ok] <= lv)) if n else np.nan
                                      for lv in levels],
                         "jobs": n})


def pinball(q: np.ndarray, real: np.ndarray, levels=history.LEVELS) -> float:
    """The mean pinball (quantile) loss of quantiles `q` (jobs x `levels`, s) on
    log(1 + the real wait), over the jobs whose quantiles and wait are all finite (a job
    with nothing predicted yet is left out): lower is better, sharper and calibrated at
    once.  NaN where no job is left."""
    ok = np.isfinite(q).all(axis=1) & np.isfinite(real)
    if not ok.any():
        return float("nan")
    d = np.log1p(real[ok])[:, None] - np.log1p(q[ok])
    lv = np.asarray(levels)[None, :]
    return float(np.mean(np.maximum(lv * d, (lv - 1) * d)))
