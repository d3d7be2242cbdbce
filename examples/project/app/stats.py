"""Summaries of a list of numbers, shown as a table with the third-party `tabulate` package."""
import statistics

from tabulate import tabulate


def summary(values):
    return {
        "count": len(values),
        "mean": statistics.fmean(values),
        "median": statistics.median(values),
        "stdev": statistics.pstdev(values),
    }


def table(rows):
    return tabulate(rows, headers="keys", floatfmt=".3f")
