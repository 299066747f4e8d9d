"""What the client and the daemon share, and nothing else: the wire between them.

- :mod:`berth.wire.protocol`: framing, the handshake, typed requests, error codes;
- :mod:`berth.wire.paths`: where a daemon's socket and state live;
- :mod:`berth.wire.ptyframes`: what an attached terminal sends to a ``--pty`` job's relay;
- :mod:`berth.wire.env`: the job's environment as captured at submit (``--export``), how its
  setup runs (``--env-setup``, ``--conda``), which ``sendmail`` its ``PATH`` finds;
- :mod:`berth.wire.inject`: the job's GPU ids in its command (``--inject-arg``, ``{gpus}``);
- :mod:`berth.wire.jobspec`: the job itself (:class:`~berth.wire.jobspec.JobSpec`), from the
  CLI to the launcher, and its one validator; :mod:`berth.wire.checks`: the exact-type checks
  it shares with the daemon's other requests; :mod:`berth.wire.arrays`: ``--array 0-9%2``.

Each module is small and imports only the standard library (and ``berth.errors`` and
``berth.units``, below every layer), so the CLI (``berth submit``, ``berth queue``...)
reaches a daemon without importing the daemon; ``berth/cli`` and ``berth/client.py`` import :mod:`berth.wire`, never :mod:`berth.daemon`
(except ``berth daemon`` itself, which starts one).
"""
