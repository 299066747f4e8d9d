"""Jobs files and the tables that go with them, as the GPU Job Scheduler (GPU Job Scheduler) wrote them.

- :mod:`.gjs_line`: its CSV-like line, ``priority,script_path,conda_env,arguments,allowed_gpus``
- :mod:`.detect`: which format a file is in (the GPU Job Scheduler's, or berth's own ``[options] command``)
- :mod:`.requirements`: its ``llm_config.json``: an argument's value (``--llm NAME``) -> GPUs
- :mod:`.checks`: what would only fail later (a missing conda env, script or program), found
  at submit

Client side only (the CLI reads the user's files, with the user's environment); the daemon
receives ordinary job specs.
"""
