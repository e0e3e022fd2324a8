"""A tiny module with a bug for the example's agents to find and fix."""


def add(a, b):
    return a - b


def mean(values):
    return sum(values) / len(values)
