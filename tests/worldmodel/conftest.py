"""World-model tests run torch on one thread: the machines have two shared cores, and tiny
models on more threads spend their time synchronising."""

import pytest
import torch


@pytest.fixture(autouse=True, scope="session")
def one_torch_thread():
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)
