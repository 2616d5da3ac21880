#!/usr/bin/env python3
"""Totals of a `make test` run from the machine-readable records its runners wrote, never from
their human output:

* `<dir>/cargo*/**.log`: libtest's `--logfile` records (hack/cargo-test.sh), one line per test:
  `ok <test>`, `failed <test>` or `ignored <test>`; a binary that died is a `failed` line.
* `<dir>/<suite>.log`: the same records from our own suites (hack/lib.sh's `check`).
* `<dir>/<suite>.junit.xml`: JUnit reports (the upstream conformance suite's Ginkgo report).

Prints a line per suite and, last, `all tests: N passed, N failed (...)`. Exit status 1 when a
record says failed or no record was found at all.

Usage: hack/test_totals.py RESULTS_DIR
"""
import os
import sys
import xml.etree.ElementTree as ET


def records(path):
    passed = failed = 0
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            verdict = line.split(" ", 1)[0]
            if verdict == "ok":
                passed += 1
            elif verdict == "failed":
                failed += 1
    return passed, failed


def junit(path):
    """Specs only: Ginkgo also reports its suite-level nodes ([BeforeSuite], [ReportAfterSuite]
    ...) as test cases."""
    passed = failed = 0
    for case in ET.parse(path).getroot().iter("testcase"):
        if case.get("name", "").startswith("[") and "Suite]" in case.get("name", "").split(" ")[0]:
            continue
        kinds = {child.tag for child in case}
        if kinds & {"failure", "error"}:
            failed += 1
        elif "skipped" not in kinds:
            passed += 1
    return passed, failed


def main():
    root = sys.argv[1]
    suites = {}
    for dirpath, _, files in os.walk(root):
        for name in sorted(files):
            path = os.path.join(dirpath, name)
            top = os.path.relpath(path, root).split(os.sep)[0]
            if top.startswith("cargo"):
                suite, count = "cargo", records(path) if name.endswith(".log") else None
            elif name.endswith(".junit.xml"):
                suite, count = name[: -len(".junit.xml")], junit(path)
            elif name.endswith(".log"):
                suite, count = name[: -len(".log")].replace("-", " "), records(path)
            else:
                continue
            if count is None:
                continue
            p, f = suites.get(suite, (0, 0))
            suites[suite] = (p + count[0], f + count[1])
    order = sorted(suites, key=lambda s: (s != "cargo", s))
    for suite in order:
        print(f"{suite}: {suites[suite][0]} passed, {suites[suite][1]} failed")
    passed = sum(p for p, _ in suites.values())
    failed = sum(f for _, f in suites.values())
    detail = "; ".join(f"{s}: {suites[s][0]} passed, {suites[s][1]} failed" for s in order)
    print(f"all tests: {passed} passed, {failed} failed ({detail or 'no records'})")
    return 1 if failed or not suites else 0


if __name__ == "__main__":
    sys.exit(main())
