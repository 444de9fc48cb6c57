from __future__ import annotations

from collections.abc import Iterator

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
