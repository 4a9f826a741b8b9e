#!/usr/bin/env bash
# Installs the built gradwire into a temporary prefix, then builds and runs
# a consumer with find_package(gradwire) and another with pkg-config.
set -euo pipefail
build_dir=$1
src_dir=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$build_dir" --prefix "$work/prefix" >/dev/null
cmake -S "$src_dir" -B "$work/consumer" -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
cmake --build "$work/consumer" >/dev/null
LD_LIBRARY_PATH="$work/prefix/lib:${LD_LIBRARY_PATH:-}" "$work/consumer/consumer"
libdir=$(ls -d "$work"/prefix/lib*/pkgconfig | head -1)
PKG_CONFIG_PATH="$libdir" g++ "$src_dir/main.cpp" -o "$work/consumer_pc" \
  $(PKG_CONFIG_PATH="$libdir" pkg-config --cflags --libs gradwire)
LD_LIBRARY_PATH="$(dirname "$libdir"):${LD_LIBRARY_PATH:-}" "$work/consumer_pc"
echo "consumer: find_package and pkg-config builds both ran"
