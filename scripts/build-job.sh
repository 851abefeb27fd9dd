#!/usr/bin/env bash
# build-job.sh — compile the benchmark job (jobs/benchmark/src) with javac against the jars Flink
# ships (flink-dist + flink-connector-files, both in the cluster's lib/, so the job jar holds only
# its own classes) into <lab>/jobs/demeter-bench.jar. Needs `scripts/flink-lab.sh install` first.
# Usage: scripts/build-job.sh   (env: DEMETER_LAB, default <repo>/.lab). Prints the jar path.
set -euo pipefail
if [[ ${1:-} == -h || ${1:-} == --help ]]; then
  awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"
  exit 0
fi
repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
LAB=${DEMETER_LAB:-$repo_root/.lab}
FLINK_HOME=$LAB/venv/lib/python3.11/site-packages/pyflink
classpath=$FLINK_HOME/lib/flink-dist-2.3.0.jar:$FLINK_HOME/lib/flink-connector-files-2.3.0.jar
for jar in ${classpath//:/ }; do
  [[ -f $jar ]] || { echo "[build-job] missing $jar: run scripts/flink-lab.sh install" >&2; exit 1; }
done
src=$repo_root/jobs/benchmark/src
# One build at a time: CI's ops tests build the job beside the test script, and a second build
# would delete the first one's classes from under it.
mkdir -p "$LAB/jobs"
exec 9>"$LAB/jobs/.build.lock"
flock 9
build=$LAB/jobs/build
jar=$LAB/jobs/demeter-bench.jar
rm -rf "$build"
mkdir -p "$build/classes"
find "$src" -name '*.java' >"$build/sources.txt"
javac --release 17 -Xlint:all,-serial,-options,-processing,-try -Werror -cp "$classpath" \
  -d "$build/classes" @"$build/sources.txt"
jar --create --file "$jar.tmp" --main-class io.demeter.bench.BenchJob -C "$build/classes" .
mv "$jar.tmp" "$jar"
echo "$jar"
