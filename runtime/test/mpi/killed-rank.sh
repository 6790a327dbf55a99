#!/bin/sh
# Runs pp-rt-mpi-check on 3 ranks with rank 1 killing itself (SIGKILL) after
# the first messages. Passes when mpirun stops the whole job with a non-zero
# status within 30 s and names the lost rank.
check=$1; shift
out=$(mktemp)
start=$(date +%s)
timeout 60 "$@" -np 3 "$check" --kill-rank 1 >"$out" 2>&1
status=$?
elapsed=$(( $(date +%s) - start ))
cat "$out"
if [ "$status" -eq 0 ]; then echo "FAIL: the job exited 0"; exit 1; fi
if [ "$status" -eq 124 ]; then echo "FAIL: the job hung"; exit 1; fi
if [ "$elapsed" -gt 30 ]; then echo "FAIL: took ${elapsed}s"; exit 1; fi
if ! grep -q "rank 1" "$out"; then echo "FAIL: no mention of rank 1"; exit 1; fi
echo "PASS: stopped with status $status after ${elapsed}s"
rm -f "$out"
