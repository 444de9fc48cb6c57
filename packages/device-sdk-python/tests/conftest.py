from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from support import Owner, Service


@pytest.fixture(scope="session")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    running = Service(tmp_path_factory.mktemp("service"))
    yield running
    running.stop()


@pytest.fixture(scope="session")
def owner(service: Service) -> Owner:
    return Owner(service, "python-sdk-owner")


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    return tmp_path
