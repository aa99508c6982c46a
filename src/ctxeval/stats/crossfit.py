"""Cross-fitted calibration: a prediction of a 0-to-1 label that never saw the label it stands beside.

Prediction-powered inference corrects the predictions by the labelled samples' residuals; a
prediction fitted on the very label it is compared with would shrink its residual and the
interval with it. So the labelled samples are split into K folds (fixed by the caller, e.g. by
sample identity), fold k's predictions come from a model fitted on the other folds' labels
only, and a sample without a label gets the mean of the K fold models (cross-prediction, Zrnic
and Candès 2023). The model is a logistic regression of the label (a share of answers found,
counted as that fraction of a success) on standardized features, lightly regularized
(scikit-learn's default C = 1, fitted here by Newton's method: a few features, thousands of fits in
bench/ppi_validation.py).
"""

from __future__ import annotations

import numpy as np

FOLDS = 5
UNINFORMED = 0.5  # a fold whose other folds hold no label predicts this (any fixed number keeps PPI valid)


def fit_predict(features: np.ndarray, labels: np.ndarray, new: np.ndarray) -> np.ndarray:
    """P(label) for the rows of `new`, from a logistic regression fitted on (`features`, `labels`);
    a constant (the labels' mean) where the labels do not vary, UNINFORMED where there are none."""
    if len(labels) == 0:
        return np.full(len(new), UNINFORMED)
    if np.ptp(labels) == 0:
        return np.full(len(new), float(labels[0]))
    centre, scale = features.mean(axis=0), features.std(axis=0)
    scale[scale == 0] = 1.0
    coef = logistic_fit(np.column_stack([np.ones(len(labels)), (features - centre) / scale]), labels)
    return _expit(np.column_stack([np.ones(len(new)), (new - centre) / scale]) @ coef)


def logistic_fit(x: np.ndarray, y: np.ndarray, penalty: float = 1.0, steps: int = 100) -> np.ndarray:
    """Coefficients of the L2-penalized logistic regression of the shares `y` on `x` (its first
    column the intercept, not penalized): the minimum of the cross-entropy plus penalty/2 |b|^2
    (scikit-learn's C = 1/penalty), by Newton's method with step halving."""
    ridge = np.full(x.shape[1], penalty)
    ridge[0] = 0.0

    def loss(b: np.ndarray) -> float:
        z = x @ b
        return float(np.sum(np.logaddexp(0, z) - y * z) + 0.5 * np.sum(ridge * b * b))

    b = np.zeros(x.shape[1])
    current = loss(b)
    for _ in range(steps):
        p = _expit(x @ b)
        gradient = x.T @ (p - y) + ridge * b
        hessian = (x * (p * (1 - p))[:, None]).T @ x + np.diag(ridge) + 1e-9 * np.eye(x.shape[1])
        step = np.linalg.solve(hessian, gradient)
        t = 1.0
        while t > 1e-6 and loss(b - t * step) > current:
            t /= 2
        b, previous = b - t * step, current
        current = loss(b)
        if previous - current < 1e-10:
            break
    return b


def _expit(z: np.ndarray) -> np.ndarray:
    return np.exp(-np.logaddexp(0, -z))


def cross_fit(features: np.ndarray, labels: np.ndarray, labelled: np.ndarray, folds: np.ndarray, k: int = FOLDS) -> np.ndarray:
    """A prediction for every row. A labelled row in fold f: from the model fitted on the labelled
    rows of the other folds; a row without a label: the mean of the K fold models' predictions.
    `labels` is read only where `labelled`; `folds` holds each row's fold in 0..k-1."""
    features, labels = np.asarray(features, float), np.asarray(labels, float)
    labelled, folds = np.asarray(labelled, bool), np.asarray(folds, int)
    out = np.empty(len(labels))
    unlabelled = ~labelled
    pooled = np.zeros(int(unlabelled.sum()))
    for fold in range(k):
        train = labelled & (folds != fold)
        own = labelled & (folds == fold)
        targets = np.concatenate([features[own], features[unlabelled]])
        predicted = fit_predict(features[train], labels[train], targets) if len(targets) else np.empty(0)
        out[own] = predicted[: int(own.sum())]
        pooled += predicted[int(own.sum()) :]
    out[unlabelled] = pooled / k
    return out
