"""The numerical controls: fixed policies that buy masks under the episode rules (two free anchors, the
all-off and all-on masks, then one credit per new distinct mask) and fixed estimators that complete
the table. One call computes one policy on one condition for several budgets: every acquisition here
is nested (the first B purchases do not depend on the budget), so the longest run serves them all.

A task: ``width``, ``utilities`` (the reference utility of every mask, by index), ``method``,
``budgets``, ``seed`` (random design) and ``equivalences`` (the plan's declarations; code-aware
methods). Each result: ``budget``, ``actual_credits``, ``observations`` ([mask, utility] in
acquisition order), ``prediction`` (every mask's value, by index) and what the method chose."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from workflows.evaluation import gp, ridge
from workflows.evaluation.surface import effect_edges, feature_rows, hamming, mask_string, representatives

RANDOM_SEED_BASE = 20260907


@dataclass(frozen=True)
class Method:
    acquisition: str  # "design", "random" or "gp"
    degree: int = 0  # the ridge estimator's degree (0: the GP estimator)
    effect_variance: bool = False
    code_aware: bool = False


METHODS: dict[str, Method] = {
    "design_degree1": Method("design", 1),
    "design_degree2": Method("design", 2),
    "random_degree2": Method("random", 2),
    "gp_grid_variance": Method("gp"),
    "gp_effect_variance": Method("gp", effect_variance=True),
    "gp_code_effect_variance": Method("gp", effect_variance=True, code_aware=True),
    "code_canonical_design_degree1": Method("design", 1, code_aware=True),
    "code_canonical_design_degree2": Method("design", 2, code_aware=True),
}


class Condition:
    """A condition's surface as the policies see it: utilities, anchors, representatives."""

    def __init__(self, width: int, utilities: list[float], equivalences: list[dict], code_aware: bool) -> None:
        self.width = width
        self.size = 2**width
        self.utilities = np.asarray(utilities, dtype=np.float64)
        if self.utilities.shape != (self.size,):
            raise ValueError(f"expected {self.size} utilities, got {self.utilities.shape}")
        self.anchors = [0, self.size - 1]
        self.reps = representatives(width, equivalences) if code_aware else np.arange(self.size)

    def candidates(self) -> np.ndarray:
        """Masks that are their own representative and whose representative the anchors do not give."""
        own = self.reps == np.arange(self.size)
        return own & ~np.isin(self.reps, self.reps[self.anchors])

    def observations(self, observed: list[int]) -> list[list]:
        return [[mask_string(k, self.width), float(self.utilities[k])] for k in observed]

    def finish(self, raw: np.ndarray, observed: list[int], code_aware: bool) -> tuple[list[float], dict]:
        """The table: clipped to [0, 1], observed masks at their utilities, and for a code-aware method every
        mask whose representative was observed at that observation's utility (listed as inferred)."""
        table = np.clip(raw, 0.0, 1.0)
        table[observed] = self.utilities[observed]
        if not code_aware:
            return table.tolist(), {}
        known: dict[int, int] = {}
        for k in observed:
            known.setdefault(int(self.reps[k]), k)
        inferred = list(observed) + [k for k in range(self.size) if k not in observed and int(self.reps[k]) in known]
        for k in inferred:
            table[k] = self.utilities[known[int(self.reps[k])]]
        return table.tolist(), {"code_inferred_observations": {mask_string(k, self.width): float(table[k]) for k in inferred}}


def _ridge_results(condition: Condition, method: Method, purchases: list[int], budgets: list[int]) -> list[dict]:
    rows = feature_rows(condition.width, method.degree)[condition.reps]
    results = []
    for budget in budgets:
        observed = condition.anchors + purchases[:budget]
        raw, chosen = ridge.table(rows, rows[observed], condition.utilities[observed])
        prediction, inferred = condition.finish(raw, observed, method.code_aware)
        results.append(_result(condition, budget, observed, prediction, {"degree": method.degree, **chosen, **inferred}))
    return results


def _gp_results(condition: Condition, method: Method, budgets: list[int]) -> list[dict]:
    distances = hamming(condition.width, condition.reps)
    edges = effect_edges(condition.width) if method.effect_variance else None
    open_ = condition.candidates() if method.code_aware else np.ones(condition.size, dtype=bool)
    open_[condition.anchors] = False
    observed = list(condition.anchors)
    trajectory: list[dict] = []
    results = []
    wanted = sorted(set(budgets))
    for budget in range(wanted[-1] + 1):
        y = condition.utilities[observed]
        hyper = gp.choose(distances, observed, y)
        exhausted = not open_.any()
        if budget in wanted or exhausted:
            mean, covariance = gp.posterior(distances, observed, y, hyper)
            prediction, inferred = condition.finish(mean, observed, method.code_aware)
            final = {"lengthscale": hyper.lengthscale, "nugget": hyper.nugget, "observed_loo_mse": hyper.observed_loo_mse}
            details = {"trajectory": list(trajectory), "final_parameters": final, **inferred}
            done = [b for b in wanted if b >= budget] if exhausted else [budget]
            results += [_result(condition, b, observed, prediction, details) for b in done]
            if exhausted or budget == wanted[-1]:
                break
        else:
            _, covariance = gp.posterior(distances, observed, y, hyper)
        gain = gp.gains(covariance, hyper.nugget, edges)
        index = np.flatnonzero(open_)
        pick = int(index[np.argmax(np.round(gain[index], 12))])
        trajectory.append(
            {
                "mask": mask_string(pick, condition.width),
                "lengthscale": hyper.lengthscale,
                "nugget": hyper.nugget,
                "observed_loo_mse": hyper.observed_loo_mse,
                "expected_trace_reduction": float(gain[pick]),
            }
        )
        observed.append(pick)
        open_[pick] = False
    return results


def _result(condition: Condition, budget: int, observed: list[int], prediction: list[float], details: dict) -> dict:
    return {
        "budget": budget,
        "actual_credits": len(observed) - len(condition.anchors),
        "observations": condition.observations(observed),
        "prediction": prediction,
        **details,
    }


def run(task: dict) -> list[dict]:
    """One method on one condition for every budget of the task (see the module's header)."""
    method = METHODS[task["method"]]
    budgets = sorted(set(int(b) for b in task["budgets"]))
    condition = Condition(int(task["width"]), task["utilities"], task.get("equivalences", []), method.code_aware)
    if budgets and (budgets[0] < 0 or budgets[-1] > condition.size - 2):
        raise ValueError(f"budgets must lie in 0 … {condition.size - 2}")
    if method.acquisition == "gp":
        return _gp_results(condition, method, budgets)
    most = budgets[-1] if budgets else 0
    if method.acquisition == "random":
        order = np.random.default_rng(RANDOM_SEED_BASE + int(task["seed"])).permutation(np.arange(1, condition.size - 1))
        purchases = [int(k) for k in order[:most]]
    else:
        rows = feature_rows(condition.width, method.degree)[condition.reps]
        candidates = condition.candidates() if method.code_aware else None
        purchases = ridge.greedy_design(rows, condition.anchors, most, candidates)
    return _ridge_results(condition, method, purchases, budgets)
