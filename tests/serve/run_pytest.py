"""Runs pytest for CTest (cmake/ringlmServeTests.cmake): `python3 run_pytest.py PATH...`.

Exit status 77 (CTest's skip) when pytest is not installed for this interpreter, or when every
test was skipped (../shared absent); otherwise pytest's own status."""

import sys

try:
    import pytest
except ImportError:
    print(f"SKIP: pytest is not installed for {sys.executable} (Debian: apt-get install python3-pytest; "
          "scripts/setup.sh does)")
    sys.exit(77)


class Outcomes:
    def __init__(self):
        self.passed = 0
        self.skipped = 0

    def pytest_runtest_logreport(self, report):
        if report.when == "call" and report.passed:
            self.passed += 1
        if report.skipped:
            self.skipped += 1


outcomes = Outcomes()
rc = pytest.main(["-q", "-rs", "-p", "no:cacheprovider", *sys.argv[1:]], plugins=[outcomes])
if rc == 0 and outcomes.passed == 0 and outcomes.skipped > 0:
    print("SKIP: every test was skipped (see the reasons above)")
    sys.exit(77)
sys.exit(int(rc))
