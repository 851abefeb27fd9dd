#!/usr/bin/env bash
# Builds the tiny test job against the one jar a Flink 2.3 install ships: build.sh FLINK_HOME OUT_JAR
set -euo pipefail
flink_home=$1 out=$2
here=$(cd "$(dirname "$0")" && pwd)
classes=$(mktemp -d)
trap 'rm -rf "$classes"' EXIT
javac --release 17 -nowarn -cp "$flink_home/lib/flink-dist-2.3.0.jar" -d "$classes" \
  "$here/src/demeter/testjob/TinyJob.java"
jar --create --file "$out" --main-class demeter.testjob.TinyJob -C "$classes" .
