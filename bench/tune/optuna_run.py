#!/usr/bin/env python3
"""Optuna (TPE + successive halving) driving XGBoost with its pruning
callback over the same space as bench/tune/run.sh gives millrace. Prints one
line per finished trial: `trial N t_done_s value state`, then `best=...`.
The clock starts before the data is loaded, as millrace's does."""
import argparse
import time

t0 = time.time()
import numpy as np  # noqa: E402
import optuna  # noqa: E402
import xgboost as xgb  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--data", required=True)
ap.add_argument("--budget", type=float, default=120)
ap.add_argument("--threads", type=int, default=2)
ap.add_argument("--rounds", type=int, default=300)
ap.add_argument("--seed", type=int, default=1)
a = ap.parse_args()

Xtr = np.load(f"{a.data}/train_X.npy")
ytr = np.load(f"{a.data}/train_y.npy")
Xva = np.load(f"{a.data}/test_X.npy")
yva = np.load(f"{a.data}/test_y.npy")
dtrain = xgb.DMatrix(Xtr, label=ytr, nthread=a.threads)
dvalid = xgb.DMatrix(Xva, label=yva, nthread=a.threads)


def objective(trial):
    params = {
        "objective": "binary:logistic",
        "eval_metric": "auc",
        "tree_method": "hist",
        "grow_policy": "lossguide",
        "max_depth": 0,
        "max_bin": 255,
        "nthread": a.threads,
        "verbosity": 0,
        "eta": trial.suggest_float("learning_rate", 0.02, 0.3, log=True),
        "max_leaves": trial.suggest_int("num_leaves", 15, 255),
        "reg_lambda": trial.suggest_float("lambda_l2", 0.0, 10.0),
        "colsample_bytree": trial.suggest_float("feature_fraction", 0.5, 1.0),
    }
    cb = optuna.integration.XGBoostPruningCallback(trial, "valid-auc")
    res = {}
    xgb.train(params, dtrain, a.rounds, evals=[(dvalid, "valid")], callbacks=[cb], evals_result=res, verbose_eval=False)
    return max(res["valid"]["auc"])


optuna.logging.set_verbosity(optuna.logging.WARNING)
study = optuna.create_study(direction="maximize", sampler=optuna.samplers.TPESampler(seed=a.seed),
                            pruner=optuna.pruners.SuccessiveHalvingPruner(min_resource=10, reduction_factor=3))


def report(study, trial):
    v = trial.value if trial.value is not None else (max(trial.intermediate_values.values()) if trial.intermediate_values else float("nan"))
    print(f"trial {trial.number} {time.time() - t0:.3f} {v:.6f} {trial.state.name}", flush=True)


remaining = a.budget - (time.time() - t0)
study.optimize(objective, timeout=max(1.0, remaining), n_jobs=1, callbacks=[report])
print(f"best={study.best_value:.6f}")
