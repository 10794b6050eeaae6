"""Launched worlds: cases under an external launcher (``torchrun``, ``horovodrun``, multi-node), where every
rank is a pytest process the launcher started.

``engine`` is the plugin's engine for them; ``horovodrun`` maps ``horovodrun``'s variables (Gloo mode) onto
``torch.distributed``'s.
"""
