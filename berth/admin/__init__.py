"""The admin's tools for the system daemon, below the CLI and the daemon that both use them:
what `berth admin install` writes (:mod:`berth.admin.install`, from the unit and tmpfiles rule
shipped in ``files/``), the host's readiness checks of `berth admin doctor` and of the
daemon's start (:mod:`berth.admin.checks`), and consistent copies of the state database
(:mod:`berth.admin.backup`: `berth admin backup`/`restore`, and the copy the daemon makes
before it migrates its schema)."""
