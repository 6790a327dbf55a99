#!/usr/bin/env python3
"""Checks that a PNG file is an image with content (the lit tests' check
of plot_run.py's figures).

    check_png.py FILE.png [--min-width W] [--min-height H]

Reads it with matplotlib and prints `FILE: PNG W x H, N distinct colours`;
exit status 1, with the reason, when it is not a PNG, is smaller than
asked or is one flat colour.
"""
import argparse
import sys

import numpy as np


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("png")
    parser.add_argument("--min-width", type=int, default=200)
    parser.add_argument("--min-height", type=int, default=200)
    args = parser.parse_args()
    try:
        with open(args.png, "rb") as f:
            head = f.read(8)
    except OSError as e:
        sys.exit(f"{args.png}: cannot read: {e.strerror}")
    if head != b"\x89PNG\r\n\x1a\n":
        sys.exit(f"{args.png}: not a PNG file")
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.image as mpimg
    image = mpimg.imread(args.png)
    height, width = image.shape[:2]
    colours = len(np.unique(image.reshape(-1, image.shape[-1]), axis=0))
    print(f"{args.png}: PNG {width} x {height}, {colours} distinct colours")
    if width < args.min_width or height < args.min_height:
        sys.exit(f"{args.png}: {width} x {height}, smaller than "
                 f"{args.min_width} x {args.min_height}")
    if colours < 2:
        sys.exit(f"{args.png}: one flat colour")
    return 0


if __name__ == "__main__":
    sys.exit(main())
