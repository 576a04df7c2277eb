"""Fettle's function spectrum: which of the workspace's functions each test
runs, and whether the test failed. Loaded by the `sitecustomize` next to it
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

_tests = []  # (test id, failed, set of code objects)
_current = None
_test_id = None
_failed = False
_under_pytest = False


_REPORTING = ("__repr__", "__str__", "__format__")
_caller_in_workspace = {}


def _trace(frame, event, arg):
    # Called on each new Python frame only (no local tracing: return None).
    current = _current
    if current is not None:
        code = frame.f_code
        # A failed assertion's values are shown by the test framework
        # (pytest's saferepr, unittest's safe_repr): only failing tests run
        # those, which would make every `__repr__` a suspect. Counted only
        # when the workspace's own code calls them.
        if code.co_name in _REPORTING:
            caller = frame.f_back
            if caller is None or not _in_workspace(caller.f_code.co_filename, _caller_in_workspace):
                return None
        current.add(code)
    return None


def begin(test_id):
    global _current, _failed, _test_id
    _test_id = test_id
    _current = set()
    _failed = False
    # Traced only while a test runs: collection and imports cost nothing.
    sys.settrace(_trace)
    threading.settrace(_trace)


def fail():
    global _failed
    _failed = True


def end():
    global _current
    sys.settrace(None)
    threading.settrace(None)
    if _current is not None and len(_tests) < _MAX_TESTS:
        _tests.append((_test_id, _failed, _current))
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
    for test_id, failed, codes in _tests:
        ran = set()
        for code in codes:
            if not _in_workspace(code.co_filename, cache):
                continue
            key = (code.co_filename, code.co_firstlineno, code.co_name)
            at = index.get(key)
            if at is None:
                at = index[key] = len(functions)
                functions.append([os.path.realpath(code.co_filename), code.co_firstlineno, code.co_name])
            ran.add(at)
        tests.append({"id": str(test_id), "failed": bool(failed), "functions": sorted(ran)})
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
    _patch_unittest()
    atexit.register(write)
