"""simroll.provenance: the code that made a result."""

from __future__ import annotations

import re

from simroll.provenance import code_version, git


def test_the_code_version_names_the_checkout_and_its_uncommitted_changes():
    code = code_version()
    assert code["simroll"]  # the installed package
    if git("rev-parse", "HEAD") is None:  # not a git checkout (an sdist install)
        assert code["git_sha"] is None and code["git_diff_sha256"] is None
        return
    assert re.fullmatch(r"[0-9a-f]{40}", code["git_sha"])
    assert isinstance(code["git_dirty"], bool)
    # a digest of the uncommitted changes exactly when there are some to tracked files
    if code["git_diff_sha256"] is not None:
        assert code["git_dirty"] and re.fullmatch(r"[0-9a-f]{64}", code["git_diff_sha256"])
    assert code_version() == code  # nothing in it changes between calls


def test_the_machine_names_its_cpu_and_torchs_vector_instructions():
    import torch  # noqa: F401  (imported: its kernels' capability is recorded)

    from simroll.provenance import machine
    from simroll.scoring.summary import provenance

    info = machine()
    assert info["processor"] and info["platform"]
    assert isinstance(info["cpu"], str) and info["cpu"]
    assert isinstance(info["torch_cpu_capability"], str) and info["torch_cpu_capability"]
    assert provenance()["machine"] == info
