"""Fettle's spectrum: which of the workspace's functions (and which of their
lines) each test runs, and whether the test failed. Loaded by the `sitecustomize` next to it
(every Python process the test command starts) and, under pytest, as the
plugin `fettle_spectrum_pytest`. It changes no test's outcome and prints
nothing; it writes one JSON file per process into $FETTLE_SPECTRUM_OUT."""

import atexit
import json
import os
import sys
import threading

_OUT = os.environ.get("FETTLE_SPECTRUM_OUT", "")
_ROOT = os.path.realpath(os.environ.get("FETTLE_SPECTRUM_ROOT", os.getcwd()))
# Keeps the file a hostile or huge suite writes bounded.
_MAX_TESTS = 5000

_tests = []  # (test id, failed, set of code objects, {code: set of lines})
_current = None
_lines = None
_frames = None
_test_id = None
_failed = False
_under_pytest = False

# Line tracing (Python before 3.12, `settrace`) is bounded so a test's
# hot loop cannot make the run crawl: so many frames of one function per
# test, so many line events in one frame. Lines past the bounds are missed
# by failing and passing tests alike.
_MAX_FRAMES_PER_CODE = 16
_MAX_LINES_PER_FRAME = 256

_REPORTING = ("__repr__", "__str__", "__format__")
_caller_in_workspace = {}
_line_traced = {}


def _reported_by_framework(frame, code):
    # A failed assertion's values are shown by the test framework (pytest's
    # saferepr, unittest's safe_repr): only failing tests run those, which
    # would make every `__repr__` a suspect. Counted only when the
    # workspace's own code calls them.
    if code.co_name not in _REPORTING:
        return False
    caller = frame.f_back
    return caller is None or not _in_workspace(caller.f_code.co_filename, _caller_in_workspace)


def _traces_lines(filename):
    """The workspace's code, not its tests: where a line tells something."""
    known = _line_traced.get(filename)
    if known is None:
        base = os.path.basename(filename)
        known = (
            _in_workspace(filename, _caller_in_workspace)
            and not base.startswith("test")
            and not base.endswith("_test.py")
            and base != "conftest.py"
            and os.sep + "tests" + os.sep not in filename
        )
        _line_traced[filename] = known
    return known


def _trace(frame, event, arg):
    # Called on each new Python frame; returns its line tracer, if any.
    current = _current
    if current is None:
        return None
    code = frame.f_code
    if _reported_by_framework(frame, code):
        return None
    current.add(code)
    if not _traces_lines(code.co_filename):
        return None
    seen = _frames.get(code, 0)
    if seen >= _MAX_FRAMES_PER_CODE:
        return None
    _frames[code] = seen + 1
    lines = _lines.get(code)
    if lines is None:
        lines = _lines[code] = set()
    left = [_MAX_LINES_PER_FRAME]

    def line(frame, event, arg):
        if event == "line":
            lines.add(frame.f_lineno)
            left[0] -= 1
            if left[0] <= 0:
                return None
        return line

    return line


# Python 3.12+: `sys.monitoring` reports each line once per test (an event
# returns DISABLE; each test begins with `restart_events`), so lines cost
# little and nothing is bounded.
_monitoring = getattr(sys, "monitoring", None)
_tool = None


def _start_monitoring():
    global _tool
    for tool in (_monitoring.COVERAGE_ID, 4, 5):
        if _monitoring.get_tool(tool) is None:
            _monitoring.use_tool_id(tool, "fettle spectrum")
            _tool = tool
            break
    else:
        return False
    events = _monitoring.events

    def on_start(code, offset):
        current = _current
        if current is None:
            # Between tests: quiet until the next test's restart.
            return _monitoring.DISABLE
        if _reported_by_framework(sys._getframe(1), code):
            return None
        current.add(code)
        if _traces_lines(code.co_filename):
            _monitoring.set_local_events(_tool, code, events.LINE)
        return _monitoring.DISABLE

    def on_line(code, line):
        if _current is not None:
            lines = _lines.get(code)
            if lines is None:
                lines = _lines[code] = set()
            lines.add(line)
        return _monitoring.DISABLE

    _monitoring.register_callback(_tool, events.PY_START, on_start)
    _monitoring.register_callback(_tool, events.LINE, on_line)
    _monitoring.set_events(_tool, events.PY_START)
    return True


def begin(test_id):
    global _current, _failed, _test_id, _lines, _frames
    _test_id = test_id
    _current = set()
    _lines = {}
    _frames = {}
    _failed = False
    # Traced only while a test runs: collection and imports cost nothing.
    if _tool is not None:
        _monitoring.restart_events()
    else:
        sys.settrace(_trace)
        threading.settrace(_trace)


def fail():
    global _failed
    _failed = True


def end():
    global _current
    if _tool is None:
        sys.settrace(None)
        threading.settrace(None)
    if _current is not None and len(_tests) < _MAX_TESTS:
        _tests.append((_test_id, _failed, _current, _lines))
    _current = None


def _in_workspace(filename, cache):
    known = cache.get(filename)
    if known is None:
        # `<frozen os>`, `<string>`: not a file.
        path = os.path.realpath(filename)
        known = (
            os.path.isabs(filename)
            and path.startswith(_ROOT + os.sep)
            and "site-packages" not in path
            and os.sep + "." not in path[len(_ROOT):]
        )
        cache[filename] = known
    return known


def write():
    if not _OUT or not _tests:
        return
    functions, index, cache, tests = [], {}, {}, []
    for test_id, failed, codes, lines in _tests:
        ran, ran_lines = set(), []
        for code in codes:
            if not _in_workspace(code.co_filename, cache):
                continue
            key = (code.co_filename, code.co_firstlineno, code.co_name)
            at = index.get(key)
            if at is None:
                at = index[key] = len(functions)
                functions.append([os.path.realpath(code.co_filename), code.co_firstlineno, code.co_name])
            ran.add(at)
            if lines.get(code):
                ran_lines.append([at, sorted(lines[code])])
        tests.append({"id": str(test_id), "failed": bool(failed), "functions": sorted(ran), "lines": ran_lines})
    path = os.path.join(_OUT, "spectrum-%d.json" % os.getpid())
    try:
        with open(path + ".part", "w") as f:
            json.dump({"tests": tests, "functions": functions}, f)
        os.replace(path + ".part", path)
    except OSError:
        pass


def _patch_unittest():
    try:
        import unittest.case
    except Exception:
        return
    original = unittest.case.TestCase.run

    def run(self, result=None):
        # Under pytest its plugin marks the tests; a result-less run cannot
        # be read.
        if _under_pytest or result is None or _current is not None:
            return original(self, result)

        def bad():
            return sum(len(getattr(result, name, ()) or ()) for name in ("failures", "errors", "unexpectedSuccesses"))

        before = bad()
        begin(self.id())
        try:
            return original(self, result)
        finally:
            if bad() > before:
                fail()
            end()

    unittest.case.TestCase.run = run


def under_pytest():
    global _under_pytest
    _under_pytest = True


if _OUT:
    if _monitoring is not None:
        try:
            _start_monitoring()
        except Exception:
            _tool = None
    _patch_unittest()
    atexit.register(write)
