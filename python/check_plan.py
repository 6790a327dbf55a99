"""Checks a plan.json written by --pp-compile / --pp-plan-report.

Prints the plan as a table (stage, device kind, ops, conv layers, predicted
forward and backward time, peak memory of the device and its capacity) and
checks that every device's predicted peak memory fits it; with --fastest
KIND, also that the stage on that device kind holds strictly more
convolution / matmul layers than any other stage. Exits non-zero otherwise.
"""
import argparse
import json
import sys


def layers(ops):
    return sum(any(k in op for k in ("Conv", "Gemm", "MatMul")) for op in ops)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("plan")
    parser.add_argument("--fastest", help="device kind expected to get most")
    args = parser.parse_args()
    plan = json.load(open(args.plan))
    devices = plan["devices"]
    print(f"{'stage':>5} {'device':<12} {'kind':<8} {'ops':>4} {'layers':>6} "
          f"{'fwd ms':>8} {'bwd ms':>8} {'peak MB':>9} {'of MB':>9}")
    failures = []
    for stage in plan["stages"]:
        device = devices[stage["device"]]
        print(f"{stage['stage']:>5} {device['name']:<12} {device['kind']:<8} "
              f"{len(stage['ops']):>4} {layers(stage['ops']):>6} "
              f"{stage['forward_seconds'] * 1e3:>8.3f} "
              f"{stage['backward_seconds'] * 1e3:>8.3f} "
              f"{device['peak_memory_bytes'] / 1e6:>9.1f} "
              f"{device['memory_bytes'] / 1e6:>9.1f}")
    for device in devices:
        if device["peak_memory_bytes"] > device["memory_bytes"]:
            failures.append(f"{device['name']} needs "
                            f"{device['peak_memory_bytes']} of "
                            f"{device['memory_bytes']} bytes")
    print("every device fits" if not failures else "MEMORY EXCEEDED")
    if args.fastest:
        counts = [(layers(s["ops"]), devices[s["device"]]["kind"])
                  for s in plan["stages"]]
        fast = max((c for c, k in counts if k == args.fastest), default=-1)
        others = max((c for c, k in counts if k != args.fastest), default=-1)
        if fast > others:
            print(f"{args.fastest} holds the most layers: {fast} > {others}")
        else:
            failures.append(f"{args.fastest} holds {fast} layers, "
                            f"another stage {others}")
    for failure in failures:
        print("FAIL", failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
