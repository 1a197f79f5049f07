"""The error every pipeline step raises for bad input."""


class InputError(Exception):
    """Bad input: a one-line message naming the file, column or row at fault."""
