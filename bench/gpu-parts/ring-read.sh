#!/usr/bin/env bash
# Issue 38 on the GPU host: the live ring's read with its records asked for ahead (cuda/ring_read.c,
# READ_AHEAD) against the same tree without it (the prefetch line taken out of a copy), each tree
# once as each side of bench/ring-read.ts (the reader on core 0, four writers at 165k records/s on
# the other cores): ns a record.
#   bash bench/gpu-parts/ring-read.sh OUT_DIR      (repo root, after `bun cuda/build.ts --install`)
set -u
out=${1:?OUT_DIR}
mkdir -p "$out"
out=$(cd "$out" && pwd)
old=/tmp/ring-read-old
rm -rf "$old" && mkdir -p "$old"
cp -a src cuda bench package.json tsconfig.json bunfig.toml "$old"/ && mkdir -p "$old/test" && cp -a test/fixtures test/support "$old/test/"
ln -sfn "$PWD/node_modules" "$old/node_modules"
rm -rf "$old/cuda/build"
sed -i '/__builtin_prefetch/d' "$old/cuda/ring_read.c"
grep -c READ_AHEAD "$old/cuda/ring_read.c" > /dev/null && ! grep -q __builtin_prefetch "$old/cuda/ring_read.c" || { echo "the copy still reads ahead"; exit 1; }
(cd "$old" && bun cuda/build.ts --install) > "$out/build-old.log" 2>&1 || { echo "the copy did not build"; tail -5 "$out/build-old.log"; exit 1; }
timeout -k 5 120 bun bench/ring-read.ts "$out/this-as-new" "$old" > "$out/this-as-new.log" 2>&1
(cd "$old" && timeout -k 5 120 bun bench/ring-read.ts "$out/base-as-new" "$OLDPWD") > "$out/base-as-new.log" 2>&1
grep -h "live" "$out/this-as-new/ring-read.md" "$out/base-as-new/ring-read.md"
