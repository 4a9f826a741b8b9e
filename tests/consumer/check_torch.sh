#!/usr/bin/env bash
# Installs the built gradwire (with the libtorch adapter) into a temporary
# prefix, then builds and runs a consumer that uses
# find_package(Torch) + find_package(gradwire COMPONENTS torch).
set -euo pipefail
build_dir=$1
python=${2:-python3}
src_dir=$(cd "$(dirname "$0")/torch" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$build_dir" --prefix "$work/prefix" >/dev/null
torch_prefix=$("$python" -c 'import torch; print(torch.utils.cmake_prefix_path)')
cuda=()
[[ -x /usr/local/cuda/bin/nvcc ]] && cuda=(-DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc)
cmake -S "$src_dir" -B "$work/consumer" -DCMAKE_PREFIX_PATH="$work/prefix;$torch_prefix" "${cuda[@]}" >/dev/null
cmake --build "$work/consumer" >/dev/null
LD_LIBRARY_PATH="$work/prefix/lib:${LD_LIBRARY_PATH:-}" "$work/consumer/torch_consumer"
