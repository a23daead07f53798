"""`make bench`: run every bench/bench_*.py module's main() and print its table.

Each figure is printed beside a baseline measured in the same run (shared, noisy machines: ratios
and medians, never absolute thresholds)."""
import importlib
import pathlib
import sys

HERE = pathlib.Path(__file__).parent


def main(argv: list[str]) -> int:
    names = sorted(p.stem for p in HERE.glob("bench_*.py"))
    wanted = [n for n in names if not argv or any(a in n for a in argv)]
    for name in wanted:
        print(f"== {name[len('bench_'):]} ==", flush=True)
        importlib.import_module(f"bench.{name}").main()
        print(flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
