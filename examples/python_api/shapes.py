"""A module of the example's workspace: functions from it are pickled by reference and imported on the
node from the shipped workspace."""


class TooLarge(ValueError):
    """Raised on a node, caught on the workstation as this very class."""


def area(side):
    if side > 100:
        raise TooLarge("a side of %d is more than 100" % side)
    return side * side
