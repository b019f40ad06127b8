import os

import numpy as np
import pytest
from hypothesis import HealthCheck, settings

# CI: derandomized (reproducible) and bounded; locally a few more examples.
settings.register_profile("ci", max_examples=20, deadline=None, derandomize=True,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture])
settings.register_profile("dev", max_examples=30, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))


@pytest.fixture(scope="session")
def device():
    import evermind_vk as ev
    return ev.get_device()


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


@pytest.fixture
def two_ranks_env(monkeypatch):
    """The environment for a two-rank data-parallel run on this host: on a host with one GPU both ranks share
    it (EVERMIND_VK_DEVICE=0; the launcher refuses more ranks than GPUs otherwise), elsewhere unchanged.
    Set in this process too (for in-process CLI calls); returns a copy for subprocesses."""
    import evermind_vk as ev
    if sum(d.type != "cpu" for d in ev.devices()) == 1:
        monkeypatch.setenv("EVERMIND_VK_DEVICE", "0")
    return dict(os.environ)
