"""Choosing GPUs, pure: what a caller asks of them (``filters.py``), the choice and its order
(``choose.py``), why a GPU is left out (``reasons.py``) and the host's outside-use rule
(``outside.py``). No I/O, no clock; ``claims/``, ``api/`` and the daemon build on it.

Import-free, so that importing one of its modules loads only that module. (The package is
not named ``select``: ``import berth.select...`` would set the attribute ``berth.select`` to
the package, hiding the public function ``berth.select()``.)
"""
