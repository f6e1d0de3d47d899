#!/usr/bin/env bash
# tests/run.sh: what `make test` runs. Installs/fetches what is missing,
# builds every artefact the tests boot, then runs the test runner, which
# ends with "N passed, N failed".
set -euo pipefail
cd "$(dirname "$0")/.."
bash host/deps.sh
make -s -j2 all image variants-link
exec python3 tests/runner.py "$@"
