"""Runs a list of episode specs into a run directory: resumable, retrying, with live progress.

``evaluate`` is what ``simroll eval`` (and later certification) calls. It skips specs the run
directory already holds (resume), runs the rest on the chosen backend, appends each record as it
finishes, re-runs once every episode that raised or whose worker died, and reports store problems
(corrupted or duplicate rows) instead of counting them. Ctrl-C stops between records: what was
written stays, and the same command resumes.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from pathlib import Path

from tqdm import tqdm

from simroll.rollout.backends import EpisodeJob, run_backend
from simroll.rollout.records import EpisodeRecord, EpisodeSpec, derive_seed
from simroll.rollout.store import MAX_ATTEMPTS, RecordStore


def make_specs(
    suite: str,
    tasks: Sequence[str],
    objects: Sequence[str],
    variations: Sequence[str],
    episodes: int,
    base_seed: int = 0,
) -> list[EpisodeSpec]:
    """Episode ``i`` of a task gets the same seed for every object and variation (paired)."""
    if episodes < 1:
        raise ValueError(f"episodes must be >= 1, got {episodes}")
    return [
        EpisodeSpec(
            task=task,
            object=obj,
            variation=variation,
            seed=derive_seed(suite, task, index, base_seed),
            index=index,
            suite=suite,
        )
        for task, obj, variation, index in itertools.product(
            tasks, objects, variations, range(episodes)
        )
    ]


def evaluate(
    run_dir: str | Path,
    specs: Sequence[EpisodeSpec],
    job: EpisodeJob,
    backend: str = "local",
    workers: int = 2,
    progress: bool = True,
) -> list[EpisodeRecord]:
    """Run every spec not yet in ``run_dir`` and return the run's valid records for ``specs``."""
    store = RecordStore(run_dir)
    contents = store.load()
    if not contents.ok:
        tqdm.write(f"record store: {contents.summary()}")
    total = len(specs)
    done = sum(
        1
        for spec in specs
        if spec.key in contents.records and contents.records[spec.key].error is None
    )
    bar = tqdm(
        total=total,
        initial=done,
        desc="episodes",
        unit="ep",
        disable=not progress,
        dynamic_ncols=True,
    )
    successes = sum(contents.records[s.key].success for s in specs if s.key in contents.records)
    dsr = sum(contents.records[s.key].dsr_success for s in specs if s.key in contents.records)
    try:
        for _ in range(MAX_ATTEMPTS):
            todo = store.pending(specs)
            if not todo:
                break
            attempts = {spec.key: store.next_attempt(spec) for spec in todo}
            for record in run_backend(backend, job, todo, workers, attempts):
                store.append(record)
                if record.error is not None:
                    tqdm.write(
                        f"episode {record.spec.key} failed (attempt "
                        f"{record.extra.get('attempt')}): {record.error.splitlines()[0]}"
                    )
                    if record.extra.get("attempt", 1) < MAX_ATTEMPTS:
                        continue
                successes += record.success
                dsr += record.dsr_success
                bar.update(1)
                bar.set_postfix(
                    TSR=f"{successes / max(bar.n, 1):.2f}", DSR=f"{dsr / max(bar.n, 1):.2f}"
                )
    finally:
        bar.close()
    final = store.load()
    return [final.records[spec.key] for spec in specs if spec.key in final.records]
