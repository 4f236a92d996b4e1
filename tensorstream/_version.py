"""The package's version, in a module of its own: the command line and the package both read
it from here, so that no module imports the package's ``__init__`` (the top of the layers)."""

__version__ = "0.1.0"
