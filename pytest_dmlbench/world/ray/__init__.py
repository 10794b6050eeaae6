"""Ray worlds (``--dmlbench-launcher ray``): every rank of a world is a Ray actor.

``local`` starts the plugin's local Ray instance (listening on 127.0.0.1 only), ``worker_setup`` is what its
worker processes do first, ``rank`` is the actor that joins the process group and runs cases like a forked
rank, ``world`` is a world of such actors with the forked world's surface and failure contract, and
``engine`` is the plugin's engine.
"""
