#!/usr/bin/env bash
# Every benchmark bar of the issues, in one run on a GPU machine, against CuPy
# (CUB) in the same process per line. Writes JSON per group to ${OUT:-.}.
#   bash tools/bench_bars.sh [group ...]
# groups: sort wide argsort counting merge (default), and calls auto batched host
# (calls: per-call latency and the fresh-cache loop; auto: auto against every
# plugin at 2^10..2^24 with an empty cache; batched: rows and ragged; host:
# NumPy arrays in core and out of core), and the key-value and narrow-key
# bars against cuda.compute's prepared sorters (--peers; each cell checked
# before it is timed, a closing "cells" table of auto against our best and
# CUB): kv32 (sort_by_key with int32 and int64 values, argsort, 32-bit keys,
# 2^16-2^24), kv32big (the same at 2^28, uint32), kvint32 (argsort with int32
# indices against CUB's pair sort of int32 positions), kv64 (64-bit keys,
# 2^20-2^26), narrow (8- and 16-bit keys, 2^20-2^28). Each group starts from
# an empty cache.
set -u
out=${OUT:-.}
bench() { name=$1; shift; python3 -m cudasortkit.cli.bench --json "$out/bench-$name.json" "$@" 2>&1 | sed -n '/^op /,$p'; }
fresh() { CUDASORTKIT_CACHE_DIR=$(mktemp -d) "$@"; }
groups=${*:-sort wide argsort counting merge}
for g in $groups; do
  case $g in
    sort)     bench sort --algorithms onesweep,radix,merge_sort,bitonic --dtypes uint32,float32 --sizes 2^20,2^24,2^28 --repeats 7 ;;
    wide)     bench wide --algorithms onesweep,radix,bitonic --dtypes uint64,float64 --sizes 2^26 --repeats 7 ;;
    argsort)  bench argsort --algorithms onesweep,radix,merge_sort,counting --ops argsort --dtypes uint32,uint16 --sizes 2^24 ;;
    counting) bench counting --algorithms counting,onesweep,radix --dtypes uint8,uint16 --sizes 2^26
              bench counting-range --algorithms counting,onesweep,radix --dtypes int32 --sizes 2^26 --dist range:0:1000 ;;
    merge)    bench merge --ops merge --dtypes uint32 --sizes 2^24 ;;
    calls)    fresh python3 -m cudasortkit.cli.bench --cold --latency 2>&1 | tee "$out/bench-calls.txt" ;;
    auto)     fresh bench auto --algorithms auto,onesweep,radix,merge_sort,bitonic --dtypes uint32,float32 \
                --sizes 2^10,2^12,2^14,2^16,2^18,2^20,2^22,2^24 ;;
    batched)  fresh python3 -m cudasortkit.cli.bench --batched 2>&1 | tee "$out/bench-batched.txt" ;;
    host)     fresh python3 -m cudasortkit.cli.bench --host 2>&1 | tee "$out/bench-host.txt" ;;
    kv32)     fresh bench kv32 --peers --no-calls --algorithms auto,onesweep --ops pairs,argsort \
                --dtypes uint32,float32 --sizes 2^16,2^20,2^24 --value-dtypes int32,int64 ;;
    kv32big)  fresh bench kv32big --peers --no-calls --algorithms auto,onesweep --ops pairs,argsort \
                --dtypes uint32 --sizes 2^28 --value-dtypes int32,int64 ;;
    kvint32)  fresh bench kvint32 --peers --no-calls --algorithms auto,onesweep --ops argsort \
                --index-dtype int32 --dtypes uint32,float32 --sizes 2^16,2^20,2^24 ;;
    kv64)     fresh bench kv64 --peers --no-calls --algorithms auto,onesweep,msd_local \
                --ops pairs,argsort --dtypes uint64,float64 --sizes 2^20,2^24,2^26 \
                --value-dtypes int32,int64 ;;
    narrow)   fresh bench narrow --peers --no-calls --algorithms auto,onesweep,counting \
                --dtypes uint8,int8,uint16,int16 --sizes 2^20,2^24,2^26,2^28 ;;
  esac
done
