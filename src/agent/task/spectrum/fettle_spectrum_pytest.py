"""The pytest side of Fettle's function spectrum (see fettle_spectrum)."""

import pytest

import fettle_spectrum

fettle_spectrum.under_pytest()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    fettle_spectrum.begin(item.nodeid)
    try:
        yield
    finally:
        fettle_spectrum.end()


def pytest_runtest_logreport(report):
    if report.failed:
        fettle_spectrum.fail()


def pytest_sessionfinish(session, exitstatus):
    fettle_spectrum.write()
