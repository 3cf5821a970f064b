#!/usr/bin/env bash
# Refreshes the dashboard's screenshots in docs/images from the browser tests, which save
# them as they check each page: tests/dashboard_browser_test.cpp (a two-rank run in bands, a
# live run paused) and tests/dashboard_pages_browser_test.cpp (the runs table, a run's page,
# the compare grid), tests/ranks_browser_test.cpp (the straggler view of a 4-rank run) and
# tests/sweep_browser_test.cpp (a sweep's page) and tests/lineage_browser_test.cpp (a fork's
# page). The Experts panel's comes from a real run:
# scripts/screenshot-moe-tiny.sh.
# Needs a build (make build); BUILD_DIR picks another than build/.
set -euo pipefail
cd "$(dirname "$0")/.."
build="${BUILD_DIR:-build}"

(cd "$build" && ctest -R 'DashboardBrowser|DashboardPagesBrowser|RanksBrowser|SweepBrowser|LineageBrowser' --output-on-failure)
cp "$build/screenshots/run-bands.png" "$build/screenshots/live.png" docs/images/
for page in runs run compare; do cp "$build/screenshots/pages/$page.png" docs/images/; done
cp "$build/screenshots/ranks/straggler-view.png" docs/images/
cp "$build/screenshots/sweep/sweep.png" docs/images/
cp "$build/screenshots/lineage.png" docs/images/
echo "refresh-screenshots: docs/images/{run-bands,live,runs,run,compare,straggler-view,sweep,lineage}.png"
