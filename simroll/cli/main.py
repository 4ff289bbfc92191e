"""The ``simroll`` console script: ``simroll <command> [hydra overrides]``.

Commands: ``eval`` (closed-loop evaluation, the main job), ``demo`` (``eval`` on its embedded
default with a video, what ``make demo`` runs) and ``collect`` (record episodes, by default expert
demonstrations, as a LeRobotDataset). Each command is a thin Hydra entry point; configs
ship with the package, so the script works from any directory.
"""

from __future__ import annotations

import sys

COMMANDS = {
    "eval": "simroll.cli.eval:main",
    "demo": "simroll.cli.eval:main",
    "roundtrip": "simroll.cli.roundtrip:main",
    "train": "simroll.cli.train:main",
    "collect": "simroll.cli.collect:main",
    "certify": "simroll.cli.certify:main",
    "report": "simroll.cli.report:main",
}


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help") or argv[0] not in COMMANDS:
        if argv and argv[0] not in ("-h", "--help"):
            print(
                f"simroll: unknown command {argv[0]!r}; expected one of {sorted(COMMANDS)}",
                file=sys.stderr,
            )
        print(
            "usage: simroll {" + ",".join(COMMANDS) + "} [hydra overrides ...]\n"
            "  e.g. simroll eval env=soft_lift policy=expert episodes=50 backend=vector\n"
            "       simroll collect env=soft_lift episodes=200  (demos as a LeRobotDataset)\n"
            "  simroll eval --help  shows the config and its groups",
            file=sys.stderr,
        )
        return 0 if argv and argv[0] in ("-h", "--help") else 2
    command, rest = argv[0], argv[1:]
    module_name, function_name = COMMANDS[command].split(":")
    module = __import__(module_name, fromlist=[function_name])
    sys.argv = [f"simroll {command}", *rest]
    getattr(module, function_name)()
    return 0


if __name__ == "__main__":
    sys.exit(main())
