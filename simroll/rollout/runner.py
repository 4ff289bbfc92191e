"""Runs a list of episode specs into a run directory: resumable, retrying, with live progress.

``evaluate`` is what ``simroll eval`` (and later certification) calls. It skips specs the run
directory already holds (resume; the store is read once per round, so a resume costs one pass
over ``records.jsonl`` however many specs are pending), runs the rest on the chosen backend,
appends each record as it finishes, re-runs once every episode that raised or whose worker died
while running it, and reports store problems (corrupted or duplicate rows) instead of counting
them. Episodes still in error after the retry are returned, counted by :func:`count_errors` and
announced in a closing ERROR line. Ctrl-C stops at once: the backend's workers are terminated,
queued episodes are dropped, what was written stays, and the same command resumes.

Finished episodes named in ``rerun`` run again in the first round, for what the job's observers
record of them (a video, a dataset shard that an earlier run did not make); their records are not
stored again, and a re-run whose receipt differs from the stored one is reported. The returned
:class:`RunRecords` says how many episodes the backend ran (``episodes_run``: retries and re-runs
included), so a caller can show that recording cost no extra episodes.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from pathlib import Path

from tqdm import tqdm

from simroll.rollout.backends import EpisodeJob, run_backend
from simroll.rollout.records import EpisodeRecord, EpisodeSpec, derive_seed
from simroll.rollout.store import MAX_ATTEMPTS, RecordStore, attempt_of


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


class RunRecords(list):
    """The records :func:`evaluate` returns, in spec order, and ``episodes_run``: how many
    episodes the backend ran to get them (every try, and every re-run for the observers)."""

    def __init__(self, records: Sequence[EpisodeRecord] = (), episodes_run: int = 0) -> None:
        super().__init__(records)
        self.episodes_run = episodes_run


def evaluate(
    run_dir: str | Path,
    specs: Sequence[EpisodeSpec],
    job: EpisodeJob,
    backend: str = "local",
    workers: int = 2,
    progress: bool = True,
    rerun: Sequence[EpisodeSpec] = (),
) -> RunRecords:
    """Run every spec not yet in ``run_dir`` and return the run's valid records for ``specs``.

    Records whose episode still ended in error after :data:`MAX_ATTEMPTS` tries are returned
    too (they count as failures); :func:`count_errors` counts them, and a closing line says so.
    ``rerun``: finished specs to run once more for the job's observers (see the module).
    """
    store = RecordStore(run_dir)
    contents = store.load()  # read once per round, never once per spec
    if not contents.ok:
        tqdm.write(f"record store: {contents.summary()}")
    todo = store.pending(specs, contents=contents)
    waiting = {spec.key for spec in todo}
    again = {spec.key: contents.records[spec.key] for spec in rerun if spec.key in contents.records}
    again = {key: record for key, record in again.items() if key not in waiting}
    finished = [
        contents.records[spec.key]
        for spec in specs
        if spec.key in contents.records and spec.key not in waiting
    ]
    bar = tqdm(
        total=len(specs),
        initial=len(finished),
        desc="episodes",
        unit="ep",
        disable=not progress,
        dynamic_ncols=True,
    )
    successes = sum(record.success for record in finished)
    dsr = sum(record.dsr_success for record in finished)
    episodes_run = 0
    try:
        # Each round raises every pending spec's attempt by one, so MAX_ATTEMPTS rounds suffice.
        for _ in range(MAX_ATTEMPTS):
            if again:  # the first round also re-runs finished episodes, in spec order
                todo = [spec for spec in specs if spec.key in waiting or spec.key in again]
            if not todo:
                break
            attempts = store.next_attempts(todo, contents)
            attempts.update({key: attempt_of(record) for key, record in again.items()})
            records = run_backend(backend, job, todo, workers, attempts)
            try:
                for record in records:
                    episodes_run += 1
                    if record.spec.key in again:
                        _check_rerun(record, again.pop(record.spec.key))
                        continue
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
                records.close()  # on Ctrl-C: stop the workers now, not when collected
            again.clear()
            contents = store.load()
            todo = store.pending(specs, contents=contents)
            waiting = {spec.key for spec in todo}
    finally:
        bar.close()
    result = RunRecords(
        [contents.records[spec.key] for spec in specs if spec.key in contents.records],
        episodes_run,
    )
    errors = count_errors(result)
    if errors:
        tqdm.write(
            f"ERROR: {errors} of {len(specs)} episodes ended in error after {MAX_ATTEMPTS} "
            "attempts and count as failures; see the 'failed' lines above"
        )
    return result


def _check_rerun(record: EpisodeRecord, stored: EpisodeRecord) -> None:
    """Say when a re-run (for its observers) did not reproduce the stored episode."""
    if record.error is not None:
        tqdm.write(
            f"episode {record.spec.key}: its re-run to record it failed: "
            f"{record.error.splitlines()[0]}"
        )
    elif record.receipt != stored.receipt:
        tqdm.write(
            f"episode {record.spec.key}: its re-run to record it gave another outcome than the "
            "stored record (receipt differs), so what it recorded is not the scored episode"
        )


def count_errors(records: Sequence[EpisodeRecord]) -> int:
    """How many of ``records`` ended in error (raised, or their worker died while running them)."""
    return sum(record.error is not None for record in records)
