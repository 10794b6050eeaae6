"""Studies: the scripts that measured the figures in docs/evidence/, run as ``python -m studies.<name>``."""
