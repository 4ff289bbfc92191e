"""Do eval runs fail the same episodes? Per-spec agreement between runs on their shared specs.

Reads two or more eval run directories (``simroll.report.runs.load_eval_run``), keeps the specs
every run recorded (optionally one ``--task``), and reports for each pair of runs on how many
shared specs their outcomes (task success) agree, beside the agreement expected if the two runs
failed independently at their own rates (``p_a p_b + (1 - p_a)(1 - p_b)``), and how many specs
k of the runs succeeded on, for each k. Runs that fail the same specs agree far above the
independent level; runs whose failures are their own sit near it, and a success by any one of
them bounds what averaging them could reach.

    python scripts/outcome_agreement.py runs/test_place_shipped runs/test_place_k4 \\
        runs/test_vla_goal_offset_scratch --task SoftPlace --output agreement.json
"""

from __future__ import annotations

import argparse
import itertools
from collections import Counter
from pathlib import Path


def agreement(runs: dict[str, dict[str, bool]]) -> dict:
    """The report for ``runs`` (name -> spec key -> success), restricted to the shared specs."""
    shared = sorted(set.intersection(*(set(outcomes) for outcomes in runs.values())))
    if not shared:
        raise SystemExit("the runs share no spec: nothing to compare")
    rates = {name: sum(runs[name][key] for key in shared) / len(shared) for name in runs}
    pairs = []
    for a, b in itertools.combinations(runs, 2):
        agree = sum(runs[a][key] == runs[b][key] for key in shared)
        independent = rates[a] * rates[b] + (1 - rates[a]) * (1 - rates[b])
        pairs.append(
            {"a": a, "b": b, "agree": agree, "independent": round(independent * len(shared), 1)}
        )
    successes = Counter(sum(runs[name][key] for name in runs) for key in shared)
    return {
        "specs": len(shared),
        "tsr": rates,
        "pairs": pairs,
        "specs_by_runs_succeeding": {k: successes.get(k, 0) for k in range(len(runs) + 1)},
    }


def main(argv: list[str] | None = None) -> dict:
    from simroll.report.runs import load_eval_run

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path, help="eval run directories (two or more)")
    parser.add_argument("--task", help="keep only this task's specs (e.g. SoftPlace)")
    parser.add_argument("--output", type=Path, help="also write the report here as JSON")
    args = parser.parse_args(argv)
    if len(args.runs) < 2:
        parser.error(f"give at least two run directories, got {len(args.runs)}")
    runs: dict[str, dict[str, bool]] = {}
    for run_dir in args.runs:
        run = load_eval_run(run_dir)
        for problem in run.problems:
            if problem.severity != "warning":
                raise SystemExit(f"{run_dir}: {problem.what}")
        runs[str(run_dir)] = {
            record.spec.key: bool(record.success)
            for record in run.records
            if args.task is None or record.spec.task == args.task
        }
    report = {"task": args.task, **agreement(runs)}
    for pair in report["pairs"]:
        print(
            f"{pair['a']}  {pair['b']}: agree on {pair['agree']} of {report['specs']} "
            f"(independent failures: {pair['independent']})"
        )
    print("specs by how many runs succeeded:", report["specs_by_runs_succeeding"])
    if args.output is not None:
        from simroll.io import write_json_atomic

        write_json_atomic(args.output, report)
    return report


if __name__ == "__main__":
    main()
