"""The daemon's web face: a live dashboard and Prometheus metrics (``berth daemon --http``).

Off by default, bound to the loopback by default, served on the daemon's own event loop.
The pieces, each one idea:

- ``httpio.py``: HTTP/1.1 requests in, responses out, with strict limits (head and body size,
  timeouts); no routing, no state.
- ``server.py``: the listening socket, connection caps, routing, server-sent events.
- ``routes.py``: what each route answers; reads go through the same handlers as the UNIX
  socket (:data:`berth.daemon.requests.server.HANDLERS`), so do actions, as the token's user.
- ``auth.py``: per-user tokens (an HMAC of the uid and when it was made, with a secret kept
  0600 in the state dir), handed out by ``berth web-token`` over the UNIX socket, which knows
  the caller's uid (the daemon's start-up registers :func:`berth.web.auth.token_handler` with
  its socket server); they expire, and ``berth web-token --revoke`` revokes a user's.
- ``bind.py``: where it listens (the system daemon: port 865), and the retries of a port
  another process holds (the queue runs meanwhile).
- ``observe.py``: what the charts and histograms need: job starts and ends (seen as they are
  committed), wait times, dispatch gaps, outcomes, and samples of the GPUs and the queue,
  one a minute kept 24 h in the daemon's store.
- ``view.py``: the dashboard's picture of the daemon (GPUs, holders, queue, users).
- ``metrics.py``: the same in the Prometheus text format (DCGM exporter names per GPU);
  ``dcgm.py``: the DCGM exporter's further readings (clocks, energy, XIDs...), the UUID a lost
  GPU had, memory per holder.
- ``static/``: one HTML page, its script and style; no build step, no CDN.

See docs/web.md.
"""
