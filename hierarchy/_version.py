"""The distribution's version (one distribution, ``dapp``, holds the three packages)."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("dapp")
except PackageNotFoundError:  # a source tree that was never installed
    __version__ = "0+unknown"
