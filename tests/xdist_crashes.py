"""What a part of scripts/test.sh does when a pytest-xdist worker dies (a test that ends its
process, the kernel's OOM killer, or pytest-timeout ending a test hung past 300 s): xdist reports
the test that was running as failed ("worker 'gw0' crashed while running ...") and hands the rest
of its module to a new worker. Its loadfile scheduling would hand that new worker the crashed
test too, to die again on each replacement until `--max-worker-restart` ends the part with its
other tests unrun; this plugin (`-p tests.xdist_crashes`) marks the crashed test done, so a
death costs its one test, the part's other tests still run, and the summary lists the deaths.
A second death can still stall the part (pytest-xdist 3.8's scheduler gives the new worker no
work; tests/test_test_parts.py), which the part's wall limit ends."""

from __future__ import annotations

import pytest
from xdist.scheduler import LoadScopeScheduling

_deaths: list[str] = []  # xdist's report of each death, in this (controller) process


def pytest_handlecrashitem(crashitem: str, report: pytest.TestReport, sched: object) -> None:
    _deaths.append(str(report.longrepr))
    if isinstance(sched, LoadScopeScheduling):  # loadfile and loadscope requeue the crashed test with its module
        for scope, unit in list(sched.workqueue.items()):
            if crashitem in unit:
                unit[crashitem] = True
                if all(unit.values()):
                    del sched.workqueue[scope]
        for work in sched.assigned_work.values():  # already dealt again to a worker not yet told
            for unit in work.values():
                if crashitem in unit:
                    unit[crashitem] = True


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if _deaths:
        terminalreporter.write_sep("=", f"{len(_deaths)} pytest worker{'s' if len(_deaths) > 1 else ''} died; the other tests of their modules ran on new workers")
        for death in _deaths:
            terminalreporter.write_line(death)
