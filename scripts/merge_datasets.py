"""Join ``simroll collect`` datasets recorded in the same env into one training dataset.

The datasets are joined with LeRobot's ``aggregate_datasets`` through
:func:`simroll.rollout.dataset.join_datasets` (so the result keeps simroll's per-episode rows:
spec, seed, success), and the result gets a ``meta/simroll_collect.yaml``, which ``simroll
train`` and DAgger read for the env the data was recorded in. The env sections of the sources
must agree (a gripper command or an image means different things in different settings); the
record keeps the first source's settings and lists every source with its seed and episodes under
``merged_from``. Typical use: add a second collect with another seed to a first one::

    simroll collect env=clutter policy=clutter_labeller seed=2000 ... output_dir=data/b
    python scripts/merge_datasets.py data/a data/b --out data/ab
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import yaml

RECORD = Path("meta") / "simroll_collect.yaml"


class _PlainDumper(yaml.SafeDumper):
    """Writes repeated values out in full (no YAML anchors), so the record reads plainly."""

    def ignore_aliases(self, data) -> bool:
        return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("sources", nargs="+", type=Path, help="simroll collect dataset roots")
    parser.add_argument("--out", type=Path, required=True, help="root of the joined dataset")
    parser.add_argument("--repo-id", default=None, help="default: simroll/<out's name>")
    args = parser.parse_args(argv)
    if len(args.sources) < 2:
        parser.error("give at least two source datasets")
    if args.out.exists():
        parser.error(f"--out {args.out} exists; choose a new directory")
    records = []
    for source in args.sources:
        path = source / RECORD
        if not path.is_file():
            parser.error(f"{source} has no {RECORD}: not a dataset made by `simroll collect`")
        records.append(yaml.safe_load(path.read_text()) or {})
    first = records[0]
    for source, record in zip(args.sources[1:], records[1:], strict=True):
        if record.get("env") != first.get("env"):
            parser.error(
                f"{source}'s env settings {record.get('env')} differ from "
                f"{args.sources[0]}'s {first.get('env')}: such datasets are not one training set"
            )
        if record.get("tactile_image") != first.get("tactile_image"):
            parser.error(f"{source} differs from {args.sources[0]} in tactile_image")
    from simroll.io import write_text_atomic
    from simroll.rollout.dataset import join_datasets

    repo_id = args.repo_id or f"simroll/{args.out.name}"
    episodes, frames = join_datasets(args.sources, args.out, repo_id=repo_id)
    per_source = ("seed", "episodes", "backend", "overwrite", "progress")
    merged = {key: value for key, value in first.items() if key not in per_source}
    merged.update(
        repo_id=repo_id,
        output_dir=str(args.out),
        merged_from=[
            {
                "root": str(source),
                "seed": record.get("seed"),
                "episodes": record.get("episodes"),
                "policy": record.get("policy"),
                "backend": record.get("backend"),
            }
            for source, record in zip(args.sources, records, strict=True)
        ],
    )
    text = yaml.dump(merged, Dumper=_PlainDumper, sort_keys=False)
    write_text_atomic(args.out / RECORD, text)
    print(
        f"joined {len(args.sources)} datasets into {args.out}: {episodes} episodes, {frames} frames"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
